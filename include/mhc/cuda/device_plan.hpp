// The kernel plan (mhc/core/kernel_plan.hpp) of the current CUDA device: built from the kernel
// image the runtime reports loading for this binary's prenorm kernels (cudaFuncGetAttributes:
// binaryVersion is the SASS architecture, ptxVersion the virtual one it came from; a GPU without
// its own SASS here runs PTX the driver JIT-compiled, binaryVersion then being the GPU's).
#pragma once
#include <string>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/kernel_plan.hpp"

namespace mhc::cuda {

// One prenorm kernel variant (TF32, n = 4) as the runtime loaded it on the current device.
struct KernelVariantInfo {
  PrenormKernel kernel = PrenormKernel::mma16;
  int binary_version = 0, ptx_version = 0;  // 90 for sm_90
  int registers = 0;
  size_t local_bytes = 0;
};
std::vector<KernelVariantInfo> query_prenorm_variants();

// The image of this binary that the current device loaded: the built image whose architecture
// the runtime reports (SASS), else the PTX it was JIT-compiled from.
KernelImage loaded_image(const KernelVariantInfo& mma16);

// The launch description of the current device under `config` (its switches and tactics
// applied), made from what the runtime reports of the device and the images it loaded; throws
// mhc::Error as make_plan does. Queries the device each time (a few attribute calls): make it
// once per device and config and keep it (the executor, the C++ API and the Python ops do).
KernelPlan device_plan(const KernelConfig& config);

}  // namespace mhc::cuda
