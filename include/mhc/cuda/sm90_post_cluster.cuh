// The post fused with the next site's input path at decode sizes, by thread block clusters
// (sm_90). The row kernel (post_kernel, post.cuh) moves a token's ~100 KB (C=5120, n=4) through
// one SM, whose few hundred threads each hold kRowVecs vectors; one SM cannot keep that many
// bytes in flight, which sets that kernel's time per token at decode sizes (docs/decisions.md,
// "The post and the next input path by thread block clusters"). Here each warp of that row CTA
// becomes a CTA of its own, kRowVecs threads per row thread (one vector each), one cluster per
// token: the token's bytes spread over row_threads / 32 SMs.
//
// The bits are the row kernel's: the row is cut alike (row_column), each row thread's sum of
// squares is the same fma chain over its vectors in order (passed along its kRowVecs lanes),
// each row warp's butterfly is block_sum's, and the warp totals (one per CTA, exchanged through
// distributed shared memory) are added in warp order from 0, as block_sum adds them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/post.cuh"

namespace mhc::cuda {

// One row warp's vectors per CTA; at most 8 CTAs per cluster (the portable limit): rows of up
// to 8 warps, row_kernel_threads(C) <= 256, i.e. C <= 8192.
inline constexpr int kPostClusterThreads = kWarp * kRowVecs;
inline constexpr int kPostClusterMaxCtas = 8;
inline bool post_cluster_fits(int hidden) {
  return row_kernel_threads(hidden) <= kPostClusterMaxCtas * kWarp;
}

// A row thread's sum of squares when its kRowVecs vectors sit in consecutive lanes (lane v of
// the group holds vector v): post_token's fma chain, vector after vector, each lane continuing
// from the one before. Exact in the group's last lane. All 32 lanes must call it.
__device__ __forceinline__ float row_thread_sum_sq(const float (&y)[8], int v) {
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kRowVecs; ++k) {
    const float before = __shfl_up_sync(0xffffffffu, sum, 1);
    if (v == k) {
      sum = k == 0 ? 0.f : before;
#pragma unroll
      for (int e = 0; e < 8; ++e) sum = fmaf(y[e], y[e], sum);
    }
  }
  return sum;
}

// The row's sum of squares in block_sum's order, in every CTA of the token's cluster. `partial`
// is this thread's row thread's sum (exact in lane group position kRowVecs - 1). Ends the
// relaxed arrival made at the kernel's start.
__device__ __forceinline__ float cluster_row_sum(float partial, int v, int row_thread_in_warp,
                                                 int rank, int ctas) {
  __shared__ float row_sums[kWarp];
  __shared__ float warp_totals[kPostClusterMaxCtas];
  if (v == kRowVecs - 1) row_sums[row_thread_in_warp] = partial;
  __syncthreads();
  float warp_total = 0.f;
  if (threadIdx.x < kWarp) warp_total = group_sum<kWarp>(row_sums[threadIdx.x]);
  cluster_wait();  // every CTA has started: its shared memory can be written
  if (threadIdx.x == 0) {
    store_cluster_shared_all(&warp_totals[rank], ctas, warp_total);
  }
  cluster_arrive();
  cluster_wait();
  float total = 0.f;
  for (int q = 0; q < ctas; ++q) total += warp_totals[q];
  return total;
}

// An FP8 group's largest magnitude in this kernel's layout: lane (row thread r % 8, vector v) of
// warp r / 8, so a group (16 row threads' vector v) is the lanes with v of two warps (2w, 2w + 1):
// a shuffle over the lanes' row-thread bits, then the two warps' maxima through shared memory.
// Every thread of the CTA calls it, once.
struct ClusterGroupMax {
  float* exchange;  // [kPostClusterThreads / kWarp][kRowVecs], shared
  __device__ __forceinline__ float operator()(float amax) const {
#pragma unroll
    for (int offset = kRowVecs; offset < kWarp; offset *= 2) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const int warp = int(threadIdx.x) / kWarp, v = int(threadIdx.x) % kRowVecs;
    if (int(threadIdx.x) % kWarp < kRowVecs) exchange[warp * kRowVecs + v] = amax;
    __syncthreads();
    return fmaxf(exchange[(warp & ~1) * kRowVecs + v], exchange[(warp | 1) * kRowVecs + v]);
  }
};

