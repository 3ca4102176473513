#include "mhc/cuda/device_plan.hpp"

#include <fmt/core.h>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {
namespace {

struct DeviceFacts {
  int device = 0;
  ComputeCapability capability;
  int sm_count = 0;
};

// Attribute calls, not cudaGetDeviceProperties (which reads every property, some slowly).
DeviceFacts query_device() {
  DeviceFacts f;
  MHC_CUDA_CHECK(cudaGetDevice(&f.device));
  MHC_CUDA_CHECK(
      cudaDeviceGetAttribute(&f.capability.major, cudaDevAttrComputeCapabilityMajor, f.device));
  MHC_CUDA_CHECK(
      cudaDeviceGetAttribute(&f.capability.minor, cudaDevAttrComputeCapabilityMinor, f.device));
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, f.device));
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
  const DeviceFacts f = query_device();
  const KernelImage image = loaded_image(query_prenorm_variants().front());
  KernelPlan plan = make_plan(f.capability, f.sm_count, image, true, built_images(), config);
  plan.device = f.device;
  plan.row_kernels_max_hidden = query_row_kernels_max_hidden();
  return plan;
}

}  // namespace mhc::cuda
