// Every malformed header the reader must reject, each with a message naming the culprit.
#include <fmt/core.h>

#include <fstream>

#include "st_test_util.hpp"

namespace mhc::st {
namespace {

using testing::mentions;
using testing::parse_error;
using testing::raw_file;

// One tensor entry as JSON text.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return fmt::format("\"{}\":{{\"dtype\":{},\"shape\":{},\"data_offsets\":{}}}", name, dtype, shape,
                     offsets);
}

// A header object from entries: obj({a, b}) is "{a,b}".
std::string obj(std::initializer_list<std::string> entries) {
  std::string out = "{";
  for (const auto& e : entries) out.append(out.size() > 1 ? "," : "").append(e);
  return out.append("}");
}

std::string error_of(const std::string& header, size_t data_bytes = 64) {
  return parse_error(raw_file(header, data_bytes));
}

TEST(SafetensorsMalformed, ShorterThanTheLengthField) {
  for (size_t size : {0, 1, 7}) {
    std::vector<std::byte> image(size, std::byte{0});
    EXPECT_TRUE(mentions(parse_error(image), {"bad.safetensors", std::to_string(size) + " bytes",
                                              "shorter than the 8-byte header length"}));
  }
}

TEST(SafetensorsMalformed, HeaderLengthBeyondTheFile) {
  EXPECT_TRUE(mentions(parse_error(raw_file("{}", 0, 3)),
                       {"bad.safetensors", "header length 3", "larger than the 2 bytes"}));
  EXPECT_TRUE(mentions(parse_error(raw_file("{}", 0, ~uint64_t{0})),
                       {"header length 18446744073709551615", "larger than"}));
}

TEST(SafetensorsMalformed, HeaderLengthOverTheLimit) {
  std::string header = "{}";
  header.resize(100'000'008, ' ');
  EXPECT_TRUE(mentions(parse_error(raw_file(header, 0)), {"exceeds the limit"}));
}

TEST(SafetensorsMalformed, InvalidJsonNamesTheByteOffset) {
  // The second comma is header byte 8, file offset 16.
  EXPECT_TRUE(mentions(error_of("{\"a\": 1,,}"),
                       {"bad.safetensors", "not valid JSON", "file offset 16", "header byte 8"}));
  EXPECT_TRUE(mentions(error_of(""), {"not valid JSON", "file offset 8"}));
  EXPECT_TRUE(mentions(error_of("{\"a\":{}"), {"not valid JSON"}));
  EXPECT_TRUE(mentions(error_of(std::string("{\"a\0\":1}", 8)), {"not valid JSON"}));
  EXPECT_TRUE(mentions(error_of("{\"\xff\":{}}"), {"not valid JSON"}));
  // nlohmann's lexer would stop at the NUL and never read what follows it.
  EXPECT_TRUE(mentions(error_of(std::string("{}\0{\"evil\": 1}", 15)),
                       {"not valid JSON", "a NUL byte", "header byte 2"}));
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
  EXPECT_TRUE(mentions(error_of("[1, 2]"), {"is an array, not a JSON object"}));
  EXPECT_TRUE(mentions(error_of("\"x\""), {"is a string, not a JSON object"}));
  EXPECT_TRUE(mentions(error_of("null"), {"is null, not a JSON object"}));
}

TEST(SafetensorsMalformed, EntryNotAnObject) {
  EXPECT_TRUE(mentions(error_of("{\"t\": 5}"), {"tensor 't'", "entry is an integer"}));
  EXPECT_TRUE(mentions(error_of("{\"t\": [1]}"), {"tensor 't'", "entry is an array"}));
}

TEST(SafetensorsMalformed, MissingFields) {
  EXPECT_TRUE(mentions(error_of("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}"),
                       {"tensor 't'", "missing field 'dtype'"}));
  EXPECT_TRUE(mentions(error_of("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}"),
                       {"tensor 't'", "missing field 'shape'"}));
  EXPECT_TRUE(mentions(error_of("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}"),
                       {"tensor 't'", "missing field 'data_offsets'"}));
}

TEST(SafetensorsMalformed, UnknownField) {
  EXPECT_TRUE(mentions(
      error_of("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}"),
      {"tensor 't'", "unknown field 'extra'"}));
}

