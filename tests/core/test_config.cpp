// KernelConfig: parsing (accepted values, every kind of rejection), canonical JSON, hash, describe.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>

#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"

namespace mhc {
namespace {

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Independent FNV-1a 64, checked against published vectors, so hash() is tested for being FNV-1a
// over to_json() and not merely for being unchanged.
uint64_t reference_fnv1a64(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string parse_error(const std::string& text) {
  try {
    KernelConfig::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse accepted: " << text;
  return "";
}

TEST(KernelConfigParse, EmptyAndEmptyObjectGiveDefaults) {
  for (const char* text : {"", "{}", "  \n", " { } "}) {
    const KernelConfig c = KernelConfig::parse(text);
    EXPECT_FALSE(c.enable_mhc_overlap.has_value()) << text;
    EXPECT_FALSE(c.overlap_max_tokens.has_value()) << text;
    EXPECT_EQ(c.projection, Projection::tf32) << text;
  }
}

TEST(KernelConfigParse, EnableTriState) {
  EXPECT_FALSE(KernelConfig::parse(R"({"enable_mhc_overlap": null})").enable_mhc_overlap);
  EXPECT_EQ(KernelConfig::parse(R"({"enable_mhc_overlap": true})").enable_mhc_overlap, true);
  EXPECT_EQ(KernelConfig::parse(R"({"enable_mhc_overlap": false})").enable_mhc_overlap, false);
}

TEST(KernelConfigParse, MaxTokensValues) {
  EXPECT_FALSE(KernelConfig::parse(R"({"overlap_max_tokens": null})").overlap_max_tokens);
  EXPECT_EQ(KernelConfig::parse(R"({"overlap_max_tokens": 0})").overlap_max_tokens, 0);
  EXPECT_EQ(KernelConfig::parse(R"({"overlap_max_tokens": 32})").overlap_max_tokens, 32);
  EXPECT_EQ(KernelConfig::parse(R"({"overlap_max_tokens": 1048576})").overlap_max_tokens, 1 << 20);
}

TEST(KernelConfigParse, BatchInvariantValues) {
  EXPECT_FALSE(KernelConfig::parse("{}").batch_invariant);
  EXPECT_TRUE(KernelConfig::parse(R"({"batch_invariant": true})").batch_invariant);
  EXPECT_FALSE(KernelConfig::parse(R"({"batch_invariant": false})").batch_invariant);
  for (const char* text : {R"({"batch_invariant": null})", R"({"batch_invariant": 1})",
                           R"({"batch_invariant": "true"})"}) {
    EXPECT_TRUE(Contains(parse_error(text), "'batch_invariant' must be true or false")) << text;
  }
}

TEST(KernelConfigParse, ProjectionValues) {
  EXPECT_EQ(KernelConfig::parse(R"({"projection": "tf32"})").projection, Projection::tf32);
  EXPECT_EQ(KernelConfig::parse(R"({"projection": "fp32"})").projection, Projection::fp32);
}

TEST(KernelConfigParse, AllKeysTogether) {
  const auto c = KernelConfig::parse(
      R"({"projection":"fp32","overlap_max_tokens":24,"enable_mhc_overlap":true})");
  EXPECT_EQ(c.enable_mhc_overlap, true);
  EXPECT_EQ(c.overlap_max_tokens, 24);
  EXPECT_EQ(c.projection, Projection::fp32);
}

TEST(KernelConfigParse, UnknownKeyIsNamedWithTheKnownKeys) {
  const std::string msg = parse_error(R"({"enable_mhc_overlap": true, "enable_overlap": true})");
  EXPECT_TRUE(Contains(msg, "'enable_overlap'"));
  EXPECT_TRUE(Contains(msg, "batch_invariant, enable_mhc_overlap, overlap_max_tokens, projection"));
}

TEST(KernelConfigParse, UnknownKeySuggestsTheClosestKey) {
  for (const auto& [typed, meant] :
       {std::pair{"enable_overlap", "enable_mhc_overlap"},
        std::pair{"overlap_tokens", "overlap_max_tokens"},
        std::pair{"batch-invariant", "batch_invariant"}, std::pair{"pdl_", "pdl"},
        std::pair{"fused_boundray", "fused_boundary"}, std::pair{"tactic", "tactics"}}) {
    const std::string msg = parse_error(fmt::format(R"({{"{}": true}})", typed));
    EXPECT_TRUE(Contains(
        msg, fmt::format("unknown kernel config key '{}' (did you mean '{}'?)", typed, meant)))
        << msg;
  }
  // Nothing close: no guess, the known keys still listed.
  for (const char* typed : {"speed", "x", "enable_everything_please"}) {
    const std::string msg = parse_error(fmt::format(R"({{"{}": true}})", typed));
    EXPECT_FALSE(Contains(msg, "did you mean")) << msg;
    EXPECT_TRUE(Contains(msg, "known keys: batch_invariant,")) << msg;
  }
}

TEST(KernelConfigParse, DuplicateKeyIsRejected) {
  EXPECT_TRUE(Contains(parse_error(R"({"enable_mhc_overlap": true, "enable_mhc_overlap": false})"),
                       "'enable_mhc_overlap' appears twice"));
}

// At any depth: an inline tactics object that says two things is refused as a file would be.
TEST(KernelConfigParse, DuplicateKeyInANestedObjectIsRejected) {
  const std::string tactics =
      R"({"format": "mhc-tactics-1", "gpu": "X", "arch": "9.0", "sm_count": 132,
          "shape": {"hidden": 5120, "n": 4, "layers": 40}, "overlap_max_tokens": 8)";
  EXPECT_EQ(KernelConfig::parse(R"({"tactics": )" + tactics + "}}").tactics->overlap_max_tokens, 8);
  const std::string msg =
      parse_error(R"({"tactics": )" + tactics + R"(, "overlap_max_tokens": 999}})");
  EXPECT_TRUE(Contains(msg, "kernel config key 'tactics': key 'overlap_max_tokens' appears twice"))
      << msg;
  EXPECT_TRUE(Contains(parse_error(R"({"tactics": {"shape": {"n": 4, "n": 2}}})"),
                       "key 'n' appears twice"));
}

// nlohmann's lexer stops at a NUL byte; what follows one must not go unread.
TEST(KernelConfigParse, NulByteIsRejected) {
  const std::string text = std::string(R"({"enable_mhc_overlap": true})") + '\0' + R"({"x": 1})";
  EXPECT_TRUE(Contains(parse_error(text), "not valid JSON (at byte 29): a NUL byte"));
}

// Keys and values from the command line reach a terminal: control bytes are printed escaped, and
// a NUL inside a key no longer cuts the message short.
TEST(KernelConfigParse, ControlBytesInKeysArePrintedEscaped) {
  const std::string msg = parse_error(R"({"a\u0000b\u001b]0;x\u0007": 1})");
  EXPECT_TRUE(Contains(msg, R"(unknown kernel config key 'a\x00b\x1b]0;x\x07')")) << msg;
  EXPECT_TRUE(Contains(msg, "known keys"));
  EXPECT_TRUE(Contains(parse_error(R"({"\u001b": 1, "\u001b": 2})"), R"('\x1b' appears twice)"));
}

struct BadValue {
  const char* json;
  const char* expected_in_message;
};

void PrintTo(const BadValue& v, std::ostream* os) { *os << v.json; }

// The case's index and its JSON as a test name, '_' for what is not a letter or digit:
// "3_overlap_max_tokens_16"; the index keeps "16" and [16] apart.
std::string bad_value_name(const ::testing::TestParamInfo<BadValue>& info) {
  std::string name = std::to_string(info.index) + "_";
  for (const char* c = info.param.json; *c != '\0'; ++c) {
    const bool word = std::isalnum(static_cast<unsigned char>(*c)) != 0;
    if (word) {
      name += *c;
    } else if (name.back() != '_') {
      name += '_';
    }
  }
  while (name.back() == '_') name.pop_back();
  return name;
}

class KernelConfigBadValue : public ::testing::TestWithParam<BadValue> {};

TEST_P(KernelConfigBadValue, IsRejectedNamingKeyAndExpectation) {
  EXPECT_TRUE(Contains(parse_error(GetParam().json), GetParam().expected_in_message));
}

INSTANTIATE_TEST_SUITE_P(
    WrongTypes, KernelConfigBadValue,
    ::testing::Values(
        BadValue{R"({"enable_mhc_overlap": "true"})",
                 "'enable_mhc_overlap' must be true, false or null, got string \"true\""},
        BadValue{R"({"enable_mhc_overlap": 1})",
                 "'enable_mhc_overlap' must be true, false or null"},
        BadValue{R"({"overlap_max_tokens": 16.0})",
                 "'overlap_max_tokens' must be a non-negative integer or null, got number 16.0"},
        BadValue{R"({"overlap_max_tokens": 1e3})", "'overlap_max_tokens' must be a non-negative"},
        BadValue{R"({"overlap_max_tokens": "16"})",
                 "'overlap_max_tokens' must be a non-negative integer or null, got string"},
        BadValue{R"({"overlap_max_tokens": true})", "'overlap_max_tokens' must be a non-negative"},
        BadValue{R"({"overlap_max_tokens": [16]})", "got array [16]"},
        BadValue{R"({"projection": null})", "'projection' must be a string"},
        BadValue{R"({"projection": 32})", "'projection' must be a string"}),
    bad_value_name);

INSTANTIATE_TEST_SUITE_P(
    WrongValues, KernelConfigBadValue,
    ::testing::Values(
        BadValue{R"({"overlap_max_tokens": -1})", "'overlap_max_tokens' must be >= 0, got -1"},
        BadValue{R"({"overlap_max_tokens": 1048577})",
                 "'overlap_max_tokens' must be <= 1048576, got 1048577"},
        BadValue{R"({"overlap_max_tokens": 18446744073709551615})", "must be <= 1048576"},
        BadValue{R"({"overlap_max_tokens": 99999999999999999999999})", "got number"},
        BadValue{R"({"projection": "bf16"})",
                 "'projection' must be \"tf32\" or \"fp32\", got \"bf16\""},
        BadValue{R"({"projection": "TF32"})", "must be \"tf32\" or \"fp32\""}),
    bad_value_name);

INSTANTIATE_TEST_SUITE_P(NotAnObject, KernelConfigBadValue,
                         ::testing::Values(BadValue{"[]", "must be a JSON object, got array"},
                                           BadValue{"true", "must be a JSON object, got boolean"},
                                           BadValue{"null", "must be a JSON object, got null"},
                                           BadValue{R"("enable_mhc_overlap")",
                                                    "must be a JSON object, got string"},
                                           BadValue{"16", "must be a JSON object, got number"}),
                         bad_value_name);

INSTANTIATE_TEST_SUITE_P(
    BrokenJson, KernelConfigBadValue,
    ::testing::Values(BadValue{R"({"enable_mhc_overlap": tru})", "not valid JSON (at byte 27)"},
                      BadValue{R"({"enable_mhc_overlap": true)", "not valid JSON (at byte 28)"},
                      BadValue{R"({'projection': 'fp32'})", "not valid JSON (at byte 2)"},
                      BadValue{R"({"projection": "fp32",})", "not valid JSON (at byte 23)"},
                      BadValue{R"({} {})", "not valid JSON (at byte 4)"}),
    bad_value_name);

TEST(KernelConfigParse, BrokenJsonMessageHasNoLibraryPrefix) {
  const std::string msg = parse_error("{");
  EXPECT_TRUE(Contains(msg, "not valid JSON"));
  EXPECT_FALSE(Contains(msg, "[json.exception"));
}

// Beyond double's range the JSON parser itself gives up; the error still names the key.
TEST(KernelConfigParse, NumberOutOfRangeNamesItsKey) {
  for (const char* text : {R"({"overlap_max_tokens": 1e400})", R"({"overlap_max_tokens": -1e999})",
                           R"({"enable_mhc_overlap": null, "overlap_max_tokens": 1e400})"}) {
    const std::string msg = parse_error(text);
    EXPECT_TRUE(Contains(msg, "kernel config key 'overlap_max_tokens': a number out of range"));
    EXPECT_FALSE(Contains(msg, "[json.exception"));
  }
  EXPECT_TRUE(Contains(parse_error(R"({"projection": [1e400]})"), "key 'projection'"));
  EXPECT_TRUE(Contains(parse_error("1e400"), "kernel config: a number out of range"));
}

TEST(KernelConfigJson, DefaultIsCanonical) {
  EXPECT_EQ(KernelConfig{}.to_json(),
            R"({"enable_mhc_overlap":null,"overlap_max_tokens":null,"projection":"tf32"})");
}

TEST(KernelConfigJson, EveryFieldIsWritten) {
  KernelConfig c;
  c.enable_mhc_overlap = false;
  c.overlap_max_tokens = 0;
  c.projection = Projection::fp32;
  EXPECT_EQ(c.to_json(),
            R"({"enable_mhc_overlap":false,"overlap_max_tokens":0,"projection":"fp32"})");
}

// batch_invariant is written only when on: the configs recorded before it existed keep their bytes.
TEST(KernelConfigJson, BatchInvariantWrittenWhenOn) {
  KernelConfig c;
  c.batch_invariant = true;
  EXPECT_EQ(c.to_json(),
            R"({"batch_invariant":true,"enable_mhc_overlap":null,"overlap_max_tokens":null,)"
            R"("projection":"tf32"})");
  EXPECT_NE(c.hash(), KernelConfig{}.hash());
  EXPECT_EQ(c.hash(), reference_fnv1a64(c.to_json()));
  EXPECT_TRUE(Contains(c.describe(), "batch_invariant=on"));
  EXPECT_FALSE(Contains(KernelConfig{}.describe(), "batch_invariant"));
}

TEST(KernelConfigJson, RoundTripsThroughParse) {
  for (const char* text : {"{}", R"({"enable_mhc_overlap": true, "overlap_max_tokens": 32})",
                           R"({"batch_invariant": true, "projection": "fp32"})",
                           R"({"enable_mhc_overlap": false, "projection": "fp32"})"}) {
    const KernelConfig c = KernelConfig::parse(text);
    EXPECT_EQ(KernelConfig::parse(c.to_json()).to_json(), c.to_json()) << text;
  }
}

TEST(KernelConfigJson, KeyOrderAndSpacingOfInputDoNotMatter) {
  const auto a = KernelConfig::parse(R"({"projection":"fp32","enable_mhc_overlap":true})");
  const auto b =
      KernelConfig::parse("{ \"enable_mhc_overlap\" : true ,\n \"projection\":\"fp32\" }");
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(KernelConfigHash, ReferenceFnvMatchesPublishedVectors) {
  EXPECT_EQ(reference_fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(reference_fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(reference_fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(KernelConfigHash, IsFnv1a64OfCanonicalJson) {
  for (const char* text : {"{}", R"({"enable_mhc_overlap": true})", R"({"projection": "fp32"})"}) {
    const KernelConfig c = KernelConfig::parse(text);
    EXPECT_EQ(c.hash(), reference_fnv1a64(c.to_json())) << text;
  }
}

// Pinned values: a change here changes every recorded config hash, so it must be deliberate.
TEST(KernelConfigHash, PinnedValues) {
  EXPECT_EQ(KernelConfig{}.hash(), 0x6fbfe40acea10b32ull);
  EXPECT_EQ(KernelConfig::parse(R"({"enable_mhc_overlap": true})").hash(), 0x7f33bda7e2e5c5cdull);
  EXPECT_EQ(KernelConfig::parse(R"({"enable_mhc_overlap": false, "overlap_max_tokens": 32,
                                    "projection": "fp32"})")
                .hash(),
            0xe4972b572769fe48ull);
}

TEST(KernelConfigHash, EveryFieldChangeChangesIt) {
  const uint64_t base = KernelConfig{}.hash();
  KernelConfig c;
  c.enable_mhc_overlap = true;
  EXPECT_NE(c.hash(), base);
  const uint64_t enabled = c.hash();
  c.enable_mhc_overlap = false;
  EXPECT_NE(c.hash(), base);
  EXPECT_NE(c.hash(), enabled);

  c = KernelConfig{};
  c.overlap_max_tokens = 16;  // the default's value, but an explicit override is a different config
  EXPECT_NE(c.hash(), base);
  const uint64_t sixteen = c.hash();
  c.overlap_max_tokens = 17;
  EXPECT_NE(c.hash(), sixteen);

  c = KernelConfig{};
  c.projection = Projection::fp32;
  EXPECT_NE(c.hash(), base);
}

TEST(KernelConfigDescribe, DefaultsAndSetValues) {
  EXPECT_EQ(KernelConfig{}.describe(),
            "enable_mhc_overlap=unset overlap_max_tokens=default projection=tf32");
  KernelConfig c;
  c.enable_mhc_overlap = false;
  c.overlap_max_tokens = 32;
  c.projection = Projection::fp32;
  EXPECT_EQ(c.describe(), "enable_mhc_overlap=false overlap_max_tokens=32 projection=fp32");
  c.enable_mhc_overlap = true;
  EXPECT_TRUE(Contains(c.describe(), "enable_mhc_overlap=true"));
}

TEST(ProjectionToString, BothValues) {
  EXPECT_EQ(to_string(Projection::tf32), "tf32");
  EXPECT_EQ(to_string(Projection::fp32), "fp32");
}

}  // namespace
}  // namespace mhc
