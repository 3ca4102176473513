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
// identical run to run whatever order the CTAs finish in. Operand registers are reloaded only
// after the mma.sync that read them has returned (mma.sync is synchronous for its operands), so
// the upstream wgmma register race cannot happen here.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mhc/cuda/coefficients.cuh"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"

namespace mhc::cuda {

struct PrenormArgs {
  const uint16_t* x = nullptr;   // [M, K] bf16 bits
  const float* hc_fn = nullptr;  // [NMIX, K]
  int64_t tokens = 0;
  int k = 0;  // K = n * C, a multiple of 32
  int splits = 1;
  int chunks_per_split = 0;           // 32-wide K chunks per split
  float* partials = nullptr;          // workspace: [tiles][splits][rows][NMIX + 1]
  unsigned* tile_counters = nullptr;  // workspace: one per tile, zero between launches
  CoefficientParams coef;
  CoefficientOutputs out;
  // Optional input path fused into the same launch (decode sizes): kRows extra CTAs per tile,
  // one token each, run beside the GEMM CTAs and save a kernel launch. Null layer_input: off.
  struct {
    const float* pre_mix = nullptr;
    const float* norm_weight = nullptr;
    uint16_t* layer_input = nullptr;
    int hidden = 0;
    float eps_n = 0.f;
  } input;
};

// Largest C the fused input-path CTAs cover (256 threads x kRowVecs 16-byte vectors).
inline constexpr int kFusedInputMaxHidden = 256 * kRowVecs * kBf16PerVec;

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
  // (A 4-stage cp.async ring for x in shared memory was measured 10% slower at 4096-8192
  // tokens on an H200 than these register buffers: see docs/kernels.md.)
  static constexpr int kUnroll = kMTiles == 1 ? 2 : 1;
  static constexpr int kExchangeFloats = (kWarps / 2) * kValuesPerLane * kWarp;
};

namespace detail {

template <int kIndex>
__device__ __forceinline__ uint32_t word_of(const uint4& v) {
  return kIndex == 0 ? v.x : kIndex == 1 ? v.y : kIndex == 2 ? v.z : v.w;
}
template <int kIndex>
__device__ __forceinline__ float lane_of(const float4& v) {
  return kIndex == 0 ? v.x : kIndex == 1 ? v.y : kIndex == 2 ? v.z : v.w;
}

// One 32-wide chunk: 4 MMA k-steps; step s uses the lane's elements 2s (logical k = t) and
// 2s + 1 (logical k = t + 4).
template <int kStreams, int kMTiles, bool kCompensated>
__device__ __forceinline__ void chunk_mma(const uint4 (&xv)[kMTiles][2],
                                          const float4 (&wv)[kStreams * (kStreams + 2) / 8][2],
                                          float (&acc)[kMTiles][kStreams * (kStreams + 2) / 8][4],
                                          float (&sumsq)[kMTiles][2]) {
  using S = PrenormShape<kStreams, kMTiles>;
  // The compensated (fp32) projection runs a second pass with the low parts of hc_fn; the hi and
  // lo fragments are never live together, which keeps the 64-row tile within 255 registers.
  auto pass = [&](auto s_const, auto lo_const) {
    constexpr int s = decltype(s_const)::value;
    constexpr bool kLo = decltype(lo_const)::value;
    uint32_t b[S::kNTiles][2];
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
      const float w0 = lane_of<(2 * s) % 4>(wv[nt][s / 2]);
      const float w1 = lane_of<(2 * s + 1) % 4>(wv[nt][s / 2]);
      b[nt][0] = to_tf32(w0);
      b[nt][1] = to_tf32(w1);
      if constexpr (kLo) {
        b[nt][0] = to_tf32(w0 - __uint_as_float(b[nt][0]));
        b[nt][1] = to_tf32(w1 - __uint_as_float(b[nt][1]));
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const uint32_t top = word_of<s>(xv[mt][0]), bottom = word_of<s>(xv[mt][1]);
      const uint32_t a[4] = {top << 16, bottom << 16, top & 0xffff0000u, bottom & 0xffff0000u};
      if constexpr (!kLo) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float lo = __uint_as_float(a[h]), hi = __uint_as_float(a[h + 2]);
          sumsq[mt][h] = fmaf(lo, lo, fmaf(hi, hi, sumsq[mt][h]));
        }
      }
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) mma_tf32(acc[mt][nt], a, b[nt][0], b[nt][1]);
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

template <int kStreams, int kMTiles, bool kCompensated>
__global__ void __launch_bounds__(256) prenorm_coefficients_kernel(const PrenormArgs args) {
  using S = PrenormShape<kStreams, kMTiles>;
  __shared__ float exchange[S::kExchangeFloats];  // [kWarps/2][kValuesPerLane][32], lane-minor
  __shared__ float sums[S::kRows * S::kStride];   // [kRows][kStride]
  __shared__ int is_last_cta;

  const int64_t tile = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t row0 = tile * S::kRows;
  if constexpr (kMTiles == 1) {  // only the decode-size tile fuses the input path
    if (split >= args.splits) {  // a fused input-path CTA
      const int64_t token = row0 + (split - args.splits);
      allow_dependents();
      wait_for_producer();
      if (token < args.tokens) {
        input_path_token<kStreams, kRowVecs>(args.x, args.input.pre_mix, args.input.norm_weight,
                                             args.input.hidden, args.input.eps_n,
                                             args.input.layer_input, token, exchange);
      }
      return;
    }
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int rows_valid =
      args.tokens - row0 < S::kRows ? static_cast<int>(args.tokens - row0) : S::kRows;
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
          xv[u][mt][h] = (in && row_ok[mt][h]) ? load_stream_u4(x_row[mt][h] + offset)
                                               : make_uint4(0, 0, 0, 0);
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
  // (Only for the decode-size tile: in the 64-row tile the early load costs registers, and the
  // compensated variant then spilled.)
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
    sumsq[mt][0] = group_sum<4>(sumsq[mt][0]);
    sumsq[mt][1] = group_sum<4>(sumsq[mt][1]);
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
  const int n_out = rows_valid * S::kStride;
  // Each split's block of partials is padded to whole float4s for the vector reduction below.
  const int n_out_padded = (n_out + 3) / 4 * 4;
  float* tile_partials = args.partials + row0 * S::kStride * args.splits;
  if (warp == 0) {
    float* dest = args.splits == 1 ? sums : tile_partials + int64_t(split) * n_out_padded;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = mt * 16 + g + (e >= 2 ? 8 : 0);
          if (row < rows_valid) dest[row * S::kStride + nt * 8 + 2 * t + (e & 1)] = acc[mt][nt][e];
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = mt * 16 + h * 8 + g;
        if (t == 0 && row < rows_valid) dest[row * S::kStride + S::kNmix] = sumsq[mt][h];
      }
    }
  }

