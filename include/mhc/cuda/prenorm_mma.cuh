// The coefficient path in one launch: the prenorm GEMM (per token the NMIX dot products of the
// flattened bf16 row with hc_fn, and the row's sum of squares, in the same pass) on TF32 tensor
// cores, split-K, with the stats stage (split reduction, rsqrt, sigmoids, Sinkhorn) fused in
// through a "last CTA of the token tile does it" epilogue.
//
// Work split. grid = (token tiles of kRows = 16 * kMTiles tokens, K splits). The 8 warps of a CTA
// share the tile's tokens and take 32-wide K chunks of the split round-robin. Within a chunk a
// lane (g = lane/4, t = lane%4) loads 8 contiguous bf16 of token rows g and g+8 (one 16-byte
// load each) and 8 contiguous floats of hc_fn rows g (+8, +16): the MMA's k index is only a
// summation index, so it is permuted so that every lane's operands are contiguous in memory;
// A and B use the same permutation. bf16 widens exactly to TF32, so x is never rounded; hc_fn is
// rounded to TF32 (round to nearest), or split hi + lo into two MMAs ("compensated", the fp32
// projection: its error is that of an fp32 dot product).
//
// Determinism: every reduction has a fixed shape (lane butterflies, a fixed warp tree through
// shared memory, splits summed in a fixed order by the last CTA), so results are bitwise
// identical run to run whatever order the CTAs finish in. (Not batch to batch: the split count
// and tile follow M. The batch-invariant mode, PrenormArgs::leaf_chunks, fixes that:
// docs/batch_invariance.md.) Operand registers are reloaded only
// after the mma.sync that read them has returned (mma.sync is synchronous for its operands), so
// the upstream wgmma register race cannot happen here.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/decode_flagged.cuh"
#include "mhc/cuda/post.cuh"
#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/prenorm_launch_checks.cuh"

namespace mhc::cuda {

template <int kStreams, int kMTiles>
struct PrenormShape {
  static constexpr int kNmix = kStreams * (kStreams + 2);
  static_assert(kNmix % 8 == 0, "NMIX must be a multiple of the MMA's n = 8");
  static constexpr int kNTiles = kNmix / 8;
  static constexpr int kRows = 16 * kMTiles;
  static constexpr int kStride = kNmix + 1;  // NMIX dots, then the sum of squares
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / kWarp;
  static constexpr int kChunk = 32;  // K per warp step: 4 lanes x 8 bf16
  static constexpr int kValuesPerLane = kMTiles * kNTiles * 4 + kMTiles * 2;
  // Chunks per pipeline stage: two for the small-register 16-row tile (more loads in flight at
  // decode sizes), one for the 64-row tile, whose double-buffered stage is already 56 registers.
  // Register buffers rather than a cp.async ring in shared memory (measured faster at 4096-8192
  // tokens).
  static constexpr int kUnroll = kMTiles == 1 ? 2 : 1;
  static constexpr int kExchangeFloats = (kWarps / 2) * kValuesPerLane * kWarp;
};

namespace detail {

// The 8 bf16 of this site's x at flattened column `column` of token `token`, formed from the
// previous site's post (args.previous) with the post kernel's own formula: the same bits as the
// x the post would have stored.
template <int kStreams>
__device__ __forceinline__ uint4 x_from_previous_post(const PrenormArgs& args, int64_t token,
                                                      int64_t column) {
  const int hidden = args.k / kStreams;
  const int stream = static_cast<int>(column / hidden);
  const int channel = static_cast<int>(column - int64_t(stream) * hidden);
  const uint16_t* x_row = args.previous.x + token * args.k + channel;
  float xs[kStreams][8], f[8], comb_to_stream[kStreams], out[8];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) unpack_bf16x8(load_stream_u4(x_row + j * hidden), xs[j]);
  unpack_bf16x8(load_stream_u4(args.previous.sublayer_out + token * hidden + channel), f);
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
    comb_to_stream[j] = args.previous.comb[(token * kStreams + j) * kStreams + stream];
  }
  post_stream8<kStreams>(xs, f, args.previous.post[token * kStreams + stream], comb_to_stream, out);
  return pack_bf16x8(out);
}

