// The overlap eligibility policy (design doc, "Eligibility"): every condition and its fallback,
// the upstream cases, token thresholds, execution modes, the all-reduce choice and its guard.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"

namespace mhc {
namespace {

// A binary with SM100 code, whatever this build holds (the plan's own tests cover the others).
DispatchInputs inputs(const char* arch, std::optional<bool> enable = std::nullopt) {
  DispatchInputs in;
  in.capability = parse_capability(arch);
  in.images = parse_images("sm_90a,sm_80,sm_100f,compute_80");
  in.config.enable_mhc_overlap = enable;
  return in;
}

// A TP object that may be asked only for its world size; asking whether the fused all-reduce is
// available fails the test (and would answer "yes" if the failure were ignored).
class WorldSizeOnlyTp : public TensorParallelInfo {
 public:
  explicit WorldSizeOnlyTp(int world) : world_(world) {}
  int world_size() const override { return world_; }
  bool fused_allreduce_available() const override {
    ADD_FAILURE() << "fused_allreduce_available() consulted";
    return true;
  }

 private:
  int world_;
};

class FakeTp : public TensorParallelInfo {
 public:
  FakeTp(int world, bool fused) : world_(world), fused_(fused) {}
  int world_size() const override { return world_; }
  bool fused_allreduce_available() const override { return fused_; }

