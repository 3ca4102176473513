// The fused mHC boundary for large token counts on sm_90 (issue 17): one launch does the previous
// site's post (x = bf16(post * F + comb^T x_prev)), the next sublayer's input path with the
// carried pre_mix (collapse, RMSNorm, weight) and this site's coefficient path (TF32 prenorm GEMM
// and sum of squares over x, split-K, stats), forming x once and feeding the GEMM from the
// registers that hold it. Per token it moves x_prev and F in, x and layer_input out: 4C(n + 1)
// bytes, against 4C(n + 1) + 2nC for the post + next input launch followed by the coefficient
// launch, which reads x again (docs/benchmarks.md, "The fused boundary's bytes floor").
//
// Work split. grid = (splits, tiles of 128 or 64 tokens); the splits of a tile share C's stages of
// kColumns columns (64, or 32 for a deeper ring; all n streams of those columns, so that the post
// has every source stream of a column), split s of S taking stages s, s + S, s + 2S, ..., and form
// one thread block cluster. One thread, lane 0 of the first producer warp (after the consumer
// warps), streams each stage through the copy engine: the n x boxes and the F box (a
// tile's tokens x kColumns bf16 each, 128- or 64-byte swizzle) and hc_fn's 32-column boxes of
// every stream for those columns. Consumer warp w owns tokens 16w..16w+15 over the CTA's columns;
// lane (g, t) reads the 16-byte pieces of rows g and g + 8 that are exactly its mma.sync A fragment
// (chunk_mma's layout), forms x there with post_sum (the post kernels' formula: the same bits),
// collapses it with the carried pre_mix (collapse8's sum: the same bf16 y as the row kernels) and
// runs the MMAs of the n streams' K chunks from the same registers. x and y go back into the stage
// (over x_prev and F) and the copy engine stores the tile's rows as whole lines once every consumer
// warp is done with the stage: from registers, the lanes' 16-byte stores left the kernel bound
// by store transactions (docs/decisions.md, "The fused boundary at large batches").
//
// The norm needs the whole row, which the cluster's CTAs share: each CTA writes its y (unscaled)
// to layer_input, sends its per-token sums of y^2 to every CTA of the cluster (distributed shared
// memory), and after one cluster barrier each CTA scales its own columns in place (read back,
// from L2 where it still is; the staged FP8 form stages y elsewhere and quantises in that pass,
// the folded one quantises y * w as each stage is formed and scales only the group scales:
// sm90_boundary_fp8.cuh). The GEMM's split partials stay in each CTA's shared
// memory and the cluster reduces them and shares the stats (finish_prenorm_tile_in_cluster, the
// TMA kernel's cluster epilogue: no workspace, no arrival counter). Every order is fixed by the
// shape and the split count (not by M), but the GEMM's K order (column stage, then stream) and the
// norm's sum order are not those of the unfused kernels: coefficients and layer_input agree with
// them within the TF32 tier, not bitwise; x is bitwise the post kernel's. hc_fn reaches the tensor
// cores truncated to TF32, as in the wgmma kernel (chunk_mma's kTruncateWeights). TF32 projection
// only; not in batch-invariant mode (the executor keeps the unfused launches there).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/core/sm90_boundary_plan.hpp"
#include "mhc/cuda/post.cuh"
#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/sm90_boundary_fp8.cuh"
#include "mhc/cuda/sm90_boundary_stages.cuh"
#include "mhc/cuda/sm90_post_cluster.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"

