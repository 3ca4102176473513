// The kernel benchmark behind `mhc bench kernels`: each CUDA kernel family, a whole site, and a
// stack's steady state (the executor's own launches, mhc/schedule/stack_launches.hpp), timed on
// the current GPU. Host-only declarations: the CLI compiles the same with or without CUDA (then
// bench_kernels throws).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mhc/bench/common.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"

namespace mhc::bench {

struct KernelBenchOptions {
  std::string preset_name = "dsv41-flash";
  MhcParams params;
  std::vector<int64_t> tokens;  // each >= 1
  int reps = 200;               // >= 5
  Projection projection = Projection::tf32;
  // The kernels' plan is the device plan under this config (mhc/cuda/device_plan.hpp): every
  // key that chooses or forces a kernel (prenorm_kernel, prenorm_splits, batch_invariant,
  // cluster_post, flagged_partials, ...) applies; its projection does not (`projection` above)
  // and its overlap keys concern a schedule this does not run.
  KernelConfig config;
  bool sweep_tuning = false;  // also time the coefficient path at every split count / tile size
  // Non-empty: only the items whose name contains it (e.g. "head"), and the empty kernel's graph
  // floor beside them.
  std::string only;
  std::string commit;
  Progress progress;  // after each timed item
};

// Prints a table on stdout and returns the JSON report. Throws mhc::Error on invalid options or
// without a GPU.
nlohmann::json bench_kernels(const KernelBenchOptions& options);

}  // namespace mhc::bench
