// Every broken checkpoint gives an mhc::Error naming the file and the tensor (or key).
#include <cmath>
#include <cstring>
#include <limits>

#include "checkpoint_test_util.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;

using nlohmann::json;
using testing::edit_index;
using testing::exported;
using testing::kIndex;
using testing::kShard1;
using testing::kShard2;
using testing::load_error;
using testing::mentions;

// Replaces one tensor of a shard by `dtype`/`shape` with zero bytes of the right size.
void replace_tensor(const fs::path& shard, const std::string& name, st::Dtype dtype,
                    st::Shape shape) {
  testing::rewrite_shard(shard, [&](st::Writer& w, const st::TensorInfo& t, auto) {
    if (t.name != name) return false;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::vector<std::byte> zeros(size_t(count) * st::dtype_size(dtype));
    w.add(t.name, dtype, shape, zeros);
    return true;
  });
}

void drop_from_index(const std::string& dir, const std::vector<std::string>& names) {
  edit_index(dir, [&](json& j) {
    for (const auto& n : names) j["weight_map"].erase(n);
  });
}

TEST(CheckpointErrors, NoCheckpointAtThePath) {
  EXPECT_TRUE(mentions(load_error("/nonexistent/ckpt"), {"/nonexistent/ckpt", "no such"}));
  const std::string empty = testing::fresh_dir("empty");
  EXPECT_TRUE(mentions(load_error(empty), {empty, kIndex, "no .safetensors file"}));
  const std::string other = empty + "/notes.txt";
  testing::put(other, "hello");
  EXPECT_TRUE(mentions(load_error(other), {other, "not a checkpoint"}));
}

TEST(CheckpointErrors, SeveralFilesWithoutAnIndex) {
  const std::string dir = exported("several");
  fs::remove(fs::path(dir) / kIndex);
  EXPECT_TRUE(mentions(load_error(dir), {dir, "2 .safetensors files", "without an index"}));
}

TEST(CheckpointErrors, MissingShard) {
  const std::string dir = exported("noshard");
  fs::remove(fs::path(dir) / kShard2);
  EXPECT_TRUE(mentions(load_error(dir), {kIndex, kShard2, "is missing", "holding e.g."}));
}

TEST(CheckpointErrors, BadIndexJson) {
  const std::string dir = exported("badindex");
  const fs::path index = fs::path(dir) / kIndex;
  auto error_with = [&](const std::string& text) {
    testing::put(index, text);
    return load_error(dir);
  };
  EXPECT_TRUE(mentions(error_with("{\"weight_map\": {"), {kIndex, "not valid JSON"}));
  EXPECT_TRUE(mentions(error_with("[1, 2]"), {kIndex, "not a JSON object"}));
  EXPECT_TRUE(mentions(error_with("{\"metadata\": {}}"), {kIndex, "no \"weight_map\""}));
  EXPECT_TRUE(mentions(error_with(R"({"weight_map": {"a": 3}})"), {kIndex, "weight_map['a']"}));
  EXPECT_TRUE(mentions(error_with(R"({"weight_map": {"a": "x", "a": "y"}})"),
                       {kIndex, "duplicate key 'a'"}));
  EXPECT_TRUE(
      mentions(error_with(R"({"weight_map": {"a": "../x.safetensors"}})"), {kIndex, "'..'"}));
  EXPECT_TRUE(
      mentions(error_with(R"({"weight_map": {"a": "/etc/passwd"}})"), {kIndex, "absolute"}));
  EXPECT_TRUE(mentions(error_with(R"({"metadata": {"total_size": -1}, "weight_map": {}})"),
                       {kIndex, "total_size"}));
  EXPECT_TRUE(mentions(error_with(R"({"weight_map": {"a": "x.safetensors"}})"),
                       {kIndex, "x.safetensors", "is missing"}));
}

TEST(CheckpointErrors, TensorListedButAbsentFromItsShard) {
  const std::string dir = exported("absent");
  edit_index(dir, [](json& j) { j["weight_map"]["layers.2.hc_ffn_fn"] = kShard1; });
  EXPECT_TRUE(mentions(load_error(dir),
                       {kIndex, "'layers.2.hc_ffn_fn'", kShard1, "has no tensor of that name"}));
}

TEST(CheckpointErrors, WrongDtype) {
  const std::string dir = exported("dtype");
  replace_tensor(fs::path(dir) / kShard1, "layers.0.hc_attn_base", st::Dtype::BF16, {24});
  EXPECT_TRUE(
      mentions(load_error(dir), {kShard1, "'layers.0.hc_attn_base'", "dtype BF16, expected F32"}));
  replace_tensor(fs::path(dir) / kShard1, "layers.0.hc_attn_base", st::Dtype::F32, {24});
  replace_tensor(fs::path(dir) / kShard1, "layers.1.ffn_norm.weight", st::Dtype::F16, {64});
  EXPECT_TRUE(mentions(load_error(dir),
                       {kShard1, "'layers.1.ffn_norm.weight'", "F16", "expected F32 or BF16"}));
}

