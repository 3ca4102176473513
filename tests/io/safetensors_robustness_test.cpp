// A valid site-input file cut at every length and corrupted by seeded random mutations: the
// reader must either accept it consistently or throw mhc::Error, never crash or read outside it.
#include <fmt/core.h>

#include <fstream>

#include "site_test_util.hpp"
#include "st_test_util.hpp"

namespace mhc::st {
namespace {

std::vector<std::byte> valid_image() {
  const auto s = testing::random_site(2, 16, 3, 99);
  Writer w = site_inputs_writer(s.params, s.weights.view(), s.inputs());
  w.add("empty", Dtype::I64, {0, 5}, {});
  const uint8_t flag = 1;
  w.add("scalar", Dtype::BOOL, {}, std::as_bytes(std::span(&flag, 1)));
  w.set_metadata("note", "robustness");
  return w.serialize();
}

void write_image(const std::string& path, const std::vector<std::byte>& image) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
}

// Everything an accepted file promises: spans inside the image, sizes that match the shapes,
// no overlaps, and the same result when it is written again and re-read.
void check_consistent(const File& f, const std::vector<std::byte>& image) {
  const Header& h = f.header();
  ASSERT_LE(h.data_start + h.data_size, image.size());
  Writer again;
  for (const TensorInfo& t : f.tensors()) {
    auto bytes = f.bytes(t);
    ASSERT_LE(h.data_start + t.end, image.size());
    ASSERT_EQ(bytes.size(), t.nbytes());
    ASSERT_EQ(bytes.size(), uint64_t(t.numel()) * dtype_size(t.dtype));
    for (const TensorInfo& u : f.tensors()) {
      if (&t != &u && t.nbytes() > 0 && u.nbytes() > 0) {
        ASSERT_TRUE(t.end <= u.begin || u.end <= t.begin) << t.name << " overlaps " << u.name;
      }
    }
    again.add(t.name, t.dtype, t.shape, bytes);
  }
  for (const auto& [k, v] : f.metadata()) again.set_metadata(k, v);
  const File g = File::from_bytes(again.serialize());
  ASSERT_EQ(g.names(), f.names());
  for (const TensorInfo& t : f.tensors()) {
    const TensorInfo& u = g.get(t.name);
    ASSERT_EQ(u.dtype, t.dtype);
    ASSERT_EQ(u.shape, t.shape);
    auto a = f.bytes(t), b = g.bytes(u);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  ASSERT_EQ(g.metadata(), f.metadata());
}

TEST(SafetensorsRobustness, TruncatedAtEveryLength) {
  const auto image = valid_image();
  for (size_t cut = 0; cut < image.size(); ++cut) {
    std::vector<std::byte> part(image.begin(), image.begin() + long(cut));
    EXPECT_THROW(File::from_bytes(part, "cut"), Error) << "cut at " << cut;
  }
  EXPECT_NO_THROW(File::from_bytes(image));
}

TEST(SafetensorsRobustness, TruncatedFilesOnDisk) {
  const auto image = valid_image();
  const std::string path = testing::temp_path("truncated.safetensors");
  for (size_t cut = 0; cut < image.size(); cut += 7) {
    write_image(path, {image.begin(), image.begin() + long(cut)});
    try {
      File::open(path);
      ADD_FAILURE() << "cut at " << cut << " parsed";
    } catch (const Error& e) {
      EXPECT_TRUE(testing::mentions(e.what(), {path}));
    }
    EXPECT_THROW(read_site_inputs(path), Error);
  }
}

// One random edit, aimed at the header most of the time since that is where parsing happens.
void mutate(std::vector<std::byte>& image, std::mt19937_64& rng, size_t header_end) {
  auto pick = [&](size_t lo, size_t hi) { return lo + rng() % (hi - lo); };
  const size_t where = rng() % 4 == 0 ? pick(0, image.size()) : pick(0, header_end);
  switch (rng() % 6) {
    case 0:
      image[where] = std::byte(rng() & 0xff);
      break;
    case 1:
      image[where] ^= std::byte(1u << (rng() % 8));
      break;
    case 2:  // a digit for a digit keeps the JSON valid and moves shapes and offsets
      for (size_t i = where; i < header_end; ++i) {
        if (image[i] >= std::byte('0') && image[i] <= std::byte('9')) {
          image[i] = std::byte('0' + rng() % 10);
          break;
        }
      }
      break;
    case 3:
      image.insert(image.begin() + long(where), std::byte("0{}[],:\"-.e9 "[rng() % 13]));
      break;
    case 4:
      image.erase(image.begin() + long(where));
      break;
    default:
      image.resize(pick(0, image.size()));
      break;
  }
}

TEST(SafetensorsRobustness, SeededRandomCorruption) {
  const auto image = valid_image();
  const size_t header_end = File::from_bytes(image).header().data_start;
  const std::string path = testing::temp_path("mutated.safetensors");
  int accepted = 0, rejected = 0;
  for (uint64_t seed = 0; seed < 600; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    std::mt19937_64 rng(seed);
    auto bad = image;
    for (int edits = 1 + int(rng() % 3); edits > 0 && !bad.empty(); --edits) {
      mutate(bad, rng, std::min(header_end, bad.size()));
    }
    try {
      const File f = File::from_bytes(bad, "mutated");
      check_consistent(f, bad);
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    }
    write_image(path, bad);
    try {
      read_site_inputs(path);
    } catch (const Error&) {
    }
  }
  // Both outcomes must occur, or the mutations are not exercising anything.
  EXPECT_GT(accepted, 20);
  EXPECT_GT(rejected, 200);
  fmt::print("{} mutated files accepted, {} rejected\n", accepted, rejected);
}

}  // namespace
}  // namespace mhc::st
