// The batch-invariant tuning (batch_invariant_tuning, prenorm_tuning_for): plain host code, so
// these run everywhere the CUDA library is built, GPU or not (CI included). The default tuning is
// the kernel plan's (tests/core/test_kernel_plan.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cpu/test_util.hpp"
#include "mhc/core/capability.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc {
namespace {

constexpr int kH200Sms = 132;

// Batch-invariant mode: the leaves follow K alone; one kernel for every M (the TMA kernel where
// it exists); splits a power of two dividing the leaves, filling the GPU at most once.
TEST(PrenormTuning, BatchInvariantLeavesAndSplits) {
  EXPECT_EQ(cuda::batch_invariant_leaves(test::small_params(4, 5120)), 32);
  EXPECT_EQ(cuda::batch_invariant_leaves(test::small_params(2, 4096)), 32);
  EXPECT_EQ(cuda::batch_invariant_leaves(test::small_params(2, 256)), 2);  // K=512: 4 stages
  for (int n : {2, 4}) {
    for (int hidden : {256, 4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      const int leaves = cuda::batch_invariant_leaves(p);
      EXPECT_EQ(leaves & (leaves - 1), 0) << "a power of two";
      EXPECT_LE(leaves, cuda::max_prenorm_splits(p));
      for (int64_t m : {1, 16, 257, 1535, 1536, 4096, 8192, 100000}) {
        const cuda::PrenormTuning t = cuda::batch_invariant_tuning(p, m, kH200Sms, true);
        EXPECT_TRUE(t.batch_invariant);
        EXPECT_EQ(t.rows_per_tile, 128) << "M=" << m;
        EXPECT_EQ(leaves % t.splits, 0) << "M=" << m;
        EXPECT_EQ(t.splits & (t.splits - 1), 0) << "M=" << m;
        const int64_t tiles = (m + 127) / 128;
        if (t.splits > 1) {
          EXPECT_LE(tiles * t.splits, kH200Sms) << "M=" << m;
        }
        const cuda::PrenormTuning r = cuda::batch_invariant_tuning(p, m, kH200Sms, false);
        EXPECT_EQ(r.splits, leaves) << "register-fed: one leaf per split";
        EXPECT_EQ(r.rows_per_tile, m <= 256 ? 16 : 64);
      }
    }
  }
  const MhcParams p = test::small_params(4, 5120);
  EXPECT_EQ(cuda::batch_invariant_tuning(p, 1, kH200Sms, true).splits, 32);
  EXPECT_EQ(cuda::batch_invariant_tuning(p, 4096, kH200Sms, true).splits, 4);
  EXPECT_EQ(cuda::batch_invariant_tuning(p, 8192, kH200Sms, true).splits, 2);
  KernelConfig config;
  config.batch_invariant = true;
  const auto images = parse_images("sm_90a,sm_80,compute_80");
  const KernelPlan h200 = simulated_plan(parse_capability("9.0"), kH200Sms, images, KernelConfig{});
  const KernelPlan h200_bi = simulated_plan(parse_capability("9.0"), kH200Sms, images, config);
  EXPECT_TRUE(cuda::prenorm_tuning_for(h200_bi, config, p, 8).batch_invariant);
  EXPECT_EQ(cuda::prenorm_tuning_for(h200_bi, config, p, 8).rows_per_tile, 128);
  EXPECT_FALSE(cuda::prenorm_tuning_for(h200, KernelConfig{}, p, 8).batch_invariant);
  // A plan made for the other setting is refused, not silently overridden.
  EXPECT_THROW(cuda::prenorm_tuning_for(h200, config, p, 8), Error);
  EXPECT_THROW(cuda::prenorm_tuning_for(h200_bi, KernelConfig{}, p, 8), Error);
}

// The plan decides batch-invariant mode: its tuning is batch_invariant_tuning's at every size, on
// a Hopper image (TMA) and on an Ampere one (register-fed), and never fuses the input.
TEST(PrenormTuning, BatchInvariantPlanMatchesTheRule) {
  KernelConfig config;
  config.batch_invariant = true;
  for (const char* arch : {"9.0", "8.0"}) {
    const KernelPlan plan = simulated_plan(parse_capability(arch), kH200Sms,
                                           parse_images("sm_90a,sm_80,compute_80"), config);
    const bool bulk = plan.tma128_available;
    EXPECT_EQ(bulk, std::string(arch) == "9.0");
    for (int hidden : {256, 5120}) {
      const MhcParams p = test::small_params(4, hidden);
      for (int64_t m : {1, 8, 64, 256, 257, 1536, 8192}) {
        const cuda::PrenormTuning got = cuda::choose_prenorm_tuning(plan, p, m);
        const cuda::PrenormTuning want = cuda::batch_invariant_tuning(p, m, kH200Sms, bulk);
        EXPECT_TRUE(got.batch_invariant) << arch << " M=" << m;
        EXPECT_EQ(got.rows_per_tile, want.rows_per_tile) << arch << " M=" << m;
        EXPECT_EQ(got.splits, want.splits) << arch << " M=" << m;
        // The input path fuses at decode sizes as in the default mode (the same bits as the
        // separate launch), on the 16-row and TMA tiles.
        EXPECT_EQ(cuda::input_path_fuses(p, m, got), m <= plan.fused_input_max_tokens)
            << arch << " M=" << m;
      }
    }
  }
}

}  // namespace
}  // namespace mhc
