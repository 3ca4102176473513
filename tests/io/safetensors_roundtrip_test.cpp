// Writer -> reader round trips: every dtype, empty tensors, scalars, metadata, typed reads.
#include <cstring>

#include "st_test_util.hpp"

namespace mhc::st {
namespace {

using testing::mentions;
using testing::random_bytes;

struct Sample {
  std::string name;
  Dtype dtype;
  Shape shape;
  std::vector<std::byte> data;
};

std::vector<Sample> samples_of_every_dtype(std::mt19937_64& rng) {
  std::vector<Sample> out;
  for (Dtype d : all_dtypes()) {
    const std::string base(to_string(d));
    const Shape shapes[] = {{2, 3}, {}, {0}, {4, 0, 5}, {7}};
    for (size_t i = 0; i < std::size(shapes); ++i) {
      int64_t numel = 1;
      for (int64_t s : shapes[i]) numel *= s;
      out.push_back({base + "_" + std::to_string(i), d, shapes[i],
                     random_bytes(rng, size_t(numel) * dtype_size(d))});
    }
  }
  return out;
}

TEST(SafetensorsRoundTrip, EveryDtypeWithScalarsAndEmptyTensors) {
  std::mt19937_64 rng(11);
  const auto samples = samples_of_every_dtype(rng);
  Writer w;
  for (const auto& s : samples) w.add(s.name, s.dtype, s.shape, s.data);
  w.set_metadata("producer", "test");
  w.set_metadata("empty", "");
  const std::string path = testing::temp_path("every_dtype.safetensors");
  w.write(path);

  const File f = File::open(path);
  EXPECT_EQ(f.tensors().size(), samples.size());
  EXPECT_EQ(f.metadata().at("producer"), "test");
  EXPECT_EQ(f.metadata().at("empty"), "");
  for (const auto& s : samples) {
    SCOPED_TRACE(s.name);
    const TensorInfo& t = f.get(s.name);
    EXPECT_EQ(t.dtype, s.dtype);
    EXPECT_EQ(t.shape, s.shape);
    EXPECT_EQ(t.nbytes(), s.data.size());
    auto bytes = f.bytes(t);
    ASSERT_EQ(bytes.size(), s.data.size());
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), s.data.begin()));
  }
}

TEST(SafetensorsRoundTrip, SerializeMatchesWrittenFileAndIsAligned) {
  std::mt19937_64 rng(12);
  Writer w;
  for (const auto& s : samples_of_every_dtype(rng)) w.add(s.name, s.dtype, s.shape, s.data);
  const auto image = w.serialize();
  const std::string path = testing::temp_path("serialize.safetensors");
  w.write(path);
  const File from_disk = File::open(path);
  const File from_memory = File::from_bytes(image);
  EXPECT_EQ(from_memory.header().data_start % 8, 0u);
  EXPECT_EQ(from_disk.header().data_start, from_memory.header().data_start);
  EXPECT_EQ(from_disk.names(), from_memory.names());
  EXPECT_EQ(std::filesystem::file_size(path), image.size());
}

TEST(SafetensorsRoundTrip, TensorsAreLaidOutInInsertionOrder) {
  Writer w;
  const float a[] = {1, 2}, b[] = {3}, c[] = {4, 5, 6};
  w.add_f32("zeta", {2}, a);
  w.add_f32("alpha", {1}, b);
  w.add_f32("mid", {3}, c);
  const File f = File::from_bytes(w.serialize());
  EXPECT_EQ(f.get("zeta").begin, 0u);
  EXPECT_EQ(f.get("alpha").begin, 8u);
  EXPECT_EQ(f.get("mid").begin, 12u);
  EXPECT_EQ(f.get("mid").end, 24u);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
}

TEST(SafetensorsRoundTrip, EmptyFileHasNoTensors) {
  const File f = File::from_bytes(Writer().serialize());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(f.find("x"), nullptr);
}

