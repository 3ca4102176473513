// Replays the fuzzers' seed and regression corpus (fuzz/corpus) through the readers in the normal
// (gcc, unsanitised) build: every input either parses or is rejected with mhc::Error; nothing
// else escapes. So a regression input keeps guarding the readers even where libFuzzer is absent.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "checkpoint_test_util.hpp"
#include "mhc/core/config.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;

// tests/data -> the repository root, lexically (tests/data is not in git, so it may not exist).
const fs::path kCorpus =
    fs::path(MHC_TEST_DATA_DIR).parent_path().parent_path() / "fuzz" / "corpus";

std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kCorpus / target)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointFuzzCorpus, SafetensorsInputsParseOrFailCleanly) {
  int accepted = 0, rejected = 0;
  for (const auto& p : inputs("safetensors")) {
    const std::string text = testing::slurp(p);
    std::vector<std::byte> bytes(text.size());
    std::memcpy(bytes.data(), text.data(), text.size());
    try {
      const st::File f = st::File::from_bytes(std::move(bytes), p.filename().string());
      for (const auto& t : f.tensors()) EXPECT_EQ(f.bytes(t).size(), t.nbytes());
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    }  // anything else fails the test as an uncaught exception
  }
  EXPECT_GE(accepted, 4);  // the valid-* seeds
  EXPECT_GE(rejected, 15);
}

TEST(CheckpointFuzzCorpus, IndexAndConfigInputsParseOrFailCleanly) {
  int accepted = 0;
  for (const auto& p : inputs("index")) {
    const std::string text = testing::slurp(p);
    try {
      parse_index(text, p.filename().string());
      ++accepted;
    } catch (const Error&) {
    }
    try {
      parse_config(text, p.filename().string());
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GE(accepted, 4);
}

// fuzz_config's seeds as --kernel-config text (the site-metadata half is fuzzer-only).
TEST(CheckpointFuzzCorpus, KernelConfigInputsParseOrFailCleanly) {
  int accepted = 0, rejected = 0;
  for (const auto& p : inputs("config")) {
    try {
      KernelConfig::parse(testing::slurp(p));
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GE(accepted, 2);  // the valid-kernel-config* seeds
  EXPECT_GE(rejected, 4);  // the bad-kernel-config* and hostile-* seeds
}

}  // namespace
}  // namespace mhc::ckpt
