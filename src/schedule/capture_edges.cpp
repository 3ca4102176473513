#include "mhc/schedule/capture_edges.hpp"

#include <algorithm>
#include <cstring>

#include "mhc/cuda/check.hpp"

namespace mhc::cuda {

bool CaptureDependencies::contains(cudaGraphNode_t node) const {
  return std::find(nodes.begin(), nodes.begin() + count, node) != nodes.begin() + count;
}

bool CaptureDependencies::operator==(const CaptureDependencies& o) const {
  return count == o.count && std::equal(nodes.begin(), nodes.begin() + count, o.nodes.begin());
}

CaptureDependencies capture_dependencies(cudaStream_t stream) {
  CaptureDependencies d;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* nodes = nullptr;
  size_t count = 0;
  MHC_CUDA_CHECK(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive || count > CaptureDependencies::kMax) return d;
  std::copy(nodes, nodes + count, d.nodes.begin());
  d.count = count;
  return d;
}

bool all_kernels(const CaptureDependencies& d) {
  for (size_t i = 0; i < d.count; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    MHC_CUDA_CHECK(cudaGraphNodeGetType(d.nodes[i], &type));
    if (type != cudaGraphNodeTypeKernel) return false;
  }
  return d.count > 0;
}

namespace {

// Sets `stream`'s capture dependencies to `deps`, the edges from the nodes in `programmatic`
// programmatic and the others ordinary.
void set_dependencies(cudaStream_t stream, CaptureDependencies deps,
                      const CaptureDependencies& programmatic) {
  std::array<cudaGraphEdgeData, CaptureDependencies::kMax> edges{};
  const size_t count = std::min(deps.count, CaptureDependencies::kMax);
  for (size_t i = 0; i < count; ++i) {
    if (!programmatic.contains(deps.nodes[i])) continue;
    edges[i].from_port = cudaGraphKernelNodePortProgrammatic;
    edges[i].type = cudaGraphDependencyTypeProgrammatic;
  }
  MHC_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, deps.nodes.data(), edges.data(), count,
                                                     cudaStreamSetCaptureDependencies));
}

// A node's direct dependencies; empty where it has more than kMax.
CaptureDependencies dependencies_of(cudaGraphNode_t node) {
  CaptureDependencies d;
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  if (count == 0 || count > CaptureDependencies::kMax) return d;
  std::array<cudaGraphEdgeData, CaptureDependencies::kMax> edges{};
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, d.nodes.data(), edges.data(), &count));
  d.count = count;
  return d;
}

// Whether a node is a kernel of this library. Every one of them calls griddepcontrol.wait before
// it reads its inputs, so it finishes after its own producers, whatever edges it was captured
// with; a kernel of another library launched with PDL might not. A node captured through another
// copy of the CUDA runtime (torch's) may not resolve to a function this runtime knows: the query
// then fails, and the error it leaves is cleared so that the next checked call does not see it.
bool is_mhc_kernel(cudaGraphNode_t node) {
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  MHC_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return false;
  cudaKernelNodeParams params{};
  const char* name = nullptr;
  if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess || params.func == nullptr ||
      cudaFuncGetName(&name, params.func) != cudaSuccess || name == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  return std::strstr(name, "3mhc4cuda") != nullptr;  // mangled: namespace mhc::cuda
}

// Whether `dependency` precedes `producer` within two edges through this library's kernels (the
// recipes: post_pre, or post then input_path, after the join).
bool precedes(cudaGraphNode_t dependency, cudaGraphNode_t producer) {
  const CaptureDependencies direct = dependencies_of(producer);
  if (direct.contains(dependency)) return true;
  for (size_t i = 0; i < direct.count; ++i) {
    if (is_mhc_kernel(direct.nodes[i]) && dependencies_of(direct.nodes[i]).contains(dependency)) {
      return true;
    }
  }
  return false;
}

}  // namespace

void depend_programmatically(cudaStream_t stream, CaptureDependencies producers) {
  set_dependencies(stream, producers, producers);
}

bool fork_from(cudaStream_t main, cudaStream_t side) {
  if (main == side) return false;
  const CaptureDependencies producers = capture_dependencies(main);
  const CaptureDependencies current = capture_dependencies(side);
  if (producers.count == 0 || current.count <= producers.count) return false;
  for (size_t i = 0; i < producers.count; ++i) {
    // Side waited for main, and main's last nodes finish after their own producers.
    if (!current.contains(producers.nodes[i]) || !is_mhc_kernel(producers.nodes[i])) return false;
  }
  for (size_t i = 0; i < current.count; ++i) {
    const cudaGraphNode_t d = current.nodes[i];
    if (producers.contains(d)) continue;
    bool covered = false;
    for (size_t j = 0; j < producers.count && !covered; ++j) {
      covered = precedes(d, producers.nodes[j]);
    }
    if (!covered) return false;  // e.g. no join since the side stream's last launch
  }
  // Ordinary edges: a launch with programmatic stream serialization makes them programmatic.
  set_dependencies(side, producers, CaptureDependencies{});
  return true;
}

}  // namespace mhc::cuda
