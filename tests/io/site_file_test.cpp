// read_site_inputs: the `mhc site` input layout, checked tensor by tensor.
#include <cstring>

#include "mhc/core/params.hpp"
#include "site_test_util.hpp"
#include "st_test_util.hpp"

namespace mhc::st {
namespace {

using testing::mentions;
using testing::random_site;
using testing::RandomSite;

bool same_bits(const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 2) == 0;
}

std::string read_error(const Writer& w, const std::string& name) {
  const std::string path = testing::temp_path(name + ".safetensors");
  w.write(path);
  try {
    read_site_inputs(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

class SiteFile : public ::testing::Test {
 protected:
  RandomSite s = random_site(2, 16, 3, 7);
  Writer writer() const { return site_inputs_writer(s.params, s.weights.view(), s.inputs()); }
};

TEST_F(SiteFile, RoundTrip) {
  s.params.eps_h = 2.5e-6;
  s.params.sinkhorn_iters = 7;
  s.params.post_mult = 1.75;
  s.params.eps_n = 1e-6;
  const std::string path = testing::temp_path("site_roundtrip.safetensors");
  writer().write(path);
  const SiteFileInputs r = read_site_inputs(path);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.hidden, 16);
  EXPECT_EQ(r.params.eps_h, 2.5e-6);
  EXPECT_EQ(r.params.eps_n, 1e-6);
  EXPECT_EQ(r.params.sinkhorn_iters, 7);
  EXPECT_EQ(r.params.post_mult, 1.75);
  EXPECT_TRUE(same_bits(r.x, s.x));
  EXPECT_TRUE(same_bits(r.sublayer_out, s.sublayer_out));
  EXPECT_EQ(r.pre_mix, s.pre_mix);
  EXPECT_EQ(r.weights.hc_fn, s.weights.hc_fn);
  EXPECT_EQ(r.weights.hc_base, s.weights.hc_base);
  EXPECT_EQ(r.weights.hc_scale, s.weights.hc_scale);
  EXPECT_EQ(r.weights.norm_weight, s.weights.norm_weight);
}

TEST_F(SiteFile, DefaultsWithoutMetadataAndBf16NormWeight) {
  Writer w = site_inputs_writer(s.params, s.weights.view(), s.inputs(), /*norm_weight_bf16=*/true);
  for (auto key : kSiteParamKeys) w.erase_metadata(key);
  w.set_metadata("format", "pt");
  const std::string path = testing::temp_path("site_defaults.safetensors");
  w.write(path);
  const SiteFileInputs r = read_site_inputs(path);
  const MhcParams d = preset(kDefaultPreset);
  EXPECT_EQ(r.params.eps_h, d.eps_h);
  EXPECT_EQ(r.params.eps_n, d.eps_n);
  EXPECT_EQ(r.params.sinkhorn_iters, d.sinkhorn_iters);
  EXPECT_EQ(r.params.post_mult, d.post_mult);
  for (size_t i = 0; i < r.weights.norm_weight.size(); ++i) {
    EXPECT_EQ(r.weights.norm_weight[i], bf16_to_float(float_to_bf16(s.weights.norm_weight[i])));
  }
}

TEST_F(SiteFile, ZeroTokens) {
  s = random_site(4, 32, 0, 8);
  const std::string path = testing::temp_path("site_m0.safetensors");
  writer().write(path);
  const SiteFileInputs r = read_site_inputs(path);
  EXPECT_EQ(r.tokens, 0);
  EXPECT_TRUE(r.x.empty());
  EXPECT_EQ(r.weights.hc_fn.size(), size_t(24 * 128));
}

TEST_F(SiteFile, BadMetadataNamesTheKey) {
  const std::pair<const char*, const char*> bad[] = {{"eps_h", "abc"},
                                                     {"eps_h", "1e-6x"},
                                                     {"eps_n", ""},
                                                     {"post_mult", "nan"},
                                                     {"eps_n", " 1e-6"},
                                                     {"sinkhorn_iters", "20.5"},
                                                     {"sinkhorn_iters", "99999999999"},
                                                     {"post_mult", "inf"},
                                                     // Hangs at 2^31 iterations; capped as in
                                                     // config.json.
                                                     {"sinkhorn_iters", "2147483647"},
                                                     {"sinkhorn_iters", "1001"},
                                                     {"sinkhorn_iters", "0"},
                                                     {"eps_h", "-1"}};
  for (const auto& [key, value] : bad) {
    Writer w = writer();
    w.set_metadata(key, value);
    EXPECT_TRUE(mentions(read_error(w, "bad_meta"),
                         {"bad_meta.safetensors", "metadata '" + std::string(key) + "'",
                          "\"" + std::string(value) + "\""}));
  }
  Writer w = writer();
  w.set_metadata("sinkhorn_iters", "0");
  // Blamed on the metadata, not on x's shape (validate() used to report it as "tensor 'x'").
  const std::string zero = read_error(w, "zero_iters");
  EXPECT_TRUE(mentions(zero, {"metadata 'sinkhorn_iters'", "[1, 1000]"}));
  EXPECT_EQ(zero.find("tensor 'x'"), std::string::npos) << zero;
  w.set_metadata("sinkhorn_iters", "1000");
  EXPECT_EQ(read_error(w, "max_iters"), "no error");
  w.set_metadata("sinkhorn_iters", "20");
  w.set_metadata("eps-h", "1e-6");
  EXPECT_TRUE(mentions(read_error(w, "typo_key"), {"unknown metadata key 'eps-h'", "eps_h"}));
}

TEST_F(SiteFile, MissingTensorNamesIt) {
  for (auto name :
       {"x", "pre_mix", "hc_fn", "hc_base", "hc_scale", "norm_weight", "sublayer_out"}) {
    Writer w = writer();
    w.remove(name);
    EXPECT_TRUE(
        mentions(read_error(w, "missing"), {"no tensor named '" + std::string(name) + "'"}));
  }
}

TEST_F(SiteFile, UnexpectedTensor) {
  Writer w = writer();
  const float v[1] = {0};
  w.add_f32("pre_mx", {1}, v);
  EXPECT_TRUE(mentions(read_error(w, "extra"), {"unexpected tensor 'pre_mx'", "pre_mix"}));
}

TEST_F(SiteFile, WrongShapesNameTheTensorAndBothShapes) {
  struct Case {
    const char* name;
    Shape shape;
    const char* expected;
  };
  const Case cases[] = {
      {"pre_mix", {3, 3}, "expected [M=3, n=2]"},
      {"pre_mix", {2, 2}, "expected [M=3, n=2]"},
      {"hc_fn", {8, 16}, "expected [NMIX=8, K=32]"},
      {"hc_base", {9}, "expected [NMIX=8]"},
      {"hc_scale", {2}, "expected [3]"},
      {"norm_weight", {1, 16}, "expected [C=16]"},
      {"sublayer_out", {3, 8}, "expected [M=3, C=16]"},
  };
  for (const auto& c : cases) {
    Writer w = writer();
    w.remove(c.name);
    int64_t numel = 1;
    for (int64_t d : c.shape) numel *= d;
    w.add_f32(c.name, c.shape, std::vector<float>(size_t(numel), 0.5f));
    if (std::string(c.name) == "sublayer_out") {
      w.remove(c.name);
      w.add_bf16(c.name, c.shape, std::vector<Bf16>(size_t(numel)));
    }
    EXPECT_TRUE(mentions(read_error(w, "shape"), {"tensor '" + std::string(c.name) + "'",
                                                  format_shape(c.shape), c.expected}));
  }
}

TEST_F(SiteFile, WrongXShapeOrDtype) {
  Writer w = writer();
  w.remove("x");
  w.add_bf16("x", {3, 32}, std::vector<Bf16>(96));
  EXPECT_TRUE(mentions(read_error(w, "x_rank"), {"tensor 'x'", "[3, 32]", "[M, n, C]"}));
  w.remove("x");
  w.add_f32("x", {3, 2, 16}, std::vector<float>(96));
  EXPECT_TRUE(mentions(read_error(w, "x_dtype"), {"tensor 'x'", "dtype F32, expected BF16"}));
  w.remove("x");
  w.add_bf16("x", {3, 2, 12}, std::vector<Bf16>(72));
  EXPECT_TRUE(mentions(read_error(w, "x_c12"), {"tensor 'x'", "[3, 2, 12]", "multiple of 8"}));
  w.remove("x");
  w.add_bf16("x", {3, 9, 16}, std::vector<Bf16>(3 * 9 * 16));
  EXPECT_TRUE(mentions(read_error(w, "x_n9"), {"tensor 'x'", "n=9"}));
}

TEST_F(SiteFile, WrongDtypes) {
  Writer w = writer();
  w.remove("hc_fn");
  w.add_bf16("hc_fn", {8, 32}, std::vector<Bf16>(256));
  EXPECT_TRUE(mentions(read_error(w, "fn_dtype"), {"tensor 'hc_fn'", "BF16, expected F32"}));
  w = writer();
  w.remove("norm_weight");
  w.add("norm_weight", Dtype::F16, {16}, std::vector<std::byte>(32));
  EXPECT_TRUE(mentions(read_error(w, "nw_dtype"), {"'norm_weight'", "F16, expected F32 or BF16"}));
}

TEST_F(SiteFile, NonFiniteValuesAreRejected) {
  s.weights.hc_fn[5] = std::nanf("");
  EXPECT_TRUE(mentions(read_error(writer(), "nan"), {"tensor 'hc_fn'", "non-finite", "element 5"}));
  s = random_site(2, 16, 3, 7);
  s.x[40] = float_to_bf16(INFINITY);
  EXPECT_TRUE(mentions(read_error(writer(), "inf"), {"tensor 'x'", "inf", "element 40"}));
}

TEST_F(SiteFile, OutputsRoundTrip) {
  SiteOutputs out(s.params, s.tokens);
  for (size_t i = 0; i < out.comb.size(); ++i) out.comb[i] = float(i);
  out.x_next[3] = float_to_bf16(1.5f);
  const File f = File::from_bytes(
      site_outputs_writer(s.params, s.tokens, out, {{"backend", "cpu"}}).serialize());
  EXPECT_EQ(f.metadata().at("backend"), "cpu");
  const SiteOutputs r = read_site_outputs(f, s.params, s.tokens);
  EXPECT_EQ(r.comb, out.comb);
  EXPECT_TRUE(same_bits(r.x_next, out.x_next));
  EXPECT_THROW(read_site_outputs(f, s.params, s.tokens + 1), Error);
}

}  // namespace
}  // namespace mhc::st
