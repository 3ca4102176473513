// The kernel plan on simulated devices: which image a GPU loads from a binary's images, the
// prenorm kernel per token range and the splits, the switches, and the dispatch policy's promise
// that it never says yes to a path the binary lacks (tactics: test_kernel_plan_tactics.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/workspace.hpp"
#include "plan_test_util.hpp"

namespace mhc {
namespace {

using plan_test::contains;
using plan_test::kH200Sms;
using plan_test::kWithoutSm100;
using plan_test::kWithSm100;
using plan_test::plan;

TEST(KernelImages, ParseAndName) {
  const auto images = parse_images(kWithSm100);
  ASSERT_EQ(images.size(), 4u);
  EXPECT_EQ(images[0].name(), "sm_90a");
  EXPECT_EQ(images[2].name(), "sm_100f");
  EXPECT_TRUE(images[3].ptx);
  EXPECT_EQ(images[3].name(), "compute_80");
  EXPECT_TRUE(parse_images("").empty());
  for (const char* bad : {"sm90a", "sm_", "compute_x", "sm_90b", "sm_9", "gfx90a"}) {
    EXPECT_THROW(parse_images(bad), Error) << bad;
  }
}

// The code built for sm_90a exactly (wgmma, and the head's cluster kernel, whose body is compiled
// into that image only): not plain sm_90, not its PTX, not another architecture's family image.
TEST(KernelImages, Sm90aIsTheExactImageOnly) {
  const auto images = parse_images("sm_90a,sm_90,compute_90a,sm_100f,sm_100a,sm_80,compute_80");
  ASSERT_EQ(images.size(), 7u);
  EXPECT_TRUE(images[0].is_sm90a());
  for (size_t i = 1; i < images.size(); ++i) {
    EXPECT_FALSE(images[i].is_sm90a()) << images[i].name();
    EXPECT_EQ(images[i].has_wgmma(), images[i].is_sm90a()) << images[i].name();
  }
}

TEST(KernelImages, TheDriversChoice) {
  const auto with = parse_images(kWithSm100), without = parse_images(kWithoutSm100);
  auto pick = [](const char* arch, const std::vector<KernelImage>& images) {
    const auto im = image_for(parse_capability(arch), images);
    return im ? im->name() : std::string("none");
  };
  EXPECT_EQ(pick("9.0", with), "sm_90a");
  EXPECT_EQ(pick("8.0", with), "sm_80");
  EXPECT_EQ(pick("8.9", with), "sm_80");  // plain SASS runs up the minor versions
  EXPECT_EQ(pick("10.0", with), "sm_100f");
  EXPECT_EQ(pick("10.3", with), "sm_100f");  // the family image
  EXPECT_EQ(pick("10.0", without), "compute_80");
  EXPECT_EQ(pick("12.0", with), "compute_80");
  EXPECT_EQ(pick("10.3", parse_images("sm_100a,compute_80")), "compute_80");  // 'a': 10.0 only
  EXPECT_EQ(pick("9.0", parse_images("sm_80")), "none");  // SASS never crosses a major version
  EXPECT_EQ(pick("7.5", with), "none");
}

TEST(KernelPlanRanges, HopperUsesAllThreeKernels) {
  const KernelPlan p = plan("9.0", kWithSm100);
  EXPECT_TRUE(p.compiled_ahead_of_time());
  EXPECT_TRUE(p.pdl);
  EXPECT_TRUE(p.tma128_available);
  for (int64_t m : {1, 16, 255, 256, 257, 1024, 1535, 1536, 2048, 100000}) {
    const PrenormKernel want = m >= 1536  ? PrenormKernel::tma128
                               : m <= 256 ? PrenormKernel::mma16
                                          : PrenormKernel::mma64;
    EXPECT_EQ(p.prenorm_kernel(m), want) << "M=" << m;
  }
}

TEST(KernelPlanRanges, WithoutSm90InstructionsNoTmaAndNoPdl) {
  for (const char* arch : {"8.0", "10.0", "12.0"}) {
    const KernelPlan p = plan(arch, kWithoutSm100);
    EXPECT_FALSE(p.pdl) << arch;
    EXPECT_FALSE(p.tma128_available) << arch;
    EXPECT_EQ(p.prenorm_kernel(100000), PrenormKernel::mma64) << arch;
  }
  EXPECT_FALSE(plan("10.0", kWithoutSm100).compiled_ahead_of_time());
}

TEST(KernelPlanRanges, Sm100CodeHasPdlButNoTmaKernel) {
  const KernelPlan p = plan("10.0", kWithSm100);
  EXPECT_TRUE(p.compiled_ahead_of_time());
  EXPECT_TRUE(p.pdl);
  EXPECT_FALSE(p.tma128_available);  // its body is compiled into the sm_90a image only
  EXPECT_EQ(p.prenorm_kernel(100000), PrenormKernel::mma64);
  EXPECT_THROW(plan("10.0", kWithSm100, R"({"prenorm_kernel": "tma128"})"), Error);
}

TEST(KernelPlanSplits, FillTheGpuOnceAndStayInRange) {
  const KernelPlan p = plan("9.0", kWithSm100);
  for (int max_splits : {16, 20, 28, 80, 112}) {
    const int64_t k = int64_t(max_splits) * 256;
    for (int64_t m : {1, 3, 17, 64, 137, 1024, 2049, 4096, 8192}) {
      const PrenormChoice c = p.prenorm_choice(m, k);
      const int64_t rows = rows_per_tile(c.kernel);
      EXPECT_GE(c.splits, 1);
      EXPECT_LE(c.splits, max_splits);
      // Decode sizes are capped (the reduction reads every split): 40, or up to 8 tokens one
      // register stage of K (512) per split where that needs more.
      const int64_t cap = m <= 8 ? std::max<int64_t>(40, (k + 511) / 512) : 40;
      EXPECT_LE(c.splits, cap) << "M=" << m << " K=" << k;
      EXPECT_LE(c.splits, kPrenormDecodeSplitLimit);
      if (c.splits > 1) {
        EXPECT_LE((m + rows - 1) / rows * c.splits, kH200Sms) << "M=" << m;
      }
    }
  }
  // The measured optimum of the TMA kernel at C=5120 n=4 (K / 256 = 80): 128 CTAs.
  EXPECT_EQ(p.prenorm_choice(4096, 20480).splits, 4);
  EXPECT_EQ(p.prenorm_choice(8192, 20480).splits, 2);
}

// The rule (sm90's decode_stage_k), up to 8 tokens: a decode split holds at most one register stage
// of K (512) where 40 splits would not (C = 7168 at n = 4: 56 splits), never more than the flagged
// reducer holds; larger batches, other shapes and other architectures keep 40.
TEST(KernelPlanSplits, DecodeSplitsOfOneRegisterStage) {
  const KernelPlan as_built = plan("9.0", kWithSm100);
  EXPECT_EQ(as_built.rules.decode_stage_k, 512);
  EXPECT_EQ(as_built.rules.decode_stage_max_tokens, 8);
  KernelPlan hopper = as_built;
  EXPECT_EQ(hopper.prenorm_choice(1, 4 * 7168).splits, 56);
  EXPECT_EQ(hopper.prenorm_choice(8, 4 * 7168).splits, 56);
  EXPECT_EQ(hopper.prenorm_choice(9, 4 * 7168).splits, 40);
  EXPECT_EQ(hopper.prenorm_choice(17, 4 * 7168).splits, 40);
  EXPECT_EQ(hopper.prenorm_choice(1, 4 * 5120).splits, 40);  // 40 stages of 512
  EXPECT_EQ(hopper.prenorm_choice(1, 4 * 4096).splits, 40);  // 32 would do; 40 measured
  EXPECT_EQ(hopper.prenorm_choice(1, 2 * 7168).splits, 40);
  EXPECT_EQ(hopper.prenorm_choice(1, 8 * 8192).splits, kPrenormDecodeSplitLimit);
  EXPECT_EQ(hopper.prenorm_choice(4096, 4 * 7168).splits, 4);  // large M: unchanged
  EXPECT_TRUE(contains(hopper.describe(), "K / 512")) << hopper.describe();
  EXPECT_TRUE(contains(hopper.to_json(), R"("decode_stage_k":512)")) << hopper.to_json();
  EXPECT_TRUE(contains(hopper.to_json(), R"("decode_stage_max_tokens":8)")) << hopper.to_json();
  KernelPlan off = as_built;  // the rule can be switched off, and then 40 everywhere
  off.rules.decode_stage_max_tokens = 0;
  EXPECT_EQ(off.prenorm_choice(1, 4 * 7168).splits, 40);
  EXPECT_FALSE(contains(off.describe(), "K / 512")) << off.describe();
  for (const char* arch : {"8.0", "10.0"}) {  // measured on Hopper only
    KernelPlan other = plan(arch, kWithSm100);
    other.rules.decode_stage_max_tokens = 8;
    EXPECT_EQ(other.prenorm_choice(1, 4 * 7168).splits, 40) << arch;
  }
}

TEST(KernelPlanSwitches, ForceAndDisableEachPath) {
  const KernelPlan forced =
      plan("9.0", kWithSm100,
           R"({"prenorm_kernel": "mma64", "prenorm_splits": 7, "fused_input": false,
               "folded_post": false})");
  for (int64_t m : {1, 300, 5000}) {
    EXPECT_EQ(forced.prenorm_kernel(m), PrenormKernel::mma64);
    EXPECT_EQ(forced.prenorm_choice(m, 20480).splits, 7);
  }
  EXPECT_EQ(forced.prenorm_choice(1, 1024).splits, 4) << "at most the shape's limit";
  EXPECT_FALSE(forced.fuses_input(1, PrenormKernel::mma16));
  EXPECT_EQ(forced.folded_post_max_tokens, 0);
  EXPECT_EQ(forced.overrides.size(), 4u);
  EXPECT_TRUE(contains(forced.describe(), "prenorm_kernel=mma64"));

  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_TRUE(plain.fuses_input(64, PrenormKernel::mma16));
  EXPECT_FALSE(plain.fuses_input(65, PrenormKernel::mma16));
  EXPECT_TRUE(
      plan("9.0", kWithSm100, R"({"fused_input": true})").fuses_input(200, PrenormKernel::mma16));
  EXPECT_TRUE(plain.overrides.empty());
}

// The cluster post: the sm90 rules' limit where the image has the sm_90 instructions, none
// without them (an sm_80 image has no clusters), and the switch forces it either way.
TEST(KernelPlanSwitches, ClusterPost) {
  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_EQ(plain.cluster_post_max_tokens, sm90_rules().cluster_post_max_tokens);
  EXPECT_GT(plain.cluster_post_max_tokens, 0);
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"cluster_post": false})").cluster_post_max_tokens, 0);
  const KernelPlan forced = plan("9.0", kWithSm100, R"({"cluster_post": true})");
  EXPECT_EQ(forced.cluster_post_max_tokens, kNoTokenLimit);
  EXPECT_TRUE(contains(forced.describe(), "cluster_post=true"));
  EXPECT_TRUE(contains(forced.summary(), ", cluster post")) << forced.summary();
  EXPECT_FALSE(contains(forced.summary(), "cluster post M<=")) << forced.summary();
  EXPECT_TRUE(contains(plain.summary(),
                       ", cluster post M<=" + std::to_string(plain.cluster_post_max_tokens)))
      << plain.summary();
  EXPECT_FALSE(
      contains(plan("9.0", kWithSm100, R"({"cluster_post": false})").summary(), "cluster post"));
  EXPECT_TRUE(contains(forced.to_json(), R"("cluster_post_max_tokens")"));
  const KernelPlan batch_invariant = plan("9.0", kWithSm100, R"({"batch_invariant": true})");
  EXPECT_EQ(batch_invariant.cluster_post_max_tokens, plain.cluster_post_max_tokens)
      << "the cluster post gives the row kernel's bits, so batch-invariant mode keeps it";
  EXPECT_EQ(plan("8.0", kWithSm100).cluster_post_max_tokens, 0);
  EXPECT_THROW(plan("8.0", kWithSm100, R"({"cluster_post": true})"), Error);
  const KernelConfig c = KernelConfig::parse(R"({"cluster_post": false, "batch_invariant": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_NE(c.hash(), KernelConfig::parse(R"({"batch_invariant": true})").hash());
  EXPECT_THROW(KernelConfig::parse(R"({"cluster_post": 3})"), Error);
}

