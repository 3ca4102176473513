// `mhc plan` and the plan-related parts of `mhc dispatch`, end to end on the built binary, on
// simulated GPUs and binaries (no GPU needed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

nlohmann::json json_of(const std::string& args) {
  const RunResult r = run_mhc(args + " --json");
  EXPECT_EQ(r.status, 0) << args << ": " << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(PlanCli, BlackwellLoadsItsOwnSassOnlyWhereTheBinaryHasIt) {
  const auto with = json_of("plan --arch 10.0 --images sm_90a,sm_80,sm_100f,compute_80");
  EXPECT_EQ(with.at("image_loaded"), "sm_100f");
  EXPECT_EQ(with.at("compiled_ahead_of_time"), true);
  EXPECT_EQ(with.at("overlap"), "automatic");
  const auto without = json_of("plan --arch 10.0 --images sm_90a,sm_80,compute_80");
  EXPECT_EQ(without.at("image_loaded"), "compute_80");
  EXPECT_EQ(without.at("compiled_ahead_of_time"), false);
  EXPECT_EQ(without.at("overlap"), "opt-in");
  EXPECT_EQ(without.at("pdl"), false);
  EXPECT_EQ(without.at("tma128_available"), false);
}

TEST(PlanCli, HopperRangesAndSwitches) {
  const auto hopper = json_of("plan --arch 9.0 --images sm_90a,sm_80,compute_80");
  ASSERT_EQ(hopper.at("prenorm").size(), 3u);
  EXPECT_EQ(hopper.at("prenorm")[2].at("kernel"), "tma128");
  const auto forced = json_of(
      "plan --arch 9.0 --images sm_90a --kernel-config '{\"prenorm_kernel\": \"mma16\", "
      "\"prenorm_splits\": 4}'");
  ASSERT_EQ(forced.at("prenorm").size(), 1u);
  EXPECT_EQ(forced.at("forced_splits"), 4);
  const RunResult text = run_mhc("plan --arch 9.0 --images sm_90a");
  EXPECT_NE(text.out.find("prenorm_kernel (mma16|mma64|tma128)"), std::string::npos) << text.out;
}

TEST(PlanCli, BatchInvariantAndPdlAreThePlans) {
  const auto bi = json_of(
      "plan --arch 9.0 --images sm_90a,sm_80 --kernel-config '{\"batch_invariant\": true, "
      "\"pdl\": false}'");
  EXPECT_EQ(bi.at("batch_invariant"), true);
  ASSERT_EQ(bi.at("prenorm").size(), 1u);
  EXPECT_EQ(bi.at("prenorm")[0].at("kernel"), "tma128");
  EXPECT_EQ(bi.at("fused_input_max_tokens"), 64);  // the same bits fused or not
  EXPECT_EQ(bi.at("folded_post_max_tokens"), 0);
  EXPECT_EQ(bi.at("pdl"), false);
  const RunResult text =
      run_mhc("plan --arch 8.0 --images sm_80 --kernel-config '{\"batch_invariant\": true}'");
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("yes: one order per size"), std::string::npos) << text.out;
  const RunResult clash = run_mhc(
      "plan --arch 9.0 --images sm_90a --kernel-config '{\"batch_invariant\": true, "
      "\"prenorm_splits\": 4}'");
  EXPECT_EQ(clash.status, 2);
  EXPECT_NE(clash.err.find("batch_invariant"), std::string::npos) << clash.err;
}

// --tokens prints each launch of a site of that shape resolved: exactly what the launchers get.
TEST(PlanCli, ResolvedLaunchesOfAShape) {
  const auto doc = json_of("plan --arch 9.0 --images sm_90a --hidden 5120 --hc 4 --tokens 1,8192");
  ASSERT_EQ(doc.at("launches").size(), 2u);
  EXPECT_EQ(doc.at("launches")[0].at("kernel"), "mma16");
  EXPECT_EQ(doc.at("launches")[0].at("fused_input"), true);
  EXPECT_EQ(doc.at("launches")[1].at("kernel"), "tma128");
  EXPECT_EQ(doc.at("launches")[1].at("fused_boundary"), true);
  EXPECT_EQ(doc.at("projection"), "tf32");
  const RunResult text = run_mhc("plan --arch 9.0 --images sm_90a --tokens 1");
  EXPECT_NE(text.out.find("launch M=1       mma16 splits="), std::string::npos) << text.out;
  const RunResult bad = run_mhc("plan --arch 9.0 --images sm_90a --hc 3 --tokens 1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("n=3"), std::string::npos) << bad.err;
}

TEST(PlanCli, ErrorsAreClear) {
  const RunResult bad_force =
      run_mhc("plan --arch 8.0 --images sm_80 --kernel-config '{\"prenorm_kernel\": \"tma128\"}'");
  EXPECT_EQ(bad_force.status, 2);
  EXPECT_NE(bad_force.err.find("sm_90 instructions"), std::string::npos) << bad_force.err;
  const RunResult bad_image = run_mhc("plan --arch 9.0 --images sm_90x");
  EXPECT_EQ(bad_image.status, 2);
  EXPECT_NE(bad_image.err.find("sm_90x"), std::string::npos) << bad_image.err;
}

TEST(TuneCli, RefusesBadOptionsBeforeMeasuring) {
  const RunResult no_out = run_mhc("tune");
  EXPECT_EQ(no_out.status, 2);
  EXPECT_NE(no_out.err.find("--out"), std::string::npos) << no_out.err;
  const RunResult bad = run_mhc("tune --out /tmp/x.json --rounds 0");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--rounds"), std::string::npos) << bad.err;
  for (const char* prenorm : {"--prenorm-tokens 0,4", "--prenorm-tokens -1", "--prenorm-reps 2"}) {
    const RunResult r = run_mhc(std::string("tune --out /tmp/x.json ") + prenorm);
    EXPECT_EQ(r.status, 2) << prenorm;
    EXPECT_NE(r.err.find("--prenorm"), std::string::npos) << prenorm << ": " << r.err;
  }
  for (const char* boundary :
       {"--boundary-tokens 0,640", "--boundary-tokens -1", "--boundary-reps 4"}) {
    const RunResult r = run_mhc(std::string("tune --out /tmp/x.json ") + boundary);
    EXPECT_EQ(r.status, 2) << boundary;
    EXPECT_NE(r.err.find("--boundary"), std::string::npos) << boundary << ": " << r.err;
  }
}

TEST(DispatchCli, NoAutomaticOverlapOnBlackwellWithoutItsCode) {
  const auto d = json_of("dispatch --arch 10.0 --images sm_90a,sm_80,compute_80");
  EXPECT_EQ(d.at("overlap"), false);
  EXPECT_EQ(d.at("reason_code"), "sm100_code_missing");
  EXPECT_EQ(json_of("dispatch --arch 10.0 --images sm_90a,sm_100f").at("overlap"), true);
}

}  // namespace
}  // namespace mhc::cli::testing
