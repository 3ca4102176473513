// The 16-row coefficient kernel's split loop (LaunchTuning::split_ctas; prenorm_mma.cuh,
// kSplitLoop): a tile's splits on fewer CTAs, each running several in turn. It is what the
// overlap's side stream launches, and the schedules must agree bitwise, so it must give the bits
// of one CTA per split at every shape, split count, CTA count and partial tile; and it must
// really launch fewer CTAs (read from the captured kernel node), or the comparison proves
// nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::DeviceCoefficients;
using test::DeviceWeights;
using test::to_device;

// The 16-row kernel with `splits` splits on split_ctas CTAs per tile (0: one per split).
LaunchTuning tuning(const MhcParams& p, int64_t m, int splits, int split_ctas,
                    Projection projection = Projection::tf32) {
  LaunchOverrides o = test::forced(splits, 16);
  o.split_ctas = split_ctas;
  o.projection = projection;
  return test::tuning(p, m, o);
}

test::HostCoefficients run(const MhcParams& p, int64_t m, const test::SiteCase& c,
                           Projection projection, int splits, int split_ctas) {
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, m);  // poisoned
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  cuda::prenorm_coefficients(p, m, out.buffers(x, w), tuning(p, m, splits, split_ctas, projection),
                             ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  return test::download_coefficients(out);
}

void expect_same_bits(const MhcParams& p, int64_t m, int splits, int split_ctas, uint64_t seed,
                      Projection projection = Projection::tf32) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const test::SiteCase c = test::random_site_case(p, m, seed, 1.0);
  const test::HostCoefficients want = run(p, m, c, projection, splits, 0);
  const test::HostCoefficients got = run(p, m, c, projection, splits, split_ctas);
  const std::string label = test::case_name(p, m, 1.0) + " splits=" + std::to_string(splits) +
                            " split_ctas=" + std::to_string(split_ctas) + " " +
                            std::string(to_string(projection));
  test::expect_same_coefficients(want, got, label);
}

// The grid of the one kernel prenorm_coefficients launches, from a captured graph.
dim3 captured_grid(const MhcParams& p, int64_t m, int splits, int split_ctas) {
  const test::SiteCase c = test::random_site_case(p, m, 1, 1.0);
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, m);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  const std::vector<cudaKernelNodeParams> kernels = test::captured_kernels([&](cudaStream_t st) {
    cuda::prenorm_coefficients(p, m, out.buffers(x, w), tuning(p, m, splits, split_ctas), ws, st);
  });
  EXPECT_EQ(kernels.size(), 1u);
  return kernels.empty() ? dim3(0, 0, 0) : kernels.back().gridDim;
}

// Every model shape; the decode split counts (the plan's at one token: 40 at K >= 10240 and 56
// at C = 7168, n = 4; a prime, the largest K / 256 allows at C = 4096, n = 2) over 1, 3 and 8
// CTAs (uneven shares: 40 / 3), 1 to 33 tokens (partial tiles, two and three tiles), and the
// fp32 projection.
TEST(CudaSplitLoop, SameBitsAsOneCtaPerSplit) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 9500;
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      const int splits = test::tuning(p, 1).splits;
      for (int64_t m : {1, 16, 17}) expect_same_bits(p, m, splits, 8, ++seed);
      expect_same_bits(p, 7, 13, 3, ++seed);
    }
  }
  const MhcParams p = test::small_params(4, 5120);
  for (int split_ctas : {1, 2, 3, 5, 8, 39}) expect_same_bits(p, 5, 40, split_ctas, ++seed);
  expect_same_bits(p, 33, 40, 4, ++seed);
  expect_same_bits(p, 16, 40, 8, ++seed, Projection::fp32);
}

// The comparison above can fail: another split count changes the bits (the K order differs).
TEST(CudaSplitLoop, AnotherSplitCountChangesTheBits) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const test::SiteCase c = test::random_site_case(p, 16, 9600, 1.0);
  EXPECT_FALSE(test::same_coefficients(run(p, 16, c, Projection::tf32, 40, 0),
                                       run(p, 16, c, Projection::tf32, 20, 0)));
}

// The launch shape: split_ctas CTAs per tile where that is fewer than the splits, one per split
// otherwise (and with the split count after the launcher's rebalancing).
TEST(CudaSplitLoop, LaunchesSplitCtasPerTile) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  EXPECT_EQ(captured_grid(p, 16, 40, 8).y, 8u);
  EXPECT_EQ(captured_grid(p, 16, 40, 8).x, 1u);
  EXPECT_EQ(captured_grid(p, 33, 40, 4).x, 3u);
  EXPECT_EQ(captured_grid(p, 33, 40, 4).y, 4u);
  EXPECT_EQ(captured_grid(p, 16, 40, 0).y, 40u);
  EXPECT_EQ(captured_grid(p, 16, 8, 8).y, 8u);   // not fewer: one CTA per split
  EXPECT_EQ(captured_grid(p, 16, 8, 40).y, 8u);  // more CTAs than splits: one per split
}

// Small, for compute-sanitizer (device-validate runs Sanitize*): uneven shares, a partial tile.
TEST(SanitizeSplitLoop, UnevenShares) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 1024);
  expect_same_bits(p, 7, 16, 3, 9700);
  expect_same_bits(test::small_params(2, 2048), 17, 16, 5, 9701);
}

}  // namespace
}  // namespace mhc