// The decode launch's flagged partials: the rules' limit (sm90 only, decode sizes:
// docs/decisions.md, "The decode coefficient launch"), and the switch forces them on at every size
// or off.
TEST(KernelPlanSwitches, FlaggedPartials) {
  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_EQ(plain.flagged_partials_max_tokens, sm90_rules().flagged_partials_max_tokens);
  EXPECT_GE(plain.flagged_partials_max_tokens, 1);
  EXPECT_LT(plain.flagged_partials_max_tokens, 16);
  EXPECT_FALSE(plain.flagged_partials_split_loop) << "the overlap's split loop only when asked";
  EXPECT_TRUE(contains(plain.describe(), "not in the split loop")) << plain.describe();
  EXPECT_TRUE(contains(plain.to_json(), R"("flagged_partials_split_loop":false)"))
      << plain.to_json();
  EXPECT_TRUE(contains(plain.describe(), "flagged partials")) << plain.describe();
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"flagged_partials": true})").flagged_partials_max_tokens,
            kNoTokenLimit);
  EXPECT_TRUE(contains(plain.to_json(), R"("flagged_partials_max_tokens")")) << plain.to_json();
  const KernelPlan off = plan("9.0", kWithSm100, R"({"flagged_partials": false})");
  EXPECT_EQ(off.flagged_partials_max_tokens, 0);
  EXPECT_TRUE(contains(off.describe(), "flagged_partials=false")) << off.describe();
  const KernelPlan on = plan("8.0", kWithSm100, R"({"flagged_partials": true})");
  EXPECT_EQ(on.flagged_partials_max_tokens, kNoTokenLimit);
  EXPECT_TRUE(on.flagged_partials_split_loop);
  EXPECT_FALSE(off.flagged_partials_split_loop);
  EXPECT_EQ(plan("8.0", kWithSm100).flagged_partials_max_tokens, 0);
  EXPECT_EQ(plan("10.0", kWithSm100).flagged_partials_max_tokens, 0);
  const KernelConfig c = KernelConfig::parse(R"({"flagged_partials": false, "fused_input": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_TRUE(contains(c.to_json(), R"("flagged_partials":false,"fused_input":true,)"))
      << c.to_json();
  EXPECT_NE(c.hash(), KernelConfig::parse(R"({"fused_input": true})").hash());
  EXPECT_TRUE(contains(c.describe(), "flagged_partials=false")) << c.describe();
  EXPECT_THROW(KernelConfig::parse(R"({"flagged_partials": 1})"), Error);
}

