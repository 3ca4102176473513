#include "mhc/cuda/device_plan.hpp"

#include <fmt/core.h>

#include <array>
#include <memory>
#include <mutex>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {
namespace {

struct DeviceFacts {
  ComputeCapability capability;
  int sm_count = 0;
  KernelImage image;
  int row_kernels_max_hidden = 0;
};

DeviceFacts query_device() {
  int device = 0;
  cudaDeviceProp prop{};
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  MHC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceFacts f;
  f.capability = {prop.major, prop.minor};
  f.sm_count = prop.multiProcessorCount;
  f.image = loaded_image(query_prenorm_variants().front());
  f.row_kernels_max_hidden = query_row_kernels_max_hidden();
  return f;
}

}  // namespace

std::vector<KernelVariantInfo> query_prenorm_variants() {
  std::vector<KernelVariantInfo> out;
  for (PrenormKernel k : {PrenormKernel::mma16, PrenormKernel::mma64, PrenormKernel::tma128}) {
    cudaFuncAttributes attr{};
    const cudaError_t err = prenorm_attributes<4>(rows_per_tile(k), &attr);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw Error(
          fmt::format("the runtime has no kernel image of this binary for the current GPU "
                      "({} for the {} prenorm kernel; images built: {})",
                      cudaGetErrorString(err), to_string(k), built_images().size()));
    }
    out.push_back({k, attr.binaryVersion, attr.ptxVersion, attr.numRegs, attr.localSizeBytes});
  }
  return out;
}

KernelImage loaded_image(const KernelVariantInfo& v) {
  for (const KernelImage& im : built_images()) {
    if (!im.ptx && im.arch == v.binary_version && im.arch == v.ptx_version) return im;
  }
  for (const KernelImage& im : built_images()) {
    if (im.ptx && im.arch == v.ptx_version) return im;
  }
  // Not in the build's list (cannot happen with CMake's flags): say what the runtime said.
  KernelImage im;
  im.arch = v.ptx_version;
  im.ptx = v.binary_version != v.ptx_version;
  return im;
}

KernelPlan device_plan(const KernelConfig& config) {
  const KernelPlan& base = default_device_plan();
  KernelPlan plan = make_plan(base.capability, base.sm_count, base.image, true, base.built, config);
  plan.row_kernels_max_hidden = base.row_kernels_max_hidden;
  return plan;
}

// Read on every launch (PDL): a per-thread memo of the last device's plan skips the lock.
const KernelPlan& default_device_plan() {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static std::array<std::unique_ptr<KernelPlan>, kMaxDevices> plans;
  thread_local int memo_device = -1;
  thread_local const KernelPlan* memo = nullptr;
  int device = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  if (device == memo_device) return *memo;
  if (device < 0 || device >= kMaxDevices)
    throw Error(fmt::format("device {} out of range", device));
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<KernelPlan>& plan = plans[size_t(device)];
  if (!plan) {
    const DeviceFacts f = query_device();
    plan = std::make_unique<KernelPlan>(
        make_plan(f.capability, f.sm_count, f.image, true, built_images(), KernelConfig{}));
    plan->row_kernels_max_hidden = f.row_kernels_max_hidden;
  }
  memo_device = device;
  memo = plan.get();
  return *plan;
}

}  // namespace mhc::cuda
