// The 16-row decode kernel's split reduction without an arrival counter ("flagged partials"):
// every split stores its partial values as 8-byte (value, written flag) pairs, and one CTA per
// row of the tile polls that row's pairs, adds them in the order of the last CTA's reduction
// (reduce_splits: the same bits), runs the row's stats and stores them.
//
// Why. With the counter a split's partial must be published (a GPU-scope release: its stores
// acknowledged), counted by an atomic (an L2 round trip) and read back by the tile's last CTA
// (another), one after the other on the launch's serial tail at decode sizes (docs/decisions.md,
// "The decode coefficient launch"). A pair is one single-copy-atomic 8-byte store, so a load that
// finds the flag set has the value: the first load that sees a pair written is the one that reads
// it. And a tile's rows are reduced and their stats run on as many SMs, not in one CTA.
//
// The flag is a bit pattern no arithmetic produces (a negative NaN with every payload bit set;
// the GPU's own NaN is 0x7fffffff), so plain partials that other launches leave in the shared
// workspace never read as written; the reducer clears every pair it read before it leaves, so
// the next flagged launch finds none set. A workspace starts zeroed (SiteWorkspace; mhc._C's
// workspace contract).
//
// Progress. A reducer spins until its tile's other CTAs have stored, so they must get SMs while
// it spins. The reducers are the last CTAs of the launch's split CTAs (flagged_reducer_row), and
// the GPU hands out CTAs in the order of their linear index, so every writer has had an SM
// before any reducer starts: a reducer never waits for a CTA that cannot start, even on one free
// SM. That order is the hardware's practice, not a documented promise; a spin that outlasts
// kFlaggedPollCycles traps (an error, not a hang).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/prenorm_common.cuh"

namespace mhc::cuda {

// A flagged launch's tiles take twice the floats of plain partials; the workspace's first
// 128-token block holds four 16-row tiles of them at its split count.
inline constexpr int kFlaggedMaxTiles = 4;
inline constexpr int kFlaggedRows = 16;
// The most splits a reducer's shared scratch holds: every decode split count a plan rule gives
// (kPrenormDecodeSplitLimit). The kernel is also built with a reducer for at most 40 (the decode
// split count but under the decode-stage rule), whose fewer loads per thread measure faster there
// (docs/decisions.md, "The decode coefficient launch").
inline constexpr int kFlaggedMaxSplits = 64;
inline constexpr int kFlaggedNarrowSplits = 40;
inline constexpr uint32_t kPairWritten = 0xffffffffu;
inline constexpr long long kFlaggedPollCycles = 1ll << 34;  // about 9 s at 1.98 GHz

// Whether a launch of the 16-row kernel can take flagged partials: more than one split and at most
// kFlaggedMaxSplits, no batch-invariant leaves, at most kFlaggedMaxTiles tiles, a reducing CTA
// per row (the tile's rows at most its CTAs), and room for the pairs in the workspace.
__host__ __device__ inline bool decode_flagged_fits(const PrenormArgs& args, int nmix,
                                                    int64_t partial_capacity) {
  const int ctas = args.split_ctas > 0 ? args.split_ctas : args.splits;
  const int64_t tiles = (args.tokens + kFlaggedRows - 1) / kFlaggedRows;
  const int64_t widest_tile = args.tokens < kFlaggedRows ? args.tokens : kFlaggedRows;
  const int64_t pair_floats = 2 * tiles * kFlaggedRows * int64_t(args.splits) * (nmix + 1);
  return args.leaf_chunks == 0 && args.splits >= 2 && args.splits <= kFlaggedMaxSplits &&
         tiles >= 1 && tiles <= kFlaggedMaxTiles && widest_tile <= ctas &&
         pair_floats <= partial_capacity;
}

// The row CTA `cta` of a tile's `ctas` split CTAs reduces, or -1: the last rows_valid CTAs take
// rows 0.. in order (decode_flagged_fits: rows_valid <= ctas).
__device__ __forceinline__ int flagged_reducer_row(int cta, int ctas, int rows_valid) {
  const int row = cta - (ctas - rows_valid);
  return row >= 0 ? row : -1;
}

namespace detail {

// Tile `tile`'s pairs: [kFlaggedRows][splits][NMIX + 1], each row's contiguous so that its
// reducer's loads coalesce.
template <int kStreams>
__device__ __forceinline__ uint64_t* flagged_tile_pairs(const PrenormArgs& args, int64_t tile) {
  constexpr int kStride = kStreams * (kStreams + 2) + 1;
  return reinterpret_cast<uint64_t*>(args.partials) + tile * kFlaggedRows * args.splits * kStride;
}

__device__ __forceinline__ void store_written_pair(uint64_t* pair, float value) {
  const uint64_t word = uint64_t(__float_as_uint(value)) | uint64_t(kPairWritten) << 32;
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(pair), "l"(word) : "memory");
}

__device__ __forceinline__ uint64_t load_pair(const uint64_t* pair) {
  uint64_t word;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(word) : "l"(pair) : "memory");
  return word;
}

