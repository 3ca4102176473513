#include "mhc/schedule/capture_edges.hpp"

#include <algorithm>

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

}  // namespace

void depend_programmatically(cudaStream_t stream, CaptureDependencies producers) {
  set_dependencies(stream, producers, producers);
}

namespace {

// Whether `node` depends on `dependency` by an edge of its own (not through other nodes).
bool depends_directly(cudaGraphNode_t node, cudaGraphNode_t dependency) {
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  if (count == 0 || count > CaptureDependencies::kMax) return false;
  std::array<cudaGraphNode_t, CaptureDependencies::kMax> nodes{};
  std::array<cudaGraphEdgeData, CaptureDependencies::kMax> edges{};
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nodes.data(), edges.data(), &count));
  return std::find(nodes.begin(), nodes.begin() + count, dependency) != nodes.begin() + count;
}

}  // namespace

bool fork_from(cudaStream_t main, cudaStream_t side) {
  if (main == side) return false;
  const CaptureDependencies producers = capture_dependencies(main);
  const CaptureDependencies current = capture_dependencies(side);
  if (producers.count == 0 || current.count <= producers.count) return false;
  for (size_t i = 0; i < producers.count; ++i) {
    if (!current.contains(producers.nodes[i])) return false;  // side did not wait for main
  }
  for (size_t i = 0; i < current.count; ++i) {
    const cudaGraphNode_t d = current.nodes[i];
    if (producers.contains(d)) continue;
    bool covered = false;
    for (size_t j = 0; j < producers.count && !covered; ++j) {
      covered = depends_directly(producers.nodes[j], d);
    }
    if (!covered) return false;  // e.g. no join since the side stream's last launch
  }
  // Ordinary edges: a launch with programmatic stream serialization makes them programmatic.
  set_dependencies(side, producers, CaptureDependencies{});
  return true;
}

}  // namespace mhc::cuda
