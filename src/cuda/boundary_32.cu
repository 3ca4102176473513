// The fused boundary with 32-column stages (sm90_boundary.cuh), both stream counts: apart from
// the 64-column instantiations in prenorm_n2/n4.cu, whose SASS changes when both share a
// translation unit.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_boundary<2, 32, 128>(const PrenormArgs&, const BoundaryColumns&,
                                                   LaunchTarget);
template cudaError_t dispatch_boundary<4, 32, 128>(const PrenormArgs&, const BoundaryColumns&,
                                                   LaunchTarget);
template cudaError_t boundary_cluster_capacity<2, 32, 128>(int, int*);
template cudaError_t boundary_cluster_capacity<4, 32, 128>(int, int*);
}  // namespace mhc::cuda
