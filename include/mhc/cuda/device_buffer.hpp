// A typed, move-only cudaMalloc'd buffer with checked synchronous copies. Host-only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "mhc/cuda/check.hpp"

namespace mhc::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    // At least one element so that even an empty buffer has a valid, aligned address.
    MHC_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&data_), (count > 0 ? count : 1) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  // Done when it returns: from pageable memory cudaMemcpy may return before the DMA has landed,
  // ordered only on the legacy default stream, which non-blocking streams do not wait for.
  void upload(const T* host, size_t count) {
    if (count == 0) return;
    MHC_CUDA_CHECK(cudaMemcpy(data_, host, count * sizeof(T), cudaMemcpyHostToDevice));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void download(T* host, size_t count) const {
    if (count == 0) return;
    MHC_CUDA_CHECK(cudaMemcpy(host, data_, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
  // Every byte set to `value` (0xFF poisons floats and bf16 with NaNs).
  // Done when it returns: cudaMemset alone is asynchronous on the legacy default stream, which
  // work on non-blocking streams does not wait for (not for the forward path).
  void fill_bytes(int value) {
    MHC_CUDA_CHECK(cudaMemset(data_, value, (count_ > 0 ? count_ : 1) * sizeof(T)));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace mhc::cuda
