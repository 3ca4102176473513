#include "options.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

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
      ->check(integer_in<int64_t>(0, kMaxTokenOption))
      ->capture_default_str();
}

CLI::Option* add_token_counts_option(CLI::App* cmd, std::vector<int64_t>& tokens,
                                     const std::string& name, const std::string& help,
                                     bool allow_zero) {
  return cmd->add_option(name, tokens, help)
      ->delimiter(',')
      ->check(integer_in<int64_t>(allow_zero ? 0 : 1, kMaxTokenOption))
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

void JsonOutput::check(std::vector<std::string> inputs, std::vector<std::string> outputs) {
  if (!wanted() || path_.empty()) return;
  io::check_output(path_, inputs);
  // The outputs may not exist yet, so they are compared by path (the same inode is caught at
  // emit(), once they do).
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path report = fs::weakly_canonical(fs::absolute(path_), ec);
  for (const auto& out : outputs) {
    std::error_code ec_out;
    const fs::path other = fs::weakly_canonical(fs::absolute(out), ec_out);
    if (!ec && !ec_out && report == other) {
      throw Error(
          fmt::format("{}: --json names the same file as the output {}; the report would "
                      "replace it",
                      path_, out));
    }
  }
  others_ = std::move(inputs);
  others_.insert(others_.end(), outputs.begin(), outputs.end());
}

void JsonOutput::emit(const nlohmann::json& doc) const {
  if (!wanted()) return;
  // A path given on the command line need not be UTF-8; JSON must be.
  const std::string text = doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (path_.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    io::write_file(path_, text, others_);
  }
}

std::vector<std::string> files_read(const KernelConfig& config) {
  if (config.tactics && config.tactics->from_file) return {config.tactics->source};
  return {};
}

std::vector<std::string> files_at(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  // A checkpoint holds a few hundred files; the listing stops at this many, so that a hostile
  // directory cannot stall the command.
  constexpr size_t kMaxListed = 100'000;
  std::vector<std::string> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end && files.size() < kMaxListed;
       it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) files.push_back(it->path().string());
  }
  return files;
}

std::string valid_utf8(const std::string& s) {
  using json = nlohmann::json;
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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
