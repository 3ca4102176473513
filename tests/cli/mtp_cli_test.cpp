// `mhc run --weights` with MTP blocks (docs/mtp.md): each block is read, run and checked against
// the float64 reference and reported (text and JSON); a checkpoint without blocks says so; a
// broken block is refused with its tensor named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

std::string exported(const std::string& tag, const std::string& options) {
  const std::string dir = scratch(tag);
  const RunResult ex = run_mhc("export-example " + quote(dir) + " --layers 2 --hidden 64 " +
                               options + " --force --json");
  EXPECT_EQ(ex.status, 0) << ex.err;
  return dir;
}

TEST(RunCliMtp, BlocksAreRunAndChecked) {
  for (const char* naming : {"official", "hf"}) {
    SCOPED_TRACE(naming);
    const std::string dir =
        exported(std::string("mtp_cli_") + naming, std::string("--mtp 2 --naming ") + naming);
    const RunResult r = run_mhc("run --backend cpu --tokens 3 --json --weights " + quote(dir));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc.at("pass"), true);
    const auto& mtp = doc.at("mtp");
    EXPECT_EQ(mtp.at("depths"), 2);
    ASSERT_EQ(mtp.at("blocks").size(), 2u);
    for (const auto& block : mtp.at("blocks")) {
      for (const char* part : {"site_check", "stack_check", "head_check"}) {
        ASSERT_TRUE(block.contains(part)) << part;
        for (const auto& [what, line] : block.at(part).items()) {
          EXPECT_EQ(line.at("pass"), true) << part << " " << what;
          EXPECT_EQ(line.at("nonfinite"), 0) << part << " " << what;
        }
      }
      EXPECT_GT(block.at("stack_check").at("output").at("rel_norm").get<double>(), 0.0);
    }
    EXPECT_TRUE(contains(r.err, "mtp") && contains(r.err, "2 block(s)")) << r.err;
  }
  const std::string dir = scratch("mtp_cli_official");
  const RunResult text = run_mhc("run --backend cpu --tokens 2 --weights " + quote(dir));
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "MTP block 1 vs float64 reference")) << text.out;
}

TEST(RunCliMtp, WithoutBlocksSaysSo) {
  const std::string dir = exported("mtp_cli_none", "");
  const RunResult r = run_mhc("run --backend cpu --tokens 2 --weights " + quote(dir));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "MTP blocks: none")) << r.out;
  const RunResult j = run_mhc("run --backend cpu --tokens 2 --json --weights " + quote(dir));
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at("mtp").at("depths"), 0);
}

TEST(RunCliMtp, ExportReportsItAndRefusesTooMany) {
  const std::string dir = scratch("mtp_cli_export");
  const RunResult ex =
      run_mhc("export-example " + quote(dir) + " --layers 1 --hidden 64 --mtp 1 --force --json");
  ASSERT_EQ(ex.status, 0) << ex.err;
  const auto doc = nlohmann::json::parse(ex.out);
  EXPECT_EQ(doc.at("mtp_depths"), 1);
  EXPECT_EQ(doc.at("head"), true);
  const RunResult many = run_mhc("export-example " + quote(scratch("mtp_cli_many")) +
                                 " --layers 1 --hidden 64 --mtp 9");
  EXPECT_NE(many.status, 0);
  EXPECT_TRUE(contains(many.err, "--mtp")) << many.err;
}

}  // namespace
}  // namespace mhc::cli::testing
