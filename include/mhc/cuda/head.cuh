// The head collapse (hc_head, docs/head.md): after the last site, per token,
//   w[j] = sigmoid((hc_fn[j] . v) * rsqrt(mean(v^2) + rms_eps) * hc_scale[0] + hc_base[j]) + hc_eps
// with v the token's n streams flattened (K = n*C), then out = bf16(sum_j w[j] * x[j]), and with
// the final RMSNorm fused, out = bf16(y * rsqrt(mean(y^2) + norm_eps) * norm_weight) on the stored
// y = bf16(sum_j w[j] * x[j]): one launch gives the LM head's input.
//
// A CTA serves kTokens consecutive tokens with the row cut of the row kernels (row_column:
// row_kernel_threads(C) threads, up to kRowVecs 16-byte vectors of each stream per thread).
// The projection: each hc_fn vector a thread loads serves all the CTA's tokens (hc_fn, n*K*4
// bytes through L2, is read once per CTA, not once per token: at n = 4 eight times x's bytes per
// token otherwise). Each token's n dot products and sum of squares are accumulated over the
// thread's slice of K in one fixed order (vector, stream, element) and reduced over the block in
// block_sum's order, whatever kTokens is: a token's bits depend on its own row only, the same in
// every form, batch and run. The collapse and the norm are the input path's (input_path.cuh), so
// the output is bitwise input_path_kernel's with w as pre_mix.
//
// kTokens = 1 keeps the token's vectors in registers from the projection to the collapse (x read
// once). With kTokens > 1 the registers cannot hold every token's row (40 KB of x per token at
// C = 5120): the projection streams x, and the collapse reads each token's row again, from L2
// while the CTA's rows are still there.
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

// The collapse weights' formula, one for every head kernel (head_kernel, sm90_head_cluster.cuh):
// r = rsqrt(sum(v^2) / K + rms_eps) from the token's sum of squares over its K = n * C values,
// then w = sigmoid(dot * r * hc_scale + hc_base) + hc_eps from its dot product with hc_fn[j] (the
// norm after the projection, as at the sites: mixes = (hc_fn . v) * r).
__device__ __forceinline__ float head_rms(float sum_sq, int k, float rms_eps) {
  return 1.f / sqrtf(sum_sq / float(k) + rms_eps);
}
__device__ __forceinline__ float head_weight(float dot, float r, float scale, float base,
                                             float hc_eps) {
  const float z = dot * r * scale + base;
  return 1.f / (1.f + expf(-z)) + hc_eps;
}

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

// The thread's vectors of one token's n streams (zeros past the row).
template <int kStreams, int kVec>
__device__ __forceinline__ void load_head_row(const uint16_t* x_token, int hidden, int threads,
                                              uint4 (&xv)[kVec][kStreams]) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      xv[v][j] = c >= 0 ? load_stream_u4(x_token + j * hidden + c) : make_uint4(0, 0, 0, 0);
    }
  }
}

// totals[t * (n + 1) + i]: token t's dot product with hc_fn[i] (i < n) and its sum of squares
// (i = n) over the thread's slice of K, each accumulated vector by vector, stream by stream,
// element by element (the one order of every form). row(t, v, j) gives token t's packed vector v
// of stream j; each hc_fn vector is loaded once for all kTokens tokens.
template <int kStreams, int kVec, int kTokens, class Row>
__device__ __forceinline__ void head_project(const float* __restrict__ hc_fn, int hidden,
                                             int threads, const Row& row,
                                             float (&totals)[kTokens * (kStreams + 1)]) {
  const int64_t k = int64_t(kStreams) * hidden;
#pragma unroll(kTokens == 1 ? kVec : 1)
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
    if (c < 0) continue;
#pragma unroll(kTokens == 1 ? kStreams : 1)
    for (int j = 0; j < kStreams; ++j) {
      float xs[kTokens][8];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        unpack_bf16x8(row(t, v, j), xs[t]);
        float& sum_sq = totals[t * (kStreams + 1) + kStreams];
#pragma unroll
        for (int e = 0; e < 8; ++e) sum_sq = fmaf(xs[t][e], xs[t][e], sum_sq);
      }
#pragma unroll
      for (int i = 0; i < kStreams; ++i) {
        const float* fn = hc_fn + i * k + int64_t(j) * hidden + c;
        float f[8];
        unpack_f4x2(load_weight_f4(fn), load_weight_f4(fn + 4), f);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          float& dot = totals[t * (kStreams + 1) + i];
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(f[e], xs[t][e], dot);
        }
      }
    }
  }
}

