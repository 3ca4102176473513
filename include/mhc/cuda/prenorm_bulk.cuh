// The coefficient path for large token counts on sm_90: the same arithmetic as
// prenorm_gemm.cuh (same MMA per 32-wide K chunk, same split-K epilogue and stats, so the same
// results), fed by the copy engine instead of per-thread loads.
//
// Why. The register-fed kernel tops out near 60% of copy bandwidth at thousands of tokens: it
// needs ~250 registers a thread for its loads in flight, so one 8-warp CTA fits an SM and the
// SM waits on memory latency (docs/kernels.md, Nsight Compute). Here one producer warp keeps
// kStages stages of x rows and hc_fn rows in flight in shared memory with bulk copies (TMA, no
// registers, a handful of instructions per row), and 8 consumer warps run the MMAs from shared
// memory. hc_fn is read once per 128-token tile and shared by all 8 warps (the register kernel
// re-reads it per 64 tokens).
//
// Work split. grid = (tiles of 128 tokens, K splits), a split a whole number of 128-wide stages.
// Consumer warp w owns tokens 16w..16w+15 of the tile over the whole split, so no cross-warp
// reduction is needed; the split reduction and stats are finish_prenorm_tile's, as in the
// register kernel. Pipeline: full[s] completes when stage s's bytes landed (one producer arrival
// + the copy bytes); empty[s] when all consumer warps are done reading it.
//
// Shared-memory row pitches avoid bank conflicts for the fragment loads: an x row is 256 bytes
// + 64 (rows g and g+1 of a quarter-warp fall in opposite bank halves), an hc_fn row 512 + 16.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/prenorm_common.cuh"

namespace mhc::cuda {

template <int kStreams>
struct BulkShape {
  static constexpr int kNmix = kStreams * (kStreams + 2);
  static constexpr int kNTiles = kNmix / 8;
  static constexpr int kStride = kNmix + 1;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kRows = 16 * kConsumerWarps;
  static constexpr int kThreads = kWarp * (kConsumerWarps + 1);  // + the producer warp
  static constexpr int kStageK = 128;                            // K per stage
  static constexpr int kChunksPerStage = kStageK / 32;
  static constexpr int kStages = 3;
  static constexpr int kXRowBytes = kStageK * 2;
  static constexpr int kWRowBytes = kStageK * 4;
  static constexpr int kXPitch = kXRowBytes + 64;
  static constexpr int kWPitch = kWRowBytes + 16;
  static constexpr int kXBytes = kRows * kXPitch;
  static constexpr int kStageBytes = kXBytes + kNmix * kWPitch;
  static constexpr int kSmemBytes = kStages * kStageBytes;  // dynamic shared memory
  static_assert(kStageBytes % 16 == 0, "every stage and row starts 16-byte aligned");
};

// K chunks (32 wide) per split must be a multiple of this for the bulk kernel.
inline constexpr int kBulkChunksPerStage = BulkShape<4>::kChunksPerStage;
inline constexpr int kBulkRowsPerTile = BulkShape<4>::kRows;

namespace detail {

// The producer warp: for each stage of the split, waits until the consumers released the slot,
// announces the bytes, and issues one bulk copy per x row (valid tokens only) and hc_fn row.
template <int kStreams>
__device__ __forceinline__ void produce_stages(const PrenormArgs& args, unsigned char* stages,
                                               uint64_t* full, uint64_t* empty, int64_t row0,
                                               int rows_valid, int stage_begin, int stage_count) {
  using S = BulkShape<kStreams>;
  const int lane = threadIdx.x % kWarp;
  const int64_t k = args.k;
  for (int i = 0; i < stage_count; ++i) {
    const int s = i % S::kStages;
    if (i >= S::kStages) mbarrier_wait(&empty[s], unsigned(i / S::kStages - 1) & 1u);
    unsigned char* x_stage = stages + s * S::kStageBytes;
    unsigned char* w_stage = x_stage + S::kXBytes;
    const int64_t k0 = int64_t(stage_begin + i) * S::kStageK;
    if (lane == 0) {
      mbarrier_arrive_expect_bytes(&full[s],
                                   unsigned(rows_valid * S::kXRowBytes + S::kNmix * S::kWRowBytes));
    }
    __syncwarp();
    for (int r = lane; r < rows_valid; r += kWarp) {
      bulk_copy_to_shared(x_stage + r * S::kXPitch, args.x + (row0 + r) * k + k0, S::kXRowBytes,
                          &full[s]);
    }
    for (int r = lane; r < S::kNmix; r += kWarp) {
      bulk_copy_to_shared(w_stage + r * S::kWPitch, args.hc_fn + r * k + k0, S::kWRowBytes,
                          &full[s]);
    }
  }
}

// A consumer warp: the MMAs of its 16 tokens over every stage of the split.
template <int kStreams, bool kCompensated>
__device__ __forceinline__ void consume_stages(const unsigned char* stages, uint64_t* full,
                                               uint64_t* empty, int stage_count, int row_base,
                                               float (&acc)[1][kStreams * (kStreams + 2) / 8][4],
                                               float (&sumsq)[1][2]) {
  using S = BulkShape<kStreams>;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  for (int i = 0; i < stage_count; ++i) {
    const int s = i % S::kStages;
    mbarrier_wait(&full[s], unsigned(i / S::kStages) & 1u);
    const unsigned char* x_stage = stages + s * S::kStageBytes;
    const unsigned char* w_stage = x_stage + S::kXBytes;
#pragma unroll
    for (int c = 0; c < S::kChunksPerStage; ++c) {
      uint4 xv[1][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        xv[0][h] = *reinterpret_cast<const uint4*>(x_stage + (row_base + h * 8 + g) * S::kXPitch +
                                                   c * 64 + t * 16);
      }
      float4 wv[S::kNTiles][2];
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        const float* w =
            reinterpret_cast<const float*>(w_stage + (nt * 8 + g) * S::kWPitch) + c * 32 + t * 8;
        wv[nt][0] = *reinterpret_cast<const float4*>(w);
        wv[nt][1] = *reinterpret_cast<const float4*>(w + 4);
      }
      chunk_mma<kStreams, 1, kCompensated>(xv, wv, acc, sumsq);
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[s]);
  }
}

}  // namespace detail

