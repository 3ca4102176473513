// The prenorm GEMM instantiations for n = 2.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
template cudaError_t dispatch_prenorm<2>(const PrenormArgs&, bool, int, LaunchTarget);
template cudaError_t prenorm_attributes<2>(int, cudaFuncAttributes*);
template cudaError_t tma_cluster_capacity<2>(int, int*);
MHC_INSTANTIATE_BOUNDARY(2, 64, 128);
}  // namespace mhc::cuda
