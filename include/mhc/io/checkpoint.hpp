// DeepSeek-V4/V4.1 checkpoints: the mHC parameters of every layer and the sublayer norm weights,
// read from a checkpoint directory as published (model.safetensors.index.json plus its shards, or
// one .safetensors file) without touching anything else in it. Shards are memory-mapped and only
// their headers and the mHC/norm tensors are read, so the expert weights (hundreds of GB in a
// real checkpoint) are never paged in. See docs/checkpoints.md for the names and the checks.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/params.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::ckpt {

// How tensors are named: DeepSeek's own ("layers.3.hc_attn_fn") or the transformers module tree
// ("model.layers.3.attn_hc.fn").
enum class Naming { kOfficial, kHf };
std::string_view to_string(Naming n);                    // "official", "hf"
std::optional<Naming> parse_naming(std::string_view s);  // nullopt for anything else

// The eight per-layer tensors, in this order: the attention site's hc fn/base/scale, the FFN
// site's, then the attention and FFN sublayer norm weights.
enum class Slot {
  kAttnFn,
  kAttnBase,
  kAttnScale,
  kFfnFn,
  kFfnBase,
  kFfnScale,
  kAttnNorm,
  kFfnNorm
};
inline constexpr int kSlots = 8;
std::string tensor_name(Naming naming, int layer, Slot slot);
std::string final_norm_name(Naming naming);  // "norm.weight", "model.norm.weight"
// The head collapse's tensors (docs/head.md): "hc_head_fn", "hc_head_base", "hc_head_scale"
// (official), "model.hc_head.hc_fn", ".hc_base", ".hc_scale" (transformers). A checkpoint holds
// all three or none.
enum class HeadSlot { kFn, kBase, kScale };
std::string head_tensor_name(Naming naming, HeadSlot slot);
// Which (layer, slot) a name is under `naming`; nullopt for every other tensor (experts, ...).
struct LayerTensor {
  int layer = 0;
  Slot slot = Slot::kAttnFn;
};
std::optional<LayerTensor> match_layer_tensor(Naming naming, std::string_view name);

// Multi-token-prediction blocks (docs/mtp.md). Depth k (0-based) holds one decoder layer's eight
// tensors, its own head collapse and its own final norm. Official: "mtp.{k}." + the per-layer
// suffix, "mtp.{k}.hc_head_fn", "mtp.{k}.norm.weight". Hugging Face layout: the depth is layer
// `trunk_layers + k` of "model.layers.", with transformers' per-layer suffixes,
// "model.layers.{L+k}.hc_head_fn" and "model.layers.{L+k}.shared_head.norm.weight".
std::string mtp_tensor_name(Naming naming, int trunk_layers, int depth, Slot slot);
std::string mtp_head_tensor_name(Naming naming, int trunk_layers, int depth, HeadSlot slot);
std::string mtp_norm_name(Naming naming, int trunk_layers, int depth);

// model.safetensors.index.json: {"metadata": {"total_size": N, ...}, "weight_map": {tensor:
// shard}}. Strict: valid JSON, no duplicate keys, weight_map an object of shard file names that
// stay inside the checkpoint directory (no absolute paths, no ".."). `source` names the file in
// errors. Throws mhc::Error. A fuzzer calls this.
struct Index {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::optional<uint64_t> total_size;             // metadata.total_size when present
};
Index parse_index(std::string_view json_text, std::string_view source);

// The parameters config.json may set (transformers' DeepseekV4Config key names). Each is
// optional; a present key must have the right type and range (hc_eps, rms_norm_eps: finite
// numbers >= 0; the others: positive integers). Other keys are ignored. Throws mhc::Error naming
// the key. A fuzzer calls this too.
struct ConfigValues {
  std::optional<double> hc_eps, rms_norm_eps;
  std::optional<int> hc_sinkhorn_iters, hidden_size, hc_mult, num_hidden_layers;
  std::optional<int> num_nextn_predict_layers;  // MTP depths (>= 0)
};
ConfigValues parse_config(std::string_view json_text, std::string_view source);

struct LoadOptions {
  // A preset's shapes the checkpoint must match (C, n, layers); nullopt: no such check.
  std::optional<MhcParams> expect;
  std::string expect_name;  // the preset's name, for messages
  uint64_t seed = 1;        // seed of the synthetic stand-in gains (not in a checkpoint)
  // Called with the checkpoint's parameters (C, n and layers from its tensors' shapes) and its
  // count of MTP blocks before any tensor is read, e.g. to check that the host can hold what will
  // be read; may throw mhc::Error.
  std::function<void(const MhcParams&, int mtp_depths)> before_read;
};

