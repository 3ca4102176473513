// Developer micro-benchmark (not a test; built by CMake as mhc_boundary_stream_microbench when CUDA
// is on): how fast a kernel moves the fused boundary's bytes at large M with nothing computed.
// Per token the boundary reads x_prev (n C bf16) and F (C) and writes x_out (n C) and layer_input
// (C): here a copy-through, x_prev -> x_out and F -> y. Variants: the copy engine with the fused
// boundary's stage shapes (sm90_boundary.cuh: a tile's rows x 64 columns of every stream and of
// F per stage, 128-byte swizzle, hc_fn's boxes beside them, split s of S taking stages s, s + S,
// ..., the splits one cluster; the producer stores a stage's boxes back and refills its slot once
// the copy engine has read them), the same with wider box rows (no swizzle, 256 or 512 bytes per
// row), other L2 promotions, plain 16-byte loads and stores (by whole rows with 2-8 loads in
// flight and evict-first hints or none, by warps' contiguous 2 KB chunks, by one range per CTA,
// and by the boundary's tile pattern), and the runtime's cudaMemcpyAsync of the same bytes. The
// questions it answers: is the fused boundary's streaming (about 3.0-3.4 TB/s of its floor's
// bytes at 4096-8192 tokens on an H200, docs/decisions.md) bound by how its stages cut the rows,
// or by the copy-through itself, and how close do kernels come to the runtime's own copy?
// Run on an sm_90 GPU: mhc_boundary_stream_microbench [--hidden C] [--tokens a,b] [--json F]
//                      [--commit X]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"
#include "micro_report.hpp"
#include "micro_timing.hpp"

