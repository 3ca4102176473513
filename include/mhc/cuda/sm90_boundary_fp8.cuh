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
// value instead of two. Folding the row's norm factor into the group scales instead would skip
// the read-back, but its codes and scales are not those bits (and a power-of-two scale cannot
// absorb the factor at all), so the bitwise contract keeps the read-back.
//
// A group's 16 vectors must be one half-warp of the norm pass: its vector v of a row is a
// thread's own, v = tid (+ k x threads), with a CTA's vectors a multiple of 16 and every aligned
// 16 of them 128 consecutive columns. That holds where a CTA owns whole groups: the wide stages
// (128 columns, one group per stage, whatever the split count) or one split (all of C). With 32-
// or 64-column stages on several splits a group spans CTAs of the cluster (interleaved stages),
// which the launcher does not send here (boundary_fp8_fits). The launcher instantiates the FP8
// kernel for the wide stages only, with the norm weight (the plain collapse has no norm pass to
// quantise in); elsewhere it runs the bf16 kernel into the staging buffer and the stand-alone
// group quantisation of it, the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/core/sm90_boundary_plan.hpp"
#include "mhc/cuda/fp8.cuh"
#include "mhc/cuda/prenorm_common.cuh"

namespace mhc::cuda {

struct BoundaryBf16Out {
  static constexpr bool kFp8 = false;
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

}  // namespace mhc::cuda
