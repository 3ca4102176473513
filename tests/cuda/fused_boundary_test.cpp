// The fused boundary (sm90_boundary.cuh: the previous site's post, the next input path and this
// site's coefficients in one launch) against the float64 reference and against the unfused
// launches it replaces (post + next input, then the coefficient launch): x bitwise the post
// kernel's, layer_input within one bf16 ulp of the unfused path's (another order of the norm's
// sum), coefficients and layer_input within the TF32 tier of the reference computed from that x.
// Fresh random inputs, outputs poisoned. Skips without a GPU or without the sm_90a kernels.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "boundary_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_plan.hpp"

namespace mhc {
namespace {

using test::FoldCase;
using test::FoldOutputs;
using test::to_host;

void run_boundary(FoldCase& k, FoldOutputs& out, bool fused, cuda::SiteWorkspace& ws,
                  bool with_norm = true, int splits = 0, int stage_columns = 0,
                  int cluster_epilogue = -1, int rows = 0) {
  LaunchOverrides t = test::boundary_tuning(fused, splits, stage_columns, rows);
  if (cluster_epilogue >= 0) t.cluster_epilogue = cluster_epilogue == 1;  // -1: the plan's
  ASSERT_EQ(test::tuning(k.p, k.m, t).fused_boundary, fused);
  test::run_boundary_with(k, out, t, ws, with_norm);
}

void check_boundary(const MhcParams& p, int64_t m, uint64_t seed, double amplitude = 1.0,
                    bool with_norm = true, int splits = 0, int stage_columns = 0, int rows = 0) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  FoldCase k(p, m, seed, amplitude);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  FoldOutputs want(p, m), got(p, m);
  run_boundary(k, want, false, ws, with_norm);
  run_boundary(k, got, true, ws, with_norm, splits, stage_columns, -1, rows);
  const std::string label =
      test::case_name(p, m, amplitude) + (with_norm ? "" : " plain collapse") +
      (splits > 0 ? " boundary_splits=" + std::to_string(splits) : "") +
      (stage_columns > 0 ? " stage_columns=" + std::to_string(stage_columns) : "") +
      (rows > 0 ? " rows=" + std::to_string(rows) : "");
  test::expect_boundary_agrees(got, want, label);
  test::expect_boundary_matches_reference(k, got, with_norm, label);
}

// Every model shape (n = 2 and 4, C = 4096 / 5120 / 7168) at each token count of `tokens`, with
// the forced stage columns and tile rows (0: the rules).
void check_model_shapes(std::initializer_list<int64_t> tokens, uint64_t& seed,
                        int stage_columns = 0, int rows = 0) {
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      for (int64_t m : tokens) {
        check_boundary(test::small_params(n, hidden), m, ++seed, 1.0, true, 0, stage_columns, rows);
      }
    }
  }
}

// Small and large amplitudes and the plain collapse (no norm weight) at 200 tokens of p.
void check_amplitudes(const MhcParams& p, uint64_t& seed, int stage_columns = 0, int rows = 0) {
  check_boundary(p, 200, ++seed, 1e-3, true, 0, stage_columns, rows);
  check_boundary(p, 200, ++seed, 1e2, true, 0, stage_columns, rows);
  check_boundary(p, 200, ++seed, 1.0, false, 0, stage_columns, rows);
}

// What every forced stage shape runs against the reference: every model shape at `model_tokens`,
// the shape's tile edges at C = 5120 (`edges`, on the rule's split count), forced split counts
// over 300 tokens, the amplitudes, and n = 2 at C = 7168 with the plain collapse.
void check_stage_shape(uint64_t& seed, int stage_columns, int rows,
                       std::initializer_list<int64_t> model_tokens,
                       std::initializer_list<int64_t> edges, std::initializer_list<int> splits) {
  check_model_shapes(model_tokens, seed, stage_columns, rows);
  const MhcParams p = test::small_params(4, 5120);
  for (int64_t m : edges) check_boundary(p, m, ++seed, 1.0, true, 0, stage_columns, rows);
  for (int s : splits) check_boundary(p, 300, ++seed, 1.0, true, s, stage_columns, rows);
  check_amplitudes(p, seed, stage_columns, rows);
  check_boundary(test::small_params(2, 7168), 140, ++seed, 1.0, false, 1, stage_columns, rows);
}

