// mhc._C: the nanobind extension module (the contract with the Python layer: docs/python.md).
#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "mhc/core/version.hpp"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "mhc's C++/CUDA kernels on DLPack arrays (torch, numpy, CuPy), zero-copy";
  m.attr("__version__") = nb::str(mhc::kVersion.data(), mhc::kVersion.size());
  mhc::python::bind_info(m);
  mhc::python::bind_ops(m);
  mhc::python::bind_timing(m);
}