__device__ __forceinline__ bool pair_written(uint64_t word) {
  return uint32_t(word >> 32) == kPairWritten;
}

// The `count` values at pairs[0], pairs[stride], ... once each is written, then the pairs
// cleared. Every load is issued before any is waited for; only the pairs not yet written are
// loaded again.
template <int kMax>
__device__ __forceinline__ void poll_values(uint64_t* pairs, int64_t stride, int count,
                                            float (&values)[kMax]) {
  uint64_t word[kMax];
#pragma unroll
  for (int s = 0; s < kMax; ++s) {
    word[s] = s < count ? load_pair(pairs + s * stride) : uint64_t(kPairWritten) << 32;
  }
  const long long start = clock64();
  for (;;) {
    bool all = true;
#pragma unroll
    for (int s = 0; s < kMax; ++s) all &= pair_written(word[s]);
    if (all) break;
    if (clock64() - start > kFlaggedPollCycles) __trap();
#pragma unroll
    for (int s = 0; s < kMax; ++s) {
      if (!pair_written(word[s])) word[s] = load_pair(pairs + s * stride);
    }
  }
#pragma unroll
  for (int s = 0; s < kMax; ++s) values[s] = __uint_as_float(uint32_t(word[s]));
#pragma unroll
  for (int s = 0; s < kMax; ++s) {
    if (s < count) pairs[s * stride] = 0;
  }
}

// One row's totals from its splits' values in `scratch` ([split][kStride]), in reduce_splits'
// order: `width` consecutive threads per value each add the splits l, l + width, ... from zero,
// then a butterfly across them. A thread's kTrips tasks (value, lane) share the lane (kThreads is a
// multiple of width), so they run in one loop over the splits and one chain of shuffle rounds: a
// loop per task put one chain after another on the launch's serial tail. kTrips is the tasks a
// thread needs at this width, not a bound: the guarded spare ones cost a load-add per split.
template <int kStride, int kThreads, int kTrips>
__device__ __forceinline__ void sum_row_splits(const float* scratch, int splits, int width,
                                               float* sums) {
  const int i0 = int(threadIdx.x), tasks = kStride * width;
  const int lane = i0 & (width - 1), width_bits = __ffs(width) - 1;
  float total[kTrips];
#pragma unroll
  for (int trip = 0; trip < kTrips; ++trip) total[trip] = 0.f;
  for (int s = lane; s < splits; s += width) {
#pragma unroll
    for (int trip = 0; trip < kTrips; ++trip) {
      const int task = trip * kThreads + i0;
      if (task < tasks) total[trip] += scratch[s * kStride + (task >> width_bits)];
    }
  }
  group_sum_dynamic(total, width);  // every thread: it shuffles
#pragma unroll
  for (int trip = 0; trip < kTrips; ++trip) {
    const int task = trip * kThreads + i0;
    if (task < tasks && lane == 0) sums[task >> width_bits] = total[trip];
  }
}

}  // namespace detail

