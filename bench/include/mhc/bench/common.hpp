// Helpers shared by the benchmarks behind `mhc bench` (bench/): summaries of timings, the metadata
// every result file carries (GPU, driver, runtime, commit, date), how far a run is. The CLI writes
// the reports.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mhc::bench {

// How a benchmark tells its caller how far it is (the CLI draws a progress line from it on a
// terminal). Either may be empty.
struct Progress {
  // After each measured unit: the fraction of the whole run done, in (0, 1], and what it measured
  // ("M=16").
  std::function<void(double fraction, const std::string& what)> step;
  // Just before the benchmark prints a line on stdout, so that a progress line does not run into
  // it.
  std::function<void()> before_print;

  void report(double fraction, const std::string& what) const {
    if (step) step(fraction, what);
  }
  void clear() const {
    if (before_print) before_print();
  }
};

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary summarize(std::vector<float> samples);

// {"gpu", "driver", "cuda_runtime", "sm_count", "commit" (env MHC_COMMIT), "date" (UTC)}.
nlohmann::json bench_metadata();

}  // namespace mhc::bench
