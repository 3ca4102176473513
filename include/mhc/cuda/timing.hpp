// Timing of device work the way the project reports it: the work captured once per input set in
// a CUDA graph, input sets rotated so that repeated replays are not served from L2, CUDA events
// around every replay, warm-up first, median reported.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mhc/core/params.hpp"
#include "mhc/cuda/device_site.hpp"

namespace mhc::cuda {

struct TimedResult {
  double median_us = 0;
  double min_us = 0;
  int reps = 0;
  int sets = 0;
  std::string method;
};

// Random bf16 in [-amplitude, amplitude) and pre_mix in [0.2, 1.2): deterministic per seed.
void fill_random(DeviceSiteBuffers& b, const MhcParams& p, uint64_t seed, cudaStream_t stream);

// One empty kernel: what a graph replay costs with no work in it.
void enqueue_empty_kernel(cudaStream_t stream);

// The timing loop of time_rotated_graphs over graphs made elsewhere (one per input set, e.g.
// captured from Python): graph_warmup_replays(sets) untimed replays in turn, then `reps` replays,
// a CUDA event between consecutive ones, on `stream`; the median and least per replay. The
// graphs are not destroyed.
TimedResult time_graph_replays(const std::vector<cudaGraphExec_t>& execs, int reps,
                               cudaStream_t stream);
int graph_warmup_replays(int sets);

using EnqueueFn = std::function<void(DeviceSiteBuffers&, cudaStream_t)>;
TimedResult time_rotated_graphs(const MhcParams& p, int64_t tokens, int64_t l2_bytes, int reps,
                                cudaStream_t stream, const EnqueueFn& enqueue);

}  // namespace mhc::cuda
