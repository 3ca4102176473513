// One stage of the fused boundary's pipeline (sm90_boundary.cuh), for its BoundaryShape S: the
// copies in (x_prev, F, hc_fn), a consumer warp's post, collapse and MMAs of its rows, the copies
// out (x, y), and the loops that run them: the producer warp's and the consumers'.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/post.cuh"
#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"

namespace mhc::cuda::detail {

// setmaxnreg (sm_90a): the warpgroup's per-thread register count, raised (waits until the
// CTA's pool holds them) or lowered (returns them). Every warp of the warpgroup executes the same
// one, and the warpgroup synchronises (named_barrier) before its next.
template <unsigned kRegisters>
__device__ __forceinline__ void registers_raise() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}
template <unsigned kRegisters>
__device__ __forceinline__ void registers_lower() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

// kThreads threads (whole warps) meet at named barrier kId (1..15; 0 is __syncthreads').
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier() {
  static_assert(kId >= 1 && kId < 16 && kThreads % 32 == 0, "a named barrier of whole warps");
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kThreads) : "memory");
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a box of kRowBytes-byte rows with the
// matching swizzle: 128 (chunk ^ row % 8) or 64 (chunk ^ (row / 2) % 4), the copy engine's
// 128- and 64-byte swizzles.
template <int kRowBytes>
__device__ __forceinline__ int box_offset(int row, int chunk) {
  if constexpr (kRowBytes == 128) {
    return swizzled(row, chunk);
  } else {
    static_assert(kRowBytes == 64, "128- or 64-byte box rows");
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
  }
}

// The tile row of MMA row g (0..7) of a warp's 16 rows, permuted so that the two rows a
// quarter-warp reads (g = 2q and 2q + 1) sit in opposite bank halves: with 128-byte rows the
// swizzle's bit 2 is the row's bit 2 (as the TMA kernel's mma.sync consumers); with two lines per
// row (line 2 row) it is the row's bit 1; 64-byte rows g and g + 1 already sit apart.
template <class S>
__device__ __forceinline__ int row_of_mma_row(int g) {
  if constexpr (S::kLines == 2) {
    return ((g >> 1) & 1) | ((g & 1) << 1) | (g & 4);
  } else if constexpr (S::kRowBytes == 128) {
    return (g >> 1) | ((g & 1) << 2);
  } else {
    return g;
  }
}

// A row's coefficients in shared memory (in registers beside the MMA fragments they spill at
// n = 4): comb transposed, comb_t[k][j] = comb[j][k], so that output stream k reads its
// sources' weights as one vector; and per output stream k the pair (post[k], pre_mix[k]).
template <int kStreams>
struct BoundaryRow {
  const float* comb_t;        // [n][n]
  const float* post_pre_mix;  // [n][2]
};

// Writes row `token`'s coefficients (zeros past the batch: its rows are computed from
// zero-filled boxes and never stored); lane t of the row's quad writes output streams k = t,
// t + 4, ... (the warp reads them after a __syncwarp).
template <int kStreams>
__device__ __forceinline__ void load_boundary_row(const PrenormArgs& a, int64_t token, bool valid,
                                                  int t, float* comb_t, float* post_pre_mix) {
  constexpr int n = kStreams;
  for (int k = t; k < n; k += 4) {
    post_pre_mix[2 * k] = valid ? a.previous.post[token * n + k] : 0.f;
    post_pre_mix[2 * k + 1] = valid ? a.input.pre_mix[token * n + k] : 0.f;
#pragma unroll
    for (int j = 0; j < n; ++j) {
      comb_t[k * n + j] = valid ? a.previous.comb[(token * n + j) * n + k] : 0.f;
    }
  }
}

// The copies' L2 policies. hc_fn is re-read by every tile: kept. x_prev and F are read once, but
// take no evict-first hint: with it the kernel's mixed reads and 128-byte row pieces of writes
// move fewer bytes (measured slower); layer_input's y likewise streams better without an
// evict-last hint for the norm's read-back (docs/decisions.md, "The fused boundary at large
// batches"). x goes out first.
struct BoundaryPolicies {
  uint64_t inputs;       // x_prev and F: normal
  uint64_t weights;      // hc_fn: last
  uint64_t x_out;        // x: first
  uint64_t layer_input;  // y, then its scaled rows: normal
};

