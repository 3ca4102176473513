// The progress line of long commands (cli/progress.hpp) as a unit: the estimate and its wording,
// what is drawn on a terminal, and nothing at all off one.
#include "progress.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

namespace mhc::cli {
namespace {

TEST(ProgressFormat, DurationsReadAsAPersonWritesThem) {
  EXPECT_EQ(format_duration(0), "0 s");
  EXPECT_EQ(format_duration(-3), "0 s");
  EXPECT_EQ(format_duration(0.2), "1 s");  // rounded up: never "0 s" left while work remains
  EXPECT_EQ(format_duration(8), "8 s");
  EXPECT_EQ(format_duration(59.5), "1 min 00 s");
  EXPECT_EQ(format_duration(65), "1 min 05 s");
  EXPECT_EQ(format_duration(3599), "59 min 59 s");
  EXPECT_EQ(format_duration(3600), "1 h 00 min");
  EXPECT_EQ(format_duration(2 * 3600 + 3 * 60 + 59), "2 h 03 min");
  EXPECT_EQ(format_duration(100 * 3600), "> 99 h");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "> 99 h");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(ProgressFormat, TimeLeftAssumesTheSameRate) {
  EXPECT_DOUBLE_EQ(*time_left(10, 0.25), 30);
  EXPECT_DOUBLE_EQ(*time_left(10, 1), 0);
  EXPECT_FALSE(time_left(10, 0));  // nothing done: no estimate
  EXPECT_FALSE(time_left(10, -0.5));
  EXPECT_FALSE(time_left(10, 1.5));
  EXPECT_FALSE(time_left(10, std::nan("")));
  EXPECT_FALSE(time_left(-1, 0.5));
  EXPECT_FALSE(time_left(std::numeric_limits<double>::infinity(), 0.5));
}

TEST(ProgressFormat, StatusLine) {
  EXPECT_EQ(status_line("mhc bench kernels", 0.421, "M=16", 65.0),
            "mhc bench kernels: 42% (M=16), about 1 min 05 s left");
  EXPECT_EQ(status_line("mhc run", 0.5, "", std::nullopt), "mhc run: 50%");
  EXPECT_EQ(status_line("x", 1.7, "", 0.0), "x: 100%, about 0 s left");
  EXPECT_EQ(status_line("x", std::nan(""), "", std::nullopt), "x: 0%");
}

// `fn()` with stderr on `fd`.
template <typename Fn>
auto with_stderr_on(int fd, Fn fn) {
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  const auto result = fn();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  return result;
}

// What `draw()` writes on stderr.
template <typename Fn>
std::string stderr_of(Fn draw) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  with_stderr_on(fds[1], [&] {
    draw();
    return 0;
  });
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(fds[0]);
  return text;
}

TEST(ProgressLine, IsDrawnInPlaceAndErasedWhenShown) {
  const std::string text = stderr_of([] {
    Progress p("mhc tune", true, 0.0);
    p.update(0.5, "M=8");
    p.clear();  // before a line on stdout
    p.hooks().step(0.75, "M=16");
  });  // the destructor erases the line
  EXPECT_EQ(text.rfind("\r\033[Kmhc tune: 50% (M=8), about ", 0), 0u) << text;
  EXPECT_NE(text.find(" left\r\033[K\r\033[Kmhc tune: 75% (M=16), about "), std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K") << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
}

TEST(ProgressLine, DrawsNothingWhenNotShownOrBeforeTheQuietTime) {
  EXPECT_EQ(stderr_of([] {
              Progress p("mhc tune", false, 0.0);
              p.update(0.5, "M=8");
            }),
            "");
  EXPECT_EQ(stderr_of([] {
              Progress p("mhc tune", true, 3600.0);
              p.update(0.5, "M=8");
            }),
            "");
}

// On a terminal progress is wanted unless a JSON report is (or TERM is dumb); through a pipe (how
// the CLI tests run the binary, and how CI and logs see it) never.
TEST(ProgressLine, WantedOnlyOnATerminalWithoutJson) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  const char* term = std::getenv("TERM");
  const std::string saved_term = term == nullptr ? "" : term;
  ::setenv("TERM", "xterm", 1);
  EXPECT_TRUE(with_stderr_on(terminal, [] { return progress_on_terminal(false); }));
  EXPECT_FALSE(with_stderr_on(terminal, [] { return progress_on_terminal(true); }));
  ::setenv("TERM", "dumb", 1);
  EXPECT_FALSE(with_stderr_on(terminal, [] { return progress_on_terminal(false); }));
  term == nullptr ? ::unsetenv("TERM") : ::setenv("TERM", saved_term.c_str(), 1);
  ::close(terminal);
  ::close(master);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_FALSE(with_stderr_on(fds[1], [] { return progress_on_terminal(false); }));
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace mhc::cli
