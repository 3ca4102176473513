// Runs the built `mhc` binary (MHC_BINARY) with captured stdout, stderr and exit status.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
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

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `mhc args` must fail as a user error: exit status 2, "mhc: error: " then a message containing
// `message` on stderr, nothing on stdout.
inline void expect_error(const std::string& args, const std::string& message) {
  const RunResult r = run_mhc(args);
  EXPECT_EQ(r.status, 2) << "mhc " << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("mhc: error: ", 0), 0u) << "mhc " << args << "\n" << r.err;
  EXPECT_TRUE(contains(r.err, message)) << "mhc " << args << ": '" << message << "' not in\n"
                                        << r.err;
  EXPECT_TRUE(r.out.empty()) << "mhc " << args << " printed on stdout:\n" << r.out;
}

// A command line and a fragment of the error it must give.
struct ArgsAndMessage {
  std::string args, message;
};

inline void expect_errors(std::initializer_list<ArgsAndMessage> cases) {
  for (const auto& c : cases) expect_error(c.args, c.message);
}

}  // namespace mhc::cli::testing
