// The fused boundary's launch-shape rules on sm_90 (mhc/core/sm90_boundary_plan.hpp), on made-up
// and measured cluster capacities: no GPU needed.
#include "mhc/core/sm90_boundary_plan.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "mhc/core/error.hpp"

namespace mhc {
namespace {

MhcParams params(int n, int hidden) {
  MhcParams p;
  p.n = n;
  p.hidden = hidden;
  p.layers = 1;
  return p;
}

// What an H200 holds at once of the n = 4 kernel (cudaOccupancyMaxActiveClusters, measured):
// clusters of 1..8 CTAs.
constexpr ClusterCapacity kH200 = {132, 66, 39, 30, 22, 17, 15, 15};

TEST(Sm90BoundaryPlan, SplitCounts) {
  const MhcParams p = params(4, 5120);
  const ClusterCapacity& h200 = kH200;
  // 4096 tokens, 32 tiles: 3 splits (one wave of 27 stages) beats 4 (two waves of 20, measured
  // 311 µs against 252) and 8 (three waves of 10).
  EXPECT_EQ(boundary_splits(p, 4096, h200), 3);
  EXPECT_EQ(boundary_splits(p, 2048, h200), 6) << "16 tiles: one wave of 6-CTA clusters";
  EXPECT_EQ(boundary_splits(p, 8192, h200), 2);
  // 16384 tokens, 128 tiles: one wave of one CTA per tile ties two waves of 2-CTA clusters; the
  // tie goes to 2 (measured 580 µs against 623 per site in a stack graph).
  EXPECT_EQ(boundary_splits(p, 16384, h200), 2);
  EXPECT_EQ(boundary_splits(p, 16384, h200, 1), 1) << "workspace room for one split";
  EXPECT_EQ(boundary_splits(p, 1, h200), 8);
  EXPECT_EQ(boundary_splits(p, 1, h200, 3), 3) << "workspace room";
  EXPECT_EQ(boundary_splits(p, 1, h200, 0), 1);
  // 32-column stages: 160 at C=5120; 3 splits (one wave of 54 stages) ties 6 (two waves of 27)
  // and the tie goes to fewer.
  EXPECT_EQ(boundary_splits(p, 4096, h200, 8, 32), 3);
  EXPECT_EQ(boundary_splits(p, 1, h200, 8, 32), 8);
  EXPECT_THROW(boundary_splits(p, 1, h200, 8, 48), Error) << "64 or 32 columns only";
  // The rule only ever needs capacities up to the cap; a device holding one cluster of each
  // size still gets a valid count.
  const ClusterCapacity tiny = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(boundary_splits(p, 4096, tiny), 8) << "fewest stages per CTA when waves tie";
  for (int hidden : {64, 192, 4096, 5120, 7168}) {
    const int stages = hidden / 64;
    for (int64_t m : {1, 128, 129, 2048, 4096, 8192}) {
      const int splits = boundary_splits(params(4, hidden), m, h200);
      ASSERT_GE(splits, 1);
      ASSERT_LE(splits, 8);
      const int per_split = (stages + splits - 1) / splits;
      EXPECT_LT((splits - 1) * per_split, stages) << hidden << " " << m << ": an empty split";
    }
  }
  // 64-row tiles: twice the tiles. 4096 tokens: 64 tiles, one wave of 2-CTA clusters.
  EXPECT_EQ(boundary_splits(p, 4096, h200, 8, 64, 64), 2);
  EXPECT_EQ(boundary_splits(p, 2048, h200, 8, 64, 64), 3) << "32 tiles: 39 3-CTA clusters";
  EXPECT_THROW(boundary_splits(p, 1, h200, 8, 64, 96), Error) << "128 or 64 rows only";
}

TEST(Sm90BoundaryPlan, WideStagesWhereTheirTilesFillTheSms) {
  const MhcParams p = params(4, 5120);
  // 2048 tokens on 2 splits (64 tiles), one split where the tiles fill 90% of their waves'
  // slots: 4096 / 8192 / 16384 / 32768 (128 / 256 / 512 / 1024 tiles in 1 / 2 / 4 / 8 waves of
  // 132, the last one 128 / 124 / 116 / 100 full) and 12288 (384 in 3); not 1024 (32 tiles),
  // 3072 (96: one split leaves 36 SMs idle, two make 1.5 waves), 6144 (192 of 264 slots), 10240
  // (320 of 396), 15000 (469 of 528), nor n = 2 or a C that is no whole number of 128-column
  // stages.
  EXPECT_EQ(wide_boundary_splits(p, 2048, kH200), 2);
  for (int64_t m : {4096, 8192, 12288, 16384, 32768}) {
    EXPECT_EQ(wide_boundary_splits(p, m, kH200), 1) << m;
  }
  for (int64_t m : {1024, 2047, 3072, 6144, 10240, 15000}) {
    EXPECT_EQ(wide_boundary_splits(p, m, kH200), 0) << m;
  }
  EXPECT_EQ(wide_boundary_splits(params(2, 5120), 4096, kH200), 0);
  EXPECT_EQ(wide_boundary_splits(params(4, 4160), 4096, kH200), 0);
  // Forced wide stages take the general split rule: 128 tiles of 40 stages, one wave of one CTA
  // each ties two waves of pairs, and the tie goes to 2.
  EXPECT_EQ(boundary_splits(p, 4096, kH200, 8, kBoundaryWideColumns, kBoundaryWideTileRows), 2);
  EXPECT_THROW(boundary_splits(p, 4096, kH200, 8, kBoundaryWideColumns, 64), Error)
      << "128 columns on 32 rows only";
  EXPECT_THROW(boundary_splits(p, 4096, kH200, 8, 64, kBoundaryWideTileRows), Error);
}

TEST(Sm90BoundaryPlan, TileHeight) {
  const MhcParams p = params(4, 5120);
  const ClusterCapacity& h200 = kH200;
  // The tile: stage bytes per CTA, waves x stages x (n x and one F box + hc_fn's 24 KB): 104 KB
  // a 128-row stage, 64 KB a 64-row one.
  auto tile = [&](const MhcParams& q, int64_t m, int max_splits = 8) {
    const BoundaryTile t = boundary_tile(q, m, h200, h200, max_splits);
    return std::array<int, 2>{t.rows, t.splits};
  };
  // 4096 tokens: 128-row tiles leave 36 SMs idle (27 x 104 KB); the halves fill 128 (40 x 64 KB).
  // Measured per site in a stack graph 148.8 against 157.4 µs at C = 5120, 205.9 against 223.6 at
  // C = 7168 (docs/decisions.md, "The fused boundary at large batches").
  EXPECT_EQ(tile(p, 4096), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(params(4, 7168), 4096), (std::array<int, 2>{64, 2}));
  // 6144 tokens: 48 x 2 on 96 SMs against 7 waves of 8-CTA clusters of the halves (measured
  // 226 against 242 µs).
  EXPECT_EQ(tile(p, 6144), (std::array<int, 2>{128, 2}));
  // Below that at n = 4, whole waves first. Where the halves run in one wave on an even split
  // count, the halves: 2881-3712 tokens on 2 splits (45-58 tiles; 3072 tokens measured 111.7-112.5
  // against 113.1-113.6 µs per site for 128 x 4 with its producer warpgroup, 2-5% at C = 4096 and
  // 7168 without it) and 1409-1792 on 4 (1536: 60.0 against 62.3-62.8 for 128 x 8), where the
  // stage bytes say 128.
  EXPECT_EQ(tile(p, 3072), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(p, 2881), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(p, 3712), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(p, 1536), (std::array<int, 2>{64, 4}));
  EXPECT_EQ(tile(p, 1409), (std::array<int, 2>{64, 4}));
  EXPECT_EQ(tile(p, 1792), (std::array<int, 2>{64, 4}));
  // On 5 splits in one wave, the halves: 1089-1408 tokens (18-22 tiles) at every C, where the
  // stage bytes tie within 1% (C = 4096 and 7168 said 128 x 8; measured per site at 1152 tokens
  // 41.6 against 47.9 µs at C = 4096, 68.3 against 73.6 at 7168; at 7168 and 1408, 79.7 against
  // 78.5, a known miss). On 3 the stage bytes decide: 2048 tokens (32 x 3 against 16 x 6 on the
  // same 96 SMs) measured 81.7 against 79.0 µs.
  EXPECT_EQ(tile(p, 1408), (std::array<int, 2>{64, 5}));
  for (int hidden : {4096, 7168}) {
    const MhcParams q = params(4, hidden);
    EXPECT_EQ(tile(q, 1089), (std::array<int, 2>{64, 5})) << hidden;
    EXPECT_EQ(tile(q, 1152), (std::array<int, 2>{64, 5})) << hidden;
    EXPECT_EQ(tile(q, 1408), (std::array<int, 2>{64, 5})) << hidden;
    EXPECT_EQ(tile(q, 1024), (std::array<int, 2>{64, 6})) << hidden;  // 16 tiles: 6, even
  }
  EXPECT_EQ(tile(p, 2048), (std::array<int, 2>{128, 6}));
  // Where the halves need more waves and the 128-row tiles one, the 128-row tiles: 2817-2880
  // tokens, where the halves' rule takes 8 splits (45 tiles: 3 waves of 15 clusters) and the
  // stage bytes said 64; at 2880 tokens 64 x 8 measured 112.7-113.1 against 107.7-107.8 µs.
  EXPECT_EQ(tile(p, 2880), (std::array<int, 2>{128, 4}));
  EXPECT_EQ(tile(p, 2817), (std::array<int, 2>{128, 4}));
  EXPECT_EQ(tile(params(4, 7168), 3072), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(params(2, 5120), 3072)[0], 128) << "n = 2: not measured";
  // From 8192 tokens the 128-row tiles' first wave keeps 128-132 of 132 SMs busy (12288: 15
  // clusters of 8): the halves' 3-stage ring, measured up to 5% faster at C = 4096-7168.
  EXPECT_EQ(tile(p, 8192), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(p, 12288), (std::array<int, 2>{64, 2}));
  EXPECT_EQ(tile(p, 16384), (std::array<int, 2>{64, 2}));
  // n = 2: both rings hold 3 stages; the stage bytes decide.
  EXPECT_EQ(tile(params(2, 5120), 16384)[0], 128);
  EXPECT_EQ(tile(p, 4096, 1), (std::array<int, 2>{64, 1})) << "workspace room for one split";
  // A device of 8 SMs (one cluster of 5-8 at a time): one 128-row tile of 8 splits fills it.
  const ClusterCapacity small = {8, 4, 2, 2, 1, 1, 1, 1};
  EXPECT_EQ(boundary_tile(p, 128, small, small).rows, 64);
  EXPECT_EQ(boundary_tile(p, 128, small, small).splits, 4) << "2 tiles x 4: one wave";
}

TEST(Sm90BoundaryPlan, InterleavedStagesCoverEveryStageOnce) {
  // The splits' interleaved stages (split s of S: s, s + S, ...) cover every stage once, and a
  // split's share fits the kernel's table exactly where boundary_fits_table says so.
  for (int stages : {1, 3, 64, 80, 112, 160, 224, 256, 257}) {
    for (int splits = 1; splits <= 8; ++splits) {
      std::vector<int> seen(stages, 0);
      for (int s = 0; s < splits; ++s) {
        const int count = boundary_split_stages(s, splits, stages);
        for (int i = 0; i < count; ++i) {
          ASSERT_LT(s + i * splits, stages) << stages << " " << splits;
          ++seen[s + i * splits];
        }
      }
      for (int k = 0; k < stages; ++k) EXPECT_EQ(seen[k], 1) << stages << " " << splits << " " << k;
      EXPECT_EQ(boundary_fits_table(splits, stages),
                (stages + splits - 1) / splits <= kBoundaryMaxSplitStages);
    }
  }
  EXPECT_FALSE(boundary_fits_table(1, kBoundaryMaxSplitStages + 1));
  EXPECT_TRUE(boundary_fits_table(2, kBoundaryMaxSplitStages + 1));
}

// The stage and ring sizes the rules weigh are the kernel's (sm90_boundary.cuh asserts its layout
// against them): n x boxes and one F box of tile_rows x columns bf16, hc_fn's 32-column boxes.
TEST(Sm90BoundaryPlan, StageAndRingSizes) {
  EXPECT_EQ(boundary_stage_bytes(4, 64, 128), 104 * 1024);
  EXPECT_EQ(boundary_stage_bytes(4, 64, 64), 64 * 1024);
  EXPECT_EQ(boundary_stage_bytes(2, 64, 128), 52 * 1024);
  EXPECT_EQ(boundary_stage_bytes(4, 32, 128), 52 * 1024);
  EXPECT_EQ(boundary_stage_bytes(4, kBoundaryWideColumns, kBoundaryWideTileRows), 88 * 1024);
  EXPECT_EQ(boundary_ring_stages(4, kBoundaryWideColumns, kBoundaryWideTileRows), 2);
  EXPECT_EQ(boundary_ring_stages(4, 64, 128), 2);
  EXPECT_EQ(boundary_ring_stages(4, 64, 64), 3) << "the halves' deeper ring";
  EXPECT_EQ(boundary_ring_stages(2, 64, 128), 3);
  EXPECT_EQ(boundary_ring_stages(4, 32, 128), 4);
  EXPECT_EQ(boundary_ring_stages(2, 32, 128), 6) << "at most six";
  EXPECT_TRUE(boundary_takes_hidden(5120));
  EXPECT_TRUE(boundary_takes_hidden(64 * kBoundaryMaxSplitStages));
  EXPECT_FALSE(boundary_takes_hidden(64 * kBoundaryMaxSplitStages + 64)) << "one split's table";
  EXPECT_FALSE(boundary_takes_hidden(5120 + 32)) << "whole 64-column stages";
  EXPECT_FALSE(boundary_takes_hidden(0));
}

TEST(Sm90BoundaryPlan, WorkspaceRoom) {
  const MhcParams p = params(4, 5120);
  const int64_t per_split = 4096 * (p.nmix() + 1);  // 32 tiles of 128 rows
  EXPECT_EQ(boundary_workspace_room(p, 4096, 3 * per_split), 3);
  EXPECT_EQ(boundary_workspace_room(p, 4096, 3 * per_split - 1), 2);
  EXPECT_EQ(boundary_workspace_room(p, 4096, 0), 1) << "one split needs no partials";
  EXPECT_EQ(boundary_workspace_room(p, 4096, int64_t(1) << 40), kBoundaryMaxSplits);
  EXPECT_EQ(boundary_workspace_room(p, 1, 2 * 128 * (p.nmix() + 1)), 2) << "a whole 128-row tile";
  EXPECT_EQ(boundary_workspace_room(p, 0, 0), 1);
}

// A device whose capacities tell the kernels apart: the 128-row kernel's are an H200's, the
// 64-row one's a device of 8 SMs, the 32-column one's one cluster of each size, the wide one's
// an H200 with 128 SMs.
constexpr ClusterCapacity kEightSms = {8, 4, 2, 2, 1, 1, 1, 1};
constexpr ClusterCapacity kOneEach = {1, 1, 1, 1, 1, 1, 1, 1};
constexpr ClusterCapacity kWide = {128, 64, 39, 30, 22, 17, 15, 15};
ClusterCapacity distinct_capacity(int, int stage_columns, int tile_rows) {
  if (stage_columns == 32) return kOneEach;
  if (stage_columns == kBoundaryWideColumns) return kWide;
  return tile_rows == kBoundaryHalfTileRows ? kEightSms : kH200;
}
ClusterCapacity no_device(int, int, int) { throw Error("the device was asked"); }

std::array<int, 3> shape_of(const BoundaryLaunchShape& s) {
  return {s.stage_columns, s.tile.rows, s.tile.splits};
}

TEST(Sm90BoundaryPlan, LaunchShapeTakesTheRulesOnTheKernelsCapacities) {
  const MhcParams p = params(4, 5120);
  for (int64_t m : {1, 129, 1024, 2047, 3072}) {
    ASSERT_EQ(wide_boundary_splits(p, m, kWide), 0) << m;
    const BoundaryTile rule = boundary_tile(p, m, kH200, kEightSms, 8);
    EXPECT_EQ(shape_of(boundary_launch_shape(p, m, {}, 8, distinct_capacity, "t")),
              (std::array<int, 3>{64, rule.rows, rule.splits}))
        << m;
  }
  // The wide stages where their rule takes them on the wide kernel's capacity: 4096 tokens are
  // 128 tiles, one wave of the 128 SMs (kH200's 132 would say the same); 2048 on 2 splits.
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 4096, {}, 8, distinct_capacity, "t")),
            (std::array<int, 3>{kBoundaryWideColumns, kBoundaryWideTileRows, 1}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 2048, {}, 8, distinct_capacity, "t")),
            (std::array<int, 3>{kBoundaryWideColumns, kBoundaryWideTileRows, 2}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 2048, {}, 1, distinct_capacity, "t")),
            (std::array<int, 3>{64, 128, 1}))
      << "the room holds one split, the wide rule two: the 64-column rule";
  EXPECT_EQ(boundary_launch_shape(p, 4096, {0, 0, 64}, 8, distinct_capacity, "t").stage_columns, 64)
      << "64 columns forced: not the wide stages";
  EXPECT_EQ(boundary_launch_shape(p, 1, {}, 1, distinct_capacity, "t").tile.splits, 1)
      << "the workspace's room";
  // Forced splits: 128-row tiles unless forced too; the rule's splits on the forced kernel.
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 4096, {0, 128, 0}, 8, distinct_capacity, "t")),
            (std::array<int, 3>{64, 128, boundary_splits(p, 4096, kH200)}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 4096, {0, 0, 32}, 8, distinct_capacity, "t")),
            (std::array<int, 3>{32, 128, boundary_splits(p, 4096, kOneEach, 8, 32)}));
}

