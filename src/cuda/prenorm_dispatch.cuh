// Definition of dispatch_prenorm, included by prenorm_n2.cu and prenorm_n4.cu only.
#pragma once
#include "mhc/cuda/prenorm_mma.cuh"
#include "mhc/cuda/sm90_boundary.cuh"
#include "mhc/cuda/sm90_prenorm_leaf.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {

template <int kStreams>
cudaError_t prenorm_attributes(int rows_per_tile, cudaFuncAttributes* out) {
  if (rows_per_tile == kTmaRowsPerTile) {
    return cudaFuncGetAttributes(out, sm90_prenorm_tma_kernel<kStreams, false>);
  }
  if (rows_per_tile == 16) {
    return cudaFuncGetAttributes(out, prenorm_coefficients_kernel<kStreams, 1, false>);
  }
  return cudaFuncGetAttributes(out, prenorm_coefficients_kernel<kStreams, 4, false>);
}

template <int kStreams>
cudaError_t dispatch_prenorm(const PrenormArgs& args, bool compensated, int rows_per_tile,
                             LaunchTarget stream) {
  if (args.previous.x != nullptr) {  // the previous site's post folded in: 16-row tiles only
    return compensated ? launch_decode_coefficients<kStreams, true, true>(args, stream)
                       : launch_decode_coefficients<kStreams, false, true>(args, stream);
  }
  if (rows_per_tile == kTmaRowsPerTile) {
    // Batch-invariant decode: the TMA kernel's order by the launch shaped for 1-16 tokens.
    if (!compensated && leaf_decode_fits<kStreams>(args)) {
      return launch_sm90_prenorm_leaf<kStreams>(args, stream);
    }
    return compensated ? launch_sm90_prenorm_tma<kStreams, true>(args, stream)
                       : launch_sm90_prenorm_tma<kStreams, false>(args, stream);
  }
  if (rows_per_tile == 16 && args.split_ctas > 0) {  // a tile's splits in turn on fewer CTAs
    return compensated ? launch_decode_coefficients<kStreams, true, false, true>(args, stream)
                       : launch_decode_coefficients<kStreams, false, false, true>(args, stream);
  }
  if (rows_per_tile == 16) {
    return compensated ? launch_decode_coefficients<kStreams, true>(args, stream)
                       : launch_decode_coefficients<kStreams, false>(args, stream);
  }
  return compensated ? launch_prenorm_coefficients<kStreams, 4, true>(args, stream)
                     : launch_prenorm_coefficients<kStreams, 4, false>(args, stream);
}

template <int kStreams, int kColumns, int kTileRows>
cudaError_t dispatch_boundary(const PrenormArgs& args, const BoundaryColumns& cols,
                              LaunchTarget stream) {
  return launch_sm90_boundary<kStreams, kColumns, kTileRows>(args, cols, stream);
}

template <int kStreams>
cudaError_t tma_cluster_capacity(int splits, int* clusters) {
  return sm90_prenorm_tma_cluster_capacity<kStreams, false>(splits, clusters);
}

template <int kStreams, int kColumns, int kTileRows>
cudaError_t boundary_cluster_capacity(int ctas, int* clusters) {
  return sm90_boundary_cluster_capacity<kStreams, kColumns, kTileRows>(ctas, clusters);
}

// The explicit instantiations of one fused boundary shape (stream count, stage columns, tile
// rows), in that shape's own translation unit: nvcc then compiles the shapes in parallel, and
// the 32- and 64-column shapes' SASS changes when they share one (boundary_32.cu).
#define MHC_INSTANTIATE_BOUNDARY(STREAMS, COLUMNS, ROWS)          \
  template cudaError_t dispatch_boundary<STREAMS, COLUMNS, ROWS>( \
      const PrenormArgs&, const BoundaryColumns&, LaunchTarget);  \
  template cudaError_t boundary_cluster_capacity<STREAMS, COLUMNS, ROWS>(int, int*)

}  // namespace mhc::cuda
