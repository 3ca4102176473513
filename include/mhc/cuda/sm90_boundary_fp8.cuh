// The fused boundary's layer_input output (sm90_boundary.cuh), as a type: the kernel's norm pass
// (detail::scale_layer_input) hands each scaled 8-column vector to Out::store8, so one kernel body
// writes either form.
//
// BoundaryBf16Out: the bf16 rows, stored over the y they were scaled from (the kernel as it was).
// BoundaryFp8Out: the FP8 E4M3 codes and per-(token, 128-column group) scales of docs/fp8.md. The
// kernel then stages its unscaled y (bf16) in a caller's [T, C] buffer instead of layer_input,
// reads it back as the bf16 form does, and quantises the very values the bf16 form would store
// (bf16(y * scale * w), then fp8.cuh's group quantiser): codes and scales bitwise those of the
// bf16 boundary's layer_input quantised by the reference quantiser, with one byte written per
// value instead of two (the "staged" form).
// BoundaryFp8FoldedOut: the "folded" form (Fp8Format::fold_norm). The row's norm factor is known
// only once the cluster has formed the whole row, but it is one number per row: the group's
// codes can be formed from y * w alone, as each stage is formed, and the factor multiplied into
// the group's scale afterwards. So y is neither staged nor read back: per token the kernel moves
// about 19C bytes instead of about 24C. The codes quantise the fp32 y * w, not the bf16
// layer_input, so they are not the staged form's bits (docs/fp8.md bounds the difference); a
// power-of-two scale cannot absorb the factor, so UE8M0 keeps the staged form.
//
// Staged form: a group's 16 vectors must be one half-warp of the norm pass: its vector v of a
// row is a thread's own, v = tid (+ k x threads), with a CTA's vectors a multiple of 16 and every
// aligned 16 of them 128 consecutive columns. That holds where a CTA owns whole groups: the wide
// stages (128 columns, one group per stage, whatever the split count) or one split (all of C).
// With 32- or 64-column stages on several splits a group spans CTAs of the cluster (interleaved
// stages), which the launcher does not send here (boundary_fp8_fits). The launcher instantiates
// the FP8 kernels for the wide stages only, with the norm weight (the plain collapse has no norm
// pass to quantise in); elsewhere it runs the bf16 kernel into the staging buffer and the
// stand-alone group quantisation of it, the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/core/sm90_boundary_plan.hpp"
#include "mhc/cuda/fp8.cuh"
#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/sm90_boundary_stages.cuh"

