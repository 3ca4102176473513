// The FP8 quantiser's quotient from the scale's reciprocal (mhc/core/fp8_quotient.hpp) against
// the IEEE division it replaces in the kernels. A group's amax is a bf16 value, so its scale is
// RN(amax / 448) for a bf16 amax (or a power of two with UE8M0); the quotient's relation to the
// division does not change when the scale is multiplied by a power of two, away from the ends of
// float's range. So: every bf16 value v, against every bf16 mantissa of amax at exponents that
// cover both ends and the middle, and the amax floor.
#include "mhc/core/fp8_quotient.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "mhc/core/fp8.hpp"
#include "mhc/cpu/fp8.hpp"

namespace mhc {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Every finite bf16 value, as floats. An infinite value makes its group's scale infinite, where
// the kernels divide (fp8_quotient_exact).
std::vector<float> every_bf16() {
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float v = from_bits(b << 16);
    if (std::isfinite(v)) values.push_back(v);
  }
  return values;
}

struct Group {
  float amax;   // floored as fp8_group_scale floors it
  float scale;  // its scale
};

// The groups the quantiser meets: bf16 amax of every mantissa at exponents from bf16's smallest
// subnormal to its largest finite binade, with the scale RN(amax / 448) and the UE8M0 power of
// two.
std::vector<Group> groups() {
  std::vector<Group> out;
  const int exponents[] = {-133, -126, -100, -60, -34, -33, -20, -8,  -1, 0,
                           1,    2,    7,    9,   20,  60,  100, 126, 127};
  for (int e : exponents) {
    for (int m = 0; m < 128; ++m) {
      const float amax = std::ldexp(1.0f + m / 128.0f, e);
      if (!std::isfinite(amax)) continue;
      const float floored = std::fmax(amax, kFp8AmaxFloor);
      out.push_back({floored, fp8_group_scale(amax, false)});
      out.push_back({floored, fp8_group_scale(amax, true)});
    }
  }
  return out;
}

// The E4M3 code the kernels store for a quotient q (clamped as fp8.cuh clamps it).
uint8_t code_of(float q) { return e4m3_from_float(std::fmin(std::fmax(q, -kFp8Max), kFp8Max)); }

struct Mismatches {
  int64_t quotients = 0;  // bits unlike the division's, where nothing underflows
  int64_t codes = 0;      // E4M3 codes unlike the division's
  int64_t checked = 0;
};

template <class Quotient>
Mismatches compare(Quotient quotient) {
  const std::vector<float> values = every_bf16();
  Mismatches m;
  // Where nothing underflows (the header's range): |v| >= 2^-100 and a normal quotient.
  const auto normal = [](float v, float q) {
    return std::fabs(v) >= std::ldexp(1.0f, -100) && std::fabs(q) >= 1.17549435e-38f;
  };
  for (const Group& g : groups()) {
    const float s = g.scale;
    const float r = 1.0f / s;  // IEEE: correctly rounded, as __frcp_rn
    if (!fp8_quotient_exact(r)) {
      ADD_FAILURE() << "the scale " << s << " has no normal reciprocal";
      continue;
    }
    for (float v : values) {
      if (std::fabs(v) > g.amax) continue;  // not in a group of this amax
      const float want = v / s;
      const float got = quotient(v, s, r);
      ++m.checked;
      if (normal(v, want) && to_bits(got) != to_bits(want)) ++m.quotients;
      if (code_of(got) != code_of(want)) ++m.codes;
    }
  }
  return m;
}

TEST(Fp8Quotient, TheDivisionsBitsForEveryBf16ValueAndScale) {
  const Mismatches m = compare([](float v, float s, float r) { return fp8_quotient(v, s, r); });
  EXPECT_GT(m.checked, int64_t(50) * 1000 * 1000);
  EXPECT_EQ(m.quotients, 0);
  EXPECT_EQ(m.codes, 0);
}

// The check can fail: the plain product by the reciprocal is off the division in some quotients
// and some codes.
TEST(Fp8Quotient, ThePlainProductByTheReciprocalIsNot) {
  const Mismatches m = compare([](float v, float, float r) { return v * r; });
  EXPECT_GT(m.quotients, 0);
  EXPECT_GT(m.codes, 0);
}

TEST(Fp8Quotient, SignsOfZeroAndUnderflowAreTheDivisions) {
  const float s = fp8_group_scale(std::ldexp(1.0f, 100), false);
  const float r = 1.0f / s;
  for (float v : {0.0f, -0.0f, from_bits(0x00000001u), from_bits(0x80000001u)}) {
    const float q = fp8_quotient(v, s, r);
    EXPECT_EQ(std::signbit(q), std::signbit(v / s)) << v;
    EXPECT_EQ(code_of(q), code_of(v / s)) << v;
  }
}

TEST(Fp8Quotient, AnInfiniteScaleFallsBackToTheDivision) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(fp8_quotient_exact(1.0f / inf));
  EXPECT_FALSE(fp8_quotient_exact(inf));
  EXPECT_FALSE(fp8_quotient_exact(from_bits(0x00400000u)));  // subnormal
  EXPECT_TRUE(fp8_quotient_exact(1.0f / fp8_group_scale(kFp8AmaxFloor, false)));
  EXPECT_TRUE(fp8_quotient_exact(1.0f / fp8_group_scale(std::ldexp(1.99f, 127), false)));
}

}  // namespace
}  // namespace mhc
