// Helpers shared by the checkpoint tests: a fresh exported checkpoint per test, and surgery on
// its index, shards and config.json to produce each broken case.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "mhc/core/error.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/safetensors.hpp"
#include "st_test_util.hpp"

namespace mhc::ckpt::testing {

namespace fs = std::filesystem;

inline constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
inline constexpr const char* kShard2 = "model-00002-of-00002.safetensors";
inline constexpr const char* kIndex = "model.safetensors.index.json";

// A new empty directory per call (tests of one binary may run in parallel under ctest).
inline std::string fresh_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("mhc_ckpt_tests_" + std::to_string(::getpid())) /
                       (tag + "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Small shapes keep every test fast: C=64, n=4 (NMIX=24, K=256), 3 layers.
inline ExportOptions small(Naming naming = Naming::kOfficial) {
  ExportOptions o;
  o.layers = 3;
  o.hidden = 64;
  o.hc = 4;
  o.naming = naming;
  o.seed = 7;
  return o;
}

inline std::string exported(const std::string& tag, const ExportOptions& o = small()) {
  const std::string dir = fresh_dir(tag);
  export_example(dir, o);
  return dir;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// Edits the index json in place.
inline void edit_index(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j = nlohmann::json::parse(slurp(fs::path(dir) / kIndex));
  f(j);
  put(fs::path(dir) / kIndex, j.dump(1));
}

// Rewrites a shard tensor by tensor; `f` may replace a tensor (return true after adding its own
// version to the writer) or keep it (return false).
using TensorEdit =
    std::function<bool(st::Writer&, const st::TensorInfo&, std::span<const std::byte>)>;
inline void rewrite_shard(const fs::path& path, const TensorEdit& f) {
  st::Writer w;
  {
    const st::File file = st::File::open(path.string());
    for (const auto& t : file.tensors()) {
      if (!f(w, t, file.bytes(t))) w.add(t.name, t.dtype, t.shape, file.bytes(t));
    }
  }
  w.write(path.string());
}

// Load's error message; fails the test when it loads.
inline std::string load_error(const std::string& path, const LoadOptions& opt = {}) {
  try {
    load(path, opt);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an mhc::Error loading " << path;
  return {};
}

// The message check shared with the safetensors tests.
using ::mhc::st::testing::mentions;

}  // namespace mhc::ckpt::testing
