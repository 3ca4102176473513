// Checkpoint names (official and transformers), the index json and config.json parsers. Nothing
// here touches the file system, so the fuzzers can call the parsers on raw bytes.
#include <fmt/core.h>

#include <array>
#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/limits.hpp"

namespace mhc::ckpt {

namespace {

using json = nlohmann::json;
using json_input::brief;
using json_input::printable;

// Per-layer suffixes in Slot order. Official: DeepSeek's inference code and published checkpoints.
// HF: transformers' DeepseekV4DecoderLayer (attn_hc / ffn_hc are DeepseekV4HyperConnection
// modules with parameters fn, base, scale). See docs/checkpoints.md for the sources.
constexpr std::array<std::string_view, kSlots> kOfficialSuffix = {
    "hc_attn_fn",  "hc_attn_base", "hc_attn_scale",    "hc_ffn_fn",
    "hc_ffn_base", "hc_ffn_scale", "attn_norm.weight", "ffn_norm.weight"};
constexpr std::array<std::string_view, kSlots> kHfSuffix = {
    "attn_hc.fn",  "attn_hc.base", "attn_hc.scale",          "ffn_hc.fn",
    "ffn_hc.base", "ffn_hc.scale", "input_layernorm.weight", "post_attention_layernorm.weight"};

const std::array<std::string_view, kSlots>& suffixes(Naming n) {
  return n == Naming::kHf ? kHfSuffix : kOfficialSuffix;
}

// Layer numbers as written by torch: decimal, no sign, no leading zero. Six digits is far more
// than any model has; longer numbers are not layer tensors of ours (the loader never sees them).
std::optional<int> parse_layer_number(std::string_view s) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

[[noreturn]] void fail(std::string_view source, const std::string& what) {
  throw Error(fmt::format("{}: {}", source, what));
}

// Parses JSON text after json_input's checks (depth, duplicate keys: nlohmann would silently keep
// the last one, and a tensor mapped to two shards is ambiguous; sizes). Throws mhc::Error.
json parse_strict(std::string_view text, std::string_view source, const json_input::Limits& lim) {
  json j = json_input::parse(text, source, lim);
  if (!j.is_object()) fail(source, fmt::format("is {}, not a JSON object", brief(j)));
  return j;
}

// Shard names must stay inside the checkpoint directory.
void check_shard_name(std::string_view source, const std::string& tensor,
                      const std::string& shard) {
  auto bad = [&](std::string_view why) {
    // Escaped so that control characters (a NUL) stay visible in the message.
    fail(source,
         fmt::format("weight_map['{}'] = '{}': {}", printable(tensor), printable(shard), why));
  };
  if (shard.empty()) bad("empty shard file name");
  if (shard.find('\0') != std::string::npos) bad("shard file name contains a NUL byte");
  if (shard.front() == '/') bad("absolute shard path (must be relative to the index)");
  size_t start = 0;
  while (start <= shard.size()) {
    size_t end = shard.find('/', start);
    if (end == std::string::npos) end = shard.size();
    if (shard.compare(start, end - start, "..") == 0 && end - start == 2) {
      bad("'..' in a shard path (must stay inside the checkpoint directory)");
    }
    start = end + 1;
  }
}

void parse_index_metadata(const json& meta, std::string_view source, Index& out) {
  if (!meta.is_object()) fail(source, fmt::format("metadata is {}, not an object", brief(meta)));
  auto it = meta.find("total_size");
  if (it == meta.end()) return;
  if (!it->is_number_unsigned()) {
    fail(source,
         fmt::format("metadata.total_size is {}, expected a non-negative integer", brief(*it)));
  }
  out.total_size = it->get<uint64_t>();
}

// A present integer key in [lo, hi] (hi <= INT_MAX); anything else is an error.
std::optional<int> config_int(const json& j, const char* key, std::string_view source, int lo,
                              int hi) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  int64_t v = int64_t(lo) - 1;  // out of range unless set below
  if (it->is_number_unsigned()) {
    v = it->get<uint64_t>() <= uint64_t(hi) ? int64_t(it->get<uint64_t>()) : v;
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  }
  if (v < lo || v > hi) {
    fail(source,
         fmt::format("'{}' is {}, expected an integer in [{}, {}]", key, brief(*it), lo, hi));
  }
  return int(v);
}

// A present number key in the range of parameter `param` (mhc::param_range: hc_eps is eps_h,
// rms_norm_eps eps_n), named with its range and why when outside it.
std::optional<double> config_eps(const json& j, const char* key, std::string_view source,
                                 std::string_view param) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  const ParamRange& r = param_range(param);
  const bool number = it->is_number();
  if (!number || !param_problem(param, it->get<double>()).empty()) {
    fail(source, fmt::format("'{}' is {}, expected a number in [{:g}, {:g}] (mhc's {}: {})", key,
                             brief(*it), r.lo, r.hi, param, r.why));
  }
  return it->get<double>();
}

}  // namespace

