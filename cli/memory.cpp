#include "memory.hpp"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
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

// The first number in `path` (a /proc or /sys file), if it can be read.
std::optional<uint64_t> number_in(const char* path) {
  std::ifstream in(path);
  uint64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// `key`'s value in /proc/self/status or /proc/meminfo form ("Key:   123 kB"), in bytes.
std::optional<uint64_t> kib_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string k;
    uint64_t kib = 0;
    if (fields >> k >> kib && k == key) return kib * 1024;
  }
  return std::nullopt;
}

// What this process can allocate now: MemAvailable (without swapping; else the physical memory),
// less where a container's memory limit (cgroup v2 or v1, as mounted in its namespace) or an
// address-space limit (ulimit -v) leaves less, so that the check holds where the allocation
// would fail.
std::pair<uint64_t, const char*> available_memory() {
  std::pair<uint64_t, const char*> best{UINT64_MAX, "of physical memory"};
  if (const auto avail = kib_field("/proc/meminfo", "MemAvailable:")) {
    best = {*avail, "available now"};
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) best.first = uint64_t(pages) * uint64_t(page);
  }
  auto consider = [&best](std::optional<uint64_t> limit, std::optional<uint64_t> used,
                          const char* what) {
    if (limit && used && *limit < (uint64_t{1} << 62)) {
      const uint64_t left = *limit > *used ? *limit - *used : 0;
      if (left < best.first) best = {left, what};
    }
  };
  consider(number_in("/sys/fs/cgroup/memory.max"), number_in("/sys/fs/cgroup/memory.current"),
           "left under this container's memory limit");
  consider(number_in("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
           number_in("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
           "left under this container's memory limit");
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    consider(uint64_t(as.rlim_cur), kib_field("/proc/self/status", "VmSize:"),
             "left under the address-space limit (ulimit -v)");
  }
  return best;
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
