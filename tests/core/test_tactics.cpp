// Tactics files (`mhc tune`): loading through the kernel config, validation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/tactics.hpp"

namespace mhc {
namespace {

const char* const kValid = R"({"format": "mhc-tactics-1", "gpu": "NVIDIA H200", "arch": "9.0",
  "sm_count": 132, "commit": "abc", "date": "2026-12-01", "method": "m",
  "shape": {"hidden": 4096, "n": 4, "layers": 43}, "overlap_max_tokens": 32, "runs": []})";

std::string error_of(const std::string& text) {
  try {
    Tactics::parse(text, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(Tactics, ParsesTheFileMhcTuneWrites) {
  const Tactics t = Tactics::parse(kValid, "t.json");
  EXPECT_EQ(t.overlap_max_tokens, 32);
  EXPECT_EQ(t.capability, (ComputeCapability{9, 0}));
  EXPECT_EQ(t.hidden, 4096);
  EXPECT_EQ(t.layers, 43);
  EXPECT_NE(t.describe().find("t.json"), std::string::npos);
  EXPECT_EQ(Tactics::parse(t.to_json(), "again").to_json(), t.to_json());
}

TEST(Tactics, RejectsWithAClearMessage) {
  nlohmann::json base = nlohmann::json::parse(kValid);
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"format", "mhc-tactics-0", "format"}, Bad{"overlap_max_tokens", -1, "out of range"},
        Bad{"overlap_max_tokens", 1.5, "integer"}, Bad{"arch", "nine", "compute capability"},
        Bad{"sm_count", "132", "integer"}}) {
    nlohmann::json j = base;
    j[b.key] = b.value;
    const std::string msg = error_of(j.dump());
    EXPECT_NE(msg.find(b.says), std::string::npos) << b.key << ": " << msg;
    EXPECT_NE(msg.find("t.json"), std::string::npos) << msg;
  }
  nlohmann::json no_shape = base;
  no_shape.erase("shape");
  EXPECT_NE(error_of(no_shape.dump()).find("'shape'"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("object"), std::string::npos);
}

// Strings from a tactics file reach a terminal through messages and describe(): escaped.
TEST(Tactics, UntrustedStringsArePrintedEscaped) {
  nlohmann::json j = nlohmann::json::parse(kValid);
  j["format"] = "x\x1b]0;y\x07";
  EXPECT_NE(error_of(j.dump()).find(R"(format 'x\x1b]0;y\x07')"), std::string::npos);
  j = nlohmann::json::parse(kValid);
  j["gpu"] = std::string(
      "H\0"
      "200",
      5);
  j["commit"] = "\x1b[31m";
  const std::string text = Tactics::parse(j.dump(), "a\nb.json").describe();
  EXPECT_NE(text.find(R"(tactics a\x0ab.json:)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"((H\x00200,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(commit \x1b[31m,)"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
}

TEST(Tactics, LoadedThroughTheKernelConfig) {
  const std::string path = temp_path("mhc_tactics_test.json");
  std::ofstream(path) << kValid;
  const KernelConfig c = KernelConfig::parse(nlohmann::json{{"tactics", path}}.dump());
  ASSERT_TRUE(c.tactics.has_value());
  EXPECT_EQ(c.tactics->source, path);
  EXPECT_EQ(c.tactics->overlap_max_tokens, 32);
  // The canonical config carries the tactics inline: it parses back and hashes the same.
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_NE(c.hash(), KernelConfig{}.hash());
  std::filesystem::remove(path);
  EXPECT_THROW(KernelConfig::parse(nlohmann::json{{"tactics", path}}.dump()), Error);
  // Not a regular file: refused before anything is read (a FIFO or device would block).
  EXPECT_THROW(KernelConfig::parse(R"({"tactics": "/dev/zero"})"), Error);
  EXPECT_THROW(KernelConfig::parse(nlohmann::json{{"tactics", temp_path("")}}.dump()), Error);
}

TEST(Tactics, ConfigSwitchesKeepOldHashesAndRoundTrip) {
  EXPECT_EQ(KernelConfig::parse(R"({"prenorm_kernel": "auto"})").hash(), KernelConfig{}.hash());
  const KernelConfig c = KernelConfig::parse(
      R"({"prenorm_kernel": "mma64", "prenorm_splits": 3, "fused_input": false,
          "folded_post": true})");
  EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json());
  EXPECT_EQ(c.to_json(), R"({"enable_mhc_overlap":null,"folded_post":true,"fused_input":false,)"
                         R"("overlap_max_tokens":null,"prenorm_kernel":"mma64","prenorm_splits":3,)"
                         R"("projection":"tf32"})");
  const KernelConfig pdl = KernelConfig::parse(R"({"pdl": false})");
  EXPECT_EQ(pdl.to_json(), R"({"enable_mhc_overlap":null,"overlap_max_tokens":null,"pdl":false,)"
                           R"("projection":"tf32"})");
  EXPECT_EQ(KernelConfig::parse(pdl.to_json()).to_json(), pdl.to_json());
  EXPECT_NE(pdl.hash(), KernelConfig{}.hash());
  EXPECT_EQ(KernelConfig::parse(R"({"pdl": null})").hash(), KernelConfig{}.hash());
  EXPECT_TRUE(pdl.describe().find(" pdl=false") != std::string::npos) << pdl.describe();
  EXPECT_THROW(KernelConfig::parse(R"({"pdl": 1})"), Error);
  EXPECT_THROW(KernelConfig::parse(R"({"pdl": "on"})"), Error);
}

// The measured prenorm ranges: ascending, the last open-ended, known kernels, splits in range;
// written to the canonical JSON only when present (older tactics keep their hashes).
TEST(Tactics, PrenormRangesAreValidated) {
  EXPECT_EQ(Tactics::parse(kValid, "t").to_json().find("prenorm"), std::string::npos);
  auto with = [](const char* ranges) {
    nlohmann::json j = nlohmann::json::parse(kValid);
    j["prenorm"] = nlohmann::json::parse(ranges);
    return j.dump();
  };
  const Tactics t = Tactics::parse(with(R"([{"max_tokens": 16, "kernel": "mma16", "splits": 8},
               {"max_tokens": null, "kernel": "mma64", "splits": 2}])"),
                                   "t");
  ASSERT_EQ(t.prenorm.size(), 2u);
  EXPECT_EQ(t.prenorm[0].max_tokens, 16);
  EXPECT_EQ(t.prenorm[1].kernel, "mma64");
  EXPECT_EQ(Tactics::parse(t.to_json(), "again").to_json(), t.to_json());
  for (const char* bad :
       {R"([])", R"({"a": 1})", R"([{"max_tokens": 16, "kernel": "mma16", "splits": 8}])",
        R"([{"max_tokens": null, "kernel": "mma16", "splits": 8},
            {"max_tokens": null, "kernel": "mma16", "splits": 8}])",
        R"([{"max_tokens": 16, "kernel": "mma16", "splits": 8},
            {"max_tokens": 16, "kernel": "mma16", "splits": 8},
            {"max_tokens": null, "kernel": "mma16", "splits": 8}])",
        R"([{"max_tokens": null, "kernel": "mma32", "splits": 8}])",
        R"([{"max_tokens": null, "kernel": "mma16", "splits": 0}])",
        R"([{"max_tokens": 0, "kernel": "mma16", "splits": 1},
            {"max_tokens": null, "kernel": "mma16", "splits": 1}])",
        R"([{"kernel": "mma16", "splits": 1}])"}) {
    const std::string e = error_of(with(bad));
    EXPECT_TRUE(e.find("prenorm") != std::string::npos ||
                e.find("out of range") != std::string::npos)
        << bad << ": " << e;
  }
}