// The TMA kernel's cluster epilogue: on in the sm90 rules where the image has the TMA kernel,
// off elsewhere and in batch-invariant mode (refused there when forced), and the switch turns it
// off or insists on it.
TEST(KernelPlanSwitches, ClusterEpilogue) {
  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_TRUE(sm90_rules().tma_cluster_epilogue);
  EXPECT_EQ(plain.tma_cluster_epilogue, plain.tma128_available);
  EXPECT_TRUE(plain.tma_cluster_epilogue) << "the sm_90a image has the TMA kernel";
  EXPECT_TRUE(contains(plain.summary(), ", cluster epilogue")) << plain.summary();
  EXPECT_TRUE(contains(plain.describe(), "cluster epilogue yes")) << plain.describe();
  EXPECT_TRUE(contains(plain.to_json(), R"("tma_cluster_epilogue":true)")) << plain.to_json();
  const KernelPlan off = plan("9.0", kWithSm100, R"({"cluster_epilogue": false})");
  EXPECT_FALSE(off.tma_cluster_epilogue);
  EXPECT_FALSE(contains(off.summary(), "cluster epilogue")) << off.summary();
  EXPECT_TRUE(contains(off.describe(), "cluster_epilogue=false")) << off.describe();
  EXPECT_TRUE(plan("9.0", kWithSm100, R"({"cluster_epilogue": true})").tma_cluster_epilogue);
  EXPECT_FALSE(plan("8.0", kWithSm100).tma_cluster_epilogue);
  EXPECT_THROW(plan("8.0", kWithSm100, R"({"cluster_epilogue": true})"), Error);
  EXPECT_FALSE(plan("9.0", kWithSm100, R"({"batch_invariant": true})").tma_cluster_epilogue);
  EXPECT_THROW(plan("9.0", kWithSm100, R"({"cluster_epilogue": true, "batch_invariant": true})"),
               Error);
  const KernelConfig c =
      KernelConfig::parse(R"({"cluster_epilogue": false, "cluster_post": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_TRUE(contains(c.to_json(), R"("cluster_epilogue":false,"cluster_post":true,)"))
      << c.to_json();
  EXPECT_NE(c.hash(), KernelConfig::parse(R"({"cluster_post": true})").hash());
  EXPECT_TRUE(contains(c.describe(), "cluster_epilogue=false")) << c.describe();
  EXPECT_THROW(KernelConfig::parse(R"({"cluster_epilogue": "yes"})"), Error);
}

// The plain post's form: the kernel config's switch reaches the plan (every size or none), is
// written in its sorted place (after pdl, before prenorm_kernel) and changes the hash.
TEST(KernelPlan, PostColumnsSwitch) {
  EXPECT_EQ(plan("9.0", kWithSm100).post_columns_max_tokens, 64);
  EXPECT_EQ(plan("8.0", kWithSm100).post_columns_max_tokens, 64);
  const KernelPlan on = plan("9.0", kWithSm100, R"({"post_columns": true})");
  EXPECT_EQ(on.post_columns_max_tokens, kNoTokenLimit);
  EXPECT_TRUE(contains(on.describe(), "post_columns=true")) << on.describe();
  EXPECT_TRUE(contains(on.to_json(), R"("post_columns_max_tokens":"all")")) << on.to_json();
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"post_columns": false})").post_columns_max_tokens, 0);
  const KernelConfig c = KernelConfig::parse(R"({"prenorm_splits": 4, "post_columns": false,
                                                 "pdl": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_TRUE(contains(c.to_json(), R"("pdl":true,"post_columns":false,"prenorm_splits":4)"))
      << c.to_json();
  EXPECT_NE(c.hash(), KernelConfig::parse(R"({"prenorm_splits": 4, "pdl": true})").hash());
  EXPECT_TRUE(contains(c.describe(), "post_columns=false")) << c.describe();
  EXPECT_THROW(KernelConfig::parse(R"({"post_columns": 1})"), Error);
}

