// Placeholder until the owner of `mhc bench` lands it.
#include "commands.hpp"
#include "mhc/error.hpp"

namespace mhc::cli {
void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not built yet)");
  cmd->callback([] { throw Error("mhc bench is not implemented yet"); });
}
}  // namespace mhc::cli
