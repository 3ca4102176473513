// Random site cases for the CPU tests: seeded, never zeros, outputs poisoned with NaN so an output
// a backend forgets to write fails the comparison.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc::test {

// std::mt19937_64 is fully specified; the conversions below are written out so the values do not
// depend on the standard library's distributions.
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : engine_(seed) {}
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * double(engine_() >> 11) * 0x1p-53;
  }
  double normal() {  // Box-Muller
    const double u1 = uniform(0x1p-60, 1.0), u2 = uniform(0.0, 1.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 engine_;
};

inline MhcParams small_params(int n, int hidden, int layers = 1) {
  MhcParams p;
  p.n = n;
  p.hidden = hidden;
  p.layers = layers;
  return p;
}

// Weights scaled like the synthetic model: mixes of order 1, comb logits `comb_scale` * N(0,1)
// plus a diagonal bias.
inline SiteWeights random_site_weights(const MhcParams& p, TestRng& rng, double comb_scale = 2.0) {
  SiteWeights w;
  const double fn_scale = 1.0 / std::sqrt(double(p.k()));
  w.hc_fn.resize(size_t(p.nmix() * p.k()));
  for (float& v : w.hc_fn) v = float(rng.normal() * fn_scale);
  w.hc_base.resize(size_t(p.nmix()));
  for (int i = 0; i < p.nmix(); ++i) {
    const bool diagonal = i >= 2 * p.n && (i - 2 * p.n) / p.n == (i - 2 * p.n) % p.n;
    w.hc_base[size_t(i)] = float(rng.uniform(-0.5, 0.5) + (diagonal ? 3.0 : 0.0));
  }
  w.hc_scale = {float(rng.uniform(0.5, 1.0)), float(rng.uniform(0.5, 1.0)), float(comb_scale)};
  w.norm_weight.resize(size_t(p.hidden));
  for (float& v : w.norm_weight) v = float(rng.uniform(0.5, 1.5));
  return w;
}

inline std::vector<Bf16> random_bf16(size_t count, TestRng& rng, double amplitude) {
  std::vector<Bf16> out(count);
  for (Bf16& v : out) v = float_to_bf16(float(rng.normal() * amplitude));
  return out;
}

struct SiteCase {
  MhcParams p;
  int64_t tokens = 0;
  SiteWeights weights;
  std::vector<Bf16> x, sublayer_out;
  std::vector<float> pre_mix;
  SiteInputsView inputs() const { return {tokens, x.data(), pre_mix.data(), sublayer_out.data()}; }
};

// Streams of amplitude `amplitude` (each stream different), pre_mix like sigmoid outputs, F ~
// N(0,1).
inline SiteCase random_site_case(const MhcParams& p, int64_t tokens, uint64_t seed,
                                 double amplitude = 1.0, double comb_scale = 2.0) {
  TestRng rng(seed);
  SiteCase c;
  c.p = p;
  c.tokens = tokens;
  c.weights = random_site_weights(p, rng, comb_scale);
  c.x = random_bf16(size_t(tokens * p.k()), rng, amplitude);
  c.sublayer_out = random_bf16(size_t(tokens * p.hidden), rng, 1.0);
  c.pre_mix.resize(size_t(tokens * p.n));
  for (float& v : c.pre_mix) v = float(rng.uniform(0.05, 1.0));
  return c;
}

inline SiteOutputs poisoned_outputs(const MhcParams& p, int64_t tokens) {
  SiteOutputs out(p, tokens);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto* v : {&out.pre, &out.post, &out.comb}) v->assign(v->size(), nan);
  for (auto* v : {&out.layer_input, &out.x_next}) v->assign(v->size(), Bf16{0xFFFF});
  return out;
}

inline bool same_bits(const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].bits != b[i].bits) return false;
  }
  return true;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// same_bits, and every value finite: two outputs a kernel left unwritten (both still the NaN
// poison) must not pass for the same results.
inline bool same_finite_bits(const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
  return same_bits(a, b) &&
         std::all_of(a.begin(), a.end(), [](Bf16 v) { return std::isfinite(bf16_to_float(v)); });
}
inline bool same_finite_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return same_bits(a, b) &&
         std::all_of(a.begin(), a.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace mhc::test