TEST(CudaFusedBoundary, MatchesTheReferenceAtEveryModelShape) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7000;
  check_model_shapes({1, 17, 129, 300}, seed);
}

// Token counts on both sides of every tile edge (128) and of the split rule's steps (the splits
// fall from 8 to 1 as the tiles fill the GPU), odd counts, one tile past 4096.
TEST(CudaFusedBoundary, TokenCountsAcrossTilesAndSplits) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const MhcParams p = test::small_params(4, 5120);
  uint64_t seed = 7100;
  for (int64_t m : {2, 7, 8, 9, 15, 16, 31, 33, 64, 127, 128, 1000, 2048, 4097}) {
    check_boundary(p, m, ++seed);
  }
}

TEST(CudaFusedBoundary, AmplitudesAndThePlainCollapse) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const MhcParams p = test::small_params(4, 7168);
  check_boundary(p, 200, 7200, 1e-3);
  check_boundary(p, 200, 7201, 1e2);
  check_boundary(p, 200, 7202, 1.0, false);
  check_boundary(test::small_params(2, 4096), 45, 7203, 1.0, false);
}

// Every split count the tuning can force, including one split (no cluster, totals kept in shared
// memory) and counts that leave the last split shorter (80 stages of C=5120 over 3 or 7).
TEST(CudaFusedBoundary, ForcedSplitCounts) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7250;
  for (int splits : {1, 2, 3, 7, 8}) {
    check_boundary(test::small_params(4, 5120), 300, ++seed, 1.0, true, splits);
  }
  check_boundary(test::small_params(2, 7168), 140, ++seed, 1.0, false, 1);
}

// The largest C this device runs (the row kernels' limit, 12288 on an H200's sm_90a image) through
// the fused boundary in 1 and 3 splits: one split's table of interleaved stages holds every C the
// device runs; C = 16384 + 64 would overflow it and is not eligible.
TEST(CudaFusedBoundary, LargestHiddenSizeTheDeviceRuns) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const int hidden = test::device_plan().row_kernels_max_hidden;
  ASSERT_GE(hidden, 7168);
  EXPECT_TRUE(boundary_fits_table(1, hidden / 64)) << hidden;  // 64-column stages
  uint64_t seed = 7270;
  for (int splits : {1, 3})
    check_boundary(test::small_params(4, hidden), 130, ++seed, 1.0, true, splits);
  // Above the device's limit, C = 16384 + 64 is refused by the resolution itself; the kernel's
  // own table would not hold it either.
  EXPECT_FALSE(boundary_takes_hidden(16384 + 64));
}

// The same inputs twice through the fused launch: the same bits (fixed orders, no atomics in the
// sums).
void expect_bitwise_run_to_run(const MhcParams& p, int64_t m, uint64_t seed, int stage_columns) {
  FoldCase k(p, m, seed);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  FoldOutputs a(p, m), b(p, m);
  run_boundary(k, a, true, ws, true, 0, stage_columns);
  run_boundary(k, b, true, ws, true, 0, stage_columns);
  const std::string label = "stage_columns=" + std::to_string(stage_columns);
  EXPECT_TRUE(test::same_bits(to_host(a.x), to_host(b.x))) << label;
  EXPECT_TRUE(test::same_bits(to_host(a.layer_input), to_host(b.layer_input))) << label;
  EXPECT_TRUE(test::same_bits(to_host(a.coef.comb), to_host(b.coef.comb))) << label;
  EXPECT_TRUE(test::same_bits(to_host(a.coef.mixes), to_host(b.coef.mixes))) << label;
}

