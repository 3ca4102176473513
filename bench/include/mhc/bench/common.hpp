// Helpers shared by the benchmarks behind `mhc bench` (bench/): summaries of timings, the metadata
// every result file carries (GPU, driver, runtime, commit, date). The CLI writes the reports.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mhc::bench {

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary summarize(std::vector<float> samples);

// {"gpu", "driver", "cuda_runtime", "sm_count", "commit" (env MHC_COMMIT), "date" (UTC)}.
nlohmann::json bench_metadata();

}  // namespace mhc::bench
