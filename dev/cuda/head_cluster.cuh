// The cluster prototype of the head collapse + final RMSNorm (docs/head.md) that
// dev/cuda/head_cluster_microbench.cu checks and times: the kernel and its launch variants.
//
// The design. A cluster of S CTAs serves a group of T consecutive tokens. CTA `rank` owns columns
// [rank * C/S, (rank + 1) * C/S) of each of the n streams, for all T tokens:
//   1. it copies its slice of x (T x n x C/S bf16) into shared memory once (cp.async: every byte
//      in flight at once), and, for small T, its slice of hc_fn (n x n x C/S fp32) too;
//   2. per token, the n partial dot products with hc_fn and the partial sum of squares over the
//      slice, each thread over its vectors in one fixed order, then over the CTA (warp butterfly,
//      warps in order);
//   3. those n + 1 partials per token go to every CTA of the cluster (distributed shared memory),
//      and every CTA sums them in rank order: the same bits everywhere;
//   4. the weights (head.cuh's formula), the collapse of the CTA's own columns from the shared
//      copy of x (no second global read), y kept in place of stream 0 in shared memory;
//   5. the partial sum of squares of y per token, exchanged the same way, the final norm's scale,
//      and the CTA's slice of out.
// A token's reduction order depends on C, S and the thread count only, never on T, M or the
// token's place in its group: for a fixed S per C a token's bits are the same in any batch (the
// harness checks it). T is free to vary with M: few tokens want T = 1 (the most CTAs, the shortest
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/cuda/common.cuh"

