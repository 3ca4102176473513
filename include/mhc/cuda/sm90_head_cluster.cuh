// The head collapse (hc_head, docs/head.md) by thread block clusters (sm_90): the head's form on
// every sm_90 device, at every token count, with the final RMSNorm fused or not. The CTA-per-token
// kernel (head.cuh) reads all of hc_fn (n * K * 4 bytes) through one SM per token, and its batched
// form reads x twice; here a cluster of kCtas CTAs serves a group of kTokens consecutive tokens and
// CTA `rank` owns C / kCtas columns of each stream, so a token's bytes and hc_fn's are spread over
// kCtas SMs and x is read once:
//   1. the CTA copies its slice of x (kTokens x n x C/kCtas bf16) into shared memory (cp.async:
//      every byte in flight at once) and, for small groups, its slice of hc_fn too;
//   2. per token, the n partial dot products with hc_fn and the partial sum of squares over the
//      slice: each thread over its (stream, vector) units in one fixed order, then a warp butterfly
//      and the warps in order;
//   3. those n + 1 partials go into every CTA's shared memory (distributed shared memory), and
//      every CTA sums them in rank order: the same bits in every CTA;
//   4. the weights (head_weight, head.cuh), the collapse of the CTA's columns from the shared copy
//      (collapse8, the input path's), y kept in place of stream 0;
//   5. with the norm, y's partial sums of squares exchanged the same way, rms_scale, the CTA's
//      slice of out.
// A token's reduction order depends on C, kCtas and kThreads only, never on kTokens, M or the
// token's place in its group: with kCtas and kThreads fixed per C (the launcher's), a token's bits
// are the same in any batch. They are not the CTA-per-token kernel's (another order).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/head.cuh"
#include "mhc/cuda/input_path.cuh"

namespace mhc::cuda {

// Small groups stage their hc_fn slice in shared memory with x: every load of the CTA is then in
// flight at once, and one round trip, not one per vector, bounds the CTA. Large groups read it from
// L2 inside the projection (staged it would leave one CTA per SM and no overlap of one CTA's loads
// with another's compute).
template <int kTokens>
__host__ __device__ constexpr bool head_cluster_stages_fn() {
  return kTokens <= 2;
}

// Dynamic shared memory of a CTA of `tokens` tokens a group: its slice of x, and of hc_fn where
// staged (head_cluster_stages_fn<tokens>).
inline size_t head_cluster_smem_bytes(int streams, int tokens, int hidden, int ctas) {
  const size_t cols = size_t(hidden / ctas);
  return size_t(tokens) * streams * cols * 2 +
         (tokens <= 2 ? size_t(streams) * streams * cols * 4 : 0);
}

// The final norm's weight at columns c..c+7, fp32 or bf16 (widened exactly).
__device__ __forceinline__ void load_head_norm8(const HeadArgs& a, int c, float (&w)[8]) {
  if (a.norm_weight_bf16 != nullptr) {
    unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(a.norm_weight_bf16 + c)), w);
  } else {
    unpack_f4x2(load_weight_f4(a.norm_weight + c), load_weight_f4(a.norm_weight + c + 4), w);
  }
}

// The CTA's share of `count` values per rank: each value summed over the warps in order, then
// written into part[rank][value] of every CTA of the cluster, then the cluster barrier (its
// arrival releases the stores, its wait acquires every CTA's). warp_part[value][warp].
template <int kCtas, int kCount, int kWarps>
__device__ __forceinline__ void head_cluster_exchange(const float (*warp_part)[kWarps],
                                                      float (*part)[kCount], int rank,
                                                      int threads) {
  for (int p = int(threadIdx.x); p < kCount * kCtas; p += threads) {
    const int q = p / kCtas, dst = p % kCtas;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_part[q][w];
    store_cluster_shared(&part[rank][q], dst, s);
  }
  cluster_arrive();
  cluster_wait();
}

