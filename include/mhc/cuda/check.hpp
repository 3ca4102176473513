// Host-side CUDA error checking: every CUDA runtime call's result goes through MHC_CUDA_CHECK,
// which throws mhc::Error with the call, file, line and CUDA's message.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "mhc/core/error.hpp"

namespace mhc::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  // The runtime also keeps a failed call's error as the thread's last error: reset it, so that the
  // error mhc reports here does not come back from the caller's next cudaGetLastError (a sticky
  // error, which ends the context, stays whatever is done here).
  (void)cudaGetLastError();
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
              ") in " + call + " at " + file + ":" + std::to_string(line));
}

}  // namespace mhc::cuda

#define MHC_CUDA_CHECK(call)                                                         \
  do {                                                                               \
    cudaError_t mhc_cuda_check_err_ = (call);                                        \
    if (mhc_cuda_check_err_ != cudaSuccess)                                          \
      ::mhc::cuda::throw_cuda_error(mhc_cuda_check_err_, #call, __FILE__, __LINE__); \
  } while (0)
