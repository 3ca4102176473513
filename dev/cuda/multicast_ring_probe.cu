// Developer probe (not a test; built by CMake as mhc_multicast_ring_probe when CUDA is on): the
// whole-row tile prototype's ring (dev/cuda/rowtile_boundary.cuh) reduced to its
// synchronisation, for compute-sanitizer racecheck. A producer lane refills a two-slot ring of
// shared memory by bulk copies; consumer warps wait for a slot, read it, and hand it back with
// the library's release (a proxy fence, then one arrival per warp). The variants differ only in
// how a slot travels and who is told:
//   0  clusters of 2, rank 0 multicasts every slot to both CTAs, the consumers of both arrive on
//      rank 0's barrier at CTA scope (the prototype's form, and the public multicast pipelines')
//   1  the same, the arrivals released at cluster scope
//   2  one CTA a cluster, a plain bulk copy into its own slot, local arrivals (the library's rings)
//   3  one CTA a cluster, the multicast instruction aimed at itself, local arrivals
//   4  one CTA a cluster, a 2D tensor copy (the library's copy form) into its own slot
//   5  clusters of 2 as in 0, the slot multicast by a 2D tensor copy
// Every thread's sum of what it read is checked against the host's, so a variant that raced in
// fact would show it. Racecheck's verdict on each variant is the point: which form it reports.
// Run on an sm_90 GPU: mhc_multicast_ring_probe [--variant N] [--fills F]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mhc/cuda/sm90_prenorm_tma.cuh"
#include "micro_timing.hpp"
#include "rowtile_boundary.cuh"

namespace {

using namespace mhc::cuda;
using mhc::bench::rowtile::arrive_in_cta;
using mhc::bench::rowtile::bulk_multicast;

constexpr int kSlotBytes = 4096;
constexpr int kSlots = 2;
constexpr int kConsumerWarps = 2;
constexpr int kConsumerThreads = kConsumerWarps * kWarp;
constexpr int kThreads = kConsumerThreads + kWarp;  // the producer warp last

constexpr int kBoxInner = 256, kBoxOuter = kSlotBytes / 4 / kBoxInner;  // a slot as one 2D box

struct ProbeArgs {
  CUtensorMap src_map;  // src as [fills x kBoxOuter][kBoxInner] floats (variant 4)
  const float* src;     // fills x kSlotBytes / 4 floats
  float* sums;          // one per consumer thread of every CTA
  int fills;
};

// `bytes` from global `src` into this CTA's `dst`, the barrier at `bar` told of the bytes.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes,
                                          uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar))
      : "memory");
#endif
}

// A 2D box of `map` at (inner, outer) into `dst` of every CTA in `mask`, each CTA's barrier at
// `bar`'s offset told of the bytes.
__device__ __forceinline__ void tensor_multicast(void* dst, const void* map, int inner, int outer,
                                                 uint64_t* bar, uint16_t mask) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(bar)),
      "h"(mask)
      : "memory");
#endif
}

template <int kVariant>
__device__ void produce(const ProbeArgs& a, unsigned char* ring, uint64_t* full, uint64_t* empty,
                        int rank) {
  constexpr bool kShared = kVariant <= 1 || kVariant == 5;  // one slot for a cluster's two CTAs
  for (int fill = 0; fill < a.fills; ++fill) {
    const int slot = fill % kSlots;
    const unsigned use = unsigned(fill / kSlots);
    if (fill >= kSlots) mbarrier_wait(&full[slot], (use - 1) & 1);
    mbarrier_arrive_expect_bytes(&full[slot], kSlotBytes);
    if (kShared && rank != 0) continue;
    if (fill >= kSlots) mbarrier_wait(&empty[slot], (use - 1) & 1);
    const float* src = a.src + size_t(fill) * (kSlotBytes / 4);
    if constexpr (kVariant == 2) {
      bulk_copy(ring + slot * kSlotBytes, src, kSlotBytes, &full[slot]);
    } else if constexpr (kVariant == 5) {
      tensor_multicast(ring + slot * kSlotBytes, &a.src_map, 0, fill * kBoxOuter, &full[slot], 0x3);
    } else if constexpr (kVariant == 4) {
      tensor_copy_to_shared(ring + slot * kSlotBytes, &a.src_map, 0, fill * kBoxOuter, &full[slot],
                            l2_policy<L2Eviction::normal>());
    } else {
      const uint16_t mask = kShared ? 0x3 : uint16_t(1u << rank);
      bulk_multicast(ring + slot * kSlotBytes, src, kSlotBytes, &full[slot], mask,
                     l2_policy<L2Eviction::normal>());
    }
  }
}

template <int kVariant>
__device__ float consume(const ProbeArgs& a, const unsigned char* ring, uint64_t* full,
                         uint64_t* empty) {
  const int lane = threadIdx.x % kWarp;
  float sum = 0.f;
  for (int fill = 0; fill < a.fills; ++fill) {
    const int slot = fill % kSlots;
    mbarrier_wait(&full[slot], unsigned(fill / kSlots) & 1);
    const float* values = reinterpret_cast<const float*>(ring + slot * kSlotBytes);
    for (int i = threadIdx.x; i < kSlotBytes / 4; i += kConsumerThreads) sum += values[i];
    fence_shared_for_async_writes();
    __syncwarp();
    if (lane != 0) continue;
    if constexpr (kVariant <= 1 || kVariant == 5) {
      arrive_in_cta<kVariant == 1>(&empty[slot], 0);
    } else {
      mbarrier_arrive(&empty[slot]);
    }
  }
  return sum;
}

