// The fused boundary with the wide stages (sm90_boundary.cuh: 32-token tiles of 128-column
// stages, four column warps per 16 rows), both stream counts: apart from the other shapes'
// instantiations, as boundary_32.cu.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_boundary<2, 128, 32>(const PrenormArgs&, const BoundaryColumns&,
                                                   LaunchTarget);
template cudaError_t dispatch_boundary<4, 128, 32>(const PrenormArgs&, const BoundaryColumns&,
                                                   LaunchTarget);
template cudaError_t boundary_cluster_capacity<2, 128, 32>(int, int*);
template cudaError_t boundary_cluster_capacity<4, 128, 32>(int, int*);
}  // namespace mhc::cuda
