// The stack driver (mhc/cpu/model.hpp): the fp32 CPU stack and its float64 reference.
#include <string>
#include <utility>

#include "internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {

namespace {

void check_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0) {
  const MhcParams& p = w.params;
  validate(p);
  if (tokens < 0) throw Error("stack: token count " + std::to_string(tokens) + " is negative");
  if (tokens > 0 && x0 == nullptr) throw Error("stack: x0 is null");
  if (w.sites.size() != size_t(p.sites()) || w.standin_gain.size() != size_t(p.sites())) {
    throw Error("stack: the model has " + std::to_string(w.sites.size()) + " sites and " +
                std::to_string(w.standin_gain.size()) + " stand-in gains, expected " +
                std::to_string(p.sites()));
  }
  if (!w.final_norm.empty() && w.final_norm.size() != size_t(p.hidden)) {
    throw Error("stack: final_norm has " + std::to_string(w.final_norm.size()) +
                " weights, expected C=" + std::to_string(p.hidden));
  }
}

// An empty final_norm means the model has no final norm: the output is the plain collapse.
const float* final_norm_or_null(const ModelWeights& w) {
  return w.final_norm.empty() ? nullptr : w.final_norm.data();
}

bool ends_layer(int site) { return site % 2 == 1; }  // sites: attention, FFN, attention, ...

}  // namespace

StackTrace cpu_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                     const SiteDone& after_site) {
  check_stack(w, tokens, x0);
  const MhcParams& p = w.params;
  const auto M = static_cast<size_t>(tokens);
  std::vector<Bf16> x(x0, x0 + M * size_t(p.k())), x_next(x.size());
  std::vector<Bf16> layer_input(M * size_t(p.hidden)), sublayer_out(layer_input.size());
  std::vector<float> pre_mix = first_site_pre_mix(p, tokens), pre(pre_mix.size());
  std::vector<float> post(pre_mix.size()), comb(M * size_t(p.n * p.n));
  StackTrace trace;
  for (int site = 0; site < p.sites(); ++site) {
    const SiteWeightsView sw = w.sites[size_t(site)].view();
    cpu::input_path(p, tokens, x.data(), pre_mix.data(), sw.norm_weight, layer_input.data());
    standin_sublayer(p, tokens, layer_input.data(), w.standin_gain[size_t(site)].data(),
                     sublayer_out.data());
    cpu::coefficients(p, tokens, x.data(), sw, pre.data(), post.data(), comb.data());
    cpu::post(p, tokens, x.data(), post.data(), comb.data(), sublayer_out.data(), x_next.data());
    std::swap(x, x_next);
    std::swap(pre_mix, pre);  // this site's pre is the next site's collapse weights
    if (ends_layer(site)) trace.x_after_layer.push_back(x);
    if (after_site) after_site(site + 1);
  }
  trace.last_pre = pre_mix;
  trace.output.resize(M * size_t(p.hidden));
  cpu::final_collapse(p, tokens, x.data(), pre_mix.data(), final_norm_or_null(w),
                      trace.output.data());
  return trace;
}

StackReference reference_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                               const SiteDone& after_site) {
  check_stack(w, tokens, x0);
  const MhcParams& p = w.params;
  const auto M = static_cast<size_t>(tokens);
  // x is carried as bf16: the model stores it so, and a bf16-rounded double is exactly a Bf16.
  std::vector<Bf16> x(x0, x0 + M * size_t(p.k()));
  std::vector<Bf16> layer_input(M * size_t(p.hidden)), sublayer_out(layer_input.size());
  const std::vector<float> one_hot = first_site_pre_mix(p, tokens);
  std::vector<double> pre_mix(one_hot.begin(), one_hot.end());
  StackReference trace;
  for (int site = 0; site < p.sites(); ++site) {
    const SiteWeightsView sw = w.sites[size_t(site)].view();
    const std::vector<double> li =
        ref::detail::collapse_norm(p, tokens, x.data(), pre_mix.data(), sw.norm_weight);
    // The sublayer reads the stored (bf16) layer_input; the stand-in is exact elementwise
    // arithmetic, so the reference computes it exactly as every backend does.
    for (size_t i = 0; i < li.size(); ++i) layer_input[i] = float_to_bf16(float(li[i]));
    standin_sublayer(p, tokens, layer_input.data(), w.standin_gain[size_t(site)].data(),
                     sublayer_out.data());
    ref::SiteResult coef;
    ref::coefficients(p, tokens, x.data(), sw, coef);
    const std::vector<double> x_next =
        ref::post(p, tokens, x.data(), coef.post.data(), coef.comb.data(), sublayer_out.data());
    for (size_t i = 0; i < x_next.size(); ++i) x[i] = float_to_bf16(float(x_next[i]));
    pre_mix = std::move(coef.pre);
    if (ends_layer(site)) {
      std::vector<double> stored(x.size());
      for (size_t i = 0; i < x.size(); ++i) stored[i] = bf16_to_float(x[i]);
      trace.x_after_layer.push_back(std::move(stored));
    }
    if (after_site) after_site(site + 1);
  }
  trace.last_pre = pre_mix;
  trace.output =
      ref::detail::collapse_norm(p, tokens, x.data(), pre_mix.data(), final_norm_or_null(w));
  return trace;
}

}  // namespace mhc