template <int kVariant>
__global__ void __launch_bounds__(kThreads) probe_kernel(const __grid_constant__ ProbeArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(1024) unsigned char ring[kSlots * kSlotBytes];
  __shared__ uint64_t full[kSlots], empty[kSlots];
  const int rank = cluster_cta_rank();
  const unsigned ctas_per_slot = kVariant <= 1 || kVariant == 5 ? 2 : 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], ctas_per_slot * kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  cluster_arrive();  // every CTA's barriers initialised before the first copy or arrival
  cluster_wait();
  if (threadIdx.x / kWarp == kConsumerWarps) {
    if (threadIdx.x % kWarp == 0) produce<kVariant>(a, ring, full, empty, rank);
  } else {
    a.sums[blockIdx.x * kConsumerThreads + threadIdx.x] = consume<kVariant>(a, ring, full, empty);
  }
  __syncwarp();
  cluster_arrive();  // no CTA leaves while a peer may still arrive on its barriers or copy into it
  cluster_wait();
#endif
}

using Kernel = void (*)(ProbeArgs);
Kernel kernel_for(int variant) {
  switch (variant) {
    case 0:
      return probe_kernel<0>;
    case 1:
      return probe_kernel<1>;
    case 2:
      return probe_kernel<2>;
    case 3:
      return probe_kernel<3>;
    case 4:
      return probe_kernel<4>;
    default:
      return probe_kernel<5>;
  }
}

// Runs one variant on 2 clusters (or 2 CTAs) and checks every consumer thread's sum.
bool run_variant(int variant, int fills, const float* d_src, const std::vector<float>& src) {
  const int ctas = 4, cluster = variant <= 1 || variant == 5 ? 2 : 1;
  float* d_sums = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&d_sums, ctas * kConsumerThreads * sizeof(float)));
  MHC_MICRO_CHECK(cudaMemset(d_sums, 0xff, ctas * kConsumerThreads * sizeof(float)));  // NaN
  ProbeArgs a{};
  a.src = d_src, a.sums = d_sums, a.fills = fills;
  MHC_MICRO_CHECK(encode_tensor_map_2d(&a.src_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, d_src,
                                       kBoxInner, uint64_t(fills) * kBoxOuter, kBoxInner, kBoxOuter,
                                       CU_TENSOR_MAP_SWIZZLE_NONE));
  MHC_MICRO_CHECK(launch_kernel_in_clusters(kernel_for(variant), dim3(ctas), dim3(kThreads), 0,
                                            unsigned(cluster), LaunchTarget(nullptr, false), a));
  MHC_MICRO_CHECK(cudaDeviceSynchronize());
  std::vector<float> sums(ctas * kConsumerThreads);
  MHC_MICRO_CHECK(
      cudaMemcpy(sums.data(), d_sums, sums.size() * sizeof(float), cudaMemcpyDeviceToHost));
  MHC_MICRO_CHECK(cudaFree(d_sums));
  int wrong = 0;
  for (int t = 0; t < kConsumerThreads; ++t) {
    float want = 0.f;  // small integers: every order of the sum is exact
    for (int f = 0; f < fills; ++f) {
      for (int i = t; i < kSlotBytes / 4; i += kConsumerThreads) {
        want += src[size_t(f) * (kSlotBytes / 4) + i];
      }
    }
    for (int c = 0; c < ctas; ++c) wrong += sums[c * kConsumerThreads + t] != want;
  }
  std::printf("variant %d (fills %d): %s (%d of %d sums wrong)\n", variant, fills,
              wrong == 0 ? "PASS" : "FAIL", wrong, ctas * kConsumerThreads);
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int only = -1, fills = 16;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--variant") && has_value) {
      only = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--fills") && has_value) {
      fills = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--variant 0..5] [--fills 1..4096]\n", argv[0]);
      return 2;
    }
  }
  if (only < -1 || only > 5 || fills < 1 || fills > 4096) {
    std::fprintf(stderr, "--variant must be 0..5 and --fills 1..4096\n");
    return 2;
  }
  std::vector<float> src(size_t(fills) * (kSlotBytes / 4));
  for (size_t i = 0; i < src.size(); ++i) src[i] = float((i * 7 + i / 1024) % 13);
  float* d_src = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&d_src, src.size() * sizeof(float)));
  MHC_MICRO_CHECK(
      cudaMemcpy(d_src, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice));
  bool all = true;
  for (int v = 0; v <= 5; ++v) {
    if (only == -1 || only == v) all = run_variant(v, fills, d_src, src) && all;
  }
  MHC_MICRO_CHECK(cudaFree(d_src));
  return all ? 0 : 1;
}