TEST(CheckpointErrors, WrongShapes) {
  const std::string dir = exported("shape");
  const fs::path s1 = fs::path(dir) / kShard1, s2 = fs::path(dir) / kShard2;
  auto error_after = [&](const fs::path& shard, const std::string& name, st::Shape shape) {
    const std::string before = dir + "_before";
    fs::remove_all(before);
    fs::copy(dir, before);
    replace_tensor(shard, name, st::Dtype::F32, shape);
    const std::string e = load_error(dir);
    fs::remove_all(dir);
    fs::rename(before, dir);
    return e;
  };
  EXPECT_TRUE(mentions(error_after(s1, "layers.0.hc_attn_fn", {25, 256}),
                       {kShard1, "'layers.0.hc_attn_fn'", "[25, 256]", "n*(n+2)"}));
  EXPECT_TRUE(mentions(error_after(s1, "layers.0.hc_attn_fn", {24, 255}),
                       {kShard1, "'layers.0.hc_attn_fn'", "n*C"}));
  EXPECT_TRUE(mentions(error_after(s1, "layers.0.hc_attn_fn", {24, 256, 1}),
                       {kShard1, "'layers.0.hc_attn_fn'", "[n*(n+2), n*C]"}));
  EXPECT_TRUE(
      mentions(error_after(s1, "layers.1.hc_ffn_fn", {24, 512}),
               {kShard1, "'layers.1.hc_ffn_fn'", "[24, 512]", "expected [n(n+2)=24, n*C=256]"}));
  EXPECT_TRUE(mentions(error_after(s1, "layers.0.hc_ffn_base", {23}),
                       {kShard1, "'layers.0.hc_ffn_base'", "[23]"}));
  EXPECT_TRUE(mentions(error_after(s2, "layers.2.hc_attn_scale", {4}),
                       {kShard2, "'layers.2.hc_attn_scale'", "[4]", "expected [3]"}));
  EXPECT_TRUE(mentions(error_after(s1, "layers.0.attn_norm.weight", {65}),
                       {kShard1, "'layers.0.attn_norm.weight'", "expected [C=64]"}));
  EXPECT_TRUE(
      mentions(error_after(s2, "norm.weight", {64, 1}), {kShard2, "'norm.weight'", "[64, 1]"}));
}

TEST(CheckpointErrors, LayerMissing) {
  ExportOptions o = testing::small();
  o.layers = 5;
  const std::string dir = exported("gap", o);
  std::vector<std::string> layer3;
  for (int s = 0; s < kSlots; ++s) layer3.push_back(tensor_name(Naming::kOfficial, 3, Slot(s)));
  drop_from_index(dir, layer3);
  EXPECT_TRUE(mentions(load_error(dir),
                       {kIndex, "layer 3 is missing", "'layers.3.hc_attn_fn'", "layers 0-2, 4"}));
}

TEST(CheckpointErrors, OneNormMissing) {
  const std::string dir = exported("nonorm", testing::small(Naming::kHf));
  drop_from_index(dir, {"model.layers.1.post_attention_layernorm.weight"});
  EXPECT_TRUE(mentions(load_error(dir),
                       {"layer 1 is missing", "'model.layers.1.post_attention_layernorm.weight'"}));
}

TEST(CheckpointErrors, LayerCountsDiffer) {
  ExportOptions o = testing::small();
  o.layers = 5;
  const std::string dir = exported("counts", o);
  drop_from_index(dir, {"layers.4.hc_ffn_fn", "layers.4.hc_ffn_base", "layers.4.hc_ffn_scale"});
  EXPECT_TRUE(mentions(load_error(dir), {kIndex, "inconsistent layers",
                                         "hc_attn_fn exists for 5 "
                                         "layers (0-4)",
                                         "hc_ffn_fn for 4 (0-3)", "'layers.4.hc_ffn_fn'"}));
}

TEST(CheckpointErrors, MixedOrNoNaming) {
  const std::string dir = exported("mixednaming");
  edit_index(dir, [](json& j) { j["weight_map"]["model.layers.0.attn_hc.fn"] = kShard1; });
  EXPECT_TRUE(mentions(load_error(dir), {kIndex, "mixes official", "model.layers.0.attn_hc.fn"}));
  edit_index(dir, [](json& j) {
    json only = json::object();
    only["layers.0.ffn.experts.0.w1.weight"] = kShard1;
    j["weight_map"] = only;
  });
  EXPECT_TRUE(mentions(load_error(dir), {kIndex, "no mHC tensors", "layers.0.hc_attn_fn",
                                         "model.layers.0.attn_hc.fn", "experts"}));
}

