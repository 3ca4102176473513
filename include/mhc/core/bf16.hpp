// Host-side bfloat16: storage type plus exact conversions (round to nearest even, NaN kept).
// Bit-compatible with CUDA's __nv_bfloat16, so host and device buffers can be copied as is.
#pragma once
#include <cstdint>
#include <cstring>

namespace mhc {

struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2);

inline float bf16_to_float(Bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline Bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN, sign kept
  }
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // round half to even
  return Bf16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

// The value a double takes once stored as bf16 (used by the float64 reference at storage points).
inline double round_to_bf16(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}

}  // namespace mhc
