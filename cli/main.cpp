// mhc: DeepSeek-V4.1 manifold-constrained hyper-connections, validated and timed.
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/version.hpp"
#include "usage.hpp"

namespace {

constexpr const char* kExitStatusHelp =
    "Exit status: 0 success; 2 usage error, bad input or failed validation (the message on stderr "
    "starts with \"mhc: error:\"); 3 internal error (a bug in mhc: please report it).\n"
    "Run 'mhc help COMMAND' or 'mhc COMMAND --help' for a command's options and an example.";

}  // namespace

int main(int argc, char** argv) {
  using namespace mhc::cli;
  CLI::App app{"mhc: DeepSeek-V4.1 mHC sites on CPU and Hopper GPUs, validated against float64",
               "mhc"};
  app.set_version_flag("--version,-V", fmt::format("mhc {}", mhc::kVersion), "Print the version");
  app.require_subcommand(1);
  app.footer(kExitStatusHelp);
  for (RegisterFn add : kCommands) add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e);
  } catch (const mhc::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "mhc: error: {}\n", readable(e.what()));
    return kExitError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "mhc: internal error: {}\n", readable(e.what()));
    return kExitInternal;
  }
  return kExitOk;
}
