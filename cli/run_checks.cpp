// The checks of `mhc run` against the float64 reference (run_checks.hpp).
#include "run_checks.hpp"

#include <algorithm>
#include <cmath>

#include "mhc/cpu/reference.hpp"

namespace mhc::cli {
namespace {

// splitmix64: a tiny deterministic generator for the site check's fresh inputs.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * float(next() >> 40) / float(1 << 24);
  }
};

std::vector<Bf16> random_bf16(Rng& rng, size_t count, float amplitude) {
  std::vector<Bf16> v(count);
  for (auto& e : v) e = float_to_bf16(rng.uniform(-amplitude, amplitude));
  return v;
}

}  // namespace

SiteCheck check_one_site(Backend& backend, const ModelWeights& w, int64_t tokens, uint64_t seed) {
  const MhcParams& p = w.params;
  const SiteWeightsView site_w = w.sites.at(std::min<size_t>(1, w.sites.size() - 1)).view();
  Rng rng{seed ^ 0x5eedf00dull};
  const std::vector<Bf16> x = random_bf16(rng, size_t(tokens * p.k()), 1.0f);
  const std::vector<Bf16> f = random_bf16(rng, size_t(tokens * p.hidden), 1.0f);
  std::vector<float> pre_mix(size_t(tokens * p.n));
  for (auto& e : pre_mix) e = rng.uniform(0.05f, 1.0f);  // as a carried sigmoid(.) + eps_h

  SiteInputsView in{tokens, x.data(), pre_mix.data(), f.data()};
  SiteOutputs out(p, tokens);
  // Poison: NaN in every float output and a NaN bf16 pattern, so unwritten outputs fail.
  std::fill(out.pre.begin(), out.pre.end(), NAN);
  std::fill(out.post.begin(), out.post.end(), NAN);
  std::fill(out.comb.begin(), out.comb.end(), NAN);
  std::fill(out.layer_input.begin(), out.layer_input.end(), Bf16{0xffff});
  std::fill(out.x_next.begin(), out.x_next.end(), Bf16{0xffff});
  backend.run_site(p, site_w, in, out.view());

  const ref::SiteResult r = ref::run_site(p, site_w, in);
  return SiteCheck{
      compare(out.layer_input.data(), r.layer_input.data(), int64_t(r.layer_input.size())),
      compare(out.pre.data(), r.pre.data(), int64_t(r.pre.size())),
      compare(out.post.data(), r.post.data(), int64_t(r.post.size())),
      compare(out.comb.data(), r.comb.data(), int64_t(r.comb.size())),
      compare(out.x_next.data(), r.x_next.data(), int64_t(r.x_next.size()))};
}

HeadCheck check_head(Backend& backend, const ModelWeights& w, const StackTrace& trace,
                     int64_t tokens) {
  HeadCheck c;
  if (w.head.empty() || trace.x_after_layer.empty()) return c;
  const MhcParams& p = w.params;
  const Bf16* x = trace.x_after_layer.back().data();
  std::vector<Bf16> out(size_t(tokens * p.hidden), Bf16{0xffff});
  std::vector<float> weights(size_t(tokens * p.n), NAN);
  backend.run_head(p, w.head.view(), tokens, x, out.data(), weights.data());
  const ref::HeadResult plain = ref::head(p, tokens, x, w.head.view());
  c.weights = compare(weights.data(), plain.weights.data(), int64_t(plain.weights.size()));
  c.out = compare(out.data(), plain.out.data(), int64_t(plain.out.size()));
  std::fill(out.begin(), out.end(), Bf16{0xffff});
  const HeadWeightsView normed_w = w.head.view(w.final_norm.data());
  backend.run_head(p, normed_w, tokens, x, out.data(), nullptr);
  const ref::HeadResult normed = ref::head(p, tokens, x, normed_w);
  c.normed = compare(out.data(), normed.out.data(), int64_t(normed.out.size()));
  c.ran = true;
  return c;
}

std::vector<Bf16> mtp_input(const MhcParams& p, int64_t tokens, const Bf16* h, const Bf16* x0) {
  std::vector<Bf16> out(size_t(tokens * p.k()));
  for (int64_t m = 0; m < tokens; ++m) {
    const Bf16* e = x0 + m * p.k();  // stream 0: the token's embedding
    for (int j = 0; j < p.n; ++j) {
      const int64_t row = m * p.k() + int64_t(j) * p.hidden;
      for (int64_t c = 0; c < p.hidden; ++c) {
        out[size_t(row + c)] = float_to_bf16(bf16_to_float(h[row + c]) + bf16_to_float(e[c]));
      }
    }
  }
  return out;
}

namespace {

std::vector<Bf16> as_bf16(const std::vector<double>& stored) {
  std::vector<Bf16> out(stored.size());  // the reference's x is bf16-exact (model.hpp)
  for (size_t i = 0; i < stored.size(); ++i) out[i] = float_to_bf16(float(stored[i]));
  return out;
}

}  // namespace

std::vector<MtpCheck> check_mtp(Backend& backend, const StackRunner& run,
                                const std::vector<ModelWeights>& blocks, const StackTrace& trunk,
                                const StackReference& trunk_ref, const Bf16* x0, int64_t tokens,
                                uint64_t seed) {
  std::vector<MtpCheck> out;
  if (trunk.x_after_layer.empty() || trunk_ref.x_after_layer.empty()) return out;
  std::vector<Bf16> h = trunk.x_after_layer.back();
  std::vector<Bf16> h_ref = as_bf16(trunk_ref.x_after_layer.back());
  for (size_t depth = 0; depth < blocks.size(); ++depth) {
    const ModelWeights& w = blocks[depth];
    const MhcParams& p = w.params;
    MtpCheck c;
    c.depth = int(depth);
    c.site = check_one_site(backend, w, tokens, seed + 0x6d7470 + depth);
    const std::vector<Bf16> in = mtp_input(p, tokens, h.data(), x0);
    const std::vector<Bf16> in_ref = mtp_input(p, tokens, h_ref.data(), x0);
    const StackTrace trace = run(w, in.data());
    const StackReference ref = reference_stack(w, tokens, in_ref.data());
    c.x =
        compare(trace.x_after_layer.back().data(), ref.x_after_layer.back().data(), tokens * p.k());
    c.last_pre = compare(trace.last_pre.data(), ref.last_pre.data(), tokens * p.n);
    c.output = compare(trace.output.data(), ref.output.data(), tokens * p.hidden);
    c.head = check_head(backend, w, trace, tokens);
    h = trace.x_after_layer.back();
    h_ref = as_bf16(ref.x_after_layer.back());
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace mhc::cli