 private:
  int world_;
  bool fused_;
};

// ---- the condition matrix ---------------------------------------------------------------------

using Tweak = void (*)(DispatchInputs&);
void none(DispatchInputs&) {}

struct Case {
  const char* name;
  const char* arch;
  std::optional<bool> enable;
  Tweak tweak;
  const char* reason_code;  // "" = overlap
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DispatchMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(DispatchMatrix, DecidesAsTheDesignSays) {
  const Case& c = GetParam();
  DispatchInputs in = inputs(c.arch, c.enable);
  c.tweak(in);
  const DispatchDecision d = decide(in);
  EXPECT_EQ(d.reason_code, c.reason_code);
  EXPECT_EQ(d.overlap, std::string(c.reason_code).empty());
  EXPECT_EQ(d.reason.empty(), d.overlap) << d.reason;
  EXPECT_EQ(d.max_tokens,
            in.config.overlap_max_tokens.value_or(c.arch == std::string("9.0") ? 32 : 16));
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

// Upstream's cases (the SM90 draft's test list) on the default shape: C=5120, n=4, full graph,
// M=8, no ubatching, prenorm GEMM available.
INSTANTIATE_TEST_SUITE_P(
    Upstream, DispatchMatrix,
    ::testing::Values(
        Case{"sm90_unset", "9.0", std::nullopt, none, "sm90_not_opted_in"},
        Case{"sm90_false", "9.0", false, none, "disabled_by_config"},
        Case{"sm90_true", "9.0", true, none, ""},
        Case{"sm100_unset", "10.0", std::nullopt, none, ""},
        Case{"sm103_unset", "10.3", std::nullopt, none, ""},
        Case{"sm100_true", "10.0", true, none, ""},
        Case{"sm100_false", "10.0", false, none, "disabled_by_config"},
        Case{"sm103_false", "10.3", false, none, "disabled_by_config"},
        Case{"sm80_true", "8.0", true, none, "arch_unsupported"},
        Case{"sm120_true", "12.0", true, none, "arch_unsupported"},
        Case{"sm89_unset", "8.9", std::nullopt, none, "arch_unsupported"},
        Case{"sm101_true", "10.1", true, none, "arch_unsupported"},
        Case{"sm91_true", "9.1", true, none, "arch_unsupported"},
        Case{"sm80_false", "8.0", false, none, "disabled_by_config"},
        Case{"sm90_no_prenorm_gemm", "9.0", true,
             [](DispatchInputs& in) { in.prenorm_gemm_available = false; }, "no_prenorm_gemm"},
        Case{"sm100_no_prenorm_gemm", "10.0", std::nullopt,
             [](DispatchInputs& in) { in.prenorm_gemm_available = false; }, "no_prenorm_gemm"},
        Case{"ubatching", "10.0", std::nullopt, [](DispatchInputs& in) { in.ubatching = true; },
             "ubatching"},
        Case{"hidden_5121", "10.0", std::nullopt, [](DispatchInputs& in) { in.hidden = 5121; },
             "hidden_not_multiple_of_64"},
        Case{"n3", "9.0", true, [](DispatchInputs& in) { in.n = 3; }, "nmix_out_of_range"},
        Case{"n6", "10.0", std::nullopt, [](DispatchInputs& in) { in.n = 6; },
             "nmix_out_of_range"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Shapes, DispatchMatrix,
    ::testing::Values(
        Case{"hidden_4096", "9.0", true, [](DispatchInputs& in) { in.hidden = 4096; }, ""},
        Case{"hidden_7168", "9.0", true, [](DispatchInputs& in) { in.hidden = 7168; }, ""},
        Case{"hidden_64", "9.0", true, [](DispatchInputs& in) { in.hidden = 64; }, ""},
        Case{"hidden_32", "9.0", true, [](DispatchInputs& in) { in.hidden = 32; },
             "hidden_not_multiple_of_64"},
        Case{"hidden_5184", "9.0", true, [](DispatchInputs& in) { in.hidden = 5120 + 64; }, ""},
        Case{"hidden_5152", "9.0", true, [](DispatchInputs& in) { in.hidden = 5120 + 32; },
             "hidden_not_multiple_of_64"},
        Case{"n1_nmix3", "9.0", true, [](DispatchInputs& in) { in.n = 1; }, "nmix_out_of_range"},
        Case{"n2_nmix8", "9.0", true, [](DispatchInputs& in) { in.n = 2; }, ""},
        Case{"n4_nmix24", "9.0", true, [](DispatchInputs& in) { in.n = 4; }, ""},
        Case{"n5_nmix35", "9.0", true, [](DispatchInputs& in) { in.n = 5; }, "nmix_out_of_range"},
        Case{"n100", "9.0", true, [](DispatchInputs& in) { in.n = 100; }, "nmix_out_of_range"}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Modes, DispatchMatrix,
    ::testing::Values(
        Case{"eager", "10.0", std::nullopt, [](DispatchInputs& in) { in.mode = ExecMode::eager; },
             "not_full_graph"},
        Case{"piecewise", "9.0", true, [](DispatchInputs& in) { in.mode = ExecMode::piecewise; },
             "not_full_graph"},
        Case{"full", "9.0", true, [](DispatchInputs& in) { in.mode = ExecMode::full; }, ""}),
    case_name);

INSTANTIATE_TEST_SUITE_P(
    Tokens, DispatchMatrix,
    ::testing::Values(
        Case{"m0", "9.0", true, [](DispatchInputs& in) { in.tokens = 0; }, "zero_tokens"},
        Case{"m1", "9.0", true, [](DispatchInputs& in) { in.tokens = 1; }, ""},
        Case{"m16", "10.0", std::nullopt, [](DispatchInputs& in) { in.tokens = 16; }, ""},
        Case{"m17", "10.0", std::nullopt, [](DispatchInputs& in) { in.tokens = 17; },
             "too_many_tokens"},
        Case{"m8192", "9.0", true, [](DispatchInputs& in) { in.tokens = 8192; }, "too_many_tokens"},
        Case{"max0_m0", "9.0", true,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 0;
               in.tokens = 0;
             },
             "zero_tokens"},
        Case{"max0_m1", "9.0", true,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 0;
               in.tokens = 1;
             },
             "too_many_tokens"},
        Case{"max32_m17", "9.0", true,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 32;
               in.tokens = 17;
             },
             ""},
        Case{"max32_m32", "10.0", std::nullopt,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 32;
               in.tokens = 32;
             },
             ""},
        Case{"max32_m33", "10.0", std::nullopt,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 32;
               in.tokens = 33;
             },
             "too_many_tokens"},
        Case{"max4_m5", "9.0", true,
             [](DispatchInputs& in) {
               in.config.overlap_max_tokens = 4;
               in.tokens = 5;
             },
             "too_many_tokens"}),
    case_name);

// ---- order: the first failed condition wins ---------------------------------------------------

TEST(DispatchOrder, FirstFailureWinsAsConditionsAreFixedOneByOne) {
  // Everything wrong at once, then each condition fixed in turn: the reported reason must move
  // down the documented order.
  DispatchInputs in = inputs("8.0", false);
  in.prenorm_gemm_available = false;
  in.hidden = 5121;
  in.n = 3;
  in.ubatching = true;
  in.mode = ExecMode::eager;
  in.tokens = 0;
  const std::vector<std::pair<Tweak, const char*>> steps = {
      {none, "disabled_by_config"},
      {[](DispatchInputs& i) { i.config.enable_mhc_overlap.reset(); }, "arch_unsupported"},
      {[](DispatchInputs& i) {
         i.capability = {9, 0};
       },
       "sm90_not_opted_in"},
      {[](DispatchInputs& i) { i.config.enable_mhc_overlap = true; }, "no_prenorm_gemm"},
      {[](DispatchInputs& i) { i.prenorm_gemm_available = true; }, "hidden_not_multiple_of_64"},
      {[](DispatchInputs& i) { i.hidden = 5120; }, "nmix_out_of_range"},
      {[](DispatchInputs& i) { i.n = 4; }, "ubatching"},
      {[](DispatchInputs& i) { i.ubatching = false; }, "not_full_graph"},
      {[](DispatchInputs& i) { i.mode = ExecMode::full; }, "zero_tokens"},
      {[](DispatchInputs& i) { i.tokens = 33; }, "too_many_tokens"},
      {[](DispatchInputs& i) { i.tokens = 32; }, ""},
  };
  for (const auto& [fix, expected] : steps) {
    fix(in);
    const DispatchDecision d = decide(in);
    EXPECT_EQ(d.reason_code, expected);
    EXPECT_EQ(d.overlap, std::string(expected).empty());
  }
}

// ---- reasons ------------------------------------------------------------------------------------

struct ReasonCase {
  Tweak tweak;
  const char* code;
  std::vector<const char*> parts;  // numbers and names the sentence must carry
};

TEST(DispatchReason, SentencesCarryTheNumbers) {
  const std::vector<ReasonCase> cases = {
      {[](DispatchInputs& i) { i.config.enable_mhc_overlap = false; },
       "disabled_by_config",
       {"enable_mhc_overlap=false"}},
      {[](DispatchInputs& i) {
         i.capability = {12, 0};
       },
       "arch_unsupported",
       {"12.0", "10.0", "10.3"}},
      {[](DispatchInputs& i) { i.config.enable_mhc_overlap.reset(); },
       "sm90_not_opted_in",
       {"9.0", "enable_mhc_overlap=true"}},
      {[](DispatchInputs& i) { i.prenorm_gemm_available = false; },
       "no_prenorm_gemm",
       {"prenorm GEMM", "9.0"}},
      {[](DispatchInputs& i) { i.hidden = 5121; },
       "hidden_not_multiple_of_64",
       {"C=5121", "64", "= 1"}},
      {[](DispatchInputs& i) { i.n = 3; }, "nmix_out_of_range", {"= 15", "n=3", "32", "8"}},
      {[](DispatchInputs& i) { i.n = 6; }, "nmix_out_of_range", {"= 48", "n=6"}},
      // n(n+2) in 64 bits: n + 2 in int would overflow first.
      {[](DispatchInputs& i) { i.n = 2147483647; },
       "nmix_out_of_range",
       {"= 4611686018427387903 ", "n=2147483647"}},
      {[](DispatchInputs& i) { i.ubatching = true; }, "ubatching", {"ubatching"}},
      {[](DispatchInputs& i) { i.mode = ExecMode::piecewise; },
       "not_full_graph",
       {"piecewise", "FULL"}},
      {[](DispatchInputs& i) { i.tokens = 0; }, "zero_tokens", {"M=0", "32"}},
      {[](DispatchInputs& i) { i.tokens = 33; }, "too_many_tokens", {"M=33", "32"}},
  };
  for (const auto& c : cases) {
    DispatchInputs in = inputs("9.0", true);
    c.tweak(in);
    const DispatchDecision d = decide(in);
    ASSERT_EQ(d.reason_code, c.code);
    for (const char* part : c.parts) {
      EXPECT_NE(d.reason.find(part), std::string::npos)
          << c.code << ": '" << part << "' not in '" << d.reason << "'";
    }
    EXPECT_EQ(d.reason.back(), '.') << d.reason;
  }
}

TEST(DispatchReason, OverrideThresholdAppearsInSentence) {
  DispatchInputs in = inputs("10.0");
  in.config.overlap_max_tokens = 32;
  in.tokens = 40;
  const DispatchDecision d = decide(in);
  EXPECT_EQ(d.max_tokens, 32);
  EXPECT_NE(d.reason.find("M=40"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("32"), std::string::npos) << d.reason;
}

TEST(DispatchThreshold, HopperDefaultIsMeasuredOthersAreUpstreams) {
  // bench/results/logs/h200-2026-12-01-device-tune-9ec6b44.log (docs/tuning.md).
  EXPECT_EQ(default_overlap_max_tokens(parse_capability("9.0")), 32);
  EXPECT_EQ(decide(inputs("9.0", true)).max_tokens, 32);
  for (const char* arch : {"10.0", "10.3", "8.0", "12.0"}) {
    EXPECT_EQ(default_overlap_max_tokens(parse_capability(arch)), 16) << arch;
    EXPECT_EQ(decide(inputs(arch)).max_tokens, 16) << arch;
  }
}

TEST(DispatchThreshold, HopperBoundaryAt32) {
  DispatchInputs in = inputs("9.0", true);
  in.tokens = 32;
  EXPECT_TRUE(decide(in).overlap);
  in.tokens = 33;
  EXPECT_EQ(decide(in).reason_code, "too_many_tokens");
}

// ---- all-reduce -------------------------------------------------------------------------------

TEST(DispatchAllReduce, NoTensorParallelismMeansNone) {
  for (const char* arch : {"9.0", "10.0", "10.3", "8.0"}) {
    EXPECT_EQ(decide(inputs(arch)).all_reduce, AllReduce::none) << arch;
    DispatchInputs in = inputs(arch);
    const WorldSizeOnlyTp world1(1);
    in.tp = &world1;
    EXPECT_EQ(decide(in).all_reduce, AllReduce::none) << arch;
  }
}

TEST(DispatchAllReduce, Sm100FamilyUsesFusedOnlyWhenAvailable) {
  for (const char* arch : {"10.0", "10.3"}) {
    DispatchInputs in = inputs(arch);
    const FakeTp with_fused(2, true), without_fused(8, false);
    in.tp = &with_fused;
    EXPECT_EQ(decide(in).all_reduce, AllReduce::fused) << arch;
    in.tp = &without_fused;
    EXPECT_EQ(decide(in).all_reduce, AllReduce::nccl) << arch;
  }
}

// The guard: off the SM100 family the fused kernel is ruled out before the TP object is asked.
// WorldSizeOnlyTp fails the test if asked, and would say "available" if the failure were lost.
TEST(DispatchAllReduce, FusedIsNeverConsultedOffSm100) {
  for (const char* arch : {"9.0", "8.0", "8.9", "10.1", "12.0"}) {
    for (std::optional<bool> enable : {std::optional<bool>{}, std::optional<bool>{true}}) {
      DispatchInputs in = inputs(arch, enable);
      const WorldSizeOnlyTp tp(2);
      in.tp = &tp;
      EXPECT_EQ(decide(in).all_reduce, AllReduce::nccl) << arch;
    }
  }
}

TEST(DispatchAllReduce, Sm90WithOverlapOnStillUsesNccl) {
  DispatchInputs in = inputs("9.0", true);
  const WorldSizeOnlyTp tp(8);
  in.tp = &tp;
  const DispatchDecision d = decide(in);
  EXPECT_TRUE(d.overlap);
  EXPECT_EQ(d.all_reduce, AllReduce::nccl);
}

// The all-reduce exists whether or not the coefficient path overlaps with it.
TEST(DispatchAllReduce, IsIndependentOfOverlap) {
  const FakeTp tp(4, true);
  DispatchInputs in = inputs("10.0", false);
  in.tp = &tp;
  EXPECT_FALSE(decide(in).overlap);
  EXPECT_EQ(decide(in).all_reduce, AllReduce::fused);
  in = inputs("10.0");
  in.tp = &tp;
  in.tokens = 4096;
  EXPECT_FALSE(decide(in).overlap);
  EXPECT_EQ(decide(in).all_reduce, AllReduce::fused);
  in = inputs("9.0");  // not opted in
  in.tp = &tp;
  EXPECT_FALSE(decide(in).overlap);
  EXPECT_EQ(decide(in).all_reduce, AllReduce::nccl);
}

// ---- impossible inputs -------------------------------------------------------------------------

TEST(DispatchInputsCheck, ImpossibleInputsThrow) {
  const std::vector<Tweak> bad = {
      [](DispatchInputs& i) { i.hidden = 0; },
      [](DispatchInputs& i) { i.hidden = -64; },
      [](DispatchInputs& i) { i.n = 0; },
      [](DispatchInputs& i) { i.n = -4; },  // would give NMIX = 8
      [](DispatchInputs& i) { i.tokens = -1; },
      [](DispatchInputs& i) { i.config.overlap_max_tokens = -1; },
  };
  for (size_t k = 0; k < bad.size(); ++k) {
    DispatchInputs in = inputs("9.0", true);
    bad[k](in);
    EXPECT_THROW(decide(in), Error) << "case " << k;
  }
  DispatchInputs in = inputs("10.0");
  const FakeTp world0(0, true);
  in.tp = &world0;
  EXPECT_THROW(decide(in), Error);
}

// ---- strings and JSON
// ----------------------------------------------------------------------------

TEST(DispatchStrings, EnumsRoundTrip) {
  for (ExecMode m : {ExecMode::eager, ExecMode::piecewise, ExecMode::full}) {
    EXPECT_EQ(parse_exec_mode(to_string(m)), m);
  }
  EXPECT_EQ(to_string(ExecMode::piecewise), "piecewise");
  EXPECT_EQ(to_string(AllReduce::none), "none");
  EXPECT_EQ(to_string(AllReduce::nccl), "nccl");
  EXPECT_EQ(to_string(AllReduce::fused), "fused");
}

TEST(DispatchStrings, BadModeListsTheKnownModes) {
  for (const char* bad : {"", "FULL", "graph", "full "}) {
    try {
      parse_exec_mode(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("eager, piecewise, full"), std::string::npos);
    }
  }
}

TEST(DispatchStrings, ParseCapability) {
  const std::vector<std::pair<const char*, std::pair<int, int>>> good = {
      {"9.0", {9, 0}}, {"10.0", {10, 0}}, {"10.3", {10, 3}}, {"8.6", {8, 6}}, {"12.1", {12, 1}}};
  for (const auto& [text, want] : good) {
    const ComputeCapability cc = parse_capability(text);
    EXPECT_EQ(cc.major, want.first) << text;
    EXPECT_EQ(cc.minor, want.second) << text;
  }
  EXPECT_TRUE(parse_capability("9.0").is_sm90());
  EXPECT_TRUE(parse_capability("10.3").is_sm100_family());
  EXPECT_FALSE(parse_capability("10.1").is_sm100_family());
}

TEST(DispatchStrings, ParseCapabilityRejectsGarbage) {
  for (const char* bad : {"", "9", "9.", ".0", "sm90", "sm_90", "90", "9.0.1", "-1.0", "+9.0",
                          " 9.0", "9.0 ", "9,0", "a.b", "100.0", "0.0", "9.-0", "99999999999.0"}) {
    try {
      parse_capability(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("MAJOR.MINOR"), std::string::npos) << msg;
    }
  }
}

TEST(DispatchDecisionText, Describe) {
  EXPECT_EQ(decide(inputs("9.0", true)).describe(), "overlap=yes max_tokens=32 all_reduce=none");
  const std::string no = decide(inputs("9.0")).describe();
  EXPECT_EQ(no.rfind("overlap=no reason_code=sm90_not_opted_in max_tokens=32 all_reduce=none: ", 0),
            0u)
      << no;
  EXPECT_NE(no.find("opt-in"), std::string::npos) << no;
}

TEST(DispatchDecisionText, JsonHasExactlyTheDocumentedKeys) {
  DispatchInputs in = inputs("10.0");
  const FakeTp tp(2, false);
  in.tp = &tp;
  in.tokens = 17;
  const DispatchDecision d = decide(in);
  const auto j = nlohmann::json::parse(d.to_json());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 5u);
  EXPECT_EQ(j.at("overlap"), false);
  EXPECT_EQ(j.at("reason_code"), "too_many_tokens");
  EXPECT_EQ(j.at("reason"), d.reason);
  EXPECT_EQ(j.at("max_tokens"), 16);
  EXPECT_EQ(j.at("all_reduce"), "nccl");

  const auto yes = nlohmann::json::parse(decide(inputs("10.3")).to_json());
  EXPECT_EQ(yes.at("overlap"), true);
  EXPECT_EQ(yes.at("reason_code"), "");
  EXPECT_EQ(yes.at("all_reduce"), "none");
}

}  // namespace
}  // namespace mhc
