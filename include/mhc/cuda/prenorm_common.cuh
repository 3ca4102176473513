// What the two prenorm GEMM kernels share (prenorm_mma.cuh: register-fed, every size;
// sm90_prenorm_tma.cuh: TMA-fed, large M on sm_90): their arguments, the MMA of one 32-wide K
// chunk, and the epilogue (fragments to rows, the split-K reduction by the tile's last CTA, the
// stats).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mhc/cuda/coefficients.cuh"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/prenorm_reduce.cuh"

namespace mhc::cuda {

struct PrenormArgs {
  const uint16_t* x = nullptr;   // [M, K] bf16 bits
  const float* hc_fn = nullptr;  // [NMIX, K]
  int64_t tokens = 0;
  int k = 0;  // K = n * C, a multiple of 32
  int splits = 1;
  int chunks_per_split = 0;  // 32-wide K chunks per split
  // CTAs per tile that run the splits, each taking every split_ctas-th split in turn (the
  // split-loop instantiation of the 16-row kernel; the same partials, so the same bits). Every
  // other launch runs one CTA per split and ignores it.
  int split_ctas = 0;
  // Batch-invariant mode (docs/batch_invariance.md) when leaf_chunks > 0: K is cut into a power
  // of two of leaves of leaf_chunks chunks, fixed by K alone; a split covers leaves_per_split
  // consecutive leaves (a power of two) and `splits` * leaves_per_split is the leaf count. Each
  // leaf's totals start from zero, and leaves are summed by the one balanced pairwise tree over
  // all of them, whichever CTA adds which level; so the order is the same for any split count.
  // A CTA adds leaves_per_partial leaves itself (a power of two dividing leaves_per_split) and
  // stores each such subtree's root as a partial block (partial_blocks).
  int leaf_chunks = 0;
  int leaves_per_split = 1;
  int leaves_per_partial = 1;
  float* partials = nullptr;          // workspace: [tiles][partial_blocks][rows][NMIX + 1]
  unsigned* tile_counters = nullptr;  // workspace: one per tile, zero between launches
  CoefficientParams coef;
  CoefficientOutputs out;
  // Optional input path fused into the same launch (decode sizes): kRows extra CTAs per tile,
  // one token each, run beside the GEMM CTAs and save a kernel launch. Null layer_input: off.
  // With fp8.codes set the input-path CTAs write layer_input as FP8 there (fp8.cuh) and
  // layer_input is the codes' address (only whether it is null is read). The fused boundary's
  // FP8 form (sm90_boundary_fp8.cuh) writes fp8 too; there layer_input is its staged bf16 y.
  struct {
    const float* pre_mix = nullptr;
    const float* norm_weight = nullptr;
    uint16_t* layer_input = nullptr;
    int hidden = 0;
    int row_threads = 0;  // row_kernel_threads(hidden): the input path's row cut (row_column)
    float eps_n = 0.f;
    Fp8LayerInput fp8;
  } input;
  // Optional, decode sizes with the fused input path only (the kFromPost instantiation): the
  // previous site's post folded into this launch. The GEMM CTAs form x = post(previous) on the
  // fly for their K slices instead of reading it; the input-path CTAs run the whole post for
  // their token, writing x to x_out (the launch's x) and layer_input from it.
  struct {
    const uint16_t* x = nullptr;             // [M, n, C] the previous site's streams
    const float* post = nullptr;             // [M, n]
    const float* comb = nullptr;             // [M, n, n]
    const uint16_t* sublayer_out = nullptr;  // [M, C]
    uint16_t* x_out = nullptr;               // [M, n, C] this site's streams, written
  } previous;
  // The TMA kernel may launch a tile's splits as one thread block cluster that reduces them
  // through distributed shared memory (finish_prenorm_tile_in_cluster); its launcher decides
  // where the device holds the clusters. The fused boundary's splits are always a cluster and
  // reduce so whenever this is set. False: the workspace and the last CTA.
  bool cluster_epilogue = false;
  // The 16-row kernel's partials as flagged pairs that the tiles' reducing CTAs poll
  // (decode_flagged.cuh; the same bits as the last CTA's reduction); the host sets it only where
  // decode_flagged_fits.
  bool flagged_partials = false;
};

// Batch-invariant mode: the most tree levels a CTA adds in registers before it stores a subtree's
// root as a partial block. Each level holds 14 registers per lane (n = 4): more spill in the TMA
// kernel's consumers on sm_90a, one level fewer with the compensated projection's second pass
// (docs/decisions.md, "Batch invariance by a fixed cut of K").
template <bool kCompensated>
inline constexpr int kTreeLevelsPerCta = kCompensated ? 1 : 2;

// Batch-invariant TF32 order on sm_90 (the TMA kernel's wgmma consumers and the leaf decode
// kernel): a leaf's k8 steps go round-robin into kLeafChains accumulators from zero (step i into
// chain i % kLeafChains), and the rows' sums of squares into kLeafSumsqChains; at the leaf's end
// the chains are summed pairwise (sum_chains). Independent chains let the decode kernel spread a
// leaf over several MMA warps: one warp's mma.sync issue rate would bound it (docs/decisions.md,
// "Batch invariance by a fixed cut of K"). Two sum-of-squares chains, not four: the TMA kernel's
// consumers spill with four.
inline constexpr int kLeafChains = 4;
inline constexpr int kLeafSumsqChains = 2;

// Partial blocks per tile in the workspace: one per split, or in batch-invariant mode one per
// subtree of leaves_per_partial leaves, which the tile's last CTA reduces.
__host__ __device__ inline int partial_blocks(const PrenormArgs& args) {
  if (args.leaf_chunks == 0) return args.splits;
  return args.splits * (args.leaves_per_split / args.leaves_per_partial);
}

// Largest C the fused input-path CTAs cover (256 threads x kRowVecs 16-byte vectors).
inline constexpr int kFusedInputMaxHidden = 256 * kRowVecs * kBf16PerVec;

// A fused input-path CTA: the input path of `token` from args.x (args.input's row and norm), the
// whole CTA; `scratch` holds one float per warp.
template <int kStreams>
__device__ __forceinline__ void fused_input_path_token(const PrenormArgs& args, int64_t token,
                                                       float* scratch) {
  if (args.input.fp8.codes != nullptr) {  // uniform over the launch
    input_path_token<kStreams, kRowVecs, false, Fp8LayerInput>(
        args.x, args.input.pre_mix, args.input.norm_weight, args.input.hidden,
        args.input.row_threads, args.input.eps_n, args.input.fp8, token, scratch);
    return;
  }
  input_path_token<kStreams, kRowVecs, false>(
      args.x, args.input.pre_mix, args.input.norm_weight, args.input.hidden, args.input.row_threads,
      args.input.eps_n, args.input.layer_input, token, scratch);
}

namespace detail {

template <int kIndex>
__device__ __forceinline__ float lane_of(const float4& v) {
  return kIndex == 0 ? v.x : kIndex == 1 ? v.y : kIndex == 2 ? v.z : v.w;
}

// chains[0] = the pairwise sum of the kChains chains: (c0 + c1) + (c2 + c3) for 4.
template <int kChains, int kValues>
__device__ __forceinline__ void sum_chains(float (&chains)[kChains][kValues]) {
  static_assert(kChains > 0 && (kChains & (kChains - 1)) == 0, "a power of two of chains");
#pragma unroll
  for (int width = 1; width < kChains; width *= 2) {
#pragma unroll
    for (int c = 0; c + width < kChains; c += 2 * width) {
#pragma unroll
      for (int i = 0; i < kValues; ++i) chains[c][i] += chains[c + width][i];
    }
  }
}

// One 32-wide chunk: 4 MMA k-steps; step s uses the lane's elements 2s (logical k = t) and
// 2s + 1 (logical k = t + 4). kTruncateWeights: hc_fn's fp32 bits go to the tensor cores as they
// are, which read the top 19 (TF32 truncation, as wgmma does: the same error tier as rounding).
// The rounding costs a compare, a branch and two integer operations per weight per MMA, which with
// one M tile per warp (the fused boundary) is a large share of the kernel's instructions.
template <int kStreams, int kMTiles, bool kCompensated, bool kTruncateWeights = false>
__device__ __forceinline__ void chunk_mma(const uint4 (&xv)[kMTiles][2],
                                          const float4 (&wv)[kStreams * (kStreams + 2) / 8][2],
                                          float (&acc)[kMTiles][kStreams * (kStreams + 2) / 8][4],
                                          float (&sumsq)[kMTiles][2]) {
  constexpr int kNTiles = kStreams * (kStreams + 2) / 8;
  static_assert(!(kCompensated && kTruncateWeights), "the compensated projection needs hi + lo");
  // The compensated (fp32) projection runs a second pass with the low parts of hc_fn; the hi and
  // lo fragments are never live together, which keeps the 64-row tile within 255 registers.
  auto pass = [&](auto s_const, auto lo_const) {
    constexpr int s = decltype(s_const)::value;
    constexpr bool kLo = decltype(lo_const)::value;
    uint32_t b[kNTiles][2];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const float w0 = lane_of<(2 * s) % 4>(wv[nt][s / 2]);
      const float w1 = lane_of<(2 * s + 1) % 4>(wv[nt][s / 2]);
      b[nt][0] = kTruncateWeights ? __float_as_uint(w0) : to_tf32(w0);
      b[nt][1] = kTruncateWeights ? __float_as_uint(w1) : to_tf32(w1);
      if constexpr (kLo) {
        b[nt][0] = to_tf32(w0 - __uint_as_float(b[nt][0]));
        b[nt][1] = to_tf32(w1 - __uint_as_float(b[nt][1]));
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const uint32_t top = word_at(xv[mt][0], s), bottom = word_at(xv[mt][1], s);
      const uint32_t a[4] = {top << 16, bottom << 16, top & 0xffff0000u, bottom & 0xffff0000u};
      if constexpr (!kLo) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float lo = __uint_as_float(a[h]), hi = __uint_as_float(a[h + 2]);
          sumsq[mt][h] = fmaf(lo, lo, fmaf(hi, hi, sumsq[mt][h]));
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) mma_tf32(acc[mt][nt], a, b[nt][0], b[nt][1]);
    }
  };
  auto step = [&](auto s_const) {
    pass(s_const, std::false_type{});
    if constexpr (kCompensated) pass(s_const, std::true_type{});
  };
  step(std::integral_constant<int, 0>{});
  step(std::integral_constant<int, 1>{});
  step(std::integral_constant<int, 2>{});
  step(std::integral_constant<int, 3>{});
}

}  // namespace detail

