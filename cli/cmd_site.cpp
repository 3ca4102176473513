// Placeholder until the owner of `mhc site` lands it.
#include "commands.hpp"
#include "mhc/error.hpp"

namespace mhc::cli {
void register_site(CLI::App& app) {
  auto* cmd = app.add_subcommand("site", "(not built yet)");
  cmd->callback([] { throw Error("mhc site is not implemented yet"); });
}
}  // namespace mhc::cli
