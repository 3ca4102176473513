// DeviceQueries (mhc/cuda/device_queries.hpp): each answer asked of the runtime once per device.
#include "mhc/cuda/device_queries.hpp"

namespace mhc::cuda {
namespace {

cudaError_t ask_smem(const void* kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// The query of common.cuh's max_active_clusters: the shared memory allowed first, since the
// occupancy query refuses a launch above the kernel's current ceiling.
cudaError_t ask_clusters(const void* kernel, int ctas, int threads, int smem_bytes, int* clusters) {
  const cudaError_t err = ask_smem(kernel, smem_bytes);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(ctas);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas), 1);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
}

}  // namespace

// The answers hold for the plan's device only: a caller on another one is asked for directly.
bool DeviceQueries::on_device() const {
  int current = -1;
  return cudaGetDevice(&current) == cudaSuccess && current == device_;
}

DeviceQueries::Kernel* DeviceQueries::find(const void* kernel) {
  for (int i = 0; i < used_; ++i) {
    if (kernels_[i].fn == kernel) return &kernels_[i];
  }
  if (used_ == kMaxKernels) return nullptr;
  kernels_[used_].fn = kernel;
  return &kernels_[used_++];
}

cudaError_t DeviceQueries::allow_locked(Kernel* k, const void* kernel, int bytes) {
  if (k != nullptr && k->smem_allowed >= bytes) return cudaSuccess;
  const cudaError_t err = ask_smem(kernel, bytes);
  if (err == cudaSuccess && k != nullptr) k->smem_allowed = bytes;
  return err;
}

cudaError_t DeviceQueries::clusters_locked(Kernel* k, const void* kernel, int ctas, int threads,
                                           int smem_bytes, int* clusters) {
  // Kept per kernel for one launch configuration (each kernel's is fixed); another is asked.
  const bool same_launch =
      k != nullptr && (k->known == 0 || (k->threads == threads && k->smem_bytes == smem_bytes));
  if (!same_launch || ctas < 1 || ctas > kMaxClusterCtas) {
    return ask_clusters(kernel, ctas, threads, smem_bytes, clusters);
  }
  const unsigned bit = 1u << (ctas - 1);
  if ((k->known & bit) == 0) {
    const cudaError_t err = ask_clusters(kernel, ctas, threads, smem_bytes, &k->clusters[ctas - 1]);
    if (err != cudaSuccess) return err;
    k->known |= bit;
    k->threads = threads;
    k->smem_bytes = smem_bytes;
    if (smem_bytes > k->smem_allowed) k->smem_allowed = smem_bytes;  // ask_clusters set it
  }
  *clusters = k->clusters[ctas - 1];
  return cudaSuccess;
}

cudaError_t DeviceQueries::allow_dynamic_smem(const void* kernel, int bytes) {
  if (!on_device()) return ask_smem(kernel, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  return allow_locked(find(kernel), kernel, bytes);
}

cudaError_t DeviceQueries::max_active_clusters(const void* kernel, int ctas, int threads,
                                               int smem_bytes, int* clusters) {
  if (!on_device()) return ask_clusters(kernel, ctas, threads, smem_bytes, clusters);
  std::lock_guard<std::mutex> lock(mutex_);
  return clusters_locked(find(kernel), kernel, ctas, threads, smem_bytes, clusters);
}

cudaError_t DeviceQueries::cluster_capacity(const void* kernel, int threads, int smem_bytes,
                                            ClusterCapacity* capacity) {
  if (!on_device())
    return mhc::cuda::cluster_capacity(nullptr, kernel, threads, smem_bytes, capacity);
  std::lock_guard<std::mutex> lock(mutex_);
  Kernel* k = find(kernel);
  for (int ctas = 1; ctas <= kBoundaryMaxSplits; ++ctas) {
    const cudaError_t err =
        clusters_locked(k, kernel, ctas, threads, smem_bytes, &(*capacity)[ctas - 1]);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t allow_dynamic_smem(DeviceQueries* queries, const void* kernel, int bytes) {
  return queries != nullptr ? queries->allow_dynamic_smem(kernel, bytes) : ask_smem(kernel, bytes);
}

cudaError_t max_active_clusters(DeviceQueries* queries, const void* kernel, int ctas, int threads,
                                int smem_bytes, int* clusters) {
  return queries != nullptr
             ? queries->max_active_clusters(kernel, ctas, threads, smem_bytes, clusters)
             : ask_clusters(kernel, ctas, threads, smem_bytes, clusters);
}

cudaError_t cluster_capacity(DeviceQueries* queries, const void* kernel, int threads,
                             int smem_bytes, ClusterCapacity* capacity) {
  if (queries != nullptr) return queries->cluster_capacity(kernel, threads, smem_bytes, capacity);
  for (int ctas = 1; ctas <= kBoundaryMaxSplits; ++ctas) {
    const cudaError_t err = ask_clusters(kernel, ctas, threads, smem_bytes, &(*capacity)[ctas - 1]);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace mhc::cuda