namespace {

using namespace mhc::cuda;

constexpr int kStreams = 4;
constexpr int kNmix = 24;
constexpr int kWBoxBytes = kNmix * 128;  // hc_fn: NMIX rows x 32 fp32 per box
constexpr int kMaxStages = 8;

// memcpy: the runtime's device-to-device copies of the same bytes (x_prev -> x_out, F -> y), the
// reference the anchors' copy bandwidth (docs/benchmarks.md) was measured with.
enum class Kind { copy_engine, plain_rows, plain_tiles, memcpy, warp_chunks, cta_ranges };
// How the copy engine cuts a stage's `cols` columns of a stream: one 2D box (128-byte swizzle at
// 64 columns, none wider), 64-column 2D boxes issued one after another (128-byte swizzle), or one
// 3D box of 128-byte lines, {64, cols / 64, rows}, so that the copy engine walks each row's
// cols x 2 contiguous bytes in turn and shared memory keeps the 128-byte swizzle.
enum class Box { flat, boxes64, lines3d };

struct Variant {
  const char* name;
  Kind kind;
  int rows;  // tokens per tile
  int cols;  // bf16 of each stream per stage: 64, 128 or 256
  Box box;
  int stages;    // ring depth (copy engine)
  int splits;    // CTAs per tile, interleaved stages
  bool weights;  // hc_fn's boxes of the stage's columns beside it (from L2, as the kernel's)
  bool cluster;  // a tile's splits as one thread block cluster
  CUtensorMapL2promotion promotion;
  int unroll = 4;                // plain_rows: 16-byte vectors in flight per thread
  int ctas_per_sm = 4;           // plain_rows, warp_chunks, cta_ranges: CTAs of 256 threads per SM
  bool streaming_hints = false;  // plain_rows: ld.global.cs / st.global.cs (evict-first)
};

struct Geometry {
  int hidden;       // C
  int box_bytes;    // rows x cols bf16
  int w_bytes;      // hc_fn's boxes per stage
  int stage_bytes;  // 5 boxes + hc_fn, 1024-aligned
  int tile_stages;  // C / cols
};

Geometry geometry(const Variant& v, int hidden) {
  Geometry g;
  g.hidden = hidden;
  g.box_bytes = v.rows * v.cols * 2;
  g.w_bytes = v.weights ? kStreams * (v.cols / 32) * kWBoxBytes : 0;
  g.stage_bytes = ((kStreams + 1) * g.box_bytes + g.w_bytes + 1023) / 1024 * 1024;
  g.tile_stages = v.cols > 0 ? hidden / v.cols : 0;  // 0: whole rows (plain_rows)
  return g;
}

struct Maps {
  CUtensorMap x, f, w, x_out, y;  // 2D; with Box::lines3d, x, f, x_out and y are 3D
};

// Box k of a stage (stream k < n of x, or F at k = n) at column `col` of its tensor, rows from
// row0, into `dst` / from `src`, cut as v.box says.
__device__ __forceinline__ void copy_in(const Variant& v, const Maps& maps, int k, int col,
                                        int row0, unsigned char* dst, uint64_t* bar,
                                        uint64_t policy) {
  const CUtensorMap* map = k < kStreams ? &maps.x : &maps.f;
  if (v.box == Box::lines3d) {
    tensor_copy_3d_to_shared(dst, map, 0, col / 64, row0, bar, policy);
  } else if (v.box == Box::boxes64) {
    for (int p = 0; p < v.cols / 64; ++p) {
      tensor_copy_to_shared(dst + p * v.rows * 128, map, col + 64 * p, row0, bar, policy);
    }
  } else {
    tensor_copy_to_shared(dst, map, col, row0, bar, policy);
  }
}
__device__ __forceinline__ void copy_out(const Variant& v, const Maps& maps, int k, int col,
                                         int row0, const unsigned char* src, uint64_t policy) {
  const CUtensorMap* map = k < kStreams ? &maps.x_out : &maps.y;
  if (v.box == Box::lines3d) {
    tensor_copy_3d_to_global(map, 0, col / 64, row0, src, policy);
  } else if (v.box == Box::boxes64) {
    for (int p = 0; p < v.cols / 64; ++p) {
      tensor_copy_to_global(map, col + 64 * p, row0, src + p * v.rows * 128, policy);
    }
  } else {
    tensor_copy_to_global(map, col, row0, src, policy);
  }
}

// grid.x = tiles x splits (split fastest, so a cluster is one tile's splits); warp 0 consumes
// (waits for each stage and hands it back), lane 0 of warp 1 produces and stores.
__global__ void __launch_bounds__(64)
    copy_engine_kernel(const __grid_constant__ Maps maps, const Variant v, const Geometry g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kMaxStages], computed[kMaxStages];
  const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) % 1024;
  unsigned char* ring = smem_raw + (misalign == 0 ? 0 : 1024 - misalign);
  if (threadIdx.x == 0) {
    for (int s = 0; s < v.stages; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&computed[s], 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  const int split = blockIdx.x % v.splits;
  const int row0 = (blockIdx.x / v.splits) * v.rows;
  const int count = (g.tile_stages - split + v.splits - 1) / v.splits;
  if (threadIdx.x == 32) {
    const uint64_t in = l2_policy<L2Eviction::normal>(), weights = l2_policy<L2Eviction::last>();
    const uint64_t x_out = l2_policy<L2Eviction::first>(), y = l2_policy<L2Eviction::normal>();
    const auto column = [&](int i) { return (split + i * v.splits) * v.cols; };
    const auto issue = [&](int i) {
      const int slot = i % v.stages, c0 = column(i);
      unsigned char* stage = ring + slot * g.stage_bytes;
      mbarrier_arrive_expect_bytes(&full[slot], (kStreams + 1) * g.box_bytes + g.w_bytes);
      for (int k = 0; k <= kStreams; ++k) {  // the n streams, then F
        copy_in(v, maps, k, k < kStreams ? k * g.hidden + c0 : c0, row0, stage + k * g.box_bytes,
                &full[slot], in);
      }
      unsigned char* w = stage + (kStreams + 1) * g.box_bytes;
      for (int b = 0; b < g.w_bytes / kWBoxBytes; ++b) {
        const int k = b / (v.cols / 32), q = b % (v.cols / 32);
        tensor_copy_to_shared(w + b * kWBoxBytes, &maps.w, k * g.hidden + c0 + 32 * q, 0,
                              &full[slot], weights);
      }
    };
    for (int i = 0; i < min(v.stages, count); ++i) issue(i);
    for (int i = 0; i < count; ++i) {
      const int slot = i % v.stages, c0 = column(i);
      const unsigned char* stage = ring + slot * g.stage_bytes;
      mbarrier_wait(&computed[slot], unsigned(i / v.stages) & 1u);
      for (int k = 0; k <= kStreams; ++k) {
        copy_out(v, maps, k, k < kStreams ? k * g.hidden + c0 : c0, row0, stage + k * g.box_bytes,
                 k < kStreams ? x_out : y);
      }
      bulk_commit_group();
      if (i + v.stages < count) {
        bulk_wait_group_read<0>();
        issue(i + v.stages);
      }
    }
    bulk_wait_all_written();
  } else if (threadIdx.x < 32) {
    for (int i = 0; i < count; ++i) {
      const int slot = i % v.stages;
      mbarrier_wait(&full[slot], unsigned(i / v.stages) & 1u);
      fence_shared_for_async_writes();
      __syncwarp();
      if (threadIdx.x == 0) mbarrier_arrive(&computed[slot]);
    }
  }
#endif
}

// Whole rows: x_prev -> x_out and F -> y as one grid-stride copy of 16-byte vectors, kUnroll
// loads in flight per thread before their stores; with kStreaming, evict-first loads and stores.
template <int kUnroll, bool kStreaming>
__global__ void plain_rows_kernel(const uint4* x, const uint4* f, uint4* x_out, uint4* y,
                                  int64_t x_vecs, int64_t f_vecs) {
  const int64_t total = x_vecs + f_vecs, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += kUnroll * stride) {
    uint4 a[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = i + u * stride;
      if (j < total) {
        const uint4* src = j < x_vecs ? x + j : f + (j - x_vecs);
        a[u] = kStreaming ? __ldcs(src) : *src;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = i + u * stride;
      if (j < total) {
        uint4* dst = j < x_vecs ? x_out + j : y + (j - x_vecs);
        if (kStreaming) {
          __stcs(dst, a[u]);
        } else {
          *dst = a[u];
        }
      }
    }
  }
}

// Each warp copies contiguous 2 KB chunks (lane + 32 u, u < 4: four loads in flight, the warp's
// accesses one contiguous 2 KB), the chunks dealt to the warps grid-stride.
__global__ void warp_chunks_kernel(const uint4* x, const uint4* f, uint4* x_out, uint4* y,
                                   int64_t x_vecs, int64_t f_vecs) {
  const int64_t total = x_vecs + f_vecs;
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t chunk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       chunk * 128 < total; chunk += warps) {
    uint4 a[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t j = chunk * 128 + u * 32 + lane;
      if (j < total) a[u] = j < x_vecs ? x[j] : f[j - x_vecs];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t j = chunk * 128 + u * 32 + lane;
      if (j < total) (j < x_vecs ? x_out[j] : y[j - x_vecs]) = a[u];
    }
  }
}

