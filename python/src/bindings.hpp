// The pieces of mhc._C, one function per group of bindings (python/src/*.cpp).
#pragma once
#include <nanobind/nanobind.h>

namespace mhc::python {
void bind_info(nanobind::module_& m);  // has_cuda, workspace_bytes, supports_overlap
}  // namespace mhc::python
