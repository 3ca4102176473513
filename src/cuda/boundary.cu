// The fused boundary's host side (sm90_boundary.cuh): where the plan or a tuning sends a boundary,
// its split rule from the device's cluster capacity, and its checked launch.
#include <algorithm>
#include <array>

#include "launch_checks.cuh"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/sm90_boundary.cuh"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {

using detail::bits;
using detail::check_launch;
using detail::check_ptr;
using detail::require_that;

bool boundary_fuses(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning,
                    Projection projection) {
  const bool rule_holds =
      tuning.fused_boundary_min_tokens >= 0
          ? boundary_rule_holds(tuning.fused_boundary_min_tokens, tuning.fused_boundary_min_hidden,
                                tuning.fused_boundary_streams, tuning.fused_boundary_wide, p.hidden,
                                p.n, tokens)
          : default_device_plan().fuses_boundary(p.hidden, p.n, tokens);
  return rule_holds && tma_prenorm_available() && !tuning.batch_invariant &&
         projection == Projection::tf32 && p.hidden % kBoundaryStageColumns == 0 &&
         p.hidden / kBoundaryStageColumns <= kBoundaryMaxSplitStages;  // one split fits its table
}

PrenormTuning forcing_fused_boundary(PrenormTuning t) {
  t.fused_boundary_min_tokens = 1;
  t.fused_boundary_min_hidden = 0;
  t.fused_boundary_streams = 0;
  t.fused_boundary_wide = {};
  return t;
}

namespace {

// About `requested` splits of C's stages of stage_columns columns (1..8, at most one per stage),
// rebalanced so that none is empty.
int whole_stage_splits(const MhcParams& p, int64_t requested, int stage_columns) {
  const int stages = std::max(1, p.hidden / stage_columns);
  const int64_t want =
      std::clamp<int64_t>(requested, 1, std::min<int64_t>(kBoundaryMaxSplits, stages));
  const int64_t per_split = ceil_div(stages, want);
  return static_cast<int>(ceil_div(stages, per_split));
}

}  // namespace

namespace {

// boundary_splits' choice and its cost: waves x stages per split (stage times per CTA).
struct SplitChoice {
  int splits = 1;
  int64_t stage_times = 0;
};

SplitChoice choose_splits(const MhcParams& p, int64_t tokens,
                          const std::array<int, 8>& cluster_capacity, int max_splits,
                          int stage_columns, int tile_rows) {
  static_assert(kBoundaryMaxSplits == 8, "one capacity per cluster size");
  require_that(stage_columns == 64 || stage_columns == 32,
               "boundary_splits: stage_columns={} must be 64 or 32", stage_columns);
  require_that(tile_rows == kBoundaryRowsPerTile || tile_rows == kBoundaryHalfTileRows,
               "boundary_splits: tile_rows={} must be {} or {}", tile_rows, kBoundaryRowsPerTile,
               kBoundaryHalfTileRows);
  const int64_t tiles = std::max<int64_t>(1, ceil_div(tokens, tile_rows));
  const int stages = std::max(1, p.hidden / stage_columns);
  const int cap = std::clamp(max_splits, 1, kBoundaryMaxSplits);
  SplitChoice best{1, std::numeric_limits<int64_t>::max()};
  for (int want = 1; want <= cap; ++want) {
    const int splits = whole_stage_splits(p, want, stage_columns);
    const int64_t at_once = std::max(1, cluster_capacity[splits - 1]);
    const int64_t cost = ceil_div(tiles, at_once) * ceil_div(stages, splits);
    // A tie goes to fewer splits, but not to one: a lone CTA writes its tile's rows alone, where
    // a cluster's CTAs write neighbouring pieces of the same rows at once (7-9% faster at 16384
    // tokens, docs/decisions.md, "Interleaved boundary splits").
    if (cost < best.stage_times || (cost == best.stage_times && best.splits == 1)) {
      best = {splits, cost};
    }
  }
  return best;
}

// The bytes of one 64-column stage of a tile: what the CTA streams through shared memory per
// stage (the x and F boxes from DRAM, hc_fn's from L2).
int64_t stage_bytes(int streams, int tile_rows) {
  if (streams == 2) {
    return tile_rows == kBoundaryHalfTileRows ? BoundaryShape<2, 64, 64>::kStageBytes
                                              : BoundaryShape<2, 64, 128>::kStageBytes;
  }
  return tile_rows == kBoundaryHalfTileRows ? BoundaryShape<4, 64, 64>::kStageBytes
                                            : BoundaryShape<4, 64, 128>::kStageBytes;
}

// Whether the 64-row kernel's ring holds more stages than the 128-row one's (n = 4: 3 against 2;
// n = 2: 3 either way).
bool deeper_half_ring(int streams) {
  return streams == 2 ? BoundaryShape<2, 64, 64>::kStages > BoundaryShape<2, 64, 128>::kStages
                      : BoundaryShape<4, 64, 64>::kStages > BoundaryShape<4, 64, 128>::kStages;
}

}  // namespace

