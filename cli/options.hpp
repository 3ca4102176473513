// The building blocks every `mhc` subcommand takes its options from, so that they all behave
// alike: a subcommand with examples in its help, integers checked by the parser against a range
// (never silently replaced by a preset's value), choices checked against their list, and
// `--json [FILE]`. A bad value is a usage error (exit 2) naming the option and what it accepts.
#pragma once
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"

namespace mhc::cli {

// A subcommand of `parent` whose help ends with the given example command lines.
CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& description,
                      const std::vector<std::string>& examples);

// `text` as an error message may quote it: control bytes escaped, cut to a readable length.
std::string echoed(std::string_view text);

// An integer in [lo, hi], written as a plain decimal ("1e9", "0x10", "5.0" and "" are refused).
template <typename T>
CLI::Validator integer_in(T lo, T hi = std::numeric_limits<T>::max()) {
  const std::string range = hi == std::numeric_limits<T>::max() ? fmt::format(">= {}", lo)
                                                                : fmt::format("in {}..{}", lo, hi);
  auto check = [lo, hi, range](std::string& text) -> std::string {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc() && ptr == end && value >= lo && value <= hi) return {};
    return fmt::format("expected an integer {}, got '{}'", range, echoed(text));
  };
  return CLI::Validator(check, range, "integer_in");
}

// One of `choices`; the error lists them (and suggests the closest).
CLI::Validator one_of(std::vector<std::string> choices);

// A value that is not empty (a path: `--weights ""` is an error, not the option left out).
CLI::Validator non_empty();

// A comma-separated list without an empty item ("a,,b", "a,", "" are refused, not shortened).
CLI::Validator comma_list();

// The options several subcommands share, with their choices.
CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend);  // auto|cpu|cuda
CLI::Option* add_mode_option(CLI::App* cmd, std::string& mode);        // eager|piecewise|full
CLI::Option* add_preset_option(CLI::App* cmd, std::string& preset);    // the known presets
// A token count is at most kMaxTokenOption, the CUDA kernels' limit (an int32 count), so that no
// size computed from it overflows before an allocation can fail cleanly.
inline constexpr int64_t kMaxTokenOption = std::numeric_limits<int32_t>::max();
CLI::Option* add_tokens_option(CLI::App* cmd, int64_t& tokens);  // 0..kMaxTokenOption
// 1,2,4 (or 1 2 4): each 1..kMaxTokenOption (0..kMaxTokenOption with allow_zero, where 0 means
// skip); an empty item ("1,,2", "1,") is refused, not dropped.
CLI::Option* add_token_counts_option(CLI::App* cmd, std::vector<int64_t>& tokens,
                                     const std::string& name = "--tokens",
                                     const std::string& help = "Token counts",
                                     bool allow_zero = false);
CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed);  // any 64-bit value

// Shape options, bounded at the parser by mhc::validate's limits (which then checks the rest: C a
// multiple of 8), so that no size is computed from an absurd value. `what` is the help text.
CLI::Option* add_hidden_option(CLI::App* cmd, int& hidden, const std::string& what);  // 1..2^20
CLI::Option* add_streams_option(CLI::App* cmd, int& n, const std::string& what);      // 1..8
CLI::Option* add_layers_option(CLI::App* cmd, int& layers, const std::string& what,
                               int max_layers = kMaxLayers);

// Timed repetitions: each keeps a sample (a double, and a CUDA event on the GPU) until the
// median is taken, and 2^31 of them exhaust memory before they finish; 100,000 replays of the
// largest site take minutes.
inline constexpr int kMaxTimingReps = 100'000;
// The stand-in decoder's widths (bench overlap): at most the largest C times 2, so that its
// weights (C x width per sublayer) stay a size the GPU's memory check can state.
inline constexpr int kMaxStandinWidth = 2 * kMaxHidden;
CLI::Option* add_kernel_config_option(CLI::App* cmd, std::string& json);

// `--json [FILE]`, the same in every subcommand: bare, the JSON report goes to stdout (and the
// text report is left out, or goes to stderr); with FILE it is written there (safely: see
// write_output_file) and the text report still goes to stdout.
class JsonOutput {
 public:
  void add_to(CLI::App* cmd);
  bool wanted() const { return option_ != nullptr && option_->count() > 0; }
  bool to_stdout() const { return wanted() && path_.empty(); }
  // Before the work: FILE (when given) must be writable as a regular file that is none of
  // `inputs` (the files the command reads) and not the path of one of `outputs` (the files it
  // writes besides the report, which may not exist yet). Remembered for emit(), which checks
  // again against all of them. Throws mhc::Error.
  void check(std::vector<std::string> inputs = {}, std::vector<std::string> outputs = {});
  // Prints or writes `doc` (invalid UTF-8 in its strings, a path's, replaced by U+FFFD); nothing
  // when --json was not given.
  void emit(const nlohmann::json& doc) const;
  // For reports made by code that prints its text on stdout (the benchmarks): runs `report` with
  // that text moved to stderr when the JSON takes stdout, then emits the JSON it returns.
  void emit_from(const std::function<nlohmann::json()>& report) const;

 private:
  CLI::Option* option_ = nullptr;
  std::string path_;
  std::vector<std::string> others_;  // inputs and outputs given to check()
};

// The files a kernel config reads (a tactics file), for JsonOutput::check.
std::vector<std::string> files_read(const KernelConfig& config);
// `path` itself, or for a directory its regular files (a checkpoint's shards, index and config),
// for JsonOutput::check.
std::vector<std::string> files_at(const std::string& path);
// `s` with every byte that is not valid UTF-8 replaced by U+FFFD: a path from the command line as
// a JSON or metadata string, which must be UTF-8.
std::string valid_utf8(const std::string& s);
// `a` and then `b`.
std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b);

// Every file the CLI itself writes goes through here: a temporary created exclusively next to
// `path`, written, flushed to disk and renamed onto it. Throws mhc::Error naming the path.
void write_output_file(const std::string& path, std::string_view text);

}  // namespace mhc::cli
