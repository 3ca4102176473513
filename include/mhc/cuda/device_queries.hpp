// What the runtime answers about a device's kernels that never changes for the device: how many
// clusters of a kernel it holds at once (cudaOccupancyMaxActiveClusters), and that a kernel may
// take its dynamic shared memory (cudaFuncSetAttribute, which holds per device). The launchers
// asked both on every launch; a DeviceQueries asks each once per device instead. One is made with
// each device plan (mhc::cuda::device_plan, KernelPlan::queries) and shared by the plan's copies;
// it reaches the launchers through LaunchTuning::queries and LaunchTarget::queries.
//
// Answers are asked at their first use (most plans never launch most kernels), under a mutex, into
// fixed tables: nothing allocates after construction (a forward allocates nothing). A launch on
// another device than the plan's, or past the tables' room, asks the runtime as before. Remaking
// the plan (a new kernel config) starts an empty one; a cudaDeviceReset needs new plans.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

#include "mhc/core/sm90_boundary_plan.hpp"

namespace mhc::cuda {

class DeviceQueries {
 public:
  explicit DeviceQueries(int device) : device_(device) {}
  DeviceQueries(const DeviceQueries&) = delete;
  DeviceQueries& operator=(const DeviceQueries&) = delete;

  int device() const { return device_; }
  // Lets `kernel` take `bytes` of dynamic shared memory on this device (the attribute is only a
  // ceiling, so a kernel already allowed as much is not asked again).
  cudaError_t allow_dynamic_smem(const void* kernel, int bytes);
  // How many clusters of `ctas` CTAs (1..8) of `kernel`, `threads` threads and `smem_bytes` of
  // dynamic shared memory each, the device holds at once; allows the shared memory first.
  cudaError_t max_active_clusters(const void* kernel, int ctas, int threads, int smem_bytes,
                                  int* clusters);
  // The same for clusters of 1..8 CTAs at once (the fused boundary's ClusterCapacity).
  cudaError_t cluster_capacity(const void* kernel, int threads, int smem_bytes,
                               ClusterCapacity* capacity);

 private:
  static constexpr int kMaxClusterCtas = kBoundaryMaxSplits;
  static constexpr int kMaxKernels = 64;  // far more than a build's kernels with these queries
  struct Kernel {
    const void* fn = nullptr;
    int smem_allowed = -1;            // the largest dynamic shared memory set (-1: none)
    int threads = 0, smem_bytes = 0;  // the cluster answers' launch (0: none asked yet)
    unsigned known = 0;               // bit s - 1: clusters[s - 1] answered
    std::array<int, kMaxClusterCtas> clusters{};
  };
  bool on_device() const;
  Kernel* find(const void* kernel);  // under mutex_; null when the table is full
  cudaError_t allow_locked(Kernel* k, const void* kernel, int bytes);
  cudaError_t clusters_locked(Kernel* k, const void* kernel, int ctas, int threads, int smem_bytes,
                              int* clusters);

  const int device_;
  std::mutex mutex_;
  std::array<Kernel, kMaxKernels> kernels_{};
  int used_ = 0;
};

// The free forms the launchers call: `queries` null (a launch without a plan's answers, e.g. a
// raw launcher in a test) asks the runtime each time, as the launchers did before.
cudaError_t allow_dynamic_smem(DeviceQueries* queries, const void* kernel, int bytes);
cudaError_t max_active_clusters(DeviceQueries* queries, const void* kernel, int ctas, int threads,
                                int smem_bytes, int* clusters);
cudaError_t cluster_capacity(DeviceQueries* queries, const void* kernel, int threads,
                             int smem_bytes, ClusterCapacity* capacity);

}  // namespace mhc::cuda
