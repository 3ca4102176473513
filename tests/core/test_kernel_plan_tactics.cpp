// The kernel plan under tactics measured by `mhc tune` (mhc/core/tactics.hpp): the overlap
// threshold, the prenorm ranges and the fused boundary's threshold replace the built-in rules and
// yield to the kernel config's switches.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <string>

#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/tactics.hpp"
#include "plan_test_util.hpp"

namespace mhc {
namespace {

using plan_test::contains;
using plan_test::kH200Sms;
using plan_test::kWithSm100;
using plan_test::plan;

Tactics tactics(const char* arch, int max_tokens) {
  Tactics t;
  t.source = "test.json";
  t.gpu = "GPU";
  t.capability = parse_capability(arch);
  t.sm_count = kH200Sms;
  t.hidden = 4096;
  t.n = 4;
  t.layers = 43;
  t.overlap_max_tokens = max_tokens;
  return t;
}

TEST(KernelPlanTactics, ReplaceTheDefaultAndYieldToTheConfig) {
  KernelConfig c;
  c.tactics = tactics("9.0", 24);
  const auto images = parse_images(kWithSm100);
  KernelPlan p = simulated_plan(parse_capability("9.0"), kH200Sms, images, c);
  EXPECT_EQ(p.overlap_max_tokens, 24);
  EXPECT_TRUE(contains(p.overlap_max_tokens_source, "test.json")) << p.overlap_max_tokens_source;
  c.overlap_max_tokens = 8;
  p = simulated_plan(parse_capability("9.0"), kH200Sms, images, c);
  EXPECT_EQ(p.overlap_max_tokens, 8);
  EXPECT_TRUE(contains(p.overlap_max_tokens_source, "kernel config"));
  c.tactics = tactics("10.0", 24);
  EXPECT_THROW(simulated_plan(parse_capability("9.0"), kH200Sms, images, c), Error);
}

// Measured prenorm ranges from `mhc tune` replace the built-in rules (kernel and splits per
// range), yield to the switches, and are refused where the image lacks the kernel.
TEST(KernelPlanTactics, MeasuredPrenormRanges) {
  const std::string tactics =
      R"({"tactics": {"format": "mhc-tactics-1", "gpu": "g", "arch": "9.0", "sm_count": 132,
          "shape": {"hidden": 4096, "n": 4, "layers": 43}, "overlap_max_tokens": 32,
          "prenorm": [{"max_tokens": 8, "kernel": "mma16", "splits": 24},
                      {"max_tokens": 512, "kernel": "mma64", "splits": 6},
                      {"max_tokens": null, "kernel": "tma128", "splits": 2}]}})";
  const KernelPlan p = plan("9.0", kWithSm100, tactics.c_str());
  ASSERT_EQ(p.prenorm.size(), 3u);
  EXPECT_EQ(p.prenorm_kernel(8), PrenormKernel::mma16);
  EXPECT_EQ(p.prenorm_kernel(9), PrenormKernel::mma64);
  EXPECT_EQ(p.prenorm_kernel(513), PrenormKernel::tma128);
  EXPECT_EQ(p.prenorm[1].min_tokens, 9);
  EXPECT_EQ(p.prenorm_choice(1, 40960).splits, 24);
  EXPECT_EQ(p.prenorm_choice(1, 4096).splits, 16) << "at most the shape's limit";
  EXPECT_EQ(p.prenorm_choice(300, 40960).splits, 6);
  EXPECT_EQ(p.prenorm_choice(100000, 40960).splits, 2);
  EXPECT_TRUE(contains(p.prenorm_source, "tactics inline")) << p.prenorm_source;
  EXPECT_TRUE(contains(p.describe(), "measured: 24 (1 <= M <= 8)")) << p.describe();
  EXPECT_TRUE(contains(p.to_json(), R"("splits":24)"));
  // A switch still wins; batch-invariant mode fixes its own ranges.
  std::string forced = tactics;
  forced.insert(1, R"("prenorm_splits": 3, )");
  EXPECT_EQ(plan("9.0", kWithSm100, forced.c_str()).prenorm_choice(1, 40960).splits, 3);
  std::string bi = tactics;
  bi.insert(1, R"("batch_invariant": true, )");
  EXPECT_EQ(plan("9.0", kWithSm100, bi.c_str()).prenorm.size(), 1u);
  // Tactics measured on Hopper cannot load where the TMA kernel is absent (nor on another arch).
  std::string no_tma = tactics;
  no_tma.replace(no_tma.find(R"("arch": "9.0")"), 13, R"("arch": "10.0")");
  try {
    plan("10.0", kWithSm100, no_tma.c_str());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no TMA kernel")) << e.what();
  }
  EXPECT_THROW(plan("8.0", kWithSm100, tactics.c_str()), Error);
  EXPECT_TRUE(contains(plan("9.0", kWithSm100).prenorm_source, "built-in rules of sm90"));
}

