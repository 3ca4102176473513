// The MTP blocks of a checkpoint (docs/mtp.md): named as DeepSeek's reference and the engines'
// loaders name them, written by export-example, read back bit for bit under both namings and both
// layouts, absent without harm, and refused (the tensor named) when a depth or a block's tensor is
// missing, misplaced, of the wrong shape, or counted differently by config.json.
#include <cstring>
#include <limits>

#include "checkpoint_test_util.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;

using testing::exported;
using testing::kIndex;
using testing::load_error;
using testing::mentions;
using testing::small;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

LoadOptions seeded(uint64_t seed) {
  LoadOptions lo;
  lo.seed = seed;
  return lo;
}

ExportOptions with_mtp(Naming naming, int depths) {
  ExportOptions o = small(naming);
  o.mtp = depths;
  return o;
}

// Removes `names` from the index (the shard keeps them: the loader goes by the index).
void drop_from_index(const std::string& dir, std::initializer_list<std::string> names) {
  testing::edit_index(dir, [&](nlohmann::json& j) {
    for (const auto& n : names) j["weight_map"].erase(n);
  });
}

void set_config(const std::string& dir, const char* key, const nlohmann::json& value) {
  const fs::path path = fs::path(dir) / "config.json";
  nlohmann::json j = nlohmann::json::parse(testing::slurp(path));
  if (value.is_null()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  testing::put(path, j.dump(1));
}

TEST(CheckpointMtp, Names) {
  EXPECT_EQ(mtp_tensor_name(Naming::kOfficial, 43, 0, Slot::kAttnFn), "mtp.0.hc_attn_fn");
  EXPECT_EQ(mtp_tensor_name(Naming::kOfficial, 43, 1, Slot::kFfnNorm), "mtp.1.ffn_norm.weight");
  EXPECT_EQ(mtp_head_tensor_name(Naming::kOfficial, 43, 0, HeadSlot::kScale),
            "mtp.0.hc_head_scale");
  EXPECT_EQ(mtp_norm_name(Naming::kOfficial, 43, 2), "mtp.2.norm.weight");
  EXPECT_EQ(mtp_tensor_name(Naming::kHf, 43, 0, Slot::kAttnFn), "model.layers.43.attn_hc.fn");
  EXPECT_EQ(mtp_tensor_name(Naming::kHf, 61, 1, Slot::kAttnNorm),
            "model.layers.62.input_layernorm.weight");
  EXPECT_EQ(mtp_head_tensor_name(Naming::kHf, 43, 0, HeadSlot::kFn), "model.layers.43.hc_head_fn");
  EXPECT_EQ(mtp_norm_name(Naming::kHf, 43, 0), "model.layers.43.shared_head.norm.weight");
}

void expect_blocks(const Loaded& l, const ExportOptions& o) {
  const MhcParams p = example_params(o);
  EXPECT_EQ(l.weights.params.layers, p.layers);  // the blocks are not trunk layers
  ASSERT_EQ(l.mtp.size(), size_t(o.mtp));
  EXPECT_EQ(l.report.mtp_depths, o.mtp);
  for (int d = 0; d < o.mtp; ++d) {
    SCOPED_TRACE("depth " + std::to_string(d));
    const ModelWeights want = synthetic_mtp_block(p, o.seed, d);
    const ModelWeights& got = l.mtp[size_t(d)];
    EXPECT_EQ(got.params.layers, 1);
    ASSERT_EQ(got.sites.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_TRUE(same_bits(got.sites[s].hc_fn, want.sites[s].hc_fn));
      EXPECT_TRUE(same_bits(got.sites[s].hc_base, want.sites[s].hc_base));
      EXPECT_TRUE(same_bits(got.sites[s].hc_scale, want.sites[s].hc_scale));
      EXPECT_TRUE(same_bits(got.sites[s].norm_weight, want.sites[s].norm_weight));
      EXPECT_TRUE(same_bits(got.standin_gain[s], want.standin_gain[s]));
    }
    EXPECT_TRUE(same_bits(got.head.hc_fn, want.head.hc_fn));
    EXPECT_TRUE(same_bits(got.head.hc_base, want.head.hc_base));
    EXPECT_TRUE(same_bits(got.head.hc_scale, want.head.hc_scale));
    EXPECT_TRUE(same_bits(got.final_norm, want.final_norm));
    // Each depth has weights of its own, not the trunk's or another depth's.
    EXPECT_FALSE(same_bits(got.sites[0].hc_fn, l.weights.sites[0].hc_fn));
  }
  if (o.mtp == 2) {
    EXPECT_FALSE(same_bits(l.mtp[0].head.hc_fn, l.mtp[1].head.hc_fn));
  }
}

TEST(CheckpointMtp, ReadBackUnderBothNamingsAndLayouts) {
  for (Naming naming : {Naming::kOfficial, Naming::kHf}) {
    for (bool single : {false, true}) {
      SCOPED_TRACE(std::string(to_string(naming)) + (single ? " single" : " shards"));
      ExportOptions o = with_mtp(naming, 2);
      o.single_file = single;
      const Loaded l = load(exported("mtp_read", o), seeded(o.seed));
      expect_blocks(l, o);
      EXPECT_TRUE(mentions(describe(l.report, l.weights.params), {"mtp", "2 block(s)"}));
    }
  }
}

TEST(CheckpointMtp, HfLayoutWithoutConfigFindsTheTrunksEnd) {
  ExportOptions o = with_mtp(Naming::kHf, 1);
  o.config_json = false;
  const Loaded l = load(exported("mtp_hf_noconfig", o), seeded(o.seed));
  expect_blocks(l, o);
}

TEST(CheckpointMtp, AbsentBlocksAreFine) {
  ExportOptions o = small();
  const std::string dir = exported("mtp_absent", o);
  set_config(dir, "num_nextn_predict_layers", 1);  // a checkpoint with its MTP stripped
  const Loaded l = load(dir);
  EXPECT_TRUE(l.mtp.empty());
  EXPECT_TRUE(mentions(describe(l.report, l.weights.params),
                       {"mtp", "none in the checkpoint", "num_nextn_predict_layers is 1"}));
}

TEST(CheckpointMtp, BeforeReadIsToldTheDepths) {
  int told = -1;
  LoadOptions lo;
  lo.before_read = [&](const MhcParams&, int depths) { told = depths; };
  load(exported("mtp_before", with_mtp(Naming::kOfficial, 2)), lo);
  EXPECT_EQ(told, 2);
}

TEST(CheckpointMtp, MissingDepthOrTensorIsNamed) {
  const std::string gap = exported("mtp_gap", with_mtp(Naming::kOfficial, 2));
  testing::edit_index(gap, [](nlohmann::json& j) {
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end();) {
      it = it.key().rfind("mtp.0.", 0) == 0 ? j["weight_map"].erase(it) : std::next(it);
    }
  });
  EXPECT_TRUE(mentions(load_error(gap), {kIndex, "MTP depth 0 is missing", "'mtp.0.hc_attn_fn'"}));

  const std::string slot = exported("mtp_slot", with_mtp(Naming::kOfficial, 2));
  drop_from_index(slot, {"mtp.1.hc_ffn_fn"});
  EXPECT_TRUE(mentions(load_error(slot), {"'mtp.1.hc_ffn_fn'"}));

  for (const char* missing : {"mtp.0.hc_head_scale", "mtp.0.norm.weight"}) {
    const std::string dir = exported("mtp_incomplete", with_mtp(Naming::kOfficial, 1));
    drop_from_index(dir, {missing});
    EXPECT_TRUE(
        mentions(load_error(dir), {"MTP block 0 is incomplete", std::string("'") + missing}))
        << missing;
  }
  const std::string hf = exported("mtp_hf_incomplete", with_mtp(Naming::kHf, 1));
  drop_from_index(hf, {"model.layers.3.shared_head.norm.weight"});
  EXPECT_TRUE(mentions(load_error(hf), {"'model.layers.3.shared_head.norm.weight'"}));
}