int boundary_splits(const MhcParams& p, int64_t tokens, const std::array<int, 8>& cluster_capacity,
                    int max_splits, int stage_columns, int tile_rows) {
  return choose_splits(p, tokens, cluster_capacity, max_splits, stage_columns, tile_rows).splits;
}

BoundaryTile boundary_tile(const MhcParams& p, int64_t tokens,
                           const std::array<int, 8>& capacity_128,
                           const std::array<int, 8>& capacity_64, int max_splits) {
  const SplitChoice whole =
      choose_splits(p, tokens, capacity_128, max_splits, 64, kBoundaryRowsPerTile);
  const SplitChoice half =
      choose_splits(p, tokens, capacity_64, max_splits, 64, kBoundaryHalfTileRows);
  const BoundaryTile halves{kBoundaryHalfTileRows, half.splits};
  // Where the 128-row tiles' first wave already keeps 90% of the SMs busy, DRAM sets the time
  // either way, and the halves' deeper ring (3 stages against 2 at n = 4) moved it up to 5% faster
  // at 8192-16384 tokens, where the stage bytes would keep 128 rows.
  const int64_t tiles = std::max<int64_t>(1, ceil_div(tokens, kBoundaryRowsPerTile));
  const int64_t first_wave =
      std::min<int64_t>(tiles, std::max(1, capacity_128[whole.splits - 1])) * whole.splits;
  const int64_t sms = std::max(1, capacity_128[0]);  // clusters of one CTA: one per SM
  if (deeper_half_ring(p.n) && first_wave * 10 >= sms * 9) return halves;
  // At n = 4, below that: whole waves decide before the stage bytes do. Where the halves run in
  // one wave on 1, 5 or an even number of splits, the halves (with their producer warp 2-5%
  // faster at 3072 tokens at C = 4096-7168 on 2 splits, 4% at 1536 on 4, 3-13% at 1152-1408 on
  // 5 where the stage bytes tie within 1%; on 3 splits at 2048 they lost 3%; 7 not measured).
  // Where they need more waves and the 128-row tiles one, the
  // 128-row tiles (at 2880 tokens 64 x 8 in 3 waves lost 4% to 128 x 4, where the stage bytes
  // say 64; docs/decisions.md, "A producer warpgroup for the whole tiles").
  const int64_t half_tiles = std::max<int64_t>(1, ceil_div(tokens, kBoundaryHalfTileRows));
  const bool half_one_wave = half_tiles <= std::max(1, capacity_64[half.splits - 1]);
  const bool whole_one_wave = tiles <= std::max(1, capacity_128[whole.splits - 1]);
  const BoundaryTile wholes{kBoundaryRowsPerTile, whole.splits};
  const bool half_splits_won = half.splits == 1 || half.splits == 5 || half.splits % 2 == 0;
  if (p.n == 4 && half_one_wave && half_splits_won) return halves;
  if (p.n == 4 && !half_one_wave && whole_one_wave) return wholes;
  const int64_t whole_bytes = whole.stage_times * stage_bytes(p.n, kBoundaryRowsPerTile);
  const int64_t half_bytes = half.stage_times * stage_bytes(p.n, kBoundaryHalfTileRows);
  return half_bytes < whole_bytes ? halves : wholes;
}