TEST(SafetensorsMalformed, IllTypedOrUnknownDtype) {
  EXPECT_TRUE(mentions(error_of(obj({entry("t", "4", "[1]", "[0,4]")})),
                       {"tensor 't'", "dtype is an integer, not a string"}));
  EXPECT_TRUE(mentions(error_of(obj({entry("t", "\"F33\"", "[1]", "[0,4]")})),
                       {"tensor 't'", "unknown dtype \"F33\"", "BF16"}));
  EXPECT_TRUE(
      mentions(error_of(obj({entry("t", "\"f32\"", "[1]", "[0,4]")})), {"unknown dtype \"f32\""}));
}

TEST(SafetensorsMalformed, BadShapes) {
  auto shape_error = [](const std::string& shape) {
    return error_of(obj({entry("w", "\"F32\"", shape, "[0,4]")}));
  };
  EXPECT_TRUE(mentions(shape_error("{}"), {"tensor 'w'", "shape is an object, not an array"}));
  EXPECT_TRUE(mentions(shape_error("\"1\""), {"tensor 'w'", "shape is a string"}));
  EXPECT_TRUE(mentions(shape_error("[1, -3]"), {"tensor 'w'", "shape dim 1 is -3"}));
  EXPECT_TRUE(mentions(shape_error("[2.5]"), {"shape dim 0 is 2.5", "a non-integer number"}));
  EXPECT_TRUE(mentions(shape_error("[1.0]"), {"shape dim 0 is 1.0"}));
  EXPECT_TRUE(mentions(shape_error("[null]"), {"shape dim 0 is null"}));
  EXPECT_TRUE(mentions(shape_error("[\"4\"]"), {"shape dim 0"}));
  EXPECT_TRUE(mentions(shape_error("[9223372036854775808]"), {"shape dim 0"}));
  EXPECT_TRUE(mentions(shape_error("[99999999999999999999999]"), {"shape dim 0"}));
  EXPECT_TRUE(mentions(shape_error("[1e30]"), {"shape dim 0"}));
  EXPECT_TRUE(
      mentions(shape_error("[1e400]"), {"bad.safetensors", "not acceptable JSON", "1e400"}));
}

TEST(SafetensorsMalformed, ShapeProductOverflow) {
  EXPECT_TRUE(mentions(error_of(obj({entry("w", "\"F32\"", "[4294967296, 4294967296]", "[0,4]")})),
                       {"tensor 'w'", "more elements than fit in 64 bits"}));
  EXPECT_TRUE(mentions(error_of(obj({entry("w", "\"F64\"", "[4611686018427387904]", "[0,4]")})),
                       {"tensor 'w'", "too large"}));
}

TEST(SafetensorsMalformed, ZeroDimMakesHugeShapesEmpty) {
  const File f = File::from_bytes(
      raw_file(obj({entry("w", "\"F32\"", "[0, 4294967296, 4294967296]", "[0,0]")}), 0));
  EXPECT_EQ(f.get("w").numel(), 0);
}

TEST(SafetensorsMalformed, BadDataOffsets) {
  auto offsets_error = [](const std::string& offsets) {
    return error_of(obj({entry("w", "\"F32\"", "[2]", offsets)}), 16);
  };
  EXPECT_TRUE(mentions(offsets_error("\"0,8\""), {"tensor 'w'", "expected [begin, end]"}));
  EXPECT_TRUE(mentions(offsets_error("[0]"), {"expected [begin, end]"}));
  EXPECT_TRUE(mentions(offsets_error("[0, 8, 9]"), {"expected [begin, end]"}));
  EXPECT_TRUE(mentions(offsets_error("[-8, 0]"), {"data_offsets[0] is -8"}));
  EXPECT_TRUE(mentions(offsets_error("[0, 8.0]"), {"data_offsets[1] is 8.0"}));
  EXPECT_TRUE(mentions(offsets_error("[8, 0]"), {"tensor 'w'", "[8, 0]", "begin is after end"}));
  EXPECT_TRUE(mentions(offsets_error("[12, 20]"),
                       {"tensor 'w'", "[12, 20]", "beyond the end of the file"}));
  EXPECT_TRUE(mentions(offsets_error("[0, 12]"),
                       {"tensor 'w'", "hold 12 bytes", "[2] of F32 needs 2 x 4 = 8 bytes"}));
}

