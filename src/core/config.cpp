#include "mhc/core/config.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/core/suggest.hpp"

namespace mhc {

namespace {

using json = nlohmann::json;

// Every key parse() takes, as its error message lists them.
constexpr std::string_view kKnownKeys =
    "batch_invariant, enable_mhc_overlap, overlap_max_tokens, projection, prenorm_kernel, "
    "prenorm_splits, fused_input, folded_post, cluster_post, cluster_epilogue, fused_boundary, "
    "flagged_partials, overlap_side_ctas, pdl, post_columns, tactics";
constexpr uint64_t kMaxOverlapTokens = uint64_t{1} << 20;

// The offending value as it appeared, shortened so a huge value cannot flood the message.
std::string shown(const json& value) {
  return fmt::format("{} {}", value.type_name(), json_input::brief(value));
}

// A key as it may be printed: control bytes escaped (a NUL would cut the message short).
std::string key_text(std::string_view key) { return json_input::printable(key, 64); }

[[noreturn]] void unknown_key(std::string_view key) {
  std::vector<std::string> known;
  for (size_t start = 0; start < kKnownKeys.size();) {
    const size_t end = std::min(kKnownKeys.find(", ", start), kKnownKeys.size());
    known.emplace_back(kKnownKeys.substr(start, end - start));
    start = end + 2;
  }
  throw Error(fmt::format("unknown kernel config key '{}'{} (known keys: {})", key_text(key),
                          did_you_mean(key, known), kKnownKeys));
}

[[noreturn]] void wrong_type(std::string_view key, std::string_view expected, const json& value) {
  throw Error(fmt::format("kernel config key '{}' must be {}, got {}", key_text(key), expected,
                          shown(value)));
}

std::optional<bool> parse_switch(std::string_view key, const json& value) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_boolean()) wrong_type(key, "true, false or null", value);
  return value.get<bool>();
}

std::optional<std::string> parse_prenorm_kernel(const json& value) {
  constexpr std::string_view key = "prenorm_kernel";
  constexpr const char* expected = R"("mma16", "mma64", "tma128", "auto" or null)";
  if (value.is_null()) return std::nullopt;
  if (!value.is_string()) wrong_type(key, expected, value);
  const auto& text = value.get_ref<const std::string&>();
  if (text == "auto") return std::nullopt;
  if (text == "mma16" || text == "mma64" || text == "tma128") return text;
  throw Error(fmt::format("kernel config key '{}' must be {}, got {}", key, expected,
                          json_input::brief(value)));
}

// A small integer key: null (unset) or an integer in lo..hi (at most 1024).
std::optional<int> parse_small_int(std::string_view key, const json& value, int lo, int hi) {
  if (value.is_null()) return std::nullopt;
  const std::string range = fmt::format("{}..{}", lo, hi);
  if (!value.is_number_integer()) wrong_type(key, "an integer in " + range + " or null", value);
  const bool huge = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(hi);
  if (huge || value.get<int64_t>() < lo || value.get<int64_t>() > hi) {
    throw Error(fmt::format("kernel config key '{}' must be in {}, got {}", key, range,
                            json_input::brief(value)));
  }
  return value.get<int>();
}

std::optional<Tactics> parse_tactics(const json& value) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return Tactics::load(value.get<std::string>());
  if (value.is_object()) return Tactics::parse(value.dump(), "inline");
  wrong_type("tactics", "a file name, a tactics object or null", value);
}

std::optional<int> parse_max_tokens(const json& value) {
  constexpr std::string_view key = "overlap_max_tokens";
  if (value.is_null()) return std::nullopt;
  // JSON 16.0 is a float to nlohmann; a threshold is a count, so only integer literals pass.
  if (!value.is_number_integer()) wrong_type(key, "a non-negative integer or null", value);
  if (!value.is_number_unsigned() && value.get<int64_t>() < 0) {
    throw Error(
        fmt::format("kernel config key '{}' must be >= 0, got {}", key, json_input::brief(value)));
  }
  if (value.get<uint64_t>() > kMaxOverlapTokens) {
    throw Error(fmt::format("kernel config key '{}' must be <= {}, got {}", key, kMaxOverlapTokens,
                            json_input::brief(value)));
  }
  return static_cast<int>(value.get<uint64_t>());
}

bool parse_batch_invariant(const json& value) {
  if (!value.is_boolean()) wrong_type("batch_invariant", "true or false", value);
  return value.get<bool>();
}

