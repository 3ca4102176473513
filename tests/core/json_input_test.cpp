// json_input: the bounded pre-parse check of untrusted JSON (depth, duplicate keys, sizes).
#include "mhc/core/json_input.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"

namespace mhc::json_input {
namespace {

using Kind = Problem::Kind;

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonInput, DepthIsLimitedWithoutRecursion) {
  EXPECT_FALSE(check(nested(16), {}));
  const auto p = check(nested(17), {});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::kDepth);
  // 1M levels: a recursive parser or dump() would overflow the stack here.
  const auto deep = check("{\"a\":" + nested(1'000'000) + "}", {});
  ASSERT_TRUE(deep);
  EXPECT_NE(deep->what.find("nesting deeper than 16"), std::string::npos) << deep->what;
}

TEST(JsonInput, DuplicateKeysPerObjectInLinearTime) {
  EXPECT_FALSE(check(R"({"a": {"k": 1}, "b": {"k": 2}})", {}));  // same key, other objects
  const auto p = check(R"({"a": 1, "b": {"a": 2, "a": 3}})", {});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::kDuplicate);
  EXPECT_EQ(p->what, "duplicate key 'a'");
  // 300k objects in one object: nlohmann's callback parser rescans the parent after each nested
  // object (quadratic: 100k took 170 s); the SAX check takes well under a second.
  std::string big = "{";
  for (int i = 0; i < 300'000; ++i)
    big += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"x\":1}";
  big += "}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(check(big, {}));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 20.0);  // generous for a loaded 2-core CI machine; quadratic would be hours
}

TEST(JsonInput, KeyLengthAndMemberCount) {
  const auto key = check("{\"" + std::string(5000, 'k') + "\": 1}", {});
  ASSERT_TRUE(key);
  EXPECT_EQ(key->kind, Kind::kKeyLength);
  EXPECT_LT(key->what.size(), 200u);  // the key is not copied into the message whole
  Limits small;
  small.max_members = 3;
  EXPECT_FALSE(check("[1, 2, 3]", small));
  ASSERT_TRUE(check("[1, 2, 3, 4]", small));
  EXPECT_EQ(check("{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", small)->kind, Kind::kMembers);
}

TEST(JsonInput, SyntaxAndRangeErrorsKeepTheirPosition) {
  const auto syntax = check("{\"a\": tru}", {});
  ASSERT_TRUE(syntax);
  EXPECT_EQ(syntax->kind, Kind::kSyntax);
  EXPECT_TRUE(syntax->byte.has_value());
  const auto range = check("[1e400]", {});
  ASSERT_TRUE(range);
  EXPECT_EQ(range->kind, Kind::kRange);
  try {
    parse(nested(101), "f.json", {});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.json: nesting deeper"), std::string::npos) << e.what();
  }
}

TEST(JsonInput, PrintableEscapesAndBounds) {
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // valid UTF-8 kept
  EXPECT_EQ(printable("\xff"), "\\xff");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
  // brief() of a huge value stays short.
  EXPECT_LE(brief(nlohmann::json(std::string(1'000'000, 'y'))).size(), 40u);
  EXPECT_LE(brief(nlohmann::json::parse(nested(16))).size(), 40u);
}

TEST(JsonInput, KernelConfigNestingIsBounded) {
  try {
    KernelConfig::parse("{\"projection\":" + nested(100'000) + "}");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel config has nesting deeper than 8"),
              std::string::npos)
        << e.what();
  }
  // fuzz_config found this one: nlohmann's out_of_range escaped as an "internal error" (exit 3).
  EXPECT_THROW(KernelConfig::parse(R"({"overlap_max_tokens": 1e400})"), Error);
}

}  // namespace
}  // namespace mhc::json_input