// Step 1: the CTA's slices into shared memory (tokens past the batch zero-filled, never stored);
// consecutive threads copy consecutive vectors of a stream, whole 128-byte lines.
template <int kStreams, int kTokens, int kThreads>
__device__ __forceinline__ void head_cluster_stage(const HeadArgs& a, int64_t first, int count,
                                                   int col0, int cols, uint4* xs, float* fn_sm) {
  const int vecs = cols / kBf16PerVec, units = kStreams * vecs;
  const int64_t k = int64_t(kStreams) * a.hidden;
  for (int t = 0; t < kTokens; ++t) {
    const bool valid = t < count;
    const uint16_t* x_t = a.x + (first + (valid ? t : 0)) * k;
    for (int u = int(threadIdx.x); u < units; u += kThreads) {
      const int j = u / vecs, v = u - j * vecs;
      cp_async_16(xs + t * units + u, x_t + int64_t(j) * a.hidden + col0 + v * kBf16PerVec, valid);
    }
  }
  if constexpr (head_cluster_stages_fn<kTokens>()) {
    const int chunks = cols / 4;  // 16-byte pieces of one (i, j) row of the slice
    for (int q = int(threadIdx.x); q < kStreams * kStreams * chunks; q += kThreads) {
      const int row = q / chunks, c = q - row * chunks;  // row = i * n + j
      const float* src =
          a.hc_fn + int64_t(row / kStreams) * k + int64_t(row % kStreams) * a.hidden + col0;
      cp_async_16(fn_sm + int64_t(row) * cols + c * 4, src + c * 4, true);
    }
  }
  cp_async_commit();
}

// Step 2, one thread's share: totals[t * (n + 1) + i], token t's dot product with hc_fn[i] (i < n)
// and its sum of squares (i = n), over units u = tid, tid + kThreads, ..., each unit's 8 elements
// in order; hc_fn's 8 x n weights of a unit loaded once for all kTokens tokens.
template <int kStreams, int kTokens, int kThreads>
__device__ __forceinline__ void head_cluster_project(const HeadArgs& a, int col0, int cols,
                                                     const uint4* xs, const float* fn_sm,
                                                     float (&totals)[kTokens * (kStreams + 1)]) {
  const int vecs = cols / kBf16PerVec, units = kStreams * vecs;
  const int64_t k = int64_t(kStreams) * a.hidden;
  for (int u = int(threadIdx.x); u < units; u += kThreads) {
    const int j = u / vecs, v = u - j * vecs;
    float f[kStreams][8];
#pragma unroll
    for (int i = 0; i < kStreams; ++i) {
      if constexpr (head_cluster_stages_fn<kTokens>()) {
        const float4* p =
            reinterpret_cast<const float4*>(fn_sm + (i * kStreams + j) * cols + v * kBf16PerVec);
        unpack_f4x2(p[0], p[1], f[i]);
      } else {
        const float* p = a.hc_fn + i * k + int64_t(j) * a.hidden + col0 + v * kBf16PerVec;
        unpack_f4x2(load_weight_f4(p), load_weight_f4(p + 4), f[i]);
      }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float e8[8];
      unpack_bf16x8(xs[t * units + u], e8);
      float* tot = totals + t * (kStreams + 1);
#pragma unroll
      for (int e = 0; e < 8; ++e) tot[kStreams] = fmaf(e8[e], e8[e], tot[kStreams]);
#pragma unroll
      for (int i = 0; i < kStreams; ++i) {
#pragma unroll
        for (int e = 0; e < 8; ++e) tot[i] = fmaf(f[i][e], e8[e], tot[i]);
      }
    }
  }
}

// A warp butterfly per value, the warp's total into warp_part[value][warp], then the CTA barrier.
template <int kCount, int kWarps>
__device__ __forceinline__ void head_cluster_warp_sums(const float (&v)[kCount],
                                                       float (*warp_part)[kWarps]) {
#pragma unroll
  for (int q = 0; q < kCount; ++q) {
    const float s = group_sum<kWarp>(v[q]);
    if (threadIdx.x % kWarp == 0) warp_part[q][threadIdx.x / kWarp] = s;
  }
  __syncthreads();
}