TEST(Sm90BoundaryPlan, LaunchShapeKeepsForcedFields) {
  const MhcParams p = params(4, 5120);
  // Every field forced: the device is not asked.
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 64, {3, 64, 0}, 8, no_device, "t")),
            (std::array<int, 3>{64, 64, 3}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 64, {5, 0, 0}, 8, no_device, "t")),
            (std::array<int, 3>{64, 128, 5}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 64, {6, 0, 32}, 8, no_device, "t")),
            (std::array<int, 3>{32, 128, 6}));
  EXPECT_EQ(shape_of(boundary_launch_shape(p, 64, {2, 0, kBoundaryWideColumns}, 8, no_device, "t")),
            (std::array<int, 3>{kBoundaryWideColumns, kBoundaryWideTileRows, 2}))
      << "128 columns take 32-row tiles";
  EXPECT_EQ(boundary_launch_shape(p, 64, {8, 0, 0}, 3, no_device, "t").tile.splits, 3)
      << "no more than the workspace holds";
  // Rebalanced so that no split is empty: 7 stages (C = 448) in 5 splits of at most 2 is 4.
  EXPECT_EQ(boundary_launch_shape(params(4, 448), 64, {5, 0, 0}, 8, no_device, "t").tile.splits, 4);
  EXPECT_EQ(boundary_launch_shape(params(4, 128), 64, {8, 0, 0}, 8, no_device, "t").tile.splits, 2)
      << "one split per stage at most";
  EXPECT_THROW(boundary_launch_shape(p, 64, {}, 8, no_device, "t"), Error)
      << "the rule asks the device";
}