// Floats of one split's partial block for a tile with rows_valid rows: rows * (NMIX + 1), padded
// to whole float4s for the vector reduction of finish_prenorm_tile.
template <int kStreams>
__device__ __forceinline__ int padded_partial_floats(int rows_valid) {
  return (rows_valid * (kStreams * (kStreams + 2) + 1) + 3) / 4 * 4;
}

// One m16 tile's MMA fragments (and its two sums of squares) as (row, value index, value) to
// `store`, value index < NMIX + 1 (the dots, then the sum of squares); rows at or past rows_valid
// are dropped. Lane (g, t) holds MMA rows g and g + 8, which are tile rows row_of_g and
// row_of_g + 8 (row_of_g = g unless the kernel permuted its rows), from row_base.
template <int kStreams, typename Store>
__device__ __forceinline__ void for_fragment_rows(
    int row_base, int rows_valid, const float (&acc)[kStreams * (kStreams + 2) / 8][4],
    const float (&sumsq)[2], int row_of_g, int t, const Store& store) {
  const int g = row_of_g;
  constexpr int kNmix = kStreams * (kStreams + 2);
#pragma unroll
  for (int nt = 0; nt < kNmix / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row_base + g + (e >= 2 ? 8 : 0);
      if (row < rows_valid) store(row, nt * 8 + 2 * t + (e & 1), acc[nt][e]);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_base + h * 8 + g;
    if (t == 0 && row < rows_valid) store(row, kNmix, sumsq[h]);
  }
}

