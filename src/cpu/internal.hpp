// Helpers shared by the files of src/cpu (not part of the public interface).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"

namespace mhc::cpu::detail {

// Runs fn(begin, end) on contiguous ranges covering [0, count), on up to cpu::threads() threads,
// but only when count * cost_per_item is large enough to pay for starting them. Callers keep each
// item independent, so results do not depend on the split.
void parallel_for(int64_t count, int64_t cost_per_item,
                  const std::function<void(int64_t, int64_t)>& fn);

// fp32 dot product with a fixed summation order (16 lanes, then a fixed tree).
float dot(const float* a, const float* b, int64_t length);

// The fp32 collapse + norm shared by the input path and the final collapse. norm_weight == null
// gives the plain collapse bf16(sum_j pre_mix[j] * x[j]).
void collapse_norm(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                   const float* norm_weight, Bf16* out);

}  // namespace mhc::cpu::detail

namespace mhc::ref::detail {

// The float64 collapse + norm with a double pre_mix (the reference stack carries pre in double).
// y is rounded to bf16 as the model stores it; the result is unrounded. norm_weight == null gives
// the plain collapse: y itself, unrounded like every reference output.
std::vector<double> collapse_norm(const MhcParams& p, int64_t tokens, const Bf16* x,
                                  const double* pre_mix, const float* norm_weight);

}  // namespace mhc::ref::detail
