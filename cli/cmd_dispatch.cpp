// Placeholder until the owner of `mhc dispatch` lands it.
#include "commands.hpp"
#include "mhc/error.hpp"

namespace mhc::cli {
void register_dispatch(CLI::App& app) {
  auto* cmd = app.add_subcommand("dispatch", "(not built yet)");
  cmd->callback([] { throw Error("mhc dispatch is not implemented yet"); });
}
}  // namespace mhc::cli
