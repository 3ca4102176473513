// Where a launcher puts its kernels: a stream, and whether the plan wants programmatic dependent
// launch there. Converts from a bare stream (PDL as the device plan says), so callers that do
// not carry a plan stay as they are; the executor passes its plan's answer (kernel config "pdl").
#pragma once
#include <cuda_runtime_api.h>

namespace mhc::cuda {

struct LaunchTarget {
  cudaStream_t stream = nullptr;
  // Ask for PDL; honoured only where the loaded image has the waits (the device plan's pdl).
  bool pdl = true;
  LaunchTarget(cudaStream_t s, bool want_pdl = true) : stream(s), pdl(want_pdl) {}  // NOLINT
};

}  // namespace mhc::cuda
