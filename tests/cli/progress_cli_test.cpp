// The progress line of a long command on the built binary: on a terminal `mhc run` shows the
// float64 reference's progress on stderr; piped, or with --json, it prints not a byte of it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

// A deep stack (the float64 reference is its slow part): seconds on a small machine.
const std::string kDeepRun = "run --backend cpu --layers 64 --tokens 16";

struct TerminalRun {
  int status = -1;
  std::string terminal;  // what went to stderr, a terminal
  std::string out;       // stdout, a file
  double seconds = 0;
};

// `mhc args` with stderr on a pseudo-terminal (TERM=xterm) and stdout in a file.
TerminalRun run_on_terminal(const std::string& args) {
  TerminalRun r;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    ADD_FAILURE() << "no pseudo-terminal";
    return r;
  }
  const std::string slave_name = ::ptsname(master);
  const int slave = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY);  // held: no EIO before exit
  const std::string out_path = scratch("terminal_stdout");
  const std::string command = quote(MHC_BINARY) + " " + args + " >" + quote(out_path);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(slave, STDERR_FILENO);
    ::setenv("TERM", "xterm", 1);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int raw = 0;
  char buf[4096];
  for (bool done = false; !done;) {  // read while it runs: the terminal's buffer is small
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0 && (p.revents & POLLIN) != 0) {
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) r.terminal.append(buf, size_t(n));
    }
    done = ::waitpid(pid, &raw, WNOHANG) == pid;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) r.terminal.append(buf, size_t(n));
  ::close(slave);
  ::close(master);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out_path);
  return r;
}

TEST(ProgressCli, ATerminalSeesTheReferencesProgressAndItIsErased) {
  const TerminalRun r = run_on_terminal(kDeepRun);
  ASSERT_EQ(r.status, 0) << r.terminal;
  EXPECT_TRUE(contains(r.out, "result: PASS")) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "progress reached stdout";
  // Drawn only after a quiet second: a machine fast enough to finish sooner shows none.
  if (r.seconds < 2.5) return;
  EXPECT_TRUE(contains(r.terminal, "mhc run [2/2] float64 reference: ")) << r.terminal;
  EXPECT_TRUE(contains(r.terminal, " left")) << r.terminal;
  EXPECT_EQ(r.terminal.substr(r.terminal.size() - 4), "\r\033[K") << "the line is not erased";
}

TEST(ProgressCli, JsonOnATerminalShowsNoProgress) {
  const TerminalRun r = run_on_terminal(kDeepRun + " --json");
  ASSERT_EQ(r.status, 0) << r.terminal;
  EXPECT_EQ(r.terminal, "");
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out.substr(0, 200);
}

TEST(ProgressCli, PipedOutputShowsNoProgress) {
  const RunResult r = run_mhc(kDeepRun);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_FALSE(contains(r.out, " left"));
}

}  // namespace
}  // namespace mhc::cli::testing
