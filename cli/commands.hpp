// The `mhc` subcommands. Each lives in its own cmd_*.cpp with one register_* function, listed in
// kCommands in the order `mhc --help` shows them. To add `mhc foo`: write cli/cmd_foo.cpp whose
// register_foo(app) calls add_command(app, "foo", description, {examples}) and takes its options
// from options.hpp (choices, integer ranges, --json [FILE]); add register_foo to kCommands; test
// it on the built binary in tests/cli/foo_cli_test.cpp. A callback throws mhc::Error on bad input;
// main() prints it as "mhc: error: ..." and exits 2 (usage.hpp).
#pragma once
#include <CLI/CLI.hpp>

namespace mhc::cli {

void register_run(CLI::App& app);             // cmd_run.cpp
void register_site(CLI::App& app);            // cmd_site.cpp
void register_dispatch(CLI::App& app);        // cmd_dispatch.cpp
void register_bench(CLI::App& app);           // cmd_bench.cpp
void add_bench_overlap(CLI::App& bench);      // bench_overlap.cpp: `mhc bench overlap`
void register_export_example(CLI::App& app);  // cmd_export_example.cpp
void register_plan(CLI::App& app);            // cmd_plan.cpp
void register_tune(CLI::App& app);            // cmd_tune.cpp
void register_help(CLI::App& app);            // cmd_help.cpp: `mhc help COMMAND`

using RegisterFn = void (*)(CLI::App&);
inline constexpr RegisterFn kCommands[] = {
    register_run,  register_site,  register_dispatch,       register_plan,
    register_tune, register_bench, register_export_example, register_help};

}  // namespace mhc::cli