TEST(Sm90BoundaryPlan, LaunchShapeRefusesWhatTheKernelDoesNotTake) {
  const auto error_of = [](const MhcParams& p, BoundaryForced forced) -> std::string {
    try {
      boundary_launch_shape(p, 64, forced, 8, distinct_capacity, "the caller");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const MhcParams p = params(4, 5120);
  EXPECT_EQ(error_of(p, {}), "");
  const std::vector<std::pair<BoundaryForced, std::string>> bad = {
      {{9, 0, 0}, "boundary_splits=9 must be in 0..8"},
      {{-1, 0, 0}, "boundary_splits=-1"},
      {{0, 96, 0}, "boundary_rows=96 must be 0 (the rule), 128, 64 or 32"},
      {{0, 0, 48}, "boundary_stage_columns=48 must be 0 (64), 64, 32 or 128"},
      {{0, 64, 32}, "boundary_rows=64 needs 64-column stages"},
      {{0, 32, 0}, "32-row tiles and 128-column stages go together"},
      {{0, 128, 128}, "32-row tiles and 128-column stages go together"},
  };
  for (const auto& [forced, message] : bad) {
    const std::string e = error_of(p, forced);
    EXPECT_NE(e.find(message), std::string::npos) << e;
    EXPECT_EQ(e.rfind("the caller: ", 0), 0u) << e;
  }
  EXPECT_NE(error_of(params(4, 5120 + 32), {}).find("C=5152 is not a whole number of 64-column"),
            std::string::npos);
  EXPECT_EQ(error_of(params(4, 5120 + 32), {0, 0, 32}), "") << "whole 32-column stages";
}

}  // namespace
}  // namespace mhc
