// Benchmark helpers of mhc._C for bench/python_ops.py (private, underscored): CUDA graphs made
// in Python (torch.cuda.CUDAGraph) timed by the loop `mhc bench kernels` times its own graphs
// with (mhc::cuda::time_graph_replays), and what such a graph holds, so that a Python/C++ ratio
// compares the launches, not two timing methods.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "mhc/core/error.hpp"
#if MHC_WITH_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "mhc/cuda/check.hpp"
#include "mhc/cuda/timing.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace mhc::python {

namespace {

#if MHC_WITH_CUDA
// (median µs, least µs, warm-up replays) per replay of the graph executables `execs` (integer
// cudaGraphExec_t handles, one per input set, replayed in turn), on `stream` (cudaStream_t).
std::tuple<double, double, int> time_graph_replays(const std::vector<uintptr_t>& execs, int reps,
                                                   uintptr_t stream) {
  if (execs.empty() || reps < 1) throw Error("_time_graph_replays: no graphs or reps < 1");
  std::vector<cudaGraphExec_t> handles;
  for (uintptr_t e : execs) handles.push_back(reinterpret_cast<cudaGraphExec_t>(e));
  nb::gil_scoped_release unlocked;
  const cuda::TimedResult r =
      cuda::time_graph_replays(handles, reps, reinterpret_cast<cudaStream_t>(stream));
  return {r.median_us, r.min_us, cuda::graph_warmup_replays(int(execs.size()))};
}

// The driver entry points graph_nodes reads kernel nodes with. A captured torch graph holds
// kernels of other CUDA runtimes (torch's own; the torch ops library's, which links its own
// cudart): the runtime's cudaGraphKernelNodeGetParams fails on those (invalid device function, as
// it maps the node's function to one this runtime registered), the driver's reads any node. Found
// through the runtime (cudaGetDriverEntryPointByVersion), so that _C does not link libcuda.
struct DriverGraphApi {
  PFN_cuGraphKernelNodeGetParams_v12000 kernel_node_params = nullptr;
  PFN_cuFuncGetName_v12030 func_name = nullptr;      // null on a driver older than CUDA 12.3
  PFN_cuKernelGetName_v12030 kernel_name = nullptr;  // likewise
  PFN_cuGetErrorName_v6000 error_name = nullptr;
};

// A driver function of the ABI of CUDA `version` (e.g. 12000 for 12.0): null if the driver has
// none, an error naming it if `required`.
void* driver_entry_point(const char* symbol, int version, bool required) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found);
  if (err == cudaSuccess && found == cudaDriverEntryPointSuccess && fn) return fn;
  if (err != cudaSuccess) {
    if (required) {
      const std::string call = std::string("cudaGetDriverEntryPointByVersion(") + symbol + ")";
      cuda::throw_cuda_error(err, call.c_str(), __FILE__, __LINE__);
    }
    (void)cudaGetLastError();  // an optional query's failure is not the caller's error
    return nullptr;
  }
  if (required)
    throw Error(std::string("_graph_nodes: the CUDA driver has no ") + symbol + " of CUDA " +
                std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
                " (cudaGetDriverEntryPointByVersion query result " + std::to_string(int(found)) +
                ")");
  return nullptr;
}

const DriverGraphApi& driver_graph_api() {
  static const DriverGraphApi api = [] {
    DriverGraphApi a;
    a.kernel_node_params = reinterpret_cast<PFN_cuGraphKernelNodeGetParams_v12000>(
        driver_entry_point("cuGraphKernelNodeGetParams", 12000, true));
    a.func_name = reinterpret_cast<PFN_cuFuncGetName_v12030>(
        driver_entry_point("cuFuncGetName", 12030, false));
    a.kernel_name = reinterpret_cast<PFN_cuKernelGetName_v12030>(
        driver_entry_point("cuKernelGetName", 12030, false));
    a.error_name = reinterpret_cast<PFN_cuGetErrorName_v6000>(
        driver_entry_point("cuGetErrorName", 6000, false));
    return a;
  }();
  return api;
}

void check_driver(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const DriverGraphApi& api = driver_graph_api();
  if (!api.error_name || api.error_name(r, &name) != CUDA_SUCCESS || !name) name = "?";
  throw Error(std::string("CUDA driver error ") + std::to_string(int(r)) + " (" + name + ") in " +
              call);
}

// The name of a kernel node's function: from its CUfunction, else its CUkernel (a node may hold
// either); "?" where the driver cannot tell (a driver older than CUDA 12.3 has no name queries).
std::string kernel_name(const DriverGraphApi& api, const CUDA_KERNEL_NODE_PARAMS_v2& kp) {
  const char* name = nullptr;
  if (kp.func && api.func_name) {
    if (api.func_name(&name, kp.func) != CUDA_SUCCESS) name = nullptr;
  } else if (kp.kern && api.kernel_name) {
    if (api.kernel_name(&name, kp.kern) != CUDA_SUCCESS) name = nullptr;
  }
  return name ? name : "?";
}

// The nodes of a graph (an integer cudaGraph_t): "kernel <name> grid=(x,y,z) block=(x,y,z)
// smem=N" for kernel nodes, the node type's number otherwise.
std::vector<std::string> graph_nodes(uintptr_t graph) {
  auto* g = reinterpret_cast<cudaGraph_t>(graph);
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  MHC_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  std::vector<std::string> out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    MHC_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) {
      out.push_back("type " + std::to_string(int(type)));
      continue;
    }
    const DriverGraphApi& api = driver_graph_api();
    CUDA_KERNEL_NODE_PARAMS_v2 kp{};
    check_driver(api.kernel_node_params(node, &kp), "cuGraphKernelNodeGetParams");
    out.push_back("kernel " + kernel_name(api, kp) + " grid=(" + std::to_string(kp.gridDimX) + "," +
                  std::to_string(kp.gridDimY) + "," + std::to_string(kp.gridDimZ) + ") block=(" +
                  std::to_string(kp.blockDimX) + "," + std::to_string(kp.blockDimY) + "," +
                  std::to_string(kp.blockDimZ) + ") smem=" + std::to_string(kp.sharedMemBytes));
  }
  return out;
}
#else
[[noreturn]] void no_cuda() { throw Error("mhc._C was built without the CUDA backend"); }
std::tuple<double, double, int> time_graph_replays(const std::vector<uintptr_t>&, int, uintptr_t) {
  no_cuda();
}
std::vector<std::string> graph_nodes(uintptr_t) { no_cuda(); }
#endif

}  // namespace

void bind_timing(nb::module_& m) {
  m.def("_time_graph_replays", &time_graph_replays, "execs"_a, "reps"_a, "stream"_a,
        "(median µs, least µs, warm-up replays) per replay of the CUDA graph executables, timed "
        "as `mhc bench kernels` times its graphs (benchmarks only).");
  m.def("_graph_nodes", &graph_nodes, "graph"_a,
        "The nodes of a CUDA graph (cudaGraph_t as an integer), for benchmarks.");
}

}  // namespace mhc::python