// A measured fused-boundary threshold from `mhc tune` replaces the built-in rule: at the measured
// n, from the measured C up, from that many tokens (0: never); the switch and batch-invariant
// mode still win, and an image without the kernel refuses it.
TEST(KernelPlanTactics, MeasuredFusedBoundaryThreshold) {
  const auto with = [](const char* from) {
    return fmt::format(
        R"({{"tactics": {{"format": "mhc-tactics-1", "gpu": "g", "arch": "9.0", "sm_count": 132,
            "shape": {{"hidden": 5120, "n": 4, "layers": 43}}, "overlap_max_tokens": 32,
            "fused_boundary_min_tokens": {}}}}})",
        from);
  };
  const KernelPlan p = plan("9.0", kWithSm100, with("1024").c_str());
  EXPECT_FALSE(p.fuses_boundary(5120, 4, 1023));
  EXPECT_TRUE(p.fuses_boundary(5120, 4, 1024));
  EXPECT_TRUE(p.fuses_boundary(7168, 4, 1024)) << "a wider C: the measured threshold too";
  EXPECT_FALSE(p.fuses_boundary(7168, 4, 800)) << "the built-in steps are gone";
  EXPECT_FALSE(p.fuses_boundary(4096, 4, 8192)) << "below the measured C";
  EXPECT_FALSE(p.fuses_boundary(5120, 2, 8192)) << "another n";
  EXPECT_TRUE(contains(p.describe(), "fused_boundary_min_tokens=1024 (tactics)")) << p.describe();
  EXPECT_TRUE(contains(p.describe(), "from 1024 tokens at n = 4, C >= 5120\n")) << p.describe();
  EXPECT_FALSE(plan("9.0", kWithSm100, with("0").c_str()).fuses_boundary(5120, 4, 8192));
  // Without the field the built-in rule stays.
  EXPECT_TRUE(plan("9.0", kWithSm100, with("null").c_str()).fuses_boundary(5120, 4, 640));
  std::string off = with("1024");
  off.insert(1, R"("fused_boundary": false, )");
  EXPECT_FALSE(plan("9.0", kWithSm100, off.c_str()).fuses_boundary(5120, 4, 8192));
  std::string bi = with("1024");
  bi.insert(1, R"("batch_invariant": true, )");
  EXPECT_FALSE(plan("9.0", kWithSm100, bi.c_str()).fuses_boundary(5120, 4, 8192));
  // Measured on an arch whose image lacks the kernel: refused (never fusing needs none).
  const auto on_sm100 = [&](const char* from) {
    std::string t = with(from);
    t.replace(t.find(R"("arch": "9.0")"), 13, R"("arch": "10.0")");
    return plan("10.0", kWithSm100, t.c_str());
  };
  try {
    on_sm100("1024");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no fused boundary kernel")) << e.what();
  }
  EXPECT_FALSE(on_sm100("0").fuses_boundary(5120, 4, 8192));
}

}  // namespace
}  // namespace mhc
