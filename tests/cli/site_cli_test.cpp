// `mhc site` end to end: random inputs written to a file, the binary run on them, the output file
// compared with the float64 reference; and the errors a user can make, each with exit status 2.
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "io/site_test_util.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::cli {
namespace {

using st::testing::random_site;
using st::testing::RandomSite;
using testing::quote;
using testing::run_mhc;
using testing::scratch;

std::string site_args(const std::string& in, const std::string& out,
                      const std::string& extra = "--backend cpu") {
  return "site --inputs " + quote(in) + " --out " + quote(out) + " " + extra;
}

void expect_matches_reference(const RandomSite& s, const std::string& out_path,
                              bool norm_weight_bf16 = false) {
  SiteWeights w = s.weights;
  if (norm_weight_bf16) {
    for (float& v : w.norm_weight) v = bf16_to_float(float_to_bf16(v));
  }
  const ref::SiteResult r = ref::run_site(s.params, w.view(), s.inputs());
  const st::File f = st::File::open(out_path);
  const SiteOutputs o = st::read_site_outputs(f, s.params, s.tokens);
  const Tolerances tol = kFp32Tolerances;  // the CPU backend computes in fp32
  auto check = [](const char* name, ErrorStats e, double t) {
    EXPECT_TRUE(e.passes(t)) << name << ": " << e.describe() << " (tolerance " << t << ")";
  };
  const int64_t m = s.tokens, n = s.params.n;
  check("layer_input", compare(o.layer_input.data(), r.layer_input.data(), m * s.params.hidden),
        tol.activations);
  check("pre", compare(o.pre.data(), r.pre.data(), m * n), tol.coefficients);
  check("post", compare(o.post.data(), r.post.data(), m * n), tol.coefficients);
  check("comb", compare(o.comb.data(), r.comb.data(), m * n * n), tol.coefficients);
  check("x_next", compare(o.x_next.data(), r.x_next.data(), m * s.params.k()), tol.activations);
}

void write_inputs(const RandomSite& s, const std::string& path, bool norm_weight_bf16 = false) {
  st::site_inputs_writer(s.params, s.weights.view(), s.inputs(), norm_weight_bf16).write(path);
}

TEST(SiteCli, DeepSeekV41ShapeMatchesReference) {
  const RandomSite s = random_site(4, 5120, 6, 20260101);
  const std::string in = scratch("v41_in.safetensors"), out = scratch("v41_out.safetensors");
  write_inputs(s, in);
  const auto r = run_mhc(site_args(in, out));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_matches_reference(s, out);
  for (const char* fragment : {"M=6 n=4 C=5120", "backend   cpu", "v41_out.safetensors"}) {
    EXPECT_NE(r.out.find(fragment), std::string::npos) << fragment << " not in:\n" << r.out;
  }
  const st::File f = st::File::open(out);
  EXPECT_EQ(f.metadata().at("backend"), "cpu");
  EXPECT_EQ(f.metadata().at("sinkhorn_iters"), "20");
  EXPECT_EQ(f.metadata().at("eps_n"), "1e-20");
  EXPECT_EQ(f.metadata().at("kernel_config_hash").size(), 18u);
}

TEST(SiteCli, SmallShapesNonDefaultParamsAndBf16NormWeight) {
  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(n);
    RandomSite s = random_site(n, 64, 17, 1000 + n);
    s.params.sinkhorn_iters = 7;
    s.params.eps_n = 1e-6;
    s.params.eps_h = 1e-4;
    s.params.post_mult = 1.5;
    const std::string in = scratch("small_in.safetensors"), out = scratch("small_out.safetensors");
    write_inputs(s, in, /*norm_weight_bf16=*/true);
    const auto r = run_mhc(site_args(in, out));
    ASSERT_EQ(r.status, 0) << r.err;
    expect_matches_reference(s, out, /*norm_weight_bf16=*/true);
    EXPECT_EQ(st::File::open(out).metadata().at("post_mult"), "1.5");
  }
}

TEST(SiteCli, ZeroTokens) {
  const RandomSite s = random_site(4, 128, 0, 5);
  const std::string in = scratch("m0_in.safetensors"), out = scratch("m0_out.safetensors");
  write_inputs(s, in);
  const auto r = run_mhc(site_args(in, out, ""));  // default backend: auto
  ASSERT_EQ(r.status, 0) << r.err;
  const st::File f = st::File::open(out);
  EXPECT_EQ(f.get("x_next").shape, (st::Shape{0, 4, 128}));
  EXPECT_EQ(f.get("comb").shape, (st::Shape{0, 4, 4}));
  EXPECT_EQ(f.get("layer_input").shape, (st::Shape{0, 128}));
  EXPECT_NE(r.out.find("M=0"), std::string::npos) << r.out;
}

TEST(SiteCli, RunToRunBitwiseIdentical) {
  const RandomSite s = random_site(4, 256, 9, 77);
  const std::string in = scratch("det_in.safetensors");
  const std::string a = scratch("det_a.safetensors"), b = scratch("det_b.safetensors");
  write_inputs(s, in);
  ASSERT_EQ(run_mhc(site_args(in, a)).status, 0);
  ASSERT_EQ(run_mhc(site_args(in, b)).status, 0);
  const st::File fa = st::File::open(a), fb = st::File::open(b);
  for (const auto& t : fa.tensors()) {
    auto x = fa.bytes(t), y = fb.bytes(fb.get(t.name));
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << t.name;
  }
}