// What the loader found and how much it read (printed by `mhc run --weights`).
struct LoadReport {
  std::string path;    // as given
  std::string layout;  // "index" or "single file"
  Naming naming = Naming::kOfficial;
  std::string config_json;                    // path of the config.json used, empty when none
  std::vector<std::string> config_keys_used;  // e.g. "hc_eps=1e-06"
  int shards_listed = 0;                   // shard files named by the index (1 for a single file)
  std::vector<std::string> shards_opened;  // only those holding the tensors read
  int tensors_listed = 0;                  // tensors in the index (or the single file)
  int tensors_read = 0;
  uint64_t tensor_bytes_read = 0;    // data of the tensors read
  uint64_t header_bytes_read = 0;    // safetensors headers of the opened shards
  uint64_t metadata_bytes_read = 0;  // index json + config.json
  uint64_t total_file_bytes = 0;     // all shard files listed, as on disk
  bool final_norm_from_checkpoint = false;
  bool head_from_checkpoint = false;     // the head collapse's three tensors were read
  int mtp_depths = 0;                    // MTP blocks read (docs/mtp.md)
  std::optional<int> config_mtp_depths;  // config.json's num_nextn_predict_layers
  std::string norm_dtype;                // "F32", "BF16" or "F32+BF16"
  uint64_t bytes_read() const {
    return tensor_bytes_read + header_bytes_read + metadata_bytes_read;
  }
};

struct Loaded {
  ModelWeights weights;
  // One model of one layer per MTP depth: its two sites, its head, its final norm and the
  // synthetic model's stand-in gains for mtp_seed(seed, depth); empty without MTP blocks.
  std::vector<ModelWeights> mtp;
  LoadReport report;
};

// The seed of MTP depth `depth`'s synthetic weights (export-example) and stand-in gains.
uint64_t mtp_seed(uint64_t seed, int depth);

// MTP depth `depth`'s synthetic weights: synthetic_model of one layer of `p`'s shape.
ModelWeights synthetic_mtp_block(const MhcParams& p, uint64_t seed, int depth);

// Loads `path`: a directory with model.safetensors.index.json (sharded), a directory with exactly
// one .safetensors file, or a .safetensors file. C, n and the layer count come from the shapes;
// eps_h, T and eps_n are the V4.1 defaults unless config.json next to the weights sets
// hc_eps / hc_sinkhorn_iters / rms_norm_eps. The stand-in gains are the synthetic model's for the
// same shape and `opt.seed`; a missing final norm is the synthetic model's too (reported).
// Every problem is an mhc::Error naming the file and the tensor.
Loaded load(const std::string& path, const LoadOptions& opt = {});

// Several lines describing what was found and read, for people.
std::string describe(const LoadReport& r, const MhcParams& p);

// ---- `mhc export-example` ------------------------------------------------------------------

struct ExportOptions {
  int layers = 3;
  int hidden = 256;
  int hc = 4;
  Naming naming = Naming::kOfficial;
  uint64_t seed = 1;
  bool single_file = false;  // model.safetensors instead of two shards + index
  bool norm_bf16 = false;    // sublayer and final norms stored as BF16
  bool final_norm = true;    // write norm.weight
  bool head = true;          // write the head collapse's hc_head_fn/base/scale
  int mtp = 0;               // MTP blocks to write (docs/mtp.md)
  bool config_json = true;   // write config.json with the V4.1 values
  bool force = false;        // write into a non-empty directory (see export_example)
};

struct ExportReport {
  std::vector<std::string> files;  // written, relative to the directory
  int mhc_tensors = 0;
  std::vector<std::string> decoys;  // non-mHC tensors written to show they are not read
  uint64_t total_bytes = 0;
};

// Writes a small synthetic checkpoint (synthetic_model(p, seed)'s weights, named as a real one)
// into `dir`. Everything is built in a fresh temporary directory beside `dir` first. A new `dir`
// is that directory renamed into place; an existing one must be empty unless opt.force, which
// replaces the files an earlier export wrote (their mark; any other file of export's names is
// refused before the work). The replacement exchanges the two directories in one rename, the
// other entries of `dir` mirrored into the new one, so `dir` holds the old checkpoint or the new
// one, complete, at every instant, also across SIGKILL; where that cannot be done (docs/limits.md)
// the files are replaced one by one, never leaving a mix of old and new. The temporaries of an
// earlier export to the same place that was killed are removed first (io::remove_stale).
ExportReport export_example(const std::string& dir, const ExportOptions& opt);

// The file names export_example may write into its directory (checked against a --json report).
std::vector<std::string> export_file_names();

// The most MTP blocks export_example writes (real models have one).
inline constexpr int kMaxExportMtp = 8;

// The params export_example writes (V4.1 defaults with the chosen C, n and layers).
MhcParams example_params(const ExportOptions& opt);

}  // namespace mhc::ckpt
