// `mhc bench kernels`: times each CUDA kernel family and the whole site on the current GPU.
// Host-only declarations, so the CLI compiles the same with or without CUDA.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"

namespace mhc::cuda {

struct KernelBenchOptions {
  std::string preset_name = "dsv41-flash";
  MhcParams params;
  std::vector<int64_t> tokens;
  int reps = 200;
  Projection projection = Projection::tf32;
  bool batch_invariant = false;  // time the kernels in KernelConfig::batch_invariant's mode
  bool sweep_tuning = false;     // also time the coefficient path at every split count / tile size
  std::string commit;
  std::string json_path;  // "" = no JSON file
};

// Prints a table on stdout and, with json_path, writes the JSON report. Returns the JSON text.
std::string bench_kernels(const KernelBenchOptions& options);

}  // namespace mhc::cuda
