// The limits of include/mhc/io/limits.hpp (docs/limits.md), one class of hostile input each:
// nesting, tensor count, names with NUL, offsets near 2^64, nested index and config.json, and
// files of many tensors or layers written and read in linear time.
#include "mhc/io/limits.hpp"

#include <fmt/core.h>

#include <chrono>
#include <cstring>

#include "checkpoint_test_util.hpp"
#include "mhc/io/checkpoint.hpp"
#include "st_test_util.hpp"

namespace mhc::st {
namespace {

using testing::mentions;
using testing::parse_error;
using testing::raw_file;

std::string deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// 80k levels used to overflow the stack when the error message dumped the value.
TEST(IoLimits, DeepNestingInAHeaderIsAnError) {
  const std::string shape =
      R"({"t":{"dtype":"F32","shape":)" + deep(80'000) + R"(,"data_offsets":[0,4]}})";
  EXPECT_TRUE(mentions(parse_error(raw_file(shape, 4)), {"nesting deeper than 8"}));
  const std::string meta = R"({"__metadata__":{"k":)" + deep(80'000) + "}}";
  EXPECT_TRUE(mentions(parse_error(raw_file(meta, 0)), {"nesting deeper than 8"}));
}

TEST(IoLimits, DeepNestingInIndexAndConfig) {
  auto error = [](auto f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(
      mentions(error([] { ckpt::parse_index("{\"weight_map\":" + deep(80'000) + "}", "i"); }),
               {"i: nesting deeper than 8"}));
  EXPECT_TRUE(mentions(error([] { ckpt::parse_config("{\"hc_eps\":" + deep(80'000) + "}", "c"); }),
                       {"c: nesting deeper than 64"}));
  // Real configs nest a few levels: fine.
  EXPECT_EQ(error([] { ckpt::parse_config(R"({"rope_scaling":{"a":{"b":[1]}}})", "c"); }),
            "no error");
}

TEST(IoLimits, ManyTensorsParseInLinearTime) {
  // 200k tensors: the duplicate-key callback was quadratic (100k took 170 s).
  const int count = 200'000;
  std::string h = "{";
  for (int i = 0; i < count; ++i) {
    h += fmt::format("{}\"t{}\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                     i ? "," : "", i, i, i + 1);
  }
  h += "}";
  const auto start = std::chrono::steady_clock::now();
  const File f = File::from_bytes(raw_file(h, count));
  EXPECT_EQ(f.tensors().size(), size_t(count));
  EXPECT_LT(seconds_since(start), 30.0);  // ~1 s here; quadratic would be ~10 minutes
}

TEST(IoLimits, TensorNamesAreEscapedAndOffsetsNamedForWhatTheyAre) {
  const std::string nul =
      std::string(R"({"a\u0000b":{"dtype":"F32","shape":[2],)") + R"("data_offsets":[0,4]}})";
  // The NUL used to cut the message short; now it is visible and the rest follows.
  EXPECT_TRUE(mentions(parse_error(raw_file(nul, 8)), {"tensor 'a\\x00b'", "hold 4 bytes"}));
  const std::string huge = R"({"t":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551600,)"
                           R"(18446744073709551608]}})";
  const std::string msg = parse_error(raw_file(huge, 8));
  EXPECT_TRUE(mentions(msg, {"18446744073709551608", "beyond the end of the file"}));
  EXPECT_EQ(msg.find("negative"), std::string::npos) << msg;
  const std::string dim = R"({"t":{"dtype":"U8","shape":[18446744073709551615],)"
                          R"("data_offsets":[0,1]}})";
  EXPECT_TRUE(mentions(parse_error(raw_file(dim, 1)), {"larger than 2^63-1"}));
  EXPECT_TRUE(mentions(parse_error(raw_file(R"({"t":{"dtype":"U8","shape":[-1]}})", 1)),
                       {"shape dim 0 is -1 (negative)"}));
}

TEST(IoLimits, WriterOfManyTensorsIsLinear) {
  Writer w;
  const std::vector<float> one{1.0f};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100'000; ++i) w.add_f32(fmt::format("t{}", i), {1}, one);
  const std::vector<std::byte> image = w.serialize();
  EXPECT_LT(seconds_since(start), 30.0);  // was quadratic (a linear name search per add and key)
  EXPECT_EQ(File::from_bytes(image).tensors().size(), 100'000u);
}

TEST(IoLimits, ExportOfManyLayersIsLinear) {
  ckpt::ExportOptions o = ckpt::testing::small();
  o.layers = 3000;
  o.hidden = 8;
  o.hc = 1;
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = ckpt::testing::fresh_dir("many_layers");
  export_example(dir, o);
  EXPECT_LT(seconds_since(start), 60.0);
  EXPECT_EQ(ckpt::load(dir).weights.params.layers, 3000);
}

}  // namespace
}  // namespace mhc::st
