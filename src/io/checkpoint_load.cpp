// Loading the mHC parameters of a checkpoint: find the index or the single file, work out the
// naming and the layers from the tensor names alone, then open only the shards that hold them.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/limits.hpp"
#include "mhc/io/safe_file.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kIndexName = "model.safetensors.index.json";
std::string read_text(const fs::path& p, std::string_view what) {
  return io::read_regular_file(p.string(), io::kMaxJsonFileBytes, what);
}

// The .safetensors files directly in `dir`, sorted.
std::vector<std::string> safetensors_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.ends_with(".safetensors")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void use_index(Source& s, const fs::path& index_path, LoadReport& r) {
  s.dir = index_path.parent_path();
  s.index_path = index_path.string();
  const std::string text = read_text(index_path, "checkpoint index");
  r.metadata_bytes_read += text.size();
  s.weight_map = parse_index(text, s.index_path).weight_map;
  r.layout = "index";
}

void use_single_file(Source& s, const fs::path& file, LoadReport& r) {
  s.dir = file.parent_path();
  s.single_path = file.string();
  const std::string name = file.filename().string();
  s.shards.emplace(name, st::File::open(file.string()));
  for (const auto& t : s.shards.at(name).tensors()) s.weight_map.emplace(t.name, name);
  r.layout = "single file";
  r.shards_opened.push_back(file.string());
  r.header_bytes_read += s.shards.at(name).header().data_start;
}

// Every shard the index names must exist (a partial download is reported, not half-loaded).
void check_shards_exist(const Source& s, LoadReport& r) {
  std::map<std::string, std::string> example;  // shard -> one tensor it holds
  for (const auto& [tensor, shard] : s.weight_map) example.emplace(shard, tensor);
  for (const auto& [shard, tensor] : example) {
    const fs::path p = s.dir / shard;
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::is_regular_file(st)) {
      throw Error(fmt::format("{}: shard '{}' (holding e.g. '{}') is {}: {}: {}", s.where(), shard,
                              tensor, ec ? "missing" : "not a regular file", p.string(),
                              ec ? ec.message() : "refused"));
    }
    r.total_file_bytes += fs::file_size(p);
  }
  r.shards_listed = int(example.size());
  r.tensors_listed = int(s.weight_map.size());
}

Source locate(const std::string& path, LoadReport& r) {
  Source s;
  const fs::path p(path);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec == std::errc::too_many_symbolic_link_levels) {
    throw Error(fmt::format("{}: a symlink loop (too many levels of symbolic links)", path));
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw Error(fmt::format("{}: cannot examine the checkpoint: {}", path, ec.message()));
  }
  if (!fs::exists(st)) {
    throw Error(fmt::format("{}: no such checkpoint directory or file", path));
  }
  if (fs::is_directory(st)) {
    std::error_code index_ec;
    if (fs::exists(fs::symlink_status(p / kIndexName, index_ec))) {
      use_index(s, p / kIndexName, r);
    } else {
      const auto files = safetensors_in(p);
      if (files.empty()) {
        throw Error(
            fmt::format("{}: no {} and no .safetensors file in this directory", path, kIndexName));
      }
      if (files.size() > 1) {
        throw Error(
            fmt::format("{}: no {}, and {} .safetensors files ({}, ...): without an index "
                        "it is not clear which to read",
                        path, kIndexName, files.size(), files[0]));
      }
      use_single_file(s, p / files[0], r);
    }
  } else if (path.ends_with(".index.json")) {
    use_index(s, p, r);
  } else if (path.ends_with(".safetensors")) {
    use_single_file(s, p, r);
  } else {
    throw Error(fmt::format(
        "{}: not a checkpoint (expected a directory, a .safetensors file or an .index.json)",
        path));
  }
  check_shards_exist(s, r);
  return s;
}

