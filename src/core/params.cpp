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

// Why each range (docs/limits.md, "Parameter ranges").
#define MHC_WHY_DIVISOR                                                                   \
  "added under an fp32 rsqrt or division: at least the smallest normal fp32, so that an " \
  "all-zero row gives 0, not 0 * inf = NaN; at most 1e30, so that the sum stays finite"
constexpr const char* kWhyDivisor = MHC_WHY_DIVISOR;
constexpr const char* kWhyPre =
    "added to a sigmoid in [0, 1]: 0 is allowed (no division); at most 1e30 keeps pre finite";
constexpr const char* kWhyPostMult =
    "scales a sigmoid in [0, 1]: at most 1e30 in magnitude keeps post finite";

const std::vector<ParamRange> kRanges = {
    {"rms_eps", kMinDivisorEps, kMaxParamMagnitude, kWhyDivisor},
    {"pre_eps", 0.0, kMaxParamMagnitude, kWhyPre},
    {"sinkhorn_eps", kMinDivisorEps, kMaxParamMagnitude, kWhyDivisor},
    {"norm_eps", kMinDivisorEps, kMaxParamMagnitude, kWhyDivisor},
    {"post_mult", -kMaxParamMagnitude, kMaxParamMagnitude, kWhyPostMult},
    // The shared values stand for two epsilons each: the stricter range of the two.
    {"eps_h", kMinDivisorEps, kMaxParamMagnitude,
     "pre_eps and sinkhorn_eps unless they are set apart; as sinkhorn_eps, " MHC_WHY_DIVISOR},
    {"eps_n", kMinDivisorEps, kMaxParamMagnitude,
     "rms_eps and norm_eps unless they are set apart, " MHC_WHY_DIVISOR},
};
#undef MHC_WHY_DIVISOR

// "" when `value` lies in the range of parameter `range`, else a message naming `name` (the
// parameter as the caller knows it: eps_h where it stands for sinkhorn_eps).
std::string problem(std::string_view name, std::string_view range, double value);

}  // namespace

const std::vector<ParamRange>& param_ranges() { return kRanges; }

const ParamRange& param_range(std::string_view name) {
  for (const ParamRange& r : kRanges) {
    if (name == r.name) return r;
  }
  throw Error(fmt::format("no range for an unknown parameter '{}'", name));
}

namespace {

std::string problem(std::string_view name, std::string_view range, double value) {
  const ParamRange& r = param_range(range);
  if (value >= r.lo && value <= r.hi) return {};  // false for NaN
  const std::string as =
      name == range ? "" : fmt::format(" (the range of {}, which it is here)", range);
  return fmt::format("{}={} is outside [{:g}, {:g}]{}: {}", name, value, r.lo, r.hi, as, r.why);
}

// Throws problem()'s message where `value` lies outside `range`, else returns at once.
void check_range(const char* name, const ParamRange& range, double value) {
  if (value >= range.lo && value <= range.hi) return;  // false for NaN
  throw Error(problem(name, range.name, value));
}

}  // namespace

std::string param_problem(std::string_view name, double value) {
  return problem(name, name, value);
}

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
  if (p.layers > kMaxLayers) fail(fmt::format("layers={} is larger than {}", p.layers, kMaxLayers));
  if (p.sinkhorn_iters < 1)
    fail(fmt::format("sinkhorn_iters={} must be at least 1", p.sinkhorn_iters));
  if (p.sinkhorn_iters > kMaxSinkhornIters) {
    fail(
        fmt::format("sinkhorn_iters={} must be at most {} (V4.1 uses 20; 2^31 would run for hours)",
                    p.sinkhorn_iters, kMaxSinkhornIters));
  }
  // Each epsilon as it is used, named as the caller set it: the separate value when set, else
  // the shared one (checked against the range of the epsilon it stands for). The ranges are
  // looked up once: validate runs several times in every op call (Ops, the workspace layout).
  static const ParamRange& rms = param_range("rms_eps");
  static const ParamRange& pre = param_range("pre_eps");
  static const ParamRange& sinkhorn = param_range("sinkhorn_eps");
  static const ParamRange& norm = param_range("norm_eps");
  static const ParamRange& post_mult = param_range("post_mult");
  check_range(p.rms_eps_override ? "rms_eps" : "eps_n", rms, p.rms_eps());
  check_range(p.pre_eps_override ? "pre_eps" : "eps_h", pre, p.pre_eps());
  check_range(p.sinkhorn_eps_override ? "sinkhorn_eps" : "eps_h", sinkhorn, p.sinkhorn_eps());
  check_range(p.norm_eps_override ? "norm_eps" : "eps_n", norm, p.norm_eps());
  check_range("post_mult", post_mult, p.post_mult);
}

std::string describe(const MhcParams& p) {
  std::string text = fmt::format(
      "C={} n={} K={} NMIX={} layers={} sinkhorn_iters={} eps_h={:g} eps_n={:g} post_mult={:g}",
      p.hidden, p.n, p.k(), p.nmix(), p.layers, p.sinkhorn_iters, p.eps_h, p.eps_n, p.post_mult);
  for (const auto& [name, value] :
       {std::pair{"rms_eps", p.rms_eps_override}, std::pair{"pre_eps", p.pre_eps_override},
        std::pair{"sinkhorn_eps", p.sinkhorn_eps_override},
        std::pair{"norm_eps", p.norm_eps_override}}) {
    if (value) text += fmt::format(" {}={:g}", name, *value);
  }
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
