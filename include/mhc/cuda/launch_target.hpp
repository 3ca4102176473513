// Where a launcher puts its kernels: a stream, whether to launch them with programmatic dependent
// launch there, and the device's answers about its kernels. All are the caller's: pdl is the
// resolved LaunchTuning::pdl (the plan allows it only where the loaded image has the waits), never
// a default; queries is LaunchTuning::queries (null: the launchers ask the runtime each time).
#pragma once
#include <cuda_runtime_api.h>

namespace mhc::cuda {

class DeviceQueries;  // mhc/cuda/device_queries.hpp

struct LaunchTarget {
  cudaStream_t stream = nullptr;
  bool pdl = false;
  DeviceQueries* queries = nullptr;
  LaunchTarget(cudaStream_t s, bool with_pdl, DeviceQueries* device_queries = nullptr)
      : stream(s), pdl(with_pdl), queries(device_queries) {}
};

}  // namespace mhc::cuda
