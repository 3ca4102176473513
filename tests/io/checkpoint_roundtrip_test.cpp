// export_example then load: every layout and naming gives back the synthetic model's bits, reads
// only the mHC and norm tensors, and takes its params from config.json when present.
#include <cstring>

#include "checkpoint_test_util.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;

using testing::exported;
using testing::mentions;
using testing::small;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> bf16_rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

// The loaded weights are synthetic_model(p, seed)'s, bit for bit (norms rounded to bf16 when
// they were stored so).
void expect_synthetic(const ModelWeights& got, const MhcParams& p, uint64_t seed, bool norm_bf16) {
  const ModelWeights want = synthetic_model(p, seed);
  ASSERT_EQ(got.sites.size(), want.sites.size());
  for (size_t s = 0; s < want.sites.size(); ++s) {
    SCOPED_TRACE("site " + std::to_string(s));
    EXPECT_TRUE(same_bits(got.sites[s].hc_fn, want.sites[s].hc_fn));
    EXPECT_TRUE(same_bits(got.sites[s].hc_base, want.sites[s].hc_base));
    EXPECT_TRUE(same_bits(got.sites[s].hc_scale, want.sites[s].hc_scale));
    const auto norm = want.sites[s].norm_weight;
    EXPECT_TRUE(same_bits(got.sites[s].norm_weight, norm_bf16 ? bf16_rounded(norm) : norm));
    EXPECT_TRUE(same_bits(got.standin_gain[s], want.standin_gain[s]));
  }
  const auto fin = want.final_norm;
  EXPECT_TRUE(same_bits(got.final_norm, norm_bf16 ? bf16_rounded(fin) : fin));
}

// Exact bytes of the mHC and norm tensors of a checkpoint with these options.
uint64_t mhc_bytes(const ExportOptions& o) {
  const MhcParams p = example_params(o);
  const uint64_t norm = uint64_t(p.hidden) * (o.norm_bf16 ? 2 : 4);
  const uint64_t site = uint64_t(p.nmix()) * p.k() * 4 + uint64_t(p.nmix()) * 4 + 3 * 4 + norm;
  const uint64_t head = (uint64_t(p.n) * p.k() + uint64_t(p.n) + 1) * 4;
  return site * 2 * uint64_t(p.layers) + (o.final_norm ? norm : 0) + (o.head ? head : 0);
}

void check_roundtrip(const ExportOptions& o, const std::string& tag, bool single) {
  const std::string dir = exported(tag, o);
  LoadOptions seeded;  // by member: g++ and clang each warn on one of the initializer forms
  seeded.seed = o.seed;
  const Loaded l = load(dir, seeded);
  const MhcParams p = example_params(o);
  EXPECT_EQ(l.weights.params.hidden, p.hidden);
  EXPECT_EQ(l.weights.params.n, p.n);
  EXPECT_EQ(l.weights.params.layers, p.layers);
  EXPECT_EQ(l.weights.params.sinkhorn_iters, p.sinkhorn_iters);
  EXPECT_EQ(l.weights.params.eps_h, p.eps_h);
  EXPECT_EQ(l.weights.params.eps_n, p.eps_n);
  expect_synthetic(l.weights, p, o.seed, o.norm_bf16);
  const LoadReport& r = l.report;
  EXPECT_EQ(r.naming, o.naming);
  EXPECT_EQ(r.layout, single ? "single file" : "index");
  EXPECT_EQ(r.shards_listed, single ? 1 : 2);
  EXPECT_EQ(r.shards_opened.size(), single ? 1u : 2u);
  EXPECT_EQ(r.tensors_read, 8 * o.layers + (o.final_norm ? 1 : 0) + (o.head ? 3 : 0));
  EXPECT_EQ(r.tensors_listed, r.tensors_read + 2);  // + the two decoys
  // Exactly the mHC/norm data was read: never the decoys, which dominate the files.
  EXPECT_EQ(r.tensor_bytes_read, mhc_bytes(o));
  EXPECT_LT(2 * r.bytes_read(), r.total_file_bytes);
  EXPECT_EQ(r.final_norm_from_checkpoint, o.final_norm);
  EXPECT_EQ(r.norm_dtype, o.norm_bf16 ? "BF16" : "F32");
}

TEST(CheckpointRoundTrip, OfficialShards) { check_roundtrip(small(), "official", false); }

TEST(CheckpointRoundTrip, HfShards) { check_roundtrip(small(Naming::kHf), "hf", false); }

TEST(CheckpointRoundTrip, SingleFileBothNamings) {
  for (Naming naming : {Naming::kOfficial, Naming::kHf}) {
    ExportOptions o = small(naming);
    o.single_file = true;
    check_roundtrip(o, "single", true);
  }
}

TEST(CheckpointRoundTrip, Bf16Norms) {
  ExportOptions o = small(Naming::kHf);
  o.norm_bf16 = true;
  check_roundtrip(o, "bf16", false);
}

TEST(CheckpointRoundTrip, TwoStreamsOneLayerOddSplit) {
  ExportOptions o = small();
  o.hc = 2;  // NMIX = 8
  o.hidden = 128;
  o.layers = 1;  // both sites in the first shard; the second holds a decoy and the final norm
  check_roundtrip(o, "n2", false);
  o.layers = 5;
  check_roundtrip(o, "n2l5", false);
}

