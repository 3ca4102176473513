// The 16-row kernel's flagged partials (decode_flagged.cuh): a CTA per row polls the splits'
// (value, flag) pairs instead of the arrival counter and the tile's last CTA. It must give the
// counter's bits at every shape and token count it takes, leave no pair set for the next launch
// (a workspace reused with other inputs, other token counts, other kernels' plain partials and
// graph replays), and really run where it fits: a flagged launch clears every pair it read, so a
// fresh workspace stays all zero after one, while the counter's path leaves its partials there.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::DeviceCoefficients;
using test::DeviceWeights;
using test::to_device;

using Outputs = test::HostCoefficients;

// The 16-row kernel with flagged partials 1 (where they fit), 0 (never), 2 (outside the split
// loop) or -1 (the device plan's rule), on split_ctas CTAs per tile (0: one per split), with
// `splits` splits (0: the plan's).
LaunchOverrides tuning(int flagged, int split_ctas = 0, int splits = 0) {
  LaunchOverrides o = test::forced(splits, 16);
  o.split_ctas = split_ctas;
  if (flagged == 0) o.flagged_partials = FlaggedPartials::never;
  if (flagged == 1) o.flagged_partials = FlaggedPartials::always;
  if (flagged == 2) o.flagged_partials = FlaggedPartials::outside_split_loop;
  return o;
}

Outputs run_on(cuda::SiteWorkspace& ws, const MhcParams& p, int64_t m, const test::SiteCase& c,
               LaunchOverrides o, Projection projection = Projection::tf32) {
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, m);  // poisoned
  o.projection = projection;
  cuda::prenorm_coefficients(p, m, out.buffers(x, w), test::tuning(p, m, o), ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  return test::download_coefficients(out);
}

Outputs run_fresh(const MhcParams& p, int64_t m, const test::SiteCase& c, const LaunchOverrides& t,
                  Projection projection = Projection::tf32) {
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  return run_on(ws, p, m, c, t, projection);
}

void expect_same(const Outputs& want, const Outputs& got, const std::string& label) {
  test::expect_same_coefficients(want, got, label);
}

// Whether the workspace's partial floats are all zero bits.
bool partials_all_zero(const cuda::SiteWorkspace& ws) {
  std::vector<float> host(size_t(ws.partial_capacity()));
  MHC_CUDA_CHECK(
      cudaMemcpy(host.data(), ws.partials(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return std::all_of(host.begin(), host.end(), [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits == 0;
  });
}

// Whether a launch with `t` on a fresh workspace took the flagged path (it alone leaves the
// partials zero), checking its bits against the counter's on the way.
bool runs_flagged(const MhcParams& p, int64_t m, int split_ctas, uint64_t seed, int flagged = 1,
                  int splits = 0) {
  const test::SiteCase c = test::random_site_case(p, m, seed, 1.0);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  const Outputs got = run_on(ws, p, m, c, tuning(flagged, split_ctas, splits));
  expect_same(run_fresh(p, m, c, tuning(false, split_ctas, splits)), got,
              test::case_name(p, m, 1.0) + " split_ctas=" + std::to_string(split_ctas) +
                  " splits=" + std::to_string(splits));
  return partials_all_zero(ws);
}

// Every model shape, 1 to 64 tokens (one to four tiles, partial tiles, every lane count of the
// reduction's order: 16, 8, 4, 2 and 1 lanes per float4), against the counter's path; the split
// loop where its CTAs cover the rows; amplitudes far from 1; the fp32 projection.
TEST(CudaFlaggedPartials, SameBitsAsTheArrivalCounter) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 12000;
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      for (int64_t m : {1, 2, 3, 5, 6, 9, 11, 16, 17, 33, 64}) {
        const double amplitude = (seed % 3 == 0) ? 1e-3 : (seed % 3 == 1) ? 1.0 : 1e2;
        const test::SiteCase c = test::random_site_case(p, m, ++seed, amplitude);
        expect_same(run_fresh(p, m, c, tuning(false)), run_fresh(p, m, c, tuning(true)),
                    test::case_name(p, m, amplitude));
      }
      for (int64_t m : {1, 7, 8}) {
        const test::SiteCase c = test::random_site_case(p, m, ++seed, 1.0);
        expect_same(run_fresh(p, m, c, tuning(false)), run_fresh(p, m, c, tuning(true, 8)),
                    test::case_name(p, m, 1.0) + " split loop");
      }
    }
  }
  const MhcParams p = test::small_params(4, 5120);
  const test::SiteCase c = test::random_site_case(p, 13, ++seed, 1.0);
  expect_same(run_fresh(p, 13, c, tuning(false), Projection::fp32),
              run_fresh(p, 13, c, tuning(true), Projection::fp32), "fp32 projection");
}

// Where it runs: one CTA per split up to four tiles; the split loop only while its CTAs cover a
// tile's rows; not past four tiles. (And the check itself can fail: the counter's path leaves
// partials.)
TEST(CudaFlaggedPartials, RunsWhereItFits) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  EXPECT_TRUE(runs_flagged(p, 1, 0, 12100));
  EXPECT_TRUE(runs_flagged(p, 16, 0, 12101));
  EXPECT_TRUE(runs_flagged(p, 64, 0, 12102));
  EXPECT_TRUE(runs_flagged(p, 8, 8, 12103));
  EXPECT_FALSE(runs_flagged(p, 9, 8, 12104));
  EXPECT_FALSE(runs_flagged(p, 65, 0, 12105));
  // The default tuning follows the device's plan (kernel config flagged_partials).
  const int64_t plan_limit = test::device_plan().flagged_partials_max_tokens;
  EXPECT_EQ(runs_flagged(p, 16, 0, 12107, -1), 16 <= plan_limit);
  EXPECT_EQ(runs_flagged(p, 8, 0, 12108, -1), 8 <= plan_limit);
  // 2: one CTA per split only; the plan's default keeps the split loop (the overlap's side
  // launch) on the counter unless the kernel config asks for flagged partials.
  EXPECT_TRUE(runs_flagged(p, 8, 0, 12109, 2));
  EXPECT_FALSE(runs_flagged(p, 8, 8, 12110, 2));
  EXPECT_EQ(runs_flagged(p, 1, 8, 12111, -1),
            test::device_plan().flagged_partials_split_loop && 1 <= plan_limit);
  const test::SiteCase c = test::random_site_case(p, 4, 12106, 1.0);
  cuda::SiteWorkspace ws(p, 4, max_prenorm_splits(p));
  run_on(ws, p, 4, c, tuning(false));
  EXPECT_FALSE(partials_all_zero(ws));
}

