// Model shapes and constants (design doc, "Shapes and constants"), and the named presets.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mhc {

// The shape limits validate() enforces on every backend (the CUDA kernels add their own).
inline constexpr int kMaxStreams = 8;       // n in 1..kMaxStreams
inline constexpr int kHiddenMultiple = 8;   // C a positive multiple of this
inline constexpr int kMaxHidden = 1 << 20;  // C at most this
inline constexpr int kMaxLayers = 1 << 20;  // layers at most this: sites() and counts stay ints
// Sinkhorn iterations T (V4.1 uses 20): more is a corrupt value, and 2^31 would run for hours.
inline constexpr int kMaxSinkhornIters = 1000;

// The real-valued parameters feed fp32 arithmetic (docs/limits.md, "Parameter ranges"). At most
// this in magnitude: below 2^103, half an ulp of the largest fp32, so adding it to any finite fp32
// value never overflows, and its product with a coefficient in [0, 1] is finite.
inline constexpr double kMaxParamMagnitude = 1e30;
// At least this where the epsilon is the only thing keeping a denominator (or an rsqrt's argument)
// away from 0: the smallest normal fp32, 2^-126. Smaller values round to 0 in fp32 or flush to 0
// on the GPU, and an all-zero row then gives 0 * inf = NaN.
inline constexpr double kMinDivisorEps = 0x1p-126;

// The closed range of one real-valued parameter and why.
struct ParamRange {
  const char* name;
  double lo, hi;
  const char* why;
};
// rms_eps, pre_eps, sinkhorn_eps, norm_eps, post_mult, and the shared eps_h and eps_n (the range
// of the strictest parameter each stands for).
const std::vector<ParamRange>& param_ranges();
// The range of `name` (one of param_ranges()); throws mhc::Error for an unknown name.
const ParamRange& param_range(std::string_view name);
// "" when `value` lies in the range of `name`, else "NAME=VALUE is outside [LO, HI]: WHY".
std::string param_problem(std::string_view name, double value);

struct MhcParams {
  int hidden = 5120;        // C
  int n = 4;                // residual streams (hc_mult)
  int layers = 40;          // decoder layers; each has two mHC sites (attention, FFN)
  int sinkhorn_iters = 20;  // T
  double eps_h = 1e-6;      // hc_eps
  double eps_n = 1e-20;     // RMS eps of the mHC norm and the sublayer norm
  double post_mult = 2.0;   // scale of the post sigmoid
  // The four epsilons separately, as engines have them. Unset, each takes the shared value above
  // (the presets' semantics: eps_h == pre_eps == sinkhorn_eps, eps_n == rms_eps == norm_eps).
  std::optional<double> rms_eps_override;       // RMS of the flattened streams (the projection)
  std::optional<double> pre_eps_override;       // added to the pre sigmoid
  std::optional<double> sinkhorn_eps_override;  // the Sinkhorn's row/column sums and first pass
  std::optional<double> norm_eps_override;      // the sublayer RMSNorm of layer_input

  double rms_eps() const { return rms_eps_override.value_or(eps_n); }
  double pre_eps() const { return pre_eps_override.value_or(eps_h); }
  double sinkhorn_eps() const { return sinkhorn_eps_override.value_or(eps_h); }
  double norm_eps() const { return norm_eps_override.value_or(eps_n); }

  int nmix() const { return n * (n + 2); }           // coefficients per token
  int64_t k() const { return int64_t(n) * hidden; }  // flattened stream width
  int sites() const { return 2 * layers; }
};

// Throws mhc::Error naming the first impossible field (C <= 0, n < 1, sinkhorn_iters < 1, ...) or
// the first parameter outside its range (param_ranges: an epsilon, post_mult), with the range.
// Allocates nothing when the parameters are valid.
void validate(const MhcParams& p);

// A one-line description, e.g.
// "C=5120 n=4 K=20480 NMIX=24 layers=40 sinkhorn_iters=20 eps_h=1e-06 eps_n=1e-20 post_mult=2",
// followed by the separate epsilons that are set (" rms_eps=1e-06 ...").
std::string describe(const MhcParams& p);

// Named presets: dsv41-flash (default), dsv4-flash, dsv4-pro. Throws mhc::Error listing the
// known names when `name` is unknown.
MhcParams preset(std::string_view name);
std::vector<std::string> preset_names();
inline constexpr std::string_view kDefaultPreset = "dsv41-flash";

}  // namespace mhc
