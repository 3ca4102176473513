// The float64 reference checked against formulas written out in the test, independently of the
// implementation: a tiny hand-sized site, the one-hot first site, and the bf16 storage of y.
#include "mhc/cpu/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/cpu/fp32_site.hpp"

namespace mhc {
namespace {

std::vector<Bf16> to_bf16(const std::vector<float>& values) {
  std::vector<Bf16> out;
  for (float v : values) out.push_back(float_to_bf16(v));
  return out;
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// n = 2, C = 8, T = 2, one token, values small enough to check by hand.
struct TinySite {
  MhcParams p = test::small_params(2, 8);
  std::vector<float> x0{1, -2, 0.5, 3, -1, 0.25, 2, -0.75};
  std::vector<float> x1{0.5, 1, -1.5, 2, 0.125, -3, 1, 4};
  std::vector<float> pre_mix{0.75, 0.3};
  std::vector<float> norm_weight{1, 0.5, 2, 1.5, 1, 1, 0.25, 1};
  std::vector<float> F{0.5, -1, 2, 0.25, -0.5, 1.5, -2, 1};
  std::vector<float> fn, base{-0.3f, -0.2f, -0.1f, 0.0f, 2.1f, 0.2f, 0.3f, 1.9f};
  std::vector<float> scale{0.8f, 0.6f, 2.0f};
  std::vector<Bf16> x;
  TinySite() {
    p.sinkhorn_iters = 2;
    for (int i = 0; i < 8; ++i) {
      for (int e = 0; e < 16; ++e) fn.push_back(0.05f * float((i * 7 + e * 3) % 11 - 5));
    }
    std::vector<float> both = x0;
    both.insert(both.end(), x1.begin(), x1.end());
    x = to_bf16(both);
  }
  SiteWeightsView weights() const {
    return {fn.data(), base.data(), scale.data(), norm_weight.data()};
  }
};

TEST(Reference, TinySiteMatchesFormulas) {
  const TinySite s;
  const std::vector<Bf16> F = to_bf16(s.F);
  const ref::SiteResult r =
      ref::run_site(s.p, s.weights(), SiteInputsView{1, s.x.data(), s.pre_mix.data(), F.data()});
  const double eps_n = 1e-20, eps_h = 1e-6;

  // Step 1: y = bf16(0.75 x0 + 0.3 x1), layer_input = y / rms(y) * w.
  double y[8], sum_y2 = 0;
  for (int c = 0; c < 8; ++c) {
    y[c] = round_to_bf16(0.75 * s.x0[c] + double(0.3f) * s.x1[c]);
    sum_y2 += y[c] * y[c];
  }
  for (int c = 0; c < 8; ++c) {
    EXPECT_NEAR(r.layer_input[c], y[c] / std::sqrt(sum_y2 / 8 + eps_n) * s.norm_weight[c], 1e-12);
  }

  // Step 2: mixes = fn . v / rms(v) over the 16 values of both streams.
  double v[16], sum_v2 = 0;
  for (int e = 0; e < 16; ++e) {
    v[e] = e < 8 ? s.x0[e] : s.x1[e - 8];
    sum_v2 += v[e] * v[e];
  }
  double mixes[8];
  for (int i = 0; i < 8; ++i) {
    double dot = 0;
    for (int e = 0; e < 16; ++e) dot += double(s.fn[i * 16 + e]) * v[e];
    mixes[i] = dot / std::sqrt(sum_v2 / 16 + eps_n);
    EXPECT_NEAR(r.mixes[i], mixes[i], 1e-12);
  }
  const double scale_pre = s.scale[0], scale_post = s.scale[1], scale_comb = s.scale[2];
  double pre[2], post[2];
  for (int j = 0; j < 2; ++j) {
    pre[j] = sigmoid(mixes[j] * scale_pre + double(s.base[j])) + eps_h;
    post[j] = 2 * sigmoid(mixes[2 + j] * scale_post + double(s.base[2 + j]));
  }
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(r.pre[j], pre[j], 1e-12);
    EXPECT_NEAR(r.post[j], post[j], 1e-12);
  }

  // Sinkhorn, T = 2: softmax rows + eps, columns, rows, columns.
  double L[2][2], P[2][2];
  for (int i = 0; i < 4; ++i) L[i / 2][i % 2] = mixes[4 + i] * scale_comb + double(s.base[4 + i]);
  for (int j = 0; j < 2; ++j) {
    const double e0 = std::exp(L[j][0]), e1 = std::exp(L[j][1]);
    P[j][0] = e0 / (e0 + e1) + eps_h;
    P[j][1] = e1 / (e0 + e1) + eps_h;
  }
  auto columns = [&] {
    for (int k = 0; k < 2; ++k) {
      const double sum = P[0][k] + P[1][k] + eps_h;
      P[0][k] /= sum;
      P[1][k] /= sum;
    }
  };
  columns();
  for (int j = 0; j < 2; ++j) {
    const double sum = P[j][0] + P[j][1] + eps_h;
    P[j][0] /= sum;
    P[j][1] /= sum;
  }
  columns();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.comb[i], P[i / 2][i % 2], 1e-12);

