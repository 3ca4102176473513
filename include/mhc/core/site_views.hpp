// Host-side views of one mHC site's parameters, inputs and outputs (layouts of the design doc).
//
//   x            [M, n, C]      bf16   residual streams; flattened row v = x[m] has length K = n*C
//   pre_mix      [M, n]         f32    collapse weights carried from the previous site
//   hc_fn        [NMIX, K]      f32    projection; NMIX = n*(n+2), rows: pre(n), post(n), comb(n*n)
//   hc_base      [NMIX]         f32
//   hc_scale     [3]            f32    scales of the pre, post and comb logits
//   norm_weight  [C]            f32    the sublayer's RMSNorm weight
//   sublayer_out [M, C]         bf16   F = sublayer(layer_input)
//   layer_input  [M, C]         bf16
//   pre, post    [M, n]         f32
//   comb         [M, n, n]      f32    comb[m][j][k]: row j is the source stream
//   x_next       [M, n, C]      bf16
#pragma once
#include <cstdint>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"

namespace mhc {

struct SiteWeightsView {
  const float* hc_fn = nullptr;
  const float* hc_base = nullptr;
  const float* hc_scale = nullptr;
  const float* norm_weight = nullptr;
};

// Owning host copy of one site's weights.
struct SiteWeights {
  std::vector<float> hc_fn, hc_base, hc_scale, norm_weight;
  SiteWeightsView view() const {
    return {hc_fn.data(), hc_base.data(), hc_scale.data(), norm_weight.data()};
  }
};

struct SiteInputsView {
  int64_t tokens = 0;
  const Bf16* x = nullptr;
  const float* pre_mix = nullptr;
  const Bf16* sublayer_out = nullptr;
};

struct SiteOutputsView {
  Bf16* layer_input = nullptr;
  float* pre = nullptr;
  float* post = nullptr;
  float* comb = nullptr;
  Bf16* x_next = nullptr;
};

// Owning host buffers for one site's outputs, sized for `tokens`.
struct SiteOutputs {
  std::vector<Bf16> layer_input, x_next;
  std::vector<float> pre, post, comb;
  SiteOutputs() = default;
  SiteOutputs(const MhcParams& p, int64_t tokens)
      : layer_input(size_t(tokens * p.hidden)),
        x_next(size_t(tokens * p.k())),
        pre(size_t(tokens * p.n)),
        post(size_t(tokens * p.n)),
        comb(size_t(tokens * p.n * p.n)) {}
  SiteOutputsView view() {
    return {layer_input.data(), pre.data(), post.data(), comb.data(), x_next.data()};
  }
};

}  // namespace mhc