// One stage's copies: the n x boxes and the F box at (column col, token row0), hc_fn's 32-wide
// boxes (kChunks per stream).
template <class S>
__device__ __forceinline__ void produce_boundary_stage(const CUtensorMap* x_map,
                                                       const CUtensorMap* f_map,
                                                       const CUtensorMap* w_map,
                                                       unsigned char* stage, uint64_t* full,
                                                       int hidden, int col, int64_t row0,
                                                       const BoundaryPolicies& policies) {
  constexpr int kStreams = S::kStreamCount;
  mbarrier_arrive_expect_bytes(full, S::kStageBytes);
#pragma unroll
  for (int j = 0; j <= kStreams; ++j) {  // the n x boxes, then F's
    const CUtensorMap* map = j < kStreams ? x_map : f_map;
    const int column = j < kStreams ? j * hidden + col : col;
    if constexpr (S::kLines == 1) {
      tensor_copy_to_shared(stage + j * S::kBoxBytes, map, column, int(row0), full,
                            policies.inputs);
    } else {
      tensor_copy_3d_to_shared(stage + j * S::kBoxBytes, map, 0, column / 64, int(row0), full,
                               policies.inputs);
    }
  }
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
#pragma unroll
    for (int h = 0; h < S::kChunks; ++h) {
      tensor_copy_to_shared(stage + S::kWOffset + (S::kChunks * j + h) * S::kWBoxBytes, w_map,
                            j * hidden + col + h * S::kWBoxK, 0, full, policies.weights);
    }
  }
}

// One consumer lane's post of its 8 columns of one row: x for every stream (packed bf16, written
// back over x_prev in the stage) and y = the collapse with the carried pre_mix (written over F's
// piece, which this lane alone reads), whose squares go into y_sum_sq; the copy engine stores
// both boxes (produce_boundary). `offset`: the lane's 16-byte piece in every box of the stage.
// Register economy (at n = 4 whole rows in floats spill beside the MMA fragments): x stays packed
// and is widened per output stream, the coefficients are read per output stream. Each value is
// still post_sum's rounded, and y is collapse8's sum (the same fmas in stream order).
template <class S>
__device__ __forceinline__ void boundary_row_post(unsigned char* stage, int offset,
                                                  const BoundaryRow<S::kStreamCount>& r,
                                                  uint4 (&x_packed)[S::kStreamCount],
                                                  float& y_sum_sq) {
  constexpr int n = S::kStreamCount;
  uint4 xv[n];
#pragma unroll
  for (int j = 0; j < n; ++j)
    xv[j] = *reinterpret_cast<const uint4*>(stage + j * S::kBoxBytes + offset);
  float f[8];
  unpack_bf16x8(*reinterpret_cast<const uint4*>(stage + S::kFOffset + offset), f);
  float y[8] = {};
#pragma unroll
  for (int k = 0; k < n; ++k) {
    float comb_to_k[n];
#pragma unroll
    for (int j = 0; j < n; ++j) comb_to_k[j] = r.comb_t[k * n + j];
    const float post_k = r.post_pre_mix[2 * k], pre_mix_k = r.post_pre_mix[2 * k + 1];
    float sums[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float column[n];
#pragma unroll
      for (int j = 0; j < n; ++j) {
        const uint32_t word = word_at(xv[j], e / 2);
        column[j] = e % 2 == 0 ? bf16_lo(word) : bf16_hi(word);
      }
      sums[e] = post_sum<n>(column, f[e], post_k, comb_to_k);
    }
    // Rounded in pairs by the packing conversion; the collapse reads the rounded values back.
    x_packed[k] = pack_bf16x8(sums);
    *reinterpret_cast<uint4*>(stage + k * S::kBoxBytes + offset) = x_packed[k];
    float out[8];
    unpack_bf16x8(x_packed[k], out);
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] = fmaf(pre_mix_k, out[e], y[e]);
  }
  const uint4 y_packed = pack_bf16x8(y);
  float y_rounded[8];
  unpack_bf16x8(y_packed, y_rounded);
#pragma unroll
  for (int e = 0; e < 8; ++e) y_sum_sq = fmaf(y_rounded[e], y_rounded[e], y_sum_sq);
  *reinterpret_cast<uint4*>(stage + S::kFOffset + offset) = y_packed;
}

// The copies out of one stage: the tile's rows of x's n boxes and of y's (over F; not with
// kStoreY false: the folded FP8 form quantises y from the stage instead), not yet committed; rows
// past the batch are clipped by the copy engine.
template <class S, bool kStoreY = true>
__device__ __forceinline__ void store_boundary_rows(const CUtensorMap* x_out_map,
                                                    const CUtensorMap* y_map,
                                                    const unsigned char* stage, int hidden, int col,
                                                    int64_t row0,
                                                    const BoundaryPolicies& policies) {
  const int row = static_cast<int>(row0);
#pragma unroll
  for (int k = 0; k < S::kStreamCount + (kStoreY ? 1 : 0); ++k) {  // the n x boxes, then y's
    const bool x = k < S::kStreamCount;
    const CUtensorMap* map = x ? x_out_map : y_map;
    const int column = x ? k * hidden + col : col;
    const uint64_t policy = x ? policies.x_out : policies.layer_input;
    if constexpr (S::kLines == 1) {
      tensor_copy_to_global(map, column, row, stage + k * S::kBoxBytes, policy);
    } else {
      tensor_copy_3d_to_global(map, 0, column / 64, row, stage + k * S::kBoxBytes, policy);
    }
  }
}