namespace mhc::cuda {

struct BoundaryBf16Out {
  static constexpr bool kFp8 = false;
  static constexpr bool kFold = false;
  __device__ static BoundaryBf16Out from(const PrenormArgs&, int) { return {}; }
  // y_at: where the vector's y was read from; o: its scaled values before the bf16 rounding.
  __device__ __forceinline__ void store8(uint16_t* y_at, int64_t, int, const float (&o)[8]) const {
    store_u4(y_at, pack_bf16x8(o));
  }
};

// The group's largest magnitude over the caller's half-warp alone: in the norm pass the warp's
// two halves may run different rows or column vectors (a CTA's vectors are a multiple of 16, not
// of 32), so the shuffles name only the 16 lanes that hold the group, all of which call it.
struct OwnHalfWarpGroupMax {
  __device__ __forceinline__ float operator()(float amax) const {
    const unsigned mask = 0xffffu << (threadIdx.x & 16u);
#pragma unroll
    for (int offset = kFp8GroupVecs / 2; offset > 0; offset /= 2) {
      amax = fmaxf(amax, __shfl_xor_sync(mask, amax, offset));
    }
    return amax;
  }
};

struct BoundaryFp8Out {
  static constexpr bool kFp8 = true;
  static constexpr bool kFold = false;
  Fp8LayerInput out;
  int hidden = 0;
  __device__ static BoundaryFp8Out from(const PrenormArgs& args, int hidden) {
    return {args.input.fp8, hidden};
  }
  // Fp8Row::store8: the bf16 rounding of o, the group's amax, scale and codes (fp8.cuh's, the
  // row kernels' and the stand-alone quantiser's).
  __device__ __forceinline__ void store8(uint16_t*, int64_t token, int c,
                                         const float (&o)[8]) const {
    out.row(token, hidden).store8(c, o, OwnHalfWarpGroupMax{});
  }
};

// Whether a launch shape's CTAs own whole FP8 groups (see above): the shapes the FP8 kernel takes.
__host__ __device__ constexpr bool boundary_fp8_fits(int stage_columns, int splits) {
  return stage_columns == kBoundaryWideColumns || splits == 1;
}
static_assert(kBoundaryWideColumns == kFp8GroupSize, "a wide stage is one FP8 group");

// The folded form: the wide stages only (a stage is one group of every row of the tile), the
// producer warpgroup's warps after the copy issuer's quantising each stage once the consumers have
// formed its y (detail::quantise_folded_stages). The partial scales wait in shared memory for the
// row factors, kBoundaryFoldMaxGroups groups a CTA (C up to 8192 on one split; boundary_fold_fits,
// else the launcher runs the staged form).
inline constexpr int kBoundaryFoldMaxGroups = 64;
inline constexpr int kBoundaryFoldWarps = 2;
__host__ __device__ constexpr bool boundary_fold_fits(int splits, int hidden) {
  return boundary_split_stages(0, splits, hidden / kBoundaryWideColumns) <= kBoundaryFoldMaxGroups;
}
struct BoundaryFp8FoldedOut {
  static constexpr bool kFp8 = true;
  static constexpr bool kFold = true;
};

namespace detail {

// A quantiser warp of the folded form (quant_warp of kBoundaryFoldWarps): per stage of the CTA,
// once every consumer warp has arrived on computed[s] (their y written over F's box), each
// half-warp takes rows half, half + 2 x kBoundaryFoldWarps, ... of the tile: lane l reads the row's
// vector l (columns 8l..8l+7 of the stage's group) from the swizzled box, v = y * w in fp32, the
// group's amax by the half-warp's shuffles, the partial scale max(amax, 1e-10) / 448 and the codes
// e4m3(v / scale) with fp8.cuh's quantiser (so its rounding, clamp and NaN rules); the codes go
// out at once (a half-warp stores the row's 128 bytes), the partial scale into
// partial[i][row] for write_folded_scales. Then one arrival per warp on quantised[s], which the
// producer waits for before it refills the slot. Rows past the batch are skipped. Not inlined, as
// the producer: it runs at the producers' register count.
template <class S>
__device__ __noinline__ void quantise_folded_stages(const PrenormArgs& args,
                                                    const unsigned char* stages, uint64_t* computed,
                                                    uint64_t* quantised, const uint16_t* stage_of,
                                                    int stage_count, int64_t row0, int rows_valid,
                                                    int hidden, int quant_warp,
                                                    float (*partial)[S::kRows]) {
  static_assert(S::kWide && S::kLines == 2 && S::kRowBytes == 128,
                "a wide stage: each row's group as two 128-byte lines of the box");
  constexpr int kHalves = 2 * kBoundaryFoldWarps;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int l = lane % kFp8GroupVecs;
  const int first_row = quant_warp * 2 + lane / kFp8GroupVecs;
  const Fp8LayerInput& out = args.input.fp8;
  for (int i = 0; i < stage_count; ++i) {
    const int s = i % S::kStages;
    const int c = stage_of[i] * S::kStageColumns + l * kBf16PerVec;
    // The weights before the wait: their loads overlap it.
    float wv[8];
    unpack_f4x2(load_weight_f4(args.input.norm_weight + c),
                load_weight_f4(args.input.norm_weight + c + 4), wv);
    mbarrier_wait(&computed[s], unsigned(i / S::kStages) & 1u);
    const unsigned char* y_box = stages + s * S::kStageBytes + S::kFOffset;
    for (int r = first_row; r < rows_valid; r += kHalves) {
      // Vector l of row r: 32-column chunk l / 4 of the stage, line 2r + chunk / 2, piece l % 8
      // of it (the consumers' layout, consume_boundary_stage).
      float v[8];
      unpack_bf16x8(*reinterpret_cast<const uint4*>(
                        y_box + box_offset<S::kRowBytes>(r * S::kLines + l / 8, l % 8)),
                    v);
      float amax = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        v[e] *= wv[e];
        amax = fmaxf(amax, fabsf(v[e]));
      }
      const float scale = fp8_group_scale(OwnHalfWarpGroupMax{}(amax), false);
      *reinterpret_cast<uint2*>(out.codes + (row0 + r) * hidden + c) = fp8_codes8(v, scale);
      if (l == 0) partial[i][r] = scale;
    }
    __syncwarp();  // the warp's reads of the slot are done before its arrival
    if (lane == 0) mbarrier_arrive(&quantised[s]);
  }
}

// The folded form's scales, after the row factors (row_scale, exchange_row_norms): every (token,
// group) of the CTA, partial scale x factor, written once; consecutive threads take consecutive
// tokens of a group (contiguous with column-major scales). All threads of the CTA call it.
template <class S>
__device__ __forceinline__ void write_folded_scales(const Fp8LayerInput& out,
                                                    const float (*partial)[S::kRows],
                                                    const float* row_scale,
                                                    const uint16_t* stage_of, int stage_count,
                                                    int64_t row0, int rows_valid) {
  if (rows_valid <= 0) return;
  for (int k = static_cast<int>(threadIdx.x); k < rows_valid * stage_count; k += S::kThreads) {
    const int r = k % rows_valid, i = k / rows_valid;
    out.scales[(row0 + r) * out.scale_token_stride +
               int64_t(stage_of[i]) * out.scale_group_stride] = partial[i][r] * row_scale[r];
  }
}

}  // namespace detail

}  // namespace mhc::cuda