// Split `split`'s partial values of the tile's rows (one m16 tile's fragments, warp 0 after the
// warp tree) as written pairs.
template <int kStreams>
__device__ __forceinline__ void store_flagged_partial(
    const PrenormArgs& args, int64_t tile, int split, int rows_valid,
    const float (&acc)[kStreams * (kStreams + 2) / 8][4], const float (&sumsq)[2], int g, int t) {
  constexpr int kStride = kStreams * (kStreams + 2) + 1;
  uint64_t* pairs = detail::flagged_tile_pairs<kStreams>(args, tile);
  const int splits = args.splits;
  for_fragment_rows<kStreams>(0, rows_valid, acc, sumsq, g, t, [&](int row, int i, float v) {
    detail::store_written_pair(pairs + (int64_t(row) * splits + split) * kStride + i, v);
  });
}

// Row `row` of the tile (its flagged_reducer_row): the CTA's threads poll the row's pairs (splits x
// (NMIX + 1), a few each) into `scratch`, sum them in reduce_splits' order at this tile's lanes per
// float4 (split_lanes; the same additions in the same order: the same bits), then warp 0 runs the
// row's stats by kStatsLanes lanes, stored straight to the outputs. At most kMaxSplits splits;
// `scratch`: kMaxSplits * (NMIX + 1) floats of shared memory; `sums`: NMIX + 1.
template <int kStreams, int kThreads, int kMaxSplits>
__device__ __forceinline__ void finish_flagged_row(const PrenormArgs& args, int64_t tile,
                                                   int64_t row0, int rows_valid, int row,
                                                   float* scratch, float* sums) {
  constexpr int kStride = kStreams * (kStreams + 2) + 1;
  constexpr int kPerThread = (kMaxSplits * kStride + kThreads - 1) / kThreads;
  static_assert(kCoefficientParamFloats<kStreams> <= kWarp, "one warp stages the parameters");
  __shared__ float coef_params[kCoefficientParamFloats<kStreams>];
  stage_coefficient_params<kStreams>(args.coef, coef_params);  // its loads overlap the polling
  const int splits = args.splits;
  const int count = splits * kStride;
  const int i0 = int(threadIdx.x);
  float values[kPerThread];
  detail::poll_values(detail::flagged_tile_pairs<kStreams>(args, tile) + int64_t(row) * count + i0,
                      kThreads, (count - i0 + kThreads - 1) / kThreads, values);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (i0 + j * kThreads < count) scratch[i0 + j * kThreads] = values[j];
  }
  __syncthreads();
  const int width =
      detail::split_lanes(padded_partial_floats<kStreams>(rows_valid) / 4, kThreads, splits);
  // Tasks (value, lane) a thread takes: up to four at 1 token (width 32), one from 4 tokens.
  const int trips = (kStride * width + kThreads - 1) / kThreads;
  constexpr int kMaxTrips = (kStride * kWarp + kThreads - 1) / kThreads;
  if (trips == 1) {
    detail::sum_row_splits<kStride, kThreads, 1>(scratch, splits, width, sums);
  } else if (trips == 2) {
    detail::sum_row_splits<kStride, kThreads, 2>(scratch, splits, width, sums);
  } else if constexpr (kMaxTrips > 2) {
    detail::sum_row_splits<kStride, kThreads, kMaxTrips>(scratch, splits, width, sums);
  }
  __syncthreads();
  if (threadIdx.x >= kWarp) return;
  token_coefficients_by_lanes<kStreams>(sums, row0 + row, i0 < kStatsLanes<kStreams>, args.coef,
                                        coef_params, args.out);
}

}  // namespace mhc::cuda