// for_fragment_rows into dest[row][NMIX + 1].
template <int kStreams>
__device__ __forceinline__ void store_fragment_rows(
    float* dest, int row_base, int rows_valid, const float (&acc)[kStreams * (kStreams + 2) / 8][4],
    const float (&sumsq)[2], int row_of_g, int t) {
  constexpr int kStride = kStreams * (kStreams + 2) + 1;
  for_fragment_rows<kStreams>(row_base, rows_valid, acc, sumsq, row_of_g, t,
                              [&](int row, int i, float v) { dest[row * kStride + i] = v; });
}

// Floats of shared scratch finish_prenorm_tile needs for a tile of kRows tokens: the outputs
// (pre, post, comb, mixes) staged for coalesced stores.
template <int kStreams>
__host__ __device__ constexpr int staged_output_floats(int rows) {
  return rows * (2 * kStreams + kStreams * kStreams + kStreams * (kStreams + 2));
}

namespace detail {

// Copies `count` floats shared -> global with consecutive threads on consecutive addresses.
template <int kThreads>
__device__ __forceinline__ void store_coalesced(float* dst, const float* staged, int count) {
  for (int i = int(threadIdx.x); i < count; i += kThreads) dst[i] = staged[i];
}

}  // namespace detail

// Called by every thread of every CTA once its partial blocks are stored (or, with one block, its
// totals are in `sums`): with several blocks, publishes the partials and counts arrivals; the
// tile's last CTA sums the splits in a fixed order into `sums` and re-arms the counter; then the
// stats, one thread per token, staged in `staging` (staged_output_floats(rows) floats of shared
// memory the kernel no longer uses) and stored coalesced: one thread per token storing its own
// outputs would write 4 bytes into each of 32 sectors per instruction. Every other CTA returns
// early.
template <int kStreams, int kThreads, int kRows>
__device__ __forceinline__ void finish_prenorm_tile(const PrenormArgs& args, int64_t tile,
                                                    int64_t row0, int rows_valid, float* sums,
                                                    const float* tile_partials, int n_out_padded,
                                                    float* staging, int* is_last_cta,
                                                    int arrivals = 0) {
  constexpr int n = kStreams;
  constexpr int kNmix = n * (n + 2);
  constexpr int kStride = kNmix + 1;
  // Issued by every CTA; the loads' latency hides behind the fence and atomic below.
  __shared__ float coef_params[kCoefficientParamFloats<kStreams>];
  stage_coefficient_params<kStreams>(args.coef, coef_params);
  const int blocks = partial_blocks(args);
  if (blocks > 1) {
    // Last-CTA-done: publish the partial, count arrivals; the last CTA of the tile reduces. One
    // thread counts for the CTA with an acquire-release add at GPU scope: the barrier makes the
    // other threads' partial stores this thread's to release (release is cumulative), and the
    // acquire orders the last CTA's reads of the other CTAs' partials, which follow the next
    // barrier (CUTLASS's split-K semaphore pattern). Cheaper than a sequentially consistent
    // __threadfence on each side.
    __syncthreads();
    if (threadIdx.x == 0) {
      // One arrival per CTA of the tile: args.splits unless the kernel says otherwise.
      const int expected = arrivals > 0 ? arrivals : args.splits;
      *is_last_cta = arrive_acq_rel(&args.tile_counters[tile]) == unsigned(expected - 1);
    }
    __syncthreads();
    if (!*is_last_cta) return;
    constexpr int kMaxVecs = (kRows * kStride + 3) / 4;
    if (args.leaf_chunks > 0) {
      detail::reduce_splits_pairwise<kThreads, kMaxVecs>(tile_partials, blocks, n_out_padded,
                                                         rows_valid * kStride, sums);
    } else {
      detail::reduce_splits<kThreads, kMaxVecs>(tile_partials, args.splits, n_out_padded,
                                                rows_valid * kStride, sums);
    }
    // Re-arm the counter for the next launch or graph replay.
    if (threadIdx.x == 0) args.tile_counters[tile] = 0;
  }
  __syncthreads();

  // Stats: one thread per token, outputs staged by local row.
  CoefficientOutputs staged;
  staged.pre = staging;
  staged.post = staged.pre + rows_valid * n;
  staged.comb = staged.post + rows_valid * n;
  staged.mixes = args.out.mixes != nullptr ? staged.comb + rows_valid * n * n : nullptr;
  // Tiles whose kRows * n lanes fit in the CTA never take the one-thread-per-token form, which is
  // then not compiled: less code on the launch's serial path, fetched cold after a sublayer. The
  // bound counts n lanes per token although the lane form takes kStatsLanes: the 128-row tiles keep
  // one thread per token, because both lanes of a token run its whole Sinkhorn, and eight warps of
  // that contend for the SM's reciprocal units (docs/decisions.md, "The Sinkhorn").
  if (kRows * n <= kThreads || rows_valid * n <= kThreads) {
    // Lanes per token (decode tiles): every lane of a warp that holds a token takes part.
    constexpr int kLanes = kStatsLanes<kStreams>;
    const int token = int(threadIdx.x) / kLanes;
    const bool active = token < rows_valid;
    if (int(threadIdx.x) / kWarp * kWarp < rows_valid * kLanes) {
      token_coefficients_by_lanes<kStreams>(sums + (active ? token : 0) * kStride, token, active,
                                            args.coef, coef_params, staged);
    }
  } else if (int(threadIdx.x) < rows_valid) {
    token_coefficients<kStreams>(sums + threadIdx.x * kStride, threadIdx.x, args.coef, coef_params,
                                 staged);
  }
  __syncthreads();
  detail::store_coalesced<kThreads>(args.out.pre + row0 * n, staged.pre, rows_valid * n);
  detail::store_coalesced<kThreads>(args.out.post + row0 * n, staged.post, rows_valid * n);
  detail::store_coalesced<kThreads>(args.out.comb + row0 * n * n, staged.comb, rows_valid * n * n);
  if (staged.mixes != nullptr) {
    detail::store_coalesced<kThreads>(args.out.mixes + row0 * kNmix, staged.mixes,
                                      rows_valid * kNmix);
  }
}

