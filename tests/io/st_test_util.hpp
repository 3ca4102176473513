// Helpers shared by the safetensors tests: raw file images and error-message checks.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st::testing {

// A file image: the header length as given (default: the real one), the header text, then
// `data_bytes` bytes of data (0, 1, 2, ...).
inline std::vector<std::byte> raw_file(const std::string& header, size_t data_bytes,
                                       std::optional<uint64_t> length = std::nullopt) {
  std::vector<std::byte> out;
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out.push_back(std::byte((n >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(std::byte(c));
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(std::byte(i & 0xff));
  return out;
}

// Parses `image` and returns the mhc::Error message; fails the test if it parses.
inline std::string parse_error(const std::vector<std::byte>& image,
                               const std::string& source = "bad.safetensors") {
  try {
    File::from_bytes(image, source);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an mhc::Error";
  return {};
}

// The message contains every fragment.
inline ::testing::AssertionResult mentions(const std::string& message,
                                           std::initializer_list<std::string> fragments) {
  for (const auto& f : fragments) {
    if (message.find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << f << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(rng() & 0xff);
  return out;
}

// A path in a per-process directory under the test temp dir.
inline std::string temp_path(const std::string& name) {
  auto dir =
      std::filesystem::path(::testing::TempDir()) / ("mhc_io_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The names in a directory (to check that nothing was added or removed).
inline std::set<std::string> listing(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

}  // namespace mhc::st::testing
