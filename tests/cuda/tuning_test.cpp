// The prenorm GEMM's tuning heuristic (choose_prenorm_tuning): plain host code, so these run
// everywhere the CUDA library is built, GPU or not (CI included).
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/test_util.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc {
namespace {

constexpr int kH200Sms = 132;

TEST(PrenormTuning, TileSizeByTokenCountAndBulkAvailability) {
  const MhcParams p = test::small_params(4, 5120);
  for (bool tma : {false, true}) {
    for (int64_t m : {1, 16, 255, 256, 257, 1024, 2047, 2048, 4096, 8192, 100000}) {
      const cuda::PrenormTuning t = cuda::choose_prenorm_tuning(p, m, kH200Sms, tma);
      const int want = tma && m >= cuda::kTmaPrenormMinTokens ? 128 : m <= 256 ? 16 : 64;
      EXPECT_EQ(t.rows_per_tile, want) << "M=" << m << " tma=" << tma;
    }
  }
}

TEST(PrenormTuning, SplitsFillTheGpuOnceAndStayInRange) {
  for (int n : {2, 4}) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      for (int64_t m : {1, 3, 17, 64, 137, 1024, 2049, 4096, 8192}) {
        const cuda::PrenormTuning t = cuda::choose_prenorm_tuning(p, m, kH200Sms, true);
        const int64_t tiles = (m + t.rows_per_tile - 1) / t.rows_per_tile;
        EXPECT_GE(t.splits, 1);
        EXPECT_LE(t.splits, cuda::max_prenorm_splits(p));
        EXPECT_LE(t.splits, 40) << "decode sizes are capped (the last CTA reads every split)";
        // Never a second wave of CTAs (tiles x splits <= SMs) unless one split is already too many.
        if (t.splits > 1) {
          EXPECT_LE(tiles * t.splits, kH200Sms) << "M=" << m;
        }
      }
    }
  }
  // The measured optimum of the TMA kernel at C=5120 n=4: 128 CTAs (docs/kernels.md).
  const MhcParams p = test::small_params(4, 5120);
  EXPECT_EQ(cuda::choose_prenorm_tuning(p, 4096, kH200Sms, true).splits, 4);
  EXPECT_EQ(cuda::choose_prenorm_tuning(p, 8192, kH200Sms, true).splits, 2);
}

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
  EXPECT_TRUE(cuda::prenorm_tuning_for(config, p, 8, kH200Sms).batch_invariant);
  EXPECT_FALSE(cuda::prenorm_tuning_for(KernelConfig{}, p, 8, kH200Sms).batch_invariant);
}

}  // namespace
}  // namespace mhc