TEST(SafetensorsMalformed, EndBeyondDataNamesFileOffsets) {
  const std::string header = obj({entry("w", "\"U8\"", "[4]", "[8, 12]")});
  const std::string msg = error_of(header, 10);
  const auto data_start = 8 + header.size();
  EXPECT_TRUE(mentions(msg, {"file offset " + std::to_string(data_start + 12),
                             std::to_string(data_start + 10) + " bytes"}));
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  const std::string a = entry("a", "\"F32\"", "[4]", "[0,16]");
  const std::string b = entry("b", "\"F32\"", "[2]", "[8,16]");
  const std::string c = entry("c", "\"F32\"", "[1]", "[4,8]");
  EXPECT_TRUE(
      mentions(error_of(obj({a, b})), {"tensors 'a'", "[0, 16)", "'b'", "[8, 16)", "overlap"}));
  EXPECT_TRUE(mentions(error_of(obj({b, a})), {"'a'", "'b'", "overlap"}));
  EXPECT_TRUE(mentions(error_of(obj({a, c})), {"'a'", "'c'", "overlap"}));
  // Same range twice.
  EXPECT_TRUE(mentions(error_of(obj({a, entry("d", "\"I32\"", "[4]", "[0,16]")})),
                       {"'a'", "'d'", "overlap"}));
}

TEST(SafetensorsMalformed, AdjacentGapsAndEmptyTensorsAreFine) {
  const std::string header =
      obj({entry("a", "\"F32\"", "[2]", "[0,8]"), entry("b", "\"U8\"", "[4]", "[8,12]"),
           entry("c", "\"F32\"", "[0]", "[4,4]"), entry("d", "\"U8\"", "[4]", "[20,24]")});
  const File f = File::from_bytes(raw_file(header, 32));
  EXPECT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(std::to_integer<int>(f.bytes(f.get("d"))[0]), 20);
}

TEST(SafetensorsMalformed, BadMetadata) {
  EXPECT_TRUE(mentions(error_of("{\"__metadata__\": [\"a\"]}"),
                       {"__metadata__ is an array, not an object of strings"}));
  EXPECT_TRUE(mentions(error_of("{\"__metadata__\": {\"k\": 1}}"),
                       {"__metadata__ value of 'k' is an integer"}));
  EXPECT_TRUE(mentions(error_of("{\"__metadata__\": {\"a\": \"ok\", \"k\": {\"x\": \"y\"}}}"),
                       {"value of 'k' is an object"}));
  EXPECT_TRUE(mentions(error_of("{\"__metadata__\": {\"k\": null}}"), {"'k' is null"}));
}

TEST(SafetensorsMalformed, DuplicateKeys) {
  const std::string a = entry("a", "\"F32\"", "[1]", "[0,4]");
  EXPECT_TRUE(mentions(error_of(obj({a, a})), {"duplicate key 'a'"}));
  EXPECT_TRUE(mentions(
      error_of(
          "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"),
      {"duplicate key 'dtype'"}));
}

TEST(SafetensorsMalformed, EmptyTensorName) {
  EXPECT_TRUE(mentions(error_of(obj({entry("", "\"F32\"", "[1]", "[0,4]")})), {"empty name"}));
}

TEST(SafetensorsMalformed, DeeplyNestedJsonDoesNotCrash) {
  std::string deep = "{\"t\":";
  deep.append(200000, '[').append(200000, ']').append("}");
  EXPECT_TRUE(mentions(error_of(deep), {"bad.safetensors", "nesting deeper than 8"}));
  // A little nesting is still reported as the wrong type, naming the tensor.
  EXPECT_TRUE(mentions(error_of("{\"t\":[[[1]]]}"), {"tensor 't'", "entry is an array"}));
}

TEST(SafetensorsFileOpen, MissingFileDirectoryAndEmptyFile) {
  auto open_error = [](const std::string& path) -> std::string {
    try {
      File::open(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(mentions(open_error("/nonexistent/x.safetensors"),
                       {"/nonexistent/x.safetensors", "cannot open", "No such file"}));
  const std::string dir = testing::temp_path("a_directory");
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(mentions(open_error(dir), {dir, "not a regular file"}));
  const std::string empty = testing::temp_path("empty.safetensors");
  std::ofstream(empty).close();
  EXPECT_TRUE(mentions(open_error(empty), {empty, "0 bytes", "shorter than"}));
}

}  // namespace
}  // namespace mhc::st