TEST(CheckpointRoundTrip, MixedNormDtypes) {
  const std::string dir = exported("mixed");
  testing::rewrite_shard(fs::path(dir) / testing::kShard1,
                         [](st::Writer& w, const st::TensorInfo& t, std::span<const std::byte> b) {
                           if (t.name != "layers.0.attn_norm.weight") return false;
                           std::vector<float> v(b.size() / 4);
                           std::memcpy(v.data(), b.data(), b.size());
                           std::vector<Bf16> h(v.size());
                           for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_bf16(v[i]);
                           w.add_bf16(t.name, t.shape, h);
                           return true;
                         });
  const Loaded l = load(dir);
  EXPECT_EQ(l.report.norm_dtype, "BF16+F32");
  const ModelWeights want = synthetic_model(l.weights.params, 7);
  EXPECT_TRUE(same_bits(l.weights.sites[0].norm_weight, bf16_rounded(want.sites[0].norm_weight)));
  EXPECT_TRUE(same_bits(l.weights.sites[1].norm_weight, want.sites[1].norm_weight));
}

TEST(CheckpointRoundTrip, PathsToTheIndexAndTheFile) {
  const std::string dir = exported("paths");
  EXPECT_EQ(load(dir + "/" + testing::kIndex).report.layout, "index");
  ExportOptions o = small();
  o.single_file = true;
  const std::string single = exported("paths_single", o);
  const Loaded l = load(single + "/model.safetensors");
  EXPECT_EQ(l.report.layout, "single file");
  EXPECT_EQ(l.report.config_json, single + "/config.json");
}

TEST(CheckpointRoundTrip, NoFinalNormUsesTheSyntheticOne) {
  ExportOptions o = small();
  o.final_norm = false;
  check_roundtrip(o, "nofinal", false);
}

TEST(CheckpointRoundTrip, GainsFollowTheSeed) {
  const std::string dir = exported("seed");
  LoadOptions seeded;  // by member: g++ and clang each warn on one of the initializer forms
  seeded.seed = 99;
  const Loaded l = load(dir, seeded);
  const ModelWeights s99 = synthetic_model(l.weights.params, 99);
  EXPECT_TRUE(same_bits(l.weights.standin_gain[3], s99.standin_gain[3]));
  // The parameters themselves are the checkpoint's (seed 7), not the seed's.
  EXPECT_FALSE(same_bits(l.weights.sites[3].hc_base, s99.sites[3].hc_base));
}

TEST(CheckpointRoundTrip, ConfigOverridesAndDefaults) {
  const std::string dir = exported("config");
  testing::put(fs::path(dir) / "config.json",
               R"({"hc_eps": 2e-6, "hc_sinkhorn_iters": 7, "rms_norm_eps": 1e-6,
                   "hidden_size": 64, "hc_mult": 4, "num_hidden_layers": 3,
                   "vocab_size": 129280, "rope_scaling": {"type": "yarn"}})");
  const Loaded l = load(dir);
  EXPECT_EQ(l.weights.params.eps_h, 2e-6);
  EXPECT_EQ(l.weights.params.sinkhorn_iters, 7);
  EXPECT_EQ(l.weights.params.eps_n, 1e-6);
  EXPECT_EQ(l.report.config_keys_used.size(), 3u);
  fs::remove(fs::path(dir) / "config.json");
  const Loaded d = load(dir);
  const MhcParams v41 = preset(kDefaultPreset);
  EXPECT_EQ(d.weights.params.eps_h, v41.eps_h);
  EXPECT_EQ(d.weights.params.eps_n, v41.eps_n);
  EXPECT_EQ(d.weights.params.sinkhorn_iters, v41.sinkhorn_iters);
  EXPECT_TRUE(d.report.config_json.empty());
}

TEST(CheckpointRoundTrip, MatchingPresetPasses) {
  const std::string dir = exported("preset_ok");
  LoadOptions opt;
  opt.expect = example_params(small());
  opt.expect_name = "small";
  EXPECT_EQ(load(dir, opt).weights.params.layers, 3);
}

TEST(CheckpointRoundTrip, DescribeSaysWhatWasRead) {
  const std::string dir = exported("describe");
  const Loaded l = load(dir);
  const std::string d = describe(l.report, l.weights.params);
  EXPECT_TRUE(mentions(
      d, {"C=64 n=4 layers=3", "official naming", "index", testing::kShard1, testing::kShard2,
          "28 of 30 tensors", "config.json", "final norm from the checkpoint", "synthetic"}))
      << d;
}

TEST(CheckpointRoundTrip, ExportReplacesTheOtherLayout) {
  const std::string dir = exported("relayout");
  ExportOptions o = small();
  o.single_file = true;
  o.force = true;  // the directory holds the first export
  export_example(dir, o);
  EXPECT_FALSE(fs::exists(fs::path(dir) / testing::kIndex));
  EXPECT_EQ(load(dir).report.layout, "single file");
}

}  // namespace
}  // namespace mhc::ckpt
