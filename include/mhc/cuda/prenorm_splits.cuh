// The raw split partials of the prenorm GEMM, for engines that keep their own epilogue
// (DeepGEMM's tf32_hc_prenorm_gemm semantics and split layout, mhc::prenorm_split_range):
// out[s][m][i] = fn[i] . x[m] over split s's columns on TF32 tensor cores (x is bf16, exact in
// TF32; fn is rounded to TF32), sqrsum[s][m] = the same columns' sum of x^2 in fp32.
//
// grid = (16-token tiles, splits), 4 warps per CTA taking the split's 32-wide K chunks
// round-robin, combined in a fixed warp order (deterministic). The operand layout is that of
// prenorm_mma.cuh: a lane loads 8 contiguous values of each of its rows and the MMA's k index is
// permuted the same way for A and B. No workspace: every CTA writes its own slice of the outputs.
// This is the plain form, not tuned like the fused coefficient kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

struct PrenormSplitsArgs {
  const uint16_t* x = nullptr;  // [M, K] bf16 bits
  const float* fn = nullptr;    // [N, K]
  float* out = nullptr;         // [S, M, N]
  float* sqrsum = nullptr;      // [S, M]
  int64_t tokens = 0;
  int64_t k = 0;  // a multiple of 64
  int splits = 1;
};

inline constexpr int kPrenormSplitsWarps = 4;

template <int kNTiles>
__global__ void __launch_bounds__(kPrenormSplitsWarps* kWarp)
    prenorm_splits_kernel(const PrenormSplitsArgs a) {
  constexpr int kNmix = kNTiles * 8;
  constexpr int kValues = kNTiles * 4 + 2;  // accumulators, then the two sums of squares
  __shared__ float exchange[(kPrenormSplitsWarps - 1) * kValues * kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * 16;
  const int split = blockIdx.y;
  // DeepGEMM's layout: K / 64 blocks dealt out in order, the first (blocks % splits) take one more.
  const int64_t blocks = a.k / 64, per_split = blocks / a.splits, extra = blocks % a.splits;
  const int64_t first_block = split * per_split + (split < extra ? split : extra);
  const int64_t chunk_begin = first_block * 2;
  const int64_t chunk_end = chunk_begin + 2 * (per_split + (split < extra ? 1 : 0));
  const int64_t rows[2] = {row0 + g, row0 + g + 8};

  float acc[kNTiles][4] = {};
  float sumsq[2] = {};
  allow_dependents();
  wait_for_producer();
  for (int64_t c = chunk_begin + warp; c < chunk_end; c += kPrenormSplitsWarps) {
    const int64_t column = c * 32 + t * 8;
    uint32_t xw[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 v = rows[h] < a.tokens ? load_stream_u4(a.x + rows[h] * a.k + column)
                                         : make_uint4(0, 0, 0, 0);
      xw[h][0] = v.x;
      xw[h][1] = v.y;
      xw[h][2] = v.z;
      xw[h][3] = v.w;
    }
    float w[kNTiles][8];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const float* row = a.fn + (nt * 8 + g) * a.k + column;
      const float4 w0 = load_weight_f4(row), w1 = load_weight_f4(row + 4);
      const float values[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) w[nt][e] = values[e];
    }
    // k-step s takes the lane's elements 2s (logical k = t) and 2s + 1 (logical k = t + 4).
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint32_t frag[4] = {xw[0][s] << 16, xw[1][s] << 16, xw[0][s] & 0xffff0000u,
                                xw[1][s] & 0xffff0000u};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float lo = __uint_as_float(frag[h]), hi = __uint_as_float(frag[h + 2]);
        sumsq[h] = fmaf(lo, lo, fmaf(hi, hi, sumsq[h]));
      }
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        mma_tf32(acc[nt], frag, to_tf32(w[nt][2 * s]), to_tf32(w[nt][2 * s + 1]));
      }
    }
  }
  quad_sums(sumsq);

  // Warps 1.. hand their values to warp 0, which adds them in warp order.
  if (warp > 0) {
    float* slot = exchange + (warp - 1) * kValues * kWarp + lane;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) slot[(nt * 4 + e) * kWarp] = acc[nt][e];
    }
    slot[(kNTiles * 4) * kWarp] = sumsq[0];
    slot[(kNTiles * 4 + 1) * kWarp] = sumsq[1];
  }
  __syncthreads();
  if (warp != 0) return;
  for (int other = 0; other < kPrenormSplitsWarps - 1; ++other) {
    const float* slot = exchange + other * kValues * kWarp + lane;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] += slot[(nt * 4 + e) * kWarp];
    }
    sumsq[0] += slot[(kNTiles * 4) * kWarp];
    sumsq[1] += slot[(kNTiles * 4 + 1) * kWarp];
  }
  float* out = a.out + int64_t(split) * a.tokens * kNmix;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = rows[e >= 2 ? 1 : 0];
      if (row < a.tokens) out[row * kNmix + nt * 8 + 2 * t + (e & 1)] = acc[nt][e];
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (t == 0 && rows[h] < a.tokens) a.sqrsum[int64_t(split) * a.tokens + rows[h]] = sumsq[h];
  }
}

// launch_prenorm_splits' preconditions, refused before any CUDA call (cudaErrorInvalidValue): N
// one of the four instantiations (8, 16, 24, 32: any other would read hc_fn rows and write outputs
// at another stride), at least one token and split, K a positive multiple of 64, the pointers.
// mhc::cuda::prenorm_gemm checks them with messages (check_prenorm_gemm_shape).
inline bool prenorm_splits_args_valid(const PrenormSplitsArgs& a, int nmix) {
  return (nmix == 8 || nmix == 16 || nmix == 24 || nmix == 32) && a.tokens >= 1 && a.k > 0 &&
         a.k % 64 == 0 && a.splits >= 1 && a.x != nullptr && a.fn != nullptr && a.out != nullptr &&
         a.sqrsum != nullptr;
}

inline cudaError_t launch_prenorm_splits(const PrenormSplitsArgs& a, int nmix, LaunchTarget on) {
  if (!prenorm_splits_args_valid(a, nmix)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.tokens, int64_t(16))),
                  static_cast<unsigned>(a.splits));
  const dim3 block(kPrenormSplitsWarps * kWarp);
  switch (nmix) {
    case 8:
      return launch_kernel(prenorm_splits_kernel<1>, grid, block, 0, on, a);
    case 16:
      return launch_kernel(prenorm_splits_kernel<2>, grid, block, 0, on, a);
    case 24:
      return launch_kernel(prenorm_splits_kernel<3>, grid, block, 0, on, a);
    default:
      return launch_kernel(prenorm_splits_kernel<4>, grid, block, 0, on, a);
  }
}

}  // namespace mhc::cuda
