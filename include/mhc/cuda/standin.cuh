// The stand-in sublayer of the stack (mhc/cpu/model.hpp): F[m][c] = bf16(gain[c] *
// layer_input[m][c]). Elementwise, 16-byte vectors, grid-stride.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

__global__ void standin_sublayer_kernel(const uint16_t* __restrict__ layer_input,
                                        const float* __restrict__ gain, int64_t vectors, int hidden,
                                        uint16_t* __restrict__ out) {
  allow_dependents();
  wait_for_producer();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    const int64_t offset = i * kBf16PerVec;
    const int c = static_cast<int>(offset % hidden);
    float v[8];
    unpack_bf16x8(load_stream_u4(layer_input + offset), v);
    const float4 g0 = load_weight_f4(gain + c), g1 = load_weight_f4(gain + c + 4);
    float g[8];
    unpack_f4x2(g0, g1, g);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] *= g[e];
    store_u4(out + offset, pack_bf16x8(v));
  }
}

// launch_standin_sublayer's preconditions, refused before any CUDA call (cudaErrorInvalidValue):
// at least one token, C in whole 16-byte vectors (a vector's gain must not cross the row), at
// least one multiprocessor (the grid), the pointers. mhc::cuda::standin_sublayer checks them with
// messages.
inline bool standin_args_valid(const uint16_t* layer_input, const float* gain, int64_t tokens,
                               int hidden, const uint16_t* out, int sm_count) {
  return tokens >= 1 && hidden > 0 && hidden % kBf16PerVec == 0 && sm_count >= 1 &&
         layer_input != nullptr && gain != nullptr && out != nullptr;
}

inline cudaError_t launch_standin_sublayer(const uint16_t* layer_input, const float* gain,
                                           int64_t tokens, int hidden, uint16_t* out, int sm_count,
                                           LaunchTarget on) {
  if (!standin_args_valid(layer_input, gain, tokens, hidden, out, sm_count)) {
    return cudaErrorInvalidValue;
  }
  const int64_t vectors = tokens * hidden / kBf16PerVec;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(vectors, kThreads), int64_t(sm_count) * 8);
  return launch_kernel(standin_sublayer_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                       0, on, layer_input, gain, vectors, hidden, out);
}

}  // namespace mhc::cuda
