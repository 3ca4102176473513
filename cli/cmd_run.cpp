// Placeholder until the owner of `mhc run` lands it.
#include "commands.hpp"
#include "mhc/error.hpp"

namespace mhc::cli {
void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not built yet)");
  cmd->callback([] { throw Error("mhc run is not implemented yet"); });
}
}  // namespace mhc::cli