// The cluster epilogue (the tile's CTAs reduce their partials through distributed shared memory,
// the plan's default) and the workspace path give the same bits, and only the latter writes split
// partials into the workspace: every model shape, forced split counts, a partial tile, both
// stage widths.
TEST(CudaFusedBoundary, ClusterEpilogueGivesTheWorkspacePathsBits) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7600;
  auto check = [&](const MhcParams& p, int64_t m, int splits, int stage_columns) {
    FoldCase k(p, m, ++seed);
    FoldOutputs a(p, m), b(p, m);
    cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
    const size_t watched = size_t(std::min<int64_t>(ws.partial_capacity(), 4096));
    std::vector<float> partials(watched);
    auto workspace_written = [&] {
      MHC_CUDA_CHECK(cudaMemcpy(partials.data(), ws.partials(), watched * sizeof(float),
                                cudaMemcpyDeviceToHost));
      for (float v : partials) {
        if (!std::isnan(v)) return true;
      }
      return false;
    };
    MHC_CUDA_CHECK(cudaMemset(ws.partials(), 0xFF, watched * sizeof(float)));
    run_boundary(k, a, true, ws, true, splits, stage_columns, 0);
    EXPECT_TRUE(workspace_written()) << "the workspace path wrote no partials";
    MHC_CUDA_CHECK(cudaMemset(ws.partials(), 0xFF, watched * sizeof(float)));
    run_boundary(k, b, true, ws, true, splits, stage_columns, 1);
    EXPECT_FALSE(workspace_written()) << "the cluster epilogue wrote partials";
    const std::string label = test::case_name(p, m, 1.0) + " splits=" + std::to_string(splits) +
                              " columns=" + std::to_string(stage_columns);
    EXPECT_TRUE(test::same_bits(to_host(a.x), to_host(b.x))) << label << " x";
    EXPECT_TRUE(test::same_bits(to_host(a.layer_input), to_host(b.layer_input))) << label;
    EXPECT_TRUE(test::same_bits(to_host(a.coef.pre), to_host(b.coef.pre))) << label << " pre";
    EXPECT_TRUE(test::same_bits(to_host(a.coef.comb), to_host(b.coef.comb))) << label << " comb";
    EXPECT_TRUE(test::same_bits(to_host(a.coef.mixes), to_host(b.coef.mixes))) << label;
  };
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) check(test::small_params(n, hidden), 129, 0, 0);
  }
  for (int splits : {2, 3, 5, 8}) check(test::small_params(4, 5120), 300, splits, 0);
  check(test::small_params(4, 5120), 1, 8, 0);
  check(test::small_params(4, 5120), 200, 3, 32);
}

// Small, a partial tile, both stream counts: for compute-sanitizer (device-validate runs
// Sanitize*).
// Both stream counts, the split rule's count and one split, 130 tokens (a partial tile) in tiles
// of `rows`.
void sanitize_tiles(int rows, uint64_t seed) {
  for (int splits : {0, 1}) {
    for (int n : test::built_streams()) {
      const MhcParams p = test::small_params(n, 4096);
      FoldCase k(p, 130, seed + uint64_t(n + splits));
      cuda::SiteWorkspace ws(p, 130, max_prenorm_splits(p));
      FoldOutputs out(p, 130);
      run_boundary(k, out, true, ws, true, splits, 0, -1, rows);
    }
  }
}

void sanitize_case(int splits, int stage_columns, uint64_t seed) {
  for (int n : test::built_streams()) {
    const MhcParams p = test::small_params(n, 4096);
    FoldCase k(p, 130, seed + uint64_t(n));
    cuda::SiteWorkspace ws(p, 130, max_prenorm_splits(p));
    FoldOutputs out(p, 130);
    run_boundary(k, out, true, ws, true, splits, stage_columns);
  }
}

// 32-column stages (64-byte swizzle, 4 stages in the ring at n = 4): every model shape, tile
// edges, forced split counts over 160 stages of C=5120, amplitudes, the plain collapse, bitwise
// run to run. Its own test (and dev/scripts/device-validate.sh's own step) until it has run on a
// GPU.
TEST(CudaFusedBoundary, ThirtyTwoColumnStages) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7500;
  check_stage_shape(seed, 32, 0, {1, 129, 300}, {2, 127, 128, 1000, 4097}, {1, 3, 7, 8});
  expect_bitwise_run_to_run(test::small_params(4, 5120), 1000, ++seed, 32);
}

