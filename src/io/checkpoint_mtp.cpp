// The multi-token-prediction blocks of a checkpoint (docs/mtp.md): their names under both
// namings, where they are, and their tensors read and checked like the trunk's.
#include <fmt/core.h>

#include <array>
#include <string>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"

namespace mhc::ckpt {

namespace {

constexpr std::string_view kOfficialPrefix = "mtp.";

// Under the Hugging Face layout an MTP depth is a layer of "model.layers." holding one of these
// (DeepSeek-V3's Hub layout and the names vLLM and SGLang load V4's mtp.{k}.* into, docs/mtp.md).
constexpr std::array<std::string_view, 9> kHfMtpOnly = {
    "hc_head_fn",   "hc_head_base",  "hc_head_scale", "shared_head.norm.weight", "enorm.weight",
    "hnorm.weight", "e_proj.weight", "h_proj.weight", "eh_proj.weight"};

// The per-depth head's names after the depth's prefix, in HeadSlot order (both namings).
constexpr std::array<const char*, 3> kHeadSuffix = {"hc_head_fn", "hc_head_base", "hc_head_scale"};

std::string depth_prefix(Naming naming, int trunk_layers, int depth) {
  return naming == Naming::kHf ? fmt::format("{}{}.", layer_prefix(naming), trunk_layers + depth)
                               : fmt::format("{}{}.", kOfficialPrefix, depth);
}

}  // namespace

std::string mtp_tensor_name(Naming naming, int trunk_layers, int depth, Slot slot) {
  return depth_prefix(naming, trunk_layers, depth) + std::string(slot_suffix(naming, slot));
}

std::string mtp_head_tensor_name(Naming naming, int trunk_layers, int depth, HeadSlot slot) {
  return depth_prefix(naming, trunk_layers, depth) + kHeadSuffix[size_t(slot)];
}

std::string mtp_norm_name(Naming naming, int trunk_layers, int depth) {
  return depth_prefix(naming, trunk_layers, depth) +
         (naming == Naming::kHf ? "shared_head.norm.weight" : "norm.weight");
}

uint64_t mtp_seed(uint64_t seed, int depth) {
  // Past any seed a trunk is likely given, and a different one per depth.
  return seed ^ (0x6d74700000000000ULL + uint64_t(depth));
}

ModelWeights synthetic_mtp_block(const MhcParams& p, uint64_t seed, int depth) {
  MhcParams one = p;
  one.layers = 1;
  return synthetic_model(one, mtp_seed(seed, depth));
}

std::map<int, std::string> hf_mtp_layers(const Source& s) {
  std::map<int, std::string> out;
  for (const auto& [name, shard] : s.weight_map) {
    const auto numbered = split_numbered(layer_prefix(Naming::kHf), name);
    if (!numbered) continue;
    for (std::string_view only : kHfMtpOnly) {
      if (numbered->rest == only) out.emplace(numbered->number, name);
    }
  }
  return out;
}

std::set<int> official_mtp_depths(const Source& s) {
  std::set<int> out;
  for (const auto& [name, shard] : s.weight_map) {
    if (const auto numbered = split_numbered(kOfficialPrefix, name)) out.insert(numbered->number);
  }
  return out;
}

std::vector<ModelWeights> read_mtp(TensorReader& reader, const Layers& layers, const MhcParams& p,
                                   uint64_t seed) {
  const st::Dim nmix("n(n+2)", p.nmix()), k("n*C", p.k()), c("C", p.hidden);
  const Naming naming = layers.naming;
  std::vector<ModelWeights> out;
  for (int depth = 0; depth < layers.mtp_depths; ++depth) {
    auto name = [&](Slot slot) { return mtp_tensor_name(naming, layers.count, depth, slot); };
    auto site = [&](Slot fn, Slot base, Slot scale, Slot norm) {
      SiteWeights w;
      w.hc_fn = reader.f32(name(fn), {nmix, k});
      w.hc_base = reader.f32(name(base), {nmix});
      w.hc_scale = reader.f32(name(scale), {3});
      w.norm_weight = reader.f32_or_bf16(name(norm), {c});
      return w;
    };
    // The stand-in gains (not model weights) are the synthetic block's, as for the trunk.
    ModelWeights block = synthetic_mtp_block(p, seed, depth);
    block.sites = {site(Slot::kAttnFn, Slot::kAttnBase, Slot::kAttnScale, Slot::kAttnNorm),
                   site(Slot::kFfnFn, Slot::kFfnBase, Slot::kFfnScale, Slot::kFfnNorm)};
    const std::array<std::string, 3> head_names{
        mtp_head_tensor_name(naming, layers.count, depth, HeadSlot::kFn),
        mtp_head_tensor_name(naming, layers.count, depth, HeadSlot::kBase),
        mtp_head_tensor_name(naming, layers.count, depth, HeadSlot::kScale)};
    const std::string norm = mtp_norm_name(naming, layers.count, depth);
    for (const std::string& needed : {head_names[0], head_names[1], head_names[2], norm}) {
      if (!reader.listed(needed)) {
        throw Error(fmt::format(
            "{}: MTP block {} is incomplete: it has '{}' but no '{}' (an MTP block holds its "
            "layer's sites, its head collapse and its final norm, docs/mtp.md)",
            reader.file_of(name(Slot::kAttnFn)), depth, name(Slot::kAttnFn), needed));
      }
    }
    block.head = read_head_named(reader, head_names, p);
    block.final_norm = reader.f32_or_bf16(norm, {c});
    out.push_back(std::move(block));
  }
  return out;
}

}  // namespace mhc::ckpt
