// Queries that launch nothing: has_cuda, workspace_bytes, supports_overlap.
#include <nanobind/nanobind.h>

#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bindings.hpp"

namespace nb = nanobind;

namespace mhc::python {

namespace {

bool has_cuda() {
#if MHC_WITH_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

}  // namespace

void bind_info(nb::module_& m) {
  m.def("has_cuda", &has_cuda,
        "Whether the extension was built with the CUDA backend and a GPU is visible.");
}

}  // namespace mhc::python