// A consumer warp's work on one stage: per 32-column chunk of its own (all kChunks, or with
// column warps the kWarpChunks of its column), the post of its two rows, then the MMAs of the n
// streams' K chunks from the packed x (chunk_mma; sum of squares of x included). A chunk's piece
// of a row: with the wide stages' two 128-byte lines per row, line 2 row + chunk / 2.
template <class S>
__device__ __forceinline__ void consume_boundary_stage(
    unsigned char* stage, const int (&rows)[2], int column,
    const BoundaryRow<S::kStreamCount> (&coefs)[2], float (&acc)[1][S::kNTiles][4],
    float (&sumsq)[1][2], float (&y_sum_sq)[2]) {
  constexpr int n = S::kStreamCount;
  constexpr int kLineChunks = S::kChunks / S::kLines;  // 32-column chunks per box line
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < S::kWarpChunks; ++i) {
    const int c = S::kColumnWarps == 1 ? i : column * S::kWarpChunks + i;  // chunk of the stage
    uint4 x_packed[2][n];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int piece =
          box_offset<S::kRowBytes>(rows[h] * S::kLines + c / kLineChunks, c % kLineChunks * 4 + t);
      boundary_row_post<S>(stage, piece, coefs[h], x_packed[h], y_sum_sq[h]);
    }
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const unsigned char* w_box = stage + S::kWOffset + (S::kChunks * k + c) * S::kWBoxBytes;
      const uint4 xv[1][2] = {{x_packed[0][k], x_packed[1][k]}};
      float4 wv[S::kNTiles][2];
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        wv[nt][0] = *reinterpret_cast<const float4*>(w_box + swizzled(nt * 8 + g, 2 * t));
        wv[nt][1] = *reinterpret_cast<const float4*>(w_box + swizzled(nt * 8 + g, 2 * t + 1));
      }
      chunk_mma<n, 1, false, /*kTruncateWeights=*/true>(xv, wv, acc, sumsq);
    }
  }
}

// The producer warp's lane 0 fills the ring; per stage, once every consumer warp has arrived on
// computed[s], it stores the tile's x and y boxes of the stage, waits until the copy engine has
// read them and refills the slot with stage i + kStages; at the end it waits until every store is
// written (the norm reads y back). kFold (the folded FP8 form): y is not stored, and the refill
// also waits until the quantiser warps have read the slot's y (they arrive on quantised[s]).
template <class S, bool kFold = false>
__device__ __noinline__ void produce_boundary(
    const CUtensorMap* x_map, const CUtensorMap* f_map, const CUtensorMap* w_map,
    const CUtensorMap* x_out_map, const CUtensorMap* y_map, unsigned char* stages, uint64_t* full,
    uint64_t* computed, uint64_t* quantised, int hidden, const uint16_t* stage_of, int stage_count,
    int64_t row0) {
  const BoundaryPolicies policies{l2_policy<L2Eviction::normal>(), l2_policy<L2Eviction::last>(),
                                  l2_policy<L2Eviction::first>(), l2_policy<L2Eviction::normal>()};
  auto issue = [&](int stage) {
    const int slot = stage % S::kStages;
    produce_boundary_stage<S>(x_map, f_map, w_map, stages + slot * S::kStageBytes, &full[slot],
                              hidden, stage_of[stage] * S::kStageColumns, row0, policies);
  };
  for (int i = 0; i < min(S::kStages, stage_count); ++i) issue(i);
  for (int i = 0; i < stage_count; ++i) {
    const int s = i % S::kStages;
    mbarrier_wait(&computed[s], unsigned(i / S::kStages) & 1u);
    store_boundary_rows<S, !kFold>(x_out_map, y_map, stages + s * S::kStageBytes, hidden,
                                   stage_of[i] * S::kStageColumns, row0, policies);
    bulk_commit_group();
    if (i + S::kStages < stage_count) {
      bulk_wait_group_read<0>();
      if constexpr (kFold) mbarrier_wait(&quantised[s], unsigned(i / S::kStages) & 1u);
      issue(i + S::kStages);
    }
  }
  bulk_wait_all_written();
}

