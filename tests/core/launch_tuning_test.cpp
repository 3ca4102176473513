// The kernel plan resolved for one launch (KernelPlan::tuning): every field a launcher reads,
// from the plan of a simulated GPU, the shape and the token count, with a sweep's overrides.
// Plain policy code: runs everywhere, GPU or not. The plan itself: test_kernel_plan.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "mhc/core/error.hpp"
#include "mhc/core/kernel_limits.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "plan_test_util.hpp"

namespace mhc {
namespace {

using plan_test::contains;
using plan_test::kH200Sms;
using plan_test::kWithoutSm100;
using plan_test::plan;

MhcParams shape(int n, int hidden) {
  MhcParams p;
  p.n = n;
  p.hidden = hidden;
  return p;
}

// Batch-invariant mode: the leaves follow K alone; one kernel for every M (the TMA kernel where
// it exists); splits a power of two dividing the leaves, filling the GPU at most once.
TEST(LaunchTuning, BatchInvariantLeavesAndSplits) {
  EXPECT_EQ(batch_invariant_leaves(shape(4, 5120)), 32);
  EXPECT_EQ(batch_invariant_leaves(shape(2, 4096)), 32);
  EXPECT_EQ(batch_invariant_leaves(shape(2, 256)), 2);  // K=512: 4 stages
  for (int n : {2, 4}) {
    for (int hidden : {256, 4096, 5120, 7168}) {
      const MhcParams p = shape(n, hidden);
      const int leaves = batch_invariant_leaves(p);
      EXPECT_EQ(leaves & (leaves - 1), 0) << "a power of two";
      EXPECT_LE(leaves, max_prenorm_splits(p));
      for (int64_t m : {1, 16, 257, 1535, 1536, 4096, 8192, 100000}) {
        const PrenormChoice t = batch_invariant_choice(p, m, kH200Sms, PrenormKernel::tma128);
        EXPECT_EQ(leaves % t.splits, 0) << "M=" << m;
        EXPECT_EQ(t.splits & (t.splits - 1), 0) << "M=" << m;
        const int64_t tiles = (m + 127) / 128;
        if (t.splits > 1) {
          EXPECT_LE(tiles * t.splits, kH200Sms) << "M=" << m;
        }
        const PrenormKernel reg = batch_invariant_kernel(m, false);
        EXPECT_EQ(reg, m <= 256 ? PrenormKernel::mma16 : PrenormKernel::mma64);
        EXPECT_EQ(batch_invariant_choice(p, m, kH200Sms, reg).splits, leaves)
            << "register-fed: one leaf per split";
      }
    }
  }
  const MhcParams p = shape(4, 5120);
  EXPECT_EQ(batch_invariant_choice(p, 1, kH200Sms, PrenormKernel::tma128).splits, 32);
  EXPECT_EQ(batch_invariant_choice(p, 4096, kH200Sms, PrenormKernel::tma128).splits, 4);
  EXPECT_EQ(batch_invariant_choice(p, 8192, kH200Sms, PrenormKernel::tma128).splits, 2);
}

// The plan decides batch-invariant mode: its launches follow the rule at every size, on a
// Hopper image (TMA) and on an Ampere one (register-fed); the input path still fuses at decode
// sizes (the same bits as the separate launch); nothing folds, fuses the boundary or loops.
TEST(LaunchTuning, BatchInvariantPlanFollowsTheRule) {
  for (const char* arch : {"9.0", "8.0"}) {
    const KernelPlan bi = plan(arch, kWithoutSm100, R"({"batch_invariant": true})");
    const bool bulk = bi.tma128_available;
    EXPECT_EQ(bulk, std::string(arch) == "9.0");
    for (int hidden : {256, 5120}) {
      const MhcParams p = shape(4, hidden);
      for (int64_t m : {1, 8, 64, 256, 257, 1536, 8192}) {
        LaunchOverrides side;
        side.side_stream = true;
        const LaunchTuning t = bi.tuning(p, m, side);
        const PrenormKernel kernel = batch_invariant_kernel(m, bulk);
        EXPECT_TRUE(t.batch_invariant) << arch << " M=" << m;
        EXPECT_EQ(t.kernel, kernel) << arch << " M=" << m;
        EXPECT_EQ(t.splits, batch_invariant_choice(p, m, kH200Sms, kernel).splits)
            << arch << " M=" << m;
        EXPECT_EQ(t.fused_input, m <= bi.fused_input_max_tokens && kernel != PrenormKernel::mma64)
            << arch << " M=" << m;
        EXPECT_FALSE(t.folded_post || t.fused_boundary || t.cluster_epilogue) << arch;
        EXPECT_EQ(t.split_ctas, 0) << arch << " M=" << m;
      }
    }
  }
}

// The default launches are the plan's decisions for the size, each resolved: no field asks the
// plan again.
TEST(LaunchTuning, HopperDefaultsFollowThePlan) {
  const KernelPlan h200 = plan("9.0", kWithoutSm100);
  const MhcParams p = shape(4, 5120);
  for (int64_t m : {1, 16, 17, 64, 65, 257, 1536, 8192}) {
    const LaunchTuning t = h200.tuning(p, m);
    const PrenormChoice c = h200.prenorm_choice(m, p.k());
    EXPECT_EQ(t.hidden, 5120);
    EXPECT_EQ(t.streams, 4);
    EXPECT_EQ(t.tokens, m);
    EXPECT_EQ(t.kernel, c.kernel) << m;
    EXPECT_EQ(t.splits, c.splits) << m;
    EXPECT_EQ(t.projection, Projection::tf32);
    EXPECT_EQ(t.pdl, h200.pdl);
    EXPECT_EQ(t.fused_input, h200.fuses_input(m, c.kernel)) << m;
    EXPECT_EQ(t.folded_post, m <= h200.folded_post_max_tokens) << m;
    EXPECT_EQ(t.cluster_post, m <= h200.cluster_post_max_tokens) << m;
    EXPECT_EQ(t.fused_boundary, h200.fuses_boundary(5120, 4, m)) << m;
    EXPECT_EQ(t.cluster_epilogue, h200.tma_cluster_epilogue);
    EXPECT_EQ(t.split_ctas, 0) << "only the side stream loops";
    EXPECT_EQ(t.flagged_partials != FlaggedPartials::never, m <= h200.flagged_partials_max_tokens)
        << m;
  }
  // The side stream's launch of one 16-row tile on the plan's fewer CTAs.
  LaunchOverrides side;
  side.side_stream = true;
  const LaunchTuning t1 = h200.tuning(p, 1, side);
  EXPECT_EQ(t1.split_ctas, h200.side_split_ctas(1, t1.splits));
  EXPECT_EQ(h200.tuning(p, 4096, side).split_ctas, 0) << "the 64-row and TMA tiles do not loop";
  // The fp32 projection never runs the fused boundary (its kernel is TF32).
  const KernelPlan fp32 = plan("9.0", kWithoutSm100, R"({"projection": "fp32"})");
  EXPECT_EQ(fp32.tuning(p, 8192).projection, Projection::fp32);
  EXPECT_FALSE(fp32.tuning(p, 8192).fused_boundary);
  EXPECT_TRUE(h200.tuning(p, 8192).fused_boundary) << "the built-in rule at C=5120, n=4";
}

// What the image cannot run is never resolved: no TMA kernel, clusters, fused boundary or PDL
// from a compute_80 image, and a forced TMA kernel is refused.
TEST(LaunchTuning, TheImageBoundsEveryField) {
  const KernelPlan jit = plan("9.0", "sm_80,compute_80");
  ASSERT_EQ(jit.image->name(), "compute_80");
  const MhcParams p = shape(4, 7168);
  for (int64_t m : {1, 64, 8192}) {
    LaunchOverrides all;
    all.cluster_post = true;
    all.fused_boundary = true;
    all.cluster_epilogue = true;
    const LaunchTuning t = jit.tuning(p, m, all);
    EXPECT_NE(t.kernel, PrenormKernel::tma128);
    EXPECT_FALSE(t.pdl || t.cluster_post || t.fused_boundary || t.cluster_epilogue) << m;
  }
  LaunchOverrides tma;
  tma.kernel = PrenormKernel::tma128;
  EXPECT_THROW(jit.tuning(p, 1, tma), Error);
  EXPECT_EQ(plan("9.0", kWithoutSm100).tuning(p, 1, tma).kernel, PrenormKernel::tma128);
}

// Overrides replace the plan's decision for one launch (sweeps), within what the kernels take.
TEST(LaunchTuning, OverridesForOneLaunch) {
  const KernelPlan h200 = plan("9.0", kWithoutSm100);
  const MhcParams p = shape(4, 5120);
  LaunchOverrides o;
  o.kernel = PrenormKernel::mma64;
  o.splits = 7;
  o.fused_input = true;  // the 64-row tiles have no input-path CTAs: still not fused
  o.pdl = false;
  o.flagged_partials = FlaggedPartials::always;
  o.split_ctas = 3;
  o.projection = Projection::fp32;
  o.boundary.rows = 64;
  const LaunchTuning t = h200.tuning(p, 4, o);
  EXPECT_EQ(t.kernel, PrenormKernel::mma64);
  EXPECT_EQ(t.rows_per_tile(), 64);
  EXPECT_EQ(t.splits, 7);
  EXPECT_FALSE(t.fused_input);
  EXPECT_FALSE(t.pdl);
  EXPECT_EQ(t.flagged_partials, FlaggedPartials::always);
  EXPECT_EQ(t.split_ctas, 3);
  EXPECT_EQ(t.projection, Projection::fp32);
  EXPECT_EQ(t.boundary.rows, 64);
  // A forced kernel keeps the plan's split count for the size.
  LaunchOverrides kernel_only;
  kernel_only.kernel = PrenormKernel::tma128;
  EXPECT_EQ(h200.tuning(p, 4, kernel_only).splits, h200.prenorm_choice(4, p.k()).splits);
  // Forcing the fused boundary reaches every size and shape its kernel takes.
  LaunchOverrides boundary;
  boundary.fused_boundary = true;
  EXPECT_TRUE(h200.tuning(shape(2, 4096), 1, boundary).fused_boundary);
  EXPECT_FALSE(h200.tuning(shape(4, 16384 + 64), 130, boundary).fused_boundary)
      << "a split's stages past the kernel's table";
  LaunchOverrides cluster;
  cluster.cluster_post = true;
  EXPECT_TRUE(h200.tuning(p, 4096, cluster).cluster_post);
  EXPECT_FALSE(h200.tuning(shape(4, 8256), 1, cluster).cluster_post) << "a row of 9 warps";
  // Out of range: refused with the limit named.
  LaunchOverrides many;
  many.splits = max_prenorm_splits(p) + 1;
  try {
    h200.tuning(p, 4, many);
    ADD_FAILURE() << "splits above the shape's limit were accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "1..80")) << e.what();
  }
  LaunchOverrides negative;
  negative.split_ctas = -1;
  EXPECT_THROW(h200.tuning(p, 4, negative), Error);
}

// The plain post by columns: up to the plan's limit (64 tokens on every architecture's rules,
// images with clusters or not), by rows above; the kernel config's switch and a launch's override
// move it, except where the column kernel's grid would not fit a launch.
TEST(LaunchTuning, PostColumnsUpToThePlansLimit) {
  for (const char* built : {kWithoutSm100, "sm_80,compute_80"}) {
    for (const char* cc : {"9.0", "8.0"}) {
      const KernelPlan p = plan(cc, built);
      if (!p.has_kernels()) continue;
      ASSERT_EQ(p.post_columns_max_tokens, 64) << cc << " " << built;
      for (const MhcParams& s : {shape(4, 5120), shape(2, 4096), shape(4, 7168)}) {
        EXPECT_TRUE(p.tuning(s, 1).post_columns) << cc << " " << built;
        EXPECT_TRUE(p.tuning(s, 64).post_columns) << cc << " " << built;
        EXPECT_FALSE(p.tuning(s, 65).post_columns) << cc << " " << built;
        EXPECT_FALSE(p.tuning(s, 8192).post_columns) << cc << " " << built;
      }
    }
  }
  const MhcParams s = shape(4, 5120);
  const KernelPlan on = plan("9.0", kWithoutSm100, R"({"post_columns": true})");
  const KernelPlan off = plan("9.0", kWithoutSm100, R"({"post_columns": false})");
  EXPECT_TRUE(on.tuning(s, 8192).post_columns);
  EXPECT_FALSE(off.tuning(s, 1).post_columns);
  EXPECT_TRUE(contains(on.describe(), "post_columns=true")) << on.describe();
  EXPECT_TRUE(contains(on.tuning(s, 8192).describe(), " post_columns"));
  LaunchOverrides rows;
  rows.post_columns = false;
  EXPECT_FALSE(plan("9.0", kWithoutSm100).tuning(s, 1, rows).post_columns);
  // A grid of more than 2^31 - 1 CTAs is never resolved (C = 8192: 8 CTAs a token).
  const int64_t too_many = int64_t{1} << 28;
  EXPECT_TRUE(post_columns_fit(8192, too_many - 1));
  EXPECT_FALSE(post_columns_fit(8192, too_many));
  EXPECT_FALSE(on.tuning(shape(4, 8192), too_many).post_columns);
  EXPECT_FALSE(post_columns_fit(0, 1));
  EXPECT_FALSE(post_columns_fit(64, 0));
}

// Shapes the kernels do not take, and token counts out of range, are refused by the resolution
// with the problem named; so is a plan without any kernel image.
TEST(LaunchTuning, RefusesWhatTheKernelsCannotRun) {
  const KernelPlan h200 = plan("9.0", kWithoutSm100);
  auto message = [&](const MhcParams& p, int64_t m) {
    try {
      h200.tuning(p, m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_TRUE(contains(message(shape(3, 5120), 1), "n=3")) << message(shape(3, 5120), 1);
  EXPECT_TRUE(contains(message(shape(4, 5000), 1), "C=5000"));
  EXPECT_TRUE(contains(message(shape(4, kRowKernelsHiddenLimit + 64), 1), "limit 32768"));
  EXPECT_TRUE(contains(message(shape(4, 5120), -1), "token count -1"));
  EXPECT_TRUE(contains(message(shape(4, 5120), int64_t{1} << 31), "out of range"));
  EXPECT_EQ(message(shape(4, 5120), 0), "accepted") << "zero tokens: a no-op launch";
  KernelPlan limited = h200;
  limited.row_kernels_max_hidden = 12288;  // a device's own limit (the rows' registers)
  EXPECT_THROW(limited.tuning(shape(4, 12288 + 64), 1), Error);
  EXPECT_NO_THROW(limited.tuning(shape(4, 12288), 1));
  const KernelPlan none = plan("7.0", "sm_80");
  ASSERT_FALSE(none.has_kernels());
  EXPECT_THROW(none.tuning(shape(4, 5120), 1), Error);
}

// describe() and to_json() name every resolved field (`mhc plan --tokens` prints them).
TEST(LaunchTuning, DescribesEveryField) {
  const KernelPlan h200 = plan("9.0", kWithoutSm100);
  const LaunchTuning t = h200.tuning(shape(4, 5120), 1);
  EXPECT_TRUE(contains(t.describe(), "mma16 splits=")) << t.describe();
  EXPECT_TRUE(contains(t.describe(), " tf32 pdl fused_input")) << t.describe();
  const auto j = nlohmann::json::parse(t.to_json());
  for (const char* key :
       {"hidden", "streams", "tokens", "projection", "batch_invariant", "kernel", "splits", "pdl",
        "fused_input", "folded_post", "cluster_post", "fused_boundary", "boundary_rows",
        "boundary_splits", "boundary_stage_columns", "cluster_epilogue", "split_ctas",
        "flagged_partials", "post_columns"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.at("kernel"), "mma16");
  EXPECT_EQ(j.at("tokens"), 1);
}

}  // namespace
}  // namespace mhc
