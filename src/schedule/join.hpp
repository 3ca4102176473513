// The overlap schedule's join, in a translation unit of its own (join.cpp).
//
// Why its own file: it is the one edge whose absence the ordering tests must detect, and a test
// binary proves that they do by linking its own, deliberately empty, definition instead
// (tests/schedule/dropped_join: a link-time seam; the library itself has no switch for it).
#pragma once
#include <cuda_runtime_api.h>

namespace mhc::cuda::detail {

// Makes `main` wait for the side stream's coefficients of a site: the post needs them, and x must
// not be overwritten while the side stream may still read it.
void join_side_stream(cudaStream_t main, cudaEvent_t coefficients_ready);

}  // namespace mhc::cuda::detail