// config.json next to the weights, when present.
std::optional<ConfigValues> read_config(const Source& s, LoadReport& r) {
  const fs::path path = s.dir / "config.json";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  const std::string text = read_text(path, "config.json");
  r.metadata_bytes_read += text.size();
  r.config_json = path.string();
  return parse_config(text, r.config_json);
}

// Applies config.json's values; checks its shapes against ours.
void apply_config(const std::optional<ConfigValues>& config, const Shapes& shapes, MhcParams& p,
                  LoadReport& r) {
  if (!config) return;
  const ConfigValues& c = *config;
  auto check = [&](const char* key, const std::optional<int>& v, int actual, const char* what) {
    if (v && *v != actual) {
      throw Error(fmt::format("{}: '{}' is {}, but the tensors give {}={} ({} has shape {})",
                              r.config_json, key, *v, what, actual, shapes.from,
                              st::format_shape(shapes.fn_shape)));
    }
  };
  check("hidden_size", c.hidden_size, p.hidden, "C");
  check("hc_mult", c.hc_mult, p.n, "n");
  check("num_hidden_layers", c.num_hidden_layers, p.layers, "layers");
  if (c.hc_eps) {
    p.eps_h = *c.hc_eps;
    r.config_keys_used.push_back(fmt::format("hc_eps={:g}", p.eps_h));
  }
  if (c.hc_sinkhorn_iters) {
    p.sinkhorn_iters = *c.hc_sinkhorn_iters;
    r.config_keys_used.push_back(fmt::format("hc_sinkhorn_iters={}", p.sinkhorn_iters));
  }
  if (c.rms_norm_eps) {
    p.eps_n = *c.rms_norm_eps;
    r.config_keys_used.push_back(fmt::format("rms_norm_eps={:g}", p.eps_n));
  }
}

// config.json's num_nextn_predict_layers against the MTP blocks found: a checkpoint without them
// (MTP stripped) is read as such; one with a different count is refused.
void check_mtp_count(const std::optional<ConfigValues>& config, const Layers& layers,
                     LoadReport& r) {
  if (!config || !config->num_nextn_predict_layers) return;
  r.config_mtp_depths = config->num_nextn_predict_layers;
  const int listed = *config->num_nextn_predict_layers;
  if (layers.mtp_depths > 0 && listed != layers.mtp_depths) {
    throw Error(fmt::format(
        "{}: 'num_nextn_predict_layers' is {}, but the checkpoint has {} MTP block(s) ('{}' .. "
        "'{}')",
        r.config_json, listed, layers.mtp_depths,
        mtp_tensor_name(layers.naming, layers.count, 0, Slot::kAttnFn),
        mtp_tensor_name(layers.naming, layers.count, layers.mtp_depths - 1, Slot::kAttnFn)));
  }
}

void check_preset(const std::string& path, const MhcParams& p, const LoadOptions& opt) {
  if (!opt.expect) return;
  const MhcParams& e = *opt.expect;
  std::string diff;
  auto add = [&](const char* what, int got, int want) {
    if (got != want)
      diff += fmt::format("{}{}={} (preset: {})", diff.empty() ? "" : ", ", what, got, want);
  };
  add("C", p.hidden, e.hidden);
  add("n", p.n, e.n);
  add("layers", p.layers, e.layers);
  if (!diff.empty()) {
    throw Error(fmt::format("{}: the checkpoint does not match preset {}: {}", path,
                            opt.expect_name.empty() ? "(given)" : opt.expect_name, diff));
  }
}

std::string human_bytes(uint64_t b) {
  if (b < 10 * 1024) return fmt::format("{} B", b);
  if (b < 10 * 1024 * 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < 10ull * 1024 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.1f} GiB", b / 1073741824.0);
}

