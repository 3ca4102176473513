// The layer_input a row kernel writes, as a type: the kernels that form layer_input (the input
// path, the post + next input path, the cluster post) take it as a template parameter, so one
// kernel body writes either output.
//
// Bf16LayerInput: the bf16 rows [T, C], as ever. Fp8LayerInput: those rows' values quantised as
// vLLM's per_token_group_quant_fp8 quantises the bf16 tensor (docs/fp8.md): E4M3 codes [T, C]
// and a float32 scale per (token, 128-column group) at the layout's place (mhc/core/fp8.hpp). A
// group is 16 consecutive 8-column vectors of a row; the callers give the group's amax reduction
// over the lanes that hold them (half-warp shuffles in the row kernels).
#pragma once
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/core/fp8.hpp"
#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

// 8-column vectors per FP8 group.
inline constexpr int kFp8GroupVecs = kFp8GroupSize / kBf16PerVec;
static_assert(kFp8GroupVecs == 16, "a group is a half-warp of vectors");

// One token's row of a bf16 layer_input: store8 is per lane, and a lane past the row (c < 0)
// need not call it.
struct Bf16Row {
  uint16_t* row;
  template <class GroupMax>
  __device__ __forceinline__ void store8(int c, const float (&o)[8], GroupMax) const {
    store_u4(row + c, pack_bf16x8(o));
  }
};

struct Bf16LayerInput {
  static constexpr bool kCollective = false;  // see Bf16Row
  using Param = uint16_t*;   // a kernel's parameter for it: the rows (the kernels' as ever)
  uint16_t* rows = nullptr;  // [T, C]

  __host__ __device__ bool valid() const { return rows != nullptr; }
  __host__ __device__ Param param() const { return rows; }
  __device__ __forceinline__ Bf16Row row(int64_t token, int hidden) const {
    return {rows + token * hidden};
  }
};

// The group's largest magnitude over the 16 lanes of a half-warp (vector v of a row kernel's
// thread t is vector t + v x threads, threads a multiple of 32: a half-warp holds one group).
// Every lane of the warp must call it.
struct HalfWarpGroupMax {
  __device__ __forceinline__ float operator()(float amax) const {
#pragma unroll
    for (int offset = kFp8GroupVecs / 2; offset > 0; offset /= 2) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    return amax;
  }
};

// The scale of a group whose largest magnitude is amax (the reference: mhc/cpu/fp8.hpp).
__device__ __forceinline__ float fp8_group_scale(float amax, bool ue8m0) {
  float scale = __fdiv_rn(fmaxf(amax, kFp8AmaxFloor), kFp8Max);
  if (ue8m0) {  // the power of two at or above: the exponent, plus one for any mantissa
    const uint32_t bits = __float_as_uint(fmaxf(fabsf(scale), kFp8AmaxFloor));
    scale = __uint_as_float((((bits >> 23) & 0xffu) + ((bits & 0x7fffffu) != 0u ? 1u : 0u)) << 23);
  }
  return scale;
}

// The codes of 8 values under `scale`: e4m3(clamp(v / scale, -448, 448)), rounded to nearest
// even, 8 bytes in column order.
__device__ __forceinline__ uint2 fp8_codes8(const float (&v)[8], float scale) {
  uint32_t words[2] = {0u, 0u};
#pragma unroll
  for (int e = 0; e < 8; e += 2) {
    float2 q;
    q.x = fminf(fmaxf(__fdiv_rn(v[e], scale), -kFp8Max), kFp8Max);
    q.y = fminf(fmaxf(__fdiv_rn(v[e + 1], scale), -kFp8Max), kFp8Max);
    const __nv_fp8x2_storage_t pair = __nv_cvt_float2_to_fp8x2(q, __NV_SATFINITE, __NV_E4M3);
    words[e / 4] |= uint32_t(pair) << (16 * ((e / 2) % 2));
  }
  return make_uint2(words[0], words[1]);
}

// One token's row of an FP8 layer_input. store8 holds the group's reduction: every lane that
// holds a vector of the group calls it, lanes past the row too (c < 0; they store nothing).
struct Fp8Row {
  uint8_t* codes;  // the token's codes
  float* scales;   // the token's first group's scale
  int64_t scale_group_stride;
  bool ue8m0;
  // o: the layer_input's values before their bf16 rounding (the rounding is the bf16 output's,
  // so that the codes are those of the bf16 layer_input). group_max: the group's reduction.
  template <class GroupMax>
  __device__ __forceinline__ void store8(int c, const float (&o)[8], GroupMax group_max) const {
    float v[8];
    unpack_bf16x8(pack_bf16x8(o), v);
    float amax = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, c >= 0 ? fabsf(v[e]) : 0.f);
    const float scale = fp8_group_scale(group_max(amax), ue8m0);
    if (c < 0) return;
    *reinterpret_cast<uint2*>(codes + c) = fp8_codes8(v, scale);
    if (c % kFp8GroupSize == 0) scales[(c / kFp8GroupSize) * scale_group_stride] = scale;
  }
};

struct Fp8LayerInput {
  static constexpr bool kCollective = true;  // see Fp8Row
  using Param = Fp8LayerInput;
  uint8_t* codes = nullptr;        // [T, C]
  float* scales = nullptr;         // at token * scale_token_stride + group * scale_group_stride
  int64_t scale_token_stride = 0;  // mhc::fp8_scale_token_stride
  int64_t scale_group_stride = 0;  // mhc::fp8_scale_group_stride
  bool ue8m0 = false;

  __host__ __device__ bool valid() const { return codes != nullptr && scales != nullptr; }
  __host__ __device__ Param param() const { return *this; }
  __device__ __forceinline__ Fp8Row row(int64_t token, int hidden) const {
    return {codes + token * hidden, scales + token * scale_token_stride, scale_group_stride, ue8m0};
  }
};

// The host's view of an FP8 layer input for the launchers: its codes, scales and format.
inline Fp8LayerInput fp8_layer_input(uint8_t* codes, float* scales, int64_t tokens, int hidden,
                                     const Fp8Format& f) {
  Fp8LayerInput out;
  out.codes = codes;
  out.scales = scales;
  out.scale_token_stride = fp8_scale_token_stride(hidden, f);
  out.scale_group_stride = fp8_scale_group_stride(tokens, f);
  out.ue8m0 = f.ue8m0;
  return out;
}

}  // namespace mhc::cuda
