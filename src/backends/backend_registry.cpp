// Picks a backend by name. Compiled with MHC_WITH_CUDA=1 when the CUDA backend is built in.
#include <fmt/core.h>

#include "mhc/core/backend.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/cpu_backend.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/cuda_backend.hpp"
#endif

namespace mhc {

std::vector<std::string> built_backends() {
#if MHC_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(std::string_view name, const KernelConfig& config) {
  if (name == "cpu") return cpu::make_backend(config);
  if (name == "cuda") {
#if MHC_WITH_CUDA
    if (!cuda::device_present()) {
      throw Error("backend 'cuda' asked for, but no CUDA GPU is visible (use --backend cpu)");
    }
    return cuda::make_backend(config);
#else
    throw Error(
        "backend 'cuda' asked for, but this build has no CUDA support (nvcc was not found "
        "when it was configured); use --backend cpu");
#endif
  }
  if (name == "auto") {
#if MHC_WITH_CUDA
    if (cuda::device_present()) return cuda::make_backend(config);
#endif
    return cpu::make_backend(config);
  }
  throw Error(fmt::format("unknown backend '{}' (known: auto, cpu, cuda)", name));
}

}  // namespace mhc
