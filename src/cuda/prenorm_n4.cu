// The prenorm GEMM instantiations for n = 4.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_prenorm<4>(const PrenormArgs&, bool, int, LaunchTarget);
template cudaError_t prenorm_attributes<4>(int, cudaFuncAttributes*);
template cudaError_t tma_cluster_capacity<4>(int, int*);
MHC_INSTANTIATE_BOUNDARY(4, 64, 128);
}  // namespace mhc::cuda
