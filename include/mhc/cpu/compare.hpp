// Error of an output against the float64 reference: norm-wise relative error
// ||out - ref|| / ||ref|| and the largest element error over the largest |ref|.
// Any NaN or Inf in `out` makes the comparison fail whatever the tolerance.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "mhc/core/bf16.hpp"

namespace mhc {

struct ErrorStats {
  double rel_norm = 0;           // ||out - ref||_2 / ||ref||_2 (0 when both are empty)
  double max_abs_rel = 0;        // max |out - ref| / max |ref|
  int64_t nonfinite = 0;         // NaN or Inf elements in out
  int64_t first_nonfinite = -1;  // flat index of the first of them, -1 when none
  int64_t count = 0;
  bool passes(double tol) const { return nonfinite == 0 && rel_norm <= tol && max_abs_rel <= tol; }
  std::string describe() const;
};

ErrorStats compare(const float* out, const double* ref, int64_t count);
ErrorStats compare(const Bf16* out, const double* ref, int64_t count);

// Tolerances of the design doc ("Numerics").
struct Tolerances {
  double coefficients;  // mixes, pre, post, comb
  double activations;   // layer_input, x_next (bf16)
};
inline constexpr Tolerances kTf32Tolerances{2e-3, 8e-3};
inline constexpr Tolerances kFp32Tolerances{5e-5, 8e-3};

// Bounds for a whole stack against the float64 reference. Once two implementations differ in one
// bf16 rounding of x, their later roundings decorrelate and the difference grows like a random
// walk of bf16 rounding noise, about sqrt(sites) times the per-site rounding. The x bound is one
// flipped bf16 ulp (2^-7 relative) plus that growth, about twice the worst measured over seeds
// (docs/numerics.md); pre and the final output inherit the streams' error.
inline double stack_x_tolerance(int layers_done) {
  return std::min(4e-2, 8e-3 + 4e-3 * std::sqrt(2.0 * double(layers_done)));
}
inline constexpr double kStackPreTolerance = 2e-2;
inline constexpr double kStackOutputTolerance = 4e-2;

}  // namespace mhc
