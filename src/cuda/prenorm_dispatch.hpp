// The prenorm GEMM's instantiations live in one translation unit per stream count
// (prenorm_n2.cu, prenorm_n4.cu) so that they compile in parallel.
#pragma once
#include <cuda_runtime_api.h>

#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/launch_target.hpp"

namespace mhc::cuda {

struct PrenormArgs;
struct BoundaryColumns;

// Launches the instantiation for kStreams, the projection and the tile size: 16 or 64 rows
// (register-fed kernel) or 128 (TMA kernel, sm_90; in batch-invariant mode at 1-16 tokens its
// order by sm90_prenorm_leaf.cuh); with args.previous set, the 16-row instantiation that folds in
// the previous site's post.
// What the runtime reports for the TF32 instantiation of that tile size (16, 64, 128) in the
// image it loaded on the current device (binaryVersion, ptxVersion, registers, local memory).
template <int kStreams>
cudaError_t prenorm_attributes(int rows_per_tile, cudaFuncAttributes* out);

// The largest C at which every kernel that runs one CTA of row_kernel_threads(C) threads per token
// (the post and input path row kernels, every n and form) launches on the current device: their
// register counts in the loaded image cap the threads of a CTA below 1024 (at 168 registers, 384:
// C = 12288), so row_kernel_max_hidden() alone overstates it.
int query_row_kernels_max_hidden();

template <int kStreams>
cudaError_t dispatch_prenorm(const PrenormArgs& args, bool compensated, int rows_per_tile,
                             LaunchTarget stream);

// How many clusters of `splits` CTAs of the TMA kernel's cluster-epilogue form (TF32) the current
// device holds at once.
template <int kStreams>
cudaError_t tma_cluster_capacity(int splits, int* clusters);

// The fused boundary kernel (sm90_boundary.cuh) for kStreams with kColumns (64, 32 or 128)
// columns per pipeline stage and kTileRows (128 or 64; 32 with 128 columns) tokens per tile. The
// 64-column 128-row instantiations live in prenorm_n2/n4.cu, the 32-column ones in boundary_32.cu,
// the 64-row ones in boundary_64.cu, the wide ones in boundary_wide.cu: in one translation unit
// two of them change each other's SASS.
template <int kStreams, int kColumns, int kTileRows>
cudaError_t dispatch_boundary(const PrenormArgs& args, const BoundaryColumns& cols,
                              LaunchTarget stream);
// The fused boundary writing an FP8 layer_input (sm90_boundary_fp8.cuh; args.input.fp8 the
// output, args.input.layer_input the staged bf16 y, not written when folded): the wide stages'
// kernel (128 columns on 32-row tiles, boundary_fp8.cu), whose CTAs own whole groups at every
// split count; `folded`: the folded form (the caller checked boundary_fold_fits and float scales).
cudaError_t dispatch_boundary_fp8(int streams, const PrenormArgs& args, const BoundaryColumns& cols,
                                  bool folded, LaunchTarget stream);
// The fused boundary's checked launch (boundary.cu): prenorm_coefficients with `previous` where
// the tuning fuses the boundary; `args` holds the coefficient path's outputs and parameters, the
// split count is the boundary's own.
void launch_boundary(const MhcParams& p, int64_t tokens, const InputPathBuffers& input,
                     const PreviousPost& previous, const LaunchTuning& tuning, SiteWorkspace& ws,
                     PrenormArgs args, LaunchTarget stream);
// How many clusters of `ctas` CTAs of that kernel the current device holds at once.
template <int kStreams, int kColumns, int kTileRows>
cudaError_t boundary_cluster_capacity(int ctas, int* clusters);

}  // namespace mhc::cuda
