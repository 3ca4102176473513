// `mhc export-example`: a small synthetic checkpoint laid out like a published one (two shards +
// index, or one file), with decoy expert tensors that the loader must never read.
#include <fmt/core.h>

#include <array>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint_replace.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/limits.hpp"
#include "mhc/io/safe_file.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kShardNames[2] = {"model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors"};
constexpr int64_t kDecoyRows = 2048;  // 1 MiB of BF16 per decoy at C=256
// Every file export writes carries this mark (config.json's and the index's "mhc_example" key, a
// shard's "mhc_example" metadata): --force replaces a file only where it finds it.
constexpr const char* kMark = "synthetic weights written by `mhc export-example`";
// What --force looks for, in the order it removes them: the index first, config.json last.
constexpr const char* kExportNames[] = {kIndexName, kSingleName, "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "config.json"};

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

// One decoder layer's eight tensors, named by `name`.
void add_layer(st::Writer& w, const ModelWeights& m, int layer,
               const std::function<std::string(Slot)>& name, const ExportOptions& o,
               ExportReport& rep) {
  const MhcParams& p = m.params;
  const int64_t nmix = p.nmix(), k = p.k();
  const SiteWeights& attn = m.sites[size_t(2 * layer)];
  const SiteWeights& ffn = m.sites[size_t(2 * layer + 1)];
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

void add_head(st::Writer& w, const HeadWeights& h, const std::array<std::string, 3>& names,
              const MhcParams& p, ExportReport& rep) {
  w.add_f32(names[0], {p.n, p.k()}, h.hc_fn);
  w.add_f32(names[1], {p.n}, h.hc_base);
  w.add_f32(names[2], {kHeadScaleCount}, h.hc_scale);
  rep.mhc_tensors += 3;
}

// MTP block `depth` (docs/mtp.md): its layer, head and final norm, and a decoy of the block's
// other tensors (e_proj), which the loader never reads.
void add_mtp_block(st::Writer& w, const MhcParams& p, int depth, const ExportOptions& o,
                   ExportReport& rep) {
  const ModelWeights block = synthetic_mtp_block(p, o.seed, depth);
  const auto name = [&](Slot s) { return mtp_tensor_name(o.naming, p.layers, depth, s); };
  add_layer(w, block, 0, name, o, rep);
  add_head(w, block.head,
           {mtp_head_tensor_name(o.naming, p.layers, depth, HeadSlot::kFn),
            mtp_head_tensor_name(o.naming, p.layers, depth, HeadSlot::kBase),
            mtp_head_tensor_name(o.naming, p.layers, depth, HeadSlot::kScale)},
           p, rep);
  add_norm(w, mtp_norm_name(o.naming, p.layers, depth), block.final_norm, o.norm_bf16);
  rep.mhc_tensors += 1;
  add_decoy(w,
            o.naming == Naming::kHf ? fmt::format("model.layers.{}.e_proj.weight", p.layers + depth)
                                    : fmt::format("mtp.{}.e_proj.weight", depth),
            p.hidden, rep);
}

std::string config_text(const MhcParams& p, int mtp) {
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = "deepseek_v4";
  j["hidden_size"] = p.hidden;
  j["num_hidden_layers"] = p.layers;
  j["hc_mult"] = p.n;
  j["hc_eps"] = p.eps_h;
  j["hc_sinkhorn_iters"] = p.sinkhorn_iters;
  j["rms_norm_eps"] = p.eps_n;
  j["num_nextn_predict_layers"] = mtp;
  j["mhc_example"] = kMark;
  return j.dump(2) + "\n";
}

}  // namespace

std::vector<std::string> export_file_names() {
  return {std::begin(kExportNames), std::end(kExportNames)};
}

MhcParams example_params(const ExportOptions& o) {
  MhcParams p = preset(kDefaultPreset);
  p.hidden = o.hidden;
  p.n = o.hc;
  p.layers = o.layers;
  validate(p);
  // The reader's limit on one header (a single file holds every tensor): refused before the work
  // rather than by the reader of what was written.
  if (o.mtp < 0 || o.mtp > kMaxExportMtp) {
    throw Error(fmt::format("export-example: --mtp {} is outside [0, {}]", o.mtp, kMaxExportMtp));
  }
  // + 2 decoys, the final norm and the head; per MTP block its layer, head, norm and a decoy.
  const int64_t tensors =
      int64_t{kSlots} * p.layers + 3 + (o.head ? 3 : 0) + int64_t{kSlots + 5} * o.mtp;
  if (tensors > int64_t(io::kMaxTensors)) {
    throw Error(fmt::format(
        "export-example: --layers {}{} makes {} tensors, more than the {} a safetensors file may "
        "hold here (docs/limits.md)",
        p.layers, o.mtp ? fmt::format(" with --mtp {}", o.mtp) : "", tensors, io::kMaxTensors));
  }
  return p;
}

namespace {

// Writes every file of the checkpoint into `root` (a fresh directory of ours). Returns the report;
// rep.files lists the files in the order they must be moved into place (see place_files).
ExportReport write_files(const fs::path& root, const ExportOptions& o) {
  const MhcParams p = example_params(o);
  const ModelWeights m = synthetic_model(p, o.seed);
  ExportReport rep;
  // Layers [0, split) go to the first shard, the rest and the final norm to the second.
  const int shards = o.single_file ? 1 : 2;
  const int split = o.single_file ? p.layers : (p.layers + 1) / 2;
  std::vector<st::Writer> w(static_cast<size_t>(shards));
  for (int l = 0; l < p.layers; ++l) {
    const auto name = [&](Slot s) { return tensor_name(o.naming, l, s); };
    add_layer(w[l < split ? 0 : size_t(shards - 1)], m, l, name, o, rep);
  }
  add_decoy(w[0], decoy_name(o.naming, 0, true), p.hidden, rep);
  add_decoy(w[size_t(shards - 1)], decoy_name(o.naming, p.layers - 1, false), p.hidden, rep);
  if (o.final_norm) add_norm(w.back(), final_norm_name(o.naming), m.final_norm, o.norm_bf16);
  if (o.head) {
    add_head(
        w.back(), m.head,
        {head_tensor_name(o.naming, HeadSlot::kFn), head_tensor_name(o.naming, HeadSlot::kBase),
         head_tensor_name(o.naming, HeadSlot::kScale)},
        p, rep);
  }
  // The MTP blocks in the last shard, after the trunk, as published checkpoints hold them.
  for (int depth = 0; depth < o.mtp; ++depth) add_mtp_block(w.back(), p, depth, o, rep);

  if (o.config_json) {
    io::write_file((root / "config.json").string(), config_text(p, o.mtp));
    rep.files.push_back("config.json");
  }
  nlohmann::json map = nlohmann::json::object();
  uint64_t data_bytes = 0;
  // The second shard first: alone it lacks layer 0, so no partial move (place_files) leaves a
  // directory the loader accepts.
  for (int s = shards - 1; s >= 0; --s) {
    const std::string name = o.single_file ? kSingleName : kShardNames[s];
    w[size_t(s)].set_metadata("format", "pt");
    w[size_t(s)].set_metadata("mhc_example", kMark);
    w[size_t(s)].write((root / name).string());
    const st::File f = st::File::open((root / name).string());
    for (const auto& t : f.tensors()) {
      map[t.name] = name;
      data_bytes += t.nbytes();
    }
    rep.files.push_back(name);
  }
  if (!o.single_file) {  // the index last: it is what makes the shards a checkpoint
    nlohmann::json index = {{"metadata", {{"total_size", data_bytes}, {"mhc_example", kMark}}},
                            {"weight_map", map}};
    io::write_file((root / kIndexName).string(), index.dump(2) + "\n");
    rep.files.push_back(kIndexName);
  }
  for (const auto& f : rep.files) rep.total_bytes += fs::file_size(root / f);
  return rep;
}

// Whether `file` (a regular file, not a link) carries export's mark; anything unreadable does not.
bool written_by_export(const fs::path& file) {
  try {
    if (file.extension() == ".safetensors") {
      const st::File shard = st::File::open(file.string());
      const auto& meta = shard.metadata();
      const auto mark = meta.find("mhc_example");
      return mark != meta.end() && mark->second == kMark;
    }
    const std::string text = io::read_regular_file(file.string(), io::kMaxJsonFileBytes, "file");
    const nlohmann::json j = json_input::parse(text, file.string(), io::kConfigJson);
    const nlohmann::json* owner = &j;
    if (file.filename() == kIndexName && j.is_object() && j.contains("metadata")) {
      owner = &j.at("metadata");
    }
    return owner->is_object() && owner->value("mhc_example", nlohmann::json()) == kMark;
  } catch (const Error&) {
    return false;
  }
}

detail::ExportNames export_names() { return {export_file_names(), written_by_export}; }

// --force replaces only what export wrote: every entry of export's names in `dir` must be a
// regular file with its mark, else nothing is changed. Returns those files, in the order they are
// removed by place_files (the index first, config.json last).
std::vector<fs::path> replaceable_files(const fs::path& dir) {
  std::vector<fs::path> old;
  for (const char* name : kExportNames) {
    const fs::path p = dir / name;
    const fs::file_status st = fs::symlink_status(p);
    if (!fs::exists(st)) continue;
    if (!fs::is_regular_file(st) || !written_by_export(p)) {
      throw Error(fmt::format(
          "{}: {} not written by mhc export-example (no mark of it); --force replaces only files "
          "export-example wrote, so nothing was changed: move it away first",
          p.string(), fs::is_regular_file(st) ? "a file" : "not a regular file, and"));
    }
    old.push_back(p);
  }
  return old;
}

// The fallback where the directory cannot be exchanged whole (detail::exchange_checkpoint): the
// old files go (the index first) and the new ones move in, in rep.files order, the index (or the
// single file) last. Files of other names stay. At every step in between the directory is refused
// by the loader (no index and no shard set it can read), never a mix of old and new shards; a
// kill in between can leave no checkpoint at all, which the next export writes again.
void place_files(const fs::path& dir, const fs::path& tmp, const ExportReport& rep) {
  for (const auto& p : replaceable_files(dir)) fs::remove(p);
  for (const auto& f : rep.files) fs::rename(tmp / f, dir / f);
}

size_t entries_of(const fs::path& dir, std::string& example) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (n++ == 0) example = e.path().filename().string();
  }
  return n;
}

