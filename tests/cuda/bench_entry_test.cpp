// A second way to start the kernel benchmark (the same code as `mhc bench kernels`), disabled in
// normal test runs: lets the GPU session time the kernels from the test binary alone.
//   MHC_BENCH_TOKENS=1,16,4096 MHC_BENCH_JSON=out.json MHC_BENCH_SWEEP=1 \
//     test_cuda --gtest_also_run_disabled_tests --gtest_filter='Bench.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "gpu_test_util.hpp"
#include "mhc/cuda/bench.hpp"

namespace mhc {
namespace {

TEST(Bench, DISABLED_Kernels) {
  MHC_SKIP_WITHOUT_GPU();
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v ? v : fallback);
  };
  cuda::KernelBenchOptions o;
  o.preset_name = env("MHC_BENCH_PRESET", "dsv41-flash");
  o.params = preset(o.preset_name);
  std::stringstream tokens(env("MHC_BENCH_TOKENS", "1,16,4096"));
  for (std::string t; std::getline(tokens, t, ',');) o.tokens.push_back(std::stoll(t));
  o.reps = std::stoi(env("MHC_BENCH_REPS", "200"));
  o.projection =
      env("MHC_BENCH_PROJECTION", "tf32") == "fp32" ? Projection::fp32 : Projection::tf32;
  o.sweep_tuning = env("MHC_BENCH_SWEEP", "0") == "1";
  o.json_path = env("MHC_BENCH_JSON", "");
  o.commit = env("MHC_COMMIT", "");
  cuda::bench_kernels(o);
}

}  // namespace
}  // namespace mhc
