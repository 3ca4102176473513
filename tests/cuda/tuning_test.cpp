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

}  // namespace
}  // namespace mhc