template <int kStreams, bool kCompensated>
__global__ void __launch_bounds__(BulkShape<kStreams>::kThreads, 1)
    prenorm_bulk_kernel(const PrenormArgs args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = BulkShape<kStreams>;
  extern __shared__ __align__(128) unsigned char stages[];
  __shared__ uint64_t full[S::kStages], empty[S::kStages];
  __shared__ float sums[S::kRows * S::kStride];
  __shared__ int is_last_cta;

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t tile = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t row0 = tile * S::kRows;
  const int rows_valid =
      args.tokens - row0 < S::kRows ? static_cast<int>(args.tokens - row0) : S::kRows;
  const int stage_begin = split * (args.chunks_per_split / S::kChunksPerStage);
  const int stage_end =
      min(args.k / S::kStageK, stage_begin + args.chunks_per_split / S::kChunksPerStage);
  const int stage_count = stage_end - stage_begin;

  // Rows past the last token are never copied; zero them once so the MMAs read defined values
  // (their results are dropped, and a row's MMA outputs depend only on that row).
  if (rows_valid < S::kRows) {
    constexpr int kVecsPerRow = S::kXPitch / 16;
    const int per_stage = (S::kRows - rows_valid) * kVecsPerRow;
    for (int i = threadIdx.x; i < S::kStages * per_stage; i += S::kThreads) {
      const int s = i / per_stage, r = rows_valid + (i % per_stage) / kVecsPerRow;
      store_u4(stages + s * S::kStageBytes + r * S::kXPitch + (i % kVecsPerRow) * 16,
               make_uint4(0, 0, 0, 0));
    }
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], S::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  allow_dependents();
  wait_for_producer();  // x comes from the previous kernel

  const int n_out_padded = padded_partial_floats<kStreams>(rows_valid);
  float* tile_partials = args.partials + row0 * S::kStride * args.splits;
  if (warp == S::kConsumerWarps) {
    detail::produce_stages<kStreams>(args, stages, full, empty, row0, rows_valid, stage_begin,
                                     stage_count);
  } else {
    float acc[1][S::kNTiles][4] = {};
    float sumsq[1][2] = {};
    detail::consume_stages<kStreams, kCompensated>(stages, full, empty, stage_count, warp * 16, acc,
                                                   sumsq);
    sumsq[0][0] = group_sum<4>(sumsq[0][0]);
    sumsq[0][1] = group_sum<4>(sumsq[0][1]);
    float* dest = args.splits == 1 ? sums : tile_partials + int64_t(split) * n_out_padded;
    store_fragment_rows<kStreams>(dest, warp * 16, rows_valid, acc[0], sumsq[0], lane / 4,
                                  lane % 4);
  }
  finish_prenorm_tile<kStreams, S::kThreads>(args, tile, row0, rows_valid, sums, tile_partials,
                                             n_out_padded, &is_last_cta);
#endif
}

// Raw launcher: no argument checks (mhc::cuda::prenorm_coefficients does them, and runs this only
// where bulk_copies_enabled()). args.chunks_per_split must be a multiple of kBulkChunksPerStage.
template <int kStreams, bool kCompensated>
cudaError_t launch_prenorm_bulk(const PrenormArgs& args, cudaStream_t stream) {
  using S = BulkShape<kStreams>;
  const auto kernel = prenorm_bulk_kernel<kStreams, kCompensated>;
  // Per call rather than once: the attribute is per device, and a process may drive several.
  if (const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(args.tokens, S::kRows)),
                  static_cast<unsigned>(args.splits));
  return launch_kernel(kernel, grid, dim3(S::kThreads), S::kSmemBytes, stream, args);
}

}  // namespace mhc::cuda
