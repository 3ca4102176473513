// The per-token "stats" stage of the coefficient path: from the reduced dot products and the sum
// of squares to mixes, pre, post and the Sinkhorn-normalised comb (design doc, step 2).
//
// One thread per token holds the whole n x n Sinkhorn matrix in registers (16 floats for n = 4;
// every loop is unrolled, so nothing is indexed at run time and nothing goes to local memory).
// At decode sizes the 20 serial iterations are on the critical path: one thread per token needs
// no shuffles, each (row pass, column pass) pair waits for one reciprocal instead of two
// (sinkhorn_row_column_pair), and the normalisations multiply by one approximate reciprocal per
// column (relative error ~1e-7, far inside the fp32 tier's 5e-5) instead of dividing every element.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

struct CoefficientParams {
  const float* hc_base = nullptr;   // [NMIX]
  const float* hc_scale = nullptr;  // [3]
  float pre_eps = 1e-6f;            // added to the pre sigmoid
  float sinkhorn_eps = 1e-6f;       // the Sinkhorn's first pass and row/column sums
  float rms_eps = 1e-20f;           // RMS of the flattened streams
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

// One MUFU.RCP (rcp.approx.ftz: ~1 ulp). What it serves (Sinkhorn sums >= sinkhorn_eps, 1 + e^-v
// >= 1) is far from the denormal range; __fdividef wrapped it in a range check that sat on the
// serial chain.
__device__ __forceinline__ float fast_reciprocal(float v) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

// 1 / (1 + e^-v) with one MUFU.RCP for the division (~1 ulp; 1 / inf = 0 as the sigmoid needs):
// an IEEE division puts a branch to its slow path around each sigmoid on the stats' serial path.
__device__ __forceinline__ float sigmoid(float v) { return fast_reciprocal(1.f + expf(-v)); }

// 1 / sqrt(v) by one MUFU.RSQ (rsqrt.approx.ftz, ~2 ulp); v >= rms_eps is a normal float.
__device__ __forceinline__ float fast_rsqrt(float v) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

// hc_base (NMIX) then hc_scale (3): what token_coefficients reads besides the sums. The caller
// stages them in shared memory once per CTA (stage_coefficient_params): read here from global
// memory, a load could not move above an output store through another float pointer (they might
// alias), so each pre/post sigmoid would wait for its own load.
template <int kStreams>
inline constexpr int kCoefficientParamFloats = kStreams*(kStreams + 2) + 3;

template <int kStreams>
__device__ __forceinline__ void stage_coefficient_params(const CoefficientParams& cp,
                                                         float* params) {
  constexpr int kNmix = kStreams * (kStreams + 2);
  const int i = threadIdx.x;
  if (i < kNmix) params[i] = __ldg(cp.hc_base + i);
  if (i >= kNmix && i < kNmix + 3) params[i] = __ldg(cp.hc_scale + (i - kNmix));
}

// Sum of get(0..kCount-1) as a balanced tree (a sum of n = 4 is two dependent adds, not three)
// of IEEE adds that are never contracted into FMAs.
template <int kCount, typename Get>
__device__ __forceinline__ float tree_sum(const Get& get) {
  if constexpr (kCount == 1) {
    return get(0);
  } else {
    constexpr int kHalf = kCount / 2;
    return __fadd_rn(tree_sum<kHalf>(get),
                     tree_sum<kCount - kHalf>([&](int i) { return get(kHalf + i); }));
  }
}

// One (row pass, column pass) pair of the Sinkhorn in one reciprocal level. With a_j = sum_k P_jk
// + eps (row j's divisor) and A_j = prod_{i != j} a_i, multiplying the column pass's numerator and
// denominator by prod_i a_i gives
//   P'_jk = (P_jk / a_j) / (sum_i P_ik / a_i + eps) = m_jk / den_k,
//   m_jk = P_jk A_j,   den_k = sum_j m_jk + eps prod_i a_i,
// so the row pass's reciprocals leave the serial path: one MUFU.RCP latency per pair instead of
// two (docs/decisions.md, "The Sinkhorn"). den_k is formed
// from pairs of rows, a23 (P_0k a1 + P_1k a0) + a01 (P_2k a3 + P_3k a2) + eps a01 a23 at n = 4,
// two dependent steps fewer than from the m_jk. Every term is positive (no cancellation), and
// after a column pass every row sum lies in (0, n], so A_j >= eps^(n-1) and den_k >= eps^(n+1)
// (1e-30 at n = 4): inside fp32's normal range at any logits. Explicit _rn intrinsics: no FMA
// contraction the compiler could choose differently in another kernel, so every caller (every
// tile shape) gets the same bits.
template <int n>
__device__ __forceinline__ void sinkhorn_row_column_pair(float (&p)[n][n], float eps) {
  static_assert(n == 2 || n == 4, "the paired form is written for n = 2 and n = 4");
  float a[n];
#pragma unroll
  for (int j = 0; j < n; ++j) {
    a[j] = __fadd_rn(tree_sum<n>([&](int k) { return p[j][k]; }), eps);
  }
  float den[n], A[n];
  if constexpr (n == 2) {
    const float e = __fmul_rn(eps, __fmul_rn(a[0], a[1]));
    A[0] = a[1];
    A[1] = a[0];
#pragma unroll
    for (int k = 0; k < n; ++k) den[k] = __fmaf_rn(p[0][k], a[1], __fmaf_rn(p[1][k], a[0], e));
  } else {
    const float a01 = __fmul_rn(a[0], a[1]), a23 = __fmul_rn(a[2], a[3]);
    const float e = __fmul_rn(eps, __fmul_rn(a01, a23));
    A[0] = __fmul_rn(a[1], a23);
    A[1] = __fmul_rn(a[0], a23);
    A[2] = __fmul_rn(a01, a[3]);
    A[3] = __fmul_rn(a01, a[2]);
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const float x01 = __fmaf_rn(p[0][k], a[1], __fmul_rn(p[1][k], a[0]));
      const float x23 = __fmaf_rn(p[2][k], a[3], __fmul_rn(p[3][k], a[2]));
      den[k] = __fmaf_rn(a23, x01, __fmaf_rn(a01, x23, e));
    }
  }
#pragma unroll
  for (int k = 0; k < n; ++k) {
    const float inv = fast_reciprocal(den[k]);
#pragma unroll
    for (int j = 0; j < n; ++j) p[j][k] = __fmul_rn(__fmul_rn(p[j][k], A[j]), inv);
  }
}

