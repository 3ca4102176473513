// Edges between streams in a captured CUDA graph: the overlap's fork (docs/overlap.md, "The side
// stream on fewer SMs, and the programmatic fork").
//
// A programmatic edge lets the side stream's coefficient launch start while the kernel that
// produced x still runs; the coefficient kernels wait for it with griddepcontrol.wait before they
// read x. StackSchedule makes its fork so (depend_programmatically); fork_from does it for
// callers that fork the side stream themselves (the Python ops).
//
// Nothing here allocates: dependency sets are copied into fixed arrays.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>

namespace mhc::cuda {

// A capturing stream's dependency set (the nodes its next node will depend on); empty when the
// stream is not capturing or the set has more than kMax nodes.
struct CaptureDependencies {
  static constexpr size_t kMax = 4;
  std::array<cudaGraphNode_t, kMax> nodes{};
  size_t count = 0;
  bool contains(cudaGraphNode_t node) const;
  bool operator==(const CaptureDependencies& o) const;
};

CaptureDependencies capture_dependencies(cudaStream_t stream);

// Whether the set is non-empty and every node in it is a kernel node.
bool all_kernels(const CaptureDependencies& d);

// The next node captured on `stream` depends on `producers` alone, each by a programmatic edge: it
// may start once every CTA of theirs has called griddepcontrol.launch_dependents (or exited) and
// sees their writes after its griddepcontrol.wait.
void depend_programmatically(cudaStream_t stream, CaptureDependencies producers);

// The overlap's fork for a caller that has just made `side` wait for `main` (an event record and
// wait, as torch's Stream.wait_stream does) and launches the coefficient path on `side` next.
// In a captured graph a launch with programmatic stream serialization (PDL) takes every edge into
// it as programmatic, and with such edges from two streams (main's producer of x and the side
// stream's previous launch) it cannot start early behind either (docs/decisions.md, "The
// overlap's side launch"). So while capturing, where main's last nodes are this
// library's kernels, side's dependencies that precede them within two edges through this
// library's kernels (the join before the previous post put the side stream's last launch there)
// are dropped: no ordering is lost, and the launch hangs off main's last nodes alone. Returns
// whether it changed anything; outside capture, or where a condition fails, it changes nothing.
bool fork_from(cudaStream_t main, cudaStream_t side);

}  // namespace mhc::cuda