Projection parse_projection(const json& value) {
  if (!value.is_string()) wrong_type("projection", "a string (\"tf32\" or \"fp32\")", value);
  const auto& text = value.get_ref<const std::string&>();
  if (text == "tf32") return Projection::tf32;
  if (text == "fp32") return Projection::fp32;
  throw Error(fmt::format("kernel config key 'projection' must be \"tf32\" or \"fp32\", got {}",
                          json_input::brief(value)));
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string without_prefix(std::string what) {
  if (auto end = what.find("] "); what.rfind("[json.exception", 0) == 0 && end != what.npos) {
    what = what.substr(end + 2);
  }
  return what;
}

// nlohmann keeps the last of duplicated keys silently; a config that says two things is an error,
// at any depth (an inline tactics object too).
json parse_object(std::string_view text) {
  // Bounded before parsing: values are dumped into messages recursively (mhc/core/json_input.hpp).
  // Only a few flat keys exist, so 8 levels and 1000 members is ample. Syntax, range and
  // duplicate errors are left to the parse below, which names the key.
  using Kind = json_input::Problem::Kind;
  if (auto p = json_input::check(text, {8, 1000, 256});
      p && (p->kind == Kind::kDepth || p->kind == Kind::kMembers || p->kind == Kind::kKeyLength)) {
    throw Error(fmt::format("kernel config has {}", p->what));
  }
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(fmt::format("kernel config is not valid JSON (at byte {}): a NUL byte", nul + 1));
  }
  std::vector<std::string> seen;                 // the top level's keys, for the messages below
  std::vector<std::vector<std::string>> nested;  // the keys of each open object
  auto reject_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) nested.emplace_back();
    if (event == json::parse_event_t::object_end && !nested.empty()) nested.pop_back();
    if (event != json::parse_event_t::key || nested.empty()) return true;
    const auto& key = parsed.get_ref<const std::string&>();
    for (const auto& earlier : nested.back()) {
      if (earlier != key) continue;
      if (depth == 1) {
        throw Error(fmt::format("kernel config key '{}' appears twice", key_text(key)));
      }
      throw Error(fmt::format("kernel config key '{}': key '{}' appears twice in one object",
                              key_text(seen.empty() ? std::string() : seen.back()), key_text(key)));
    }
    nested.back().push_back(key);
    if (depth == 1) seen.push_back(key);
    return true;
  };
  try {
    return json::parse(text, reject_duplicates);
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("kernel config is not valid JSON (at byte {}): {}", e.byte,
                            without_prefix(e.what())));
  } catch (const json::out_of_range& e) {
    // A literal beyond double's range (1e400) stops the parser itself; the key it belongs to is
    // the last one seen.
    const std::string where = seen.empty()
                                  ? std::string("kernel config")
                                  : fmt::format("kernel config key '{}'", key_text(seen.back()));
    throw Error(fmt::format("{}: a number out of range ({})", where, without_prefix(e.what())));
  }
}

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

std::string_view to_string(Projection p) {
  switch (p) {
    case Projection::tf32:
      return "tf32";
    case Projection::fp32:
      return "fp32";
  }
  return "?";
}

KernelConfig KernelConfig::parse(std::string_view json_text) {
  KernelConfig config;
  if (blank(json_text)) return config;
  const json root = parse_object(json_text);
  if (!root.is_object()) {
    throw Error(fmt::format("kernel config must be a JSON object, got {}", shown(root)));
  }
  for (const auto& [key, value] : root.items()) {
    if (key == "enable_mhc_overlap") {
      config.enable_mhc_overlap = parse_switch(key, value);
    } else if (key == "overlap_max_tokens") {
      config.overlap_max_tokens = parse_max_tokens(value);
    } else if (key == "batch_invariant") {
      config.batch_invariant = parse_batch_invariant(value);
    } else if (key == "projection") {
      config.projection = parse_projection(value);
    } else if (key == "prenorm_kernel") {
      config.prenorm_kernel = parse_prenorm_kernel(value);
    } else if (key == "prenorm_splits") {
      config.prenorm_splits = parse_small_int(key, value, 1, 1024);
    } else if (key == "fused_input") {
      config.fused_input = parse_switch(key, value);
    } else if (key == "folded_post") {
      config.folded_post = parse_switch(key, value);
    } else if (key == "cluster_post") {
      config.cluster_post = parse_switch(key, value);
    } else if (key == "cluster_epilogue") {
      config.cluster_epilogue = parse_switch(key, value);
    } else if (key == "fused_boundary") {
      config.fused_boundary = parse_switch(key, value);
    } else if (key == "flagged_partials") {
      config.flagged_partials = parse_switch(key, value);
    } else if (key == "overlap_side_ctas") {
      config.overlap_side_ctas = parse_small_int(key, value, 0, 1024);
    } else if (key == "pdl") {
      config.pdl = parse_switch(key, value);
    } else if (key == "post_columns") {
      config.post_columns = parse_switch(key, value);
    } else if (key == "tactics") {
      config.tactics = parse_tactics(value);
    } else {
      unknown_key(key);
    }
  }
  return config;
}