// Each CTA copies one contiguous range (the sequence cut in gridDim.x parts), its threads
// striding through it with four loads in flight.
__global__ void cta_ranges_kernel(const uint4* x, const uint4* f, uint4* x_out, uint4* y,
                                  int64_t x_vecs, int64_t f_vecs) {
  const int64_t total = x_vecs + f_vecs;
  const int64_t per_cta = (total + gridDim.x - 1) / gridDim.x;
  const int64_t begin = int64_t(blockIdx.x) * per_cta;
  const int64_t end = begin + per_cta < total ? begin + per_cta : total;
  const int64_t stride = blockDim.x;
  for (int64_t i = begin + threadIdx.x; i < end; i += 4 * stride) {
    uint4 a[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t j = i + u * stride;
      if (j < end) a[u] = j < x_vecs ? x[j] : f[j - x_vecs];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t j = i + u * stride;
      if (j < end) (j < x_vecs ? x_out[j] : y[j - x_vecs]) = a[u];
    }
  }
}

using PlainRowsKernel = void (*)(const uint4*, const uint4*, uint4*, uint4*, int64_t, int64_t);
PlainRowsKernel plain_rows_for(int unroll, bool streaming) {
  if (unroll == 8) return streaming ? plain_rows_kernel<8, true> : plain_rows_kernel<8, false>;
  if (unroll == 2) return streaming ? plain_rows_kernel<2, true> : plain_rows_kernel<2, false>;
  return streaming ? plain_rows_kernel<4, true> : plain_rows_kernel<4, false>;
}