// The row kernels' hidden-size limit is the device's (the device plan fills it from the runtime):
// a simulated plan does not know it and says nothing; a known one is in the text and the JSON.
TEST(KernelPlanText, RowKernelsHiddenSizeLimit) {
  KernelPlan p = plan("9.0", kWithSm100);
  EXPECT_EQ(p.row_kernels_max_hidden, 0);
  EXPECT_FALSE(contains(p.describe(), "hidden size")) << p.describe();
  EXPECT_TRUE(contains(p.to_json(), R"("row_kernels_max_hidden":0)")) << p.to_json();
  p.row_kernels_max_hidden = 12288;
  EXPECT_TRUE(contains(p.describe(), "hidden size      C <= 12288")) << p.describe();
  EXPECT_TRUE(contains(p.to_json(), R"("row_kernels_max_hidden":12288)")) << p.to_json();
}

// The fused boundary: in the sm90 rules only where it was measured to win (n = 4 from 768 tokens
// at C >= 4096, 640 at C >= 5120, 544 at C >= 7168), forced on at every size and shape by the
// switch where the image has the sm_90a kernels, refused without them and in batch-invariant mode
// (its split count follows the batch size).
TEST(KernelPlanSwitches, FusedBoundary) {
  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_EQ(plain.fused_boundary_min_tokens, sm90_rules().fused_boundary_min_tokens);
  // The first size each hidden size fuses from: lost or tied one measured step below.
  const std::array<std::array<int, 2>, 4> first = {
      {{4096, 768}, {5120, 640}, {6144, 640}, {7168, 544}}};
  for (const auto& [hidden, from] : first) {
    EXPECT_FALSE(plain.fuses_boundary(hidden, 4, from - 1)) << hidden;
    EXPECT_TRUE(plain.fuses_boundary(hidden, 4, from)) << hidden;
    EXPECT_TRUE(plain.fuses_boundary(hidden, 4, 16384)) << hidden;  // won or tied up to 16384
    EXPECT_FALSE(plain.fuses_boundary(hidden, 2, 8192)) << hidden;  // lost at n = 2
  }
  EXPECT_FALSE(plain.fuses_boundary(4032, 4, 8192));  // below the measured hidden sizes
  EXPECT_TRUE(contains(plain.describe(),
                       "one launch (sm_90a), from 768 tokens at n = 4, C >= 4096; from 640 at "
                       "C >= 5120; from 544 at C >= 7168"))
      << plain.describe();
  EXPECT_TRUE(contains(plain.summary(), ", fused boundary M>=768 at n = 4, C >= 4096; from 640"))
      << plain.summary();
  EXPECT_TRUE(contains(plain.to_json(),
                       R"("fused_boundary_wide":[{"hidden":5120,"min_tokens":640},)"
                       R"({"hidden":7168,"min_tokens":544}])"))
      << plain.to_json();
  EXPECT_TRUE(contains(plain.to_json(), R"("fused_boundary_min_hidden":4096)")) << plain.to_json();
  EXPECT_FALSE(contains(plain.to_json(), "narrow")) << plain.to_json();
  EXPECT_TRUE(contains(plain.to_json(), R"("fused_boundary_streams":4)")) << plain.to_json();
  const KernelPlan forced = plan("9.0", kWithSm100, R"({"fused_boundary": true})");
  EXPECT_EQ(forced.fused_boundary_min_tokens, 1);
  EXPECT_TRUE(forced.fuses_boundary(4096, 2, 1));  // every shape
  EXPECT_TRUE(forced.fuses_boundary(7168, 4, 1)) << "a wide step never raises the threshold";
  EXPECT_TRUE(contains(forced.to_json(), R"("fused_boundary_wide":[])")) << forced.to_json();
  EXPECT_FALSE(
      plan("9.0", kWithSm100, R"({"fused_boundary": false})").fuses_boundary(7168, 4, 8192));
  EXPECT_TRUE(contains(forced.describe(), "fused_boundary=true"));
  EXPECT_TRUE(contains(forced.describe(),
                       "fused boundary   post + next input + coefficients in "
                       "one launch (sm_90a), at every size"))
      << forced.describe();
  EXPECT_TRUE(contains(forced.summary(), ", fused boundary M>=1")) << forced.summary();
  EXPECT_TRUE(contains(forced.to_json(), R"("fused_boundary_min_tokens":1)")) << forced.to_json();
  const KernelPlan off = plan("9.0", kWithSm100, R"({"fused_boundary": false})");
  EXPECT_EQ(off.fused_boundary_min_tokens, 0);
  EXPECT_FALSE(contains(off.summary(), "fused boundary"));
  EXPECT_TRUE(contains(off.describe(), "one launch (sm_90a), never")) << off.describe();
  EXPECT_EQ(plan("8.0", kWithSm100).fused_boundary_min_tokens, 0);
  EXPECT_THROW(plan("8.0", kWithSm100, R"({"fused_boundary": true})"), Error);
  EXPECT_THROW(plan("9.0", kWithSm100, R"({"fused_boundary": true, "batch_invariant": true})"),
               Error);
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"batch_invariant": true})").fused_boundary_min_tokens, 0);
  const KernelConfig c = KernelConfig::parse(R"({"fused_boundary": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_TRUE(contains(c.to_json(), R"("folded_post")") ||
              contains(c.to_json(), R"({"enable_mhc_overlap":null,"fused_boundary":true,)"))
      << c.to_json();
  EXPECT_NE(c.hash(), KernelConfig{}.hash());
  EXPECT_TRUE(contains(c.describe(), "fused_boundary=true"));
  EXPECT_THROW(KernelConfig::parse(R"({"fused_boundary": "yes"})"), Error);
}

