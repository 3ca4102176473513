// The head collapse (docs/head.md): the float64 reference against its formula written out here,
// and the fp32 CPU backend against the reference at the model's hidden sizes, zero, one, odd and
// large token counts, with and without the final norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/head_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::head_shape_name;
using test::HeadCase;
using test::HeadShape;
using test::random_head_case;

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// n = 2, C = 8, one token, every value written out: mixes = (fn . v) / rms(v), w = sigmoid(mixes
// * scale + base) + hc_eps, y = sum_j w_j x_j, out = bf16(y) / rms(bf16(y)) * norm_weight.
TEST(HeadReference, TinyHeadMatchesFormulas) {
  MhcParams p = test::small_params(2, 8);
  p.eps_h = 1e-3;  // large enough to show in the weights
  const std::vector<float> xs{1, -2, 0.5, 3, -1, 0.25, 2, -0.75, 0.5, 1, -1.5, 2, 0.125, -3, 1, 4};
  std::vector<Bf16> x;
  for (float v : xs) x.push_back(float_to_bf16(v));
  std::vector<float> fn;
  for (int i = 0; i < 2; ++i) {
    for (int e = 0; e < 16; ++e) fn.push_back(0.05f * float((i * 7 + e * 3) % 11 - 5));
  }
  const std::vector<float> base{-0.3f, 0.4f}, scale{0.8f};
  const std::vector<float> norm{1, 0.5, 2, 1.5, 1, 1, 0.25, 1};

  double sum_v2 = 0;
  for (float v : xs) sum_v2 += double(v) * v;
  const double r = 1.0 / std::sqrt(sum_v2 / 16 + p.rms_eps());
  double w[2];
  for (int j = 0; j < 2; ++j) {
    double dot = 0;
    for (int e = 0; e < 16; ++e) dot += double(fn[size_t(j * 16 + e)]) * xs[size_t(e)];
    w[j] = sigmoid(dot * r * double(scale[0]) + double(base[size_t(j)])) + 1e-3;
  }
  double y[8], sum_y2 = 0;
  for (int c = 0; c < 8; ++c) {
    y[c] = w[0] * xs[size_t(c)] + w[1] * xs[size_t(8 + c)];
    sum_y2 += round_to_bf16(y[c]) * round_to_bf16(y[c]);
  }

  const ref::HeadResult plain = ref::head(p, 1, x.data(), {fn.data(), base.data(), scale.data()});
  const ref::HeadResult normed =
      ref::head(p, 1, x.data(), {fn.data(), base.data(), scale.data(), norm.data()});
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(plain.weights[size_t(j)], w[j], 1e-12);
    EXPECT_EQ(normed.weights[size_t(j)], plain.weights[size_t(j)]);
  }
  for (int c = 0; c < 8; ++c) {
    EXPECT_NEAR(plain.out[size_t(c)], y[c], 1e-12) << c;
    const double expect =
        round_to_bf16(y[c]) / std::sqrt(sum_y2 / 8 + p.norm_eps()) * norm[size_t(c)];
    EXPECT_NEAR(normed.out[size_t(c)], expect, 1e-12) << c;
  }
}

std::vector<HeadShape> head_shapes() {
  std::vector<HeadShape> shapes;
  for (bool norm : {false, true}) {
    for (int hidden : {4096, 5120, 7168}) {
      for (int64_t tokens : {1, 7, 33}) shapes.push_back({4, hidden, tokens, 1.0, norm});
    }
    shapes.push_back({4, 5120, 1025, 1.0, norm});  // large and odd
    shapes.push_back({4, 7168, 256, 1.0, norm});
    shapes.push_back({2, 4096, 1, 1.0, norm});
    shapes.push_back({2, 4096, 33, 1.0, norm});
    for (double amplitude : {1e-3, 1e2}) shapes.push_back({4, 5120, 7, amplitude, norm});
  }
  return shapes;
}

class CpuHeadVsReference : public ::testing::TestWithParam<HeadShape> {};

