// The `mhc site` input and output files: tensor names, dtypes and shapes of
// mhc/core/site_views.hpp.
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/limits.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st {

namespace {

constexpr std::string_view kInputTensors[] = {"x",        "pre_mix",     "hc_fn",       "hc_base",
                                              "hc_scale", "norm_weight", "sublayer_out"};

std::string joined(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

void check_tensor_names(const File& f) {
  for (const auto& t : f.tensors()) {
    if (std::find(std::begin(kInputTensors), std::end(kInputTensors), t.name) ==
        std::end(kInputTensors)) {
      throw Error(fmt::format("{}: unexpected tensor '{}' in a site-input file (expected: {})",
                              f.path(), json_input::printable(t.name), joined(kInputTensors)));
    }
  }
}

[[noreturn]] void bad_metadata(const File& f, std::string_view key, std::string_view value,
                               std::string_view expected) {
  throw Error(fmt::format("{}: metadata '{}' is \"{}\", expected {}", f.path(),
                          json_input::printable(key), json_input::printable(value), expected));
}

// A decimal number in the range of parameter `key` (mhc::param_range), blamed on the metadata
// key with the range and why.
double parse_param(const File& f, std::string_view key, const std::string& s,
                   std::string_view example) {
  const ParamRange& r = param_range(key);
  const std::string expected =
      fmt::format("a decimal number in [{:g}, {:g}] such as {}", r.lo, r.hi, example);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    bad_metadata(f, key, s, expected);
  }
  if (!param_problem(key, v).empty()) bad_metadata(f, key, s, expected + " (" + r.why + ")");
  return v;
}

// An integer in [lo, hi], checked here so that a bad value is blamed on the metadata, not on x.
int parse_int(const File& f, std::string_view key, const std::string& s, int lo, int hi) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    bad_metadata(f, key, s, fmt::format("an integer in [{}, {}] such as 20", lo, hi));
  }
  return v;
}

MhcParams params_from_metadata(const File& f) {
  MhcParams p = preset(kDefaultPreset);
  for (const auto& [key, value] : f.metadata()) {
    if (key == "eps_h") {
      p.eps_h = parse_param(f, key, value, "1e-06");
    } else if (key == "eps_n") {
      p.eps_n = parse_param(f, key, value, "1e-20");
    } else if (key == "post_mult") {
      p.post_mult = parse_param(f, key, value, "2");
    } else if (key == "sinkhorn_iters") {
      p.sinkhorn_iters = parse_int(f, key, value, 1, io::kMaxSinkhornIters);
    } else if (key != "format") {  // "format" is what torch's writer adds
      throw Error(fmt::format("{}: unknown metadata key '{}' (known: {}, format)", f.path(),
                              json_input::printable(key), joined(kSiteParamKeys)));
    }
  }
  return p;
}

template <class T, class ToFloat>
void check_finite(const File& f, std::string_view name, const std::vector<T>& v, ToFloat to_float) {
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = to_float(v[i]);
    if (!std::isfinite(x)) {
      throw Error(fmt::format("{}: tensor '{}' holds a non-finite value ({}) at flat element {}",
                              f.path(), name, x, i));
    }
  }
}

void check_finite(const File& f, std::string_view name, const std::vector<float>& v) {
  check_finite(f, name, v, [](float x) { return x; });
}

void check_finite(const File& f, std::string_view name, const std::vector<Bf16>& v) {
  check_finite(f, name, v, bf16_to_float);
}

// Takes n and C from x's shape [M, n, C] and checks them with mhc::validate.
void take_shape_from_x(const File& f, SiteFileInputs& s) {
  const TensorInfo& x = f.expect("x", Dtype::BF16, {"M", "n", "C"});
  if (x.shape[1] > INT_MAX || x.shape[2] > INT_MAX) {
    throw Error(fmt::format("{}: tensor 'x' has shape {}: n or C is absurdly large", f.path(),
                            format_shape(x.shape)));
  }
  s.tokens = x.shape[0];
  s.params.n = static_cast<int>(x.shape[1]);
  s.params.hidden = static_cast<int>(x.shape[2]);
  try {
    validate(s.params);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: tensor 'x' [M, n, C] = {}: {}", f.path(), format_shape(x.shape),
                            e.what()));
  }
}

}  // namespace

SiteFileInputs read_site_inputs(const std::string& path) {
  return read_site_inputs(File::open(path));
}

SiteFileInputs read_site_inputs(const File& f) {
  check_tensor_names(f);
  SiteFileInputs s;
  s.params = params_from_metadata(f);
  take_shape_from_x(f, s);
  const MhcParams& p = s.params;
  const Dim m("M", s.tokens), n("n", p.n), c("C", p.hidden), nmix("NMIX", p.nmix()), k("K", p.k());
  s.x = f.read_bf16("x", {m, n, c});
  s.pre_mix = f.read_f32("pre_mix", {m, n});
  s.weights.hc_fn = f.read_f32("hc_fn", {nmix, k});
  s.weights.hc_base = f.read_f32("hc_base", {nmix});
  s.weights.hc_scale = f.read_f32("hc_scale", {3});
  s.weights.norm_weight = f.read_f32_or_bf16("norm_weight", {c});
  s.sublayer_out = f.read_bf16("sublayer_out", {m, c});
  check_finite(f, "x", s.x);
  check_finite(f, "pre_mix", s.pre_mix);
  check_finite(f, "hc_fn", s.weights.hc_fn);
  check_finite(f, "hc_base", s.weights.hc_base);
  check_finite(f, "hc_scale", s.weights.hc_scale);
  check_finite(f, "norm_weight", s.weights.norm_weight);
  check_finite(f, "sublayer_out", s.sublayer_out);
  return s;
}

