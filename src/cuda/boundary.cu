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
                                tuning.fused_boundary_streams, p.hidden, p.n, tokens)
          : default_device_plan().fuses_boundary(p.hidden, p.n, tokens);
  return rule_holds && tma_prenorm_available() && !tuning.batch_invariant &&
         projection == Projection::tf32 && p.hidden % kBoundaryStageColumns == 0 &&
         p.hidden / kBoundaryStageColumns <= kBoundaryMaxSplitStages;  // one split fits its table
}

PrenormTuning forcing_fused_boundary(PrenormTuning t) {
  t.fused_boundary_min_tokens = 1;
  t.fused_boundary_min_hidden = 0;
  t.fused_boundary_streams = 0;
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

int boundary_splits(const MhcParams& p, int64_t tokens, const std::array<int, 8>& cluster_capacity,
                    int max_splits, int stage_columns) {
  static_assert(kBoundaryMaxSplits == 8, "one capacity per cluster size");
  require_that(stage_columns == 64 || stage_columns == 32,
               "boundary_splits: stage_columns={} must be 64 or 32", stage_columns);
  const int64_t tiles = std::max<int64_t>(1, ceil_div(tokens, kBoundaryRowsPerTile));
  const int stages = std::max(1, p.hidden / stage_columns);
  const int cap = std::clamp(max_splits, 1, kBoundaryMaxSplits);
  int best = 1;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  for (int want = 1; want <= cap; ++want) {
    const int splits = whole_stage_splits(p, want, stage_columns);
    const int64_t at_once = std::max(1, cluster_capacity[splits - 1]);
    const int64_t cost = ceil_div(tiles, at_once) * ceil_div(stages, splits);
    // A tie goes to fewer splits, but not to one: a lone CTA writes its tile's rows alone, where
    // a cluster's CTAs write neighbouring pieces of the same rows at once (7-9% faster at 16384
    // tokens, docs/decisions.md, "Interleaved boundary splits").
    if (cost < best_cost || (cost == best_cost && best == 1)) best = splits, best_cost = cost;
  }
  return best;
}

namespace {

// cluster_capacity for boundary_splits: clusters of 1..8 CTAs the current device holds at once.
std::array<int, 8> device_cluster_capacity(const MhcParams& p, int stage_columns) {
  std::array<int, 8> capacity{};
  for (int ctas = 1; ctas <= kBoundaryMaxSplits; ++ctas) {
    int& clusters = capacity[ctas - 1];
    const bool narrow = stage_columns == 32;
    MHC_CUDA_CHECK(p.n == 2 ? (narrow ? boundary_cluster_capacity<2, 32>(ctas, &clusters)
                                      : boundary_cluster_capacity<2, 64>(ctas, &clusters))
                            : (narrow ? boundary_cluster_capacity<4, 32>(ctas, &clusters)
                                      : boundary_cluster_capacity<4, 64>(ctas, &clusters)));
  }
  return capacity;
}

}  // namespace

// Declared in prenorm_dispatch.hpp.
void launch_boundary(const MhcParams& p, int64_t tokens, const InputPathBuffers& input,
                     const PreviousPost& previous, const PrenormTuning& tuning, SiteWorkspace& ws,
                     PrenormArgs args, LaunchTarget stream) {
  constexpr const char* what = "prenorm_coefficients (fused boundary)";
  require_that(input.pre_mix != nullptr, "{}: input pre_mix is null", what);
  check_ptr(input.layer_input, "layer_input", what);
  if (input.norm_weight != nullptr) check_ptr(input.norm_weight, "norm_weight", what);
  // Split partials beyond the first need room in the workspace (one split keeps its totals in
  // shared memory); a small workspace gets fewer splits rather than an error.
  const int64_t tiles = ceil_div(tokens, kBoundaryRowsPerTile);
  const int64_t per_split = tiles * kBoundaryRowsPerTile * (p.nmix() + 1);
  const int room = static_cast<int>(
      std::clamp<int64_t>(ws.partial_capacity() / per_split, 1, kBoundaryMaxSplits));
  require_that(tuning.boundary_splits >= 0 && tuning.boundary_splits <= kBoundaryMaxSplits,
               "{}: boundary_splits={} must be in 0..{} (0: the rule)", what,
               tuning.boundary_splits, kBoundaryMaxSplits);
  require_that(tuning.boundary_stage_columns == 0 || tuning.boundary_stage_columns == 64 ||
                   tuning.boundary_stage_columns == 32,
               "{}: boundary_stage_columns={} must be 0 (64), 64 or 32", what,
               tuning.boundary_stage_columns);
  const int stage_columns =
      tuning.boundary_stage_columns > 0 ? tuning.boundary_stage_columns : kBoundaryStageColumns;
  args.splits = tuning.boundary_splits > 0
                    ? whole_stage_splits(p, std::min(tuning.boundary_splits, room), stage_columns)
                    : boundary_splits(p, tokens, device_cluster_capacity(p, stage_columns), room,
                                      stage_columns);
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
  const bool narrow = stage_columns == 32;
  const cudaError_t err = p.n == 2 ? (narrow ? dispatch_boundary<2, 32>(args, cols, stream)
                                             : dispatch_boundary<2, 64>(args, cols, stream))
                                   : (narrow ? dispatch_boundary<4, 32>(args, cols, stream)
                                             : dispatch_boundary<4, 64>(args, cols, stream));
  check_launch(err, what);
}

}  // namespace mhc::cuda
