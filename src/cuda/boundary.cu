// The fused boundary's host side (sm90_boundary.cuh): the device's cluster capacities for the
// launch-shape rules (mhc/core/sm90_boundary_plan.hpp), and the checked launch where the launch
// tuning sends a boundary (LaunchTuning::fused_boundary).
#include <string_view>

#include "fp8_launch.cuh"
#include "launch_checks.cuh"
#include "mhc/cuda/sm90_boundary.cuh"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {

using detail::bits;
using detail::check_launch;
using detail::check_ptr;
using detail::require_that;

namespace {

// The kernel of n streams, stage_columns columns per stage and tile_rows tokens per tile (the
// instantiations: 64 x 128, 32 x 128, 64 x 64, 128 x 32; boundary_launch_shape checks), as
// F<n, columns, rows>.
template <template <int, int, int> class F, class... Args>
cudaError_t with_boundary_kernel(int n, int stage_columns, int tile_rows, Args&&... args) {
  const bool narrow = stage_columns == 32, half = tile_rows == kBoundaryHalfTileRows;
  const bool wide = stage_columns == kBoundaryWideColumns;
  if (n == 2) {
    return MHC_N2_LAUNCH(wide     ? F<2, kBoundaryWideColumns, kBoundaryWideTileRows>::call(args...)
                         : narrow ? F<2, 32, 128>::call(args...)
                         : half   ? F<2, 64, 64>::call(args...)
                                  : F<2, 64, 128>::call(args...));
  }
  return wide     ? F<4, kBoundaryWideColumns, kBoundaryWideTileRows>::call(args...)
         : narrow ? F<4, 32, 128>::call(args...)
         : half   ? F<4, 64, 64>::call(args...)
                  : F<4, 64, 128>::call(args...);
}

template <int kStreams, int kColumns, int kTileRows>
struct CapacityOf {
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

// The rules' ClusterCapacityQuery on the current device: clusters of 1..8 CTAs of the kernel it
// holds at once.
ClusterCapacity device_cluster_capacity(int streams, int stage_columns, int tile_rows) {
  ClusterCapacity capacity{};
  for (int ctas = 1; ctas <= kBoundaryMaxSplits; ++ctas) {
    MHC_CUDA_CHECK(with_boundary_kernel<CapacityOf>(streams, stage_columns, tile_rows, ctas,
                                                    &capacity[ctas - 1]));
  }
  return capacity;
}

BoundaryLaunchShape launch_shape(const MhcParams& p, int64_t tokens, const LaunchTuning& tuning,
                                 const SiteWorkspace& ws, std::string_view what) {
  return boundary_launch_shape(p, tokens, tuning.boundary,
                               boundary_workspace_room(p, tokens, ws.partial_capacity()),
                               device_cluster_capacity, what);
}

}  // namespace

BoundaryTile boundary_launch_tile(const MhcParams& p, int64_t tokens, const LaunchTuning& tuning,
                                  const SiteWorkspace& ws) {
  return launch_shape(p, tokens, tuning, ws, "boundary_launch_tile").tile;
}

// Declared in prenorm_dispatch.hpp. With input.fp8, input.layer_input is the bf16 staging buffer
// (kernels.hpp, InputPathBuffers): the wide stages with the norm write the FP8 layer_input
// themselves, folded (Fp8Format::fold_norm: the staging buffer untouched) or staged; any other
// shape, or the plain collapse, runs the bf16 kernel into the staging buffer, then the group
// quantisation of it (the staged form's bits: the bf16 kernel's layer_input, quantised).
void launch_boundary(const MhcParams& p, int64_t tokens, const InputPathBuffers& input,
                     const PreviousPost& previous, const LaunchTuning& tuning, SiteWorkspace& ws,
                     PrenormArgs args, LaunchTarget stream) {
  constexpr const char* what = "prenorm_coefficients (fused boundary)";
  require_that(input.pre_mix != nullptr, "{}: input pre_mix is null", what);
  check_ptr(input.layer_input, input.fp8 != nullptr ? "layer_input staging" : "layer_input", what);
  if (input.norm_weight != nullptr) check_ptr(input.norm_weight, "norm_weight", what);
  // Split partials beyond the first need room in the workspace (one split keeps its totals in
  // shared memory).
  const BoundaryLaunchShape shape = launch_shape(p, tokens, tuning, ws, what);
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
  // The FP8 kernel: the wide stages (whole groups per CTA) with the norm (boundary_args_valid).
  const bool fp8_kernel =
      input.fp8 != nullptr && input.norm_weight != nullptr && stage_columns == kBoundaryWideColumns;
  if (fp8_kernel) {
    const Fp8Format& f = input.fp8->format;
    check_fp8_format(f, p.hidden, what);
    args.input.fp8 = fp8_output(*input.fp8, tokens, p.hidden, what);
    // Folded where asked and the kernel can (float scales, a CTA's groups within its table);
    // else the staged form, whose bits are the bf16 boundary's quantised.
    const bool folded = f.fold_norm && !f.ue8m0 && boundary_fold_fits(args.splits, p.hidden);
    check_launch(dispatch_boundary_fp8(p.n, args, cols, folded, stream), what);
    return;
  }
  check_launch(
      with_boundary_kernel<Dispatch>(p.n, stage_columns, shape.tile.rows, args, cols, stream),
      what);
  if (input.fp8 != nullptr) quantize_fp8(tokens, p.hidden, input.layer_input, *input.fp8, stream);
}

}  // namespace mhc::cuda