// The boundary's pattern without the copy engine: per stage, a tile's rows x `cols` columns of
// every stream and of F, loaded into registers (every vector of the stage in flight) and stored.
template <int kVecsPerThread>
__global__ void __launch_bounds__(256)
    plain_tiles_kernel(const uint16_t* x, const uint16_t* f, uint16_t* x_out, uint16_t* y,
                       const Variant v, const Geometry g) {
  const int split = blockIdx.x % v.splits;
  const int64_t row0 = int64_t(blockIdx.x / v.splits) * v.rows;
  const int vecs_per_row = v.cols / 8, box_vecs = v.rows * vecs_per_row;
  const int64_t x_pitch = int64_t(kStreams) * g.hidden;
  for (int st = split; st < g.tile_stages; st += v.splits) {
    const int c0 = st * v.cols;
    uint4 a[kVecsPerThread];
    int64_t where[kVecsPerThread];  // element offset in x (or in F where is_f)
    bool is_f[kVecsPerThread];
#pragma unroll
    for (int u = 0; u < kVecsPerThread; ++u) {
      const int e = int(threadIdx.x) + u * 256;  // (box, row, vector)
      const int box = e / box_vecs, r = e % box_vecs / vecs_per_row, q = e % vecs_per_row;
      is_f[u] = box == kStreams;
      where[u] = is_f[u] ? (row0 + r) * g.hidden + c0 + q * 8
                         : (row0 + r) * x_pitch + box * g.hidden + c0 + q * 8;
      a[u] = *reinterpret_cast<const uint4*>((is_f[u] ? f : x) + where[u]);
    }
#pragma unroll
    for (int u = 0; u < kVecsPerThread; ++u) {
      *reinterpret_cast<uint4*>((is_f[u] ? y : x_out) + where[u]) = a[u];
    }
  }
}

// Every element its own value (a hash of its index), so that a copy to the wrong place shows.
__global__ void fill_pattern(uint16_t* out, size_t count, uint32_t salt) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) ^ salt * 40503u;
    h ^= h >> 15;
    out[i] = uint16_t(h & 0x3fffu);  // finite bf16 values
  }
}

// Counts the 16-byte vectors of `got` that differ from `want` (a variant that copied nothing
// would otherwise look fast).
__global__ void count_mismatches(const uint4* want, const uint4* got, int64_t vecs,
                                 unsigned long long* mismatches) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs; i += stride) {
    const uint4 a = want[i], b = got[i];
    local += (a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w) ? 1 : 0;
  }
  if (local != 0) atomicAdd(mismatches, local);
}

}  // namespace