// The Sinkhorn after the softmax (its first row normalisation), one thread holding the whole
// matrix: a column pass, then iters - 1 (row pass, column pass) pairs (sinkhorn_row_column_pair).
// kIters > 0: the count as a constant (iters must equal it), so the loop unrolls; 0: the loop as
// it runs, the kernels' form: unrolled it helps the stats micro-benchmark but measures slower in
// the kernel (docs/decisions.md, "The Sinkhorn").
template <int n, int kIters = 0>
__device__ __forceinline__ void sinkhorn_iterations(float (&p)[n][n], const CoefficientParams& cp) {
  const float eps = cp.sinkhorn_eps;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    const float inv = fast_reciprocal(__fadd_rn(tree_sum<n>([&](int j) { return p[j][k]; }), eps));
#pragma unroll
    for (int j = 0; j < n; ++j) p[j][k] = __fmul_rn(p[j][k], inv);
  }
  if constexpr (kIters > 0) {
#pragma unroll
    for (int it = 1; it < kIters; ++it) sinkhorn_row_column_pair<n>(p, eps);
  } else {
    for (int it = 1; it < cp.sinkhorn_iters; ++it) sinkhorn_row_column_pair<n>(p, eps);
  }
}

// Lanes per token of the lane forms (token_coefficients_by_lanes): each computes two rows' pre,
// post and softmax, then every lane of the token runs the whole Sinkhorn (docs/decisions.md, "The
// Sinkhorn").
template <int kStreams>
inline constexpr int kStatsLanes = kStreams >= 2 ? kStreams / 2 : 1;
template <int kStreams>
inline constexpr int kStatsRowsPerLane = kStreams / kStatsLanes<kStreams>;

// Row j of P from its logits' dot products: softmax over k of dot * r * scale_comb + base, then
// + sinkhorn_eps (the Sinkhorn's first row normalisation). Shared by both stats forms, so their
// bits agree.
template <int n>
__device__ __forceinline__ void softmax_row(const float (&dots)[n], float r, float scale_comb,
                                            const float (&base)[n], float eps, float (&row)[n]) {
  float row_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    row[k] = __fmaf_rn(__fmul_rn(dots[k], r), scale_comb, base[k]);
    row_max = fmaxf(row_max, row[k]);
  }
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    row[k] = expf(row[k] - row_max);
    total = __fadd_rn(total, row[k]);
  }
  const float inv = fast_reciprocal(total);
#pragma unroll
  for (int k = 0; k < n; ++k) row[k] = __fmaf_rn(row[k], inv, eps);
}

// pre[j] and post[j] from their dot products (design doc, step 2).
__device__ __forceinline__ float pre_value(float dot, float r, float scale, float base,
                                           const CoefficientParams& cp) {
  return __fadd_rn(sigmoid(__fmaf_rn(__fmul_rn(dot, r), scale, base)), cp.pre_eps);
}
__device__ __forceinline__ float post_value(float dot, float r, float scale, float base,
                                            const CoefficientParams& cp) {
  return __fmul_rn(cp.post_mult, sigmoid(__fmaf_rn(__fmul_rn(dot, r), scale, base)));
}

// Row `row` of one token: its row of P (softmax_row), pre and post, from the token's `sums` and
// `params` (stage_coefficient_params), with r = 1 / RMS. Both stats forms take their rows here.
template <int n>
__device__ __forceinline__ void token_row(const float* sums, int row, float r,
                                          const CoefficientParams& cp, const float* params,
                                          float (&p_row)[n], float& pre, float& post) {
  constexpr int kNmix = n * (n + 2);
  const float* hc_base = params;
  float dots[n], base[n];
#pragma unroll
  for (int k = 0; k < n; ++k) {
    dots[k] = sums[2 * n + row * n + k];
    base[k] = hc_base[2 * n + row * n + k];
  }
  softmax_row<n>(dots, r, params[kNmix + 2], base, cp.sinkhorn_eps, p_row);
  pre = pre_value(sums[row], r, params[kNmix], hc_base[row], cp);
  post = post_value(sums[n + row], r, params[kNmix + 1], hc_base[n + row], cp);
}