TEST(KernelPlanSwitches, ForcingAPathTheImageLacksIsAnError) {
  try {
    plan("10.0", kWithoutSm100, R"({"prenorm_kernel": "tma128"})");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "compute_80")) << e.what();
  }
  EXPECT_THROW(KernelConfig::parse(R"({"prenorm_kernel": "tma256"})"), Error);
  EXPECT_THROW(KernelConfig::parse(R"({"prenorm_splits": 0})"), Error);
  EXPECT_THROW(KernelConfig::parse(R"({"fused_input": 1})"), Error);
}

// The overlap's side-stream coefficient launch of one 16-row tile on overlap_side_ctas CTAs: the
// sm90 rule, none (0: one CTA per split) above 16 tokens or where that is not fewer than the
// splits; the switch sets it (0 turns it off), batch-invariant mode refuses it.
TEST(KernelPlanOverlap, SideStreamCtas) {
  const KernelPlan hopper = plan("9.0", kWithSm100);
  EXPECT_EQ(hopper.overlap_side_ctas, 8);
  EXPECT_EQ(hopper.side_split_ctas(1, 40), 8);
  EXPECT_EQ(hopper.side_split_ctas(16, 40), 8);
  EXPECT_EQ(hopper.side_split_ctas(17, 40), 0);  // two tiles: one CTA per split
  EXPECT_EQ(hopper.side_split_ctas(200, 40), 0);
  EXPECT_EQ(hopper.side_split_ctas(16, 8), 0);  // not fewer than the splits
  EXPECT_EQ(hopper.side_split_ctas(0, 40), 0);
  EXPECT_TRUE(contains(hopper.describe(), "1-16 tokens on 8 CTAs")) << hopper.describe();
  EXPECT_TRUE(contains(hopper.to_json(), R"("overlap_side_ctas":8)"));
  EXPECT_EQ(plan("8.0", kWithSm100).overlap_side_ctas, 0) << "no overlap there";
  EXPECT_EQ(plan("10.0", kWithSm100).overlap_side_ctas, 8) << "the H200's, as its other cut-offs";

  const KernelPlan off = plan("9.0", kWithSm100, R"({"overlap_side_ctas": 0})");
  EXPECT_EQ(off.side_split_ctas(1, 40), 0);
  EXPECT_TRUE(contains(off.overrides_text(), "overlap_side_ctas=0"));
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"overlap_side_ctas": 4})").side_split_ctas(1, 40), 4);
  EXPECT_THROW(KernelConfig::parse(R"({"overlap_side_ctas": -1})"), Error);
  EXPECT_THROW(KernelConfig::parse(R"({"overlap_side_ctas": 1025})"), Error);
  EXPECT_THROW(KernelConfig::parse(R"({"overlap_side_ctas": "8"})"), Error);
  EXPECT_EQ(KernelConfig::parse(R"({"overlap_side_ctas": 4})").to_json(),
            R"({"enable_mhc_overlap":null,"overlap_max_tokens":null,"overlap_side_ctas":4,)"
            R"("projection":"tf32"})");
  EXPECT_THROW(plan("9.0", kWithSm100, R"({"batch_invariant": true, "overlap_side_ctas": 4})"),
               Error);
  EXPECT_EQ(plan("9.0", kWithSm100, R"({"batch_invariant": true})").overlap_side_ctas, 0);
}

