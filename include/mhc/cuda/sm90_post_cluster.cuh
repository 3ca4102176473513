// The post fused with the next site's input path at decode sizes (sm_90 clusters): the row CTA
// of post_kernel (post.cuh) holds a token's whole row on one SM, and one SM moves a token's
// ~100 KB (C=5120, n=4) several times slower than the memory system can. Here each warp of that
// row CTA becomes a CTA of its own, one cluster per token, so a token's bytes spread over
// row_threads / 32 SMs; the warps' shares of the RMS sum meet through distributed shared memory
// and are added in warp order, as block_sum adds them: the same cut of the row, the same order,
// the same bits as post_kernel (docs/decisions.md, "Cluster post").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/post.cuh"

namespace mhc::cuda {

// A cluster has at most 8 CTAs without opting in to non-portable sizes: rows of up to 8 warps
// (row_kernel_threads(C) <= 256, C <= 8192).
inline constexpr int kPostClusterMaxCtas = 8;
inline bool post_cluster_fits(int hidden) {
  return row_kernel_threads(hidden) <= kPostClusterMaxCtas * kWarp;
}

// ---- cluster primitives (sm_90) ----
__device__ __forceinline__ int cluster_cta_rank() {
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  return int(rank);
}
// barrier.cluster: arrive releases this CTA's shared-memory writes, wait acquires the others'.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
// The float at `local` (a __shared__ address) in the CTA of cluster rank `rank`.
__device__ __forceinline__ float load_cluster_shared(const float* local, int rank) {
  float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
#endif
  return v;
}

// block_sum's order over a cluster of one-warp CTAs (CTA rank = warp of the row CTA): each warp's
// butterfly, then the warp totals in rank order from 0. Leaves the cluster barrier armed: call
// cluster_wait() before the CTA exits, so that no CTA leaves while another reads its slot.
__device__ __forceinline__ float cluster_warp_sum(float v, float* slot, int ctas) {
  v = group_sum<kWarp>(v);
  if (threadIdx.x == 0) *slot = v;
  cluster_arrive();
  cluster_wait();
  float total = 0.f;
  for (int r = 0; r < ctas; ++r) total += load_cluster_shared(slot, r);
  cluster_arrive();
  return total;
}

// One token per cluster of a.row_threads / 32 one-warp CTAs (grid.x = tokens * that).
template <int kStreams>
__global__ void __launch_bounds__(kWarp) sm90_post_cluster_kernel(const PostArgs a) {
  __shared__ float warp_total;
  allow_dependents();
  wait_for_producer();
  const int ctas = a.row_threads / kWarp;
  const int rank = cluster_cta_rank();
  const int64_t token = blockIdx.x / ctas;
  const int thread = rank * kWarp + int(threadIdx.x);  // the row CTA's thread it stands for
  float4 w[kRowVecs][2];
  float y[kRowVecs][8];
  float sum_sq;
  post_token_vectors<kStreams, kRowVecs, true, true>(a, token, thread, w, y, sum_sq);
  const bool norm = a.next_norm_weight != nullptr;  // uniform over the cluster
  float scale = 1.f;
  if (norm) scale = rms_scale(cluster_warp_sum(sum_sq, &warp_total, ctas), a.hidden, a.eps_n);
  norm_store<kRowVecs, true>(y, scale, w, a.next_norm_weight, a.hidden, a.row_threads, thread,
                             a.next_layer_input + token * a.hidden);
  if (norm) cluster_wait();
}

template <int kStreams>
cudaError_t launch_post_cluster(const PostArgs& args, int64_t tokens, LaunchTarget on) {
  const int ctas = args.row_threads / kWarp;
  return launch_kernel_in_clusters(sm90_post_cluster_kernel<kStreams>,
                                   dim3(static_cast<unsigned>(tokens * ctas)), dim3(kWarp), 0,
                                   static_cast<unsigned>(ctas), on, args);
}

}  // namespace mhc::cuda
