// The batch-invariant tuning (batch_invariant_tuning, prenorm_tuning_for): plain host code, so
// these run everywhere the CUDA library is built, GPU or not (CI included). The default tuning is
// the kernel plan's (tests/core/test_kernel_plan.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/test_util.hpp"
#include "mhc/core/capability.hpp"
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
        if (t.splits > 1) EXPECT_LE(tiles * t.splits, kH200Sms) << "M=" << m;
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
  const KernelPlan h200 = simulated_plan(parse_capability("9.0"), kH200Sms,
                                         parse_images("sm_90a,sm_80,compute_80"), KernelConfig{});
  EXPECT_TRUE(cuda::prenorm_tuning_for(h200, config, p, 8).batch_invariant);
  EXPECT_EQ(cuda::prenorm_tuning_for(h200, config, p, 8).rows_per_tile, 128);
  EXPECT_FALSE(cuda::prenorm_tuning_for(h200, KernelConfig{}, p, 8).batch_invariant);
}

}  // namespace
}  // namespace mhc