TEST(KernelPlanOverlap, Sm100AutomaticOnlyWithSm100Code) {
  EXPECT_EQ(plan("10.0", kWithSm100).overlap, OverlapAvailability::automatic);
  EXPECT_EQ(plan("10.3", kWithSm100).overlap, OverlapAvailability::automatic);
  EXPECT_EQ(plan("10.0", kWithoutSm100).overlap, OverlapAvailability::opt_in);
  EXPECT_EQ(plan("9.0", kWithSm100).overlap, OverlapAvailability::opt_in);
  EXPECT_EQ(plan("8.0", kWithSm100).overlap, OverlapAvailability::never);
  EXPECT_EQ(plan("9.0", "sm_80").overlap, OverlapAvailability::never) << "no image loads";
}

DispatchInputs dispatch_inputs(const char* arch, const char* images) {
  DispatchInputs in;
  in.capability = parse_capability(arch);
  in.images = parse_images(images);
  return in;
}

TEST(KernelPlanOverlap, DispatchNeverPromisesAPathTheBinaryLacks) {
  EXPECT_TRUE(decide(dispatch_inputs("10.0", kWithSm100)).overlap);
  const DispatchDecision d = decide(dispatch_inputs("10.0", kWithoutSm100));
  EXPECT_FALSE(d.overlap);
  EXPECT_EQ(d.reason_code, "sm100_code_missing");
  EXPECT_TRUE(contains(d.reason, "sm_90a, sm_80, compute_80")) << d.reason;
  DispatchInputs opted = dispatch_inputs("10.0", kWithoutSm100);
  opted.config.enable_mhc_overlap = true;
  EXPECT_TRUE(decide(opted).overlap);
  // No image loads: that is the reason, opted in or not.
  EXPECT_EQ(decide(dispatch_inputs("9.0", "sm_100f")).reason_code, "no_prenorm_gemm");
  DispatchInputs none = dispatch_inputs("9.0", "sm_100f");
  none.config.enable_mhc_overlap = true;
  EXPECT_EQ(decide(none).reason_code, "no_prenorm_gemm");
}

