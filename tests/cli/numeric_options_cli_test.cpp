// Numeric options and sizes, on the built binary: a bad number is a usage error naming the option
// and its range, an explicit value is never replaced by the preset's, a run that cannot fit in
// memory is refused up front stating what it needs, and kernel-config numbers out of range name
// their key.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

TEST(NumericOptionsCli, RunRefusesEachBadValueNamingTheOptionAndRange) {
  expect_errors({
      {"run --tokens -1", "--tokens: expected an integer in 0..2147483647, got '-1'"},
      {"run --tokens 1e9", "--tokens: expected an integer in 0..2147483647, got '1e9'"},
      {"run --tokens abc", "--tokens: expected an integer in 0..2147483647, got 'abc'"},
      {"run --tokens 5.0", "--tokens: expected an integer in 0..2147483647, got '5.0'"},
      {"run --tokens 99999999999999999999", "--tokens: expected an integer in 0..2147483647"},
      {"run --hidden -64", "--hidden: expected an integer in 1..1048576, got '-64'"},
      {"run --hidden 0", "--hidden: expected an integer in 1..1048576, got '0'"},
      {"run --hidden 4294967360", "--hidden: expected an integer in 1..1048576"},
      {"run --hidden 2000000", "--hidden: expected an integer in 1..1048576, got '2000000'"},
      {"run --hidden 5121", "hidden size C=5121 must be a multiple of 8"},
      {"run --hc 0", "--hc: expected an integer in 1..8, got '0'"},
      {"run --hc 9", "--hc: expected an integer in 1..8, got '9'"},
      {"run --layers 0", "--layers: expected an integer in 1..64, got '0'"},
      // The stack check's bounds hold to 64 layers (docs/limits.md): deeper is refused up front.
      {"run --layers 65", "--layers: expected an integer in 1..64, got '65'"},
      {"run --layers 1048576", "--layers: expected an integer in 1..64"},
      {"run --seed -1", "--seed: expected an integer >= 0, got '-1'"},
      {"run --seed 18446744073709551616", "--seed: expected an integer >= 0"},
      {"run --tp 0", "--tp: expected an integer >= 1, got '0'"},
      {"run --timing-reps 0", "--timing-reps: expected an integer in 1..100000, got '0'"},
      // Was: std::bad_alloc (exit 3) reserving 2^31 samples.
      {"run --timing-reps 2147483647", "--timing-reps: expected an integer in 1..100000"},
  });
}

TEST(NumericOptionsCli, OtherCommandsRefuseBadValuesToo) {
  expect_errors({
      {"dispatch --arch 9.0 --hidden 0", "--hidden: expected an integer in 1..1048576"},
      {"dispatch --arch 9.0 --hc -4", "--hc: expected an integer in 1..8"},
      // Bounded as run and site are (was: "overlap" decided for a shape nothing can run).
      {"dispatch --arch 9.0 --hidden 2147483584", "--hidden: expected an integer in 1..1048576"},
      {"dispatch --arch 9.0 --hidden 5121", "hidden size C=5121 must be a multiple of 8"},
      {"dispatch --arch 9.0 --hc 2147483647", "--hc: expected an integer in 1..8"},
      {"dispatch --arch 9.0 --tokens -1", "--tokens: expected an integer in 0..2147483647"},
      {"dispatch --arch 9.0 --tp 0", "--tp: expected an integer >= 1"},
      {"export-example /nonexistent-mhc-test/x --layers 0",
       "--layers: expected an integer in 1..1048576"},
      {"export-example /nonexistent-mhc-test/x --hidden -64",
       "--hidden: expected an integer in 1..1048576"},
      {"export-example /nonexistent-mhc-test/x --hc 0", "--hc: expected an integer in 1..8"},
      {"export-example /nonexistent-mhc-test/x --seed x", "--seed: expected an integer >= 0"},
      {"bench kernels --reps 4", "--reps: expected an integer in 5..100000, got '4'"},
      {"bench kernels --reps 2147483647", "--reps: expected an integer in 5..100000"},
      {"bench kernels --tokens 1,0,8", "--tokens: expected an integer in 1..2147483647, got '0'"},
      {"bench kernels --hidden 0", "--hidden: expected an integer in 1..1048576"},
      {"bench overlap --reps 0", "--reps: expected an integer in 1..100000"},
      {"bench overlap --layers 1048577", "--layers: expected an integer in 1..1048576"},
      {"bench overlap --tokens 1e3", "--tokens: expected an integer in 1..2147483647, got '1e3'"},
      {"bench overlap --tp 0", "--tp: expected an integer >= 1"},
      {"bench overlap --attn-width 0", "--attn-width: expected an integer in 1..2097152"},
      {"bench overlap --ffn-width 2147483647", "--ffn-width: expected an integer in 1..2097152"},
      {"tune --out t.json --reps 2147483647", "--reps: expected an integer in 2..100000"},
      {"tune --out t.json --prenorm-reps 100001",
       "--prenorm-reps: expected an integer in 5..100000"},
      {"tune --out t.json --boundary-reps 4", "--boundary-reps: expected an integer in 5..100000"},
      // Token counts stop at the kernels' int32 limit: no size computed from one overflows.
      {"run --tokens 2147483648", "--tokens: expected an integer in 0..2147483647"},
      {"bench kernels --tokens 1,9223372036854775807",
       "--tokens: expected an integer in 1..2147483647, got '9223372036854775807'"},
      {"bench overlap --tokens 4294967296", "--tokens: expected an integer in 1..2147483647"},
      {"tune --out t.json --tokens 4294967296", "--tokens: expected an integer in 1..2147483647"},
      {"tune --out t.json --prenorm-tokens 0,4294967296",
       "--prenorm-tokens: expected an integer in 0..2147483647"},
      {"tune --out t.json --boundary-tokens -1",
       "--boundary-tokens: expected an integer in 0..2147483647"},
  });
}