TEST(CheckpointErrors, TruncatedShards) {
  const std::string dir = exported("truncated");
  const fs::path s2 = fs::path(dir) / kShard2;
  const auto full = fs::file_size(s2);
  fs::resize_file(s2, full - 100);
  EXPECT_TRUE(mentions(load_error(dir), {kShard2, "beyond the end of the file"}));
  fs::resize_file(s2, 100);  // inside the header
  EXPECT_TRUE(mentions(load_error(dir), {kShard2, "header length"}));
  fs::resize_file(s2, 5);
  EXPECT_TRUE(mentions(load_error(dir), {kShard2, "shorter than the 8-byte header"}));
  fs::resize_file(s2, 0);
  EXPECT_TRUE(mentions(load_error(dir), {kShard2, "0 bytes"}));
}

TEST(CheckpointErrors, NonFiniteValues) {
  const std::string dir = exported("nan");
  testing::rewrite_shard(fs::path(dir) / kShard1,
                         [](st::Writer& w, const st::TensorInfo& t, std::span<const std::byte> b) {
                           if (t.name != "layers.1.hc_attn_base") return false;
                           std::vector<float> v(b.size() / 4);
                           std::memcpy(v.data(), b.data(), b.size());
                           v[5] = std::numeric_limits<float>::quiet_NaN();
                           w.add_f32(t.name, t.shape, v);
                           return true;
                         });
  EXPECT_TRUE(mentions(load_error(dir),
                       {kShard1, "'layers.1.hc_attn_base'", "non-finite", "flat element 5"}));
}

TEST(CheckpointErrors, BadConfigJson) {
  const std::string dir = exported("badconfig");
  const fs::path cfg = fs::path(dir) / "config.json";
  auto error_with = [&](const std::string& text) {
    testing::put(cfg, text);
    return load_error(dir);
  };
  EXPECT_TRUE(mentions(error_with("{"), {"config.json", "not valid JSON"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_eps": "1e-6"})"), {"config.json", "'hc_eps'"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_eps": -1})"),
                       {"config.json", "'hc_eps'", "[1.17549e-38, 1e+30]"}));
  // Finite doubles the fp32 arithmetic cannot hold (was: the stack check failed with no word of
  // the epsilon), and a zero Sinkhorn epsilon.
  EXPECT_TRUE(
      mentions(error_with(R"({"rms_norm_eps": 1e308})"),
               {"config.json", "'rms_norm_eps'", "1e+308", "[1.17549e-38, 1e+30]", "eps_n"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_eps": 0})"), {"'hc_eps'", "smallest normal fp32"}));
  EXPECT_TRUE(mentions(error_with(R"({"rms_norm_eps": 1e-45})"), {"'rms_norm_eps'"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_sinkhorn_iters": 2.5})"),
                       {"config.json", "'hc_sinkhorn_iters'", "integer"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_sinkhorn_iters": 0})"), {"'hc_sinkhorn_iters'"}));
  EXPECT_TRUE(mentions(error_with(R"({"rms_norm_eps": null})"), {"'rms_norm_eps'"}));
  EXPECT_TRUE(mentions(error_with(R"({"rms_norm_eps": 1e-6, "rms_norm_eps": 1e-5})"),
                       {"duplicate key 'rms_norm_eps'"}));
  EXPECT_TRUE(mentions(error_with(R"({"hidden_size": 128})"),
                       {"config.json", "'hidden_size' is 128", "C=64", "layers.0.hc_attn_fn"}));
  EXPECT_TRUE(mentions(error_with(R"({"num_hidden_layers": 4})"),
                       {"'num_hidden_layers' is 4", "layers=3"}));
  EXPECT_TRUE(mentions(error_with(R"({"hc_mult": 2})"), {"'hc_mult' is 2", "n=4"}));
}

TEST(CheckpointErrors, PresetMismatch) {
  const std::string dir = exported("preset");
  LoadOptions opt;
  opt.expect = preset("dsv41-flash");
  opt.expect_name = "dsv41-flash";
  EXPECT_TRUE(mentions(load_error(dir, opt), {dir, "does not match preset dsv41-flash",
                                              "C=64 (preset: 5120)", "layers=3 (preset: 40)"}));
  const std::string e = load_error(dir, opt);
  EXPECT_EQ(e.find("n=4"), std::string::npos) << "n matches and is not listed: " << e;
}

}  // namespace
}  // namespace mhc::ckpt
