// The layer structure of a checkpoint (from the names), its shapes, and the typed tensor reads.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <functional>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"

namespace mhc::ckpt {

namespace {

// "0-2, 4-5" for messages.
std::string ranges(const std::set<int>& s) {
  std::string out;
  for (auto it = s.begin(); it != s.end();) {
    const int first = *it;
    int last = first;
    while (++it != s.end() && *it == last + 1) last = *it;
    out += (out.empty() ? "" : ", ") +
           (first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  return out.empty() ? "none" : out;
}

bool is_hc(Slot s) { return int(s) < int(Slot::kAttnNorm); }

struct Scan {
  LayerSets sets;
  int hc_count = 0;
  std::string example;  // one hc tensor name
};

Scan scan(const Source& s, Naming naming, std::string_view prefix) {
  Scan out;
  for (const auto& [name, shard] : s.weight_map) {
    const auto m = match_prefixed(prefix, naming, name);
    if (!m) continue;
    out.sets[size_t(m->slot)].insert(m->layer);
    if (is_hc(m->slot)) {
      ++out.hc_count;
      if (out.example.empty()) out.example = name;
    }
  }
  return out;
}

Naming pick_naming(const Source& s, const Scan& official, const Scan& hf) {
  if (official.hc_count > 0 && hf.hc_count > 0) {
    throw Error(
        fmt::format("{}: mixes official mHC names ('{}') and transformers names ('{}'); "
                    "a checkpoint uses one naming",
                    s.where(), official.example, hf.example));
  }
  if (official.hc_count == 0 && hf.hc_count == 0) {
    std::string some;
    int shown = 0;
    for (auto it = s.weight_map.begin(); it != s.weight_map.end() && shown < 4; ++it, ++shown) {
      some += (shown ? ", '" : "'") + json_input::printable(it->first) + "'";
    }
    throw Error(fmt::format(
        "{}: no mHC tensors: nothing named like '{}' (official) or '{}' (transformers); {} "
        "tensors listed{}{}",
        s.where(), tensor_name(Naming::kOfficial, 0, Slot::kAttnFn),
        tensor_name(Naming::kHf, 0, Slot::kAttnFn), s.weight_map.size(),
        some.empty() ? "" : ", e.g. ", some));
  }
  return official.hc_count > 0 ? Naming::kOfficial : Naming::kHf;
}

int n_from_nmix(int64_t nmix) {
  if (nmix < 3 || nmix > INT_MAX) return 0;
  const int64_t n = std::llround(std::sqrt(double(nmix) + 1.0)) - 1;
  return n >= 1 && n * (n + 2) == nmix ? int(n) : 0;
}

template <class T>
void check_finite(const std::string& file, const std::string& name, const std::vector<T>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      throw Error(fmt::format("{}: tensor '{}' holds a non-finite value ({}) at flat element {}",
                              file, name, v[i], i));
    }
  }
}

}  // namespace

// Every slot must hold exactly the layers 0..count-1.
void check_layers(const Source& s, Naming naming, const LayerSets& sets, int count,
                  const std::function<std::string(int, Slot)>& name_of, std::string_view unit) {
  int ref = 0;  // a slot that has all `count` layers' worth of range, for messages
  for (int i = 0; i < kSlots; ++i) {
    if (!sets[size_t(i)].empty() && *sets[size_t(i)].rbegin() == count - 1) {
      ref = i;
      break;
    }
  }
  const auto what = [naming](Slot slot) { return slot_suffix(naming, slot); };
  for (int i = 0; i < kSlots; ++i) {
    const std::set<int>& got = sets[size_t(i)];
    int missing = 0;
    while (got.count(missing)) ++missing;
    if (missing >= count) continue;
    const std::string name = name_of(missing, Slot(i));
    if (!got.empty() && *got.rbegin() > missing) {
      throw Error(fmt::format("{}: {} {} is missing: no '{}' (the checkpoint has {} for {}s {})",
                              s.where(), unit, missing, name, what(Slot(i)), unit, ranges(got)));
    }
    throw Error(
        fmt::format("{}: inconsistent {}s: {} exists for {} {}s ({}), but {} for {} ({}): no '{}'",
                    s.where(), unit, what(Slot(ref)), count, unit, ranges(sets[size_t(ref)]),
                    what(Slot(i)), got.size(), ranges(got), name));
  }
}

Layers find_layers(const Source& s, std::optional<int> config_layers) {
  const Scan official = scan(s, Naming::kOfficial, layer_prefix(Naming::kOfficial));
  const Scan hf = scan(s, Naming::kHf, layer_prefix(Naming::kHf));
  Layers out;
  out.naming = pick_naming(s, official, hf);
  const LayerSets& sets = (out.naming == Naming::kOfficial ? official : hf).sets;
  int total = 0;
  for (const auto& set : sets) {
    if (!set.empty()) total = std::max(total, *set.rbegin() + 1);
  }
  const std::map<int, std::string> mtp =
      out.naming == Naming::kHf ? hf_mtp_layers(s) : std::map<int, std::string>{};
  if (!mtp.empty()) total = std::max(total, mtp.rbegin()->first + 1);
  const Naming naming = out.naming;
  check_layers(
      s, naming, sets, total,
      [naming](int layer, Slot slot) { return tensor_name(naming, layer, slot); }, "layer");
  // The Hugging Face layout numbers the MTP blocks on after the trunk: config.json says where the
  // trunk ends, else the first layer holding an MTP-only tensor does.
  out.count = mtp.empty() ? total : mtp.begin()->first;
  if (config_layers && !mtp.empty()) {
    if (*config_layers > mtp.begin()->first) {
      throw Error(fmt::format(
          "{}: layer {} holds a tensor only an MTP block has ('{}'), but config.json's "
          "num_hidden_layers is {}: the MTP blocks are numbered after the trunk (docs/mtp.md)",
          s.where(), mtp.begin()->first, json_input::printable(mtp.begin()->second),
          *config_layers));
    }
    out.count = *config_layers;  // layers between it and the first block's tensor lack a head
  }
  if (out.count == 0) {
    throw Error(
        fmt::format("{}: layer 0 holds a tensor only an MTP block has ('{}'); the MTP "
                    "blocks are numbered after the trunk (docs/mtp.md)",
                    s.where(), json_input::printable(mtp.begin()->second)));
  }
  out.mtp_depths = total - out.count;
  if (out.naming == Naming::kOfficial) {
    const Scan blocks = scan(s, Naming::kOfficial, "mtp.");
    const std::set<int> depths = official_mtp_depths(s);
    out.mtp_depths = depths.empty() ? 0 : *depths.rbegin() + 1;
    if (!depths.empty() && blocks.hc_count == 0) {
      throw Error(fmt::format("{}: MTP block {} has tensors but no '{}' (docs/mtp.md)", s.where(),
                              *depths.begin(),
                              mtp_tensor_name(naming, 0, *depths.begin(), Slot::kAttnFn)));
    }
    check_layers(
        s, naming, blocks.sets, out.mtp_depths,
        [](int depth, Slot slot) { return mtp_tensor_name(Naming::kOfficial, 0, depth, slot); },
        "MTP depth");
  }
  return out;
}

const st::File& TensorReader::shard_of(const std::string& name) {
  const std::string& shard = src_.weight_map.at(name);
  auto it = src_.shards.find(shard);
  if (it == src_.shards.end()) {
    const std::string path = (src_.dir / shard).string();
    try {
      it = src_.shards.emplace(shard, st::File::open(path)).first;
    } catch (const Error& e) {
      throw Error(fmt::format("{} (shard '{}' of {}, opened for '{}')", e.what(), shard,
                              src_.where(), name));
    }
    report_.shards_opened.push_back(path);
    report_.header_bytes_read += it->second.header().data_start;
  }
  if (!it->second.find(name)) {
    throw Error(
        fmt::format("{}: lists tensor '{}' in shard '{}', but {} has no tensor of that name",
                    src_.where(), name, shard, it->second.path()));
  }
  return it->second;
}

std::string TensorReader::file_of(const std::string& name) const {
  return (src_.dir / src_.weight_map.at(name)).string();
}

const st::TensorInfo& TensorReader::info(const std::string& name) {
  return *shard_of(name).find(name);
}

void TensorReader::count(const std::string& name) {
  report_.tensors_read += 1;
  report_.tensor_bytes_read += info(name).nbytes();
}

std::vector<float> TensorReader::f32(const std::string& name, const st::ShapeSpec& spec) {
  std::vector<float> v = shard_of(name).read_f32(name, spec);
  count(name);
  check_finite(file_of(name), name, v);
  return v;
}

std::vector<float> TensorReader::f32_or_bf16(const std::string& name, const st::ShapeSpec& spec) {
  std::vector<float> v = shard_of(name).read_f32_or_bf16(name, spec);
  norm_dtypes_.insert(std::string(st::to_string(info(name).dtype)));
  count(name);
  check_finite(file_of(name), name, v);
  return v;
}

std::string TensorReader::norm_dtypes() const {
  std::string out;
  for (const auto& d : norm_dtypes_) out += (out.empty() ? "" : "+") + d;
  return out;
}

Shapes read_shapes(TensorReader& reader, const Layers& layers) {
  Shapes s;
  s.from = tensor_name(layers.naming, 0, Slot::kAttnFn);
  const st::TensorInfo& t = reader.info(s.from);
  s.fn_shape = t.shape;
  auto bad = [&](const std::string& why) {
    throw Error(fmt::format("{}: tensor '{}' has shape {}: {}", reader.file_of(s.from), s.from,
                            st::format_shape(t.shape), why));
  };
  if (t.shape.size() != 2) bad("expected [n*(n+2), n*C]");
  s.n = n_from_nmix(t.shape[0]);
  if (s.n == 0) bad("the first dim must be n*(n+2) for some n >= 1 (8 for n=2, 24 for n=4)");
  if (t.shape[1] == 0 || t.shape[1] % s.n != 0 || t.shape[1] / s.n > INT_MAX) {
    bad(fmt::format("the second dim must be n*C with n={} and 0 < C <= {}", s.n, INT_MAX));
  }
  s.hidden = int(t.shape[1] / s.n);
  return s;
}

ModelWeights read_weights(TensorReader& reader, const Layers& layers, const MhcParams& p,
                          uint64_t seed) {
  const st::Dim nmix("n(n+2)", p.nmix()), k("n*C", p.k()), c("C", p.hidden);
  auto site = [&](int layer, Slot fn, Slot base, Slot scale, Slot norm) {
    SiteWeights w;
    w.hc_fn = reader.f32(tensor_name(layers.naming, layer, fn), {nmix, k});
    w.hc_base = reader.f32(tensor_name(layers.naming, layer, base), {nmix});
    w.hc_scale = reader.f32(tensor_name(layers.naming, layer, scale), {3});
    w.norm_weight = reader.f32_or_bf16(tensor_name(layers.naming, layer, norm), {c});
    return w;
  };
  ModelWeights w;
  w.params = p;
  for (int l = 0; l < layers.count; ++l) {
    w.sites.push_back(site(l, Slot::kAttnFn, Slot::kAttnBase, Slot::kAttnScale, Slot::kAttnNorm));
    w.sites.push_back(site(l, Slot::kFfnFn, Slot::kFfnBase, Slot::kFfnScale, Slot::kFfnNorm));
  }
  // The stand-in gains are not model weights: the synthetic model's, so that a checkpoint
  // exported with the same seed runs bit-identically to the synthetic run.
  ModelWeights synthetic = synthetic_model(p, seed);
  w.standin_gain = std::move(synthetic.standin_gain);
  const std::string final_name = final_norm_name(layers.naming);
  if (reader.listed(final_name)) {
    w.final_norm = reader.f32_or_bf16(final_name, {c});
  } else {
    w.final_norm = std::move(synthetic.final_norm);
  }
  w.head = read_head(reader, layers.naming, p);
  return w;
}

}  // namespace mhc::ckpt
