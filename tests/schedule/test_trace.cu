// The Chrome trace: GPU-timed stages on the stream each ran on.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_run.hpp"

namespace mhc::cuda {
namespace {

nlohmann::json traced_run(bool overlap, const std::string& path) {
  MhcParams p = preset("dsv41-flash");
  p.layers = 2;
  const ModelWeights w = synthetic_model(p, 4);
  const auto x0 = synthetic_embeddings(p, 8, 5);
  const auto cfg = KernelConfig::parse(overlap ? R"({"enable_mhc_overlap": true})"
                                               : R"({"enable_mhc_overlap": false})");
  StackRunOptions opt;
  opt.mode = ExecMode::full;
  opt.trace_path = path;
  const StackRunResult r = run_stack(w, 8, x0.data(), cfg, opt);
  EXPECT_EQ(r.overlapped, overlap);
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Trace, OverlapPutsCoefficientsOnTheSideStream) {
  MHC_SKIP_WITHOUT_GPU();
  for (bool overlap : {false, true}) {
    const std::string path = ::testing::TempDir() + "mhc_trace.json";
    const nlohmann::json trace = traced_run(overlap, path);
    int coefficients = 0, on_side = 0, posts = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      EXPECT_GE(e["ts"].get<double>(), 0.0);
      EXPECT_GT(e["dur"].get<double>(), 0.0);
      if (e["cat"] == "coefficients") {
        ++coefficients;
        on_side += e["tid"] == 1;
      }
      posts += e["cat"] == "post";
    }
    EXPECT_EQ(coefficients, 4);
    EXPECT_EQ(posts, 4);
    EXPECT_EQ(on_side, overlap ? 4 : 0);
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace mhc::cuda