// The wide stages (32-token tiles of 128-column stages, each row's 256 bytes as two 128-byte
// lines of one 3D box; four column warps per 16 rows): every model shape, both sides of the
// 32-row tile edges, forced split counts over C=5120's 40 stages, amplitudes, the plain
// collapse, bitwise run to run; and the forcing rules (128 columns and 32 rows go together).
TEST(CudaFusedBoundary, WideStages) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7900;
  check_stage_shape(seed, 128, 32, {1, 33, 300}, {2, 31, 32, 63, 65, 1000, 4097}, {1, 3, 7, 8});
  const MhcParams p = test::small_params(4, 5120);
  expect_bitwise_run_to_run(p, 1000, ++seed, 128);
  cuda::SiteWorkspace ws(p, 64, max_prenorm_splits(p));
  const auto tile = [&](const MhcParams& shape, const LaunchOverrides& o) {
    return cuda::boundary_launch_tile(shape, 64, test::tuning(shape, 64, o), ws);
  };
  const BoundaryTile forced = tile(p, test::boundary_tuning(true, 3, 128));
  EXPECT_EQ(forced.rows, 32);  // 128-column stages take 32-row tiles
  EXPECT_EQ(forced.splits, 3);
  EXPECT_THROW(tile(p, test::boundary_tuning(true, 0, 128, 64)), Error);
  EXPECT_THROW(tile(p, test::boundary_tuning(true, 0, 64, 32)), Error);
  EXPECT_THROW(tile(test::small_params(4, 4160), test::boundary_tuning(true, 0, 128)), Error)
      << "C = 4160 is no whole number of 128-column stages";
}

// 64-token tiles (4 consumer warps, 3 stages in the ring at n = 4): every model shape, both sides
// of the 64-row tile edges, forced split counts, amplitudes and the plain collapse, against the
// reference and the unfused launches; and bitwise the 128-row tiles' results at the same split
// count (a row's sums do not depend on its tile's height: each warp owns 16 rows, the splits'
// orders are the columns').
TEST(CudaFusedBoundary, HalfTiles) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  uint64_t seed = 7700;
  check_stage_shape(seed, 0, 64, {1, 65, 300}, {16, 63, 64, 127, 129, 1000, 4097}, {1, 3, 8});
  const MhcParams p = test::small_params(4, 5120);
  for (int splits : {1, 2, 5}) {
    for (int64_t m : {97, 1000}) {
      FoldCase k(p, m, ++seed);
      cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
      FoldOutputs whole(p, m), half(p, m);
      run_boundary(k, whole, true, ws, true, splits, 0, -1, 128);
      run_boundary(k, half, true, ws, true, splits, 0, -1, 64);
      const std::string label = test::case_name(p, m, 1.0) + " splits=" + std::to_string(splits);
      EXPECT_TRUE(test::same_bits(to_host(whole.x), to_host(half.x))) << label << " x";
      EXPECT_TRUE(test::same_bits(to_host(whole.layer_input), to_host(half.layer_input))) << label;
      EXPECT_TRUE(test::same_bits(to_host(whole.coef.pre), to_host(half.coef.pre))) << label;
      EXPECT_TRUE(test::same_bits(to_host(whole.coef.post), to_host(half.coef.post))) << label;
      EXPECT_TRUE(test::same_bits(to_host(whole.coef.comb), to_host(half.coef.comb))) << label;
      EXPECT_TRUE(test::same_bits(to_host(whole.coef.mixes), to_host(half.coef.mixes))) << label;
    }
  }
  cuda::SiteWorkspace ws(p, 64, max_prenorm_splits(p));
  // What the launches above took: the forced fields, the rules for the rest.
  const auto tile = [&](const LaunchOverrides& o) {
    return cuda::boundary_launch_tile(p, 64, test::tuning(p, 64, o), ws);
  };
  const BoundaryTile forced = tile(test::boundary_tuning(true, 3, 0, 64));
  EXPECT_EQ(forced.rows, 64);
  EXPECT_EQ(forced.splits, 3);
  EXPECT_EQ(tile(test::boundary_tuning(true, 5)).rows, 128);
  const BoundaryTile ruled = tile(test::boundary_tuning(true));
  EXPECT_TRUE(ruled.rows == 64 || ruled.rows == 128) << ruled.rows;
  EXPECT_TRUE(ruled.splits >= 1 && ruled.splits <= 8) << ruled.splits;
  EXPECT_THROW(tile(test::boundary_tuning(true, 0, 32, 64)), Error);
  FoldCase k(p, 64, ++seed);
  FoldOutputs out(p, 64);
  EXPECT_THROW(run_boundary(k, out, true, ws, true, 0, 32, -1, 64), Error) << "64 rows x 32 cols";
  EXPECT_THROW(run_boundary(k, out, true, ws, true, 0, 0, -1, 96), Error) << "96 rows";
}

