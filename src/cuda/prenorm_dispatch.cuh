// Definition of dispatch_prenorm, included by prenorm_n2.cu and prenorm_n4.cu only.
#pragma once
#include "mhc/cuda/prenorm_gemm.cuh"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {

template <int kStreams>
cudaError_t dispatch_prenorm(const PrenormArgs& args, bool compensated, int rows_per_tile,
                             cudaStream_t stream) {
  if (rows_per_tile == 16) {
    return compensated ? launch_prenorm_coefficients<kStreams, 1, true>(args, stream)
                       : launch_prenorm_coefficients<kStreams, 1, false>(args, stream);
  }
  return compensated ? launch_prenorm_coefficients<kStreams, 4, true>(args, stream)
                     : launch_prenorm_coefficients<kStreams, 4, false>(args, stream);
}

}  // namespace mhc::cuda
