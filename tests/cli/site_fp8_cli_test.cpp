// `mhc site --fp8`: layer_input also as FP8 (docs/fp8.md), the reference quantiser's codes and
// scales of the file's bf16 layer_input, in each scale layout; a bad layout and an FP8 shape the
// kernels do not take are refused.
#include <cstring>

#include "cli_util.hpp"
#include "io/site_test_util.hpp"
#include "mhc/cpu/fp8.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::cli {
namespace {

using st::testing::random_site;
using st::testing::RandomSite;
using testing::quote;
using testing::run_mhc;
using testing::scratch;

TEST(SiteFp8Cli, WritesTheQuantisedLayerInputInEveryLayout) {
  const RandomSite s = random_site(4, 512, 5, 20261207);
  const std::string in = scratch("fp8_in.safetensors"), out = scratch("fp8_out.safetensors");
  st::site_inputs_writer(s.params, s.weights.view(), s.inputs(), false).write(in);
  for (const char* layout : {"row", "column", "row-ue8m0", "column-ue8m0"}) {
    SCOPED_TRACE(layout);
    const auto r = run_mhc("site --backend cpu --inputs " + quote(in) + " --out " + quote(out) +
                           " --fp8 " + layout);
    ASSERT_EQ(r.status, 0) << r.err;
    const st::File f = st::File::open(out);
    const SiteOutputs o = st::read_site_outputs(f, s.params, s.tokens);
    const Fp8Format format{128, std::strncmp(layout, "column", 6) == 0,
                           std::strstr(layout, "ue8m0") != nullptr};
    std::vector<uint8_t> codes(size_t(s.tokens * 512));
    std::vector<float> scales(size_t(fp8_scale_floats(s.tokens, 512, format)), 0.f);
    fp8_quantize_rows(o.layer_input.data(), s.tokens, 512, format, codes.data(), scales.data());
    const st::TensorInfo* c = f.find("layer_input_fp8");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->dtype, st::Dtype::F8_E4M3);
    EXPECT_EQ(c->shape, (st::Shape{s.tokens, 512}));
    const auto bytes = f.bytes(*c);
    ASSERT_EQ(bytes.size(), codes.size());
    EXPECT_EQ(std::memcmp(bytes.data(), codes.data(), codes.size()), 0);
    const st::Shape shape = format.column_major_scales ? st::Shape{4, 8} : st::Shape{s.tokens, 4};
    const std::vector<float> got = f.read_f32("layer_input_scales", {shape[0], shape[1]});
    EXPECT_EQ(got, scales);
    EXPECT_EQ(f.metadata().at("fp8"), layout);
  }
}

TEST(SiteFp8Cli, RefusesABadLayoutAndAShapeOutsideTheGroups) {
  const std::string in = scratch("fp8_bad_in.safetensors"), out = scratch("fp8_bad.safetensors");
  const RandomSite s = random_site(4, 64, 3, 20261208);  // C = 64: not a multiple of 128
  st::site_inputs_writer(s.params, s.weights.view(), s.inputs(), false).write(in);
  const std::string base = "site --backend cpu --inputs " + quote(in) + " --out " + quote(out);
  const auto layout = run_mhc(base + " --fp8 diagonal");
  EXPECT_EQ(layout.status, 2);
  EXPECT_NE(layout.err.find("--fp8"), std::string::npos) << layout.err;
  const auto shape = run_mhc(base + " --fp8 row");
  EXPECT_NE(shape.status, 0);
  EXPECT_NE(shape.err.find("not a multiple of group_size=128"), std::string::npos) << shape.err;
}

}  // namespace
}  // namespace mhc::cli