TEST(NumericOptionsCli, AnExplicitValueIsUsedNotThePresets) {
  const RunResult r = run_mhc("run --backend cpu --hidden 64 --hc 2 --layers 1 --tokens 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("params").at("hidden"), 64);
  EXPECT_EQ(doc.at("params").at("n"), 2);
  EXPECT_EQ(doc.at("params").at("layers"), 1);
  EXPECT_EQ(doc.at("tokens"), 3);
}

TEST(NumericOptionsCli, ARunTooLargeForMemoryIsRefusedStatingWhatItNeeds) {
  // 10^9 tokens of the V4.1 preset: petabytes of traces, more than any host has.
  const RunResult big = run_mhc("run --backend cpu --tokens 1000000000");
  EXPECT_EQ(big.status, 2) << big.err;
  for (const char* part : {"mhc run with 1000000000 tokens", "needs at least", "PiB of host memory",
                           "per-layer traces", "but this machine has"}) {
    EXPECT_TRUE(contains(big.err, part)) << part << " not in " << big.err;
  }
  EXPECT_FALSE(contains(big.err, "bad_alloc")) << big.err;
  // The largest run the options allow: exabytes, counted without wrapping around.
  const RunResult wrap =
      run_mhc("run --backend cpu --tokens 2147483647 --hidden 1048576 --hc 8 --layers 64");
  EXPECT_EQ(wrap.status, 2) << wrap.err;
  EXPECT_TRUE(contains(wrap.err, "EiB of host memory")) << wrap.err;
  // The timing samples are part of the count.
  EXPECT_TRUE(contains(big.err, "timing samples")) << big.err;
}

TEST(NumericOptionsCli, AnExportTooLargeForMemoryIsRefusedBeforeWriting) {
  const std::string dir = scratch("too_large_export");
  std::filesystem::remove_all(dir);
  const RunResult r = run_mhc("export-example " + quote(dir) + " --layers 100000 --hidden 1048576");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "mhc export-example (C=1048576 n=4 layers=100000) needs")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
  const RunResult layers = run_mhc("export-example " + quote(dir) + " --layers 2000000");
  EXPECT_EQ(layers.status, 2) << layers.err;
  EXPECT_TRUE(contains(layers.err, "--layers: expected an integer in 1..1048576, got '2000000'"))
      << layers.err;
}

TEST(NumericOptionsCli, KernelConfigNumbersOutOfRangeNameTheirKey) {
  const std::string run = "dispatch --arch 9.0 --kernel-config ";
  expect_errors({
      {run + R"('{"overlap_max_tokens": 1e400}')",
       "kernel config key 'overlap_max_tokens': a number out of range"},
      {run + R"('{"projection": "tf32", "overlap_max_tokens": -1e400}')",
       "kernel config key 'overlap_max_tokens': a number out of range"},
      {run + R"('{"projection": 1e400}')", "kernel config key 'projection': a number out of range"},
      {run + R"('{"overlap_max_tokens": 1e300}')",
       "kernel config key 'overlap_max_tokens' must be a non-negative integer"},
      {run + R"('{"overlap_max_tokens": -1}')",
       "kernel config key 'overlap_max_tokens' must be >= 0"},
      {run + R"('{"overlap_max_tokens": 99999999999999999999}')",
       "kernel config key 'overlap_max_tokens'"},
      {run + "1e400", "kernel config: a number out of range"},
  });
}

}  // namespace
}  // namespace mhc::cli::testing
