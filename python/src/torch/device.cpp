#include "device.hpp"

#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <string>
#include <vector>

#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/cuda/check.hpp"
#endif

namespace mhc::torch_ops {

namespace {

void check_shim(AOTITorchError err, const char* what) {
  if (err != AOTI_TORCH_SUCCESS) fail(std::string("mhc: ") + what + " failed in torch");
}

}  // namespace

Launching::Launching(const Tensor& t) : Launching(where(t)) {}

Launching::Launching(const Where& w) {
  if (!w.cuda()) return;
  target.cuda = true;
  target.device = w.index;
  if (torch::stable::accelerator::getCurrentDeviceIndex() != w.index) guard_.emplace(w.index);
  target.stream = current_stream(w.index);
}

uintptr_t current_stream(int device) {
#if MHC_WITH_CUDA
  void* stream = nullptr;
  check_shim(aoti_torch_get_current_cuda_stream(device, &stream), "getting the current stream");
  return reinterpret_cast<uintptr_t>(stream);
#else
  (void)device;
  fail("mhc: the tensors are on a CUDA device, but mhc was built without the CUDA backend");
#endif
}

bool capturing(uintptr_t stream) {
#if MHC_WITH_CUDA
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MHC_CUDA_CHECK(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status));
  return status != cudaStreamCaptureStatusNone;
#else
  (void)stream;
  return false;
#endif
}

void synchronize(int device) {
#if MHC_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(device);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
#else
  (void)device;
#endif
}

Tensor new_tensor(std::initializer_list<int64_t> shape, int32_t dtype, const Where& device) {
  std::vector<int64_t> sizes(shape), strides(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = step;
    step *= sizes[i] > 1 ? sizes[i] : 1;
  }
  AtenTensorHandle handle = nullptr;
  check_shim(aoti_torch_empty_strided(int64_t(sizes.size()), sizes.data(), strides.data(), dtype,
                                      device.type, device.index, &handle),
             "allocating an output");
  return Tensor(handle);
}

Tensor new_zeros(std::initializer_list<int64_t> shape, int32_t dtype, const Where& device) {
  Tensor t = new_tensor(shape, dtype, device);
  check_shim(aoti_torch_zero_(t.get()), "zero-filling a workspace");
  return t;
}

}  // namespace mhc::torch_ops
