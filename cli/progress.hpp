// Progress of long work (`mhc tune`, `mhc bench`, `mhc run` of many layers) for a person at a
// terminal: one status line on stderr, redrawn in place, with an estimate of the time left. It is
// drawn only where stderr is a terminal and the command writes no JSON report: piped or redirected
// output (logs, CI, `2>file`) and --json runs get not a byte of it.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "mhc/bench/common.hpp"

namespace mhc::cli {

// A duration as a person reads an estimate: "8 s", "1 min 05 s", "2 h 03 min" (whole seconds,
// rounded up; "0 s" for nothing or less, "> 99 h" beyond, "?" for NaN).
std::string format_duration(double seconds);

// The time left when `fraction` (0..1) of the work took `elapsed` seconds and the rest goes at the
// same rate; none before any progress, for a fraction outside (0, 1] or a negative time.
std::optional<double> time_left(double elapsed, double fraction);

// "LABEL: 42% (WHAT), about 1 min 05 s left": the line Progress draws (WHAT and the estimate
// left out where empty or unknown).
std::string status_line(std::string_view label, double fraction, std::string_view what,
                        std::optional<double> left);

// Whether a command draws progress: stderr is a terminal (and TERM is not "dumb") and it writes no
// JSON report (`json_report`: --json was given).
bool progress_on_terminal(bool json_report);

class Progress {
 public:
  // Draws nothing unless `shown`; nothing either in the first `quiet_s` seconds, so that short
  // work does not flicker.
  Progress(std::string label, bool shown, double quiet_s = 1.0);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();  // erases the line

  // `fraction` of the work is done, the last step `what` ("M=16", "layer 3/40"). Redraws at most
  // a few times a second.
  void update(double fraction, std::string_view what = {});
  // Erases the line (before a line is printed on stdout); the next update draws it again.
  void clear();
  // Hooks for a benchmark of bench/ to report through this.
  bench::Progress hooks();

 private:
  void draw(const std::string& line);

  std::string label_;
  bool shown_;
  double quiet_s_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace mhc::cli
