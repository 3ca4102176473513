// Tensor names of both namings, and the index / config.json parsers on their own.
#include "checkpoint_test_util.hpp"

namespace mhc::ckpt {
namespace {

using testing::mentions;

std::string index_error(const std::string& text) {
  try {
    parse_index(text, "idx.json");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an mhc::Error for " << text;
  return {};
}

TEST(CheckpointNames, BothNamings) {
  EXPECT_EQ(tensor_name(Naming::kOfficial, 3, Slot::kAttnFn), "layers.3.hc_attn_fn");
  EXPECT_EQ(tensor_name(Naming::kOfficial, 0, Slot::kFfnScale), "layers.0.hc_ffn_scale");
  EXPECT_EQ(tensor_name(Naming::kOfficial, 7, Slot::kAttnNorm), "layers.7.attn_norm.weight");
  EXPECT_EQ(tensor_name(Naming::kOfficial, 7, Slot::kFfnNorm), "layers.7.ffn_norm.weight");
  EXPECT_EQ(tensor_name(Naming::kHf, 3, Slot::kAttnFn), "model.layers.3.attn_hc.fn");
  EXPECT_EQ(tensor_name(Naming::kHf, 0, Slot::kFfnBase), "model.layers.0.ffn_hc.base");
  EXPECT_EQ(tensor_name(Naming::kHf, 2, Slot::kAttnNorm), "model.layers.2.input_layernorm.weight");
  EXPECT_EQ(tensor_name(Naming::kHf, 2, Slot::kFfnNorm),
            "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(final_norm_name(Naming::kOfficial), "norm.weight");
  EXPECT_EQ(final_norm_name(Naming::kHf), "model.norm.weight");
  EXPECT_EQ(parse_naming("hf"), Naming::kHf);
  EXPECT_EQ(parse_naming("official"), Naming::kOfficial);
  EXPECT_FALSE(parse_naming("HF"));
}

TEST(CheckpointNames, MatchesOnlyLayerTensors) {
  for (Naming n : {Naming::kOfficial, Naming::kHf}) {
    for (int s = 0; s < kSlots; ++s) {
      const auto m = match_layer_tensor(n, tensor_name(n, 42, Slot(s)));
      ASSERT_TRUE(m);
      EXPECT_EQ(m->layer, 42);
      EXPECT_EQ(m->slot, Slot(s));
    }
  }
  for (const char* name :
       {"layers.01.hc_attn_fn", "layers.x.hc_attn_fn", "layers.-1.hc_attn_fn",
        "layers.1234567.hc_attn_fn", "layers.0.hc_attn_fn.weight", "mtp.0.hc_attn_fn",
        "layers.0.attn_hc.fn", "model.layers.0.hc_attn_fn", "layers.0.ffn.experts.0.w1.weight",
        "layers..hc_attn_fn", "layers.0", "norm.weight", "hc_head_fn"}) {
    EXPECT_FALSE(match_layer_tensor(Naming::kOfficial, name)) << name;
    EXPECT_FALSE(match_layer_tensor(Naming::kHf, name)) << name;
  }
  EXPECT_FALSE(match_layer_tensor(Naming::kHf, "model.layers.0.attn_hc.fn.weight"));
  EXPECT_FALSE(match_layer_tensor(Naming::kHf, "model.mtp.0.attn_hc.fn"));
}

TEST(CheckpointIndex, Parses) {
  const Index i = parse_index(
      R"({"metadata": {"total_size": 1234, "format": "pt"}, "extra": [1],
          "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "sub/dir/x.safetensors",
                         "c": "./x.safetensors", "d": "a..b.safetensors"}})",
      "idx");
  EXPECT_EQ(i.total_size, 1234u);
  EXPECT_EQ(i.weight_map.size(), 4u);
  EXPECT_EQ(i.weight_map.at("b"), "sub/dir/x.safetensors");
  EXPECT_FALSE(parse_index(R"({"weight_map": {}})", "idx").total_size);
}

TEST(CheckpointIndex, Rejects) {
  EXPECT_TRUE(mentions(index_error(""), {"idx.json", "not valid JSON"}));
  EXPECT_TRUE(mentions(index_error("{} x"), {"idx.json", "not valid JSON"}));
  EXPECT_TRUE(mentions(index_error("\"s\""), {"not a JSON object"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": []})"), {"weight_map is []"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"": "x"}})"), {"empty tensor name"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": ""}})"), {"empty shard"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": "x/../../y"}})"), {"'..'"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": ".."}})"), {"'..'"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": "x\u0000y"}})"), {"NUL"}));
  EXPECT_TRUE(mentions(index_error(R"({"metadata": 3, "weight_map": {}})"), {"metadata is 3"}));
  EXPECT_TRUE(mentions(index_error(R"({"metadata": {"total_size": 1.5}, "weight_map": {}})"),
                       {"total_size"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": "x"}, "weight_map": {}})"),
                       {"duplicate key 'weight_map'"}));
  EXPECT_TRUE(mentions(index_error(R"({"weight_map": {"a": 1e400}})"), {"idx.json"}));
  EXPECT_TRUE(mentions(index_error("{\"weight_map\": {\"\xff\": \"x\"}}"), {"idx.json"}));
}

TEST(CheckpointConfig, OptionalStrictKeys) {
  const ConfigValues none = parse_config("{}", "c");
  EXPECT_FALSE(none.hc_eps || none.rms_norm_eps || none.hc_sinkhorn_iters || none.hidden_size);
  const ConfigValues c = parse_config(
      R"({"hc_eps": 1e30, "rms_norm_eps": 1e-20, "hc_sinkhorn_iters": 1000, "hidden_size": 4096,
          "hc_mult": 4, "num_hidden_layers": 43, "quantization_config": {"fmt": "e4m3"}})",
      "c");
  EXPECT_EQ(c.hc_eps, 1e30);  // the largest in range (docs/limits.md)
  EXPECT_EQ(c.rms_norm_eps, 1e-20);
  EXPECT_EQ(c.hc_sinkhorn_iters, 1000);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 43);
  for (const char* bad : {R"({"hc_sinkhorn_iters": 1001})", R"({"hidden_size": 2147483648})",
                          R"({"hc_mult": -4})", R"({"hc_mult": true})", R"({"hc_eps": [1]})",
                          R"({"num_hidden_layers": 18446744073709551615})", R"({"hc_eps": 0})",
                          R"({"hc_eps": 1.1e30})", R"({"rms_norm_eps": 1e-39})"}) {
    EXPECT_THROW(parse_config(bad, "c"), Error) << bad;
  }
}

}  // namespace
}  // namespace mhc::ckpt