  // Step 4, with the transpose: x_next[k] = post[k] F + sum_j comb[j][k] x[j].
  for (int k = 0; k < 2; ++k) {
    for (int c = 0; c < 8; ++c) {
      const double want = post[k] * s.F[c] + P[0][k] * s.x0[c] + P[1][k] * s.x1[c];
      EXPECT_NEAR(r.x_next[k * 8 + c], want, 1e-12);
    }
  }
}

// The first site: pre_mix one-hot on stream 0, so layer_input = rmsnorm(x[0]) * w exactly.
TEST(Reference, OneHotFirstSiteNormalisesStreamZero) {
  const MhcParams p = test::small_params(4, 64);
  const test::SiteCase c = test::random_site_case(p, 3, 41);
  const std::vector<float> one_hot{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  const std::vector<double> li =
      ref::input_path(p, 3, c.x.data(), one_hot.data(), c.weights.norm_weight.data());
  for (int m = 0; m < 3; ++m) {
    const Bf16* x0 = c.x.data() + m * p.k();
    double sum_sq = 0;
    for (int i = 0; i < 64; ++i) sum_sq += double(bf16_to_float(x0[i])) * bf16_to_float(x0[i]);
    const double rs = 1.0 / std::sqrt(sum_sq / 64 + p.eps_n);
    for (int i = 0; i < 64; ++i) {
      const double want = bf16_to_float(x0[i]) * rs * c.weights.norm_weight[i];
      EXPECT_NEAR(li[size_t(m * 64 + i)], want, 1e-12 * std::abs(want) + 1e-15);
    }
  }
}

// y is stored as bf16 before the norm, as the model does: a collapse that falls between two bf16
// values must be rounded (ties to even), and the norm must see the rounded value.
TEST(Reference, CollapseIsRoundedToBf16BeforeTheNorm) {
  const MhcParams p = test::small_params(2, 8);
  // Element 0: 0.5 * 1 + 0.5 * (1 + 2^-7) = 1 + 2^-8, a tie between bf16 1 and 1 + 2^-7: even,
  // so 1. The others are exact.
  std::vector<float> values(16, 1.0f);
  for (int c = 0; c < 8; ++c) values[size_t(c)] = 1.0f + float(c);
  values[8] = 1.0f + 0x1p-7f;
  for (int c = 1; c < 8; ++c) values[size_t(8 + c)] = 1.0f + float(c);
  const std::vector<Bf16> x = to_bf16(values);
  const std::vector<float> pre_mix{0.5f, 0.5f}, w(8, 1.0f);
  const std::vector<double> li = ref::input_path(p, 1, x.data(), pre_mix.data(), w.data());
  double sum_sq = 0;
  for (int c = 0; c < 8; ++c) sum_sq += (1.0 + c) * (1.0 + c);
  const double rs_rounded = 1.0 / std::sqrt(sum_sq / 8);
  EXPECT_NEAR(li[0], 1.0 * rs_rounded, 1e-14);
  EXPECT_GT(std::abs(li[0] - (1.0 + 0x1p-8) * rs_rounded), 1e-3 * rs_rounded);
  // The fp32 CPU stores y the same way.
  std::vector<Bf16> cpu_li(8, Bf16{0xFFFF});
  cpu::input_path(p, 1, x.data(), pre_mix.data(), w.data(), cpu_li.data());
  EXPECT_EQ(cpu_li[0].bits, float_to_bf16(float(rs_rounded)).bits);
}

// Post with comb = the swap permutation and post = 0 exchanges the streams exactly.
TEST(Reference, PostUsesCombRowsAsSources) {
  const MhcParams p = test::small_params(2, 16);
  const test::SiteCase c = test::random_site_case(p, 1, 42);
  const double post[2] = {0, 0};
  const double swap[4] = {0, 1, 1, 0};        // comb[0][1] = 1: stream 0 feeds destination 1
  const double keep_first[4] = {1, 1, 0, 0};  // row 0 feeds both destinations
  const std::vector<double> swapped =
      ref::post(p, 1, c.x.data(), post, swap, c.sublayer_out.data());
  const std::vector<double> first =
      ref::post(p, 1, c.x.data(), post, keep_first, c.sublayer_out.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(swapped[size_t(i)], bf16_to_float(c.x[size_t(16 + i)]));
    EXPECT_EQ(swapped[size_t(16 + i)], bf16_to_float(c.x[size_t(i)]));
    EXPECT_EQ(first[size_t(i)], bf16_to_float(c.x[size_t(i)]));
    EXPECT_EQ(first[size_t(16 + i)], bf16_to_float(c.x[size_t(i)]));
  }
}

}  // namespace
}  // namespace mhc
