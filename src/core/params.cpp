#include "mhc/core/params.hpp"

#include <fmt/core.h>

#include <cmath>
#include <optional>
#include <utility>

#include "mhc/core/error.hpp"

namespace mhc {

namespace {

struct NamedPreset {
  const char* name;
  MhcParams params;
};

// DeepSeek-V4.1-Flash is the default; the V4 presets keep V4.1's eps_n (the site semantics here
// are V4.1's) and differ in C and the layer count.
const NamedPreset kPresets[] = {
    {"dsv41-flash", MhcParams{5120, 4, 40, 20, 1e-6, 1e-20, 2.0, {}, {}, {}, {}}},
    {"dsv4-flash", MhcParams{4096, 4, 43, 20, 1e-6, 1e-20, 2.0, {}, {}, {}, {}}},
    {"dsv4-pro", MhcParams{7168, 4, 61, 20, 1e-6, 1e-20, 2.0, {}, {}, {}, {}}},
};

// The separate epsilons that are set, with their names.
std::vector<std::pair<const char*, const std::optional<double>*>> separate_epsilons(
    const MhcParams& p) {
  std::vector<std::pair<const char*, const std::optional<double>*>> set;
  for (const auto& entry :
       {std::pair{"rms_eps", &p.rms_eps_override}, std::pair{"pre_eps", &p.pre_eps_override},
        std::pair{"sinkhorn_eps", &p.sinkhorn_eps_override},
        std::pair{"norm_eps", &p.norm_eps_override}}) {
    if (entry.second->has_value()) set.push_back(entry);
  }
  return set;
}

}  // namespace

void validate(const MhcParams& p) {
  auto fail = [](const std::string& what) { throw Error("impossible shape: " + what); };
  if (p.hidden <= 0) fail(fmt::format("hidden size C={} must be positive", p.hidden));
  if (p.hidden % kHiddenMultiple != 0)
    fail(fmt::format("hidden size C={} must be a multiple of {}", p.hidden, kHiddenMultiple));
  if (p.hidden > kMaxHidden)
    fail(fmt::format("hidden size C={} is larger than {}", p.hidden, kMaxHidden));
  if (p.n < 1 || p.n > kMaxStreams)
    fail(fmt::format("streams n={} must be in 1..{}", p.n, kMaxStreams));
  if (p.layers < 1) fail(fmt::format("layers={} must be at least 1", p.layers));
  // Bounded so that sites() = 2 * layers and every per-site count stay far inside an int.
  if (p.layers > (1 << 20)) fail(fmt::format("layers={} is larger than 1048576", p.layers));
  if (p.sinkhorn_iters < 1)
    fail(fmt::format("sinkhorn_iters={} must be at least 1", p.sinkhorn_iters));
  if (!(p.eps_h >= 0) || !std::isfinite(p.eps_h))
    fail(fmt::format("eps_h={} must be finite and >= 0", p.eps_h));
  if (!(p.eps_n >= 0) || !std::isfinite(p.eps_n))
    fail(fmt::format("eps_n={} must be finite and >= 0", p.eps_n));
  if (!std::isfinite(p.post_mult)) fail(fmt::format("post_mult={} must be finite", p.post_mult));
  for (const auto& [name, value] : separate_epsilons(p)) {
    if (!(**value >= 0) || !std::isfinite(**value))
      fail(fmt::format("{}={} must be finite and >= 0", name, **value));
  }
}

std::string describe(const MhcParams& p) {
  std::string text = fmt::format(
      "C={} n={} K={} NMIX={} layers={} T={} eps_h={:g} eps_n={:g} post_mult={:g}", p.hidden, p.n,
      p.k(), p.nmix(), p.layers, p.sinkhorn_iters, p.eps_h, p.eps_n, p.post_mult);
  for (const auto& [name, value] : separate_epsilons(p))
    text += fmt::format(" {}={:g}", name, **value);
  return text;
}

MhcParams preset(std::string_view name) {
  for (const auto& entry : kPresets) {
    if (name == entry.name) return entry.params;
  }
  std::string known;
  for (const auto& entry : kPresets) known += std::string(known.empty() ? "" : ", ") + entry.name;
  throw Error(fmt::format("unknown preset '{}' (known: {})", name, known));
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& entry : kPresets) names.emplace_back(entry.name);
  return names;
}

}  // namespace mhc
