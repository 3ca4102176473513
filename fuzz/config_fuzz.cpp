// libFuzzer target: the small JSON and metadata inputs of `mhc site` and `mhc run`:
//  - the input as --kernel-config text (KernelConfig::parse);
//  - the input as the __metadata__ value of an otherwise valid site-input file, read by
//    read_site_inputs (the safetensors header checks, then the metadata's own parse and ranges);
//  - the input through json_input::check directly.
//
// Contract checked: bad input is rejected only with mhc::Error, nothing recurses past the depth
// limit, and an accepted site file's parameters are in range (sinkhorn_iters in [1, 1000], eps_h,
// eps_n and post_mult in mhc::param_ranges, the ranges their fp32 arithmetic holds): a value that
// would hang or poison the run is never accepted, and validate() agrees.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/limits.hpp"
#include "mhc/io/safetensors.hpp"

namespace {

using namespace mhc;

void require(bool ok) {
  if (!ok) std::abort();
}

// A valid site-input file (n=1, C=8, M=1) split around its header: the header text after its
// opening '{' and the data section. The metadata is spliced in front.
struct SiteTemplate {
  std::string header_rest;
  std::vector<std::byte> data;
};

SiteTemplate make_template() {
  MhcParams p = preset(kDefaultPreset);
  p.n = 1;
  p.hidden = 8;
  const std::vector<Bf16> x(8, float_to_bf16(0.5f)), sub(8, float_to_bf16(0.25f));
  const std::vector<float> pre_mix(1, 1.0f), fn(3 * 8, 0.01f), base(3, 0.1f), scale(3, 1.0f),
      norm(8, 1.0f);
  SiteWeightsView w{fn.data(), base.data(), scale.data(), norm.data()};
  SiteInputsView in{1, x.data(), pre_mix.data(), sub.data()};
  st::Writer wr = st::site_inputs_writer(p, w, in);
  for (auto key : st::kSiteParamKeys) wr.erase_metadata(key);
  const std::vector<std::byte> image = wr.serialize();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<uint64_t>(image[size_t(i)]);
  SiteTemplate t;
  t.header_rest.assign(reinterpret_cast<const char*>(image.data()) + 9, size_t(n) - 1);
  t.data.assign(image.begin() + std::ptrdiff_t(8 + n), image.end());
  return t;
}

void fuzz_site_metadata(const std::string& metadata) {
  static const SiteTemplate t = make_template();
  const std::string header = "{\"__metadata__\":" + metadata + "," + t.header_rest;
  std::vector<std::byte> file(8 + header.size() + t.data.size());
  for (int i = 0; i < 8; ++i) file[size_t(i)] = std::byte((header.size() >> (8 * i)) & 0xff);
  std::memcpy(file.data() + 8, header.data(), header.size());
  std::memcpy(file.data() + 8 + header.size(), t.data.data(), t.data.size());
  std::optional<st::SiteFileInputs> s;
  try {
    s = st::read_site_inputs(st::File::from_bytes(std::move(file)));
  } catch (const Error&) {
    return;  // refused: fine
  }
  const MhcParams& p = s->params;
  require(p.sinkhorn_iters >= 1 && p.sinkhorn_iters <= io::kMaxSinkhornIters);
  require(param_problem("eps_h", p.eps_h).empty() && param_problem("eps_n", p.eps_n).empty());
  require(param_problem("post_mult", p.post_mult).empty());
  try {
    validate(p);  // what the reader accepts, every backend accepts
  } catch (const Error&) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy so that ASan sees a read past the end of the text.
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const KernelConfig c = KernelConfig::parse(text);
    require(KernelConfig::parse(c.to_json()).hash() == c.hash());  // what it prints, it reads
  } catch (const Error&) {
  }
  fuzz_site_metadata(text);
  (void)json_input::check(text, io::kConfigJson);
  return 0;
}