TEST(KernelPlanText, NamesEveryVariantAndWhereItCameFrom) {
  const std::string text = plan("10.0", kWithoutSm100).describe();
  for (const char* part : {"compute_80 (PTX, JIT", "mma16", "mma64", "tma128", "absent",
                           "sm100-jit", "predicted from the build", "opt-in"}) {
    EXPECT_TRUE(contains(text, part)) << part << "\n" << text;
  }
  const std::string hopper = plan("9.0", kWithSm100).describe();
  EXPECT_TRUE(contains(hopper, "M >= 1536")) << hopper;
  EXPECT_TRUE(contains(hopper, "SASS, compiled ahead of time, wgmma")) << hopper;
}

// Batch-invariant mode is the plan's: one kernel per size (the TMA kernel where the image has it,
// else 16-row tiles up to 256 tokens and 64-row above), nothing fused or folded, said in the text
// and the JSON; the switches that would break the fixed order are refused.
TEST(KernelPlanBatchInvariant, OneKernelPerSizeNothingFused) {
  const char* const on = R"({"batch_invariant": true})";
  const KernelPlan hopper = plan("9.0", kWithSm100, on);
  EXPECT_TRUE(hopper.batch_invariant);
  ASSERT_EQ(hopper.prenorm.size(), 1u);
  EXPECT_EQ(hopper.prenorm[0].kernel, PrenormKernel::tma128);
  for (const char* arch : {"8.0", "10.0"}) {
    const KernelPlan p = plan(arch, kWithSm100, on);
    ASSERT_EQ(p.prenorm.size(), 2u) << arch;
    EXPECT_EQ(p.prenorm_kernel(256), PrenormKernel::mma16) << arch;
    EXPECT_EQ(p.prenorm_kernel(257), PrenormKernel::mma64) << arch;
    EXPECT_EQ(p.prenorm_kernel(100000), PrenormKernel::mma64) << arch;
  }
  for (const KernelPlan& p : {hopper, plan("8.0", kWithSm100, on)}) {
    for (int64_t m : {1, 16, 256, 257, 1536, 100000}) {
      EXPECT_EQ(p.prenorm_kernel(m), batch_invariant_kernel(m, p.tma128_available)) << m;
      // The fused input path stays (the same bits as the separate one); never the 64-row tile.
      EXPECT_EQ(p.fuses_input(m, p.prenorm_kernel(m)),
                m <= p.rules.fused_input_max_tokens && p.prenorm_kernel(m) != PrenormKernel::mma64)
          << m;
    }
    EXPECT_EQ(p.fused_input_max_tokens, p.rules.fused_input_max_tokens);
    EXPECT_EQ(p.folded_post_max_tokens, 0);
  }
  EXPECT_TRUE(contains(hopper.describe(), "yes: one order per size")) << hopper.describe();
  EXPECT_TRUE(contains(hopper.describe(), "batch_invariant=true")) << hopper.describe();
  EXPECT_TRUE(contains(hopper.to_json(), R"("batch_invariant":true)"));
  EXPECT_TRUE(contains(hopper.summary(), "batch-invariant"));
  const KernelPlan plain = plan("9.0", kWithSm100);
  EXPECT_FALSE(plain.batch_invariant);
  EXPECT_TRUE(contains(plain.to_json(), R"("batch_invariant":false)"));
  // Switching a fused path off is harmless; forcing what the fixed order forbids is an error.
  EXPECT_NO_THROW(plan("9.0", kWithSm100, R"({"batch_invariant": true, "fused_input": false})"));
  EXPECT_NO_THROW(plan("9.0", kWithSm100, R"({"batch_invariant": true, "fused_input": true})"));
  for (const char* bad : {R"({"batch_invariant": true, "prenorm_kernel": "mma16"})",
                          R"({"batch_invariant": true, "prenorm_splits": 4})",
                          R"({"batch_invariant": true, "folded_post": true})"}) {
    try {
      plan("9.0", kWithSm100, bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "batch_invariant")) << e.what();
    }
  }
}

// PDL is the plan's per device, switchable: off anywhere, on only where the image has the waits.
TEST(KernelPlanSwitches, PdlOnAndOff) {
  const KernelPlan off = plan("9.0", kWithSm100, R"({"pdl": false})");
  EXPECT_FALSE(off.pdl);
  EXPECT_TRUE(contains(off.overrides_text(), "pdl=false"));
  EXPECT_TRUE(contains(off.to_json(), R"("pdl":false)"));
  EXPECT_TRUE(plan("9.0", kWithSm100, R"({"pdl": true})").pdl);
  EXPECT_TRUE(plan("10.0", kWithSm100, R"({"pdl": true})").pdl);
  for (const char* arch : {"8.0", "10.0"}) {
    try {
      plan(arch, kWithoutSm100, R"({"pdl": true})");
      ADD_FAILURE() << "no error on " << arch;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "griddepcontrol")) << e.what();
    }
  }
  EXPECT_FALSE(plan("8.0", kWithoutSm100, R"({"pdl": false})").pdl);
}

}  // namespace
}  // namespace mhc