namespace mhc::lab {

using namespace mhc::cuda;

constexpr int kN = 4;          // streams: DeepSeek-V4.x's hc_mult
constexpr int kThreads = 128;  // per CTA, for every (S, T): the reduction order must not follow T
constexpr int kWarps = kThreads / kWarp;

struct Args {
  const uint16_t* x = nullptr;         // [M, n, C]
  const float* hc_fn = nullptr;        // [n, n*C]
  const float* hc_base = nullptr;      // [n]
  const float* hc_scale = nullptr;     // [1]
  const float* norm_weight = nullptr;  // [C]; null: the collapse alone
  uint16_t* out = nullptr;             // [M, C]
  float* weights = nullptr;            // [M, n]; null: not written
  int hidden = 0;
  int tokens = 0;
  float rms_eps = 0.f, hc_eps = 0.f, norm_eps = 0.f;
};

// Small groups stage their hc_fn slice in shared memory with x: every load of the CTA is then in
// flight at once, and the latency of one round trip, not of one per vector, bounds the CTA. Large
// groups read it from L2 inside the projection (eight tokens' worth of x in bytes: staged, it would
// leave one CTA per SM and no overlap of one CTA's loads with another's compute).
template <int kT>
__host__ __device__ constexpr bool stage_fn() {
  return kT <= 2;
}

// Dynamic shared memory of a CTA: x's slice (and hc_fn's where staged).
template <int kT>
size_t dynamic_smem_bytes(int hidden, int ctas) {
  const size_t cols = size_t(hidden / ctas);
  return size_t(kT) * kN * cols * 2 + (stage_fn<kT>() ? size_t(kN) * kN * cols * 4 : 0);
}

template <int kS, int kT>
__global__ void __launch_bounds__(kThreads) head_cluster_kernel(const __grid_constant__ Args a) {
  constexpr int kSums = kT * (kN + 1);  // per token: n dot products, then the sum of squares
  // [rank][value]: every CTA's partials, written by their owners through DSMEM.
  __shared__ float part[kS][kSums];
  __shared__ float y_part[kS][kT];
  __shared__ float warp_part[kSums][kWarps];
  __shared__ float warp_y[kT][kWarps];
  __shared__ float weight_sm[kT][kN];
  __shared__ float scale_sm[kT];
  extern __shared__ __align__(16) unsigned char dyn[];

  // Announces that this CTA has started: its shared memory may be written once the cluster's wait
  // below has seen every CTA's arrival.
  cluster_arrive_relaxed();

  const int tid = int(threadIdx.x);
  const int rank = cluster_cta_rank();
  const int64_t first = int64_t(blockIdx.x / kS) * kT;
  const int count = int(min(int64_t(kT), int64_t(a.tokens) - first));
  const int hidden = a.hidden;
  const int cols = hidden / kS;  // the CTA's columns of each stream
  const int vecs = cols / kBf16PerVec;
  const int units = kN * vecs;  // (stream, vector) pairs of one token's slice
  const int col0 = rank * cols;
  const int64_t k = int64_t(kN) * hidden;
  uint4* xs = reinterpret_cast<uint4*>(dyn);                               // [t][j][v]
  float* fn_sm = reinterpret_cast<float*>(dyn + size_t(kT) * units * 16);  // [i][j][cols]

  // 1. The slices into shared memory. Tokens past the batch are zero-filled (no read) and never
  // stored. Consecutive threads copy consecutive vectors of a stream: whole 128-byte lines.
  for (int t = 0; t < kT; ++t) {
    const bool valid = t < count;
    const uint16_t* x_t = a.x + (first + (valid ? t : 0)) * k;
    for (int u = tid; u < units; u += kThreads) {
      const int j = u / vecs, v = u - j * vecs;
      cp_async_16(xs + t * units + u, x_t + int64_t(j) * hidden + col0 + v * kBf16PerVec, valid);
    }
  }
  if constexpr (stage_fn<kT>()) {
    const int chunks = cols / 4;  // 16-byte pieces of one (i, j) row of the slice
    for (int q = tid; q < kN * kN * chunks; q += kThreads) {
      const int row = q / chunks, c = q - row * chunks;  // row = i * n + j
      const float* src = a.hc_fn + int64_t(row / kN) * k + int64_t(row % kN) * hidden + col0;
      cp_async_16(fn_sm + int64_t(row) * cols + c * 4, src + c * 4, true);
    }
  }
  cp_async_commit();
  // The norm weight of the thread's first vector, in flight with the slices: read after the
  // exchanges, its latency would follow them on the launch's serial path.
  float4 nw0 = make_float4(0.f, 0.f, 0.f, 0.f), nw1 = nw0;
  if (a.norm_weight != nullptr && tid < vecs) {
    nw0 = __ldg(reinterpret_cast<const float4*>(a.norm_weight + col0 + tid * kBf16PerVec));
    nw1 = __ldg(reinterpret_cast<const float4*>(a.norm_weight + col0 + tid * kBf16PerVec + 4));
  }
  const float hc_scale = __ldg(a.hc_scale);
  cp_async_wait<0>();
  __syncthreads();

  // 2. The projection: per token, over the thread's units in order u = tid, tid + kThreads, ...,
  // each unit's 8 elements in order; hc_fn's 8 x n weights of a unit loaded once for all T tokens.
  float totals[kSums] = {};
  for (int u = tid; u < units; u += kThreads) {
    const int j = u / vecs, v = u - j * vecs;
    float f[kN][8];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      float4 lo, hi;
      if constexpr (stage_fn<kT>()) {
        const float4* p =
            reinterpret_cast<const float4*>(fn_sm + (i * kN + j) * cols + v * kBf16PerVec);
        lo = p[0], hi = p[1];
      } else {
        const float* p = a.hc_fn + i * k + int64_t(j) * hidden + col0 + v * kBf16PerVec;
        lo = load_weight_f4(p), hi = load_weight_f4(p + 4);
      }
      unpack_f4x2(lo, hi, f[i]);
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float e8[8];
      unpack_bf16x8(xs[t * units + u], e8);
      float* tot = totals + t * (kN + 1);
#pragma unroll
      for (int e = 0; e < 8; ++e) tot[kN] = fmaf(e8[e], e8[e], tot[kN]);
#pragma unroll
      for (int i = 0; i < kN; ++i) {
#pragma unroll
        for (int e = 0; e < 8; ++e) tot[i] = fmaf(f[i][e], e8[e], tot[i]);
      }
    }
  }
  // Over the CTA: a warp butterfly per value, then the warps in order (below).
#pragma unroll
  for (int q = 0; q < kSums; ++q) {
    const float s = group_sum<kWarp>(totals[q]);
    if (tid % kWarp == 0) warp_part[q][tid / kWarp] = s;
  }
  __syncthreads();

  // 3. Every CTA has started (the relaxed arrival above): the CTA's totals go to every CTA's
  // part[rank], one (value, destination) pair per thread and turn.
  cluster_wait();
  for (int p = tid; p < kSums * kS; p += kThreads) {
    const int q = p / kS, dst = p % kS;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_part[q][w];
    store_cluster_shared(&part[rank][q], dst, s);
  }
  cluster_arrive();  // releases the stores above
  cluster_wait();    // acquires every CTA's

  // 4. The weights, token by token, summed in rank order: the same bits in every CTA.
  if (tid < kT * kN) {
    const int t = tid / kN, j = tid % kN;
    float sq = 0.f, dot = 0.f;
#pragma unroll
    for (int r = 0; r < kS; ++r) sq += part[r][t * (kN + 1) + kN];
#pragma unroll
    for (int r = 0; r < kS; ++r) dot += part[r][t * (kN + 1) + j];
    const float rr = 1.f / sqrtf(sq / float(kN * hidden) + a.rms_eps);
    const float z = dot * rr * hc_scale + __ldg(a.hc_base + j);
    const float w = 1.f / (1.f + expf(-z)) + a.hc_eps;
    weight_sm[t][j] = w;
    if (a.weights != nullptr && rank == 0 && t < count) a.weights[(first + t) * kN + j] = w;
  }
  __syncthreads();

