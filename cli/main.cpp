// mhc: DeepSeek-V4.1 manifold-constrained hyper-connections, validated and timed.
#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "mhc/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"mhc: DeepSeek-V4.1 mHC sites on CPU and Hopper GPUs, validated against float64"};
  app.require_subcommand(1);
  mhc::cli::register_run(app);
  mhc::cli::register_site(app);
  mhc::cli::register_dispatch(app);
  mhc::cli::register_bench(app);
  mhc::cli::register_export_example(app);
  mhc::cli::register_plan(app);
  mhc::cli::register_tune(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mhc::Error& e) {
    fmt::print(stderr, "mhc: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mhc: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
