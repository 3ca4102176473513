// The synthetic model and the stack driver: determinism, shapes, scales, and the stack being
// exactly the chain of its sites.
#include "mhc/cpu/model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

// FNV-1a 64 over the bytes of every tensor, in a fixed order.
class Fnv {
 public:
  template <typename T>
  void add(const std::vector<T>& values) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (size_t i = 0; i < values.size() * sizeof(T); ++i) hash_ = (hash_ ^ bytes[i]) * kPrime;
  }
  uint64_t value() const { return hash_; }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

uint64_t model_hash(const ModelWeights& w) {
  Fnv h;
  for (const SiteWeights& s : w.sites) {
    h.add(s.hc_fn);
    h.add(s.hc_base);
    h.add(s.hc_scale);
    h.add(s.norm_weight);
  }
  for (const auto& gain : w.standin_gain) h.add(gain);
  h.add(w.final_norm);
  return h.value();
}

TEST(SyntheticModel, ShapesFollowTheParams) {
  const MhcParams p = test::small_params(4, 64, 3);
  const ModelWeights w = synthetic_model(p, 1);
  ASSERT_EQ(w.sites.size(), 6u);
  ASSERT_EQ(w.standin_gain.size(), 6u);
  EXPECT_EQ(w.final_norm.size(), 64u);
  for (const SiteWeights& s : w.sites) {
    EXPECT_EQ(s.hc_fn.size(), size_t(24 * 256));
    EXPECT_EQ(s.hc_base.size(), 24u);
    EXPECT_EQ(s.hc_scale.size(), 3u);
    EXPECT_EQ(s.norm_weight.size(), 64u);
  }
  EXPECT_THROW(synthetic_model(test::small_params(0, 64), 1), Error);
}

TEST(SyntheticModel, SameSeedSameBitsOtherSeedOtherBits) {
  const MhcParams p = test::small_params(4, 128, 2);
  EXPECT_EQ(model_hash(synthetic_model(p, 5)), model_hash(synthetic_model(p, 5)));
  EXPECT_NE(model_hash(synthetic_model(p, 5)), model_hash(synthetic_model(p, 6)));
  // A site's weights do not depend on the layer count.
  const ModelWeights two = synthetic_model(p, 5);
  const ModelWeights three = synthetic_model(test::small_params(4, 128, 3), 5);
  EXPECT_TRUE(test::same_bits(two.sites[3].hc_fn, three.sites[3].hc_fn));
}

// The generator uses only IEEE-exact operations, so these bits are the same on every machine and
// compiler. If this fails after an intended change to the generator, update the constants (and
// say so: recorded runs of `mhc run` change with them).
TEST(SyntheticModel, GoldenBits) {
  const MhcParams p = test::small_params(4, 64, 2);
  const uint64_t model = model_hash(synthetic_model(p, 42));
  Fnv embeddings;
  embeddings.add(synthetic_embeddings(p, 3, 42));
  std::printf("[ golden   ] model %#018llx embeddings %#018llx\n", (unsigned long long)model,
              (unsigned long long)embeddings.value());
  EXPECT_EQ(model, 0x8c1129292a7957afULL);
  EXPECT_EQ(embeddings.value(), 0x0dc4cfbbc68dde7dULL);
}