// `dir` as the directory to write: absolute, without a trailing slash ("DIR/" names DIR), a
// symlink to a directory resolved (the directory is replaced, the link stays).
fs::path target_of(const std::string& dir) {
  fs::path target = fs::absolute(fs::path(dir)).lexically_normal();
  if (target.filename().empty() && target.has_relative_path()) target = target.parent_path();
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(target, ec)) && fs::is_directory(target, ec)) {
    target = fs::canonical(target);
  }
  return target;
}

ExportReport write_example(const std::string& dir, const ExportOptions& o) {
  if (dir.empty()) throw Error("export-example: the directory name is empty");
  const fs::path target = target_of(dir);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw Error(fmt::format("{}: cannot examine: {}", dir, ec.message()));
  }
  const std::string stem = io::temporary_stem(target.string());
  if (!fs::exists(st)) {
    // A new directory: built beside it and renamed into place whole.
    fs::create_directories(target.parent_path());
    detail::remove_stale_exports(target, export_names());
    detail::ExportTemp tmp(target.parent_path(), stem);
    ExportReport rep = write_files(tmp.path(), o);
    fs::rename(tmp.path(), target);
    tmp.release();
    return rep;
  }
  if (!fs::is_directory(st)) throw Error(fmt::format("{}: exists and is not a directory", dir));
  detail::remove_stale_exports(target, export_names());
  std::string example;
  if (const size_t n = entries_of(target, example); n > 0 && !o.force) {
    throw Error(fmt::format(
        "{}: the directory is not empty ({} entries, e.g. '{}'); export-example writes a new or "
        "empty directory, or with --force replaces the checkpoint files an earlier "
        "export-example wrote there (model*.safetensors, {}, config.json)",
        dir, n, example, kIndexName));
  }
  replaceable_files(target);  // refused before the work, not after it
  detail::ExportTemp tmp(target.parent_path(), stem);
  ExportReport rep = write_files(tmp.path(), o);
  if (!detail::exchange_checkpoint(target, tmp, export_names()))
    place_files(target, tmp.path(), rep);
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
