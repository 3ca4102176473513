// The reference quantiser of the FP8 layer input (mhc/cpu/fp8.hpp) against E4M3's definition and
// vLLM's per_token_group_quant_fp8 written out here: the codes, the rounding, the scales and
// their layouts.
#include "mhc/cpu/fp8.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/error.hpp"

namespace mhc {
namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(Fp8Codes, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << code;
      continue;
    }
    EXPECT_EQ(e4m3_from_float(v), code) << "code " << code << " value " << v;
  }
}

TEST(Fp8Codes, KnownValues) {
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.f);
  EXPECT_EQ(e4m3_to_float(0xb8), -1.f);
  EXPECT_EQ(e4m3_from_float(-0.f), 0x80);
  EXPECT_EQ(e4m3_from_float(0.f), 0x00);
}

// Halfway between neighbours the code with the even mantissa wins; just off halfway, the nearer.
TEST(Fp8Codes, RoundsToNearestEven) {
  for (int code = 0; code < 0x7e; ++code) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(code));
    const float hi = e4m3_to_float(static_cast<uint8_t>(code + 1));
    const float mid = (lo + hi) / 2;  // exact in float
    const int even = code % 2 == 0 ? code : code + 1;
    EXPECT_EQ(e4m3_from_float(mid), even) << "between codes " << code << " and " << code + 1;
    EXPECT_EQ(e4m3_from_float(-mid), 0x80 | even);
    EXPECT_EQ(e4m3_from_float(std::nextafter(mid, 0.f)), code);
    EXPECT_EQ(e4m3_from_float(std::nextafter(mid, 1000.f)), code + 1);
  }
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.f, -10)), 0x00);      // half the smallest subnormal
  EXPECT_EQ(e4m3_from_float(3 * std::ldexp(1.f, -10)), 0x02);  // 1.5 x it: to 2 (even)
}

TEST(Fp8Scales, FloorAndPowerOfTwo) {
  EXPECT_EQ(fp8_group_scale(448.f, false), 1.f);
  EXPECT_EQ(fp8_group_scale(0.f, false), 1e-10f / 448.f);  // an all-zero group
  // UE8M0: floored at 1e-10 before rounding up (vLLM's), 2^-33 the power of two above it.
  EXPECT_EQ(fp8_group_scale(0.f, true), std::ldexp(1.f, -33));
  EXPECT_EQ(fp8_group_scale(448.f, true), 1.f);
  EXPECT_EQ(fp8_group_scale(std::nextafter(448.f, 1000.f), true), 2.f);
  EXPECT_EQ(fp8_group_scale(224.f, true), 0.5f);
  EXPECT_EQ(fp8_group_scale(300.f, true), 1.f);
  // Exactly a power of two after the division stays; one ulp above goes up.
  const float just_above = bits_to_float(0x3f800001u) * 448.f;  // (1 + 2^-23) * 448, exact
  EXPECT_EQ(fp8_group_scale(just_above, true), 2.f);
}

TEST(Fp8Scales, QuantizeClampsAndDivides) {
  EXPECT_EQ(fp8_quantize(448.f, 1.f), 0x7e);
  EXPECT_EQ(fp8_quantize(1e6f, 1.f), 0x7e);  // clamped to 448
  EXPECT_EQ(fp8_quantize(-1e6f, 1.f), 0xfe);
  EXPECT_EQ(fp8_quantize(3.f, 2.f), e4m3_from_float(1.5f));
  // A NaN quotient: fmax(NaN, -448) is -448, as in the kernels.
  EXPECT_EQ(fp8_quantize(std::numeric_limits<float>::quiet_NaN(), 1.f), 0xfe);
}

// vLLM's per_token_group_quant_fp8 written out per group: amax over the bf16 values, the
// scale, each value divided and rounded; row-major and column-major scales at their places.
TEST(Fp8Rows, MatchesGroupQuantisationInBothLayouts) {
  const int64_t tokens = 5, hidden = 384;
  test::TestRng rng(17);
  std::vector<Bf16> rows(tokens * hidden);
  for (auto& v : rows) v = float_to_bf16(static_cast<float>(rng.normal() * 3.0));
  rows[7] = float_to_bf16(0.f);
  for (int i = 0; i < 128; ++i) rows[hidden + 128 + i] = float_to_bf16(0.f);  // a zero group
  for (bool column_major : {false, true}) {
    for (bool ue8m0 : {false, true}) {
      const Fp8Format f{128, column_major, ue8m0};
      std::vector<uint8_t> codes(rows.size(), 0xaa);
      std::vector<float> scales(fp8_scale_floats(tokens, hidden, f),
                                std::numeric_limits<float>::quiet_NaN());
      fp8_quantize_rows(rows.data(), tokens, hidden, f, codes.data(), scales.data());
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t g = 0; g < 3; ++g) {
          float amax = 1e-10f;
          for (int i = 0; i < 128; ++i) {
            amax = std::max(amax, std::fabs(bf16_to_float(rows[t * hidden + g * 128 + i])));
          }
          float scale = amax / 448.f;
          if (ue8m0) scale = std::exp2(std::ceil(std::log2(double(std::max(scale, 1e-10f)))));
          const int64_t at = column_major ? g * 8 + t : t * 3 + g;  // 5 tokens padded to 8
          ASSERT_EQ(scales[at], scale) << t << " " << g;
          for (int i = 0; i < 128; ++i) {
            const float v = bf16_to_float(rows[t * hidden + g * 128 + i]);
            const float q = std::min(std::max(v / scale, -448.f), 448.f);
            ASSERT_EQ(codes[t * hidden + g * 128 + i], e4m3_from_float(q));
          }
        }
      }
      // Dequantised within E4M3's half step of each value (or of the scale's subnormal step).
      const std::vector<double> back =
          fp8_dequantize_rows(codes.data(), scales.data(), tokens, hidden, f);
      for (int64_t i = 0; i < tokens * hidden; ++i) {
        const double v = bf16_to_float(rows[i]);
        const double scale =
            scales[fp8_scale_index(i / hidden, i % hidden / 128, tokens, hidden, f)];
        EXPECT_LE(std::fabs(back[i] - v), std::fabs(v) / 16 + scale * std::ldexp(1.0, -10)) << i;
      }
    }
  }
}

TEST(Fp8Format, LayoutsAndChecks) {
  const Fp8Format row{}, col{128, true, false};
  EXPECT_EQ(fp8_scale_floats(5, 5120, row), 5 * 40);
  EXPECT_EQ(fp8_scale_floats(5, 5120, col), 8 * 40);
  EXPECT_EQ(fp8_scale_index(3, 2, 5, 5120, row), 3 * 40 + 2);
  EXPECT_EQ(fp8_scale_index(3, 2, 5, 5120, col), 2 * 8 + 3);
  EXPECT_NO_THROW(check_fp8_format(row, 7168, "t"));
  EXPECT_THROW(check_fp8_format(Fp8Format{64, false, false}, 5120, "t"), Error);
  EXPECT_THROW(check_fp8_format(row, 5120 + 64, "t"), Error);
}

}  // namespace
}  // namespace mhc
