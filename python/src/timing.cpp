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
    cudaKernelNodeParams kp{};
    MHC_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &kp));
    const char* name = nullptr;
    if (cudaFuncGetName(&name, kp.func) != cudaSuccess || !name) name = "?";
    out.push_back(std::string("kernel ") + name + " grid=(" + std::to_string(kp.gridDim.x) + "," +
                  std::to_string(kp.gridDim.y) + "," + std::to_string(kp.gridDim.z) + ") block=(" +
                  std::to_string(kp.blockDim.x) + "," + std::to_string(kp.blockDim.y) + "," +
                  std::to_string(kp.blockDim.z) + ") smem=" + std::to_string(kp.sharedMemBytes));
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