namespace {

// The kernel of n streams, stage_columns columns per stage and tile_rows tokens per tile (the
// instantiations: 64 x 128, 32 x 128, 64 x 64; boundary_shape checks), as F<n, columns, rows>.
template <template <int, int, int> class F, class... Args>
cudaError_t with_boundary_kernel(int n, int stage_columns, int tile_rows, Args&&... args) {
  const bool narrow = stage_columns == 32, half = tile_rows == kBoundaryHalfTileRows;
  if (n == 2) {
    return narrow ? F<2, 32, 128>::call(args...)
           : half ? F<2, 64, 64>::call(args...)
                  : F<2, 64, 128>::call(args...);
  }
  return narrow ? F<4, 32, 128>::call(args...)
         : half ? F<4, 64, 64>::call(args...)
                : F<4, 64, 128>::call(args...);
}

template <int kStreams, int kColumns, int kTileRows>
struct ClusterCapacity {
  static cudaError_t call(int ctas, int* clusters) {
    return boundary_cluster_capacity<kStreams, kColumns, kTileRows>(ctas, clusters);
  }
};

template <int kStreams, int kColumns, int kTileRows>
struct Dispatch {
  static cudaError_t call(const PrenormArgs& args, const BoundaryColumns& cols, LaunchTarget on) {
    return dispatch_boundary<kStreams, kColumns, kTileRows>(args, cols, on);
  }
};

// cluster_capacity for boundary_splits: clusters of 1..8 CTAs the current device holds at once.
std::array<int, 8> device_cluster_capacity(const MhcParams& p, int stage_columns, int tile_rows) {
  std::array<int, 8> capacity{};
  for (int ctas = 1; ctas <= kBoundaryMaxSplits; ++ctas) {
    MHC_CUDA_CHECK(with_boundary_kernel<ClusterCapacity>(p.n, stage_columns, tile_rows, ctas,
                                                         &capacity[ctas - 1]));
  }
  return capacity;
}

// The launch shape: the tuning's forced stage columns, rows and splits, the rules for the rest.
// `room`: the most splits the workspace holds partials for (at 128 rows, so at 64 too).
struct BoundaryShapeChoice {
  int stage_columns = kBoundaryStageColumns;
  BoundaryTile tile;
};

BoundaryShapeChoice boundary_shape(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning,
                                   int room, const char* what) {
  require_that(tuning.boundary_splits >= 0 && tuning.boundary_splits <= kBoundaryMaxSplits,
               "{}: boundary_splits={} must be in 0..{} (0: the rule)", what,
               tuning.boundary_splits, kBoundaryMaxSplits);
  require_that(tuning.boundary_stage_columns == 0 || tuning.boundary_stage_columns == 64 ||
                   tuning.boundary_stage_columns == 32,
               "{}: boundary_stage_columns={} must be 0 (64), 64 or 32", what,
               tuning.boundary_stage_columns);
  require_that(tuning.boundary_rows == 0 || tuning.boundary_rows == kBoundaryRowsPerTile ||
                   tuning.boundary_rows == kBoundaryHalfTileRows,
               "{}: boundary_rows={} must be 0 (the rule), {} or {}", what, tuning.boundary_rows,
               kBoundaryRowsPerTile, kBoundaryHalfTileRows);
  BoundaryShapeChoice c;
  if (tuning.boundary_stage_columns > 0) c.stage_columns = tuning.boundary_stage_columns;
  require_that(c.stage_columns == 64 || tuning.boundary_rows != kBoundaryHalfTileRows,
               "{}: boundary_rows={} needs 64-column stages", what, tuning.boundary_rows);
  const bool rule_picks_rows =
      tuning.boundary_rows == 0 && tuning.boundary_splits == 0 && c.stage_columns == 64;
  if (rule_picks_rows) {
    c.tile = boundary_tile(p, tokens, device_cluster_capacity(p, 64, kBoundaryRowsPerTile),
                           device_cluster_capacity(p, 64, kBoundaryHalfTileRows), room);
    return c;
  }
  c.tile.rows = tuning.boundary_rows > 0 ? tuning.boundary_rows : kBoundaryRowsPerTile;
  c.tile.splits =
      tuning.boundary_splits > 0
          ? whole_stage_splits(p, std::min(tuning.boundary_splits, room), c.stage_columns)
          : boundary_splits(p, tokens, device_cluster_capacity(p, c.stage_columns, c.tile.rows),
                            room, c.stage_columns, c.tile.rows);
  return c;
}

// The most splits whose partials the workspace holds (at least 1, at most 8): at 128-row tiles,
// which round the batch up the most, so 64-row tiles fit too. A small workspace gets fewer splits
// rather than an error.
int workspace_room(const MhcParams& p, int64_t tokens, const SiteWorkspace& ws) {
  const int64_t tiles = ceil_div(tokens, kBoundaryRowsPerTile);
  const int64_t per_split = std::max<int64_t>(1, tiles * kBoundaryRowsPerTile * (p.nmix() + 1));
  return static_cast<int>(
      std::clamp<int64_t>(ws.partial_capacity() / per_split, 1, kBoundaryMaxSplits));
}

}  // namespace