// Scaled like a trained model: mixes of order 1 and comb near the identity.
TEST(SyntheticModel, MixesOfOrderOneAndCombFavoursIdentity) {
  const MhcParams p = test::small_params(4, 512, 1);
  const ModelWeights w = synthetic_model(p, 7);
  test::TestRng rng(8);
  const std::vector<Bf16> x = test::random_bf16(size_t(16 * p.k()), rng, 3.0);
  ref::SiteResult r;
  ref::coefficients(p, 16, x.data(), w.sites[0].view(), r);
  double sum_sq = 0, diagonal = 0;
  for (double m : r.mixes) sum_sq += m * m;
  const double rms = std::sqrt(sum_sq / double(r.mixes.size()));
  EXPECT_GT(rms, 0.5);
  EXPECT_LT(rms, 2.0);
  for (int m = 0; m < 16; ++m) {
    for (int j = 0; j < 4; ++j) diagonal += r.comb[size_t(m * 16 + j * 4 + j)];
  }
  EXPECT_GT(diagonal / (16 * 4), 0.4);  // uniform mixing would give 0.25; measured 0.48
  for (const SiteWeights& s : w.sites) {
    for (float v : s.norm_weight) EXPECT_TRUE(v >= 0.8f && v <= 1.2f);
    EXPECT_TRUE(s.hc_scale[2] >= 1.0f && s.hc_scale[2] <= 4.0f);
  }
}

TEST(SyntheticInputs, EmbeddingsAreCopiedIntoEveryStream) {
  const MhcParams p = test::small_params(4, 64);
  const std::vector<Bf16> x = synthetic_embeddings(p, 3, 9);
  ASSERT_EQ(x.size(), size_t(3 * 4 * 64));
  double sum_sq = 0;
  for (int m = 0; m < 3; ++m) {
    const Bf16* token = x.data() + m * p.k();
    for (int j = 1; j < 4; ++j) EXPECT_EQ(0, std::memcmp(token, token + j * 64, 64 * sizeof(Bf16)));
    for (int c = 0; c < 64; ++c)
      sum_sq += double(bf16_to_float(token[c])) * bf16_to_float(token[c]);
  }
  EXPECT_NEAR(std::sqrt(sum_sq / (3 * 64)), 1.0, 0.2);  // N(0, 1)
  // Tokens differ, and a token does not depend on the batch size.
  EXPECT_NE(0, std::memcmp(x.data(), x.data() + p.k(), 64 * sizeof(Bf16)));
  const std::vector<Bf16> longer = synthetic_embeddings(p, 5, 9);
  EXPECT_EQ(0, std::memcmp(x.data(), longer.data(), x.size() * sizeof(Bf16)));
  EXPECT_TRUE(synthetic_embeddings(p, 0, 9).empty());
}