namespace mhc::cuda {

// The tile heights, stage widths and split limit (kBoundary*) and the stage and ring sizes are the
// launch-shape rules' (mhc/core/sm90_boundary_plan.hpp), so that policy and kernel agree.
static_assert(kBoundaryMaxSplits == kPostClusterMaxCtas, "a tile's splits: one cluster");

template <int kStreams, int kColumns = kBoundaryStageColumns, int kTileRows = kBoundaryRowsPerTile>
struct BoundaryShape {
  static constexpr bool kWide = kColumns == kBoundaryWideColumns;
  static_assert(kColumns == 64 || kColumns == 32 || kWide, "64, 32 or 128 columns per stage");
  static_assert(kWide ? kTileRows == kBoundaryWideTileRows
                      : kTileRows == kBoundaryRowsPerTile || kTileRows == kBoundaryHalfTileRows,
                "128 or 64 tokens per tile, 32 with 128-column stages");
  static constexpr int kStreamCount = kStreams;
  static constexpr int kNmix = kStreams * (kStreams + 2);
  static constexpr int kNTiles = kNmix / 8;
  static constexpr int kStride = kNmix + 1;
  // Warps per 16 rows: one, or with the wide stages four, each taking one 32-column chunk of every
  // stage (its own K order: other bits than the other shapes, within the TF32 tier); the others
  // add their partials to the first's after the stage loop (combine_column_warps). Two, each on a
  // 64-column line, put the n = 4 consumers (at ptxas's 255) into a spill.
  static constexpr int kColumnWarps = kWide ? 4 : 1;
  static constexpr int kRowWarps = kTileRows / 16;
  static constexpr int kConsumerWarps = kRowWarps * kColumnWarps;
  static constexpr int kRows = kTileRows;
  // Producer warps issue every copy, loads and stores, and wait until the stores have read the
  // stage, so that the consumers wait for nothing but their data (docs/decisions.md, "The
  // fused boundary at large batches"). 64-row tiles take
  // one (160 threads: at 255 registers each they still fit the register file once). 128-row and
  // wide tiles (8 consumer warps) take a warpgroup of four (384 threads, so 168 registers a thread
  // at launch), whose registers go to the consumers by setmaxnreg: the n = 4 consumers need about
  // 200, and one ninth warp would have put three warps on one scheduler and every thread at 168
  // (ptxas spilled).
  static constexpr bool kRegisterSplit = kConsumerWarps == 8;
  static constexpr int kProducerWarps = kRegisterSplit ? 4 : 1;
  static constexpr int kThreads = kWarp * (kConsumerWarps + kProducerWarps);
  // setmaxnreg's per-thread counts with the register split: the producers while they stream, the
  // consumers while they compute, everyone in the epilogue (multiples of 8, within the file).
  static constexpr int kProducerRegisters = 96;
  static constexpr int kConsumerRegisters = 200;
  static constexpr int kEpilogueRegisters = 152;
  static_assert(!kRegisterSplit ||
                    (kConsumerWarps * kConsumerRegisters + kProducerWarps * kProducerRegisters) *
                            kWarp <=
                        65536 - 1024,
                "the register split fits the register file at launch (168 a thread)");
  static_assert(!kRegisterSplit || kConsumerWarps % 4 == 0, "consumers in whole warpgroups");
  static constexpr int kStageColumns = kColumns;
  static constexpr int kChunks = kColumns / 32;                 // 32-column MMA chunks per stage
  static constexpr int kWarpChunks = kChunks / kColumnWarps;    // of them, a consumer warp's
  static constexpr int kRowBytes = kWide ? 128 : kColumns * 2;  // a box line: the swizzle's span
  static constexpr int kLines = kColumns * 2 / kRowBytes;       // lines per row of a box
  static constexpr int kBoxBytes = kRows * kColumns * 2;        // an x or F box: kRows x kColumns
  static constexpr int kWBoxK = 32;                             // fp32 per hc_fn box row
  static constexpr int kWBoxBytes = kNmix * 128;
  static constexpr int kFOffset = kStreams * kBoxBytes;
  static constexpr int kWOffset = kFOffset + kBoxBytes;
  static constexpr int kStageBytes = kWOffset + kStreams * kChunks * kWBoxBytes;
  static_assert(kStageBytes == boundary_stage_bytes(kStreams, kColumns, kTileRows),
                "the rules' stage bytes are the layout's");
  // As many stages as fit beside the static shared memory: with 64 columns 2 of 104 KB at n = 4,
  // 3 of 52 KB at n = 2 (128-row tiles; 3 of 64 KB at n = 4 with 64 rows); with 32 columns 4 of
  // 52 KB at n = 4, at most 6; the wide stages 2 of 88 KB at n = 4.
  static constexpr int kStages = boundary_ring_stages(kStreams, kColumns, kTileRows);
  static_assert(kStages >= 2, "a ring of at least two stages");
  static constexpr int kAlign = 1024;  // both swizzles repeat within 1024 bytes
  static constexpr int kSmemBytes = kStages * kStageBytes + kAlign;
  static constexpr int kMaxSplits = kBoundaryMaxSplits;
  static_assert(kBoxBytes % kAlign == 0 && kWBoxBytes % kAlign == 0, "boxes stay aligned");
  // The epilogue's use of the idle ring: the split sums and staged outputs, then the norm's two
  // buffers of kScaleSlots 16-byte vectors per thread (detail::scale_layer_input).
  static constexpr int kEpilogueBytes =
      ((kRows * kStride + staged_output_floats<kStreams>(kRows)) * int(sizeof(float)) + 15) / 16 *
      16;
  static constexpr int kScaleSlots = (kStages * kStageBytes - kEpilogueBytes) / (2 * kThreads * 16);
  static_assert(kScaleSlots >= 4, "the idle stage ring holds the epilogue and the norm's buffers");
};

// The columns a tile's splits share: C's stages of kColumns columns, split s of S taking stages
// s, s + S, s + 2S, ... (interleaved, so that the cluster's CTAs write neighbouring pieces of the
// same rows at about the same time: measured faster than contiguous ranges per split;
// docs/decisions.md, "The fused boundary at large batches").
struct BoundaryColumns {
  int hidden = 0;
};

namespace detail {

// The norm's scale of every row of the tile, in every CTA of the cluster: each CTA's per-row sums
// of y^2 (row_sum_sq[rank][row], written into every CTA's shared memory), added in rank order.
// With several CTAs it ends the relaxed arrival made at the kernel's start; one CTA (launched
// without a cluster) keeps to its own shared memory. All threads of the CTA call it.
template <class S>
__device__ __forceinline__ void exchange_row_norms(float (&row_sum_sq)[S::kMaxSplits][S::kRows],
                                                   float* row_scale, const float (&mine)[2],
                                                   const int (&rows)[2], int rank, int ctas,
                                                   int hidden, float eps_n) {
  // Not the producer warp, whose rows start at kRows.
  const bool writer = rows[0] < S::kRows && threadIdx.x % 4 == 0;
  if (ctas == 1) {
    if (writer) row_sum_sq[0][rows[0]] = mine[0], row_sum_sq[0][rows[1]] = mine[1];
    __syncthreads();
  } else {
    cluster_wait();  // every CTA of the cluster has started: its shared memory can be written
    if (writer) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        store_cluster_shared_all(&row_sum_sq[rank][rows[h]], ctas, mine[h]);
      }
    }
    cluster_arrive();
    cluster_wait();
  }
  for (int row = int(threadIdx.x); row < S::kRows; row += S::kThreads) {
    float total = 0.f;
    for (int q = 0; q < ctas; ++q) total += row_sum_sq[q][row];
    row_scale[row] = rms_scale(total, hidden, eps_n);
  }
  __syncthreads();
}