// The same inputs twice: the same bits (fixed orders, no atomics in the sums), and zero tokens
// writes nothing.
TEST(CudaFusedBoundary, BitwiseRunToRunAndZeroTokens) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const MhcParams p = test::small_params(4, 5120);
  expect_bitwise_run_to_run(p, 1000, 7300, 0);
  cuda::SiteWorkspace ws(p, 1000, max_prenorm_splits(p));

  FoldOutputs none(p, 1);
  FoldCase one(p, 1, 7301);
  const cuda::InputPathBuffers input{one.pre_mix.get(), one.w.norm_weight.get(),
                                     none.layer_input.get()};
  const cuda::PreviousPost previous{one.x_prev.get(), one.prev_post.get(), one.prev_comb.get(),
                                    one.f.get(), none.x.get()};
  cuda::prenorm_coefficients(p, 0, none.coef.buffers(none.x, one.w),
                             test::tuning(p, 0, test::boundary_tuning(true)), ws, nullptr, &input,
                             &previous);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  for (Bf16 v : to_host(none.x)) ASSERT_EQ(v.bits, 0xFFFF) << "zero tokens wrote x";
}

// Where a launch is resolved to the fused boundary: never the fp32 projection, batch-invariant
// mode, or a launch that asks for the unfused ones; forced, wherever the image has the kernel.
// (The plan's rule itself, by token count, C and n: tests/core.)
TEST(CudaFusedBoundary, Eligibility) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const LaunchOverrides t = test::boundary_tuning(true);
  const bool image = test::device_plan().tma128_available;
  EXPECT_EQ(test::tuning(p, 100, t).fused_boundary, image);
  LaunchOverrides fp32 = t;
  fp32.projection = Projection::fp32;
  EXPECT_FALSE(test::tuning(p, 100, fp32).fused_boundary);
  EXPECT_FALSE(test::invariant_tuning(p, 100, t).fused_boundary);
  EXPECT_FALSE(test::tuning(p, 100, test::boundary_tuning(false)).fused_boundary);
}

// The forced form (the benchmarks' "fused boundary" rows) sets the plan's whole rule aside at
// every shape and size; without it the plan's rule decides (C, n and the token count).
TEST(CudaFusedBoundary, ForcingSetsThePlansRuleAside) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  const bool image = plan.tma128_available;
  const LaunchOverrides forced = test::boundary_tuning(true);
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      for (int64_t m : {1, 129, 4096, 4097}) {
        EXPECT_EQ(test::tuning(p, m, forced).fused_boundary, image) << n << " " << hidden;
        EXPECT_EQ(test::tuning(p, m).fused_boundary, image && plan.fuses_boundary(hidden, n, m))
            << n << " " << hidden << " " << m;
      }
    }
  }
  LaunchOverrides fp32 = forced;
  fp32.projection = Projection::fp32;
  EXPECT_FALSE(test::tuning(test::small_params(4, 5120), 1, fp32).fused_boundary);
}

// The split rule: one wave of tiles x splits where it can, at most a cluster of 8, whole stages,
// and never an empty split (the last split starts inside C).
TEST(SanitizeFusedBoundary, PartialTileAndClusters) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  sanitize_case(0, 0, 7400);
}

TEST(SanitizeFusedBoundary, HalfTiles) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  sanitize_tiles(64, 7420);
}

// 128-row tiles: the producer warpgroup and its register handover (setmaxnreg).
TEST(SanitizeFusedBoundary, WholeTiles) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  sanitize_tiles(128, 7430);
}

TEST(SanitizeFusedBoundary, ThirtyTwoColumnStages) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  sanitize_case(3, 32, 7410);
}

// The wide stages: 3D boxes, four column warps and their partials' handover, the producer
// warpgroup; one split (no cluster) and three (a cluster).
TEST(SanitizeFusedBoundary, WideStages) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  sanitize_case(0, 128, 7440);
  sanitize_case(3, 128, 7450);
}

}  // namespace
}  // namespace mhc