TEST_P(CpuHeadVsReference, WithinFp32Tier) {
  const HeadShape& s = GetParam();
  const HeadCase c = test::head_case(s, uint64_t(s.hidden * 131 + s.tokens));
  const MhcParams& p = c.p;
  std::vector<Bf16> out = test::poisoned_bf16(size_t(c.tokens * p.hidden));
  std::vector<float> weights = test::poisoned_f32(size_t(c.tokens * p.n));
  cpu::head(p, c.tokens, c.x.data(), c.view(s.norm), out.data(), weights.data());
  const ref::HeadResult r = ref::head(p, c.tokens, c.x.data(), c.view(s.norm));

  const ErrorStats w_err = compare(weights.data(), r.weights.data(), c.tokens * p.n);
  const ErrorStats out_err = compare(out.data(), r.out.data(), c.tokens * p.hidden);
  EXPECT_TRUE(w_err.passes(kFp32Tolerances.coefficients)) << w_err.describe();
  EXPECT_TRUE(out_err.passes(kFp32Tolerances.activations)) << out_err.describe();
  for (float w : weights) {  // sigmoid + eps
    ASSERT_GT(w, 0.0f);
    ASSERT_LE(w, 1.0f + float(p.pre_eps()));
  }

  // The collapse (and norm) is the input path's, with the head's weights as pre_mix.
  std::vector<Bf16> via_input_path = test::poisoned_bf16(out.size());
  cpu::input_path(p, c.tokens, c.x.data(), weights.data(), s.norm ? c.norm_weight.data() : nullptr,
                  via_input_path.data());
  EXPECT_TRUE(test::same_finite_bits(out, via_input_path));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuHeadVsReference, ::testing::ValuesIn(head_shapes()),
                         head_shape_name);

TEST(CpuHead, BitsDoNotDependOnThreadsOrBatch) {
  const HeadCase c = random_head_case(test::small_params(4, 4096), 9, 7);
  const MhcParams& p = c.p;
  std::vector<Bf16> all(size_t(c.tokens * p.hidden)), one(size_t(p.hidden));
  const int before = cpu::threads();
  cpu::set_threads(1);
  cpu::head(p, c.tokens, c.x.data(), c.view(true), all.data());
  cpu::set_threads(before);
  for (int64_t m = 0; m < c.tokens; ++m) {
    cpu::head(p, 1, c.x.data() + m * p.k(), c.view(true), one.data());
    const std::vector<Bf16> row(all.begin() + m * p.hidden, all.begin() + (m + 1) * p.hidden);
    EXPECT_TRUE(test::same_finite_bits(one, row)) << "token " << m;
  }
}

TEST(CpuHead, ZeroTokensWritesNothing) {
  const HeadCase c = random_head_case(test::small_params(4, 4096), 1, 3);
  std::vector<Bf16> out = test::poisoned_bf16(size_t(c.p.hidden));
  cpu::head(c.p, 0, c.x.data(), c.view(true), out.data());
  cpu::head(c.p, 0, nullptr, {}, nullptr);  // nothing is read or written
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](Bf16 v) { return v.bits == 0xFFFF; }));
  EXPECT_TRUE(ref::head(c.p, 0, nullptr, {}).out.empty());
}

TEST(CpuHead, RefusesBadArguments) {
  const HeadCase c = random_head_case(test::small_params(4, 512), 2, 5);
  std::vector<Bf16> out(size_t(2 * 512));
  HeadWeightsView no_fn = c.view(false);
  no_fn.hc_fn = nullptr;
  EXPECT_THROW(cpu::head(c.p, -1, c.x.data(), c.view(false), out.data()), Error);
  EXPECT_THROW(cpu::head(c.p, 2, c.x.data(), no_fn, out.data()), Error);
  EXPECT_THROW(cpu::head(c.p, 2, nullptr, c.view(false), out.data()), Error);
  EXPECT_THROW(cpu::head(c.p, 2, c.x.data(), c.view(false), nullptr), Error);
  EXPECT_THROW(ref::head(c.p, 2, c.x.data(), no_fn), Error);
  MhcParams bad = c.p;
  bad.n = 0;
  EXPECT_THROW(cpu::head(bad, 2, c.x.data(), c.view(false), out.data()), Error);
}

}  // namespace
}  // namespace mhc