// The fused input-path CTA of `token`: the input path, or with kFromPost the previous site's
// whole post for the token, which writes x and forms layer_input from it.
template <int kStreams, bool kFromPost>
__device__ __forceinline__ void fused_input_token(const PrenormArgs& args, int64_t token,
                                                  float* scratch) {
  if constexpr (kFromPost) {
    PostFp8Args post;  // next_fp8 read only where the launch asks for FP8
    post.x = args.previous.x;
    post.post = args.previous.post;
    post.comb = args.previous.comb;
    post.sublayer_out = args.previous.sublayer_out;
    post.x_next = args.previous.x_out;
    post.hidden = args.input.hidden;
    post.row_threads = args.input.row_threads;
    post.eps_n = args.input.eps_n;
    post.next_pre_mix = args.input.pre_mix;
    post.next_norm_weight = args.input.norm_weight;
    post.next_layer_input = args.input.layer_input;
    if (args.input.fp8.codes != nullptr) {  // uniform over the launch
      post.next_fp8 = args.input.fp8;
      post_token<kStreams, kRowVecs, true, false>(post, token, scratch);
    } else {
      post_token<kStreams, kRowVecs, true, false>(static_cast<const PostArgs&>(post), token,
                                                  scratch);
    }
  } else {
    fused_input_path_token<kStreams>(args, token, scratch);
  }
}

// Split `split` of the tile at row0: its partial block (the NMIX dots and the sum of squares of
// each row over the split's K chunks) to the workspace, or with one split its totals to `sums`.
// `exchange`: the warp tree's shared memory, free again when this returns. Sets the tile's
// partial blocks and their padded size for the epilogue (computed after the K loop, so that they
// hold no registers during it).
template <int kStreams, int kMTiles, bool kCompensated, bool kFromPost, bool kFlagged>
__device__ __forceinline__ void split_partial(const PrenormArgs& args, int split, int64_t row0,
                                              int rows_valid, float* exchange, float* sums,
                                              float*& tile_partials, int& n_out_padded) {
  using S = PrenormShape<kStreams, kMTiles>;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t k = args.k;
  const int chunk_begin = split * args.chunks_per_split;
  const int chunk_end = min(static_cast<int>(k / S::kChunk), chunk_begin + args.chunks_per_split);

  const uint16_t* x_row[kMTiles][2];
  bool row_ok[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = mt * 16 + h * 8 + g;
      row_ok[mt][h] = row < rows_valid;
      x_row[mt][h] = args.x + (row0 + (row_ok[mt][h] ? row : 0)) * k + t * 8;
    }
  }
  const float* w_row[S::kNTiles];