TEST(SyntheticInputs, FirstSitePreMixIsOneHotOnStreamZero) {
  const MhcParams p = test::small_params(4, 64);
  EXPECT_EQ(first_site_pre_mix(p, 2), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_TRUE(first_site_pre_mix(p, 0).empty());
}

TEST(StandinSublayer, IsGainTimesLayerInputRoundedToBf16) {
  const MhcParams p = test::small_params(2, 16);
  test::TestRng rng(10);
  const std::vector<Bf16> li = test::random_bf16(32, rng, 1.0);
  std::vector<float> gain(16);
  for (float& g : gain) g = float(rng.uniform(-0.7, 0.7));
  std::vector<Bf16> out(32, Bf16{0xFFFF});
  standin_sublayer(p, 2, li.data(), gain.data(), out.data());
  for (int i = 0; i < 32; ++i) {
    const double want = round_to_bf16(double(gain[size_t(i % 16)]) * bf16_to_float(li[size_t(i)]));
    EXPECT_EQ(bf16_to_float(out[size_t(i)]), want);
  }
}

// cpu_stack is exactly the chain of run_site calls the model.hpp comment describes.
TEST(CpuStack, EqualsTheChainOfSites) {
  const MhcParams p = test::small_params(4, 256, 2);
  const ModelWeights w = synthetic_model(p, 11);
  const int64_t M = 3;
  std::vector<Bf16> x = synthetic_embeddings(p, M, 12);
  const StackTrace trace = cpu_stack(w, M, x.data());
  std::vector<float> pre_mix = first_site_pre_mix(p, M);
  for (int site = 0; site < p.sites(); ++site) {
    SiteOutputs out = test::poisoned_outputs(p, M);
    std::vector<Bf16> F(size_t(M * p.hidden));
    cpu::input_path(p, M, x.data(), pre_mix.data(), w.sites[size_t(site)].norm_weight.data(),
                    out.layer_input.data());
    standin_sublayer(p, M, out.layer_input.data(), w.standin_gain[size_t(site)].data(), F.data());
    cpu::run_site(p, w.sites[size_t(site)].view(),
                  SiteInputsView{M, x.data(), pre_mix.data(), F.data()}, out.view());
    x = out.x_next;
    pre_mix = out.pre;
    if (site % 2 == 1) {
      EXPECT_TRUE(test::same_bits(trace.x_after_layer[size_t(site / 2)], x));
    }
  }
  EXPECT_TRUE(test::same_bits(trace.last_pre, pre_mix));
  std::vector<Bf16> output(size_t(M * p.hidden), Bf16{0xFFFF});
  cpu::final_collapse(p, M, x.data(), pre_mix.data(), w.final_norm.data(), output.data());
  EXPECT_TRUE(test::same_bits(trace.output, output));
}

TEST(CpuStack, RunTwiceIsBitwiseIdentical) {
  const MhcParams p = test::small_params(4, 512, 3);
  const ModelWeights w = synthetic_model(p, 13);
  const std::vector<Bf16> x0 = synthetic_embeddings(p, 4, 14);
  const StackTrace a = cpu_stack(w, 4, x0.data()), b = cpu_stack(w, 4, x0.data());
  ASSERT_EQ(a.x_after_layer.size(), 3u);
  for (size_t l = 0; l < 3; ++l)
    EXPECT_TRUE(test::same_bits(a.x_after_layer[l], b.x_after_layer[l]));
  EXPECT_TRUE(test::same_bits(a.last_pre, b.last_pre));
  EXPECT_TRUE(test::same_bits(a.output, b.output));
}

TEST(CpuStack, NoFinalNormGivesThePlainCollapse) {
  const MhcParams p = test::small_params(2, 64, 1);
  ModelWeights w = synthetic_model(p, 15);
  w.final_norm.clear();
  const std::vector<Bf16> x0 = synthetic_embeddings(p, 2, 16);
  const StackTrace got = cpu_stack(w, 2, x0.data());
  const StackReference want = reference_stack(w, 2, x0.data());
  const std::vector<Bf16>& x = got.x_after_layer.back();
  for (int m = 0; m < 2; ++m) {
    for (int c = 0; c < 64; ++c) {
      const float y = got.last_pre[size_t(m * 2)] * bf16_to_float(x[size_t(m * 128 + c)]) +
                      got.last_pre[size_t(m * 2 + 1)] * bf16_to_float(x[size_t(m * 128 + 64 + c)]);
      EXPECT_EQ(got.output[size_t(m * 64 + c)].bits, float_to_bf16(y).bits);
      EXPECT_NEAR(bf16_to_float(got.output[size_t(m * 64 + c)]), want.output[size_t(m * 64 + c)],
                  1e-2 * std::abs(want.output[size_t(m * 64 + c)]) + 1e-6);
    }
  }
}

TEST(Stacks, ZeroTokensAndBadModels) {
  const MhcParams p = test::small_params(2, 64, 2);
  ModelWeights w = synthetic_model(p, 17);
  const StackTrace empty = cpu_stack(w, 0, nullptr);
  EXPECT_EQ(empty.x_after_layer.size(), 2u);
  EXPECT_TRUE(empty.output.empty());
  EXPECT_TRUE(reference_stack(w, 0, nullptr).output.empty());
  const std::vector<Bf16> x0 = synthetic_embeddings(p, 1, 18);
  EXPECT_THROW(cpu_stack(w, -1, x0.data()), Error);
  w.sites.pop_back();
  EXPECT_THROW(cpu_stack(w, 1, x0.data()), Error);
  EXPECT_THROW(reference_stack(w, 1, x0.data()), Error);
}

}  // namespace
}  // namespace mhc