template <int kStreams, int kVec, int kTokens>
__global__ void head_kernel(const HeadArgs a, int tokens) {
  constexpr int kSums = kTokens * (kStreams + 1);
  __shared__ float sums[kSums][kWarp];
  allow_dependents();
  wait_for_producer();
  const int threads = int(blockDim.x);
  const int64_t first = int64_t(blockIdx.x) * kTokens;
  const int count = int(min(int64_t(kTokens), tokens - first));  // the CTA's tokens, >= 1
  const uint16_t* x_first = a.x + first * kStreams * a.hidden;
  uint4 xv[kVec][kStreams];
  if constexpr (kTokens == 1) load_head_row<kStreams, kVec>(x_first, a.hidden, threads, xv);
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
  float totals[kSums] = {};
  if constexpr (kTokens == 1) {
    head_project<kStreams, kVec, 1>(
        a.hc_fn, a.hidden, threads, [&](int, int v, int j) { return xv[v][j]; }, totals);
  } else {
    // Tokens past the batch (the last CTA's) project zeros and are not stored.
    const auto row = [&](int t, int v, int j) {
      const int c = row_column(v, a.hidden, threads);
      return t < count ? load_stream_u4(x_first + (int64_t(t) * kStreams + j) * a.hidden + c)
                       : make_uint4(0, 0, 0, 0);
    };
    head_project<kStreams, kVec, kTokens>(a.hc_fn, a.hidden, threads, row, totals);
  }
  block_sums<kSums>(totals, sums);

  const float scale = a.hc_scale[0];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {  // unrolled: totals stays in registers
    if (t >= count) break;
    const int64_t token = first + t;
    const float* total = totals + t * (kStreams + 1);
    // The collapse weights, the same bits in every thread.
    const float r = head_rms(total[kStreams], kStreams * a.hidden, a.rms_eps);
    float weights[kStreams];
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      weights[j] = head_weight(total[j], r, scale, a.hc_base[j], a.hc_eps);
    }
    if (a.weights != nullptr && threadIdx.x == 0) {
#pragma unroll
      for (int j = 0; j < kStreams; ++j) a.weights[token * kStreams + j] = weights[j];
    }
    // The collapse and the norm: input_path_token's, from the token's vectors.
    if constexpr (kTokens > 1) {
      load_head_row<kStreams, kVec>(a.x + token * kStreams * a.hidden, a.hidden, threads, xv);
    }
    float y[kVec][8];
    const float sum_sq = collapse_row<kStreams, kVec>(xv, weights, y);
    rms_norm_store<kVec, true>(y, sum_sq, w, norm, a.norm_eps, a.hidden, threads,
                               a.out + token * a.hidden, sums[0]);
  }
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

// kTokens tokens per CTA (the last CTA's may be fewer).
template <int kStreams, int kTokens>
cudaError_t launch_head(const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  if (!head_args_valid(a, tokens)) return cudaErrorInvalidValue;
  return launch_kernel(head_kernel<kStreams, kRowVecs, kTokens>,
                       dim3(static_cast<unsigned>(ceil_div(tokens, int64_t(kTokens)))),
                       dim3(row_kernel_threads(a.hidden)), 0, on, a, static_cast<int>(tokens));
}

// The most threads a CTA of the head kernels with kTokens = 1 and kTokensPerCta may have on the
// current device (their register counts in the loaded image cap it), for the host's check of C.
template <int kStreams, int kTokensPerCta>
cudaError_t head_max_threads(int* threads) {
  cudaFuncAttributes one{}, several{};
  cudaError_t err = cudaFuncGetAttributes(&one, head_kernel<kStreams, kRowVecs, 1>);
  if (err == cudaSuccess) {
    err = cudaFuncGetAttributes(&several, head_kernel<kStreams, kRowVecs, kTokensPerCta>);
  }
  if (err == cudaSuccess) *threads = min(one.maxThreadsPerBlock, several.maxThreadsPerBlock);
  return err;
}

}  // namespace mhc::cuda