template <int kStreams, int kCtas, int kTokens, int kThreads>
__global__ void __launch_bounds__(kThreads)
    sm90_head_cluster_kernel(const __grid_constant__ HeadArgs a, int tokens) {
// The body exists in the sm_90a image only (head_cluster_fits offers the form nowhere else): other
// images would compile a kernel nobody launches, and ptxas spills it on sm_100f.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kWarps = kThreads / kWarp;
  constexpr int kSums = kTokens * (kStreams + 1);  // per token: n dot products, the sum of squares
  __shared__ float part[kCtas][kSums];  // [rank][value]: every CTA's, written by its owner (DSMEM)
  __shared__ float y_part[kCtas][kTokens];
  __shared__ float warp_part[kSums][kWarps];
  __shared__ float warp_y[kTokens][kWarps];
  __shared__ float weight_sm[kTokens][kStreams];
  __shared__ float scale_sm[kTokens];
  extern __shared__ __align__(16) unsigned char dyn[];

  // Announces that this CTA has started: its shared memory may be written once the cluster's wait
  // (in the first exchange) has seen every CTA's arrival.
  cluster_arrive_relaxed();
  allow_dependents();
  wait_for_producer();
  const int tid = int(threadIdx.x);
  const int rank = cluster_cta_rank();
  const int64_t first = int64_t(blockIdx.x / kCtas) * kTokens;
  const int count = int(min(int64_t(kTokens), int64_t(tokens) - first));  // >= 1
  const int cols = a.hidden / kCtas;  // the CTA's columns of each stream
  const int vecs = cols / kBf16PerVec;
  const int col0 = rank * cols;
  const bool norm = a.norm_weight != nullptr || a.norm_weight_bf16 != nullptr;
  uint4* xs = reinterpret_cast<uint4*>(dyn);  // [t][j][v]
  float* fn_sm = reinterpret_cast<float*>(dyn + size_t(kTokens) * kStreams * vecs * 16);

  head_cluster_stage<kStreams, kTokens, kThreads>(a, first, count, col0, cols, xs, fn_sm);
  // The norm weight of the thread's first vector, in flight with the slices: read after the
  // exchanges, its latency would follow them on the launch's serial path.
  float nw_first[8] = {};
  if (norm && tid < vecs) load_head_norm8(a, col0 + tid * kBf16PerVec, nw_first);
  const float hc_scale = __ldg(a.hc_scale);
  cp_async_wait<0>();
  __syncthreads();

  float totals[kSums] = {};
  head_cluster_project<kStreams, kTokens, kThreads>(a, col0, cols, xs, fn_sm, totals);
  head_cluster_warp_sums<kSums, kWarps>(totals, warp_part);
  cluster_wait();  // every CTA has started (the relaxed arrival above)
  head_cluster_exchange<kCtas, kSums, kWarps>(warp_part, part, rank, kThreads);

  // The weights, summed in rank order: the same bits in every CTA.
  if (tid < kTokens * kStreams) {
    const int t = tid / kStreams, j = tid % kStreams;
    float sq = 0.f, dot = 0.f;
#pragma unroll
    for (int r = 0; r < kCtas; ++r) sq += part[r][t * (kStreams + 1) + kStreams];
#pragma unroll
    for (int r = 0; r < kCtas; ++r) dot += part[r][t * (kStreams + 1) + j];
    const float rr = head_rms(sq, kStreams * a.hidden, a.rms_eps);
    const float w = head_weight(dot, rr, hc_scale, __ldg(a.hc_base + j), a.hc_eps);
    weight_sm[t][j] = w;
    if (a.weights != nullptr && rank == 0 && t < count) a.weights[(first + t) * kStreams + j] = w;
  }
  __syncthreads();

  // The collapse of the CTA's columns, and y's sum of squares per token over the thread's vectors
  // in order.
  const int units = kStreams * vecs;
  float y_sq[kTokens] = {};
  for (int v = tid; v < vecs; v += kThreads) {
    const int c = col0 + v * kBf16PerVec;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float xj[kStreams][8], wt[kStreams], y[8];
#pragma unroll
      for (int j = 0; j < kStreams; ++j) {
        unpack_bf16x8(xs[t * units + j * vecs + v], xj[j]);
        wt[j] = weight_sm[t][j];
      }
      collapse8<kStreams>(xj, wt, y);
#pragma unroll
      for (int e = 0; e < 8; ++e) y_sq[t] = fmaf(y[e], y[e], y_sq[t]);
      if (!norm) {
        if (t < count) store_u4(a.out + (first + t) * a.hidden + c, pack_bf16x8(y));
      } else {
        xs[t * units + v] = pack_bf16x8(y);  // exact (bf16 already); only this thread reads it
      }
    }
  }
  if (!norm) return;  // the exchange above was the cluster's last: no CTA writes here any more

  // The final norm: y's sums of squares exchanged as the projection's were.
  head_cluster_warp_sums<kTokens, kWarps>(y_sq, warp_y);
  // Its wait also means no CTA writes into this one's shared memory past here: it may exit.
  head_cluster_exchange<kCtas, kTokens, kWarps>(warp_y, y_part, rank, kThreads);
  if (tid < kTokens) {
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < kCtas; ++r) s += y_part[r][tid];
    scale_sm[tid] = rms_scale(s, a.hidden, a.norm_eps);
  }
  __syncthreads();
  for (int v = tid; v < vecs; v += kThreads) {
    const int c = col0 + v * kBf16PerVec;
    float wv[8];
    if (v == tid) {
#pragma unroll
      for (int e = 0; e < 8; ++e) wv[e] = nw_first[e];
    } else {
      load_head_norm8(a, c, wv);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= count) break;
      float y[8], o[8];
      unpack_bf16x8(xs[t * units + v], y);
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = y[e] * scale_sm[t] * wv[e];  // rms_norm_store's order
      store_u4(a.out + (first + t) * a.hidden + c, pack_bf16x8(o));
    }
  }