int main(int argc, char** argv) {
  mhc::bench::MicroOptions options;
  options.tokens = {4096, 8192};
  if (!mhc::bench::parse_micro_options(argc, argv, false, options)) return 2;
  const int hidden = options.hidden;
  const std::vector<int>& token_counts = options.tokens;
  const char* json_path = options.json_path;
  const std::string& commit = options.commit;
  if (hidden % 256 != 0) {
    std::fprintf(stderr, "--hidden must be a multiple of 256\n");
    return 2;
  }
  int sms = 0, driver = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  MHC_MICRO_CHECK(cudaDriverGetVersion(&driver));
  cudaDeviceProp prop{};
  MHC_MICRO_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  const size_t x_elems = size_t(max_tokens) * kStreams * hidden,
               f_elems = size_t(max_tokens) * hidden;
  uint16_t *x = nullptr, *f = nullptr, *x_out = nullptr, *y = nullptr;
  float* w = nullptr;
  unsigned long long* mismatches = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&mismatches, sizeof(unsigned long long)));
  MHC_MICRO_CHECK(cudaMalloc(&x, x_elems * 2));
  MHC_MICRO_CHECK(cudaMalloc(&x_out, x_elems * 2));
  MHC_MICRO_CHECK(cudaMalloc(&f, f_elems * 2));
  MHC_MICRO_CHECK(cudaMalloc(&y, f_elems * 2));
  MHC_MICRO_CHECK(cudaMalloc(&w, size_t(kNmix) * kStreams * hidden * 4));
  fill_pattern<<<4 * sms, 256>>>(x, x_elems, 1u);
  fill_pattern<<<4 * sms, 256>>>(f, f_elems, 2u);
  MHC_MICRO_CHECK(cudaGetLastError());
  MHC_MICRO_CHECK(cudaMemset(w, 0, size_t(kNmix) * kStreams * hidden * 4));
  constexpr auto k256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  const Kind ce = Kind::copy_engine;
  const Box flat = Box::flat, boxes64 = Box::boxes64, lines3d = Box::lines3d;
  const std::vector<Variant> variants = {
      {"kernel's 64-row tiles: 64 tok x 128 B sw128, 2 splits (cluster), 3 stages, +hc_fn", ce, 64,
       64, flat, 3, 2, true, true, k256},
      {"same, splits not a cluster", ce, 64, 64, flat, 3, 2, true, false, k256},
      {"same, no hc_fn boxes", ce, 64, 64, flat, 3, 2, false, true, k256},
      {"same, L2 promotion 128 B", ce, 64, 64, flat, 3, 2, true, true,
       CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
      {"same, no L2 promotion", ce, 64, 64, flat, 3, 2, true, true,
       CU_TENSOR_MAP_L2_PROMOTION_NONE},
      {"kernel's 128-row tiles: 128 tok x 128 B sw128, 4 splits, 2 stages, +hc_fn", ce, 128, 64,
       flat, 2, 4, true, true, k256},
      {"64 tok x 256 B no swizzle, 2 splits, 2 stages (80 KB), no hc_fn", ce, 64, 128, flat, 2, 2,
       false, true, k256},
      {"64 tok x 2 x 128 B sw128 (3D box), 2 splits, 2 stages (80 KB), no hc_fn", ce, 64, 128,
       lines3d, 2, 2, false, true, k256},
      {"64 tok x 128 B sw128, 2 boxes in turn, 2 splits, 2 stages (80 KB), no hc_fn", ce, 64, 128,
       boxes64, 2, 2, false, true, k256},
      {"32 tok x 512 B no swizzle, 1 split, 2 stages (80 KB), no hc_fn", ce, 32, 256, flat, 2, 1,
       false, false, k256},
      {"32 tok x 4 x 128 B sw128 (3D box), 1 split, 2 stages (80 KB), no hc_fn", ce, 32, 256,
       lines3d, 2, 1, false, false, k256},
      {"16 tok x 512 B no swizzle, 1 split, 4 stages (40 KB), no hc_fn", ce, 16, 256, flat, 4, 1,
       false, false, k256},
      {"32 tok x 256 B no swizzle, 2 splits (cluster), 4 stages (40 KB), no hc_fn", ce, 32, 128,
       flat, 4, 2, false, true, k256},
      {"32 tok x 2 x 128 B sw128 (3D box), 2 splits (cluster), 2 stages, +hc_fn (88 KB)", ce, 32,
       128, lines3d, 2, 2, true, true, k256},
      {"32 tok x 2 x 128 B sw128 (3D box), 2 splits (cluster), 4 stages (40 KB), no hc_fn", ce, 32,
       128, lines3d, 4, 2, false, true, k256},
      {"64 tok x 2 x 128 B sw128 (3D box), 2 splits, 1 stage, +hc_fn (128 KB)", ce, 64, 128,
       lines3d, 1, 2, true, true, k256},
      {"plain 16-byte loads: the 64-row tiles' pattern, 2 splits", Kind::plain_tiles, 64, 64, flat,
       0, 2, false, false, k256},
      {"plain 16-byte loads: whole rows, 4 x 256 threads per SM", Kind::plain_rows, 0, 0, flat, 0,
       0, false, false, k256},
      {"plain 16-byte loads: whole rows, 8 in flight, 4 x 256 threads per SM", Kind::plain_rows, 0,
       0, flat, 0, 0, false, false, k256, 8, 4},
      {"plain 16-byte loads: whole rows, 2 in flight, 8 x 256 threads per SM", Kind::plain_rows, 0,
       0, flat, 0, 0, false, false, k256, 2, 8},
      {"plain 16-byte loads: whole rows, 4 in flight, 8 x 256 threads per SM", Kind::plain_rows, 0,
       0, flat, 0, 0, false, false, k256, 4, 8},
      {"plain 16-byte loads: whole rows, 4 in flight, 4 x 256 per SM, evict-first",
       Kind::plain_rows, 0, 0, flat, 0, 0, false, false, k256, 4, 4, true},
      {"plain 16-byte loads: whole rows, 8 in flight, 2 x 256 per SM, evict-first",
       Kind::plain_rows, 0, 0, flat, 0, 0, false, false, k256, 8, 2, true},
      {"plain 16-byte loads: warps copy contiguous 2 KB chunks, 4 x 256 per SM", Kind::warp_chunks,
       0, 0, flat, 0, 0, false, false, k256, 4, 4},
      {"plain 16-byte loads: warps copy contiguous 2 KB chunks, 8 x 256 per SM", Kind::warp_chunks,
       0, 0, flat, 0, 0, false, false, k256, 4, 8},
      {"plain 16-byte loads: one contiguous range per CTA, 4 x 256 per SM", Kind::cta_ranges, 0, 0,
       flat, 0, 0, false, false, k256, 4, 4},
      {"plain 16-byte loads: one contiguous range per CTA, 8 x 256 per SM", Kind::cta_ranges, 0, 0,
       flat, 0, 0, false, false, k256, 4, 8},
      {"cudaMemcpyAsync device to device: x_prev -> x_out, F -> y", Kind::memcpy, 0, 0, flat, 0, 0,
       false, false, k256},
  };
  std::vector<mhc::bench::MicroRow> rows;
  std::printf("C = %d, n = %d\n%-84s %6s %6s %9s %7s\n", hidden, kStreams, "variant", "tokens",
              "CTAs", "us", "TB/s");
  for (int tokens : token_counts) {
    const double bytes = double(tokens) * hidden * 2 * 2 * (kStreams + 1);  // read + written
    for (const Variant& v : variants) {
      const Geometry g = geometry(v, hidden);
      MHC_MICRO_CHECK(cudaMemset(x_out, 0xff, x_elems * 2));  // poisoned: NaN in bf16
      MHC_MICRO_CHECK(cudaMemset(y, 0xff, f_elems * 2));
      float us = 0.f;
      int ctas = 0;
      if (v.kind == Kind::copy_engine) {
        if (tokens % v.rows != 0 || v.stages > kMaxStages) continue;
        Maps maps{};
        const uint64_t k_total = uint64_t(kStreams) * hidden;
        if (v.box == Box::lines3d) {
          const uint32_t lines = v.cols / 64;
          MHC_MICRO_CHECK(
              encode_tensor_map_lines(&maps.x, x, k_total, tokens, lines, v.rows, v.promotion));
          MHC_MICRO_CHECK(encode_tensor_map_lines(&maps.x_out, x_out, k_total, tokens, lines,
                                                  v.rows, v.promotion));
          MHC_MICRO_CHECK(
              encode_tensor_map_lines(&maps.f, f, hidden, tokens, lines, v.rows, v.promotion));
          MHC_MICRO_CHECK(
              encode_tensor_map_lines(&maps.y, y, hidden, tokens, lines, v.rows, v.promotion));
        } else {
          const int box_cols = v.box == Box::boxes64 ? 64 : v.cols;
          const CUtensorMapSwizzle swizzle =
              box_cols == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
          const auto encode = [&](CUtensorMap* map, const void* base, uint64_t inner) {
            MHC_MICRO_CHECK(encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base,
                                                 inner, tokens, box_cols, v.rows, swizzle,
                                                 v.promotion));
          };
          encode(&maps.x, x, k_total);
          encode(&maps.x_out, x_out, k_total);
          encode(&maps.f, f, hidden);
          encode(&maps.y, y, hidden);
        }
        MHC_MICRO_CHECK(encode_tensor_map_2d(&maps.w, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, w,
                                             k_total, kNmix, 32, kNmix));
        const int smem = v.stages * g.stage_bytes + 1024;
        MHC_MICRO_CHECK(cudaFuncSetAttribute(copy_engine_kernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        ctas = tokens / v.rows * v.splits;
        us = mhc::bench::median_launch_us(
            [&] {
              MHC_MICRO_CHECK(launch_kernel_in_clusters(copy_engine_kernel, dim3(ctas), dim3(64),
                                                        smem, v.cluster ? v.splits : 1,
                                                        LaunchTarget(nullptr, false), maps, v, g));
            },
            20);
      } else if (v.kind == Kind::plain_tiles) {
        constexpr int kVecs = 10;  // 64 rows x 64 columns x 5 boxes / 256 threads
        if (tokens % v.rows != 0 || v.rows * v.cols / 8 * (kStreams + 1) != kVecs * 256) continue;
        ctas = tokens / v.rows * v.splits;
        us = mhc::bench::median_launch_us(
            [&] { plain_tiles_kernel<kVecs><<<ctas, 256>>>(x, f, x_out, y, v, g); }, 20);
      } else if (v.kind == Kind::memcpy) {
        us = mhc::bench::median_launch_us(
            [&] {
              MHC_MICRO_CHECK(cudaMemcpyAsync(x_out, x, size_t(tokens) * kStreams * hidden * 2,
                                              cudaMemcpyDeviceToDevice));
              MHC_MICRO_CHECK(
                  cudaMemcpyAsync(y, f, size_t(tokens) * hidden * 2, cudaMemcpyDeviceToDevice));
            },
            20);
      } else {
        ctas = v.ctas_per_sm * sms;
        const int64_t x_vecs = int64_t(tokens) * kStreams * hidden / 8;
        const int64_t f_vecs = int64_t(tokens) * hidden / 8;
        const PlainRowsKernel kernel = v.kind == Kind::warp_chunks ? warp_chunks_kernel
                                       : v.kind == Kind::cta_ranges
                                           ? cta_ranges_kernel
                                           : plain_rows_for(v.unroll, v.streaming_hints);
        us = mhc::bench::median_launch_us(
            [&] {
              kernel<<<ctas, 256>>>(
                  reinterpret_cast<const uint4*>(x), reinterpret_cast<const uint4*>(f),
                  reinterpret_cast<uint4*>(x_out), reinterpret_cast<uint4*>(y), x_vecs, f_vecs);
            },
            20);
      }
      MHC_MICRO_CHECK(cudaMemset(mismatches, 0, sizeof(unsigned long long)));
      count_mismatches<<<4 * sms, 256>>>(reinterpret_cast<const uint4*>(x),
                                         reinterpret_cast<const uint4*>(x_out),
                                         int64_t(tokens) * kStreams * hidden / 8, mismatches);
      count_mismatches<<<4 * sms, 256>>>(reinterpret_cast<const uint4*>(f),
                                         reinterpret_cast<const uint4*>(y),
                                         int64_t(tokens) * hidden / 8, mismatches);
      unsigned long long wrong = 0;
      MHC_MICRO_CHECK(cudaMemcpy(&wrong, mismatches, sizeof wrong, cudaMemcpyDeviceToHost));
      if (wrong != 0) {
        std::fprintf(stderr, "%s at %d tokens: %llu vectors not copied\n", v.name, tokens, wrong);
        return 1;
      }
      rows.push_back({v.name, tokens, ctas, us, bytes / us * 1e-6});
      std::printf("%-84s %6d %6d %9.2f %7.3f\n", v.name, tokens, ctas, us, bytes / us * 1e-6);
    }
  }
  if (json_path != nullptr) {
    mhc::bench::write_micro_json(
        json_path, "mhc_boundary_stream_microbench (dev/cuda/boundary_stream_microbench.cu)", prop,
        driver, commit, hidden, {},
        "C = " + std::to_string(hidden) +
            ", n = 4: x_prev [M, 4C] and F [M, C] bf16 copied to x_out and y, nothing "
            "computed; one launch per timing between CUDA events, 3 warm-ups, median "
            "of 20; TB/s = bytes read and written (the fused boundary's floor, 4C(n + "
            "1) per token) / time; hc_fn's boxes, from L2, not counted",
        rows);
  }
  MHC_MICRO_CHECK(cudaFree(x));
  MHC_MICRO_CHECK(cudaFree(x_out));
  MHC_MICRO_CHECK(cudaFree(f));
  MHC_MICRO_CHECK(cudaFree(y));
  MHC_MICRO_CHECK(cudaFree(w));
  MHC_MICRO_CHECK(cudaFree(mismatches));
  return 0;
}
