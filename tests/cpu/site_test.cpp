// The fp32 CPU site against the float64 reference, at the fp32 tolerances of the design doc.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::random_site_case;
using test::SiteCase;

struct SiteShape {
  int n;
  int hidden;
  int64_t tokens;
  double amplitude;
  double comb_scale;
};

std::string shape_name(const SiteShape& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "n%d_C%d_M%lld_amp%g_comb%g", s.n, s.hidden, (long long)s.tokens,
                s.amplitude, s.comb_scale);
  std::string name = buf;
  for (char& ch : name) {
    if (ch == '.' || ch == '-' || ch == '+') ch = '_';
  }
  return name;
}

std::vector<SiteShape> site_shapes() {
  std::vector<SiteShape> shapes;
  for (int n : {2, 4}) {
    for (int hidden : {64, 512, 4096}) {
      for (int64_t tokens : {1, 7, 33}) {
        if (hidden == 4096 && tokens > 7) continue;  // keeps the float64 reference quick
        for (double amplitude : {1e-3, 1.0, 1e2}) {
          shapes.push_back({n, hidden, tokens, amplitude, 2.0});
        }
      }
    }
    // Large Sinkhorn logits: comb close to a permutation, softmax far in its tails.
    shapes.push_back({n, 512, 7, 1.0, 50.0});
    shapes.push_back({n, 4096, 3, 1e2, 50.0});
  }
  return shapes;
}

struct SiteErrors {
  ErrorStats layer_input, mixes, pre, post, comb, x_next;
};

SiteErrors measure(const SiteCase& c) {
  const MhcParams& p = c.p;
  SiteOutputs out = test::poisoned_outputs(p, c.tokens);
  cpu::run_site(p, c.weights.view(), c.inputs(), out.view());
  std::vector<float> mixes(size_t(c.tokens * p.nmix()), std::numeric_limits<float>::quiet_NaN());
  SiteOutputs scratch(p, c.tokens);
  cpu::coefficients(p, c.tokens, c.x.data(), c.weights.view(), scratch.pre.data(),
                    scratch.post.data(), scratch.comb.data(), mixes.data());
  const ref::SiteResult r = ref::run_site(p, c.weights.view(), c.inputs());
  SiteErrors e;
  e.layer_input = compare(out.layer_input.data(), r.layer_input.data(), c.tokens * p.hidden);
  e.mixes = compare(mixes.data(), r.mixes.data(), c.tokens * p.nmix());
  e.pre = compare(out.pre.data(), r.pre.data(), c.tokens * p.n);
  e.post = compare(out.post.data(), r.post.data(), c.tokens * p.n);
  e.comb = compare(out.comb.data(), r.comb.data(), c.tokens * p.n * p.n);
  e.x_next = compare(out.x_next.data(), r.x_next.data(), c.tokens * p.k());
  return e;
}

class CpuSiteVsReference : public ::testing::TestWithParam<SiteShape> {};

TEST_P(CpuSiteVsReference, WithinFp32Tolerances) {
  const SiteShape s = GetParam();
  const MhcParams p = test::small_params(s.n, s.hidden);
  const uint64_t seed =
      1000 + uint64_t(s.n) * 100000 + uint64_t(s.hidden) * 10 + uint64_t(s.tokens);
  const SiteCase c = random_site_case(p, s.tokens, seed, s.amplitude, s.comb_scale);
  const SiteErrors e = measure(c);
  const double coef_tol = kFp32Tolerances.coefficients, act_tol = kFp32Tolerances.activations;
  EXPECT_TRUE(e.mixes.passes(coef_tol)) << "mixes " << e.mixes.describe();
  EXPECT_TRUE(e.pre.passes(coef_tol)) << "pre " << e.pre.describe();
  EXPECT_TRUE(e.post.passes(coef_tol)) << "post " << e.post.describe();
  EXPECT_TRUE(e.comb.passes(coef_tol)) << "comb " << e.comb.describe();
  EXPECT_TRUE(e.layer_input.passes(act_tol)) << "layer_input " << e.layer_input.describe();
  EXPECT_TRUE(e.x_next.passes(act_tol)) << "x_next " << e.x_next.describe();
  std::printf(
      "[ errors   ] %-34s mixes %.1e pre %.1e post %.1e comb %.1e | li %.1e/%.1e x_next "
      "%.1e/%.1e\n",
      shape_name(s).c_str(), e.mixes.max_abs_rel, e.pre.max_abs_rel, e.post.max_abs_rel,
      e.comb.max_abs_rel, e.layer_input.rel_norm, e.layer_input.max_abs_rel, e.x_next.rel_norm,
      e.x_next.max_abs_rel);
}

void PrintTo(const SiteShape& s, std::ostream* os) { *os << shape_name(s); }