#pragma unroll
  for (int nt = 0; nt < S::kNTiles; ++nt) w_row[nt] = args.hc_fn + (nt * 8 + g) * k + t * 8;

  // Out-of-range chunks and rows load zeros, which add nothing.
  auto load_x = [&](int c0, uint4(&xv)[S::kUnroll][kMTiles][2]) {
#pragma unroll
    for (int u = 0; u < S::kUnroll; ++u) {
      const int c = c0 + u * S::kWarps;
      const bool in = c < chunk_end;
      const int64_t offset = int64_t(c) * S::kChunk;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!(in && row_ok[mt][h])) {
            xv[u][mt][h] = make_uint4(0, 0, 0, 0);
          } else if constexpr (kFromPost) {
            xv[u][mt][h] = detail::x_from_previous_post<kStreams>(args, row0 + mt * 16 + h * 8 + g,
                                                                  offset + t * 8);
          } else {
            xv[u][mt][h] = load_stream_u4(x_row[mt][h] + offset);
          }
        }
      }
    }
  };
  auto load_w = [&](int c0, float4(&wv)[S::kUnroll][S::kNTiles][2]) {
#pragma unroll
    for (int u = 0; u < S::kUnroll; ++u) {
      const int c = c0 + u * S::kWarps;
      const bool in = c < chunk_end;
      const int64_t offset = int64_t(c) * S::kChunk;
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        wv[u][nt][0] = in ? load_weight_f4(w_row[nt] + offset) : make_float4(0, 0, 0, 0);
        wv[u][nt][1] = in ? load_weight_f4(w_row[nt] + offset + 4) : make_float4(0, 0, 0, 0);
      }
    }
  };

  float acc[kMTiles][S::kNTiles][4] = {};
  float sumsq[kMTiles][2] = {};
  // Register double buffering: the next stage's loads are issued before this stage's MMAs, so
  // loads stay in flight while the tensor cores work. mma.sync has consumed its operand
  // registers when it returns, so overwriting them afterwards is safe (the upstream wgmma
  // register race cannot arise).
  uint4 x_cur[S::kUnroll][kMTiles][2], x_next[S::kUnroll][kMTiles][2];
  float4 w_cur[S::kUnroll][S::kNTiles][2], w_next[S::kUnroll][S::kNTiles][2];
  constexpr int kStageStride = S::kWarps * S::kUnroll;
  const int first = chunk_begin + warp;
  // hc_fn is written by no kernel, so its first stage is loaded before waiting for the kernel
  // that produced x (programmatic dependent launch): at decode sizes hc_fn is most of the bytes.
  // (Only for the decode-size tile: in the 64-row tile the early load costs registers, which
  // spill in the compensated variant.)
  if constexpr (kMTiles == 1) {
    load_w(first, w_cur);
    allow_dependents();
    wait_for_producer();
  } else {
    allow_dependents();
    wait_for_producer();
    load_w(first, w_cur);
  }
  load_x(first, x_cur);
  for (int c0 = first; c0 < chunk_end; c0 += kStageStride) {
    if (c0 + kStageStride < chunk_end) {
      load_x(c0 + kStageStride, x_next);
      load_w(c0 + kStageStride, w_next);
    }
#pragma unroll
    for (int u = 0; u < S::kUnroll; ++u) {
      detail::chunk_mma<kStreams, kMTiles, kCompensated>(x_cur[u], w_cur[u], acc, sumsq);
    }
#pragma unroll
    for (int u = 0; u < S::kUnroll; ++u) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        x_cur[u][mt][0] = x_next[u][mt][0];
        x_cur[u][mt][1] = x_next[u][mt][1];
      }
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        w_cur[u][nt][0] = w_next[u][nt][0];
        w_cur[u][nt][1] = w_next[u][nt][1];
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    quad_sums(sumsq[mt]);
  }

  // Fixed warp tree: 8 -> 4 -> 2 -> 1 through shared memory.
  auto for_each_value = [&](auto&& f) {
    int i = 0;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(i++, acc[mt][nt][e]);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) f(i++, sumsq[mt][h]);
  };
#pragma unroll
  for (int half = S::kWarps / 2; half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) {
      for_each_value([&](int i, float& v) {
        exchange[((warp - half) * S::kValuesPerLane + i) * kWarp + lane] = v;
      });
    }
    __syncthreads();
    if (warp < half) {
      for_each_value(
          [&](int i, float& v) { v += exchange[(warp * S::kValuesPerLane + i) * kWarp + lane]; });
    }
    __syncthreads();
  }

  // Warp 0 holds the CTA's totals. With one split they go straight to shared memory; otherwise
  // to this split's slot of the workspace.
  n_out_padded = padded_partial_floats<kStreams>(rows_valid);
  tile_partials = args.partials + row0 * S::kStride * partial_blocks(args);
  if (warp == 0) {
    if constexpr (kFlagged) {
      store_flagged_partial<kStreams>(args, row0 / S::kRows, split, rows_valid, acc[0], sumsq[0], g,
                                      t);
      return;
    }
    float* dest = args.splits == 1 ? sums : tile_partials + int64_t(split) * n_out_padded;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      store_fragment_rows<kStreams>(dest, mt * 16, rows_valid, acc[mt], sumsq[mt], g, t);
    }
  }
}

}  // namespace detail

// On sm_100 ptxas holds the n = 2 decode kernel to 80 registers under the bare bound (three CTAs
// per SM), where the flagged reduction spills; there one CTA per SM is asked for, as the decode
// launches use. sm_90 and sm_80 keep the bare bound (ptxas does not cap their registers).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define MHC_PRENORM_LAUNCH_BOUNDS __launch_bounds__(256, 1)
#else
#define MHC_PRENORM_LAUNCH_BOUNDS __launch_bounds__(256)
#endif

