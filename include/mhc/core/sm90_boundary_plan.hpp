// The fused boundary's launch shapes on sm_90 (the kernel: mhc/cuda/sm90_boundary.cuh) and the
// rules that choose one per token count: tokens per tile, columns per pipeline stage, CTAs per
// tile. Policy code, no CUDA: what the device holds at once (clusters of 1..8 CTAs of each kernel)
// comes in as numbers, queried by src/cuda/boundary.cu on a real device and made up by the tests.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "mhc/core/params.hpp"

namespace mhc {

// Tokens per tile: 128 (8 consumer warps), or 64 (4 warps: twice the tiles, so that a token count
// whose 128-row tiles leave SMs idle fills them; boundary_tile chooses), or 32 with the wide
// stages.
inline constexpr int kBoundaryRowsPerTile = 128;
inline constexpr int kBoundaryHalfTileRows = 64;
inline constexpr int kBoundaryWideTileRows = 32;
// Columns of C per pipeline stage, for every stream: 64 (one 128-byte box row, the default), 32
// (64-byte box rows: half the stage, twice the stages in the ring), or 128 on 32-row tiles (the
// wide stages: each row's 256 contiguous bytes as two 128-byte lines of one 3D box, so that the
// copy engine moves 256-byte pieces of a row while shared memory keeps the 128-byte swizzle,
// which streams faster: docs/decisions.md, "The fused boundary at large batches").
inline constexpr int kBoundaryStageColumns = 64;
inline constexpr int kBoundaryWideColumns = 128;
// A tile's CTAs (its splits of C's stages) form one thread block cluster: at most 8, the portable
// cluster size.
inline constexpr int kBoundaryMaxSplits = 8;

// The bytes of one pipeline stage of the kernel of `streams` streams, `columns` columns per stage
// and `tile_rows` tokens per tile: the n x boxes and the F box (tile_rows x columns bf16 each) and
// hc_fn's 32-column boxes of every stream for those columns (NMIX rows of 128 bytes each).
constexpr int boundary_stage_bytes(int streams, int columns, int tile_rows) {
  const int box_bytes = tile_rows * columns * 2;
  const int hc_fn_box_bytes = streams * (streams + 2) * 128;
  return (streams + 1) * box_bytes + streams * (columns / 32) * hc_fn_box_bytes;
}
// The stages of the kernel's ring: as many as fit beside its static shared memory (~17 KB at
// n = 4): with 64 or 128 columns three where they take at most 200 KB, else two; with 32 columns
// up to six in 208 KB.
constexpr int boundary_ring_stages(int streams, int columns, int tile_rows) {
  const int stage_bytes = boundary_stage_bytes(streams, columns, tile_rows);
  if (columns == 32) return 208 * 1024 / stage_bytes < 6 ? 208 * 1024 / stage_bytes : 6;
  return 3 * stage_bytes <= 200 * 1024 ? 3 : 2;
}

// The splits of a tile share C's stages interleaved: split s of S takes stages s, s + S, s + 2S,
// ... How many a split takes, and whether every split's stages fit the kernel's table of them in
// shared memory (kBoundaryMaxSplitStages; split 0 takes the most): C <= 16384 at 64 columns with
// one split, more with more splits.
inline constexpr int kBoundaryMaxSplitStages = 256;
constexpr int boundary_split_stages(int split, int splits, int stages) {
  return stages > split ? (stages - split + splits - 1) / splits : 0;
}
constexpr bool boundary_fits_table(int splits, int stages) {
  return boundary_split_stages(0, splits, stages) <= kBoundaryMaxSplitStages;
}
// Whether the kernel takes C at all: whole 64-column stages, and one split's fit its table.
constexpr bool boundary_takes_hidden(int hidden) {
  return hidden > 0 && hidden % kBoundaryStageColumns == 0 &&
         boundary_fits_table(1, hidden / kBoundaryStageColumns);
}

// What a device holds at once of one kernel: capacity[s - 1] clusters of s CTAs (s = 1..8; one
// CTA per SM, clusters within a GPC, so that capacity[0] is the SMs and large clusters fit fewer
// than SMs / s).
using ClusterCapacity = std::array<int, kBoundaryMaxSplits>;
// The query a device answers for the kernel of n streams, stage_columns and tile_rows.
using ClusterCapacityQuery = ClusterCapacity (*)(int streams, int stage_columns, int tile_rows);

// The fused boundary's launch shape: tokens per tile and CTAs per tile.
struct BoundaryTile {
  int rows = kBoundaryRowsPerTile;
  int splits = 1;
};

// The CTAs per tile of tile_rows tokens (one cluster, at most 8 and at most max_splits), whole
// stage_columns-column stages each, no split empty: the count with the fewest stage times per
// CTA, waves x stages per split, where a wave is capacity[s - 1] clusters of s CTAs; ties to fewer
// splits, but not to one. Shapes: 64 or 32 columns on 128 or 64 rows (64 rows: 64 columns only),
// 128 columns on 32 rows; throws mhc::Error on another.
int boundary_splits(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity,
                    int max_splits = kBoundaryMaxSplits, int stage_columns = kBoundaryStageColumns,
                    int tile_rows = kBoundaryRowsPerTile);
// The wide stages' split count where the rule takes them (0: it does not): n = 4 from
// kWideMinTokens tokens, one split where their 32-row tiles fill at least 90% of their waves'
// slots, two where twice the tiles fill 90% of one wave (capacity_wide: the wide kernel's
// ClusterCapacity). On the H200 that is 2048 tokens on 2 splits and 4096, 8192, 16384 and 32768
// on one, where they won; 1024 and 3072 lost (docs/decisions.md, "The fused
// boundary at large batches").
inline constexpr int64_t kWideMinTokens = 2048;
int wide_boundary_splits(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity_wide);
// The tile (128 or 64 tokens, 64-column stages) and its boundary_splits: 64-row tiles where the
// 128-row tiles' first wave keeps 90% of the SMs busy and the halves' ring is deeper (DRAM sets
// the time; n = 4 from 8192 tokens on the H200); at n = 4 below that, whole waves first (the
// halves where they run in one wave on 1, 5 or an even number of splits, the 128-row tiles where
// only they run in one); elsewhere the height whose split count leaves the fewest stage bytes per
// CTA, waves x stages per split x the stage's bytes, ties to 128 (each tile reads all of hc_fn).
// capacity_128 / capacity_64: each kernel's ClusterCapacity.
BoundaryTile boundary_tile(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity_128,
                           const ClusterCapacity& capacity_64, int max_splits = kBoundaryMaxSplits);

// A launch's shape fields that a tuning forces (sweeps; 0: the rule's): CTAs per tile (1..8),
// tokens per tile (128, or 64 with 64-column stages, or 32 with 128-column stages), columns per
// stage (64, 32 or 128).
struct BoundaryForced {
  int splits = 0;
  int rows = 0;
  int stage_columns = 0;
};
struct BoundaryLaunchShape {
  int stage_columns = kBoundaryStageColumns;
  BoundaryTile tile;
};
// The launch shape for `tokens`: the forced fields, the rules for the rest (nothing forced: the
// wide stages where wide_boundary_splits takes them and the room holds their splits, else
// boundary_tile; forced columns or rows: 128 rows, or 32 with 128 columns), at most `room` splits
// (what the workspace holds partials for, boundary_workspace_room); `capacity` is asked only for
// the kernels a rule needs. Throws mhc::Error, naming `what`, on a forced field the kernel does
// not take or C not a whole number of stages.
BoundaryLaunchShape boundary_launch_shape(const MhcParams& p, int64_t tokens,
                                          const BoundaryForced& forced, int room,
                                          ClusterCapacityQuery capacity, std::string_view what);
// The most splits whose partials a workspace of `partial_floats` floats holds (1..8): at 128-row
// tiles, which round the batch up the most, so 64-row tiles fit too. A small workspace gets fewer
// splits rather than an error.
int boundary_workspace_room(const MhcParams& p, int64_t tokens, int64_t partial_floats);

}  // namespace mhc
