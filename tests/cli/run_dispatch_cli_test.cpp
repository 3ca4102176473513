// `mhc run` and `mhc dispatch` end to end on the built binary (CPU backend; no GPU needed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

TEST(RunCli, SmallStackPassesAndReportsEveryCheckInJson) {
  const RunResult r = run_mhc("run --backend cpu --layers 3 --tokens 5 --seed 7 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("pass"), true);
  EXPECT_EQ(doc.at("failures"), 0);
  EXPECT_EQ(doc.at("tokens"), 5);
  EXPECT_EQ(doc.at("params").at("sites"), 6);
  EXPECT_EQ(doc.at("backend").at("name"), "cpu");
  EXPECT_EQ(doc.at("stack_check").at("layers").size(), 3u);
  for (const char* out : {"layer_input", "pre", "post", "comb", "x_next"}) {
    const auto& check = doc.at("site_check").at(out);
    EXPECT_EQ(check.at("pass"), true) << out;
    EXPECT_LE(check.at("rel_norm").get<double>(), check.at("tolerance").get<double>()) << out;
  }
  EXPECT_GT(doc.at("timing").at("median_us_per_site").get<double>(), 0.0);
}

TEST(RunCli, ZeroTokensIsValid) {
  const RunResult r = run_mhc("run --backend cpu --layers 2 --tokens 0");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "result: PASS")) << r.out;
}

TEST(RunCli, SaysWhenTheBatchInvariantModeIsOn) {
  const std::string args = "run --backend cpu --layers 1 --tokens 3";
  const RunResult on = run_mhc(args + " --kernel-config '{\"batch_invariant\": true}'");
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_TRUE(contains(on.out, "batch-invariant mode: on")) << on.out;
  EXPECT_TRUE(contains(on.out, "batch_invariant=on")) << on.out;
  const RunResult off = run_mhc(args);
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_FALSE(contains(off.out, "batch-invariant")) << off.out;
  const RunResult json = run_mhc(args + " --json --kernel-config '{\"batch_invariant\": true}'");
  ASSERT_EQ(json.status, 0) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc.at("batch_invariant"), true);
  EXPECT_EQ(doc.at("kernel_config").at("batch_invariant"), true);
}

TEST(RunCli, BadInputsAreClearErrors) {
  expect_errors({
      {"run --hidden 5121 --layers 1", "C=5121"},
      {"run --backend cpu --trace t.json", "--trace needs the cuda backend"},
      {"run --kernel-config '{\"overlap\": true}'", "'overlap'"},
      {"run --kernel-config '{\"batch_invariant\": 1}'", "'batch_invariant'"},
  });
}

TEST(DispatchCli, HopperOptInOverlapsUpToTheMeasuredThreshold) {
  const std::string opt_in =
      "dispatch --arch 9.0 --images sm_90a,sm_80,compute_80 --kernel-config "
      "'{\"enable_mhc_overlap\": true}'";
  auto decide = [](const std::string& args) {
    const RunResult r = run_mhc(args + " --json");
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  EXPECT_EQ(decide(opt_in + " --tokens 32").at("overlap"), true);
  const auto above = decide(opt_in + " --tokens 33");
  EXPECT_EQ(above.at("overlap"), false);
  EXPECT_EQ(above.at("reason_code"), "too_many_tokens");
  EXPECT_EQ(above.at("max_tokens"), 32);
  EXPECT_EQ(decide("dispatch --arch 9.0 --images sm_90a").at("reason_code"), "sm90_not_opted_in");
  EXPECT_EQ(decide(opt_in + " --mode piecewise").at("reason_code"), "not_full_graph");
  EXPECT_EQ(decide(opt_in + " --tp 8").at("all_reduce"), "nccl");
}

TEST(DispatchCli, FusedAllReduceIsNamedAsMissingFromThisBuild) {
  const RunResult r = run_mhc("dispatch --arch 10.0 --tp 4 --fused-allreduce-available --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("all_reduce"), "fused");
  EXPECT_TRUE(contains(doc.at("note").get<std::string>(), "no fused all-reduce kernel"))
      << doc.dump();
}

TEST(DispatchCli, BadArchitectureIsAnError) {
  const RunResult r = run_mhc("dispatch --arch nine");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "nine")) << r.err;
}

}  // namespace
}  // namespace mhc::cli::testing