TEST(SafetensorsRoundTrip, TypedReadsCheckDtypeAndShape) {
  Writer w;
  const std::vector<float> x(3 * 4 * 5, 1.5f);
  const std::vector<Bf16> y(4, float_to_bf16(-2.0f));
  w.add_f32("x", {3, 4, 5}, x);
  w.add_bf16("y", {4}, y);
  const File f = File::from_bytes(w.serialize(), "t.safetensors");

  EXPECT_EQ(f.read_f32("x", {"M", 4, 5}), x);
  EXPECT_EQ(f.read_f32("x", {Dim::any(), Dim::any(), Dim::any()}).size(), x.size());
  EXPECT_EQ(f.read_bf16("y", {4})[3].bits, y[3].bits);
  EXPECT_EQ(f.read_f32_or_bf16("y", {"C"}), std::vector<float>(4, -2.0f));
  EXPECT_EQ(f.read_f32_or_bf16("x", {3, 4, 5}), x);

  auto message = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(mentions(message([&] {
                         f.read_f32("x", {"M", 4, 5120});
                       }),
                       {"t.safetensors", "'x'", "[3, 4, 5]", "expected [M, 4, 5120]"}));
  EXPECT_TRUE(mentions(message([&] {
                         f.read_f32("x", {Dim("M", 3), Dim("n", 2), 5});
                       }),
                       {"'x'", "expected [M=3, n=2, 5]"}));
  EXPECT_TRUE(mentions(message([&] { f.read_f32("x", {"M", 4}); }), {"[3, 4, 5]", "[M, 4]"}));
  EXPECT_TRUE(mentions(message([&] {
                         f.read_bf16("x", {3, 4, 5});
                       }),
                       {"'x'", "dtype F32, expected BF16"}));
  EXPECT_TRUE(mentions(message([&] { f.read_f32("nope", {}); }),
                       {"t.safetensors", "no tensor named 'nope'", "x, y"}));
}

TEST(SafetensorsRoundTrip, F32OrBf16RejectsOtherDtypes) {
  Writer w;
  const int16_t h[2] = {0, 0};
  w.add("h", Dtype::F16, {2}, std::as_bytes(std::span(h)));
  const File f = File::from_bytes(w.serialize(), "t.safetensors");
  try {
    f.read_f32_or_bf16("h", {2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e.what(), {"'h'", "F16", "expected F32 or BF16"}));
  }
}

TEST(SafetensorsRoundTrip, DtypeNamesRoundTrip) {
  for (Dtype d : all_dtypes()) EXPECT_EQ(parse_dtype(to_string(d)), d);
  EXPECT_EQ(parse_dtype("f32"), std::nullopt);
  EXPECT_EQ(dtype_size(Dtype::BF16), 2u);
  EXPECT_EQ(dtype_size(Dtype::F64), 8u);
  EXPECT_EQ(dtype_size(Dtype::F8_E4M3), 1u);
}

TEST(SafetensorsWriter, RejectsBadInput) {
  Writer w;
  const float v[2] = {1, 2};
  w.add_f32("a", {2}, v);
  EXPECT_THROW(w.add_f32("a", {2}, v), Error);
  EXPECT_THROW(w.add_f32("", {2}, v), Error);
  EXPECT_THROW(w.add_f32("__metadata__", {2}, v), Error);
  EXPECT_THROW(w.add_f32("b", {3}, v), Error);
  EXPECT_THROW(w.add_f32("c", {-1, -2}, v), Error);
  EXPECT_THROW(w.add_f32("d", {int64_t(1) << 62, 8}, v), Error);
  w.set_metadata("k", std::string("\xff\xfe"));
  EXPECT_THROW(w.serialize(), Error);
  w.erase_metadata("k");
  EXPECT_TRUE(w.remove("a"));
  EXPECT_FALSE(w.remove("a"));
  EXPECT_TRUE(File::from_bytes(w.serialize()).tensors().empty());
}

TEST(SafetensorsWriter, WriteToMissingDirectoryNamesThePath) {
  Writer w;
  try {
    w.write("/nonexistent-dir/x.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e.what(), {"/nonexistent-dir/x.safetensors"}));
  }
}

}  // namespace
}  // namespace mhc::st