// Scales this CTA's columns (its stages of kStageColumns) of the tile's rows in place: layer_input
// = bf16(y * scale * w), the row kernels' formula (rms_norm_store), y read back from L2. Thread t
// owns one 8-column vector (t % vecs, or t, t + kThreads, ... when the CTA has more vectors than
// threads) in rows t / vecs, t / vecs + groups, ...: the vector's norm weights are loaded once and
// no index is divided per row. Its rows come back by asynchronous copies into `staging` (the idle
// stage ring: kSlots vectors per thread in each of two buffers, [slot][thread] so that a warp's
// accesses are contiguous), one batch landing while the thread scales the other: a CTA scales
// hundreds of KB here, and loads into registers would leave too few bytes in flight to cover L2's
// latency. Each thread reads back only what it copied, so the copies need no barrier. Not inlined:
// inlined, it pushes the consumers' register allocation at n = 4 into a spill.
// Out (sm90_boundary_fp8.cuh; made from `args`, the kernel's __grid_constant__ parameter, so that
// the reference costs no copy) stores the scaled vector: over y as bf16, or as FP8 codes and group
// scales (then layer_input is the staged y).
template <int kThreads, int kSlots, int kStageColumns, class Out>
__device__ __noinline__ void scale_layer_input(uint16_t* layer_input, const float* norm_weight,
                                               const float* row_scale, int64_t row0, int rows_valid,
                                               int hidden, int split, int splits, uint4* staging,
                                               const PrenormArgs& args) {
  const Out out = Out::from(args, hidden);
  constexpr int kVecsPerStage = kStageColumns / kBf16PerVec;
  const int vecs = boundary_split_stages(split, splits, hidden / kStageColumns) * kVecsPerStage;
  if (vecs <= 0) return;
  const int tid = static_cast<int>(threadIdx.x);
  const int groups = vecs >= kThreads ? 1 : kThreads / vecs;  // threads per column vector
  if (tid >= groups * vecs) return;
  const int col_stride = groups == 1 ? kThreads : vecs;
  const int row_first = groups == 1 ? 0 : tid / vecs;
  const int count = rows_valid > row_first ? (rows_valid - row_first + groups - 1) / groups : 0;
  const int batches = (count + kSlots - 1) / kSlots;
  const int64_t row_step = int64_t(groups) * hidden;  // elements between a thread's rows
  for (int v = tid % vecs; v < vecs; v += col_stride) {
    const int c =
        (split + v / kVecsPerStage * splits) * kStageColumns + v % kVecsPerStage * kBf16PerVec;
    uint16_t* first = layer_input + (row0 + row_first) * hidden + c;
    auto fetch = [&](int batch) {  // one commit group per batch, possibly empty
      uint4* buffer = staging + (batch & 1) * kSlots * kThreads + tid;
      for (int j = 0; j < kSlots && batch * kSlots + j < count; ++j) {
        cp_async_16(buffer + j * kThreads, first + (batch * kSlots + j) * row_step, true);
      }
      cp_async_commit();
    };
    fetch(0);
    const float4 w0 = load_weight_f4(norm_weight + c);
    const float4 w1 = load_weight_f4(norm_weight + c + 4);
    float wv[8];
    unpack_f4x2(w0, w1, wv);
    for (int b = 0; b < batches; ++b) {
      fetch(b + 1);  // empty past the last batch: the wait below then covers batch b
      cp_async_wait<1>();
      const uint4* buffer = staging + (b & 1) * kSlots * kThreads + tid;
      for (int j = 0; j < kSlots && b * kSlots + j < count; ++j) {
        const int k = b * kSlots + j;
        float y[8];
        unpack_bf16x8(buffer[j * kThreads], y);
        const float scale = row_scale[row_first + k * groups];
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = y[e] * scale * wv[e];
        out.store8(first + k * row_step, row0 + row_first + k * groups, c, o);
      }
    }
    cp_async_wait<0>();  // the empty group; the buffers are reused by the next column vector
  }
}

