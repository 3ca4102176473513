// mhc::compare on values whose errors are known.
#include "mhc/cpu/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace mhc {
namespace {

TEST(Compare, EqualValuesHaveNoError) {
  const std::vector<float> out{1.5f, -2.0f, 3.25f};
  const std::vector<double> ref{1.5, -2.0, 3.25};
  const ErrorStats e = compare(out.data(), ref.data(), 3);
  EXPECT_EQ(e.rel_norm, 0);
  EXPECT_EQ(e.max_abs_rel, 0);
  EXPECT_EQ(e.count, 3);
  EXPECT_TRUE(e.passes(0));
}

TEST(Compare, KnownErrors) {
  const std::vector<float> out{3, 5, 0};
  const std::vector<double> ref{3, 4, 0};
  const ErrorStats e = compare(out.data(), ref.data(), 3);
  EXPECT_DOUBLE_EQ(e.rel_norm, 1.0 / 5.0);     // ||(0,1,0)|| / ||(3,4,0)||
  EXPECT_DOUBLE_EQ(e.max_abs_rel, 1.0 / 4.0);  // max |diff| / max |ref|
  EXPECT_FALSE(e.passes(0.2));
  EXPECT_TRUE(e.passes(0.25));
}

TEST(Compare, NonFiniteOutputsFailWhateverTheTolerance) {
  const std::vector<double> ref{1, 2, 3, 4};
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> out{1, bad, 3, 4};
    const ErrorStats e = compare(out.data(), ref.data(), 4);
    EXPECT_EQ(e.nonfinite, 1);
    EXPECT_EQ(e.first_nonfinite, 1);
    EXPECT_NE(e.describe().find("first at flat element 1"), std::string::npos);
    EXPECT_FALSE(e.passes(1e30));
    EXPECT_EQ(e.max_abs_rel, 0);  // the finite elements are exact
  }
  const std::vector<Bf16> poisoned(4, Bf16{0xFFFF});  // bf16 NaN: what the tests poison with
  EXPECT_EQ(compare(poisoned.data(), ref.data(), 4).nonfinite, 4);
}

TEST(Compare, NanReferenceNeverPasses) {
  const std::vector<float> out{1, 2};
  const std::vector<double> ref{1, std::nan("")};
  EXPECT_FALSE(compare(out.data(), ref.data(), 2).passes(1e30));
}

TEST(Compare, ZeroReferenceUsesAbsoluteError) {
  const std::vector<float> out{0.5f, 0.0f};
  const std::vector<double> ref{0.0, 0.0};
  const ErrorStats e = compare(out.data(), ref.data(), 2);
  EXPECT_DOUBLE_EQ(e.rel_norm, 0.5);
  EXPECT_DOUBLE_EQ(e.max_abs_rel, 0.5);
  const std::vector<float> zeros{0, 0};
  EXPECT_TRUE(compare(zeros.data(), ref.data(), 2).passes(0));
}

TEST(Compare, EmptyIsExact) {
  const ErrorStats e = compare(static_cast<const Bf16*>(nullptr), nullptr, 0);
  EXPECT_EQ(e.count, 0);
  EXPECT_TRUE(e.passes(0));
}

// A bf16 output against its exact value: the error is the rounding, at most 2^-9 relative.
TEST(Compare, Bf16RoundingErrorIsBounded) {
  std::vector<double> ref;
  std::vector<Bf16> out;
  for (int i = 1; i <= 1000; ++i) {
    ref.push_back(std::sin(double(i)) * 1e3);
    out.push_back(float_to_bf16(float(ref.back())));
  }
  const ErrorStats e = compare(out.data(), ref.data(), int64_t(ref.size()));
  EXPECT_GT(e.rel_norm, 0);
  EXPECT_LE(e.rel_norm, 0x1p-9);
  EXPECT_LE(e.max_abs_rel, 0x1p-8);
}

TEST(Compare, DescribeNamesEveryField) {
  const std::vector<float> out{1, 2};
  const std::vector<double> ref{1, 4};
  const std::string text = compare(out.data(), ref.data(), 2).describe();  // 2 / sqrt(17)
  EXPECT_NE(text.find("rel_norm=4.851e-01"), std::string::npos) << text;
  EXPECT_NE(text.find("max_abs_rel=5.000e-01"), std::string::npos) << text;
  EXPECT_NE(text.find("nonfinite=0"), std::string::npos) << text;
  EXPECT_NE(text.find("count=2"), std::string::npos) << text;
}

}  // namespace
}  // namespace mhc
