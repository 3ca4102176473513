// The prenorm GEMM instantiations for n = 4.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_prenorm<4>(const PrenormArgs&, bool, int, LaunchTarget);
template cudaError_t prenorm_attributes<4>(int, cudaFuncAttributes*);
template cudaError_t tma_cluster_capacity<4>(int, int*);
template cudaError_t dispatch_boundary<4, 64, 128>(const PrenormArgs&, const BoundaryColumns&,
                                                   LaunchTarget);
template cudaError_t boundary_cluster_capacity<4, 64, 128>(int, int*);
}  // namespace mhc::cuda