TEST(SiteCli, JsonReportOnStdoutOrInAFile) {
  const RandomSite s = random_site(2, 64, 3, 77);
  const std::string in = scratch("json_in.safetensors"), out = scratch("json_out.safetensors");
  write_inputs(s, in);
  const auto bare = run_mhc(site_args(in, out, "--backend cpu --json"));
  ASSERT_EQ(bare.status, 0) << bare.err;
  const auto doc = nlohmann::json::parse(bare.out);  // stdout is the JSON object alone
  EXPECT_EQ(doc.at("tokens"), 3);
  EXPECT_EQ(doc.at("params").at("hidden"), 64);
  EXPECT_EQ(doc.at("backend").at("name"), "cpu");
  expect_matches_reference(s, out);
  const std::string report = scratch("site_report.json");
  const auto file = run_mhc(site_args(in, out, "--backend cpu --json " + quote(report)));
  ASSERT_EQ(file.status, 0) << file.err;
  EXPECT_NE(file.out.find("M=3 n=2 C=64"), std::string::npos) << file.out;
  EXPECT_EQ(nlohmann::json::parse(testing::slurp(report)).at("output"), out);
}

// The input file with one edit applied, then `mhc site` on it: must exit 2 naming the problem.
class SiteCliErrors : public ::testing::Test {
 protected:
  RandomSite s = random_site(2, 32, 3, 4242);
  st::Writer writer() const {
    return st::site_inputs_writer(s.params, s.weights.view(), s.inputs());
  }
  void expect_error(const st::Writer& w, std::initializer_list<std::string> fragments,
                    const std::string& extra = "--backend cpu") {
    const std::string in = scratch("err_in.safetensors");
    w.write(in);
    expect_error_on(in, fragments, extra);
  }
  void expect_error_on(const std::string& in, std::initializer_list<std::string> fragments,
                       const std::string& extra = "--backend cpu") {
    const std::string out = scratch("err_out.safetensors");
    std::filesystem::remove(out);
    const auto r = run_mhc(site_args(in, out, extra));
    EXPECT_EQ(r.status, 2) << r.err;
    for (const auto& f : fragments) {
      EXPECT_NE(r.err.find(f), std::string::npos) << "\"" << f << "\" not in: " << r.err;
    }
    EXPECT_FALSE(std::filesystem::exists(out)) << "an output was written despite the error";
  }
};

TEST_F(SiteCliErrors, MissingTensor) {
  st::Writer w = writer();
  w.remove("hc_scale");
  expect_error(w, {"err_in.safetensors", "no tensor named 'hc_scale'"});
}

TEST_F(SiteCliErrors, WrongShape) {
  st::Writer w = writer();
  w.remove("hc_base");
  w.add_f32("hc_base", {7}, std::vector<float>(7));
  expect_error(w, {"tensor 'hc_base'", "[7]", "expected [NMIX=8]"});
  w.remove("hc_base");
  w.add_f32("hc_base", {8}, std::vector<float>(8));
  w.remove("sublayer_out");
  w.add_bf16("sublayer_out", {2, 32}, std::vector<Bf16>(64));
  expect_error(w, {"tensor 'sublayer_out'", "[2, 32]", "expected [M=3, C=32]"});
}

TEST_F(SiteCliErrors, WrongDtype) {
  st::Writer w = writer();
  w.remove("pre_mix");
  w.add_bf16("pre_mix", {3, 2}, std::vector<Bf16>(6));
  expect_error(w, {"tensor 'pre_mix'", "dtype BF16, expected F32"});
}

TEST_F(SiteCliErrors, BadMetadata) {
  st::Writer w = writer();
  w.set_metadata("eps_n", "1e-20f");
  expect_error(w, {"metadata 'eps_n'", "\"1e-20f\""});
  w.set_metadata("eps_n", "1e-20");
  w.set_metadata("sinkhorn_iters", "-3");
  expect_error(w, {"metadata 'sinkhorn_iters'", "\"-3\"", "[1, 1000]"});
}

TEST_F(SiteCliErrors, MissingFile) {
  expect_error_on(scratch("does_not_exist.safetensors"),
                  {"does_not_exist.safetensors", "cannot open"});
}

TEST_F(SiteCliErrors, CorruptFiles) {
  const std::string in = scratch("corrupt_in.safetensors");
  auto image = writer().serialize();
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size() - 5));
  expect_error_on(in, {"corrupt_in.safetensors", "beyond the end of the file"});
  std::ofstream(in, std::ios::binary | std::ios::trunc) << "this is not a safetensors file";
  expect_error_on(in, {"corrupt_in.safetensors", "header length"});
  image[8] = std::byte(0x23);  // the opening brace of the JSON header becomes "#"
  std::ofstream(in, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
  expect_error_on(in, {"corrupt_in.safetensors", "not valid JSON", "file offset 8"});
}

TEST_F(SiteCliErrors, BadBackendOrConfig) {
  const st::Writer w = writer();
  expect_error(w, {"--backend: 'gpu' is not one of auto|cpu|cuda"}, "--backend gpu");
  expect_error(w, {"foo"}, "--backend cpu --kernel-config '{\"foo\": 1}'");
}

TEST_F(SiteCliErrors, UnwritableOutput) {
  const std::string in = scratch("ok_in.safetensors");
  writer().write(in);
  const auto r = run_mhc(site_args(in, "/nonexistent-dir/out.safetensors"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/nonexistent-dir/out.safetensors"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mhc::cli
