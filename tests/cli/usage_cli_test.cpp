// How `mhc` treats a command line it cannot use, on the built binary: every usage error exits 2
// with "mhc: error:" (never CLI11's internal codes), "did you mean" for mistyped commands, options
// and choices, choices listed in the error, --version and -V, `mhc help COMMAND`, and an example
// in every command's help.
#include <gtest/gtest.h>

#include <regex>

#include "cli_util.hpp"
#include "mhc/core/version.hpp"

namespace mhc::cli::testing {
namespace {

TEST(UsageCli, EveryParseErrorExits2WithThePrefix) {
  expect_errors({
      {"", "'mhc' needs a command: run, site, dispatch, plan, tune, bench, export-example, help"},
      {"bench", "'mhc bench' needs a command: kernels, overlap"},
      {"dispatch", "--arch is required"},
      {"run --tokens", "--tokens"},
      {"run --tokens 1 --tokens 2", "--tokens"},
      {"run extra", "unexpected argument 'extra' for 'mhc run'"},
      {"run --zzzzzz", "unknown option '--zzzzzz' for 'mhc run'"},
      {"frobnicate", "unknown command 'frobnicate' for 'mhc'"},
      {"--nope", "unknown option '--nope' for 'mhc'"},
      {"site --inputs a.safetensors", "--out is required"},
  });
}

TEST(UsageCli, ErrorsPointToTheCommandsHelp) {
  const RunResult r = run_mhc("bench kernels --rep 5");
  EXPECT_TRUE(contains(r.err, "Run 'mhc bench kernels --help' for usage.")) << r.err;
}

TEST(UsageCli, SuggestsTheClosestCommandOrOption) {
  expect_errors({
      {"rn", "(did you mean 'run'?)"},
      {"dispach --arch 9.0", "(did you mean 'dispatch'?)"},
      {"export-exmaple /nonexistent-mhc-test/x", "(did you mean 'export-example'?)"},
      {"bench kernal", "(did you mean 'kernels'?)"},
      {"run --tokns 5", "unknown option '--tokns' for 'mhc run' (did you mean '--tokens'?)"},
      {"run --tokns=5", "(did you mean '--tokens'?)"},
      {"bench kernels --rep 5", "(did you mean '--reps'?)"},
      {"dispatch --arch 9.0 --hiden 64", "(did you mean '--hidden'?)"},
      {"--verison", "(did you mean '--version'?)"},
  });
  // Nothing close: no guess.
  for (const char* args : {"zebra", "run --zzzzzz", "run --mode sideways"}) {
    const RunResult r = run_mhc(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_FALSE(contains(r.err, "did you mean")) << args << ": " << r.err;
  }
}

TEST(UsageCli, ChoicesAreCheckedByTheParserAndListed) {
  expect_errors({
      {"run --backend tpu", "--backend: 'tpu' is not one of auto|cpu|cuda"},
      {"run --mode sideways", "--mode: 'sideways' is not one of eager|piecewise|full"},
      {"run --mode ful", "(did you mean 'full'?)"},
      {"run --preset dsv9", "--preset: 'dsv9' is not one of dsv41-flash|dsv4-flash|dsv4-pro"},
      {"run --preset dsv41", "(did you mean 'dsv41-flash'?)"},
      {"run --sync-check maybe", "--sync-check: 'maybe' is not one of off|error"},
      {"dispatch --arch 9.0 --mode graph", "--mode: 'graph' is not one of"},
      {"site --inputs a --out b --backend gpu", "--backend: 'gpu' is not one of"},
      {"export-example /nonexistent-mhc-test/x --naming torch",
       "--naming: 'torch' is not one of official|hf"},
      {"export-example /nonexistent-mhc-test/x --norm-dtype f16",
       "--norm-dtype: 'f16' is not one of f32|bf16"},
      {"bench kernels --projection bf16", "--projection: 'bf16' is not one of tf32|fp32"},
      {"bench overlap --preset x", "--preset: 'x' is not one of"},
  });
}

TEST(UsageCli, VersionIsTheProjectVersion) {
  EXPECT_TRUE(std::regex_match(std::string(kVersion), std::regex(R"(\d+\.\d+\.\d+)"))) << kVersion;
  const RunResult r = run_mhc("--version");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "mhc " + std::string(kVersion) + "\n");
}

TEST(UsageCli, ShortVersionFlagIsTheLongOne) {
  const RunResult r = run_mhc("-V");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "mhc " + std::string(kVersion) + "\n");
}

// `mhc help COMMAND` prints exactly what `mhc COMMAND --help` prints, for every command.
TEST(UsageCli, HelpCommandPrintsTheCommandsOwnHelp) {
  for (const std::string cmd : {"", "run", "site", "dispatch", "plan", "tune", "bench",
                                "bench kernels", "bench overlap", "export-example", "help"}) {
    const RunResult via_help = run_mhc("help " + cmd);
    const RunResult via_flag = run_mhc(cmd + " --help");
    EXPECT_EQ(via_help.status, 0) << "help " << cmd << ": " << via_help.err;
    EXPECT_EQ(via_flag.status, 0) << cmd << " --help: " << via_flag.err;
    EXPECT_TRUE(via_help.err.empty()) << via_help.err;
    EXPECT_FALSE(via_help.out.empty()) << "help " << cmd;
    EXPECT_EQ(via_help.out, via_flag.out) << "help " << cmd;
  }
  EXPECT_TRUE(contains(run_mhc("--help").out, "Run 'mhc help COMMAND'"));
}

TEST(UsageCli, HelpOfAnUnknownCommandIsAnErrorWithASuggestion) {
  expect_errors({
      {"help frobnicate", "unknown command 'frobnicate' for 'mhc' (commands: run, site,"},
      {"help rn", "(did you mean 'run'?)"},
      {"help bench kernal",
       "unknown command 'kernal' for 'mhc bench' (commands: kernels, "
       "overlap) (did you mean 'kernels'?)"},
      {"help run extra", "unknown command 'extra' for 'mhc run'"},
  });
}

TEST(UsageCli, HelpListsExitStatusesAndEveryCommandShowsAnExample) {
  const RunResult top = run_mhc("--help");
  EXPECT_EQ(top.status, 0);
  EXPECT_TRUE(contains(top.out, "Exit status: 0 success; 2 usage error")) << top.out;
  EXPECT_TRUE(contains(top.out, "--version")) << top.out;
  for (const std::string cmd :
       {"run", "site", "dispatch", "bench", "bench kernels", "bench overlap", "export-example"}) {
    const RunResult r = run_mhc(cmd + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("Examples?:\n  mhc " + cmd + " ")))
        << cmd << ":\n"
        << r.out;
    EXPECT_TRUE(cmd == "bench" || contains(r.out, "--json [FILE]")) << cmd << ":\n" << r.out;
  }
}

}  // namespace
}  // namespace mhc::cli::testing
