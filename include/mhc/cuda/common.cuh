// Device helpers shared by every mHC kernel family: 16-byte bf16 vectors, cache-hinted loads,
// deterministic warp and block reductions, TF32 MMA, and the host-side argument checks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "mhc/core/error.hpp"
#include "mhc/cuda/launch_target.hpp"

namespace mhc::cuda {

inline constexpr int kWarp = 32;
inline constexpr int kBf16PerVec = 8;  // one 16-byte load holds 8 bf16

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Rows of a tile of kRows tokens from row0 that hold tokens (fewer in the batch's last tile).
template <int kRows>
__device__ __forceinline__ int tile_rows_valid(int64_t tokens, int64_t row0) {
  return tokens - row0 < kRows ? static_cast<int>(tokens - row0) : kRows;
}

// ---- bf16 <-> f32 (exact widening; round-to-nearest-even narrowing, like mhc::float_to_bf16) ----

// Element 2i of a packed pair is the low half of word i, element 2i+1 the high half.
__device__ __forceinline__ float bf16_lo(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t word) {
  return __uint_as_float(word & 0xffff0000u);
}

// Hardware conversions (cvt.rn.bf16x2.f32, sm_80+): round to nearest even, NaN kept, one
// instruction per pair, where rounding by hand in integer operations is a large share of the post
// kernel's time.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t f32_to_bf16_bits(float f) {
  return pack_bf16x2(f, 0.f) & 0xffffu;
}
// The value f takes once stored as bf16.
__device__ __forceinline__ float round_bf16(float f) {
  return __bfloat162float(__float2bfloat16_rn(f));
}

// 8 bf16 of a uint4 to 8 floats, in memory order.
__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_lo(words[i]);
    out[2 * i + 1] = bf16_hi(words[i]);
  }
}
__device__ __forceinline__ uint4 pack_bf16x8(const float (&in)[8]) {
  return make_uint4(pack_bf16x2(in[0], in[1]), pack_bf16x2(in[2], in[3]), pack_bf16x2(in[4], in[5]),
                    pack_bf16x2(in[6], in[7]));
}
// Word i (0..3) of a 16-byte vector; i is a constant once the callers' loops unroll.
__device__ __forceinline__ uint32_t word_at(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ---- loads and stores -----------------------------------------------------------------------

// Streamed activations (read once per kernel): keep them out of L1 so they do not evict the
// reused weights; read-only path.
// The 256-byte L2 prefetch hint helps kernels whose warps read 64-byte pieces of long rows.
__device__ __forceinline__ uint4 load_stream_u4(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}
// Weights reused by many CTAs: ordinary read-only cached load.
__device__ __forceinline__ float4 load_weight_f4(const float* ptr) {
  return __ldg(reinterpret_cast<const float4*>(ptr));
}
// The 8 floats of two float4, lo's then hi's (8 consecutive weights), for per-element loops.
__device__ __forceinline__ void unpack_f4x2(const float4& lo, const float4& hi, float (&out)[8]) {
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}
__device__ __forceinline__ void store_u4(void* ptr, const uint4& v) {
  *reinterpret_cast<uint4*>(ptr) = v;
}

// Partials written by other CTAs of the same launch: read through L2 (L1 is not coherent).
__device__ __forceinline__ float4 load_coherent_f4(const float* ptr) {
  return __ldcg(reinterpret_cast<const float4*>(ptr));
}

// Adds 1 to a counter at GPU scope with acquire-release semantics; returns the value before.
__device__ __forceinline__ unsigned arrive_acq_rel(unsigned* counter) {
  unsigned before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
               : "=r"(before)
               : "l"(counter)
               : "memory");
  return before;
}

// 16-byte asynchronous global -> shared copy (sm_80+), L2 only; `valid` false zero-fills the
// destination without reading the source.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem_src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ---- bulk copies (TMA) and mbarriers (sm_90) --------------------------------------------------
// The copy engine moves whole boxes of a tensor global -> shared without registers or per-thread
// instructions and signals an mbarrier when the bytes have landed. Compiled to nothing below
// sm_90; callers run only where the plan says the image has them (KernelPlan::tma128_available).

__device__ __forceinline__ uint32_t shared_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals)
               : "memory");
