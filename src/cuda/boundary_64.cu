// The fused boundary with 64-token tiles (sm90_boundary.cuh; 64-column stages), both stream
// counts: apart from the 128-token instantiations in prenorm_n2/n4.cu, as boundary_32.cu.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_boundary<2, 64, 64>(const PrenormArgs&, const BoundaryColumns&,
                                                  LaunchTarget);
template cudaError_t dispatch_boundary<4, 64, 64>(const PrenormArgs&, const BoundaryColumns&,
                                                  LaunchTarget);
template cudaError_t boundary_cluster_capacity<2, 64, 64>(int, int*);
template cudaError_t boundary_cluster_capacity<4, 64, 64>(int, int*);
}  // namespace mhc::cuda
