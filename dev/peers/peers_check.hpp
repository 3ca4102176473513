// The checks of the side-by-side benchmark: every implementation's outputs against mhc's float64
// reference (mhc/cpu/reference.hpp) on the same inputs, computed over all tokens (threads over
// token ranges), with the design's tolerances (norm-wise relative error: coefficients 2e-3 under
// the TF32 projection, bf16 outputs 8e-3; NaN never passes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace peers {

inline constexpr double kCoefTol = 2e-3;  // pre, post, comb (TF32 projection)
inline constexpr double kBf16Tol = 8e-3;  // layer_input, x_next

struct Error {
  double rel = 0;                                   // |out - ref| / |ref|, norm-wise
  double max_abs = 0;                               // largest element error
  bool ok(double tol) const { return rel <= tol; }  // false for NaN
};

Error compare(const std::vector<double>& ref, const float* out, size_t count);
Error compare(const std::vector<double>& ref, const mhc::Bf16* out, size_t count);

// The float64 reference's coefficients of x [T, n, C] (pre, post, comb; mixes left empty).
struct RefCoefficients {
  std::vector<double> pre, post, comb;
};
RefCoefficients ref_coefficients(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                                 const mhc::SiteWeightsView& w);
// layer_input: collapse of x with weights mix [T, n] (fp32 as stored), normed with norm_weight
// unless it is null (then the plain collapse).
std::vector<double> ref_input_path(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                                   const float* mix, const float* norm_weight);
// x_next from x, F, post [T, n] and comb [T, n, n] (row = source stream) as stored in fp32.
std::vector<double> ref_post(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                             const float* post, const float* comb, const mhc::Bf16* f);

// One named comparison and whether it passed, for the report.
struct Verdict {
  std::vector<std::string> failures;  // "comb rel 3.1e-01 > 2e-03", ...
  std::vector<std::pair<std::string, Error>> errors;
  void add(const std::string& what, const Error& e, double tol);
  bool ok() const { return failures.empty(); }
  std::string text() const;  // "ok" or the failures joined
};

}  // namespace peers
