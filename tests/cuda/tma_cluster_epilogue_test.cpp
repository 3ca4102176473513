// The TMA kernel's cluster epilogue (sm90_prenorm_tma.cuh with PrenormArgs::cluster_epilogue;
// finish_prenorm_tile_in_cluster): a tile's 2-8 splits reduce through distributed shared memory
// and share the stats. It must give the workspace path's bits at every shape, split count and
// partial tile, and it must really run where the launcher says it does: it writes no split
// partials into the workspace, which the other path must. Skips without the sm_90a kernels.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::DeviceCoefficients;
using test::DeviceWeights;
using test::to_device;
using test::to_host;

struct Outputs {
  std::vector<float> pre, post, comb, mixes;
  std::vector<float> partials;  // the workspace's first floats after the launch
};

// One launch of the TMA kernel (128-token tiles, `splits` forced) on the case, the workspace's
// partials poisoned first.
// clusters: LaunchOverrides::cluster_epilogue (0 off, 1 where they fit, -1 the plan's).
Outputs run(const MhcParams& p, int64_t m, const test::SiteCase& c, Projection projection,
            int splits, int clusters) {
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, m);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  const size_t watched = size_t(std::min<int64_t>(ws.partial_capacity(), 4096));
  MHC_CUDA_CHECK(cudaMemset(ws.partials(), 0xFF, watched * sizeof(float)));
  LaunchOverrides t = test::forced(splits, 128);  // the TMA kernel
  if (clusters >= 0) t.cluster_epilogue = clusters == 1;
  t.projection = projection;
  cuda::prenorm_coefficients(p, m, out.buffers(x, w), test::tuning(p, m, t), ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  Outputs o{to_host(out.pre), to_host(out.post), to_host(out.comb), to_host(out.mixes), {}};
  o.partials.resize(watched);
  MHC_CUDA_CHECK(cudaMemcpy(o.partials.data(), ws.partials(), watched * sizeof(float),
                            cudaMemcpyDeviceToHost));
  return o;
}

bool untouched(const std::vector<float>& v) {
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (bits != 0xFFFFFFFFu) return false;
  }
  return true;
}

// Both paths on the same inputs: the same bits; the cluster path, where the launcher says it
// runs (every tile's cluster resident at once), left the workspace alone, and the other did
// not; and the outputs are NaN-free (poisoned before the run).
void expect_same_bits(const MhcParams& p, int64_t m, int splits, uint64_t seed,
                      Projection projection = Projection::tf32, double amplitude = 1.0) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const test::SiteCase c = test::random_site_case(p, m, seed, amplitude);
  const Outputs a = run(p, m, c, projection, splits, 0);
  const Outputs b = run(p, m, c, projection, splits, 1);
  const std::string label = test::case_name(p, m, amplitude) + " splits=" + std::to_string(splits) +
                            " " + std::string(to_string(projection));
  EXPECT_TRUE(test::same_bits(a.pre, b.pre)) << label << " pre";
  EXPECT_TRUE(test::same_bits(a.post, b.post)) << label << " post";
  EXPECT_TRUE(test::same_bits(a.comb, b.comb)) << label << " comb";
  EXPECT_TRUE(test::same_bits(a.mixes, b.mixes)) << label << " mixes";
  EXPECT_EQ(untouched(b.partials), cuda::tma_cluster_epilogue_fits(p, m, splits))
      << label << ": the workspace's partials against the launcher's choice";
  EXPECT_FALSE(untouched(a.partials)) << label << ": the workspace path wrote none";
  for (float v : b.comb) ASSERT_FALSE(std::isnan(v)) << label << " comb has NaN";
  for (float v : b.mixes) ASSERT_FALSE(std::isnan(v)) << label << " mixes has NaN";
}

// Every model shape at two tile counts; at C=5120 every split count a cluster takes, with a
// partial last tile (1, 7 and 130 tokens: reduce_splits' lanes per float4 then differ from one)
// and two whole-GPU sizes; both projections and three amplitudes. Kept small: the random cases are
// made on the host.
TEST(CudaTmaClusterEpilogue, SameBitsAsTheWorkspacePath) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the TMA kernel's cluster epilogue");
  uint64_t seed = 9100;
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      expect_same_bits(p, 129, 2, ++seed);
      expect_same_bits(p, 129, 3, ++seed);
      expect_same_bits(p, 1000, 8, ++seed);
    }
  }
  const MhcParams p = test::small_params(4, 5120);
  for (int splits : {2, 3, 4, 5, 6, 7, 8}) {
    for (int64_t m : {1, 7, 130}) expect_same_bits(p, m, splits, ++seed);
  }
  expect_same_bits(p, 1000, 5, ++seed);
  expect_same_bits(p, 4097, 2, ++seed);
  expect_same_bits(p, 300, 4, ++seed, Projection::fp32);
  expect_same_bits(p, 300, 4, ++seed, Projection::tf32, 1e-3);
  expect_same_bits(p, 300, 4, ++seed, Projection::tf32, 1e2);
}

// The plan's default tuning takes the cluster path where its splits fit at once: on an H200
// (132 SMs) 64 tiles of 2 splits at 8192 tokens (4 splits at 4096 need 32 clusters of 4, and the
// GPU holds 30). There it matches the float64 reference.
TEST(CudaTmaClusterEpilogue, DefaultPathMatchesTheReference) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the TMA kernel's cluster epilogue");
  int sms = 0;
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms < 128) GTEST_SKIP() << "64 clusters of 2 need 128 multiprocessors";
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 8192;
  const test::SiteCase c = test::random_site_case(p, m, 9200, 1.0);
  ASSERT_TRUE(cuda::tma_cluster_epilogue_fits(p, m, 2)) << "64 clusters of 2 do not fit at once";
  const Outputs got = run(p, m, c, Projection::tf32, 0, -1);  // the plan's splits and choice
  ASSERT_TRUE(untouched(got.partials)) << "8192 tokens did not run in clusters";
  ref::SiteResult want;
  ref::coefficients(p, m, c.x.data(), c.weights.view(), want);
  const double tol = kTf32Tolerances.coefficients;
  MHC_EXPECT_CLOSE(compare(got.mixes.data(), want.mixes.data(), m * p.nmix()), tol, "mixes");
  MHC_EXPECT_CLOSE(compare(got.pre.data(), want.pre.data(), m * p.n), tol, "pre");
  MHC_EXPECT_CLOSE(compare(got.post.data(), want.post.data(), m * p.n), tol, "post");
  MHC_EXPECT_CLOSE(compare(got.comb.data(), want.comb.data(), m * p.n * p.n), tol, "comb");
}

// Small, for compute-sanitizer (device-validate runs Sanitize*): clusters of 2, 3 and 8 with
// partial tiles.
TEST(SanitizeTmaClusterEpilogue, PartialTiles) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the TMA kernel's cluster epilogue");
  const MhcParams p = test::small_params(4, 1024);
  expect_same_bits(p, 130, 2, 9300);
  expect_same_bits(p, 200, 3, 9301);
  expect_same_bits(test::small_params(2, 2048), 7, 8, 9302);
}

}  // namespace
}  // namespace mhc
