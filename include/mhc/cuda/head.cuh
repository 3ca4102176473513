// The head collapse (hc_head, docs/head.md): after the last site, per token,
//   w[j] = sigmoid((hc_fn[j] . v) * rsqrt(mean(v^2) + rms_eps) * hc_scale[0] + hc_base[j]) + hc_eps
// with v the token's n streams flattened (K = n*C), then out = bf16(sum_j w[j] * x[j]), and with
// the final RMSNorm fused, out = bf16(y * rsqrt(mean(y^2) + norm_eps) * norm_weight) on the stored
// y = bf16(sum_j w[j] * x[j]): one launch gives the LM head's input.
//
// One CTA per token, the row cut of the row kernels (row_column: row_kernel_threads(C) threads,
// up to kRowVecs 16-byte vectors of each stream per thread). A thread loads its vectors of all
// n streams once; they serve the projection (its n dot products and the sum of squares over its
// slice of K, reduced over the block in a fixed order) and then, still in registers, the
// collapse. The collapse and the norm are the input path's (input_path.cuh), so the output is
// bitwise input_path_kernel's with w as pre_mix. Every token's bits depend on its own row only.
//
// hc_fn is read once per token (n*K*4 bytes, through L2; eight times x's bytes at n = 4): what
// bounds the launch at large token counts, where a CTA serving several tokens would read it once
// for all of them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"

namespace mhc::cuda {

struct HeadArgs {
  const uint16_t* x = nullptr;         // [M, n, C]
  const float* hc_fn = nullptr;        // [n, K]
  const float* hc_base = nullptr;      // [n]
  const float* hc_scale = nullptr;     // [1]
  const float* norm_weight = nullptr;  // [C]; null: the collapse alone (or norm_weight_bf16)
  const uint16_t* norm_weight_bf16 = nullptr;  // [C] bf16 instead of norm_weight (widened exactly)
  uint16_t* out = nullptr;                     // [M, C]
  float* weights = nullptr;                    // [M, n]; null: not written
  int hidden = 0;
  float rms_eps = 0.f;
  float hc_eps = 0.f;
  float norm_eps = 0.f;
};

// block_sum for kCount values at once: each value gets block_sum's additions in block_sum's order
// (a warp butterfly, then the warp totals in warp order), behind one pair of barriers.
template <int kCount>
__device__ __forceinline__ void block_sums(float (&v)[kCount], float (*scratch)[kWarp]) {
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    v[i] = group_sum<kWarp>(v[i]);
    if (threadIdx.x % kWarp == 0) scratch[i][warp] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    float total = 0.f;
    for (int w = 0; w < warps; ++w) total += scratch[i][w];
    v[i] = total;
  }
  __syncthreads();
}

// Adds the thread's share of the projection for its vector at column c: dot[i] += hc_fn[i]'s
// 8 weights of each stream times the stream's 8 values, stream by stream, element by element.
template <int kStreams>
__device__ __forceinline__ void head_project8(const float* __restrict__ hc_fn, int hidden, int c,
                                              const float (&xs)[kStreams][8],
                                              float (&dot)[kStreams]) {
  const int64_t k = int64_t(kStreams) * hidden;
#pragma unroll
  for (int i = 0; i < kStreams; ++i) {
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      const float* row = hc_fn + i * k + int64_t(j) * hidden + c;
      float f[8];
      unpack_f4x2(load_weight_f4(row), load_weight_f4(row + 4), f);
#pragma unroll
      for (int e = 0; e < 8; ++e) dot[i] = fmaf(f[e], xs[j][e], dot[i]);
    }
  }
}