  if (args.splits > 1) {
    // Last-CTA-done: publish the partial, count arrivals; the last CTA of the tile reduces.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      is_last_cta = atomicAdd(&args.tile_counters[tile], 1u) == unsigned(args.splits - 1);
    }
    __syncthreads();
    if (!is_last_cta) return;
    __threadfence();
    // Lanes per float4 of outputs: as many as fit (<= 32); each lane sums a strided subset of
    // the splits in ascending order, loading kBatch splits at a time so that they are all in
    // flight, then a butterfly across the lanes. A fixed order: deterministic.
    constexpr int kBatch = 8;
    const int n_vec = n_out_padded / 4;
    int width = 1;
    while (width < kWarp && width * 2 * n_vec <= S::kThreads && width < args.splits) width *= 2;
    const int groups = S::kThreads / width;
    const int passes = static_cast<int>(ceil_div(n_vec, groups));
    for (int pass = 0; pass < passes; ++pass) {
      const int vec = pass * groups + int(threadIdx.x) / width;
      float4 total = make_float4(0.f, 0.f, 0.f, 0.f);
      if (vec < n_vec) {
        const float* base = tile_partials + vec * 4;
        for (int s0 = int(threadIdx.x) % width; s0 < args.splits; s0 += kBatch * width) {
          float4 batch[kBatch];
#pragma unroll
          for (int b = 0; b < kBatch; ++b) {
            const int s = s0 + b * width;
            batch[b] = s < args.splits ? load_coherent_f4(base + int64_t(s) * n_out_padded)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
          }
#pragma unroll
          for (int b = 0; b < kBatch; ++b) {
            total.x += batch[b].x;
            total.y += batch[b].y;
            total.z += batch[b].z;
            total.w += batch[b].w;
          }
        }
      }
      total.x = group_sum_dynamic(total.x, width);
      total.y = group_sum_dynamic(total.y, width);
      total.z = group_sum_dynamic(total.z, width);
      total.w = group_sum_dynamic(total.w, width);
      if (vec < n_vec && int(threadIdx.x) % width == 0) {
        float* flat = sums;
        const float values[4] = {total.x, total.y, total.z, total.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (vec * 4 + e < n_out) flat[vec * 4 + e] = values[e];
        }
      }
    }
    // Re-arm the counter for the next launch or graph replay.
    if (threadIdx.x == 0) args.tile_counters[tile] = 0;
  }
  __syncthreads();

  // Stats: one thread per token.
  if (int(threadIdx.x) < rows_valid) {
    token_coefficients<kStreams>(sums + threadIdx.x * S::kStride, row0 + threadIdx.x, args.coef,
                                 args.out);
  }
}

// Raw launcher: no argument checks (the caller, mhc::cuda::prenorm_coefficients, does them).
template <int kStreams, int kMTiles, bool kCompensated>
cudaError_t launch_prenorm_coefficients(const PrenormArgs& args, cudaStream_t stream) {
  using S = PrenormShape<kStreams, kMTiles>;
  const dim3 grid(static_cast<unsigned>(ceil_div(args.tokens, S::kRows)),
                  static_cast<unsigned>(args.splits));
  const bool fused_input = kMTiles == 1 && args.input.layer_input != nullptr;
  const dim3 grid_with_input(grid.x, grid.y + (fused_input ? S::kRows : 0));
  return launch_kernel(prenorm_coefficients_kernel<kStreams, kMTiles, kCompensated>,
                       grid_with_input, dim3(S::kThreads), 0, stream, args);
}

}  // namespace mhc::cuda
