// bf16 -> fp32 widening (exact): a bf16 norm weight given to the kernels, which read fp32
// weights, is widened once per call into the caller's workspace.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

__global__ void widen_bf16_kernel(const uint16_t* __restrict__ in, int64_t count,
                                  float* __restrict__ out) {
  allow_dependents();
  wait_for_producer();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = __uint_as_float(uint32_t(in[i]) << 16);
  }
}

// launch_widen_bf16's preconditions, refused before any CUDA call (cudaErrorInvalidValue): at
// least one value, the pointers. mhc::cuda::widen_bf16 checks them with messages.
inline bool widen_args_valid(const uint16_t* in, int64_t count, const float* out) {
  return count >= 1 && in != nullptr && out != nullptr;
}

inline cudaError_t launch_widen_bf16(const uint16_t* in, int64_t count, float* out,
                                     LaunchTarget on) {
  if (!widen_args_valid(in, count, out)) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>(ceil_div(count, int64_t(kThreads)), 1024));
  return launch_kernel(widen_bf16_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                       on, in, count, out);
}

}  // namespace mhc::cuda
