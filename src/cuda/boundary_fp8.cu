// The fused boundary writing an FP8 layer_input (sm90_boundary_fp8.cuh): the wide stages' kernel
// (128-column stages, one FP8 group each, on 32-token tiles) with BoundaryFp8Out (staged) or
// BoundaryFp8FoldedOut (folded), in a translation unit of its own as every boundary shape
// (prenorm_dispatch.cuh).
#include "launch_checks.cuh"
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {

namespace {

template <class Out>
cudaError_t launch_wide_fp8(int streams, const PrenormArgs& args, const BoundaryColumns& cols,
                            LaunchTarget stream) {
  constexpr int kColumns = kBoundaryWideColumns, kRows = kBoundaryWideTileRows;
  if (streams == 2) {
    return MHC_N2_LAUNCH((launch_sm90_boundary<2, kColumns, kRows, Out>(args, cols, stream)));
  }
  return launch_sm90_boundary<4, kColumns, kRows, Out>(args, cols, stream);
}

}  // namespace

cudaError_t dispatch_boundary_fp8(int streams, const PrenormArgs& args, const BoundaryColumns& cols,
                                  bool folded, LaunchTarget stream) {
  return folded ? launch_wide_fp8<BoundaryFp8FoldedOut>(streams, args, cols, stream)
                : launch_wide_fp8<BoundaryFp8Out>(streams, args, cols, stream);
}

}  // namespace mhc::cuda
