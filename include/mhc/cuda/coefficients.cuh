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
// alias), so each pre/post sigmoid would wait for its own load (docs/decisions.md, "Staged
// coefficient stores").
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

// Sum of get(0..kCount-1) as a balanced tree: on the serial Sinkhorn path a row or column sum
// of n = 4 costs two dependent adds instead of three.
template <int kCount, typename Get>
__device__ __forceinline__ float tree_sum(const Get& get) {
  if constexpr (kCount == 1) {
    return get(0);
  } else {
    constexpr int kHalf = kCount / 2;
    return tree_sum<kHalf>(get) + tree_sum<kCount - kHalf>([&](int i) { return get(kHalf + i); });
  }
}

// The Sinkhorn's passes after the first row normalisation: a column pass, then (row pass, column
// pass) iters - 1 times. kIters > 0: the count as a constant (iters must equal it), so the loop
// unrolls; 0: the loop as it runs (docs/decisions.md, "The decode launch's serial tail": unrolled
// it was faster in the stats micro-benchmark and slower in the kernel).
template <int kIters, typename RowPass, typename ColumnPass>
__device__ __forceinline__ void sinkhorn_passes(int iters, const RowPass& row_pass,
                                                const ColumnPass& column_pass) {
  column_pass();
  if constexpr (kIters > 0) {
#pragma unroll
    for (int it = 1; it < kIters; ++it) {
      row_pass();
      column_pass();
    }
  } else {
    for (int it = 1; it < iters; ++it) {
      row_pass();
      column_pass();
    }
  }
}

// The Sinkhorn iterations after the first row normalisation, one thread holding the whole
// matrix (sinkhorn_passes; kIters as there).
template <int n, int kIters = 0>
__device__ __forceinline__ void sinkhorn_iterations(float (&p)[n][n], const CoefficientParams& cp) {
  auto column_pass = [&] {
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const float total = tree_sum<n>([&](int j) { return p[j][k]; });
      const float inv = fast_reciprocal(total + cp.sinkhorn_eps);
#pragma unroll
      for (int j = 0; j < n; ++j) p[j][k] *= inv;
    }
  };
  auto row_pass = [&] {
#pragma unroll
    for (int j = 0; j < n; ++j) {
      const float total = tree_sum<n>([&](int k) { return p[j][k]; });
      const float inv = fast_reciprocal(total + cp.sinkhorn_eps);
#pragma unroll
      for (int k = 0; k < n; ++k) p[j][k] *= inv;
    }
  };
  sinkhorn_passes<kIters>(cp.sinkhorn_iters, row_pass, column_pass);
}

// Lanes per token of the lane forms (token_coefficients_by_lanes): each holds two rows of P, so
// a column sum is a local add and one butterfly round fewer than with a row per lane: the 20
// iterations 12% faster than with n lanes, the decode site up to 2% (docs/decisions.md, "Two rows
// per lane in the Sinkhorn").
template <int kStreams>
inline constexpr int kStatsLanes = kStreams >= 2 ? kStreams / 2 : 1;
template <int kStreams>
inline constexpr int kStatsRowsPerLane = kStreams / kStatsLanes<kStreams>;

// sinkhorn_iterations with kStatsLanes<n> lanes per token, lane l holding rows l * R .. l * R +
// R - 1 of P (R = kStatsRowsPerLane<n>): the row passes are lane-local; a column sum is the
// lane's own rows as tree_sum<R> adds them, then a butterfly over the token's lanes, which
// completes tree_sum<n>'s balanced tree (fp addition commutes), so the bits are those of
// sinkhorn_iterations. kIters as in sinkhorn_passes. Every lane of the warp must call it
// (shuffles).
template <int n, int kIters = 0>
__device__ __forceinline__ void sinkhorn_iterations_by_lanes(float (&p)[kStatsRowsPerLane<n>][n],
                                                             const CoefficientParams& cp) {
  constexpr int kRows = kStatsRowsPerLane<n>;
  auto column_pass = [&] {
    float column[n];
#pragma unroll
    for (int k = 0; k < n; ++k) column[k] = tree_sum<kRows>([&](int j) { return p[j][k]; });
#pragma unroll
    for (int offset = 1; offset < kStatsLanes<n>; offset *= 2) {
#pragma unroll
      for (int k = 0; k < n; ++k) column[k] += __shfl_xor_sync(0xffffffffu, column[k], offset);
    }
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const float inv = fast_reciprocal(column[k] + cp.sinkhorn_eps);
#pragma unroll
      for (int j = 0; j < kRows; ++j) p[j][k] *= inv;
    }
  };
  auto row_pass = [&] {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const float inv =
          fast_reciprocal(tree_sum<n>([&](int k) { return p[j][k]; }) + cp.sinkhorn_eps);
#pragma unroll
      for (int k = 0; k < n; ++k) p[j][k] *= inv;
    }
  };
  sinkhorn_passes<kIters>(cp.sinkhorn_iters, row_pass, column_pass);
}

