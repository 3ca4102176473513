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
};

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
  // x chunks in flight per warp: a cp.async ring in shared memory, so that the bytes in flight
  // cost no registers (with register-only buffering the 64-row tile reached 64% of the copy
  // bandwidth: 32 KB of x in flight per SM is too little for HBM3e's latency).
  static constexpr int kStages = 4;
  static constexpr int kRingBytes = kWarps * kStages * kMTiles * 2 * kWarp * 16;
  // After the main loop the ring is reused for the warp tree and the per-token sums.
  static constexpr int kExchangeFloats = (kWarps / 2) * kValuesPerLane * kWarp;
  static constexpr int kEpilogueBytes = (kExchangeFloats + kRows * kStride) * 4;
  static constexpr int kSmemBytes = kRingBytes > kEpilogueBytes ? kRingBytes : kEpilogueBytes;
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
  auto step = [&](auto s_const) {
    constexpr int s = decltype(s_const)::value;
    uint32_t b_hi[S::kNTiles][2];
    [[maybe_unused]] uint32_t b_lo[S::kNTiles][2];
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
      const float w0 = lane_of<(2 * s) % 4>(wv[nt][s / 2]);
      const float w1 = lane_of<(2 * s + 1) % 4>(wv[nt][s / 2]);
      b_hi[nt][0] = to_tf32(w0);
      b_hi[nt][1] = to_tf32(w1);
      if constexpr (kCompensated) {
        b_lo[nt][0] = to_tf32(w0 - __uint_as_float(b_hi[nt][0]));
        b_lo[nt][1] = to_tf32(w1 - __uint_as_float(b_hi[nt][1]));
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const uint32_t top = word_of<s>(xv[mt][0]), bottom = word_of<s>(xv[mt][1]);
      const uint32_t a[4] = {top << 16, bottom << 16, top & 0xffff0000u, bottom & 0xffff0000u};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float lo = __uint_as_float(a[h]), hi = __uint_as_float(a[h + 2]);
        sumsq[mt][h] = fmaf(lo, lo, fmaf(hi, hi, sumsq[mt][h]));
      }
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        if constexpr (kCompensated) mma_tf32(acc[mt][nt], a, b_lo[nt][0], b_lo[nt][1]);
        mma_tf32(acc[mt][nt], a, b_hi[nt][0], b_hi[nt][1]);
      }
    }
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
  extern __shared__ uint4 smem[];
  __shared__ int is_last_cta;

  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t tile = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t row0 = tile * S::kRows;
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

  // Each lane copies its own 16-byte pieces of x into its own ring slots and reads back only
  // those, so its own cp.async.wait_group is all the synchronisation the ring needs.
  uint4* ring = smem + warp * (S::kStages * kMTiles * 2 * kWarp) + lane;
  auto slot = [&](int stage, int mt, int h) {
    return ring + ((stage * kMTiles + mt) * 2 + h) * kWarp;
  };
  // Out-of-range chunks and rows are zero-filled (cp.async reads nothing), adding nothing.
  auto issue_x = [&](int c, int stage) {
    const bool in = c < chunk_end;
    const int64_t offset = int64_t(in ? c : chunk_begin) * S::kChunk;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        cp_async_16(slot(stage, mt, h), x_row[mt][h] + offset, in && row_ok[mt][h]);
      }
    }
    cp_async_commit();
  };
  auto load_w = [&](int c, float4(&wv)[S::kNTiles][2]) {
    const bool in = c < chunk_end;
    const int64_t offset = int64_t(c) * S::kChunk;
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
      wv[nt][0] = in ? load_weight_f4(w_row[nt] + offset) : make_float4(0, 0, 0, 0);
      wv[nt][1] = in ? load_weight_f4(w_row[nt] + offset + 4) : make_float4(0, 0, 0, 0);
    }
  };

  float acc[kMTiles][S::kNTiles][4] = {};
  float sumsq[kMTiles][2] = {};
  const int first = chunk_begin + warp;
  // hc_fn is not written by any kernel, so its first chunk is loaded before waiting for the
  // kernel that produced x (programmatic dependent launch): at decode sizes reading hc_fn is
  // most of the work.
  float4 w_cur[S::kNTiles][2], w_next[S::kNTiles][2];
  load_w(first, w_cur);
  allow_dependents();
  wait_for_producer();
#pragma unroll
  for (int st = 0; st < S::kStages - 1; ++st) issue_x(first + st * S::kWarps, st);
  int stage = 0;
  for (int c = first; c < chunk_end; c += S::kWarps) {
    issue_x(c + (S::kStages - 1) * S::kWarps, (stage + S::kStages - 1) % S::kStages);
    load_w(c + S::kWarps, w_next);    // W comes from L2: one chunk ahead hides its latency
    cp_async_wait<S::kStages - 1>();  // chunk c's group has landed
    uint4 xv[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      xv[mt][0] = *slot(stage, mt, 0);
      xv[mt][1] = *slot(stage, mt, 1);
    }
    // mma.sync has consumed its operand registers when it returns, so reloading them for the
    // next chunk cannot race with it (the upstream wgmma pitfall does not arise).
    detail::chunk_mma<kStreams, kMTiles, kCompensated>(xv, w_cur, acc, sumsq);
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
      w_cur[nt][0] = w_next[nt][0];
      w_cur[nt][1] = w_next[nt][1];
    }
    stage = stage + 1 == S::kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the epilogue reuses the memory
  float* exchange = reinterpret_cast<float*>(smem);  // [kWarps/2][kValuesPerLane][32]
  float* sums = exchange + S::kExchangeFloats;       // [kRows][kStride]

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
  auto* kernel = prenorm_coefficients_kernel<kStreams, kMTiles, kCompensated>;
  // Above 48 KB of dynamic shared memory a kernel must opt in, once.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (opt_in != cudaSuccess) return opt_in;
  return launch_kernel(kernel, grid, dim3(S::kThreads), S::kSmemBytes, stream, args);
}

}  // namespace mhc::cuda
