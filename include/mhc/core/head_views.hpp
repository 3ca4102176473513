// Host-side views of the head collapse (hc_head, docs/head.md): after the last site the n streams
// are collapsed once more, with weights computed from the streams themselves (no Sinkhorn), into
// what the model's final RMSNorm and then the LM head read.
//
//   x            [M, n, C]  bf16   the streams after the last site
//   hc_fn        [n, K]     f32    K = n*C (checkpoints: hc_head_fn, model.hc_head.hc_fn)
//   hc_base      [n]        f32    (hc_head_base, model.hc_head.hc_base)
//   hc_scale     [1]        f32    (hc_head_scale, model.hc_head.hc_scale)
//   norm_weight  [C]        f32    the final RMSNorm's weight (norm.weight); null: no norm
//   weights      [M, n]     f32    the collapse weights (an optional output)
//   out          [M, C]     bf16
//
// With MhcParams' epsilons: rms_eps() in the projection's RMS, pre_eps() (hc_eps) added to the
// sigmoid, norm_eps() in the final norm.
#pragma once
#include <cstdint>
#include <vector>

#include "mhc/core/params.hpp"

namespace mhc {

struct HeadWeightsView {
  const float* hc_fn = nullptr;
  const float* hc_base = nullptr;
  const float* hc_scale = nullptr;
  const float* norm_weight = nullptr;  // null: the collapse alone
};

// Owning host copy of the head's weights (the final norm's weight kept apart, in ModelWeights).
struct HeadWeights {
  std::vector<float> hc_fn, hc_base, hc_scale;
  HeadWeightsView view(const float* norm_weight = nullptr) const {
    return {hc_fn.data(), hc_base.data(), hc_scale.data(), norm_weight};
  }
  bool empty() const { return hc_fn.empty(); }
};

// Element counts of the head's tensors for `p`.
inline int64_t head_fn_count(const MhcParams& p) { return int64_t(p.n) * p.k(); }
inline int head_base_count(const MhcParams& p) { return p.n; }
inline constexpr int kHeadScaleCount = 1;

}  // namespace mhc