#endif
}
// Makes initialised mbarriers visible to the copy engine (before the CTA's first barrier sync).
__device__ __forceinline__ void mbarrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// One arrival that also announces `bytes` of copies that must land before the phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#endif
}
// A copy ring's barriers, by thread 0: full[s] completes on one arrival (with the bytes it
// announces), empty[s] on `consumers` arrivals. The caller syncs the CTA before their first use.
template <int kStages>
__device__ __forceinline__ void init_ring_barriers(uint64_t* full, uint64_t* empty,
                                                   unsigned consumers) {
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&full[s], 1);
    mbarrier_init(&empty[s], consumers);
  }
  mbarrier_init_fence();
}
// Spins until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
#endif
}
// L2 eviction policies for cache hints: streamed data first out, reused weights last, normal
// where a hint measures slower (the fused boundary's reads, sm90_boundary_stages.cuh).
enum class L2Eviction { first, normal, last };
template <L2Eviction kEviction>
__device__ __forceinline__ uint64_t l2_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kEviction == L2Eviction::first) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  } else if constexpr (kEviction == L2Eviction::normal) {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
#endif
  return policy;
}

// One 2D box of a tensor map (`map`: the address of a __grid_constant__ CUtensorMap parameter)
// at coordinates (inner, outer) to shared memory, completing on `bar`, with an L2 eviction
// policy (above). Out-of-range elements arrive as zeros and count towards the bytes.
__device__ __forceinline__ void tensor_copy_to_shared(void* dst, const void* map, int inner,
                                                      int outer, uint64_t* bar,
                                                      uint64_t l2_policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(bar)),
      "l"(l2_policy)
      : "memory");
#endif
}
// The same for a 3D map's box at coordinates (c0, c1, c2), innermost first.
__device__ __forceinline__ void tensor_copy_3d_to_shared(void* dst, const void* map, int c0, int c1,
                                                         int c2, uint64_t* bar,
                                                         uint64_t l2_policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar)),
      "l"(l2_policy)
      : "memory");
#endif
}
// Starts fetching a tensor map (the address of a __grid_constant__ CUtensorMap parameter) into
// the copy engine's descriptor cache, so that the first copy does not wait for it.
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}
// Orders this thread's earlier shared-memory accesses before later copy-engine (async proxy)
// writes to the same memory: a stage is read, released, then refilled by the copy engine.
__device__ __forceinline__ void fence_shared_for_async_writes() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// A consumer warp hands a ring slot back to its producer: the warp's reads (and writes) of the
// slot ordered before the copy engine's next access to it, the warp's lanes met, one arrival on
// the slot's barrier `bar` (by lane 0).
__device__ __forceinline__ void release_ring_slot(uint64_t* bar) {
  fence_shared_for_async_writes();
  __syncwarp();
  if (threadIdx.x % kWarp == 0) mbarrier_arrive(bar);
}

// Copies a box from shared memory (laid out as the map's swizzle) to the map's global tensor at
// coordinates (inner, outer) through the copy engine, in the issuing thread's bulk async group,
// with an L2 eviction policy; rows past the tensor's extent are not written. The writers of
// the box fence (fence_shared_for_async_writes) and synchronise with the issuing thread first.
__device__ __forceinline__ void tensor_copy_to_global(const void* map, int inner, int outer,
                                                      const void* src, uint64_t l2_policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], "
      "[%3], %4;" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(inner), "r"(outer), "r"(shared_address(src)), "l"(l2_policy)
      : "memory");
#endif
}
// The same for a 3D map's box at coordinates (c0, c1, c2), innermost first.
__device__ __forceinline__ void tensor_copy_3d_to_global(const void* map, int c0, int c1, int c2,
                                                         const void* src, uint64_t l2_policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2, %3}], "
      "[%4], %5;" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(src)), "l"(l2_policy)
      : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
// Waits until the issuing thread's bulk groups, all but the kPending newest, have read their
// shared memory (the buffer may be reused) ...
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
#endif
}
// ... or have completed their writes; the fence then orders them (async proxy) before this
// thread's later generic accesses to global memory, which a barrier extends to the CTA.
__device__ __forceinline__ void bulk_wait_all_written() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;\n\tfence.proxy.async.global;" ::: "memory");
#endif
}

// ---- thread block clusters (sm_90; no-ops elsewhere, where no cluster kernel is launched) -----
__device__ __forceinline__ int cluster_cta_rank() {
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  return int(rank);
}
// A relaxed arrival: its wait only proves that every CTA of the cluster has started (before
// writing into another CTA's shared memory).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
// Arrive releases this thread's earlier writes (distributed shared memory included); wait
// acquires every other CTA's.
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
// Writes v at `local` (a __shared__ address) in the CTA of cluster rank `rank`.
__device__ __forceinline__ void store_cluster_shared(float* local, int rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
#endif
}
// Writes v at `local` (a __shared__ address) in the CTAs of cluster ranks 0..ctas-1.
__device__ __forceinline__ void store_cluster_shared_all(float* local, int ctas, float v) {
  for (int q = 0; q < ctas; ++q) store_cluster_shared(local, q, v);
}
// Reads the float at `local` (a __shared__ address) in the CTA of cluster rank `rank`.
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