TEST(CheckpointMtp, WrongShapeOrValueIsNamed) {
  const std::string dir = exported("mtp_shape", with_mtp(Naming::kOfficial, 1));
  const fs::path shard = fs::path(dir) / testing::kShard2;
  testing::rewrite_shard(shard, [](st::Writer& w, const st::TensorInfo& t, auto) {
    if (t.name == "mtp.0.hc_head_base") {
      w.add_f32(t.name, {5}, std::vector<float>(5, 0.5f));
      return true;
    }
    if (t.name == "mtp.0.hc_ffn_scale") {
      const std::vector<float> scale{1.0f, std::numeric_limits<float>::infinity(), 1.0f};
      w.add_f32(t.name, {3}, scale);
      return true;
    }
    return false;
  });
  const std::string err = load_error(dir);
  EXPECT_TRUE(mentions(err, {"mtp.0.hc_ffn_scale"}) || mentions(err, {"mtp.0.hc_head_base"}))
      << err;
}

TEST(CheckpointMtp, ConfigCountMustMatch) {
  const std::string dir = exported("mtp_config", with_mtp(Naming::kOfficial, 2));
  set_config(dir, "num_nextn_predict_layers", 1);
  EXPECT_TRUE(mentions(load_error(dir), {"config.json", "'num_nextn_predict_layers' is 1",
                                         "2 MTP block(s)", "'mtp.1.hc_attn_fn'"}));
  set_config(dir, "num_nextn_predict_layers", -1);
  EXPECT_TRUE(mentions(load_error(dir), {"num_nextn_predict_layers"}));
}

TEST(CheckpointMtp, HfBlockInsideTheTrunkIsRefused) {
  const std::string dir = exported("mtp_hf_trunk", with_mtp(Naming::kHf, 1));
  set_config(dir, "num_hidden_layers", 4);  // the trunk would end after the block
  const std::string err = load_error(dir);
  EXPECT_TRUE(
      mentions(err, {"layer 3 holds a tensor only an MTP block has", "num_hidden_layers is 4"}))
      << err;
  const std::string zero = exported("mtp_hf_zero", with_mtp(Naming::kHf, 1));
  testing::edit_index(zero, [](nlohmann::json& j) {
    j["weight_map"]["model.layers.0.enorm.weight"] = testing::kShard1;
  });
  EXPECT_TRUE(mentions(load_error(zero), {"layer 0 holds a tensor only an MTP block has"}));
}

}  // namespace
}  // namespace mhc::ckpt
