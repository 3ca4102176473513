// `mhc export-example`: a small synthetic checkpoint laid out like a published one (two shards +
// index, or one file), with decoy expert tensors that the loader must never read.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "mhc/core/error.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kShardNames[2] = {"model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors"};
constexpr int64_t kDecoyRows = 2048;  // 1 MiB of BF16 per decoy at C=256

// A decoy: an expert-shaped BF16 tensor with a recognisable pattern (its values never matter).
void add_decoy(st::Writer& w, const std::string& name, int64_t hidden, ExportReport& rep) {
  std::vector<Bf16> v(size_t(kDecoyRows * hidden));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float_to_bf16(float(int(i % 251) - 125) / 64.0f);
  w.add_bf16(name, {kDecoyRows, hidden}, v);
  rep.decoys.push_back(name);
}

std::string decoy_name(Naming naming, int layer, bool first) {
  if (naming == Naming::kHf) {  // transformers fuses the routed experts into two 3-D params
    return fmt::format("model.layers.{}.mlp.experts.{}", layer,
                       first ? "gate_up_proj" : "down_proj");
  }
  return fmt::format("layers.{}.ffn.experts.0.{}.weight", layer, first ? "w1" : "w2");
}

void add_norm(st::Writer& w, const std::string& name, const std::vector<float>& v, bool bf16) {
  const int64_t c = int64_t(v.size());
  if (!bf16) return w.add_f32(name, {c}, v);
  std::vector<Bf16> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16(v[i]);
  w.add_bf16(name, {c}, b);
}

void add_layer(st::Writer& w, const ModelWeights& m, int layer, const ExportOptions& o,
               ExportReport& rep) {
  const MhcParams& p = m.params;
  const int64_t nmix = p.nmix(), k = p.k();
  const SiteWeights& attn = m.sites[size_t(2 * layer)];
  const SiteWeights& ffn = m.sites[size_t(2 * layer + 1)];
  auto name = [&](Slot s) { return tensor_name(o.naming, layer, s); };
  w.add_f32(name(Slot::kAttnFn), {nmix, k}, attn.hc_fn);
  w.add_f32(name(Slot::kAttnBase), {nmix}, attn.hc_base);
  w.add_f32(name(Slot::kAttnScale), {3}, attn.hc_scale);
  w.add_f32(name(Slot::kFfnFn), {nmix, k}, ffn.hc_fn);
  w.add_f32(name(Slot::kFfnBase), {nmix}, ffn.hc_base);
  w.add_f32(name(Slot::kFfnScale), {3}, ffn.hc_scale);
  add_norm(w, name(Slot::kAttnNorm), attn.norm_weight, o.norm_bf16);
  add_norm(w, name(Slot::kFfnNorm), ffn.norm_weight, o.norm_bf16);
  rep.mhc_tensors += kSlots;
}

void write_text(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(fmt::format("{}: cannot create", tmp));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if ((std::fclose(f) != 0) || !ok || std::rename(tmp.c_str(), path.string().c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: write failed", path.string()));
  }
}

std::string config_text(const MhcParams& p) {
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = "deepseek_v4";
  j["hidden_size"] = p.hidden;
  j["num_hidden_layers"] = p.layers;
  j["hc_mult"] = p.n;
  j["hc_eps"] = p.eps_h;
  j["hc_sinkhorn_iters"] = p.sinkhorn_iters;
  j["rms_norm_eps"] = p.eps_n;
  j["mhc_example"] = "synthetic weights written by `mhc export-example`";
  return j.dump(2) + "\n";
}

// Files of the other layout would make the directory ambiguous (an index wins over
// model.safetensors), so they go.
void remove_stale(const fs::path& dir, const ExportOptions& o) {
  std::vector<std::string> stale;
  if (o.single_file) {
    stale = {kIndexName, kShardNames[0], kShardNames[1]};
  } else {
    stale = {kSingleName};
  }
  if (!o.config_json) stale.push_back("config.json");
  for (const auto& s : stale) fs::remove(dir / s);
}

}  // namespace

MhcParams example_params(const ExportOptions& o) {
  MhcParams p = preset(kDefaultPreset);
  p.hidden = o.hidden;
  p.n = o.hc;
  p.layers = o.layers;
  validate(p);
  return p;
}

namespace {

ExportReport write_example(const std::string& dir, const ExportOptions& o) {
  const MhcParams p = example_params(o);
  const ModelWeights m = synthetic_model(p, o.seed);
  ExportReport rep;
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
  remove_stale(root, o);

  // Layers [0, split) go to the first shard, the rest and the final norm to the second.
  const int shards = o.single_file ? 1 : 2;
  const int split = o.single_file ? p.layers : (p.layers + 1) / 2;
  std::vector<st::Writer> w(static_cast<size_t>(shards));
  for (int l = 0; l < p.layers; ++l) add_layer(w[l < split ? 0 : size_t(shards - 1)], m, l, o, rep);
  add_decoy(w[0], decoy_name(o.naming, 0, true), p.hidden, rep);
  add_decoy(w[size_t(shards - 1)], decoy_name(o.naming, p.layers - 1, false), p.hidden, rep);
  if (o.final_norm) add_norm(w.back(), final_norm_name(o.naming), m.final_norm, o.norm_bf16);

  nlohmann::json map = nlohmann::json::object();
  uint64_t data_bytes = 0;
  for (int s = 0; s < shards; ++s) {
    const std::string name = o.single_file ? kSingleName : kShardNames[s];
    w[size_t(s)].set_metadata("format", "pt");
    w[size_t(s)].write((root / name).string());
    const st::File f = st::File::open((root / name).string());
    for (const auto& t : f.tensors()) {
      map[t.name] = name;
      data_bytes += t.nbytes();
    }
    rep.files.push_back(name);
  }
  if (!o.single_file) {
    nlohmann::json index = {{"metadata", {{"total_size", data_bytes}}}, {"weight_map", map}};
    write_text(root / kIndexName, index.dump(2) + "\n");
    rep.files.push_back(kIndexName);
  }
  if (o.config_json) {
    write_text(root / "config.json", config_text(p));
    rep.files.push_back("config.json");
  }
  for (const auto& f : rep.files) rep.total_bytes += fs::file_size(root / f);
  return rep;
}

}  // namespace

ExportReport export_example(const std::string& dir, const ExportOptions& o) {
  try {
    return write_example(dir, o);
  } catch (const fs::filesystem_error& e) {
    throw Error(fmt::format("{}: {}", dir, e.what()));
  }
}

}  // namespace mhc::ckpt