// finish_prenorm_tile_in_cluster, not inlined: inlined, it pushes the n = 4 consumers' register
// allocation (at ptxas's 255) into a spill, as scale_layer_input would. `args` is the kernel's
// __grid_constant__ parameter, so the reference costs no copy.
template <int kStreams, int kThreads, int kRows>
__device__ __noinline__ void finish_boundary_tile(const PrenormArgs& args, int64_t row0,
                                                  int rows_valid, const float* sums, int rank,
                                                  int ctas, float* scratch) {
  finish_prenorm_tile_in_cluster<kStreams, kThreads, kRows>(args, row0, rows_valid, sums, rank,
                                                            ctas, scratch);
}

}  // namespace detail

// args: the coefficient path's (partials, counters, coefficient parameters and outputs), with
// args.previous (x_prev, post, comb, F, x_out) and args.input (pre_mix, norm weight or null,
// layer_input, eps_n) set; args.splits CTAs per tile, one cluster. Out: the layer_input's form
// (sm90_boundary_fp8.cuh); with BoundaryFp8Out, args.input.fp8 is the output and
// args.input.layer_input the bf16 [T, C] buffer the unscaled y is staged in; with
// BoundaryFp8FoldedOut, args.input.fp8 is the output and args.input.layer_input is not written.
template <int kStreams, int kColumns, int kTileRows, class Out = BoundaryBf16Out>
__global__ void __launch_bounds__(BoundaryShape<kStreams, kColumns, kTileRows>::kThreads, 1)
    sm90_boundary_kernel(const __grid_constant__ PrenormArgs args, const BoundaryColumns cols,
                         const __grid_constant__ CUtensorMap x_map,
                         const __grid_constant__ CUtensorMap f_map,
                         const __grid_constant__ CUtensorMap w_map,
                         const __grid_constant__ CUtensorMap x_out_map,
                         const __grid_constant__ CUtensorMap y_map) {
// The body exists in the sm_90a image only (the plan offers the kernel nowhere else).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = BoundaryShape<kStreams, kColumns, kTileRows>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[S::kStages], empty[S::kStages];
  __shared__ float row_sum_sq[S::kMaxSplits][S::kRows];
  __shared__ float row_scale[S::kRows];
  __shared__ float comb_t[S::kRows][kStreams * kStreams];  // per row (BoundaryRow)
  __shared__ float post_pre_mix[S::kRows][2 * kStreams];
  __shared__ int is_last_cta;
  // This split's stages, looked up where the stage loop needs them: computed there (split + i x
  // splits) they keep values live that push the n = 4 consumers (at ptxas's 255) into a spill.
  __shared__ uint16_t stage_of[kBoundaryMaxSplitStages];
  // The folded FP8 form's: the quantiser warps' arrivals per slot, and the partial scale of each
  // (group of the CTA, tile row) until the row factors are known.
  static_assert(
      !Out::kFold || (S::kWide && S::kRegisterSplit && kBoundaryFoldWarps < S::kProducerWarps),
      "the folded form: wide stages, quantised by the producer warpgroup's spare warps");
  __shared__ uint64_t quantised[Out::kFold ? S::kStages : 1];
  __shared__ float fold_scale[Out::kFold ? kBoundaryFoldMaxGroups : 1][Out::kFold ? S::kRows : 1];
  const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) % S::kAlign;
  unsigned char* stages = smem_raw + (misalign == 0 ? 0 : S::kAlign - misalign);
  if (args.splits > 1) cluster_arrive_relaxed();

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int split = blockIdx.x;  // the CTA's rank in its tile's cluster
  const int64_t tile = blockIdx.y;
  const int64_t row0 = tile * S::kRows;
  const int rows_valid = tile_rows_valid<S::kRows>(args.tokens, row0);
  const int hidden = cols.hidden;
  const int stage_count = boundary_split_stages(split, args.splits, hidden / S::kStageColumns);

  if (threadIdx.x == 0) {  // the copies' descriptors, ahead of the producer's first copy
    prefetch_tensor_map(&x_map);
    prefetch_tensor_map(&f_map);
    prefetch_tensor_map(&w_map);
    prefetch_tensor_map(&x_out_map);
    prefetch_tensor_map(&y_map);
  }
  init_ring_barriers<S::kStages>(full, empty, S::kConsumerWarps);
  if constexpr (Out::kFold) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < S::kStages; ++s) mbarrier_init(&quantised[s], kBoundaryFoldWarps);
      mbarrier_init_fence();
    }
  }
  for (int i = threadIdx.x; i < stage_count; i += S::kThreads) {
    stage_of[i] = static_cast<uint16_t>(split + i * args.splits);
  }
  __syncthreads();
  allow_dependents();
  wait_for_producer();  // x_prev, F and the coefficients come from earlier kernels

  const int g = lane / 4;
  const int row_of_g = detail::row_of_mma_row<S>(g);  // tile rows of MMA rows g and g + 8
  const bool consumer = warp < S::kConsumerWarps;     // else a producer warp
  // A consumer warp's 16 rows (warp % kRowWarps) and its chunks of each stage (warp / kRowWarps,
  // with two column warps); the producer warps' rows start past the tile.
  const int row_warp = consumer ? warp % S::kRowWarps : warp;
  // The warp's chunk of each stage with column warps (0 without: a constant, so that the other
  // shapes' code stays as it was).
  const int column = S::kColumnWarps > 1 && consumer ? warp / S::kRowWarps : 0;
  int rows[2] = {row_warp * 16 + row_of_g, row_warp * 16 + row_of_g + 8};
  if constexpr (S::kColumnWarps > 1) {
    // The rows' coefficients before the roles part: the column 0 warps write them, every column
    // warp reads them, and a CTA barrier orders the two. (Not a named barrier of the consumer
    // warps: with one, compute-sanitizer's racecheck reports races across later CTA barriers,
    // between consumer writes and producer-warpgroup reads.)
    if (consumer && column == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        detail::load_boundary_row<kStreams>(args, row0 + rows[h], rows[h] < rows_valid, lane % 4,
                                            comb_t[rows[h]], post_pre_mix[rows[h]]);
      }
    }
    __syncthreads();
  }
  float acc[1][S::kNTiles][4] = {};
  float sumsq[1][2] = {};
  float y_sum_sq[2] = {0.f, 0.f};
  const auto consume = [&](bool is_consumer) {
    detail::consume_tile<S>(args, row0, rows_valid, is_consumer, rows, column, comb_t, post_pre_mix,
                            stages, full, empty, stage_count, acc, sumsq, y_sum_sq);
  };
  const auto produce = [&] {
    detail::produce_boundary<S, Out::kFold>(&x_map, &f_map, &w_map, &x_out_map, &y_map, stages,
                                            full, empty, quantised, cols.hidden, stage_of,
                                            stage_count, row0);
  };
  if constexpr (S::kRegisterSplit) {
    // Each warpgroup changes its registers together and meets its own warps (the producers', or
    // every consumer's) before it changes them again (setmaxnreg's rule); every thread runs the
    // epilogue at kEpilogueRegisters.
    if (!consumer) {
      detail::registers_lower<S::kProducerRegisters>();
      if (warp == S::kConsumerWarps && lane == 0) produce();
      if constexpr (Out::kFold) {
        const int quant_warp = warp - S::kConsumerWarps - 1;
        if (quant_warp >= 0 && quant_warp < kBoundaryFoldWarps) {
          detail::quantise_folded_stages<S>(args, stages, empty, quantised, stage_of, stage_count,
                                            row0, rows_valid, hidden, quant_warp, fold_scale);
        }
      }
      detail::named_barrier<1, S::kProducerWarps * kWarp>();
      detail::registers_raise<S::kEpilogueRegisters>();
    } else {
      detail::registers_raise<S::kConsumerRegisters>();
      consume(true);
      detail::named_barrier<2, S::kConsumerWarps * kWarp>();
      detail::registers_lower<S::kEpilogueRegisters>();
    }
  } else {
    // The producer warp streams every stage first, then runs the consumers' code over no stages
    // (its rows, from kRows on, hold nothing): a branch around the consumers' loop instead puts
    // the n = 4 consumers into a spill at 255 registers.
    if (!consumer && lane == 0) produce();
    consume(consumer);
  }
  // The norm reads y back from layer_input: the producer waited until its stores were written.
  // Every stage consumed: the ring is idle and holds the epilogue's sums and staged outputs.
  __syncthreads();
  if constexpr (S::kColumnWarps > 1) {
    // The other column warps' partials into the first's; then they hold no rows (as a producer
    // warp: past the tile, so that they write no row sums and store no fragments).
    detail::combine_column_warps<S>(reinterpret_cast<float*>(stages), warp, acc, sumsq, y_sum_sq);
    if (warp >= S::kRowWarps) rows[0] = rows[1] = warp * 16 + row_of_g;
  }
  // With the cluster epilogue each CTA's totals stay in its own shared memory (the tile's CTAs
  // are one cluster, which reduces them through distributed shared memory); else they go to the
  // workspace for the tile's last CTA.
  const bool in_cluster = args.cluster_epilogue && args.splits > 1;
  float* sums = reinterpret_cast<float*>(stages);
  float* staging = sums + S::kRows * S::kStride;
  const int n_out_padded = padded_partial_floats<kStreams>(rows_valid);
  float* tile_partials = args.partials + row0 * S::kStride * args.splits;
  float* dest =
      in_cluster || args.splits == 1 ? sums : tile_partials + int64_t(split) * n_out_padded;
  // The producer warp's rows (from kRows on) are past rows_valid: it stores nothing.
  store_fragment_rows<kStreams>(dest, warp * 16, rows_valid, acc[0], sumsq[0], row_of_g, lane % 4);
  if (args.input.norm_weight != nullptr) {
    detail::exchange_row_norms<S>(row_sum_sq, row_scale, y_sum_sq, rows, split, args.splits, hidden,
                                  args.input.eps_n);
    if constexpr (Out::kFold) {
      // The codes are out; the group scales take the row factors (the quantiser warps' partial
      // scales are ordered before this by the CTA barriers since the roles joined).
      detail::write_folded_scales<S>(args.input.fp8, fold_scale, row_scale, stage_of, stage_count,
                                     row0, rows_valid);
    } else {
      detail::scale_layer_input<S::kThreads, S::kScaleSlots, S::kStageColumns, Out>(
          args.input.layer_input, args.input.norm_weight, row_scale, row0, rows_valid, hidden,
          static_cast<int>(blockIdx.x), args.splits,
          reinterpret_cast<uint4*>(stages + S::kEpilogueBytes), args);
    }
  } else if (args.splits > 1) {
    cluster_wait();  // the plain collapse: y is the output; only end the start's arrival
  }
  if (!in_cluster) {
    finish_prenorm_tile<kStreams, S::kThreads, S::kRows>(
        args, tile, row0, rows_valid, sums, tile_partials, n_out_padded, staging, &is_last_cta);
  } else {
    detail::finish_boundary_tile<kStreams, S::kThreads, S::kRows>(args, row0, rows_valid, sums,
                                                                  split, args.splits, staging);
  }