namespace {

std::string bool_text(bool b) { return b ? "true" : "false"; }

// The plan switches and tactics, sorted among the first three keys; only those set.
std::string optional_fields(const KernelConfig& c) {
  std::string out;
  if (c.flagged_partials) {
    out += fmt::format(R"("flagged_partials":{},)", bool_text(*c.flagged_partials));
  }
  if (c.folded_post) out += fmt::format(R"("folded_post":{},)", bool_text(*c.folded_post));
  if (c.fused_boundary) {
    out += fmt::format(R"("fused_boundary":{},)", bool_text(*c.fused_boundary));
  }
  if (c.fused_input) out += fmt::format(R"("fused_input":{},)", bool_text(*c.fused_input));
  return out;
}

}  // namespace

// Written by hand rather than by a JSON library: hash() is pinned to these exact bytes, so their
// format must not depend on a library version. Keys in sorted order.
std::string KernelConfig::to_json() const {
  const std::string enable =
      enable_mhc_overlap ? bool_text(*enable_mhc_overlap) : std::string("null");
  const std::string max_tokens =
      overlap_max_tokens ? std::to_string(*overlap_max_tokens) : std::string("null");
  std::string tail;
  if (overlap_side_ctas) tail += fmt::format(R"(,"overlap_side_ctas":{})", *overlap_side_ctas);
  if (pdl) tail += fmt::format(R"(,"pdl":{})", bool_text(*pdl));
  if (post_columns) tail += fmt::format(R"(,"post_columns":{})", bool_text(*post_columns));
  if (prenorm_kernel) tail += fmt::format(R"(,"prenorm_kernel":"{}")", *prenorm_kernel);
  if (prenorm_splits) tail += fmt::format(R"(,"prenorm_splits":{})", *prenorm_splits);
  tail += fmt::format(R"(,"projection":"{}")", to_string(projection));
  if (tactics) tail += fmt::format(R"(,"tactics":{})", tactics->to_json());
  std::string cluster;
  if (cluster_epilogue) {
    cluster += fmt::format(R"("cluster_epilogue":{},)", bool_text(*cluster_epilogue));
  }
  if (cluster_post) cluster += fmt::format(R"("cluster_post":{},)", bool_text(*cluster_post));
  return fmt::format(R"({{{}{}"enable_mhc_overlap":{},{}"overlap_max_tokens":{}{}}})",
                     batch_invariant ? R"("batch_invariant":true,)" : "", cluster, enable,
                     optional_fields(*this), max_tokens, tail);
}

uint64_t KernelConfig::hash() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : to_json()) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  return h;
}

std::string KernelConfig::describe() const {
  const std::string enable =
      enable_mhc_overlap ? bool_text(*enable_mhc_overlap) : std::string("unset");
  const std::string max_tokens =
      overlap_max_tokens ? std::to_string(*overlap_max_tokens) : std::string("default");
  std::string text = fmt::format("enable_mhc_overlap={} overlap_max_tokens={} projection={}",
                                 enable, max_tokens, to_string(projection));
  if (prenorm_kernel) text += " prenorm_kernel=" + *prenorm_kernel;
  if (prenorm_splits) text += fmt::format(" prenorm_splits={}", *prenorm_splits);
  if (overlap_side_ctas) text += fmt::format(" overlap_side_ctas={}", *overlap_side_ctas);
  if (fused_input) text += " fused_input=" + bool_text(*fused_input);
  if (folded_post) text += " folded_post=" + bool_text(*folded_post);
  if (cluster_post) text += " cluster_post=" + bool_text(*cluster_post);
  if (cluster_epilogue) text += " cluster_epilogue=" + bool_text(*cluster_epilogue);
  if (fused_boundary) text += " fused_boundary=" + bool_text(*fused_boundary);
  if (flagged_partials) text += " flagged_partials=" + bool_text(*flagged_partials);
  if (pdl) text += " pdl=" + bool_text(*pdl);
  if (post_columns) text += " post_columns=" + bool_text(*post_columns);
  if (tactics) text += " tactics=" + tactics->source;
  if (batch_invariant) text += " batch_invariant=on";
  return text;
}

}  // namespace mhc
