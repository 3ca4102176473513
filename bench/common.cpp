#include "mhc/bench/common.hpp"

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mhc::bench {

Summary summarize(std::vector<float> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return double(samples[size_t(q * double(samples.size() - 1) + 0.5)]); };
  s.median = at(0.5);
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  s.min = samples.front();
  return s;
}

nlohmann::json bench_metadata() {
  nlohmann::json meta;
  const char* commit = std::getenv("MHC_COMMIT");
  meta["commit"] = commit ? commit : "unknown";
  meta["date"] = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
#if MHC_WITH_CUDA
  int device = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    meta["gpu"] = prop.name;
    meta["compute_capability"] = fmt::format("{}.{}", prop.major, prop.minor);
    meta["sm_count"] = prop.multiProcessorCount;
    meta["l2_bytes"] = prop.l2CacheSize;
    meta["cuda_driver_api"] = driver;
    meta["cuda_runtime"] = runtime;
  }
#endif
  if (const char* drv = std::getenv("MHC_DRIVER")) meta["driver"] = drv;  // nvidia-smi's, if given
  if (const char* clk = std::getenv("MHC_CLOCKS")) meta["clocks"] = clk;
  return meta;
}

}  // namespace mhc::bench