Writer site_inputs_writer(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
                          bool norm_weight_bf16) {
  const int64_t m = in.tokens, n = p.n, c = p.hidden, nmix = p.nmix(), k = p.k();
  Writer wr;
  wr.add_bf16("x", {m, n, c}, {in.x, size_t(m * k)});
  wr.add_f32("pre_mix", {m, n}, {in.pre_mix, size_t(m * n)});
  wr.add_f32("hc_fn", {nmix, k}, {w.hc_fn, size_t(nmix * k)});
  wr.add_f32("hc_base", {nmix}, {w.hc_base, size_t(nmix)});
  wr.add_f32("hc_scale", {3}, {w.hc_scale, 3});
  if (norm_weight_bf16) {
    std::vector<Bf16> nw(static_cast<size_t>(c));
    std::transform(w.norm_weight, w.norm_weight + c, nw.begin(), float_to_bf16);
    wr.add_bf16("norm_weight", {c}, nw);
  } else {
    wr.add_f32("norm_weight", {c}, {w.norm_weight, size_t(c)});
  }
  wr.add_bf16("sublayer_out", {m, c}, {in.sublayer_out, size_t(m * c)});
  wr.set_metadata("eps_h", fmt::format("{}", p.eps_h));
  wr.set_metadata("eps_n", fmt::format("{}", p.eps_n));
  wr.set_metadata("sinkhorn_iters", fmt::format("{}", p.sinkhorn_iters));
  wr.set_metadata("post_mult", fmt::format("{}", p.post_mult));
  return wr;
}

Writer site_outputs_writer(const MhcParams& p, int64_t tokens, const SiteOutputs& out,
                           const std::map<std::string, std::string>& metadata) {
  const int64_t m = tokens, n = p.n, c = p.hidden;
  Writer wr;
  wr.add_bf16("layer_input", {m, c}, out.layer_input);
  wr.add_f32("pre", {m, n}, out.pre);
  wr.add_f32("post", {m, n}, out.post);
  wr.add_f32("comb", {m, n, n}, out.comb);
  wr.add_bf16("x_next", {m, n, c}, out.x_next);
  for (const auto& [key, value] : metadata) wr.set_metadata(key, value);
  return wr;
}

SiteOutputs read_site_outputs(const File& f, const MhcParams& p, int64_t tokens) {
  const Dim m("M", tokens), n("n", p.n), c("C", p.hidden);
  SiteOutputs out;
  out.layer_input = f.read_bf16("layer_input", {m, c});
  out.pre = f.read_f32("pre", {m, n});
  out.post = f.read_f32("post", {m, n});
  out.comb = f.read_f32("comb", {m, n, n});
  out.x_next = f.read_bf16("x_next", {m, n, c});
  return out;
}

namespace {

// The first non-finite element of `v` as "holds nan at token 3, stream 1 (flat element 13)", with
// `dims` the labels and sizes of the dims after the token; empty when all are finite.
template <class T, class ToFloat>
std::string first_nonfinite(const std::vector<T>& v, ToFloat to_float,
                            std::initializer_list<std::pair<const char*, int64_t>> dims) {
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = to_float(v[i]);
    if (std::isfinite(x)) continue;
    int64_t rest = int64_t(i), inner = 1;
    for (const auto& d : dims) inner *= d.second;
    std::string where = fmt::format("token {}", rest / inner);
    rest %= inner;
    for (const auto& d : dims) {
      inner /= d.second;
      where += fmt::format(", {} {}", d.first, rest / inner);
      rest %= inner;
    }
    return fmt::format("holds {} at {} (flat element {})", x, where, i);
  }
  return "";
}

}  // namespace

void check_site_outputs_finite(const MhcParams& p, const SiteOutputs& out) {
  const auto f32 = [](float x) { return x; };
  const int64_t n = p.n, c = p.hidden;
  const std::pair<const char*, std::string> found[] = {
      {"layer_input", first_nonfinite(out.layer_input, bf16_to_float, {{"channel", c}})},
      {"pre", first_nonfinite(out.pre, f32, {{"stream", n}})},
      {"post", first_nonfinite(out.post, f32, {{"stream", n}})},
      {"comb", first_nonfinite(out.comb, f32, {{"row", n}, {"column", n}})},
      {"x_next", first_nonfinite(out.x_next, bf16_to_float, {{"stream", n}, {"channel", c}})},
  };
  for (const auto& [name, what] : found) {
    if (!what.empty()) {
      // The parameters are within their ranges (validate), so the cause is a scale: of the
      // weights or inputs, or of post_mult, which the message shows with the rest.
      throw Error(fmt::format(
          "output '{}' {}, computed from finite inputs and parameters within their ranges (an "
          "overflow in the site: check the scale of the weights, the inputs and post_mult; "
          "sinkhorn_iters={} eps_h={:g} eps_n={:g} post_mult={:g})",
          name, what, p.sinkhorn_iters, p.eps_h, p.eps_n, p.post_mult));
    }
  }
}

}  // namespace mhc::st
