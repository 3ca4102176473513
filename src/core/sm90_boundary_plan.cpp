// The fused boundary's launch-shape rules on sm_90 (mhc/core/sm90_boundary_plan.hpp).
#include "mhc/core/sm90_boundary_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "mhc/core/error.hpp"

namespace mhc {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <class... Args>
void require_that(bool ok, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// About `requested` splits of C's stages of stage_columns columns (1..8, at most one per stage),
// rebalanced so that none is empty.
int whole_stage_splits(const MhcParams& p, int64_t requested, int stage_columns) {
  const int stages = std::max(1, p.hidden / stage_columns);
  const int64_t want =
      std::clamp<int64_t>(requested, 1, std::min<int64_t>(kBoundaryMaxSplits, stages));
  const int64_t per_split = ceil_div(stages, want);
  return static_cast<int>(ceil_div(stages, per_split));
}

// boundary_splits' choice and its cost: waves x stages per split (stage times per CTA).
struct SplitChoice {
  int splits = 1;
  int64_t stage_times = 0;
};

SplitChoice choose_splits(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity,
                          int max_splits, int stage_columns, int tile_rows) {
  const bool wide = stage_columns == kBoundaryWideColumns;
  require_that(stage_columns == 64 || stage_columns == 32 || wide,
               "boundary_splits: stage_columns={} must be 64, 32 or {}", stage_columns,
               kBoundaryWideColumns);
  require_that(wide ? tile_rows == kBoundaryWideTileRows
                    : tile_rows == kBoundaryRowsPerTile || tile_rows == kBoundaryHalfTileRows,
               "boundary_splits: tile_rows={} must be {} or {} ({} with {}-column stages)",
               tile_rows, kBoundaryRowsPerTile, kBoundaryHalfTileRows, kBoundaryWideTileRows,
               kBoundaryWideColumns);
  const int64_t tiles = std::max<int64_t>(1, ceil_div(tokens, tile_rows));
  const int stages = std::max(1, p.hidden / stage_columns);
  const int cap = std::clamp(max_splits, 1, kBoundaryMaxSplits);
  SplitChoice best{1, std::numeric_limits<int64_t>::max()};
  for (int want = 1; want <= cap; ++want) {
    const int splits = whole_stage_splits(p, want, stage_columns);
    const int64_t at_once = std::max(1, capacity[splits - 1]);
    const int64_t cost = ceil_div(tiles, at_once) * ceil_div(stages, splits);
    // A tie goes to fewer splits, but not to one: a lone CTA writes its tile's rows alone, where
    // a cluster's CTAs write neighbouring pieces of the same rows at once, which measured faster
    // (docs/decisions.md, "The fused boundary at large batches").
    if (cost < best.stage_times || (cost == best.stage_times && best.splits == 1)) {
      best = {splits, cost};
    }
  }
  return best;
}

// The bytes of one 64-column stage of a tile of tile_rows tokens.
int64_t stage_bytes(int streams, int tile_rows) {
  return boundary_stage_bytes(streams, kBoundaryStageColumns, tile_rows);
}

// Whether the 64-row kernel's ring holds more stages than the 128-row one's (n = 4: 3 against 2;
// n = 2: 3 either way).
bool deeper_half_ring(int streams) {
  return boundary_ring_stages(streams, kBoundaryStageColumns, kBoundaryHalfTileRows) >
         boundary_ring_stages(streams, kBoundaryStageColumns, kBoundaryRowsPerTile);
}

void check_forced(const MhcParams& p, const BoundaryForced& forced, int stage_columns,
                  std::string_view what) {
  require_that(forced.splits >= 0 && forced.splits <= kBoundaryMaxSplits,
               "{}: boundary_splits={} must be in 0..{} (0: the rule)", what, forced.splits,
               kBoundaryMaxSplits);
  require_that(forced.stage_columns == 0 || forced.stage_columns == 64 ||
                   forced.stage_columns == 32 || forced.stage_columns == kBoundaryWideColumns,
               "{}: boundary_stage_columns={} must be 0 (64), 64, 32 or {}", what,
               forced.stage_columns, kBoundaryWideColumns);
  require_that(forced.rows == 0 || forced.rows == kBoundaryRowsPerTile ||
                   forced.rows == kBoundaryHalfTileRows || forced.rows == kBoundaryWideTileRows,
               "{}: boundary_rows={} must be 0 (the rule), {}, {} or {}", what, forced.rows,
               kBoundaryRowsPerTile, kBoundaryHalfTileRows, kBoundaryWideTileRows);
  require_that(stage_columns == 64 || forced.rows != kBoundaryHalfTileRows,
               "{}: boundary_rows={} needs 64-column stages", what, forced.rows);
  const bool wide = stage_columns == kBoundaryWideColumns;
  require_that(wide == (forced.rows == kBoundaryWideTileRows) || (wide && forced.rows == 0),
               "{}: {}-row tiles and {}-column stages go together (boundary_rows={}, "
               "boundary_stage_columns={})",
               what, kBoundaryWideTileRows, kBoundaryWideColumns, forced.rows,
               forced.stage_columns);
  require_that(p.hidden > 0 && p.hidden % stage_columns == 0,
               "{}: C={} is not a whole number of {}-column stages", what, p.hidden, stage_columns);
}

}  // namespace

int boundary_splits(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity,
                    int max_splits, int stage_columns, int tile_rows) {
  return choose_splits(p, tokens, capacity, max_splits, stage_columns, tile_rows).splits;
}

int wide_boundary_splits(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity_wide) {
  if (p.n != 4 || p.hidden % kBoundaryWideColumns != 0 || tokens < kWideMinTokens) return 0;
  const int64_t tiles = ceil_div(tokens, kBoundaryWideTileRows);
  const int64_t sms = std::max(1, capacity_wide[0]);  // one CTA per SM
  const auto nine_tenths = [](int64_t ctas, int64_t of) { return ctas * 10 >= of * 9; };
  // The waves' slots filled, not each wave: from 16384 tokens a last wave of 76-88% costs one
  // split of 32-row tiles no more than the 64-row tiles' two, whose CTAs are as many.
  const int64_t waves = ceil_div(tiles, sms);
  if (nine_tenths(tiles, waves * sms)) return 1;
  const int64_t pairs = std::max(1, capacity_wide[1]);  // clusters of two at once
  if (tiles <= pairs && nine_tenths(2 * tiles, sms)) return 2;
  return 0;
}

BoundaryTile boundary_tile(const MhcParams& p, int64_t tokens, const ClusterCapacity& capacity_128,
                           const ClusterCapacity& capacity_64, int max_splits) {
  const SplitChoice whole =
      choose_splits(p, tokens, capacity_128, max_splits, 64, kBoundaryRowsPerTile);
  const SplitChoice half =
      choose_splits(p, tokens, capacity_64, max_splits, 64, kBoundaryHalfTileRows);
  const BoundaryTile halves{kBoundaryHalfTileRows, half.splits};
  const BoundaryTile wholes{kBoundaryRowsPerTile, whole.splits};
  // Where the 128-row tiles' first wave already keeps 90% of the SMs busy, DRAM sets the time
  // either way, and the halves' deeper ring measured faster (docs/decisions.md, "The
  // fused boundary at large batches").
  const int64_t tiles = std::max<int64_t>(1, ceil_div(tokens, kBoundaryRowsPerTile));
  const int64_t first_wave =
      std::min<int64_t>(tiles, std::max(1, capacity_128[whole.splits - 1])) * whole.splits;
  const int64_t sms = std::max(1, capacity_128[0]);  // clusters of one CTA: one per SM
  if (deeper_half_ring(p.n) && first_wave * 10 >= sms * 9) return halves;
  // At n = 4, below that, whole waves decide before the stage bytes do: the halves where they run
  // in one wave on 1, 5 or an even number of splits (on 3 the stage bytes decide), the 128-row
  // tiles where only they run in one (docs/decisions.md, "The fused boundary at large batches").
  const int64_t half_tiles = std::max<int64_t>(1, ceil_div(tokens, kBoundaryHalfTileRows));
  const bool half_one_wave = half_tiles <= std::max(1, capacity_64[half.splits - 1]);
  const bool whole_one_wave = tiles <= std::max(1, capacity_128[whole.splits - 1]);
  const bool half_splits_won = half.splits == 1 || half.splits == 5 || half.splits % 2 == 0;
  if (p.n == 4 && half_one_wave && half_splits_won) return halves;
  if (p.n == 4 && !half_one_wave && whole_one_wave) return wholes;
  const int64_t whole_bytes = whole.stage_times * stage_bytes(p.n, kBoundaryRowsPerTile);
  const int64_t half_bytes = half.stage_times * stage_bytes(p.n, kBoundaryHalfTileRows);
  return half_bytes < whole_bytes ? halves : wholes;
}

BoundaryLaunchShape boundary_launch_shape(const MhcParams& p, int64_t tokens,
                                          const BoundaryForced& forced, int room,
                                          ClusterCapacityQuery capacity, std::string_view what) {
  BoundaryLaunchShape c;
  if (forced.stage_columns > 0) c.stage_columns = forced.stage_columns;
  check_forced(p, forced, c.stage_columns, what);
  const bool rule_picks_rows = forced.rows == 0 && forced.splits == 0 && c.stage_columns == 64;
  if (rule_picks_rows) {
    const int wide_splits =
        forced.stage_columns == 0
            ? wide_boundary_splits(p, tokens,
                                   capacity(p.n, kBoundaryWideColumns, kBoundaryWideTileRows))
            : 0;
    if (wide_splits > 0 && wide_splits <= room) {
      c.stage_columns = kBoundaryWideColumns;
      c.tile = {kBoundaryWideTileRows, wide_splits};
      return c;
    }
    c.tile = boundary_tile(p, tokens, capacity(p.n, 64, kBoundaryRowsPerTile),
                           capacity(p.n, 64, kBoundaryHalfTileRows), room);
    return c;
  }
  c.tile.rows = forced.rows > 0                           ? forced.rows
                : c.stage_columns == kBoundaryWideColumns ? kBoundaryWideTileRows
                                                          : kBoundaryRowsPerTile;
  c.tile.splits = forced.splits > 0
                      ? whole_stage_splits(p, std::min(forced.splits, room), c.stage_columns)
                      : boundary_splits(p, tokens, capacity(p.n, c.stage_columns, c.tile.rows),
                                        room, c.stage_columns, c.tile.rows);
  return c;
}

int boundary_workspace_room(const MhcParams& p, int64_t tokens, int64_t partial_floats) {
  const int64_t tiles = ceil_div(tokens, kBoundaryRowsPerTile);
  const int64_t per_split = std::max<int64_t>(1, tiles * kBoundaryRowsPerTile * (p.nmix() + 1));
  return static_cast<int>(std::clamp<int64_t>(partial_floats / per_split, 1, kBoundaryMaxSplits));
}

}  // namespace mhc
