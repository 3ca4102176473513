#include "delay_observer.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc::cuda::test {
namespace {

__global__ void spin_kernel(int64_t cycles) {
  const int64_t start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void enqueue_spin(cudaStream_t stream, int64_t cycles) {
  if (cycles <= 0) return;
  spin_kernel<<<1, 1, 0, stream>>>(cycles);
  MHC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mhc::cuda::test
