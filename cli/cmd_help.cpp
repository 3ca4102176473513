// `mhc help [COMMAND...]`: the help of a command, the same text as `mhc COMMAND --help` (and
// `mhc help` that of `mhc --help`), for those who type help first.
#include <fmt/core.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "mhc/core/error.hpp"
#include "options.hpp"
#include "usage.hpp"

namespace mhc::cli {
namespace {

// The (sub)command `names` leads to from `root`, and its path as its help names it ("mhc bench
// kernels"). Throws mhc::Error naming an unknown command, with the commands there and the closest.
std::pair<const CLI::App*, std::string> find_command(const CLI::App& root,
                                                     const std::vector<std::string>& names) {
  const CLI::App* app = &root;
  std::string path = root.get_name();
  for (const std::string& name : names) {
    std::vector<std::string> known;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
      known.push_back(sub->get_name());
      if (sub->get_name() == name) next = sub;
    }
    if (next == nullptr) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error(fmt::format("unknown command '{}' for '{}'{}{}", echoed(name), path,
                              list.empty() ? "" : " (commands: " + list + ")",
                              did_you_mean(name, known)));
    }
    app = next;
    path += " " + name;
  }
  return {app, path};
}

}  // namespace

void register_help(CLI::App& app) {
  auto names = std::make_shared<std::vector<std::string>>();
  auto* cmd = add_command(app, "help", "Print a command's help (the same as COMMAND --help)",
                          {"mhc help run", "mhc help bench kernels"});
  cmd->add_option("command", *names, "The command (and subcommand) to describe");
  const CLI::App* root = &app;
  cmd->callback([root, names] {
    const auto [target, path] = find_command(*root, *names);
    // The formatter itself, as App::help() calls it: help() would describe `mhc help`, the
    // subcommand being run.
    fmt::print("{}", target->get_formatter()->make_help(target, path, CLI::AppFormatMode::Normal));
  });
}

}  // namespace mhc::cli
