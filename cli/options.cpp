#include "options.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/io/safe_file.hpp"
#include "usage.hpp"

namespace mhc::cli {

CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& description,
                      const std::vector<std::string>& examples) {
  CLI::App* cmd = parent.add_subcommand(name, description);
  std::string footer = examples.size() == 1 ? "Example:" : "Examples:";
  for (const auto& e : examples) footer += "\n  " + e;
  cmd->footer(footer);
  return cmd;
}

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  auto check = [choices, list](std::string& text) -> std::string {
    for (const auto& c : choices) {
      if (text == c) return {};
    }
    return fmt::format("'{}' is not one of {}{}", text, list, did_you_mean(text, choices));
  };
  return CLI::Validator(check, list, "one_of");
}

CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend) {
  return cmd->add_option("--backend", backend, "Backend (auto: cuda when a GPU is visible)")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

CLI::Option* add_mode_option(CLI::App* cmd, std::string& mode) {
  return cmd->add_option("--mode", mode, "Execution mode of the forward")
      ->check(one_of({"eager", "piecewise", "full"}))
      ->capture_default_str();
}

CLI::Option* add_preset_option(CLI::App* cmd, std::string& preset) {
  return cmd->add_option("--preset", preset, "Model preset")
      ->check(one_of(preset_names()))
      ->capture_default_str();
}

CLI::Option* add_tokens_option(CLI::App* cmd, int64_t& tokens) {
  return cmd->add_option("--tokens,-m", tokens, "Tokens M in the batch (0 is allowed)")
      ->check(integer_in<int64_t>(0))
      ->capture_default_str();
}

CLI::Option* add_token_counts_option(CLI::App* cmd, std::vector<int64_t>& tokens) {
  return cmd->add_option("--tokens", tokens, "Token counts")
      ->delimiter(',')
      ->check(integer_in<int64_t>(1))
      ->capture_default_str();
}

CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed) {
  return cmd->add_option("--seed", seed, "Seed of the synthetic weights and inputs")
      ->check(integer_in<uint64_t>(0))
      ->capture_default_str();
}

CLI::Option* add_kernel_config_option(CLI::App* cmd, std::string& json) {
  return cmd->add_option("--kernel-config", json,
                         R"(Kernel configuration JSON, e.g. '{"enable_mhc_overlap": true}')");
}

void JsonOutput::add_to(CLI::App* cmd) {
  option_ = cmd->add_option("--json", path_,
                            "Print the report as one JSON object on stdout, or with FILE write it "
                            "there (the text report then still goes to stdout)")
                ->expected(0, 1)
                ->type_name("[FILE]");
}

void JsonOutput::emit(const nlohmann::json& doc) const {
  if (!wanted()) return;
  const std::string text = doc.dump(2) + "\n";
  if (path_.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_output_file(path_, text);
  }
}

namespace {

// While alive, whatever is printed to stdout goes to stderr.
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool active);
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;
  ~StdoutToStderr();

 private:
  int saved_ = -1;
};

StdoutToStderr::StdoutToStderr(bool active) {
  if (!active) return;
  std::fflush(stdout);
  saved_ = ::dup(STDOUT_FILENO);
  if (saved_ >= 0 && ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    ::close(saved_);
    saved_ = -1;
  }
}

StdoutToStderr::~StdoutToStderr() {
  if (saved_ < 0) return;
  std::fflush(stdout);
  ::dup2(saved_, STDOUT_FILENO);
  ::close(saved_);
}

}  // namespace

void JsonOutput::emit_from(const std::function<nlohmann::json()>& report) const {
  nlohmann::json doc;
  {
    const StdoutToStderr text_aside(to_stdout());
    doc = report();
  }
  emit(doc);
}

void write_output_file(const std::string& path, std::string_view text) {
  io::write_file(path, text);  // the one safe writer (include/mhc/io/safe_file.hpp)
}

}  // namespace mhc::cli
