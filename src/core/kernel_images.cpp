// The kernel images of this binary, as CMake compiled them (MHC_CUDA_IMAGES, cmake/Cuda.cmake).
#include "mhc/core/kernel_plan.hpp"

#ifndef MHC_CUDA_IMAGES
#define MHC_CUDA_IMAGES ""
#endif

namespace mhc {

const std::vector<KernelImage>& built_images() {
  static const std::vector<KernelImage> images = parse_images(MHC_CUDA_IMAGES);
  return images;
}

}  // namespace mhc