#endif
}

// How many clusters of `ctas` CTAs (1..kMaxSplits) of the kernel the device holds at once
// (cudaOccupancyMaxActiveClusters: one CTA per SM, clusters within a GPC), into *clusters. The
// bf16 kernel's: the FP8 forms have its threads and ring, which set the count (the folded form's
// few KB more of static shared memory still leave one CTA per SM).
template <int kStreams, int kColumns, int kTileRows>
cudaError_t sm90_boundary_cluster_capacity(int ctas, int* clusters) {
  using S = BoundaryShape<kStreams, kColumns, kTileRows>;
  return max_active_clusters(sm90_boundary_kernel<kStreams, kColumns, kTileRows>, ctas, S::kThreads,
                             S::kSmemBytes, clusters);
}

// launch_sm90_boundary's preconditions besides prenorm_args_valid: 1..kMaxSplits CTAs per tile
// (one cluster; the row norms' exchange has a slot per rank), no leaves (the epilogue reduces one
// partial block per split), C a whole number of kColumns-column stages with K = n x C, every
// split's stages within the kernel's table (boundary_fits_table), and the previous post and the
// input path, which the kernel always reads and writes. The FP8 forms also need their codes and
// scales, C a whole number of groups, CTAs that own whole groups (boundary_fp8_fits; the folded
// form: the wide stages, float scales and a CTA's groups within its table, boundary_fold_fits)
// and the norm weight: its quantisation is the norm's pass (with the plain collapse the launcher
// runs the bf16 kernel and the group quantisation; a pass of the FP8 kernel without the norm, its
// call in the no-norm branch, failed ptxas's register allocation at the consumers' 200).
template <int kStreams, int kColumns, int kTileRows, class Out = BoundaryBf16Out>
inline bool boundary_args_valid(const PrenormArgs& a, const BoundaryColumns& cols) {
  using S = BoundaryShape<kStreams, kColumns, kTileRows>;
  const bool fold_ok = !Out::kFold || (kColumns == kBoundaryWideColumns && !a.input.fp8.ue8m0 &&
                                       boundary_fold_fits(a.splits, cols.hidden));
  const bool fp8_ok = !Out::kFp8 || (a.input.fp8.valid() && cols.hidden % kFp8GroupSize == 0 &&
                                     boundary_fp8_fits(kColumns, a.splits) &&
                                     a.input.norm_weight != nullptr && fold_ok);
  return prenorm_args_valid<kStreams>(a) && a.splits <= S::kMaxSplits && a.leaf_chunks == 0 &&
         cols.hidden > 0 && cols.hidden % S::kStageColumns == 0 && a.k == kStreams * cols.hidden &&
         boundary_fits_table(a.splits, cols.hidden / S::kStageColumns) && a.previous.x != nullptr &&
         a.input.layer_input != nullptr && fp8_ok;
}

