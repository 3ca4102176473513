// Where a launcher puts its kernels: a stream, and whether to launch them with programmatic
// dependent launch there. Both are the caller's: pdl is the resolved LaunchTuning::pdl (the plan
// allows it only where the loaded image has the waits), never a default.
#pragma once
#include <cuda_runtime_api.h>

namespace mhc::cuda {

struct LaunchTarget {
  cudaStream_t stream = nullptr;
  bool pdl = false;
  LaunchTarget(cudaStream_t s, bool with_pdl) : stream(s), pdl(with_pdl) {}
};

}  // namespace mhc::cuda