// `mhc tune`'s choice: the fastest per size, equal neighbours merged, the last range open-ended.
// The threshold `mhc tune` writes: the largest size up to which every size won in every round.
TEST(Tactics, OverlapThresholdFromGains) {
  using G = OverlapGains;
  EXPECT_EQ(overlap_threshold({G{1, {3, 2}}, G{8, {1, 0.5}}, G{16, {4, -0.1}}, G{32, {5, 5}}}), 8);
  EXPECT_EQ(overlap_threshold({G{1, {-1}}, G{8, {5}}}), 0);     // the smallest lost: never
  EXPECT_EQ(overlap_threshold({G{1, {2}}, G{64, {0.1}}}), 64);  // won everywhere
  EXPECT_FALSE(overlap_won(G{4, {1, 0}}));                      // a tie in one round is a loss
  const auto error_of = [](const std::vector<G>& sizes) -> std::string {
    try {
      overlap_threshold(sizes);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({}).find("no overlap gains"), std::string::npos);
  EXPECT_NE(error_of({G{8, {1}}, G{4, {1}}}).find("must ascend"), std::string::npos);
  EXPECT_NE(error_of({G{8, {}}}).find("no rounds"), std::string::npos);
  // A NaN after the first loss is still an error, not a quiet loss.
  EXPECT_NE(error_of({G{1, {-1}}, G{8, {std::nan("")}}}).find("not finite"), std::string::npos);
}

TEST(Tactics, FastestPrenormPerSize) {
  const std::vector<PrenormTiming> timings = {
      {1, "mma16", 32, 5.0},  {1, "mma16", 8, 6.0},    {1, "mma64", 32, 7.0},
      {16, "mma16", 32, 5.5}, {16, "mma16", 16, 5.6},  {256, "mma64", 8, 9.0},
      {256, "mma16", 8, 9.5}, {4096, "tma128", 2, 30}, {4096, "mma64", 2, 35},
  };
  const std::vector<PrenormTactic> got = fastest_prenorm(timings);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].max_tokens, 16);
  EXPECT_EQ(got[0].kernel, "mma16");
  EXPECT_EQ(got[0].splits, 32);
  EXPECT_EQ(got[1].max_tokens, 256);
  EXPECT_EQ(got[1].kernel, "mma64");
  EXPECT_EQ(got[1].splits, 8);
  EXPECT_EQ(got[2].kernel, "tma128");
  EXPECT_GT(got[2].max_tokens, int64_t{1} << 40) << "open-ended";
  EXPECT_THROW(fastest_prenorm({}), Error);
  EXPECT_THROW(fastest_prenorm({{1, "mma16", 1, 0.0}}), Error);
  EXPECT_THROW(fastest_prenorm({{1, "mma16", 1, std::nan("")}}), Error);
}

