// `mhc run` reports the head collapse (docs/head.md) against the float64 reference: on the
// synthetic model (which has a head) and on a checkpoint (which may not: then it says so).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

TEST(RunCliHead, SyntheticModelChecksTheHeadCollapse) {
  const RunResult r = run_mhc("run --backend cpu --layers 1 --tokens 3 --hidden 64 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& head = doc.at("head_check");
  EXPECT_EQ(head.at("ran"), true);
  for (const char* out : {"head weights", "head out", "head out + final norm"}) {
    EXPECT_EQ(head.at(out).at("pass"), true) << out;
    EXPECT_EQ(head.at(out).at("nonfinite"), 0) << out;
  }
  const RunResult text = run_mhc("run --backend cpu --layers 1 --tokens 3 --hidden 64");
  EXPECT_TRUE(contains(text.out, "head collapse vs float64 reference")) << text.out;
}

TEST(RunCliHead, CheckpointWithoutAHeadSaysItIsNotRun) {
  const std::string dir = scratch("head_cli_no_head");
  const RunResult ex =
      run_mhc("export-example " + quote(dir) + " --layers 1 --hidden 64 --no-head");
  ASSERT_EQ(ex.status, 0) << ex.err;
  const RunResult r = run_mhc("run --backend cpu --tokens 2 --weights " + quote(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "not in the checkpoint: no head collapse")) << r.out;
  EXPECT_TRUE(contains(r.out, "head collapse: not run")) << r.out;
}

}  // namespace
}  // namespace mhc::cli::testing
