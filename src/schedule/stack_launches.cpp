#include "mhc/schedule/stack_launches.hpp"

#include <fmt/core.h>

#include <utility>

#include "mhc/core/error.hpp"

namespace mhc::cuda {

const char* to_string(StackLayout layout) {
  switch (layout) {
    case StackLayout::fused_post:
      return "fused_post";
    case StackLayout::decode:
      return "decode";
    case StackLayout::folded_decode:
      return "folded_decode";
    case StackLayout::fused_boundary:
      return "fused_boundary";
  }
  return "?";
}

StackLaunches::StackLaunches(const MhcParams& p, std::vector<const DeviceSiteWeights*> sites,
                             const StackBuffers& buffers, SiteWorkspace& workspace,
                             SublayerFn sublayer, SiteDoneFn site_done)
    : p_(p),
      sites_(std::move(sites)),
      b_(buffers),
      ws_(workspace),
      sublayer_(std::move(sublayer)),
      site_done_(std::move(site_done)) {
  if (sites_.empty()) throw Error("StackLaunches: a stack needs at least one site");
}

SiteLaunches StackLaunches::site(StackLayout layout, int s, int64_t tokens,
                                 const LaunchTuning& tuning) const {
  if (s < 0 || s >= sites()) {
    throw Error(fmt::format("StackLaunches: site {} outside 0..{}", s, sites() - 1));
  }
  switch (layout) {
    case StackLayout::decode:
      return decode(s, tokens, tuning);
    case StackLayout::folded_decode:
    case StackLayout::fused_boundary:  // the same launches; prenorm_coefficients picks the kernel
      return folded_decode(s, tokens, tuning);
    case StackLayout::fused_post:
      break;
  }
  return fused_post(s, tokens, tuning);
}

SiteLaunches StackLaunches::fused_post(int s, int64_t tokens, const LaunchTuning& tuning) const {
  SiteLaunches l;
  if (s == 0) {
    l.input_path = [this, tokens, pdl = tuning.pdl](cudaStream_t st) {
      mhc::cuda::input_path(p_, tokens, b_.x_in, b_.pre_mix_in, sites_[0]->norm_weight.get(),
                            b_.layer_input, {st, pdl});
    };
  }
  l.coefficients = [this, s, tokens, tuning](cudaStream_t st) {
    prenorm_coefficients(p_, tokens, coefficient_buffers(s), tuning, ws_, st);
  };
  if (sublayer_) {
    l.sublayer = [this, s, tokens](cudaStream_t st) {
      sublayer_(s, tokens, b_.layer_input, b_.sublayer_out, st);
    };
  }
  l.post = [this, s, tokens, tuning](cudaStream_t st) {
    const bool last = s + 1 == sites();
    NextInput next;
    next.pre_mix = b_.pre[s % 2];
    next.norm_weight = last ? b_.final_norm : sites_[size_t(s) + 1]->norm_weight.get();
    next.layer_input = last ? b_.output : b_.layer_input;
    mhc::cuda::post(p_, tokens, src(s), b_.post[s % 2], b_.comb[s % 2], b_.sublayer_out, dst(s),
                    &next, tuning, st);
    done(s, tokens, st);
  };
  return l;
}

CoefficientBuffers StackLaunches::coefficient_buffers(int s) const {
  const DeviceSiteWeights& w = *sites_[size_t(s)];
  CoefficientBuffers c;
  c.x = src(s);
  c.hc_fn = w.hc_fn.get();
  c.hc_base = w.hc_base.get();
  c.hc_scale = w.hc_scale.get();
  c.pre = b_.pre[s % 2];
  c.post = b_.post[s % 2];
  c.comb = b_.comb[s % 2];
  return c;
}

InputPathBuffers StackLaunches::input_buffers(int s) const {
  InputPathBuffers in;
  in.pre_mix = s == 0 ? b_.pre_mix_in : b_.pre[(s - 1) % 2];
  in.norm_weight = sites_[size_t(s)]->norm_weight.get();
  in.layer_input = b_.layer_input;
  return in;
}

// Site s-1's post as site s's coefficient launch folds it in: it forms src(s) = dst(s - 1).
PreviousPost StackLaunches::previous_post(int s) const {
  PreviousPost pp;
  pp.x = src(s - 1);
  pp.post = b_.post[(s - 1) % 2];
  pp.comb = b_.comb[(s - 1) % 2];
  pp.sublayer_out = b_.sublayer_out;
  pp.x_next = dst(s - 1);
  return pp;
}

// Site s's input path rides in its coefficient launch (reading the previous site's pre, while
// the launch writes this site's into the other buffer), the post is plain, and only the last
// post also forms the final output.
SiteLaunches StackLaunches::decode(int s, int64_t tokens, const LaunchTuning& tuning) const {
  SiteLaunches l = fused_post(s, tokens, tuning);
  l.input_path = nullptr;
  l.coefficients = [this, s, tokens, tuning](cudaStream_t st) {
    const InputPathBuffers input = input_buffers(s);
    prenorm_coefficients(p_, tokens, coefficient_buffers(s), tuning, ws_, st, &input);
  };
  if (s + 1 < sites()) {
    l.post = [this, s, tokens, tuning](cudaStream_t st) {
      mhc::cuda::post(p_, tokens, src(s), b_.post[s % 2], b_.comb[s % 2], b_.sublayer_out, dst(s),
                      nullptr, tuning, st);
      done(s, tokens, st);
    };
  }
  return l;
}

// As decode, but site s > 0's coefficient launch also runs site s-1's post (it forms x = src(s)
// and layer_input from it), so no post runs but the last (with the final collapse and norm).
// The launch reads site s-1's post/comb while it writes site s's: they alternate by parity.
SiteLaunches StackLaunches::folded_decode(int s, int64_t tokens, const LaunchTuning& tuning) const {
  SiteLaunches l = decode(s, tokens, tuning);
  if (s + 1 < sites()) l.post = nullptr;
  if (s == 0) return l;
  l.coefficients = [this, s, tokens, tuning](cudaStream_t st) {
    const InputPathBuffers input = input_buffers(s);
    const PreviousPost previous = previous_post(s);
    prenorm_coefficients(p_, tokens, coefficient_buffers(s), tuning, ws_, st, &input, &previous);
    done(s - 1, tokens, st);
  };
  return l;
}

}  // namespace mhc::cuda