// Turns `sums` (NMIX dot products, then the sum of squares) of one token into its outputs;
// `params` as staged by stage_coefficient_params (shared memory).
template <int kStreams>
__device__ __forceinline__ void token_coefficients(const float* sums, int64_t token,
                                                   const CoefficientParams& cp, const float* params,
                                                   const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  const float* hc_base = params;
  const float r = fast_rsqrt(sums[kNmix] * cp.inv_k + cp.rms_eps);
  const float scale_pre = params[kNmix], scale_post = params[kNmix + 1];
  const float scale_comb = params[kNmix + 2];
  float mixes[kNmix];
#pragma unroll
  for (int i = 0; i < kNmix; ++i) mixes[i] = sums[i] * r;
#pragma unroll
  for (int j = 0; j < n; ++j) {
    out.pre[token * n + j] = sigmoid(mixes[j] * scale_pre + hc_base[j]) + cp.pre_eps;
    out.post[token * n + j] = cp.post_mult * sigmoid(mixes[n + j] * scale_post + hc_base[n + j]);
  }
  if (out.mixes != nullptr) {
#pragma unroll
    for (int i = 0; i < kNmix; ++i) out.mixes[token * kNmix + i] = mixes[i];
  }

  // Row j of P: softmax over k of the logits (the first row normalisation), then + sinkhorn_eps.
  float p[n][n];
#pragma unroll
  for (int j = 0; j < n; ++j) {
    float row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      p[j][k] = mixes[2 * n + j * n + k] * scale_comb + hc_base[2 * n + j * n + k];
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
    for (int k = 0; k < n; ++k) p[j][k] = p[j][k] * inv + cp.sinkhorn_eps;
  }
  sinkhorn_iterations<n>(p, cp);
#pragma unroll
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int k = 0; k < n; ++k) out.comb[(token * n + j) * n + k] = p[j][k];
  }
}

// The same outputs with kStatsLanes<n> lanes per token (lane l = threadIdx.x % kStatsLanes<n>
// holds rows l * R .. l * R + R - 1 of P, R = kStatsRowsPerLane<n>): each lane computes its rows'
// pre, post and softmax, and the Sinkhorn runs as sinkhorn_iterations_by_lanes, so the results
// are bitwise those of token_coefficients (the same operations in the same order per value). The
// point is a shorter serial chain per Sinkhorn iteration than one thread's instruction stream.
// Every lane of the warp must call it (shuffles); `active` false: compute, write nothing.
template <int kStreams, int kIters = 0>
__device__ __forceinline__ void token_coefficients_by_lanes(const float* sums, int64_t token,
                                                            bool active,
                                                            const CoefficientParams& cp,
                                                            const float* params,
                                                            const CoefficientOutputs& out) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  constexpr int kRows = kStatsRowsPerLane<n>;
  const int lane = int(threadIdx.x) % kStatsLanes<n>;
  const int row0 = lane * kRows;
  const float* hc_base = params;
  // Every value this lane reads from `sums` before any output store: a load cannot move above a
  // store through another float pointer (they might alias), and the stores would otherwise sit
  // between the loads and the Sinkhorn on the serial path.
  float pre_dot[kRows], post_dot[kRows], logits[kRows][n];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    pre_dot[j] = sums[row0 + j];
    post_dot[j] = sums[n + row0 + j];
#pragma unroll
    for (int k = 0; k < n; ++k) logits[j][k] = sums[2 * n + (row0 + j) * n + k];
  }
  float mixes[(kNmix + kStatsLanes<n> - 1) / kStatsLanes<n>];
  const bool want_mixes = active && out.mixes != nullptr;
  if (want_mixes) {
#pragma unroll
    for (int i = 0; i * kStatsLanes<n> + lane < kNmix; ++i) {
      mixes[i] = sums[i * kStatsLanes<n> + lane];
    }
  }
  const float r = fast_rsqrt(sums[kNmix] * cp.inv_k + cp.rms_eps);
  // This lane's rows of P: softmax over k of the logits, then + sinkhorn_eps (as
  // token_coefficients).
  float p[kRows][n];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int row = row0 + j;
    float row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      p[j][k] = logits[j][k] * r * params[kNmix + 2] + hc_base[2 * n + row * n + k];
      row_max = fmaxf(row_max, p[j][k]);
    }
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      p[j][k] = expf(p[j][k] - row_max);
      total += p[j][k];
    }
    const float inv_first = fast_reciprocal(total);
#pragma unroll
    for (int k = 0; k < n; ++k) p[j][k] = p[j][k] * inv_first + cp.sinkhorn_eps;
  }
  if (active) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int row = row0 + j;
      out.pre[token * n + row] =
          sigmoid(pre_dot[j] * r * params[kNmix] + hc_base[row]) + cp.pre_eps;
      out.post[token * n + row] =
          cp.post_mult * sigmoid(post_dot[j] * r * params[kNmix + 1] + hc_base[n + row]);
    }
    if (want_mixes) {
#pragma unroll
      for (int i = 0; i * kStatsLanes<n> + lane < kNmix; ++i) {
        out.mixes[token * kNmix + i * kStatsLanes<n> + lane] = mixes[i] * r;
      }
    }
  }
  sinkhorn_iterations_by_lanes<n, kIters>(p, cp);
  if (active) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
#pragma unroll
      for (int k = 0; k < n; ++k) out.comb[(token * n + row0 + j) * n + k] = p[j][k];
    }
  }
}

}  // namespace mhc::cuda