// ---- programmatic dependent launch (sm_90) ---------------------------------------------------
// Kernels launched with launch_kernel may start while the previous kernel in the stream is still
// finishing (its launch latency is hidden). Each kernel calls wait_for_producer() before it reads
// anything an earlier kernel wrote and before its first global write; allow_dependents() lets
// the next kernel be scheduled early. Both are no-ops on sm_80 and when launched without PDL.
__device__ __forceinline__ void wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A launch in clusters of `cluster_ctas` CTAs along x (1: no clusters); grid.x must be a multiple
// of it. Clusters need an image with the sm_90 instructions.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel_in_clusters(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                      size_t smem_bytes, unsigned cluster_ctas, LaunchTarget on,
                                      Args&&... args) {
  cudaLaunchAttribute attributes[2] = {};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  // on.pdl is the launch tuning's: the plan allows PDL only where the loaded image has the waits
  // (sm_90 instructions: a compute_80 PTX image has no griddepcontrol).
  attributes[0].val.programmaticStreamSerializationAllowed = on.pdl ? 1 : 0;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = cluster_ctas;
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = on.stream;
  config.attrs = attributes;
  config.numAttrs = cluster_ctas > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// How many clusters of `ctas` CTAs (along x) of `kernel`, `threads` threads and `smem_bytes` of
// dynamic shared memory each, the current device holds at once (cudaOccupancyMaxActiveClusters);
// sets the kernel's dynamic shared-memory limit on the way (per call: the attribute is per
// device, and a process may drive several).
template <typename... KernelArgs>
cudaError_t max_active_clusters(void (*kernel)(KernelArgs...), int ctas, int threads,
                                int smem_bytes, int* clusters) {
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(ctas);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas), 1);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
}

template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes,
                          LaunchTarget on, Args&&... args) {
  return launch_kernel_in_clusters(kernel, grid, block, smem_bytes, 1, on,
                                   std::forward<Args>(args)...);
}

// ---- deterministic reductions ---------------------------------------------------------------

// Butterfly sum over aligned groups of `width` lanes (a power of two <= 32). Every lane of a
// group ends with the same bits: each step adds the same two partial sums, only commuted.
// All 32 lanes must call it.
template <int kWidth>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}
// group_sum<4> of both values: a lane quad's (an MMA fragment row's) two sums, in every lane.
__device__ __forceinline__ void quad_sums(float (&v)[2]) {
  v[0] = group_sum<4>(v[0]);
  v[1] = group_sum<4>(v[1]);
}
// group_sum over groups of `width` lanes chosen at run time (a power of two <= 32), for each of
// kCount values at once: one chain of rounds for all (a loop per value, its trip count known only
// at run time, would put one chain after another).
template <int kCount>
__device__ __forceinline__ void group_sum_dynamic(float (&v)[kCount], int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int i = 0; i < kCount; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], offset);
  }
}
// group_sum over groups of `width` lanes (a power of two <= 32), the four components of a float4
// at once: each component gets the same additions in the same order as a butterfly of its own,
// but their shuffles share one chain of rounds: four loops one after the other (a run-time trip
// count) do not interleave, and at width 32 (the decode tile's split reduction at 1 token) they
// would sit on the launch's serial path (docs/decisions.md, "The decode coefficient launch").
__device__ __forceinline__ float4 group_sum_dynamic(float4 v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, offset);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, offset);
    v.z += __shfl_xor_sync(0xffffffffu, v.z, offset);
    v.w += __shfl_xor_sync(0xffffffffu, v.w, offset);
  }
  return v;
}

// Sum over the whole block in a fixed order (warp butterflies, then the warp totals in warp
// order), returned to every thread. `scratch` holds one float per warp. Ends with a barrier so
// scratch can be reused at once.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = group_sum<kWarp>(v);
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  if (threadIdx.x % kWarp == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// ---- TF32 tensor cores ----------------------------------------------------------------------

__device__ __forceinline__ uint32_t to_tf32(float f) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}

// D += A * B for one m16n8k8 TF32 tile (fp32 accumulate). Fragment layout (g = lane/4,
// t = lane%4): a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (k=t, n=g), b1 (k=t+4, n=g);
// d0 (g, 2t), d1 (g, 2t+1), d2 (g+8, 2t), d3 (g+8, 2t+1).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- host-side checks -----------------------------------------------------------------------

// The message is built only on failure (the launchers run on the forward path: no allocation).
inline void require_aligned16(const void* ptr, const char* name) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    throw Error(std::string(name) + " must be 16-byte aligned for the vector loads");
  }
}

}  // namespace mhc::cuda