BoundaryTile boundary_launch_tile(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning,
                                  const SiteWorkspace& ws) {
  return boundary_shape(p, tokens, tuning, workspace_room(p, tokens, ws), "boundary_launch_tile")
      .tile;
}

// Declared in prenorm_dispatch.hpp.
void launch_boundary(const MhcParams& p, int64_t tokens, const InputPathBuffers& input,
                     const PreviousPost& previous, const PrenormTuning& tuning, SiteWorkspace& ws,
                     PrenormArgs args, LaunchTarget stream) {
  constexpr const char* what = "prenorm_coefficients (fused boundary)";
  require_that(input.pre_mix != nullptr, "{}: input pre_mix is null", what);
  check_ptr(input.layer_input, "layer_input", what);
  if (input.norm_weight != nullptr) check_ptr(input.norm_weight, "norm_weight", what);
  // Split partials beyond the first need room in the workspace (one split keeps its totals in
  // shared memory).
  const BoundaryShapeChoice shape =
      boundary_shape(p, tokens, tuning, workspace_room(p, tokens, ws), what);
  const int stage_columns = shape.stage_columns;
  args.splits = shape.tile.splits;
  args.leaf_chunks = 0;
  args.chunks_per_split = 0;  // the boundary cuts C into column stages instead (cols)
  require_that(boundary_fits_table(args.splits, p.hidden / stage_columns),
               "{}: C={} in {}-column stages over {} splits leaves a split more than {} stages",
               what, p.hidden, stage_columns, args.splits, kBoundaryMaxSplitStages);
  const BoundaryColumns cols{p.hidden};
  args.previous.x = bits(previous.x);
  args.previous.post = previous.post;
  args.previous.comb = previous.comb;
  args.previous.sublayer_out = bits(previous.sublayer_out);
  args.previous.x_out = bits(previous.x_next);
  args.input.pre_mix = input.pre_mix;
  args.input.norm_weight = input.norm_weight;
  args.input.layer_input = bits(input.layer_input);
  args.input.hidden = p.hidden;
  args.input.row_threads = row_kernel_threads(p.hidden);
  args.input.eps_n = static_cast<float>(p.norm_eps());
  check_launch(
      with_boundary_kernel<Dispatch>(p.n, stage_columns, shape.tile.rows, args, cols, stream),
      what);
}

}  // namespace mhc::cuda