// load_norm_weights for a bf16 weight: the same floats (bf16 widens exactly), 16 bytes a vector.
template <int kVec>
__device__ __forceinline__ void load_norm_weights_bf16(const uint16_t* norm_weight, int hidden,
                                                       int threads, float4 (&w)[kVec][2]) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
    float f[8] = {};
    if (c >= 0) unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(norm_weight + c)), f);
    w[v][0] = make_float4(f[0], f[1], f[2], f[3]);
    w[v][1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

template <int kStreams, int kVec>
__global__ void head_kernel(const HeadArgs a) {
  __shared__ float sums[kStreams + 1][kWarp];
  allow_dependents();
  wait_for_producer();
  const int threads = int(blockDim.x);
  const int64_t token = blockIdx.x;
  const uint16_t* x_token = a.x + token * kStreams * a.hidden;
  uint4 xv[kVec][kStreams];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, a.hidden, threads);
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      xv[v][j] = c >= 0 ? load_stream_u4(x_token + j * a.hidden + c) : make_uint4(0, 0, 0, 0);
    }
  }
  float4 w[kVec][2];
  // Only whether a norm weight is given is read from `norm` past here: the weights are preloaded.
  const float* norm = a.norm_weight;
  if (a.norm_weight_bf16 != nullptr) {
    load_norm_weights_bf16<kVec>(a.norm_weight_bf16, a.hidden, threads, w);
    norm = reinterpret_cast<const float*>(a.norm_weight_bf16);
  } else {
    load_norm_weights<kVec>(a.norm_weight, a.hidden, threads, w);
  }

  // The projection and the sum of squares of v over this thread's slice, then over the block.
  float totals[kStreams + 1] = {};  // the n dot products, then the sum of squares
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, a.hidden, threads);
    if (c < 0) continue;
    float xs[kStreams][8];
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      unpack_bf16x8(xv[v][j], xs[j]);
#pragma unroll
      for (int e = 0; e < 8; ++e) totals[kStreams] = fmaf(xs[j][e], xs[j][e], totals[kStreams]);
    }
    float dot[kStreams];
#pragma unroll
    for (int i = 0; i < kStreams; ++i) dot[i] = totals[i];
    head_project8<kStreams>(a.hc_fn, a.hidden, c, xs, dot);
#pragma unroll
    for (int i = 0; i < kStreams; ++i) totals[i] = dot[i];
  }
  block_sums<kStreams + 1>(totals, sums);

  // The collapse weights, the same bits in every thread (the norm after the projection, as at
  // the sites: mixes = (hc_fn . v) * r).
  const float r = 1.f / sqrtf(totals[kStreams] / float(kStreams * a.hidden) + a.rms_eps);
  const float scale = a.hc_scale[0];
  float weights[kStreams];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
    const float z = totals[j] * r * scale + a.hc_base[j];
    weights[j] = 1.f / (1.f + expf(-z)) + a.hc_eps;
  }
  if (a.weights != nullptr && threadIdx.x == 0) {
#pragma unroll
    for (int j = 0; j < kStreams; ++j) a.weights[token * kStreams + j] = weights[j];
  }

  // The collapse and the norm: input_path_token's, from the vectors still in registers.
  float y[kVec][8];
  const float sum_sq = collapse_row<kStreams, kVec>(xv, weights, y);
  rms_norm_store<kVec, true>(y, sum_sq, w, norm, a.norm_eps, a.hidden, threads,
                             a.out + token * a.hidden, sums[0]);
}

// launch_head's preconditions, refused before any CUDA call (cudaErrorInvalidValue): 1..INT32_MAX
// tokens, C in whole 16-byte vectors within one CTA's row cut, the pointers it reads and writes
// (the norm weight and the weights output may be null), at most one norm weight. mhc::cuda::head
// checks them with messages.
inline bool head_args_valid(const HeadArgs& a, int64_t tokens) {
  return tokens >= 1 && tokens <= INT32_MAX && a.hidden > 0 && a.hidden % kBf16PerVec == 0 &&
         a.hidden <= row_kernel_max_hidden() && a.x != nullptr && a.hc_fn != nullptr &&
         a.hc_base != nullptr && a.hc_scale != nullptr && a.out != nullptr &&
         (a.norm_weight == nullptr || a.norm_weight_bf16 == nullptr);
}

template <int kStreams>
cudaError_t launch_head(const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  if (!head_args_valid(a, tokens)) return cudaErrorInvalidValue;
  return launch_kernel(head_kernel<kStreams, kRowVecs>, dim3(static_cast<unsigned>(tokens)),
                       dim3(row_kernel_threads(a.hidden)), 0, on, a);
}

// The most threads a head_kernel<kStreams> CTA may have on the current device (its register
// count in the loaded image caps it), for the host's check of C.
template <int kStreams>
cudaError_t head_max_threads(int* threads) {
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, head_kernel<kStreams, kRowVecs>);
  if (err == cudaSuccess) *threads = attr.maxThreadsPerBlock;
  return err;
}

}  // namespace mhc::cuda
