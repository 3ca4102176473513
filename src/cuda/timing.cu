#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "mhc/cuda/check.hpp"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/timing.hpp"

namespace mhc::cuda {
namespace {

__device__ __forceinline__ float hash_uniform(uint64_t i, uint64_t seed) {
  uint64_t z = i + seed * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(z >> 40) * (1.f / 16777216.f);  // [0, 1)
}

__global__ void fill_bf16_kernel(uint16_t* out, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<uint16_t>(f32_to_bf16_bits(2.f * hash_uniform(i, seed) - 1.f));
  }
}

__global__ void fill_f32_kernel(float* out, int64_t count, float lo, float hi, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = lo + (hi - lo) * hash_uniform(i, seed);
  }
}

void fill(DeviceBuffer<Bf16>& b, uint64_t seed, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(reinterpret_cast<uint16_t*>(b.get()), int64_t(b.size()),
                                        seed);
  MHC_CUDA_CHECK(cudaGetLastError());
}
void fill(DeviceBuffer<float>& b, float lo, float hi, uint64_t seed, cudaStream_t s) {
  fill_f32_kernel<<<256, 256, 0, s>>>(b.get(), int64_t(b.size()), lo, hi, seed);
  MHC_CUDA_CHECK(cudaGetLastError());
}

__global__ void empty_kernel() {}

}  // namespace

void enqueue_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  MHC_CUDA_CHECK(cudaGetLastError());
}

void fill_random(DeviceSiteBuffers& b, const MhcParams& p, uint64_t seed, cudaStream_t stream) {
  (void)p;
  fill(b.x, seed * 8 + 1, stream);
  fill(b.x_next, seed * 8 + 2, stream);
  fill(b.sublayer_out, seed * 8 + 3, stream);
  fill(b.layer_input, seed * 8 + 4, stream);
  fill(b.pre_mix, 0.2f, 1.2f, seed * 8 + 5, stream);
  fill(b.pre, 0.2f, 1.2f, seed * 8 + 6, stream);
  fill(b.post, 0.f, 2.f, seed * 8 + 7, stream);
  fill(b.comb, 0.f, 0.5f, seed * 8 + 8, stream);
}

TimedResult time_rotated_graphs(const MhcParams& p, int64_t tokens, int64_t l2_bytes, int reps,
                                cudaStream_t stream, const EnqueueFn& enqueue) {
  // Bytes one set's activations occupy; enough sets that a set is cold again when it comes back.
  const int64_t set_bytes = tokens * (4 * p.k() + 4 * p.hidden);
  const int sets = static_cast<int>(std::clamp<int64_t>(ceil_div(3 * l2_bytes, set_bytes), 1, 48));
  std::vector<DeviceSiteBuffers> buffers;
  buffers.reserve(size_t(sets));
  for (int i = 0; i < sets; ++i) {
    buffers.emplace_back(p, tokens);
    fill_random(buffers.back(), p, uint64_t(i) + 1, stream);
  }
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<cudaGraphExec_t> execs(size_t(sets), nullptr);
  for (int i = 0; i < sets; ++i) {
    cudaGraph_t graph = nullptr;
    MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue(buffers[size_t(i)], stream);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    MHC_CUDA_CHECK(cudaGraphInstantiate(&execs[size_t(i)], graph, 0));
    MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  TimedResult r = time_graph_replays(execs, reps, stream);
  for (auto& g : execs) cudaGraphExecDestroy(g);
  r.method = fmt::format(
      "CUDA graph replay, one graph per input set, {} set(s) of {:.1f} MB rotated past the {:.0f} "
      "MB L2, CUDA event between consecutive replays, {} warm-up replays, median of {}",
      sets, set_bytes / 1e6, l2_bytes / 1e6, graph_warmup_replays(sets), reps);
  return r;
}

int graph_warmup_replays(int sets) { return std::max(20, 2 * sets); }

TimedResult time_graph_replays(const std::vector<cudaGraphExec_t>& execs, int reps,
                               cudaStream_t stream) {
  const int sets = static_cast<int>(execs.size());
  for (int i = 0; i < graph_warmup_replays(sets); ++i) {
    MHC_CUDA_CHECK(cudaGraphLaunch(execs[size_t(i % sets)], stream));
  }
  std::vector<cudaEvent_t> events(size_t(reps) + 1);
  for (auto& e : events) MHC_CUDA_CHECK(cudaEventCreate(&e));
  MHC_CUDA_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < reps; ++i) {
    MHC_CUDA_CHECK(cudaGraphLaunch(execs[size_t(i % sets)], stream));
    MHC_CUDA_CHECK(cudaEventRecord(events[size_t(i) + 1], stream));
  }
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, events[size_t(i)], events[size_t(i) + 1]));
    us[size_t(i)] = 1000.0 * ms;
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  TimedResult r;
  r.median_us = us[us.size() / 2];
  r.min_us = us.front();
  r.reps = reps;
  r.sets = sets;
  return r;
}

}  // namespace mhc::cuda
