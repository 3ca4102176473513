// What engines call through mhc._C, on the CPU: the four separate epsilons (each reaches exactly
// its own output; unset they are the presets' values, bitwise), the raw split partials of the
// prenorm GEMM and the plain collapse (no norm weight), against the float64 reference.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::random_site_case;
using test::same_bits;

SiteOutputs run(const MhcParams& p, const test::SiteCase& c) {
  SiteOutputs out = test::poisoned_outputs(p, c.tokens);
  cpu::run_site(p, c.weights.view(), c.inputs(), out.view());
  return out;
}

TEST(SeparateEpsilons, UnsetAreThePresetValuesBitwise) {
  const test::SiteCase c = random_site_case(test::small_params(4, 256), 5, 11);
  MhcParams set = c.p;
  set.rms_eps_override = set.norm_eps_override = c.p.eps_n;
  set.pre_eps_override = set.sinkhorn_eps_override = c.p.eps_h;
  const SiteOutputs a = run(c.p, c), b = run(set, c);
  EXPECT_TRUE(same_bits(a.pre, b.pre) && same_bits(a.post, b.post) && same_bits(a.comb, b.comb));
  EXPECT_TRUE(same_bits(a.layer_input, b.layer_input) && same_bits(a.x_next, b.x_next));
}

// Each epsilon changes its own outputs and nothing else (the CPU and the reference alike).
TEST(SeparateEpsilons, EachReachesOnlyItsOwnOutputs) {
  const test::SiteCase c = random_site_case(test::small_params(4, 256), 5, 12);
  const SiteOutputs base = run(c.p, c);
  MhcParams pre = c.p;
  pre.pre_eps_override = 0.25;
  const SiteOutputs a = run(pre, c);
  // pre = sigmoid(..) + pre_eps: the difference is the change of pre_eps (within fp32 rounding).
  for (size_t i = 0; i < a.pre.size(); ++i) {
    EXPECT_NEAR(a.pre[i] - base.pre[i], 0.25 - c.p.eps_h, 3e-7);
  }
  EXPECT_TRUE(same_bits(a.post, base.post) && same_bits(a.comb, base.comb));

  MhcParams sinkhorn = c.p;
  sinkhorn.sinkhorn_eps_override = 0.05;
  const SiteOutputs b = run(sinkhorn, c);
  EXPECT_FALSE(same_bits(b.comb, base.comb));
  EXPECT_TRUE(same_bits(b.pre, base.pre) && same_bits(b.post, base.post));
  EXPECT_TRUE(same_bits(b.layer_input, base.layer_input));

  MhcParams norm = c.p;
  norm.norm_eps_override = 10.0;  // comparable to mean(y^2): visible
  const SiteOutputs d = run(norm, c);
  EXPECT_FALSE(same_bits(d.layer_input, base.layer_input));
  EXPECT_TRUE(same_bits(d.pre, base.pre) && same_bits(d.comb, base.comb));

  MhcParams rms = c.p;
  rms.rms_eps_override = 10.0;
  const SiteOutputs e = run(rms, c);
  EXPECT_FALSE(same_bits(e.post, base.post));
  EXPECT_TRUE(same_bits(e.layer_input, base.layer_input));
}

TEST(SeparateEpsilons, FourDifferentValuesMatchTheReference) {
  MhcParams p = test::small_params(4, 512);
  p.rms_eps_override = 1e-3;
  p.pre_eps_override = 1e-2;
  p.sinkhorn_eps_override = 3e-2;
  p.norm_eps_override = 0.5;
  for (int64_t tokens : {1, 9}) {
    const test::SiteCase c = random_site_case(p, tokens, 20 + tokens, 0.3);
    const SiteOutputs out = run(p, c);
    const ref::SiteResult r = ref::run_site(p, c.weights.view(), c.inputs());
    EXPECT_TRUE(
        compare(out.pre.data(), r.pre.data(), tokens * p.n).passes(kFp32Tolerances.coefficients));
    EXPECT_TRUE(
        compare(out.post.data(), r.post.data(), tokens * p.n).passes(kFp32Tolerances.coefficients));
    EXPECT_TRUE(compare(out.comb.data(), r.comb.data(), tokens * p.n * p.n)
                    .passes(kFp32Tolerances.coefficients));
    EXPECT_TRUE(compare(out.layer_input.data(), r.layer_input.data(), tokens * p.hidden)
                    .passes(kFp32Tolerances.activations));
  }
}

TEST(SeparateEpsilons, NegativeOrNonFiniteIsRefused) {
  MhcParams p = test::small_params(4, 256);
  p.sinkhorn_eps_override = -1.0;
  EXPECT_THROW(validate(p), Error);
  p.sinkhorn_eps_override.reset();
  p.norm_eps_override = std::numeric_limits<double>::infinity();
  EXPECT_THROW(validate(p), Error);
}

TEST(PrenormGemm, SplitPartialsMatchTheReference) {
  test::TestRng rng(31);
  const int64_t tokens = 7, nmix = 24, k = 640;  // 10 blocks of 64
  const std::vector<Bf16> x = test::random_bf16(size_t(tokens * k), rng, 1.0);
  std::vector<float> fn(size_t(nmix * k));
  for (float& v : fn) v = float(rng.normal());
  for (int splits : {1, 3, 7, 10, 13}) {  // 13 > blocks: three empty splits
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(size_t(splits * tokens * nmix), nan),
        sqrsum(size_t(splits * tokens), nan);
    cpu::prenorm_gemm(tokens, nmix, k, splits, x.data(), fn.data(), out.data(), sqrsum.data());
    const ref::SplitPartials r = ref::prenorm_gemm(tokens, nmix, k, splits, x.data(), fn.data());
    EXPECT_TRUE(compare(out.data(), r.out.data(), int64_t(out.size())).passes(1e-6)) << splits;
    EXPECT_TRUE(compare(sqrsum.data(), r.sqrsum.data(), int64_t(sqrsum.size())).passes(1e-6));
    if (splits == 13) {
      EXPECT_EQ(out.back(), 0.0f);
    }
  }
}

TEST(PrenormGemm, RefusesBadShapes) {
  EXPECT_THROW(cpu::prenorm_gemm(1, 24, 96, 1, nullptr, nullptr, nullptr, nullptr), Error);
  EXPECT_THROW(cpu::prenorm_gemm(1, 20, 128, 1, nullptr, nullptr, nullptr, nullptr), Error);
  EXPECT_THROW(cpu::prenorm_gemm(1, 24, 128, 0, nullptr, nullptr, nullptr, nullptr), Error);
  EXPECT_NO_THROW(cpu::prenorm_gemm(0, 24, 128, 2, nullptr, nullptr, nullptr, nullptr));
}

TEST(InputPath, NoNormWeightIsThePlainCollapse) {
  const test::SiteCase c = random_site_case(test::small_params(4, 256), 6, 41);
  std::vector<Bf16> out(size_t(c.tokens * c.p.hidden), Bf16{0xFFFF});
  cpu::input_path(c.p, c.tokens, c.x.data(), c.pre_mix.data(), nullptr, out.data());
  const std::vector<double> r =
      ref::input_path(c.p, c.tokens, c.x.data(), c.pre_mix.data(), nullptr);
  EXPECT_TRUE(compare(out.data(), r.data(), int64_t(r.size())).passes(kFp32Tolerances.activations));
}

}  // namespace
}  // namespace mhc