// finish_prenorm_tile for a tile whose `ctas` (2..8) splits are one thread block cluster (the TMA
// kernel with PrenormArgs::cluster_epilogue), called by every thread of every CTA once its totals
// are in its own `sums` (kRows x kStride floats of shared memory): no workspace, no arrival
// counter. CTA `rank` owns rows [rank * per, rank * per + per) of the tile (per =
// ceil(rows_valid / ctas)), sums those rows' values over the cluster's `sums` in reduce_splits'
// order for this tile (its lanes per float4 and their butterfly, sum_in_split_order), and runs the
// stats and stores for them: lanes per token where its rows allow (token_coefficients_by_lanes,
// the bits of one thread per token). So the results are the workspace path's, bit for bit, and a
// tile's serial Sinkhorn steps and stores are shared by its CTAs. `scratch`: shared memory the
// kernel no longer uses, at least per * kStride + staged_output_floats(per) floats. A CTA leaves
// only once every CTA of the cluster has read its `sums`.
template <int kStreams, int kThreads, int kRows>
__device__ __forceinline__ void finish_prenorm_tile_in_cluster(const PrenormArgs& args,
                                                               int64_t row0, int rows_valid,
                                                               const float* sums, int rank,
                                                               int ctas, float* scratch) {
  constexpr int kStride = kStreams * (kStreams + 2) + 1;
  constexpr int kMaxCtas = 8;
  // reduce_splits' lanes per float4 for this tile (a power of two up to the split count).
  const int n_vec = padded_partial_floats<kStreams>(rows_valid) / 4;
  const int width = detail::split_lanes(n_vec, kThreads, ctas);
  cluster_arrive();  // this CTA's sums, released to the cluster ...
  cluster_wait();    // ... and every other CTA's acquired
  const int per = (rows_valid + ctas - 1) / ctas;
  const int first = min(rows_valid, rank * per);
  const int mine = min(rows_valid, first + per) - first;
  float* reduced = scratch;
  float* staging = scratch + (per * kStride + 3) / 4 * 4;
  const float* base = sums + first * kStride;
  for (int i = int(threadIdx.x); i < mine * kStride; i += kThreads) {
    float parts[kMaxCtas];
#pragma unroll
    for (int q = 0; q < kMaxCtas; ++q) parts[q] = q < ctas ? load_cluster_shared(base + i, q) : 0.f;
    reduced[i] = detail::sum_in_split_order_of_width<kMaxCtas, kMaxCtas>(
        [&](int q) { return parts[q]; }, ctas, width);
  }
  // The remote reads are done (their values were added above): the other CTAs may leave once
  // every CTA arrived. Relaxed: a release would fence this CTA's memory operations for nothing.
  cluster_arrive_relaxed();
  __syncthreads();
  PrenormArgs own = args;  // this CTA's rows alone, totals in shared memory: no split path
  own.splits = 1;
  own.leaf_chunks = 0;
  finish_prenorm_tile<kStreams, kThreads, kRows>(own, 0, row0 + first, mine, reduced, nullptr, 0,
                                                 staging, nullptr);
  cluster_wait();
}

}  // namespace mhc::cuda
