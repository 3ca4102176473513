// A fixture for the `mhc site` tests that write files: a fresh scratch directory per test with a
// small site input file "in" in it (n = 2, C = 16, 2 tokens).
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.hpp"
#include "io/site_test_util.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::cli::testing {

class SiteDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(scratch("site_dir_" + std::to_string(counter_++)));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const st::testing::RandomSite s = st::testing::random_site(2, 16, 2, 5);
    st::site_inputs_writer(s.params, s.weights.view(), s.inputs()).write(path("in"));
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static void put(const std::string& p, const std::string& text) { std::ofstream(p) << text; }
  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

}  // namespace mhc::cli::testing
