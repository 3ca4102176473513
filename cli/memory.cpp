#include "memory.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "mhc/core/error.hpp"

namespace mhc::cli {
namespace {

std::string human(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string human(const std::optional<uint64_t>& bytes) {
  return bytes ? human(*bytes) : "more than 64-bit sizes can count";
}

// MemAvailable (what can be allocated without swapping), else the physical memory.
std::pair<uint64_t, const char*> available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return {kib * 1024, "available now"};
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return {pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX,
          "of physical memory"};
}

}  // namespace

std::optional<uint64_t> checked_product(std::initializer_list<uint64_t> factors) {
  uint64_t product = 1;
  for (uint64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  return product;
}

std::optional<uint64_t> model_weight_bytes(const MhcParams& p) {
  const uint64_t c = uint64_t(p.hidden), nmix = uint64_t(p.nmix());
  const auto hc_fn = checked_product({nmix, uint64_t(p.n), c});
  uint64_t per_site = 0;  // floats: hc_fn, hc_base, hc_scale, norm weight, stand-in gain
  if (!hc_fn || __builtin_add_overflow(*hc_fn, nmix + 3 + 2 * c, &per_site)) return std::nullopt;
  const auto sites = checked_product({2, uint64_t(p.layers), per_site, sizeof(float)});
  uint64_t total = 0;
  if (!sites || __builtin_add_overflow(*sites, c * sizeof(float), &total)) return std::nullopt;
  return total;
}

void require_host_memory(std::string_view command, const std::vector<MemoryPart>& parts) {
  uint64_t total = 0;
  bool overflow = false;
  std::string list;
  for (const auto& part : parts) {
    list += fmt::format("{}{} {}", list.empty() ? "" : ", ", part.what, human(part.bytes));
    overflow = overflow || !part.bytes || __builtin_add_overflow(total, *part.bytes, &total);
  }
  const auto [available, kind] = available_memory();
  if (!overflow && total <= available) return;
  throw Error(fmt::format("{} needs {} of host memory ({}), but this machine has {} {}", command,
                          overflow ? human(std::nullopt) : "at least " + human(total), list,
                          human(available), kind));
}

}  // namespace mhc::cli
