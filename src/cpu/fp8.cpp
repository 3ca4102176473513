// The reference quantiser of the FP8 layer input (mhc/cpu/fp8.hpp, docs/fp8.md).
#include "mhc/cpu/fp8.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace mhc {

uint8_t e4m3_from_float(float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(v));
  // Subnormals (and zero): multiples of 2^-9 below 2^-6; a rounding up to 8 x 2^-9 gives code
  // 0x08, the smallest normal, as it should.
  if (a < std::ldexp(1.0, -6)) {
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0));
  }
  int e = 0;
  const double m = std::frexp(a, &e);                // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;                              // a = (1 + f) * 2^exponent
  double q = std::nearbyint((m * 2.0 - 1.0) * 8.0);  // exact; ties to even (default mode)
  if (q == 8.0) q = 0.0, ++exponent;
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) | static_cast<int>(q));
}

float e4m3_to_float(uint8_t code) {
  const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return static_cast<float>((code & 0x80) ? -magnitude : magnitude);
}

float fp8_group_scale(float amax, bool ue8m0) {
  float scale = std::fmax(amax, kFp8AmaxFloor) / kFp8Max;
  if (!ue8m0) return scale;
  scale = std::fmax(std::fabs(scale), kFp8AmaxFloor);
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof bits);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  bits = (exponent + ((bits & 0x7fffffu) != 0u ? 1u : 0u)) << 23;  // up to a power of two
  std::memcpy(&scale, &bits, sizeof bits);
  return scale;
}

uint8_t fp8_quantize(float v, float scale) {
  // fmax / fmin as the kernels' fmaxf / fminf: a NaN quotient becomes -448.
  const float q = std::fmin(std::fmax(v / scale, -kFp8Max), kFp8Max);
  return e4m3_from_float(q);
}

void fp8_quantize_rows(const Bf16* rows, int64_t tokens, int64_t hidden, const Fp8Format& f,
                       uint8_t* codes, float* scales) {
  const int64_t groups = fp8_groups(hidden, f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = t * hidden + g * f.group_size;
      float amax = 0.f;
      for (int i = 0; i < f.group_size; ++i) {
        amax = std::fmax(amax, std::fabs(bf16_to_float(rows[begin + i])));
      }
      const float scale = fp8_group_scale(amax, f.ue8m0);
      scales[fp8_scale_index(t, g, tokens, hidden, f)] = scale;
      for (int i = 0; i < f.group_size; ++i) {
        codes[begin + i] = fp8_quantize(bf16_to_float(rows[begin + i]), scale);
      }
    }
  }
}

std::vector<double> fp8_dequantize_rows(const uint8_t* codes, const float* scales, int64_t tokens,
                                        int64_t hidden, const Fp8Format& f) {
  std::vector<double> out(static_cast<size_t>(tokens * hidden));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < hidden; ++c) {
      const double scale = scales[fp8_scale_index(t, c / f.group_size, tokens, hidden, f)];
      out[t * hidden + c] = double(e4m3_to_float(codes[t * hidden + c])) * scale;
    }
  }
  return out;
}

}  // namespace mhc