#endif
}

// The cluster kernel's preconditions beyond head_args_valid, refused before any CUDA call
// (cudaErrorInvalidValue): C cut into kCtas whole slices of 16-byte vectors, and a grid of
// kCtas CTAs per group within CUDA's grid limit. mhc::cuda::head checks them with messages.
template <int kCtas, int kTokens>
bool head_cluster_args_valid(const HeadArgs& a, int64_t tokens) {
  return head_args_valid(a, tokens) && a.hidden % (kCtas * kBf16PerVec) == 0 &&
         ceil_div(tokens, int64_t(kTokens)) * kCtas <= INT32_MAX;
}

// Groups of kTokens tokens (the last one's may be fewer), a cluster of kCtas CTAs each. Sets the
// kernel's dynamic shared-memory limit and asks for the largest shared-memory carveout per launch
// (the attributes are per device): with a smaller carveout fewer CTAs would be resident per SM
// than in the measurements the group sizes were chosen from (the lab prototype set it alike).
template <int kStreams, int kCtas, int kTokens, int kThreads>
cudaError_t launch_head_cluster(const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  if (!head_cluster_args_valid<kCtas, kTokens>(a, tokens)) return cudaErrorInvalidValue;
  const auto kernel = sm90_head_cluster_kernel<kStreams, kCtas, kTokens, kThreads>;
  static_assert(head_cluster_stages_fn<kTokens>() == (kTokens <= 2), "head_cluster_smem_bytes");
  const size_t smem = head_cluster_smem_bytes(kStreams, kTokens, a.hidden, kCtas);
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
  }
  if (err != cudaSuccess) return err;
  const int64_t groups = ceil_div(tokens, int64_t(kTokens));
  return launch_kernel_in_clusters(kernel, dim3(static_cast<unsigned>(groups * kCtas)),
                                   dim3(kThreads), smem, unsigned(kCtas), on, a, int(tokens));
}

// The kernel as the current device loaded it: binaryVersion and ptxVersion, the image it came from
// (its body is in the sm_90a image only), and its static shared memory.
template <int kStreams, int kCtas, int kTokens, int kThreads>
cudaError_t head_cluster_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, sm90_head_cluster_kernel<kStreams, kCtas, kTokens, kThreads>);
}

}  // namespace mhc::cuda