// The measured fused-boundary threshold: optional (absent keeps older files' canonical JSON and
// hashes), an integer in 0..2^20, shown by describe().
TEST(Tactics, FusedBoundaryThresholdIsValidated) {
  EXPECT_FALSE(Tactics::parse(kValid, "t").fused_boundary_min_tokens.has_value());
  EXPECT_EQ(Tactics::parse(kValid, "t").to_json().find("fused_boundary"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(kValid);
  j["fused_boundary_min_tokens"] = 640;
  const Tactics t = Tactics::parse(j.dump(), "t");
  EXPECT_EQ(t.fused_boundary_min_tokens, 640);
  EXPECT_NE(t.describe().find("fused boundary from 640 tokens"), std::string::npos) << t.describe();
  EXPECT_EQ(Tactics::parse(t.to_json(), "again").to_json(), t.to_json());
  j["fused_boundary_min_tokens"] = 0;
  EXPECT_NE(Tactics::parse(j.dump(), "t").describe().find("fused boundary never"),
            std::string::npos);
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json(1.5), nlohmann::json("640"),
                                    nlohmann::json(int64_t{1} << 21)}) {
    j["fused_boundary_min_tokens"] = bad;
    const std::string e = error_of(j.dump());
    EXPECT_NE(e.find("fused_boundary_min_tokens"), std::string::npos) << bad.dump() << ": " << e;
  }
}

// `mhc tune`'s choice: the first size of the run of wins that reaches the largest measured size.
TEST(Tactics, FusedBoundaryThresholdFromTimings) {
  using T = std::vector<BoundaryTiming>;
  EXPECT_EQ(fused_boundary_threshold(T{{512, 30, 29}, {640, 30, 31}, {768, 31, 33}}), 640);
  EXPECT_EQ(fused_boundary_threshold(T{{768, 31, 33}, {512, 30, 29}, {640, 30, 31}}), 640)
      << "in any order";
  EXPECT_EQ(fused_boundary_threshold(T{{512, 28, 29}, {640, 30, 31}}), 512) << "won everywhere";
  EXPECT_EQ(fused_boundary_threshold(T{{512, 28, 29}, {640, 32, 31}, {768, 31, 33}}), 768)
      << "a loss in between moves it up";
  EXPECT_EQ(fused_boundary_threshold(T{{512, 28, 29}, {4096, 40, 39}}), 0) << "lost at the largest";
  EXPECT_EQ(fused_boundary_threshold(T{{512, 30, 30}}), 0) << "a tie is not a win";
  EXPECT_THROW(fused_boundary_threshold(T{}), Error);
  EXPECT_THROW(fused_boundary_threshold(T{{512, 0, 29}}), Error);
  EXPECT_THROW(fused_boundary_threshold(T{{512, 30, std::nan("")}}), Error);
  EXPECT_THROW(fused_boundary_threshold(T{{512, 30, 29}, {512, 28, 29}}), Error) << "twice";
}

}  // namespace
}  // namespace mhc