// One token per cluster of row_threads / 32 CTAs (grid.x = tokens * that), kPostClusterThreads
// threads each; a.next_pre_mix and the next layer_input of type Out set (the fused next input
// path).
template <int kStreams, class Out = Bf16LayerInput>
__global__ void __launch_bounds__(kPostClusterThreads)
    sm90_post_cluster_kernel(const PostArgsFor<Out> a) {
  cluster_arrive_relaxed();
  allow_dependents();
  wait_for_producer();
  const int ctas = a.row_threads / kWarp;
  const int rank = cluster_cta_rank();
  const int64_t token = blockIdx.x / ctas;
  const int v = int(threadIdx.x) % kRowVecs;
  const int row_thread_in_warp = int(threadIdx.x) / kRowVecs;
  const int c = row_column(v, a.hidden, a.row_threads, rank * kWarp + row_thread_in_warp);
  const bool norm = a.next_norm_weight != nullptr;  // uniform over the grid
  const bool weighted = norm && c >= 0;
  // Every load before any store, and x_next stored only after the norm's exchange: a load
  // behind a store through another pointer cannot be hoisted above it (they might alias), so it
  // would put a second round trip (pre_mix) on the path, and the exchange's release barrier waits
  // for this thread's earlier global stores (measured faster with the loads first).
  const float4 w0 = weighted ? load_weight_f4(a.next_norm_weight + c) : make_float4(0, 0, 0, 0);
  const float4 w1 = weighted ? load_weight_f4(a.next_norm_weight + c + 4) : make_float4(0, 0, 0, 0);
  float next_weights[kStreams];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) next_weights[j] = a.next_pre_mix[token * kStreams + j];
  float out[kStreams][8], y[8];
  post_vector_values<kStreams, true>(a, token, c, out);
  collapse8<kStreams>(out, next_weights, y);
  float scale = 1.f;
  if (norm) {
    const float partial = row_thread_sum_sq(y, v);
    scale =
        rms_scale(cluster_row_sum(partial, v, row_thread_in_warp, rank, ctas), a.hidden, a.eps_n);
  } else {
    cluster_wait();
  }
  // An FP8 output's group reduction takes every thread, those past the row too.
  if (c < 0 && !Out::kCollective) return;
  if (c >= 0) store_post_vector<kStreams>(a, token, c, out);
  float wv[8];
  unpack_f4x2(w0, w1, wv);
  float o[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = norm ? y[e] * scale * wv[e] : y[e];
  __shared__ float group_exchange[Out::kCollective ? kPostClusterThreads / kWarp * kRowVecs : 1];
  next_layer_input(a).row(token, a.hidden).store8(c, o, ClusterGroupMax{group_exchange});
}

// Raw launcher: refuses (cudaErrorInvalidValue) arguments outside post_args_valid with the next
// input path, and rows whose cluster would exceed kPostClusterMaxCtas CTAs (post_cluster_fits: the
// row sums' exchange has a slot per CTA).
template <int kStreams, class Out = Bf16LayerInput>
cudaError_t launch_post_cluster(const PostArgsFor<Out>& args, int64_t tokens, LaunchTarget on) {
  if (!post_args_valid<true, Out>(args, tokens) || !post_cluster_fits(args.hidden)) {
    return cudaErrorInvalidValue;
  }
  const int ctas = args.row_threads / kWarp;
  return launch_kernel_in_clusters(
      sm90_post_cluster_kernel<kStreams, Out>, dim3(static_cast<unsigned>(tokens * ctas)),
      dim3(kPostClusterThreads), 0, static_cast<unsigned>(ctas), on, args);
}

}  // namespace mhc::cuda
