// A GPU's compute capability and the kernel images a binary holds for it, as the policy code
// sees them (no CUDA).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mhc {

struct ComputeCapability {
  int major = 9;
  int minor = 0;
  bool is_sm90() const { return major == 9 && minor == 0; }
  bool is_sm100_family() const { return major == 10 && (minor == 0 || minor == 3); }
  // Spelled out: the CUDA sources that include this compile as C++17.
  bool operator==(const ComputeCapability& o) const { return major == o.major && minor == o.minor; }
};
ComputeCapability parse_capability(std::string_view s);  // "9.0", "10.3"; throws mhc::Error

// One image of the fat binary: SASS for sm_<arch><variant> or PTX for compute_<arch>.
struct KernelImage {
  int arch = 0;              // 90 for sm_90a, 100 for sm_100f
  char variant = 0;          // 'a' (this exact GPU), 'f' (its family: same major), 0 (plain)
  bool ptx = false;          // PTX, JIT-compiled by the driver at load
  std::string name() const;  // "sm_90a", "compute_80"
  // The sm_90 instructions (TMA, mbarriers, griddepcontrol) are in this image's code.
  bool has_sm90_instructions() const { return arch >= 90; }
  // The sm_90a image: the code built for this exact architecture (wgmma, setmaxnreg).
  bool is_sm90a() const { return arch == 90 && variant == 'a' && !ptx; }
  bool has_wgmma() const { return is_sm90a(); }
  bool operator==(const KernelImage& o) const {
    return arch == o.arch && variant == o.variant && ptx == o.ptx;
  }
};
// "sm_90a,sm_80,sm_100f,compute_80" (empty: none); throws mhc::Error on a malformed entry.
std::vector<KernelImage> parse_images(std::string_view list);
// The names joined by `separator` ("" for none).
std::string image_names(const std::vector<KernelImage>& images, std::string_view separator = ", ");
// The images this binary holds (CMake MHC_CUDA_ARCHS, MHC_CUDA_PTX); empty without CUDA.
const std::vector<KernelImage>& built_images();
// The image the driver loads on a GPU of capability cc: SASS of the same major version (an 'a'
// image only on its exact capability, a plain one only up from its minor), else the newest PTX
// not newer than the GPU (JIT), else none.
std::optional<KernelImage> image_for(ComputeCapability cc, const std::vector<KernelImage>& images);

}  // namespace mhc
