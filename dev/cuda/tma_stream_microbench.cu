// Developer micro-benchmark (not a test; built by CMake as mhc_tma_stream_microbench when CUDA is
// on): how fast the copy engine streams the prenorm GEMM's x, a [M, K] bf16 matrix read once,
// into shared memory, with nothing else in the kernel. A producer thread fills a ring of stages
// with 2D tensor copies, a consumer warp only waits for each stage and releases it. Variants:
// the box shape (tokens x K bytes) and swizzle, the ring, the grid, hc_fn's boxes beside x (as
// the TMA-fed kernel, sm90_prenorm_tma.cuh, loads them), and a plain vectorised read. The
// question it answers: is the TMA kernel's streaming (about 3.6-3.95 TB/s of x at 4096-8192
// tokens, docs/kernels.md) limited by its box shape and ring, or by the memory system?
// Run on an sm_90 GPU: build/dev/mhc_tma_stream_microbench [tokens...].
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"
#include "micro_timing.hpp"

namespace {

using namespace mhc::cuda;

constexpr int kK = 20480;  // n * C at C = 5120, n = 4
constexpr int kNmix = 24;
constexpr int kMaxStages = 16;

struct Variant {
  const char* name;
  int box_k;     // bf16 per box row
  int box_rows;  // tokens per box (= per tile)
  bool swizzle;  // 128-byte swizzle (box rows of 128 bytes) or none
  int boxes;     // boxes along K per stage
  int stages;    // ring depth
  int splits;    // CTAs per tile along K
  bool weights;  // hc_fn's boxes of the stage's K beside x (NMIX rows x 32 fp32 each)
};

struct Geometry {
  int stage_k, x_bytes, w_bytes, stage_bytes, stage_count;
};

Geometry geometry(const Variant& v) {
  Geometry g;
  g.stage_k = v.box_k * v.boxes;
  g.x_bytes = v.box_k * v.box_rows * 2 * v.boxes;
  g.w_bytes = v.weights ? (g.stage_k / 32) * kNmix * 128 : 0;
  g.stage_bytes = (g.x_bytes + g.w_bytes + 1023) / 1024 * 1024;
  g.stage_count = kK / g.stage_k;
  return g;
}

// grid (tiles, splits); thread 0 of warp 1 produces, warp 0 consumes.
__global__ void __launch_bounds__(64)
    stream_kernel(const __grid_constant__ CUtensorMap x_map,
                  const __grid_constant__ CUtensorMap w_map, Variant v, Geometry g, int* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) % 1024;
  unsigned char* stages = smem_raw + (misalign == 0 ? 0 : 1024 - misalign);
  if (threadIdx.x == 0) {
    for (int s = 0; s < v.stages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], 1);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const int per_split = (g.stage_count + v.splits - 1) / v.splits;
  const int begin = blockIdx.y * per_split;
  const int count = min(g.stage_count, begin + per_split) - begin;
  const int row0 = blockIdx.x * v.box_rows;
  if (threadIdx.x == 32) {
    const uint64_t stream_policy = l2_policy<L2Eviction::first>();
    const uint64_t weight_policy = l2_policy<L2Eviction::last>();
    for (int i = 0; i < count; ++i) {
      const int s = i % v.stages;
      if (i >= v.stages) mbarrier_wait(&empty[s], unsigned(i / v.stages - 1) & 1u);
      unsigned char* stage = stages + s * g.stage_bytes;
      const int k0 = (begin + i) * g.stage_k;
      mbarrier_arrive_expect_bytes(&full[s], g.x_bytes + g.w_bytes);
      for (int b = 0; b < v.boxes; ++b) {
        tensor_copy_to_shared(stage + b * v.box_k * v.box_rows * 2, &x_map, k0 + b * v.box_k, row0,
                              &full[s], stream_policy);
      }
      for (int b = 0; b < g.w_bytes / (kNmix * 128); ++b) {
        tensor_copy_to_shared(stage + g.x_bytes + b * kNmix * 128, &w_map, k0 + b * 32, 0, &full[s],
                              weight_policy);
      }
    }
  } else if (threadIdx.x < 32) {
    int acc = 0;
    for (int i = 0; i < count; ++i) {
      const int s = i % v.stages;
      mbarrier_wait(&full[s], unsigned(i / v.stages) & 1u);
      acc += stages[s * g.stage_bytes + threadIdx.x * 16];
      fence_shared_for_async_writes();
      __syncwarp();
      if (threadIdx.x == 0) mbarrier_arrive(&empty[s]);
    }
    if (acc == 0x7fffffff) *sink = acc;  // keeps the reads
  }
#endif
}