// kSplitLoop: a tile's splits run on args.split_ctas CTAs, CTA y taking splits y, y +
// split_ctas, ... in turn. Each split's partial block is the one its own CTA would store, and the
// last CTA reduces them in the same order, so the bits are those of one CTA per split: a launch
// on fewer SMs (the overlap's side stream, where the time is hidden and the SMs are the
// sublayer's) that agrees bitwise with the native schedule's.
// kFlaggedSplits > 0 (PrenormArgs::flagged_partials): the splits' partials as flagged pairs
// reduced by a CTA per row (decode_flagged.cuh), the same bits, the reducer sized for at most
// that many splits. Its own instantiation, so that neither reduction's code sits on the other's
// path: behind a sublayer the launch's code is fetched cold, and the counter path measures
// slower with the flagged code beside it; and sized for the launch's splits, since a reducer for
// 64 measures slower at 40 (docs/decisions.md, "The decode coefficient launch").
template <int kStreams, int kMTiles, bool kCompensated, bool kFromPost = false,
          bool kSplitLoop = false, int kFlaggedSplits = 0>
__global__ void MHC_PRENORM_LAUNCH_BOUNDS prenorm_coefficients_kernel(const PrenormArgs args) {
  constexpr bool kFlagged = kFlaggedSplits > 0;
  static_assert(!kFromPost || kMTiles == 1, "the previous post folds in at decode sizes only");
  static_assert(!kSplitLoop || (kMTiles == 1 && !kFromPost), "split loops at decode tiles only");
  static_assert(!kFlagged || kMTiles == 1, "flagged partials at decode tiles only");
  static_assert(kFlaggedSplits <= kFlaggedMaxSplits, "the reducer's scratch");
  using S = PrenormShape<kStreams, kMTiles>;
  __shared__ float exchange[S::kExchangeFloats];  // [kWarps/2][kValuesPerLane][32], lane-minor
  __shared__ float sums[S::kRows * S::kStride];   // [kRows][kStride]
  __shared__ int is_last_cta;

  const int64_t tile = blockIdx.x;
  const int64_t row0 = tile * S::kRows;
  const int split_ctas = kSplitLoop ? args.split_ctas : args.splits;
  if constexpr (kMTiles == 1) {           // only the decode-size tile fuses the input path
    if (int(blockIdx.y) >= split_ctas) {  // a fused input-path CTA
      const int64_t token = row0 + (int(blockIdx.y) - split_ctas);
      allow_dependents();
      wait_for_producer();
      if (token < args.tokens)
        detail::fused_input_token<kStreams, kFromPost>(args, token, exchange);
      return;
    }
  }
  const int rows_valid = tile_rows_valid<S::kRows>(args.tokens, row0);
  float* tile_partials = nullptr;
  int n_out_padded = 0;
  if constexpr (kSplitLoop) {
    // The warp tree's last barrier frees `exchange` for the next split's tree.
    for (int split = blockIdx.y; split < args.splits; split += split_ctas) {
      detail::split_partial<kStreams, kMTiles, kCompensated, kFromPost, kFlagged>(
          args, split, row0, rows_valid, exchange, sums, tile_partials, n_out_padded);
    }
  } else {
    detail::split_partial<kStreams, kMTiles, kCompensated, kFromPost, kFlagged>(
        args, blockIdx.y, row0, rows_valid, exchange, sums, tile_partials, n_out_padded);
  }

  if constexpr (kFlagged) {
    const int row = flagged_reducer_row(blockIdx.y, split_ctas, rows_valid);
    if (row >= 0) {
      static_assert(kFlaggedSplits * S::kStride <= S::kExchangeFloats);
      finish_flagged_row<kStreams, S::kThreads, kFlaggedSplits>(args, tile, row0, rows_valid, row,
                                                                exchange, sums);
    }
  } else {
    // The warp tree is done with `exchange`: it stages the outputs.
    static_assert(staged_output_floats<kStreams>(S::kRows) <= S::kExchangeFloats);
    finish_prenorm_tile<kStreams, S::kThreads, S::kRows>(args, tile, row0, rows_valid, sums,
                                                         tile_partials, n_out_padded, exchange,
                                                         &is_last_cta, kSplitLoop ? split_ctas : 0);
  }
}

