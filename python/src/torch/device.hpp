// The torch side of a launch: where a call's tensors live, the current stream of their device
// (torch's, so that the ops order with the caller's work and with CUDA-graph capture), the device
// guard, and the tensors the ops allocate (through torch's allocator: the caching allocator on
// CUDA).
#pragma once
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "../launch.hpp"
#include "checks.hpp"

namespace mhc::torch_ops {

// Makes the device of `t` current for the call's launches (only where it is not already) and
// says where to launch: the CPU backend, or the CUDA device and torch's current stream there.
class Launching {
 public:
  explicit Launching(const Tensor& t);
  // ... on `device`, the device of the call's tensors that its checks have read already.
  explicit Launching(const Where& device);
  launch::Target target;

 private:
  std::optional<torch::stable::accelerator::DeviceGuard> guard_;
};

// torch's current stream of CUDA device `device` (a cudaStream_t as an integer).
uintptr_t current_stream(int device);
// Whether `stream` is being captured into a CUDA graph.
bool capturing(uintptr_t stream);
// Waits for all work on CUDA device `device` (made current for the call).
void synchronize(int device);

// A contiguous tensor of `dtype` (aoti_torch_dtype_* code) on `device`.
Tensor new_tensor(std::initializer_list<int64_t> shape, int32_t dtype, const Where& device);
// ... filled with zeros (on torch's current stream of the device).
Tensor new_zeros(std::initializer_list<int64_t> shape, int32_t dtype, const Where& device);

}  // namespace mhc::torch_ops
