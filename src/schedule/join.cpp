#include "join.hpp"

#include "mhc/cuda/check.hpp"

namespace mhc::cuda::detail {

void join_side_stream(cudaStream_t main, cudaEvent_t coefficients_ready) {
  MHC_CUDA_CHECK(cudaStreamWaitEvent(main, coefficients_ready, 0));
}

}  // namespace mhc::cuda::detail
