// Issue 17's correctness matrix for a V4.1 boundary (the previous site's post, the next input
// path with the carried pre_mix, this site's coefficients): every token count in kTokenCounts
// (both sides of the decode tile, the fold's and the cluster post's limits, the 128-row tiles, the
// TMA kernel's and the fused boundary's thresholds, odd counts, zero) x C {4096, 5120, 7168} x n
// {2, 4}; then amplitudes 1e-3 and 100 and the one-hot first-site entry on a thinner grid. Each
// case runs the device plan's dispatch (whatever it picks at that size), the unfused launches
// (post + next input, then the coefficient launch) and, where the image has it, the fused
// boundary forced: x bitwise the same from all three, layer_input within one bf16 ulp of the
// unfused path's, and each against the float64 reference (TF32 tier). Fresh random inputs per
// case, outputs poisoned. Long (about five minutes on the H200 machine, most of it building and
// comparing the 8192-token cases on the host): dev/scripts/device-validate.sh runs it as its own
// step.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "boundary_test_util.hpp"

namespace mhc {
namespace {

using test::FoldCase;
using test::FoldOutputs;
using test::to_host;

constexpr int64_t kTokenCounts[] = {1,  2,  7,   8,   9,    15,   16,   17,  31,
                                    33, 64, 127, 129, 1000, 2048, 4097, 8192};
constexpr int kHiddens[] = {4096, 5120, 7168};
const std::vector<int> kStreams = test::built_streams();

enum class Entry { carried, one_hot };

// The first site's pre_mix: one-hot on stream 0 (layer_input = rmsnorm(x[0]) * w).
void make_one_hot(FoldCase& k) {
  for (int64_t t = 0; t < k.m; ++t) {
    for (int j = 0; j < k.p.n; ++j) k.c.pre_mix[size_t(t * k.p.n + j)] = j == 0 ? 1.f : 0.f;
  }
  k.pre_mix.upload(k.c.pre_mix.data(), k.c.pre_mix.size());
}

void check_case(const MhcParams& p, int64_t m, uint64_t seed, double amplitude, Entry entry) {
  FoldCase k(p, m, seed, amplitude);
  if (entry == Entry::one_hot) make_one_hot(k);
  const std::string label = test::case_name(p, m, amplitude) +
                            (entry == Entry::one_hot ? " one-hot entry" : " carried entry");
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  FoldOutputs unfused(p, m), plan(p, m);
  test::run_boundary_with(k, unfused, test::boundary_tuning(false), ws);
  test::run_boundary_with(k, plan, LaunchOverrides{}, ws);
  test::expect_boundary_agrees(plan, unfused, label + " plan's dispatch");
  const test::BoundaryReference reference(k, to_host(plan.x), true);
  test::expect_boundary_matches(reference, k, plan, label + " plan's dispatch");
  test::expect_boundary_matches(reference, k, unfused, label + " unfused");
  if (test::device_plan().tma128_available) {
    FoldOutputs fused(p, m);
    test::run_boundary_with(k, fused, test::boundary_tuning(true), ws);
    test::expect_boundary_agrees(fused, unfused, label + " fused boundary");
    test::expect_boundary_matches(reference, k, fused, label + " fused boundary");
  }
}

TEST(CudaBoundaryMatrix, EveryTokenCountAtEveryModelShape) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 17000;
  for (int n : kStreams) {
    for (int hidden : kHiddens) {
      for (int64_t m : kTokenCounts) {
        check_case(test::small_params(n, hidden), m, ++seed, 1.0, Entry::carried);
      }
    }
  }
}

TEST(CudaBoundaryMatrix, AmplitudesAndTheOneHotEntry) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 17500;
  for (int n : kStreams) {
    for (int hidden : kHiddens) {
      const MhcParams p = test::small_params(n, hidden);
      for (int64_t m : {1, 9, 17, 33, 129, 1000, 2048}) {
        check_case(p, m, ++seed, 1e-3, Entry::carried);
        check_case(p, m, ++seed, 1e2, Entry::carried);
        check_case(p, m, ++seed, 1.0, Entry::one_hot);
      }
    }
  }
}

// Zero tokens through every path: nothing written (the outputs keep their poison).
TEST(CudaBoundaryMatrix, ZeroTokensWriteNothing) {
  MHC_SKIP_WITHOUT_GPU();
  for (int n : kStreams) {
    for (int hidden : kHiddens) {
      const MhcParams p = test::small_params(n, hidden);
      FoldCase k(p, 1, 17900 + uint64_t(n * hidden));
      cuda::SiteWorkspace ws(p, 1, max_prenorm_splits(p));
      std::vector<LaunchOverrides> tunings = {LaunchOverrides{}, test::boundary_tuning(false)};
      if (test::device_plan().tma128_available) tunings.push_back(test::boundary_tuning(true));
      for (const LaunchOverrides& t : tunings) {
        FoldOutputs out(p, 1);
        test::run_boundary_with(k, out, t, ws, true, 0);
        const std::string label =
            test::case_name(p, 0, 1.0) + " " + test::tuning(p, 0, t).describe();
        for (Bf16 v : to_host(out.x)) ASSERT_EQ(v.bits, 0xFFFF) << label << " wrote x";
        for (Bf16 v : to_host(out.layer_input)) ASSERT_EQ(v.bits, 0xFFFF) << label;
        for (float v : to_host(out.coef.comb)) ASSERT_TRUE(std::isnan(v)) << label << " comb";
        for (float v : to_host(out.coef.pre)) ASSERT_TRUE(std::isnan(v)) << label << " pre";
      }
    }
  }
}

}  // namespace
}  // namespace mhc