// More splits than 40, as the plan gives C = 7168 at n = 4 (56), up to what the reducer holds
// (kFlaggedMaxSplits = kPrenormDecodeSplitLimit): flagged and with the counter's bits; more (80,
// which the launcher's rebalancing keeps above 64) take the counter. Also on a workspace of the
// Python package's size (partials for 40 splits per token), where they fit. (The launcher
// rebalances a count so that no split is empty: 48 stays above 40 at both sizes.)
TEST(CudaFlaggedPartials, SplitCountsAboveForty) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 12300;
  for (int hidden : {5120, 7168}) {
    const MhcParams p = test::small_params(4, hidden);
    for (int splits : {48, 56, kPrenormDecodeSplitLimit}) {
      for (int64_t m : {1, 9, 16, 33}) EXPECT_TRUE(runs_flagged(p, m, 0, ++seed, 1, splits));
    }
    EXPECT_FALSE(runs_flagged(p, 1, 0, ++seed, 1, 80));
    EXPECT_TRUE(runs_flagged(p, 1, 0, ++seed, -1)) << "the plan's count runs flagged";
  }
  const MhcParams p = test::small_params(4, 7168);
  const test::SiteCase c = test::random_site_case(p, 16, ++seed, 1.0);
  const WorkspaceLayout layout = workspace_layout(p, 16);
  cuda::DeviceBuffer<uint8_t> memory(size_t(layout.bytes));
  memory.fill_bytes(0);
  cuda::SiteWorkspace ws(p, memory.get(), layout.bytes);
  const Outputs got = run_on(ws, p, 16, c, tuning(1, 0, 56));
  expect_same(run_fresh(p, 16, c, tuning(false, 0, 56)), got, "the Python workspace's size");
  EXPECT_TRUE(partials_all_zero(ws));
}

// One workspace for a sequence of launches with fresh inputs and changing token counts, between
// them the counter's path and the 64-row kernel (plain partials where the pairs lie) and a fill
// of large floats: every flagged launch still gives the bits of a fresh counter run.
TEST(CudaFlaggedPartials, ReusedWorkspace) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  cuda::SiteWorkspace ws(p, 256, max_prenorm_splits(p));
  uint64_t seed = 12200;
  const int64_t counts[] = {16, 1, 7, 16, 3, 64, 2, 33, 1};
  for (size_t i = 0; i < std::size(counts); ++i) {
    const int64_t m = counts[i];
    if (i % 3 == 1) {
      const test::SiteCase other = test::random_site_case(p, 137, ++seed, 1.0);
      run_on(ws, p, 137, other, test::forced(0, 64));
    } else if (i % 3 == 2) {
      MHC_CUDA_CHECK(
          cudaMemset(ws.partials(), 0x7f, size_t(ws.partial_capacity()) * sizeof(float)));
    } else {
      run_on(ws, p, m, test::random_site_case(p, m, ++seed, 1.0), tuning(false));
    }
    const test::SiteCase c = test::random_site_case(p, m, ++seed, 1.0);
    expect_same(run_fresh(p, m, c, tuning(false)), run_on(ws, p, m, c, tuning(true)),
                "launch " + std::to_string(i) + " " + test::case_name(p, m, 1.0));
  }
}

// Replays of one captured flagged launch with new x between them: each replay's bits are those of
// a fresh counter run on that x (a pair left set by a replay would hand the next one stale values).
TEST(CudaFlaggedPartials, GraphReplays) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 16;
  test::SiteCase c = test::random_site_case(p, m, 12300, 1.0);
  const DeviceWeights w(c.weights);
  auto x = to_device(c.x);
  const DeviceCoefficients out(p, m);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  cudaStream_t stream = nullptr;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cuda::prenorm_coefficients(p, m, out.buffers(x, w), test::tuning(p, m, tuning(true)), ws, stream);
  MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  MHC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 6; ++replay) {
    const test::SiteCase fresh = test::random_site_case(p, m, 12301 + replay, 1.0);
    c.x = fresh.x;
    x.upload(c.x.data(), c.x.size());
    MHC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream));
    const Outputs got = test::download_coefficients(out);
    expect_same(run_fresh(p, m, c, tuning(false)), got, "replay " + std::to_string(replay));
  }
  MHC_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  MHC_CUDA_CHECK(cudaStreamDestroy(stream));
}

// Small, for compute-sanitizer (device-validate runs Sanitize*): the polling and the clearing.
TEST(SanitizeFlaggedPartials, SmallTiles) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 1024);
  for (int64_t m : {1, 5, 17}) {
    const test::SiteCase c = test::random_site_case(p, m, 12400 + m, 1.0);
    expect_same(run_fresh(p, m, c, tuning(false)), run_fresh(p, m, c, tuning(true)),
                test::case_name(p, m, 1.0));
  }
}

}  // namespace
}  // namespace mhc
