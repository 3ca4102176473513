// Runs the built `mhc` binary (MHC_BINARY) with captured stdout, stderr and exit status.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mhc::cli::testing {

struct RunResult {
  int status = -1;  // exit code; -1 when the process did not exit normally (e.g. a crash)
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A per-process scratch directory (tests of one binary may run in parallel under ctest).
inline std::string scratch(const std::string& name) {
  auto dir =
      std::filesystem::path(::testing::TempDir()) / ("mhc_cli_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `args` is appended to the binary path as is (quote paths with quote()).
inline RunResult run_mhc(const std::string& args) {
  if (!std::filesystem::exists(MHC_BINARY)) {
    ADD_FAILURE() << MHC_BINARY << " does not exist: build the mhc target";
    return {};
  }
  static int counter = 0;
  const std::string tag = std::to_string(counter++);
  const std::string out = scratch("stdout" + tag), err = scratch("stderr" + tag);
  const std::string cmd = quote(MHC_BINARY) + " " + args + " >" + quote(out) + " 2>" + quote(err);
  const int raw = std::system(cmd.c_str());
  RunResult r;
  r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace mhc::cli::testing