// launch_prenorm_coefficients' preconditions besides prenorm_args_valid: at least one chunk per
// split; the fused input path's row cut within the CTA's threads; with kFromPost the previous post
// and the input-path CTAs that write x; with kSplitLoop at least one CTA per tile (the split loop
// steps by it); with flagged partials at most the reducer's kFlaggedSplits splits, no leaves, at
// most kFlaggedMaxTiles tiles and a reducing CTA per row (decode_flagged_fits).
template <int kStreams, int kMTiles, bool kFromPost, bool kSplitLoop, int kFlaggedSplits>
inline bool prenorm_mma_args_valid(const PrenormArgs& a) {
  using S = PrenormShape<kStreams, kMTiles>;
  const int ctas = kSplitLoop ? a.split_ctas : a.splits;
  const bool from_post = !kFromPost || (a.previous.x != nullptr && a.input.layer_input != nullptr);
  const int64_t widest_tile = a.tokens < kFlaggedRows ? a.tokens : kFlaggedRows;
  const bool flagged =
      kFlaggedSplits == 0 ||
      (a.leaf_chunks == 0 && a.splits <= kFlaggedSplits &&
       ceil_div(a.tokens, kFlaggedRows) <= kFlaggedMaxTiles && widest_tile <= ctas);
  return prenorm_args_valid<kStreams>(a) && fused_input_fits(a, S::kThreads) &&
         a.chunks_per_split >= 1 && ctas >= 1 && from_post && flagged;
}

// Raw launcher: refuses arguments outside prenorm_mma_args_valid (cudaErrorInvalidValue); the
// caller, mhc::cuda::prenorm_coefficients, checks them with messages.
template <int kStreams, int kMTiles, bool kCompensated, bool kFromPost = false,
          bool kSplitLoop = false, int kFlaggedSplits = 0>
cudaError_t launch_prenorm_coefficients(const PrenormArgs& args, LaunchTarget on) {
  using S = PrenormShape<kStreams, kMTiles>;
  if (!prenorm_mma_args_valid<kStreams, kMTiles, kFromPost, kSplitLoop, kFlaggedSplits>(args)) {
    return cudaErrorInvalidValue;
  }
  const int split_ctas = kSplitLoop ? args.split_ctas : args.splits;
  const dim3 grid(static_cast<unsigned>(ceil_div(args.tokens, S::kRows)),
                  static_cast<unsigned>(split_ctas));
  const bool fused_input = kMTiles == 1 && args.input.layer_input != nullptr;
  const dim3 grid_with_input(grid.x, grid.y + (fused_input ? S::kRows : 0));
  return launch_kernel(prenorm_coefficients_kernel<kStreams, kMTiles, kCompensated, kFromPost,
                                                   kSplitLoop, kFlaggedSplits>,
                       grid_with_input, dim3(S::kThreads), 0, on, args);
}

// The 16-row kernel of these template choices, flagged or not as args.flagged_partials says,
// its reducer sized for 40 splits where they are at most that (decode_flagged_fits: at most 64).
template <int kStreams, bool kCompensated, bool kFromPost = false, bool kSplitLoop = false>
cudaError_t launch_decode_coefficients(const PrenormArgs& args, LaunchTarget on) {
  if (!args.flagged_partials) {
    return launch_prenorm_coefficients<kStreams, 1, kCompensated, kFromPost, kSplitLoop, 0>(args,
                                                                                            on);
  }
  return args.splits <= kFlaggedNarrowSplits
             ? launch_prenorm_coefficients<kStreams, 1, kCompensated, kFromPost, kSplitLoop,
                                           kFlaggedNarrowSplits>(args, on)
             : launch_prenorm_coefficients<kStreams, 1, kCompensated, kFromPost, kSplitLoop,
                                           kFlaggedMaxSplits>(args, on);
}

}  // namespace mhc::cuda