INSTANTIATE_TEST_SUITE_P(Shapes, CpuSiteVsReference, ::testing::ValuesIn(site_shapes()),
                         [](const auto& info) { return shape_name(info.param); });

TEST(CpuSite, ZeroTokensIsValidAndWritesNothing) {
  const MhcParams p = test::small_params(4, 64);
  const SiteCase c = random_site_case(p, 1, 11);
  // Null activations are fine with no tokens: nothing may be read or written.
  cpu::run_site(p, c.weights.view(), SiteInputsView{0, nullptr, nullptr, nullptr},
                SiteOutputsView{});
  cpu::final_collapse(p, 0, nullptr, nullptr, nullptr, nullptr);
  const ref::SiteResult r = ref::run_site(p, c.weights.view(), SiteInputsView{});
  EXPECT_TRUE(r.layer_input.empty());
  EXPECT_TRUE(r.mixes.empty());
  EXPECT_TRUE(r.comb.empty());
  EXPECT_TRUE(r.x_next.empty());
  EXPECT_EQ(compare(static_cast<const float*>(nullptr), nullptr, 0).count, 0);
}

TEST(CpuSite, RejectsNegativeTokensAndNullBuffers) {
  const MhcParams p = test::small_params(2, 64);
  const SiteCase c = random_site_case(p, 2, 12);
  SiteOutputs out(p, 2);
  SiteInputsView bad = c.inputs();
  bad.tokens = -1;
  EXPECT_THROW(cpu::run_site(p, c.weights.view(), bad, out.view()), Error);
  SiteOutputsView missing = out.view();
  missing.comb = nullptr;
  EXPECT_THROW(cpu::run_site(p, c.weights.view(), c.inputs(), missing), Error);
  EXPECT_THROW(ref::run_site(p, c.weights.view(), bad), Error);
}

TEST(CpuSite, RunTwiceIsBitwiseIdentical) {
  const MhcParams p = test::small_params(4, 512);
  const SiteCase c = random_site_case(p, 33, 13);
  SiteOutputs a = test::poisoned_outputs(p, c.tokens), b = test::poisoned_outputs(p, c.tokens);
  cpu::run_site(p, c.weights.view(), c.inputs(), a.view());
  cpu::run_site(p, c.weights.view(), c.inputs(), b.view());
  EXPECT_TRUE(test::same_bits(a.layer_input, b.layer_input));
  EXPECT_TRUE(test::same_bits(a.pre, b.pre));
  EXPECT_TRUE(test::same_bits(a.post, b.post));
  EXPECT_TRUE(test::same_bits(a.comb, b.comb));
  EXPECT_TRUE(test::same_bits(a.x_next, b.x_next));
}

// Large enough (M * NMIX * K) that the loops really split over threads.
TEST(CpuSite, ThreadCountDoesNotChangeBits) {
  const MhcParams p = test::small_params(4, 1024);
  const SiteCase c = random_site_case(p, 37, 14);
  std::vector<SiteOutputs> results;
  for (int threads : {1, 3, 8}) {
    cpu::set_threads(threads);
    EXPECT_EQ(cpu::threads(), threads);
    results.push_back(test::poisoned_outputs(p, c.tokens));
    cpu::run_site(p, c.weights.view(), c.inputs(), results.back().view());
  }
  cpu::set_threads(0);
  EXPECT_GE(cpu::threads(), 1);
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_TRUE(test::same_bits(results[0].layer_input, results[i].layer_input));
    EXPECT_TRUE(test::same_bits(results[0].pre, results[i].pre));
    EXPECT_TRUE(test::same_bits(results[0].comb, results[i].comb));
    EXPECT_TRUE(test::same_bits(results[0].x_next, results[i].x_next));
  }
}

// A batch computes each token exactly as a batch of one would (batch invariance).
TEST(CpuSite, TokensAreIndependentOfTheBatch) {
  const MhcParams p = test::small_params(4, 512);
  const SiteCase c = random_site_case(p, 9, 15);
  SiteOutputs batch = test::poisoned_outputs(p, c.tokens);
  cpu::run_site(p, c.weights.view(), c.inputs(), batch.view());
  const int64_t m = 6;
  const SiteInputsView one{1, c.x.data() + m * p.k(), c.pre_mix.data() + m * p.n,
                           c.sublayer_out.data() + m * p.hidden};
  SiteOutputs single = test::poisoned_outputs(p, 1);
  cpu::run_site(p, c.weights.view(), one, single.view());
  EXPECT_EQ(0, std::memcmp(single.comb.data(), batch.comb.data() + m * p.n * p.n,
                           sizeof(float) * size_t(p.n * p.n)));
  EXPECT_EQ(0, std::memcmp(single.x_next.data(), batch.x_next.data() + m * p.k(),
                           sizeof(Bf16) * size_t(p.k())));
}

}  // namespace
}  // namespace mhc
