// The pieces of mhc._C, one function per group of bindings (python/src/*.cpp).
#pragma once
#include <nanobind/nanobind.h>

namespace mhc::python {
void bind_info(nanobind::module_& m);    // has_cuda, workspace_bytes, supports_overlap
void bind_ops(nanobind::module_& m);     // prenorm_gemm, coefficients, input_path, post, post_pre
void bind_timing(nanobind::module_& m);  // _time_graph_replays, _graph_nodes (benchmarks)
}  // namespace mhc::python
