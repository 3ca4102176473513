#include "options.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
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

std::string echoed(std::string_view text) { return json_input::printable(text, 64); }

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  auto check = [choices, list](std::string& text) -> std::string {
    for (const auto& c : choices) {
      if (text == c) return {};
    }
    return fmt::format("'{}' is not one of {}{}", echoed(text), list, did_you_mean(text, choices));
  };
  return CLI::Validator(check, list, "one_of");
}

CLI::Validator non_empty() {
  auto check = [](std::string& text) -> std::string {
    return text.empty() ? "the value is empty (leave the option out instead)" : "";
  };
  return CLI::Validator(check, "", "non_empty");
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

namespace {

// The items of a comma-separated list, empty ones included ("1,,2" has three).
std::vector<std::string_view> list_items(std::string_view list) {
  std::vector<std::string_view> items;
  for (size_t start = 0;;) {
    const size_t comma = list.find(',', start);
    items.push_back(list.substr(start, comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

std::string joined_counts(const std::vector<int64_t>& counts) {
  std::string text;
  for (int64_t c : counts) text += fmt::format("{}{}", text.empty() ? "" : ",", c);
  return text;
}

}  // namespace

CLI::Validator comma_list() {
  auto check = [](std::string& list) -> std::string {
    for (std::string_view item : list_items(list)) {
      if (item.empty()) {
        return fmt::format("'{}' has an empty item; expected names separated by commas",
                           echoed(list));
      }
    }
    return {};
  };
  return CLI::Validator(check, "", "comma_list");
}

CLI::Option* add_token_counts_option(CLI::App* cmd, std::vector<int64_t>& tokens,
                                     const std::string& name, const std::string& help,
                                     bool allow_zero) {
  // The lists are split here, not by CLI11's delimiter, which drops empty items silently.
  const int64_t lo = allow_zero ? 0 : 1;
  const CLI::Validator each = integer_in<int64_t>(lo, kMaxTokenOption);
  auto check = [each](std::string& list) -> std::string {
    for (std::string_view item : list_items(list)) {
      std::string text(item);
      if (text.empty()) {
        return fmt::format("'{}' has an empty item; expected integers separated by commas",
                           echoed(list));
      }
      if (std::string problem = each(text); !problem.empty()) return problem;
    }
    return {};
  };
  auto store = [&tokens](const std::vector<std::string>& lists) {
    tokens.clear();
    for (const auto& list : lists) {
      for (std::string_view item : list_items(list)) {
        int64_t value = 0;
        std::from_chars(item.data(), item.data() + item.size(), value);  // checked above
        tokens.push_back(value);
      }
    }
  };
  return cmd->add_option_function<std::vector<std::string>>(name, store, help)
      ->check(CLI::Validator(check, fmt::format("LIST of {}..{}", lo, kMaxTokenOption), "counts"))
      ->default_str(joined_counts(tokens));
}

CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed) {
  return cmd->add_option("--seed", seed, "Seed of the synthetic weights and inputs")
      ->check(integer_in<uint64_t>(0))
      ->capture_default_str();
}

CLI::Option* add_hidden_option(CLI::App* cmd, int& hidden, const std::string& what) {
  return cmd->add_option("--hidden", hidden, what)->check(integer_in(1, kMaxHidden));
}

CLI::Option* add_streams_option(CLI::App* cmd, int& n, const std::string& what) {
  return cmd->add_option("--hc", n, what)->check(integer_in(1, kMaxStreams));
}

CLI::Option* add_layers_option(CLI::App* cmd, int& layers, const std::string& what,
                               int max_layers) {
  return cmd->add_option("--layers", layers, what)->check(integer_in(1, max_layers));
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
  // The outputs may not exist yet, so they are compared by path (the same inode is caught at
  // emit(), once they do); first, as one of them may be in a directory the command creates.
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
  io::check_output(path_, inputs);
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
