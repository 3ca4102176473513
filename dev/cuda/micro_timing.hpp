// What the developer micro-benchmarks (dev/cuda/*_microbench.cu) share: a CUDA call checked (exit
// with the file, line and error), and one launch's median time between CUDA events.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define MHC_MICRO_CHECK(call)                                                           \
  do {                                                                                  \
    const cudaError_t err_ = (call);                                                    \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

namespace mhc::bench {

// Median microseconds of `launch()` over `reps` timings between CUDA events on the default
// stream, after 3 warm-up launches; any launch error ends the program.
template <typename Launch>
float median_launch_us(Launch&& launch, int reps) {
  cudaEvent_t a, b;
  MHC_MICRO_CHECK(cudaEventCreate(&a));
  MHC_MICRO_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  MHC_MICRO_CHECK(cudaGetLastError());
  MHC_MICRO_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    MHC_MICRO_CHECK(cudaEventRecord(a));
    launch();
    MHC_MICRO_CHECK(cudaEventRecord(b));
    MHC_MICRO_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    MHC_MICRO_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms * 1000.f);
  }
  MHC_MICRO_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  MHC_MICRO_CHECK(cudaEventDestroy(a));
  MHC_MICRO_CHECK(cudaEventDestroy(b));
  return times[times.size() / 2];
}

}  // namespace mhc::bench
