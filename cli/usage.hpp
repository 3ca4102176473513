// How `mhc` reports a command line it cannot use: every usage error, CLI11's included, is printed
// as "mhc: error: ..." with exit status 2, with "did you mean" for a mistyped command, option or
// choice.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/suggest.hpp"  // did_you_mean

namespace mhc::cli {

// The exit statuses of `mhc` (also listed in `mhc --help` and the README).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 2;     // a usage error, a bad input, or a failed validation
inline constexpr int kExitInternal = 3;  // a bug in mhc: please report it

// `message` cut to a readable length (2000 bytes and a count of the rest): a path or value that a
// check quoted whole (a 100 KB path in "cannot open") does not flood the terminal.
std::string readable(std::string message);

// Prints `e` on stderr as a usage error of the (sub)command it belongs to, with a hint to its
// --help, and returns kExitError; --help and --version (CLI11's "errors" with status 0) are
// printed on stdout and return kExitOk.
int report_parse_error(const CLI::App& app, const CLI::ParseError& e);

}  // namespace mhc::cli
