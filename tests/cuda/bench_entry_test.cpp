// `mhc bench kernels` times the kernels the plan picks under its kernel config: every key that
// chooses a kernel must reach the launches it times (a forced split count, batch-invariant mode),
// not only the few the benchmark knew of by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpu_test_util.hpp"
#include "mhc/bench/kernels.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc {
namespace {

constexpr int64_t kTokens = 4096;  // the TMA kernel's sizes on an H200, where splits are free

bench::KernelBenchOptions options(const std::string& config) {
  bench::KernelBenchOptions o;
  o.params = preset("dsv41-flash");
  o.tokens = {kTokens};
  o.reps = 5;
  o.config = KernelConfig::parse(config);
  return o;
}

// The requested tuning of the coefficient launch the report timed.
const nlohmann::json& coefficient_row(const nlohmann::json& report) {
  for (const auto& r : report.at("results")) {
    if (r.at("kernel") == "coefficients (GEMM+stats)") return r;
  }
  throw std::runtime_error("no coefficient row in the report");
}

TEST(BenchKernels, TimesTheSplitCountTheKernelConfigForces) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = preset("dsv41-flash");
  const int plan_splits = test::tuning(p, kTokens).splits;
  const int forced = plan_splits == 3 ? 5 : 3;  // differs from the plan's, so the check can fail
  const nlohmann::json plain = bench::bench_kernels(options("{}"));
  EXPECT_EQ(coefficient_row(plain).at("splits").get<int>(), plan_splits);
  const nlohmann::json report =
      bench::bench_kernels(options(R"({"prenorm_splits": )" + std::to_string(forced) + "}"));
  EXPECT_EQ(coefficient_row(report).at("splits").get<int>(), forced);
  EXPECT_EQ(report.at("kernel_config").at("prenorm_splits").get<int>(), forced);
}

TEST(BenchKernels, BatchInvariantModeComesFromTheKernelConfig) {
  MHC_SKIP_WITHOUT_GPU();
  const nlohmann::json report = bench::bench_kernels(options(R"({"batch_invariant": true})"));
  EXPECT_TRUE(report.at("batch_invariant").get<bool>());
  const MhcParams p = preset("dsv41-flash");
  const KernelPlan plan = cuda::device_plan(KernelConfig::parse(R"({"batch_invariant": true})"));
  EXPECT_EQ(coefficient_row(report).at("splits").get<int>(), plan.tuning(p, kTokens).splits);
}

}  // namespace
}  // namespace mhc
