// The per-token "stats" stage of the coefficient path: from the reduced dot products and the sum
// of squares to mixes, pre, post and the Sinkhorn-normalised comb (design doc, step 2).
//
// One thread per token holds the whole n x n Sinkhorn matrix in registers (16 floats for n = 4;
// every loop is unrolled, so nothing is indexed at run time and nothing goes to local memory).
// At decode sizes the 20 serial iterations are on the critical path: one thread per token needs
// no shuffles, and the normalisations multiply by one approximate reciprocal per row or column
// (relative error ~1e-7, far inside the fp32 tier's 5e-5) instead of dividing every element.
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

__device__ __forceinline__ float fast_reciprocal(float v) { return __fdividef(1.f, v); }

// Turns `sums` (NMIX dot products, then the sum of squares) of one token into its outputs.
template <int kStreams>
__device__ __forceinline__ void token_coefficients(const float* sums, int64_t token,
                                                   const CoefficientParams& cp,
                                                   const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  const float r = 1.f / sqrtf(sums[kNmix] * cp.inv_k + cp.eps_n);
  const float scale_pre = cp.hc_scale[0], scale_post = cp.hc_scale[1], scale_comb = cp.hc_scale[2];
  float mixes[kNmix];
#pragma unroll
  for (int i = 0; i < kNmix; ++i) mixes[i] = sums[i] * r;
#pragma unroll
  for (int j = 0; j < n; ++j) {
    out.pre[token * n + j] = sigmoid(mixes[j] * scale_pre + cp.hc_base[j]) + cp.eps_h;
    out.post[token * n + j] = cp.post_mult * sigmoid(mixes[n + j] * scale_post + cp.hc_base[n + j]);
  }
  if (out.mixes != nullptr) {
#pragma unroll
    for (int i = 0; i < kNmix; ++i) out.mixes[token * kNmix + i] = mixes[i];
  }

  // Row j of P: softmax over k of the logits (the first row normalisation), then + eps_h.
  float p[n][n];
#pragma unroll
  for (int j = 0; j < n; ++j) {
    float row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      p[j][k] = mixes[2 * n + j * n + k] * scale_comb + cp.hc_base[2 * n + j * n + k];
      row_max = fmaxf(row_max, p[j][k]);
    }
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      p[j][k] = expf(p[j][k] - row_max);
      total += p[j][k];
    }
    const float inv = fast_reciprocal(total);
#pragma unroll
    for (int k = 0; k < n; ++k) p[j][k] = p[j][k] * inv + cp.eps_h;
  }
  auto column_pass = [&] {
#pragma unroll
    for (int k = 0; k < n; ++k) {
      float total = 0.f;
#pragma unroll
      for (int j = 0; j < n; ++j) total += p[j][k];
      const float inv = fast_reciprocal(total + cp.eps_h);
#pragma unroll
      for (int j = 0; j < n; ++j) p[j][k] *= inv;
    }
  };
  column_pass();
  for (int it = 1; it < cp.sinkhorn_iters; ++it) {
#pragma unroll
    for (int j = 0; j < n; ++j) {
      float total = 0.f;
#pragma unroll
      for (int k = 0; k < n; ++k) total += p[j][k];
      const float inv = fast_reciprocal(total + cp.eps_h);
#pragma unroll
      for (int k = 0; k < n; ++k) p[j][k] *= inv;
    }
    column_pass();
  }
#pragma unroll
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int k = 0; k < n; ++k) out.comb[(token * n + j) * n + k] = p[j][k];
  }
}

}  // namespace mhc::cuda
