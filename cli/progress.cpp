#include "progress.hpp"

#include <fmt/core.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace mhc::cli {
namespace {

constexpr double kRedrawSeconds = 0.25;
constexpr const char* kEraseLine = "\r\033[K";  // to the line's start, erase it

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The terminal's width: a longer line would wrap, and "\r" returns only to the wrapped part.
size_t terminal_columns() {
  winsize w{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

void write_stderr(const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n <= 0) return;  // a progress line is not worth an error
    off += size_t(n);
  }
}

}  // namespace

std::string format_duration(double seconds) {
  if (std::isnan(seconds)) return "?";
  if (seconds <= 0) return "0 s";
  if (seconds >= 100.0 * 3600) return "> 99 h";
  const auto s = static_cast<long long>(std::ceil(seconds));
  if (s >= 100 * 3600) return "> 99 h";
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, s % 3600 / 60);
}

std::optional<double> time_left(double elapsed, double fraction) {
  if (!(fraction > 0 && fraction <= 1) || !(elapsed >= 0) || std::isinf(elapsed)) {
    return std::nullopt;
  }
  return elapsed * (1 - fraction) / fraction;
}

std::string status_line(std::string_view label, double fraction, std::string_view what,
                        std::optional<double> left) {
  const double percent = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) * 100 : 0;
  std::string line = fmt::format("{}: {}%", label, static_cast<int>(percent));
  if (!what.empty()) line += fmt::format(" ({})", what);
  if (left) line += fmt::format(", about {} left", format_duration(*left));
  return line;
}

bool progress_on_terminal(bool json_report) {
  if (json_report || ::isatty(STDERR_FILENO) == 0) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::string_view(term) != "dumb";
}

Progress::Progress(std::string label, bool shown, double quiet_s)
    : label_(std::move(label)),
      shown_(shown),
      quiet_s_(quiet_s),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { clear(); }

void Progress::update(double fraction, std::string_view what) {
  if (!shown_) return;
  const double elapsed = seconds_since(start_);
  if (elapsed < quiet_s_) return;
  if (drawn_ && seconds_since(last_draw_) < kRedrawSeconds) return;
  draw(status_line(label_, fraction, what, time_left(elapsed, fraction)));
}

void Progress::clear() {
  if (!drawn_) return;
  write_stderr(kEraseLine);
  drawn_ = false;
}

bench::Progress Progress::hooks() {
  bench::Progress hooks;
  hooks.step = [this](double fraction, const std::string& what) { update(fraction, what); };
  hooks.before_print = [this] { clear(); };
  return hooks;
}

void Progress::draw(const std::string& line) {
  std::fflush(stdout);  // what the command printed before comes first
  const size_t width = terminal_columns() - 1;
  write_stderr(kEraseLine + (line.size() > width ? line.substr(0, width) : line));
  drawn_ = true;
  last_draw_ = std::chrono::steady_clock::now();
}

}  // namespace mhc::cli