// Turns `sums` (NMIX dot products, then the sum of squares) of one token into its outputs;
// `params` as staged by stage_coefficient_params (shared memory). Every input is read and every
// value computed before the first output store: a load cannot move above a store through another
// float pointer (they might alias), and the sigmoids can overlap the Sinkhorn's first passes.
template <int kStreams>
__device__ __forceinline__ void token_coefficients(const float* sums, int64_t token,
                                                   const CoefficientParams& cp, const float* params,
                                                   const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  const float r = fast_rsqrt(sums[kNmix] * cp.inv_k + cp.rms_eps);
  float p[n][n], pre[n], post[n];
#pragma unroll
  for (int j = 0; j < n; ++j) token_row<n>(sums, j, r, cp, params, p[j], pre[j], post[j]);
  float mixes[kNmix];
  if (out.mixes != nullptr) {
#pragma unroll
    for (int i = 0; i < kNmix; ++i) mixes[i] = __fmul_rn(sums[i], r);
  }
  sinkhorn_iterations<n>(p, cp);
#pragma unroll
  for (int j = 0; j < n; ++j) {
    out.pre[token * n + j] = pre[j];
    out.post[token * n + j] = post[j];
#pragma unroll
    for (int k = 0; k < n; ++k) out.comb[(token * n + j) * n + k] = p[j][k];
  }
  if (out.mixes != nullptr) {
#pragma unroll
    for (int i = 0; i < kNmix; ++i) out.mixes[token * kNmix + i] = mixes[i];
  }
}

// The same outputs with kStatsLanes<n> lanes per token (lane l = threadIdx.x % kStatsLanes<n>
// owns rows l * R .. l * R + R - 1 of P, R = kStatsRowsPerLane<n>): each lane computes its rows'
// pre, post and softmax, the lanes exchange their rows by shuffles, and every lane runs the whole
// sinkhorn_iterations and stores its own rows, so the results are bitwise those of
// token_coefficients (the same operations in the same order per value). The point is half the
// softmax's instructions per lane ahead of the serial Sinkhorn. Every lane of the warp must call
// it (shuffles); `active` false: compute, write nothing.
template <int kStreams, int kIters = 0>
__device__ __forceinline__ void token_coefficients_by_lanes(const float* sums, int64_t token,
                                                            bool active,
                                                            const CoefficientParams& cp,
                                                            const float* params,
                                                            const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  constexpr int kRows = kStatsRowsPerLane<n>;
  constexpr int kMixesPerLane = (kNmix + kStatsLanes<n> - 1) / kStatsLanes<n>;
  static_assert(kStatsLanes<n> <= 2, "the exchange is written for one or two lanes per token");
  const int lane = int(threadIdx.x) % kStatsLanes<n>;
  const int row0 = lane * kRows;
  const float r = fast_rsqrt(sums[kNmix] * cp.inv_k + cp.rms_eps);
  float p[kRows][n], pre[kRows], post[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
    token_row<n>(sums, row0 + j, r, cp, params, p[j], pre[j], post[j]);
  const bool want_mixes = active && out.mixes != nullptr;
  float mixes[kMixesPerLane];
  if (want_mixes) {
#pragma unroll
    for (int i = 0; i * kStatsLanes<n> + lane < kNmix; ++i) {
      mixes[i] = __fmul_rn(sums[i * kStatsLanes<n> + lane], r);
    }
  }
  // The whole matrix in every lane of the token; rows picked by selects, so nothing is indexed
  // at run time (no local memory).
  float whole[n][n];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const float other = kStatsLanes<n> == 2 ? __shfl_xor_sync(0xffffffffu, p[j][k], 1) : p[j][k];
      whole[j][k] = lane == 0 ? p[j][k] : other;
      if constexpr (kStatsLanes<n> == 2) whole[kRows + j][k] = lane == 0 ? other : p[j][k];
    }
  }
  sinkhorn_iterations<n, kIters>(whole, cp);
  if (!active) return;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    out.pre[token * n + row0 + j] = pre[j];
    out.post[token * n + row0 + j] = post[j];
#pragma unroll
    for (int k = 0; k < n; ++k) {
      float value = whole[j][k];
      if constexpr (kStatsLanes<n> == 2) value = lane == 0 ? value : whole[kRows + j][k];
      out.comb[(token * n + row0 + j) * n + k] = value;
    }
  }
  if (want_mixes) {
#pragma unroll
    for (int i = 0; i * kStatsLanes<n> + lane < kNmix; ++i) {
      out.mixes[token * kNmix + i * kStatsLanes<n> + lane] = mixes[i];
    }
  }
}

}  // namespace mhc::cuda
