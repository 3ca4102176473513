// The per-token "stats" stage of the coefficient path: from the reduced dot products and the sum
// of squares to mixes, pre, post and the Sinkhorn-normalised comb (design doc, step 2).
//
// n lanes per token, lane j holding row j of the n x n Sinkhorn matrix in registers: the row pass
// is in-lane, the column pass is a butterfly over the token's n lanes. Nothing is indexed at run
// time, so nothing goes to local memory.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

struct CoefficientParams {
  const float* hc_base = nullptr;   // [NMIX]
  const float* hc_scale = nullptr;  // [3]
  float eps_h = 1e-6f;
  float eps_n = 1e-20f;
  float post_mult = 2.f;
  int sinkhorn_iters = 20;
  float inv_k = 0.f;  // 1 / K
};

struct CoefficientOutputs {
  float* pre = nullptr;    // [M, n]
  float* post = nullptr;   // [M, n]
  float* comb = nullptr;   // [M, n, n]
  float* mixes = nullptr;  // [M, NMIX] or null
};

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// Lane j (= lane % kStreams) of a token's group turns `sums` (NMIX dot products, then the sum of
// squares) into its share of the outputs. All 32 lanes of the warp must call it (shuffles);
// `store` false computes on whatever is in `sums` and writes nothing.
template <int kStreams>
__device__ __forceinline__ void token_coefficients(const float* sums, bool store, int64_t token,
                                                   const CoefficientParams& cp,
                                                   const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  const int j = threadIdx.x % n;
  const float r = 1.f / sqrtf(sums[kNmix] * cp.inv_k + cp.eps_n);
  const float scale_pre = cp.hc_scale[0], scale_post = cp.hc_scale[1], scale_comb = cp.hc_scale[2];

  const float mix_pre = sums[j] * r;
  const float mix_post = sums[n + j] * r;
  const float pre = sigmoid(mix_pre * scale_pre + cp.hc_base[j]) + cp.eps_h;
  const float post = cp.post_mult * sigmoid(mix_post * scale_post + cp.hc_base[n + j]);

  float mix_comb[n];
  float p[n];
  float row_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    mix_comb[k] = sums[2 * n + j * n + k] * r;
    p[k] = mix_comb[k] * scale_comb + cp.hc_base[2 * n + j * n + k];
    row_max = fmaxf(row_max, p[k]);
  }
  // Softmax of the row (the first row normalisation), then + eps_h.
  float row_total = 0.f;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    p[k] = expf(p[k] - row_max);
    row_total += p[k];
  }
#pragma unroll
  for (int k = 0; k < n; ++k) p[k] = p[k] / row_total + cp.eps_h;

  auto column_pass = [&] {
#pragma unroll
    for (int k = 0; k < n; ++k) p[k] = p[k] / (group_sum<n>(p[k]) + cp.eps_h);
  };
  column_pass();
  for (int it = 1; it < cp.sinkhorn_iters; ++it) {
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < n; ++k) total += p[k];
    const float denom = total + cp.eps_h;
#pragma unroll
    for (int k = 0; k < n; ++k) p[k] = p[k] / denom;
    column_pass();
  }

  if (!store) return;
  out.pre[token * n + j] = pre;
  out.post[token * n + j] = post;
#pragma unroll
  for (int k = 0; k < n; ++k) out.comb[(token * n + j) * n + k] = p[k];
  if (out.mixes != nullptr) {
    float* mixes = out.mixes + token * kNmix;
    mixes[j] = mix_pre;
    mixes[n + j] = mix_post;
#pragma unroll
    for (int k = 0; k < n; ++k) mixes[2 * n + j * n + k] = mix_comb[k];
  }
}

}  // namespace mhc::cuda
