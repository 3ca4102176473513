#include "usage.hpp"

#include <fmt/core.h>

#include <cstdio>

#include "options.hpp"

namespace mhc::cli {
namespace {

// "mhc bench kernels" for the kernels subcommand.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) {
    path = p->get_name() + " " + path;
  }
  return path;
}

// The deepest subcommand the parser entered: the one a usage error belongs to.
const CLI::App& leaf(const CLI::App& app) {
  const auto parsed = app.get_subcommands();
  return parsed.empty() ? app : leaf(*parsed.back());
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool looks_like_option(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
}

// The message for what the parser could not place (CLI11 lists it in remaining()), or "" to keep
// CLI11's own message.
std::string explain_leftover(const CLI::App& cmd, const CLI::ParseError& e) {
  const std::string where = command_path(cmd);
  const std::vector<std::string> left = cmd.remaining();
  const std::vector<std::string> commands = subcommand_names(cmd);
  if (left.empty()) {
    if (e.get_name() == "RequiredError" && !commands.empty() && cmd.get_subcommands().empty()) {
      return fmt::format("'{}' needs a command: {}", where, join(commands));
    }
    return "";
  }
  const std::string& arg = left.front();
  if (looks_like_option(arg)) {
    const std::string name = arg.substr(0, arg.find('='));
    return fmt::format("unknown option '{}' for '{}'{}", echoed(name), where,
                       did_you_mean(name, option_names(cmd)));
  }
  if (!commands.empty()) {
    return fmt::format("unknown command '{}' for '{}' (commands: {}){}", echoed(arg), where,
                       join(commands), did_you_mean(arg, commands));
  }
  return fmt::format("unexpected argument '{}' for '{}'", echoed(arg), where);
}

}  // namespace

std::string readable(std::string message) {
  constexpr size_t kMaxMessage = 2000;
  if (message.size() <= kMaxMessage) return message;
  const size_t more = message.size() - kMaxMessage;
  message.resize(kMaxMessage);
  return fmt::format("{}... ({} more bytes)", message, more);
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    return app.exit(e);  // --help, --help-all, --version: printed on stdout
  }
  const CLI::App& cmd = leaf(app);
  std::string message = explain_leftover(cmd, e);
  if (message.empty()) message = e.what();
  std::fflush(stdout);
  fmt::print(stderr, "mhc: error: {}\nRun '{} --help' for usage.\n", readable(message),
             command_path(cmd));
  return kExitError;
}

}  // namespace mhc::cli
