// Internals of the checkpoint loader shared by checkpoint_load.cpp and checkpoint_layers.cpp.
#pragma once
#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mhc/io/checkpoint.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::ckpt {

// Where the tensors are: the index's weight_map (or, for a single file, its own tensor list).
struct Source {
  std::filesystem::path dir;  // shard names and config.json are relative to this
  std::string index_path;     // empty for a single file
  std::string single_path;    // the single file, empty with an index
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::map<std::string, st::File> shards;         // opened shards, by shard file name
  const std::string& where() const { return index_path.empty() ? single_path : index_path; }
};

// "hc_attn_fn", "attn_hc.fn", ...: a per-layer tensor's name after "layers.{i}.".
std::string_view slot_suffix(Naming naming, Slot slot);
// "layers." (official), "model.layers." (transformers).
std::string_view layer_prefix(Naming naming);

// "{prefix}{number}.{rest}" split, the number written as torch writes layer numbers; nullopt for
// any other name.
struct Numbered {
  int number = 0;
  std::string_view rest;
};
std::optional<Numbered> split_numbered(std::string_view prefix, std::string_view name);
// A per-layer tensor "{prefix}{i}.{suffix}" with `naming`'s suffixes.
std::optional<LayerTensor> match_prefixed(std::string_view prefix, Naming naming,
                                          std::string_view name);

// The naming, the layer count and the MTP depths, worked out from the names alone (nothing opened
// yet). `config_layers`: config.json's num_hidden_layers, which tells the trunk from the MTP
// layers in the Hugging Face layout (docs/mtp.md).
struct Layers {
  Naming naming = Naming::kOfficial;
  int count = 0;       // trunk layers
  int mtp_depths = 0;  // MTP blocks
};
Layers find_layers(const Source& s, std::optional<int> config_layers = std::nullopt);

// Every slot of `sets` must hold exactly 0..count-1; `name_of(i, slot)` names a missing tensor.
using LayerSets = std::array<std::set<int>, kSlots>;
void check_layers(const Source& s, Naming naming, const LayerSets& sets, int count,
                  const std::function<std::string(int, Slot)>& name_of, std::string_view unit);

// The MTP depths' layer numbers under the Hugging Face layout: layers of "model.layers." holding
// a tensor only an MTP block has (hc_head_fn, shared_head.norm.weight, enorm, ...).
// Each such layer with one of those tensors' names.
std::map<int, std::string> hf_mtp_layers(const Source& s);
// The MTP depths named "mtp.{k}." (official), by any tensor.
std::set<int> official_mtp_depths(const Source& s);

// Reads tensors through the shards that hold them, opening each shard once, and accounts for
// what was read.
class TensorReader {
 public:
  TensorReader(Source& s, LoadReport& r) : src_(s), report_(r) {}
  bool listed(const std::string& name) const { return src_.weight_map.count(name) != 0; }
  const st::TensorInfo& info(const std::string& name);
  std::vector<float> f32(const std::string& name, const st::ShapeSpec& spec);
  std::vector<float> f32_or_bf16(const std::string& name, const st::ShapeSpec& spec);
  std::string file_of(const std::string& name) const;
  std::string norm_dtypes() const;

 private:
  const st::File& shard_of(const std::string& name);
  void count(const std::string& name);
  Source& src_;
  LoadReport& report_;
  std::set<std::string> norm_dtypes_;
};

// C and n from layer 0's attention hc_fn [n(n+2), n*C].
struct Shapes {
  int hidden = 0;
  int n = 0;
  std::string from;  // the tensor they came from
  st::Shape fn_shape;
};
Shapes read_shapes(TensorReader& reader, const Layers& layers);

// Every site's hc_fn/base/scale and norm weight, checked against `p`; the final norm when
// present; the stand-in gains (and a missing final norm) from synthetic_model(p, seed).
ModelWeights read_weights(TensorReader& reader, const Layers& layers, const MhcParams& p,
                          uint64_t seed);

// The head collapse's hc_fn [n, n*C], hc_base [n], hc_scale [1] (F32, finite) when the checkpoint
// lists all three; empty when it lists none; an mhc::Error naming the missing ones otherwise.
HeadWeights read_head(TensorReader& reader, Naming naming, const MhcParams& p);
HeadWeights read_head_named(TensorReader& reader, const std::array<std::string, 3>& names,
                            const MhcParams& p);

// Every MTP depth's sites, head and final norm, checked against `p` (docs/mtp.md).
std::vector<ModelWeights> read_mtp(TensorReader& reader, const Layers& layers, const MhcParams& p,
                                   uint64_t seed);

}  // namespace mhc::ckpt
