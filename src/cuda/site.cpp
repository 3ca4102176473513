#include "mhc/cuda/device_site.hpp"

namespace mhc::cuda {

DeviceSiteWeights::DeviceSiteWeights(const MhcParams& p, const SiteWeightsView& w)
    : hc_fn(size_t(p.nmix()) * p.k()), hc_base(p.nmix()), hc_scale(3), norm_weight(p.hidden) {
  hc_fn.upload(w.hc_fn, hc_fn.size());
  hc_base.upload(w.hc_base, hc_base.size());
  hc_scale.upload(w.hc_scale, hc_scale.size());
  norm_weight.upload(w.norm_weight, norm_weight.size());
}

DeviceSiteBuffers::DeviceSiteBuffers(const MhcParams& p, int64_t tokens_)
    : tokens(tokens_),
      x(size_t(tokens_ * p.k())),
      x_next(size_t(tokens_ * p.k())),
      sublayer_out(size_t(tokens_ * p.hidden)),
      layer_input(size_t(tokens_ * p.hidden)),
      pre_mix(size_t(tokens_ * p.n)),
      pre(size_t(tokens_ * p.n)),
      post(size_t(tokens_ * p.n)),
      comb(size_t(tokens_ * p.n * p.n)),
      mixes(size_t(tokens_ * p.nmix())),
      post_alt(size_t(tokens_ * p.n)),
      comb_alt(size_t(tokens_ * p.n * p.n)) {
  post_alt.fill_bytes(0);
  comb_alt.fill_bytes(0);
}

CoefficientBuffers DeviceSiteBuffers::coefficients(const DeviceSiteWeights& w) const {
  CoefficientBuffers c;
  c.x = x.get();
  c.hc_fn = w.hc_fn.get();
  c.hc_base = w.hc_base.get();
  c.hc_scale = w.hc_scale.get();
  c.pre = pre.get();
  c.post = post.get();
  c.comb = comb.get();
  c.mixes = mixes.get();
  return c;
}

void enqueue_site(const MhcParams& p, int64_t tokens, const DeviceSiteWeights& w,
                  DeviceSiteBuffers& b, const LaunchTuning& tuning, SiteWorkspace& ws,
                  cudaStream_t stream) {
  // The input path rides along with the coefficient launch (fused at decode sizes).
  const InputPathBuffers input{b.pre_mix.get(), w.norm_weight.get(), b.layer_input.get()};
  prenorm_coefficients(p, tokens, b.coefficients(w), tuning, ws, stream, &input);
  post(p, tokens, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(), b.x_next.get(),
       nullptr, tuning, stream);
}

}  // namespace mhc::cuda
