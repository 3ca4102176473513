// `mhc run`'s MTP check as a unit (cli/run_checks.cpp, docs/mtp.md): the blocks' stand-in input,
// a backend that runs each block as asked passes, and one that runs a block with the wrong
// weights or on the wrong streams fails.
#include <gtest/gtest.h>

#include "mhc/core/error.hpp"
#include "mhc/cpu/cpu_backend.hpp"
#include "mhc/io/checkpoint.hpp"
#include "run_checks.hpp"

namespace mhc::cli {
namespace {

constexpr int64_t kTokens = 5;
constexpr uint64_t kSeed = 3;

MhcParams small_params() {
  MhcParams p = preset(kDefaultPreset);
  p.hidden = 64;
  p.n = 4;
  p.layers = 2;
  return p;
}

struct Fixture {
  MhcParams p = small_params();
  ModelWeights trunk = synthetic_model(p, kSeed);
  std::vector<ModelWeights> blocks = {ckpt::synthetic_mtp_block(p, kSeed, 0),
                                      ckpt::synthetic_mtp_block(p, kSeed, 1)};
  std::vector<Bf16> x0 = synthetic_embeddings(p, kTokens, kSeed + 1);
  std::unique_ptr<Backend> backend = cpu::make_backend(KernelConfig{});
  StackTrace trace = backend->run_stack(trunk, kTokens, x0.data());
  StackReference ref = reference_stack(trunk, kTokens, x0.data());

  std::vector<MtpCheck> check(const StackRunner& run) {
    return check_mtp(*backend, run, blocks, trace, ref, x0.data(), kTokens, kSeed);
  }
  StackRunner honest() {
    return [this](const ModelWeights& w, const Bf16* in) {
      return backend->run_stack(w, kTokens, in);
    };
  }
};

bool block_passes(const MtpCheck& c, int trunk_layers) {
  return c.x.passes(stack_x_tolerance(trunk_layers + c.depth + 1)) &&
         c.last_pre.passes(kStackPreTolerance) && c.output.passes(kStackOutputTolerance) &&
         c.head.ran && c.head.out.passes(kTf32Tolerances.activations) &&
         c.head.normed.passes(kTf32Tolerances.activations);
}

TEST(MtpCheck, InputIsStreamsPlusEmbedding) {
  const MhcParams p = small_params();
  const std::vector<Bf16> x0 = synthetic_embeddings(p, 2, 9);
  std::vector<Bf16> h(x0.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(float(int(i % 7) - 3) * 0.25f);
  const std::vector<Bf16> in = mtp_input(p, 2, h.data(), x0.data());
  ASSERT_EQ(in.size(), x0.size());
  for (int64_t m = 0; m < 2; ++m) {
    for (int j = 0; j < p.n; ++j) {
      for (int64_t c = 0; c < p.hidden; c += 13) {
        const size_t i = size_t(m * p.k() + j * p.hidden + c);
        const float want = bf16_to_float(h[i]) + bf16_to_float(x0[size_t(m * p.k() + c)]);
        EXPECT_EQ(in[i].bits, float_to_bf16(want).bits) << m << " " << j << " " << c;
      }
    }
  }
}

TEST(MtpCheck, HonestBackendPasses) {
  Fixture f;
  const std::vector<MtpCheck> checks = f.check(f.honest());
  ASSERT_EQ(checks.size(), 2u);
  for (const MtpCheck& c : checks) {
    EXPECT_TRUE(block_passes(c, f.p.layers)) << "depth " << c.depth;
    // fp32 against float64 differs somewhere (the streams may agree to the bit at this size).
    EXPECT_GT(c.output.rel_norm, 0.0);
    EXPECT_GT(c.head.out.rel_norm, 0.0);
  }
}

TEST(MtpCheck, WrongWeightsFail) {
  Fixture f;
  const ModelWeights other = ckpt::synthetic_mtp_block(f.p, kSeed + 100, 0);
  const std::vector<MtpCheck> checks = f.check([&](const ModelWeights& w, const Bf16* in) {
    ModelWeights wrong = w;
    wrong.sites = other.sites;  // the block's layer run with another block's sites
    return f.backend->run_stack(wrong, kTokens, in);
  });
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_FALSE(block_passes(checks[0], f.p.layers));
}

TEST(MtpCheck, WrongInputFails) {
  Fixture f;
  // Fed the trunk's embeddings instead of the streams before the block.
  const std::vector<MtpCheck> checks = f.check([&](const ModelWeights& w, const Bf16*) {
    return f.backend->run_stack(w, kTokens, f.x0.data());
  });
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_FALSE(block_passes(checks[0], f.p.layers));
}

TEST(MtpCheck, NoBlocksNoChecks) {
  Fixture f;
  f.blocks.clear();
  EXPECT_TRUE(f.check(f.honest()).empty());
}

}  // namespace
}  // namespace mhc::cli