Loaded load_checked(const std::string& path, const LoadOptions& opt) {
  Loaded out;
  LoadReport& r = out.report;
  r.path = path;
  Source src = locate(path, r);
  const std::optional<ConfigValues> config = read_config(src, r);
  const Layers layers = find_layers(src, config ? config->num_hidden_layers : std::optional<int>());
  r.naming = layers.naming;
  TensorReader reader(src, r);
  const Shapes shapes = read_shapes(reader, layers);

  MhcParams p = preset(kDefaultPreset);
  p.hidden = shapes.hidden;
  p.n = shapes.n;
  p.layers = layers.count;
  apply_config(config, shapes, p, r);
  check_mtp_count(config, layers, r);
  try {
    validate(p);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  check_preset(path, p, opt);
  // e.g. the host memory, before the tensors are read
  if (opt.before_read) opt.before_read(p, layers.mtp_depths);

  out.weights = read_weights(reader, layers, p, opt.seed);
  out.mtp = read_mtp(reader, layers, p, opt.seed);
  r.mtp_depths = int(out.mtp.size());
  r.final_norm_from_checkpoint = reader.listed(final_norm_name(layers.naming));
  r.head_from_checkpoint = !out.weights.head.empty();
  r.norm_dtype = reader.norm_dtypes();
  return out;
}

}  // namespace

Loaded load(const std::string& path, const LoadOptions& opt) {
  try {
    return load_checked(path, opt);
  } catch (const fs::filesystem_error& e) {  // e.g. a directory that cannot be listed
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

std::string describe(const LoadReport& r, const MhcParams& p) {
  std::string s;
  auto line = [&](std::string_view label, const std::string& value) {
    s += fmt::format("{:<12}{}\n", label, value);
  };
  line("checkpoint", fmt::format("{} ({}, {} naming)", r.path, r.layout, to_string(r.naming)));
  line("shape", fmt::format("C={} n={} layers={} (K={}, NMIX={})", p.hidden, p.n, p.layers, p.k(),
                            p.nmix()));
  std::string cfg = r.config_json.empty() ? "no config.json: V4.1 defaults" : r.config_json;
  if (!r.config_keys_used.empty()) {
    cfg += ":";
    for (const auto& k : r.config_keys_used) cfg += " " + k;
  }
  line("params", fmt::format("sinkhorn_iters={} eps_h={:g} eps_n={:g} post_mult={:g} ({})",
                             p.sinkhorn_iters, p.eps_h, p.eps_n, p.post_mult, cfg));
  line("files",
       fmt::format("{} shard file(s) listed, {} opened:", r.shards_listed, r.shards_opened.size()));
  for (const auto& f : r.shards_opened) line("", f);
  const double pct = r.total_file_bytes ? 100.0 * r.bytes_read() / r.total_file_bytes : 0.0;
  line("read", fmt::format("{} of {} tensors: {} tensor data + {} headers + {} json = {} of {} "
                           "in the shard files ({:.2f}%)",
                           r.tensors_read, r.tensors_listed, human_bytes(r.tensor_bytes_read),
                           human_bytes(r.header_bytes_read), human_bytes(r.metadata_bytes_read),
                           human_bytes(r.bytes_read()), human_bytes(r.total_file_bytes), pct));
  line("norms", fmt::format("{}; final norm {}", r.norm_dtype,
                            r.final_norm_from_checkpoint ? "from the checkpoint"
                                                         : "not in the checkpoint: synthetic"));
  line("head", r.head_from_checkpoint ? "hc_head fn/base/scale from the checkpoint"
                                      : "not in the checkpoint: no head collapse");
  std::string mtp = r.mtp_depths == 0 ? "none in the checkpoint"
                                      : fmt::format(
                                            "{} block(s): sites, head collapse and final "
                                            "norm of each from the checkpoint",
                                            r.mtp_depths);
  if (r.mtp_depths == 0 && r.config_mtp_depths.value_or(0) > 0) {
    mtp += fmt::format(" (config.json's num_nextn_predict_layers is {})", *r.config_mtp_depths);
  }
  line("mtp", mtp);
  line("stand-in", "sublayer gains are not in a checkpoint: the synthetic model's (same seed)");
  return s;
}

}  // namespace mhc::ckpt