std::string_view to_string(Naming n) { return n == Naming::kHf ? "hf" : "official"; }

std::optional<Naming> parse_naming(std::string_view s) {
  if (s == "official") return Naming::kOfficial;
  if (s == "hf") return Naming::kHf;
  return std::nullopt;
}

std::string_view layer_prefix(Naming n) { return n == Naming::kHf ? "model.layers." : "layers."; }

std::string_view slot_suffix(Naming naming, Slot slot) { return suffixes(naming)[size_t(slot)]; }

std::string tensor_name(Naming naming, int layer, Slot slot) {
  return fmt::format("{}{}.{}", layer_prefix(naming), layer, suffixes(naming)[size_t(slot)]);
}

std::string final_norm_name(Naming naming) {
  return naming == Naming::kHf ? "model.norm.weight" : "norm.weight";
}

std::optional<Numbered> split_numbered(std::string_view prefix, std::string_view name) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto number = parse_layer_number(name.substr(0, dot));
  if (!number) return std::nullopt;
  return Numbered{*number, name.substr(dot + 1)};
}

std::optional<LayerTensor> match_prefixed(std::string_view prefix, Naming naming,
                                          std::string_view name) {
  const auto numbered = split_numbered(prefix, name);
  if (!numbered) return std::nullopt;
  const auto& all = suffixes(naming);
  for (int s = 0; s < kSlots; ++s) {
    if (all[size_t(s)] == numbered->rest) return LayerTensor{numbered->number, Slot(s)};
  }
  return std::nullopt;
}

std::optional<LayerTensor> match_layer_tensor(Naming naming, std::string_view name) {
  return match_prefixed(layer_prefix(naming), naming, name);
}

Index parse_index(std::string_view json_text, std::string_view source) {
  const json j = parse_strict(json_text, source, io::kIndexJson);
  Index out;
  if (auto meta = j.find("metadata"); meta != j.end()) parse_index_metadata(*meta, source, out);
  auto map = j.find("weight_map");
  if (map == j.end()) fail(source, "no \"weight_map\" object (tensor name -> shard file)");
  if (!map->is_object()) fail(source, fmt::format("weight_map is {}, not an object", brief(*map)));
  for (const auto& [tensor, shard] : map->items()) {
    if (tensor.empty()) fail(source, "weight_map has an empty tensor name");
    if (!shard.is_string()) {
      fail(source, fmt::format("weight_map['{}'] is {}, expected a shard file name",
                               printable(tensor), brief(shard)));
    }
    check_shard_name(source, tensor, shard.get<std::string>());
    out.weight_map.emplace(tensor, shard.get<std::string>());
  }
  return out;
}

ConfigValues parse_config(std::string_view json_text, std::string_view source) {
  const json j = parse_strict(json_text, source, io::kConfigJson);
  ConfigValues c;
  c.hc_eps = config_eps(j, "hc_eps", source, "eps_h");
  c.rms_norm_eps = config_eps(j, "rms_norm_eps", source, "eps_n");
  c.hc_sinkhorn_iters = config_int(j, "hc_sinkhorn_iters", source, 1, io::kMaxSinkhornIters);
  c.hidden_size = config_int(j, "hidden_size", source, 1, INT_MAX);
  c.hc_mult = config_int(j, "hc_mult", source, 1, INT_MAX);
  c.num_hidden_layers = config_int(j, "num_hidden_layers", source, 1, INT_MAX);
  c.num_nextn_predict_layers = config_int(j, "num_nextn_predict_layers", source, 0, INT_MAX);
  return c;
}

}  // namespace mhc::ckpt