// A consumer warp: per stage, its rows' work (consume_boundary_stage), then its writes fenced
// for the copy engine and the stage handed to the producer.
template <class S>
__device__ __forceinline__ void consume_boundary_ring(
    unsigned char* stages, uint64_t* full, uint64_t* computed, int stage_count,
    const int (&rows)[2], int column, const float* comb_t, const float* post_pre_mix,
    float (&acc)[1][S::kNTiles][4], float (&sumsq)[1][2], float (&y_sum_sq)[2]) {
  constexpr int n = S::kStreamCount;
  int s = 0;
  unsigned phase = 0;
#pragma unroll 1
  for (int i = 0; i < stage_count; ++i) {
    mbarrier_wait(&full[s], phase);
    const BoundaryRow<n> coefs[2] = {{comb_t + rows[0] * n * n, post_pre_mix + rows[0] * 2 * n},
                                     {comb_t + rows[1] * n * n, post_pre_mix + rows[1] * 2 * n}};
    consume_boundary_stage<S>(stages + s * S::kStageBytes, rows, column, coefs, acc, sumsq,
                              y_sum_sq);
    release_ring_slot(&computed[s]);
    if (++s == S::kStages) s = 0, phase ^= 1u;
  }
}

// A warp's part of the tile: its rows' coefficients into shared memory (consumers only; with
// column warps the kernel has loaded them), then consume_boundary_ring over
// `stage_count` stages (none for a producer warp), then the quads' sums of squares. rows[h]: tile
// row of MMA row g + 8h; column: the warp's column of the stage (0 without column warps).
template <class S>
__device__ __forceinline__ void consume_tile(const PrenormArgs& args, int64_t row0, int rows_valid,
                                             bool consumer, const int (&rows)[2], int column,
                                             float (*comb_t)[S::kStreamCount * S::kStreamCount],
                                             float (*post_pre_mix)[2 * S::kStreamCount],
                                             unsigned char* stages, uint64_t* full,
                                             uint64_t* computed, int stage_count,
                                             float (&acc)[1][S::kNTiles][4], float (&sumsq)[1][2],
                                             float (&y_sum_sq)[2]) {
  if constexpr (S::kColumnWarps == 1) {
    if (consumer) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        load_boundary_row<S::kStreamCount>(args, row0 + rows[h], rows[h] < rows_valid,
                                           threadIdx.x % 4, comb_t[rows[h]], post_pre_mix[rows[h]]);
      }
    }
    __syncwarp();  // the warp's rows' coefficients, written by their quads
  }                // with column warps the kernel loaded them before the roles parted
  consume_boundary_ring<S>(stages, full, computed, consumer ? stage_count : 0, rows, column,
                           &comb_t[0][0], &post_pre_mix[0][0], acc, sumsq, y_sum_sq);
  quad_sums(sumsq[0]);
  quad_sums(y_sum_sq);
}

// With column warps: after the stage loop (and a CTA barrier) the other column warps of each 16
// rows hand their lanes' partials (the MMA fragments, the sums of squares of x and y) through
// `scratch` (the idle ring) to the column 0 warp, which adds them to its own in column order.
// Every thread of the CTA calls it (it holds CTA barriers).
template <class S>
__device__ __forceinline__ void combine_column_warps(float* scratch, int warp,
                                                     float (&acc)[1][S::kNTiles][4],
                                                     float (&sumsq)[1][2], float (&y_sum_sq)[2]) {
  constexpr int kValues = S::kNTiles * 4 + 4;  // per lane: the fragments, then four sums
  const int lane = threadIdx.x % kWarp;
  // Slot of (column q >= 1, row warp r): kValues x 32 floats.
  const auto slot = [&](int q, int r) {
    return scratch + ((q - 1) * S::kRowWarps + r) * kValues * kWarp + lane;
  };
  if (warp >= S::kRowWarps && warp < S::kConsumerWarps) {
    float* mine = slot(warp / S::kRowWarps, warp % S::kRowWarps);
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[(nt * 4 + e) * kWarp] = acc[0][nt][e];
    }
    mine[(kValues - 4) * kWarp] = sumsq[0][0];
    mine[(kValues - 3) * kWarp] = sumsq[0][1];
    mine[(kValues - 2) * kWarp] = y_sum_sq[0];
    mine[(kValues - 1) * kWarp] = y_sum_sq[1];
  }
  __syncthreads();
  if (warp < S::kRowWarps) {
    for (int q = 1; q < S::kColumnWarps; ++q) {
      const float* theirs = slot(q, warp);
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][nt][e] += theirs[(nt * 4 + e) * kWarp];
      }
      sumsq[0][0] += theirs[(kValues - 4) * kWarp];
      sumsq[0][1] += theirs[(kValues - 3) * kWarp];
      y_sum_sq[0] += theirs[(kValues - 2) * kWarp];
      y_sum_sq[1] += theirs[(kValues - 1) * kWarp];
    }
  }
  __syncthreads();  // the scratch is the epilogue's next
}

}  // namespace mhc::cuda::detail