// The plain read: every thread sums 16-byte vectors, grid-stride.
__global__ void read_kernel(const uint4* x, int64_t vecs, int* sink) {
  uint32_t acc = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < vecs; i += 4 * stride) {
    uint4 a[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) a[u] = __ldcs(x + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= a[u].x ^ a[u].y ^ a[u].z ^ a[u].w;
  }
  for (; i < vecs; i += stride) {
    const uint4 a = __ldcs(x + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x7fffffffu) *sink = int(acc);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> token_counts;
  for (int i = 1; i < argc; ++i) token_counts.push_back(std::atoi(argv[i]));
  if (token_counts.empty()) token_counts = {4096, 8192};
  int sms = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  uint16_t* x = nullptr;
  float* w = nullptr;
  int* sink = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&x, size_t(max_tokens) * kK * 2));
  MHC_MICRO_CHECK(cudaMalloc(&w, size_t(kNmix) * kK * 4));
  MHC_MICRO_CHECK(cudaMalloc(&sink, 4));
  MHC_MICRO_CHECK(cudaMemset(x, 0x3c, size_t(max_tokens) * kK * 2));
  MHC_MICRO_CHECK(cudaMemset(w, 0, size_t(kNmix) * kK * 4));
  // splits: 0 = fill the SMs once (tiles x splits ~ SMs), as the TMA kernel's heuristic.
  const std::vector<Variant> variants = {
      {"now: 128 tok x 128 B sw128, 2 boxes, 4 stages, +hc_fn", 64, 128, true, 2, 4, 0, true},
      {"same, x only", 64, 128, true, 2, 4, 0, false},
      {"128 tok x 128 B, 4 boxes (64 KB), 2 stages, +hc_fn", 64, 128, true, 4, 2, 0, true},
      {"128 tok x 128 B, 1 box, 8 stages, +hc_fn", 64, 128, true, 1, 8, 0, true},
      {"64 tok x 128 B, 2 boxes, 8 stages, +hc_fn", 64, 64, true, 2, 8, 0, true},
      {"256 tok x 128 B, 1 box, 5 stages, +hc_fn", 64, 256, true, 1, 5, 0, true},
      {"32 tok x 512 B no swizzle, 2 boxes, 6 stages, x only", 256, 32, false, 2, 6, 0, false},
      {"64 tok x 512 B no swizzle, 1 box, 6 stages, x only", 256, 64, false, 1, 6, 0, false},
      {"now, 2 CTAs per SM (2 stages each)", 64, 128, true, 2, 2, -2, true},
  };
  std::printf("%-58s %6s %6s %9s %7s\n", "variant", "tokens", "CTAs", "us", "TB/s");
  for (int tokens : token_counts) {
    const double bytes = double(tokens) * kK * 2;
    for (const Variant& base : variants) {
      Variant v = base;
      const Geometry g = geometry(v);
      const int tiles = (tokens + v.box_rows - 1) / v.box_rows;
      const int per_sm = v.splits < 0 ? -v.splits : 1;
      if (v.splits <= 0) v.splits = std::max(1, std::min(g.stage_count, per_sm * sms / tiles));
      CUtensorMap x_map, w_map;
      MHC_MICRO_CHECK(encode_tensor_map_2d(
          &x_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, x, kK, tokens, v.box_k, v.box_rows,
          v.swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE));
      MHC_MICRO_CHECK(encode_tensor_map_2d(&w_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, w, kK, kNmix,
                                           32, kNmix));
      const int smem = v.stages * g.stage_bytes + 1024;
      MHC_MICRO_CHECK(
          cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const dim3 grid(tiles, v.splits);
      const float us = mhc::bench::median_launch_us(
          [&] { stream_kernel<<<grid, 64, smem>>>(x_map, w_map, v, g, sink); }, 20);
      std::printf("%-58s %6d %6d %9.2f %7.3f\n", v.name, tokens, tiles * v.splits, us,
                  bytes / us * 1e-6);
    }
    for (int blocks_per_sm : {4, 8}) {
      const int blocks = blocks_per_sm * sms;
      const int64_t vecs = int64_t(tokens) * kK / 8;
      const float us = mhc::bench::median_launch_us(
          [&] { read_kernel<<<blocks, 256>>>(reinterpret_cast<const uint4*>(x), vecs, sink); }, 20);
      char name[64];
      std::snprintf(name, sizeof name, "plain ld.global.cs read, %d x 256 threads per SM",
                    blocks_per_sm);
      std::printf("%-58s %6d %6d %9.2f %7.3f\n", name, tokens, blocks, us, bytes / us * 1e-6);
    }
  }
  MHC_MICRO_CHECK(cudaFree(x));
  MHC_MICRO_CHECK(cudaFree(w));
  MHC_MICRO_CHECK(cudaFree(sink));
  return 0;
}
