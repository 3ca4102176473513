// End to end: `mhc export-example` then `mhc run --weights` (the built binary, MHC_BINARY).
// test_io does not depend on the mhc target, so these skip when the binary is not built yet.
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.hpp"
#include "cli/cli_util.hpp"

namespace mhc::ckpt {
namespace {

using cli::testing::quote;
using cli::testing::run_mhc;
using testing::mentions;

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(MHC_BINARY)) GTEST_SKIP() << MHC_BINARY << " is not built";
  }
  // A run short enough for a test: few tokens, one timing repetition, the CPU backend.
  static std::string run_args(const std::string& dir, const std::string& extra = "") {
    return "run --backend cpu --tokens 3 --timing-reps 1 --weights " + quote(dir) + " " + extra;
  }
};

TEST_F(CheckpointCli, ExportThenRun) {
  const std::string dir = testing::fresh_dir("cli");
  const auto e = run_mhc("export-example " + quote(dir) + " --layers 2 --hidden 64 --seed 5");
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_TRUE(
      mentions(e.out, {"model.safetensors.index.json", "layers.0.ffn.experts.0.w1.weight"}));
  const auto r = run_mhc(run_args(dir, "--seed 5"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(mentions(r.out, {"C=64 n=4 layers=2", "official naming", "2 opened",
                               "20 of 22 tensors", "result: PASS"}));
  // The checkpoint summary comes before the run.
  EXPECT_LT(r.out.find("official naming"), r.out.find("one site vs float64"));
}

// Same seed, same shapes: the checkpoint run computes exactly what the synthetic run does.
TEST_F(CheckpointCli, SameResultsAsTheSyntheticModel) {
  const std::string dir = testing::fresh_dir("cli_same");
  ASSERT_EQ(run_mhc("export-example " + quote(dir) +
                    " --naming hf --layers 2 --hidden 64 --hc 2 "
                    "--seed 9")
                .status,
            0);
  const auto a = run_mhc(run_args(dir, "--seed 9 --json"));
  const auto b = run_mhc(
      "run --backend cpu --tokens 3 --timing-reps 1 --layers 2 --hidden 64 --hc 2 --seed 9 --json");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["stack_check"], jb["stack_check"]);
  EXPECT_EQ(ja["params"], jb["params"]);
  // --json keeps stdout one JSON object; the summary goes to stderr.
  EXPECT_TRUE(mentions(a.err, {"hf naming", "C=64 n=2 layers=2"}));
}

TEST_F(CheckpointCli, Errors) {
  const std::string dir = testing::fresh_dir("cli_err");
  ASSERT_EQ(run_mhc("export-example " + quote(dir) + " --hidden 64").status, 0);
  const auto preset = run_mhc(run_args(dir, "--preset dsv41-flash"));
  EXPECT_EQ(preset.status, 2);
  EXPECT_TRUE(mentions(preset.err, {"does not match preset dsv41-flash", "C=64 (preset: 5120)"}));
  const auto hidden = run_mhc(run_args(dir, "--hidden 128"));
  EXPECT_EQ(hidden.status, 2);
  EXPECT_TRUE(mentions(hidden.err, {"cannot be combined with --weights"}));
  std::filesystem::remove(std::filesystem::path(dir) / testing::kShard1);
  const auto missing = run_mhc(run_args(dir));
  EXPECT_EQ(missing.status, 2);
  EXPECT_TRUE(mentions(missing.err, {"mhc: error:", testing::kShard1, "is missing"}));
  const auto naming = run_mhc("export-example " + quote(dir) + " --naming torch");
  EXPECT_EQ(naming.status, 2);
  EXPECT_TRUE(mentions(naming.err, {"--naming: 'torch' is not one of official|hf"}));
}

}  // namespace
}  // namespace mhc::ckpt
