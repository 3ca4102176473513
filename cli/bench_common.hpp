// Helpers shared by the `mhc bench` subcommands: summaries of timings, the metadata every result
// file carries (GPU, driver, runtime, commit, date).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mhc::cli {

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary summarize(std::vector<float> samples);

// {"gpu", "driver", "cuda_runtime", "sm_count", "commit" (env MHC_COMMIT), "date" (UTC)}.
nlohmann::json bench_metadata();

}  // namespace mhc::cli
