// Each `mhc` subcommand lives in its own cmd_*.cpp and registers itself on the app here.
// A subcommand's callback throws mhc::Error on bad input; main() prints it and exits 2.
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

}  // namespace mhc::cli
