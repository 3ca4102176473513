// The parameter ranges (mhc::param_ranges, docs/limits.md) at their ends: one site on the fp32 CPU
// backend gives finite outputs that match the float64 reference, on an all-zero token (the case an
// epsilon of 0 turns into NaN) and on ordinary inputs, with every epsilon and post_mult at the
// smallest and at the largest value the range allows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

constexpr int64_t kTokens = 3;  // token 0 all zeros, the others ordinary

struct Site {
  MhcParams p;
  SiteWeights w;
  std::vector<Bf16> x, f;
  std::vector<float> pre_mix;
};

// Deterministic small values: hc_fn in +-0.05, x and the sublayer output in +-1; the
// comb logits' scale makes one softmax entry per row underflow to 0 in fp32 (exp(-200)).
Site make_site(double eps, double post_mult) {
  Site s;
  s.p.hidden = 64;
  s.p.n = 4;
  s.p.layers = 1;
  s.p.eps_h = s.p.eps_n = eps;
  s.p.rms_eps_override = s.p.sinkhorn_eps_override = s.p.norm_eps_override = eps;
  s.p.pre_eps_override = eps;
  s.p.post_mult = post_mult;
  const MhcParams& p = s.p;
  auto wave = [](int64_t i, double amplitude) {
    return float(amplitude * std::sin(0.37 * double(i) + 0.11));
  };
  s.w.hc_fn.resize(size_t(p.nmix() * p.k()));
  for (size_t i = 0; i < s.w.hc_fn.size(); ++i) s.w.hc_fn[i] = wave(int64_t(i), 0.05);
  s.w.hc_base.assign(size_t(p.nmix()), 0.0f);
  for (int j = 0; j < p.n; ++j) s.w.hc_base[size_t(2 * p.n + j * p.n + j)] = 200.0f;
  s.w.hc_scale = {1.0f, 1.0f, 1.0f};
  s.w.norm_weight.assign(size_t(p.hidden), 1.0f);
  s.x.assign(size_t(kTokens * p.k()), float_to_bf16(0.0f));
  s.f.assign(size_t(kTokens * p.hidden), float_to_bf16(0.0f));
  for (int64_t i = p.k(); i < kTokens * p.k(); ++i) s.x[size_t(i)] = float_to_bf16(wave(i, 1.0));
  for (int64_t i = p.hidden; i < kTokens * p.hidden; ++i) {
    s.f[size_t(i)] = float_to_bf16(wave(3 * i, 1.0));
  }
  s.pre_mix.assign(size_t(kTokens * p.n), 0.5f);
  return s;
}

void expect_finite_and_close(const Site& s) {
  SiteOutputs out(s.p, kTokens);
  const SiteInputsView in{kTokens, s.x.data(), s.pre_mix.data(), s.f.data()};
  cpu::run_site(s.p, s.w.view(), in, out.view());
  const ref::SiteResult r = ref::run_site(s.p, s.w.view(), in);
  const auto check = [&](const char* name, const ErrorStats& e, double tol) {
    EXPECT_EQ(e.nonfinite, 0) << name << ": " << describe(s.p);
    EXPECT_TRUE(e.passes(tol)) << name << ": " << e.describe() << " " << describe(s.p);
  };
  const int64_t li = int64_t(r.layer_input.size()), xn = int64_t(r.x_next.size());
  check("layer_input", compare(out.layer_input.data(), r.layer_input.data(), li),
        kFp32Tolerances.activations);
  check("pre", compare(out.pre.data(), r.pre.data(), int64_t(r.pre.size())),
        kFp32Tolerances.coefficients);
  check("post", compare(out.post.data(), r.post.data(), int64_t(r.post.size())),
        kFp32Tolerances.coefficients);
  check("comb", compare(out.comb.data(), r.comb.data(), int64_t(r.comb.size())),
        kFp32Tolerances.coefficients);
  check("x_next", compare(out.x_next.data(), r.x_next.data(), xn), kFp32Tolerances.activations);
  // The all-zero token: its input path is exactly zero (0 * rsqrt(eps), not 0 * inf).
  for (int64_t c = 0; c < s.p.hidden; ++c) {
    EXPECT_EQ(bf16_to_float(out.layer_input[size_t(c)]), 0.0f) << describe(s.p);
  }
}

TEST(ParamRanges, TheSmallestEpsilonsKeepAnAllZeroTokenFinite) {
  expect_finite_and_close(make_site(kMinDivisorEps, 2.0));
  expect_finite_and_close(make_site(kMinDivisorEps, -kMaxParamMagnitude));
}

TEST(ParamRanges, TheLargestValuesKeepEveryOutputFinite) {
  expect_finite_and_close(make_site(kMaxParamMagnitude, kMaxParamMagnitude));
  expect_finite_and_close(make_site(1e-6, kMaxParamMagnitude));
}

}  // namespace
}  // namespace mhc