  // The collapse of the CTA's columns (collapse8's order: streams in order, fp32, one bf16
  // rounding), and the sum of squares of y per token over the thread's vectors in order.
  float y_sq[kT] = {};
  for (int v = tid; v < vecs; v += kThreads) {
    const int c = col0 + v * kBf16PerVec;
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float xj[kN][8];
#pragma unroll
      for (int j = 0; j < kN; ++j) unpack_bf16x8(xs[t * units + j * vecs + v], xj[j]);
      float y[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < kN; ++j) acc = fmaf(weight_sm[t][j], xj[j][e], acc);
        y[e] = round_bf16(acc);
        y_sq[t] = fmaf(y[e], y[e], y_sq[t]);
      }
      if (a.norm_weight == nullptr) {
        if (t < count) store_u4(a.out + (first + t) * hidden + c, pack_bf16x8(y));
      } else {
        // y is bf16 already: kept exactly in stream 0's place, which only this thread reads.
        xs[t * units + v] = pack_bf16x8(y);
      }
    }
  }
  if (a.norm_weight == nullptr) return;  // the exchange above was the cluster's last

    // 5. The final norm: y's sums of squares exchanged as the projection's were.
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    const float s = group_sum<kWarp>(y_sq[t]);
    if (tid % kWarp == 0) warp_y[t][tid / kWarp] = s;
  }
  __syncthreads();
  for (int p = tid; p < kT * kS; p += kThreads) {
    const int t = p / kS, dst = p % kS;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_y[t][w];
    store_cluster_shared(&y_part[rank][t], dst, s);
  }
  cluster_arrive();
  cluster_wait();  // also: no CTA writes into this one's shared memory past here, it may exit
  if (tid < kT) {
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < kS; ++r) s += y_part[r][tid];
    scale_sm[tid] = 1.f / sqrtf(s / float(hidden) + a.norm_eps);  // rms_scale's formula
  }
  __syncthreads();
  for (int v = tid; v < vecs; v += kThreads) {
    const int c = col0 + v * kBf16PerVec;
    float wv[8];
    if (v == tid) {
      unpack_f4x2(nw0, nw1, wv);
    } else {
      unpack_f4x2(load_weight_f4(a.norm_weight + c), load_weight_f4(a.norm_weight + c + 4), wv);
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t >= count) break;
      float y[8], o[8];
      unpack_bf16x8(xs[t * units + v], y);
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = y[e] * scale_sm[t] * wv[e];  // rms_norm_store's order
      store_u4(a.out + (first + t) * hidden + c, pack_bf16x8(o));
    }
  }
}

// ---- launch configurations ------------------------------------------------------------------

struct Variant {
  int ctas, tokens_per_group;
  cudaError_t (*prepare)(int hidden, size_t optin, int* clusters);  // attributes, capacity
  cudaError_t (*launch)(const Args& a, cudaStream_t s);
};

template <int kS, int kT>
cudaError_t prepare_variant(int hidden, size_t optin, int* clusters) {
  *clusters = 0;
  if (hidden % (kS * kBf16PerVec) != 0) return cudaSuccess;
  const auto kernel = head_cluster_kernel<kS, kT>;
  cudaFuncAttributes attr{};
  cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  const size_t dyn = dynamic_smem_bytes<kT>(hidden, kS);
  if (err != cudaSuccess || dyn + attr.sharedSizeBytes > optin) return err;
  // Clusters of 16 are beyond the portable 8: allowed per kernel.
  if (kS > 8) err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
  }
  if (err == cudaSuccess) err = max_active_clusters(kernel, kS, kThreads, int(dyn), clusters);
  return err;
}

template <int kS, int kT>
cudaError_t launch_variant(const Args& a, cudaStream_t s) {
  const int64_t groups = ceil_div(a.tokens, kT);
  return launch_kernel_in_clusters(
      head_cluster_kernel<kS, kT>, dim3(static_cast<unsigned>(groups * kS)), dim3(kThreads),
      dynamic_smem_bytes<kT>(a.hidden, kS), unsigned(kS), LaunchTarget(s, false), a);
}

template <int kS, int kT>
Variant variant() {
  return {kS, kT, prepare_variant<kS, kT>, launch_variant<kS, kT>};
}

inline const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
      variant<4, 1>(),  variant<4, 2>(),  variant<4, 4>(),  variant<4, 8>(),  variant<4, 16>(),
      variant<8, 1>(),  variant<8, 2>(),  variant<8, 4>(),  variant<8, 8>(),  variant<8, 16>(),
      variant<16, 1>(), variant<16, 2>(), variant<16, 4>(), variant<16, 8>(), variant<16, 16>(),
  };
  return all;
}

}  // namespace mhc::lab