// Raw launcher: refuses arguments outside boundary_args_valid (cudaErrorInvalidValue);
// mhc::cuda::prenorm_coefficients (launch_boundary) checks them with messages and runs this only
// where the plan has the TMA kernel (KernelPlan::tma128_available). The tensor maps hold the
// previous x's and F's addresses and the token count: made per launch (a host call, no allocation).
template <int kStreams, int kColumns, int kTileRows, class Out = BoundaryBf16Out>
cudaError_t launch_sm90_boundary(const PrenormArgs& args, const BoundaryColumns& cols,
                                 LaunchTarget on) {
  using S = BoundaryShape<kStreams, kColumns, kTileRows>;
  if (!boundary_args_valid<kStreams, kColumns, kTileRows, Out>(args, cols)) {
    return cudaErrorInvalidValue;
  }
  const CUtensorMapSwizzle swizzle =
      S::kRowBytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  CUtensorMap x_map, f_map, w_map, x_out_map, y_map;
  const uint64_t tokens = uint64_t(args.tokens);
  // x_prev, F and the stores' x and layer_input: the tile's rows of a stage's columns (as 128-byte
  // lines with the wide stages).
  const auto encode_rows = [&](CUtensorMap* map, const void* base, uint64_t inner) {
    return S::kLines == 1 ? encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base,
                                                 inner, tokens, S::kStageColumns, S::kRows, swizzle)
                          : encode_tensor_map_lines(map, base, inner, tokens, S::kLines, S::kRows);
  };
  cudaError_t err = encode_rows(&x_map, args.previous.x, uint64_t(args.k));
  if (err == cudaSuccess) err = encode_rows(&f_map, args.previous.sublayer_out, cols.hidden);
  if (err == cudaSuccess) err = encode_hc_fn_map(&w_map, args.hc_fn, args.k, S::kNmix, S::kWBoxK);
  if (err == cudaSuccess) err = encode_rows(&x_out_map, args.previous.x_out, uint64_t(args.k));
  if (err == cudaSuccess) err = encode_rows(&y_map, args.input.layer_input, cols.hidden);
  if (err != cudaSuccess) return err;
  const auto kernel = sm90_boundary_kernel<kStreams, kColumns, kTileRows, Out>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int64_t tiles = ceil_div(args.tokens, S::kRows);
  const dim3 grid(static_cast<unsigned>(args.splits), static_cast<unsigned>(tiles));
  return launch_kernel_in_clusters(kernel, grid, dim3(S::kThreads), S::kSmemBytes,
                                   static_cast<unsigned>(args.splits), on, args, cols, x_map, f_map,
                                   w_map, x_out_map, y_map);
}

}  // namespace mhc::cuda
