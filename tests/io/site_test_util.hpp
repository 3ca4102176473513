// Random site inputs (fresh seeded values scaled like a trained model) for the site-file and CLI
// tests.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc::st::testing {

struct RandomSite {
  MhcParams params;
  int64_t tokens = 0;
  SiteWeights weights;
  std::vector<Bf16> x, sublayer_out;
  std::vector<float> pre_mix;
  SiteInputsView inputs() const { return {tokens, x.data(), pre_mix.data(), sublayer_out.data()}; }
};

inline RandomSite random_site(int n, int hidden, int64_t tokens, uint64_t seed) {
  RandomSite s;
  s.params = preset(kDefaultPreset);
  s.params.n = n;
  s.params.hidden = hidden;
  s.tokens = tokens;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  auto bf16s = [&](int64_t count) {
    std::vector<Bf16> v(static_cast<size_t>(count));
    for (auto& e : v) e = float_to_bf16(normal(rng));
    return v;
  };
  const int64_t k = s.params.k(), nmix = s.params.nmix();
  s.x = bf16s(tokens * k);
  s.sublayer_out = bf16s(tokens * hidden);
  s.pre_mix.resize(size_t(tokens * n));
  for (auto& e : s.pre_mix) e = 0.1f + uniform(rng);
  // Rows of unit-norm scale: mixes come out of order 1.
  const float fn_scale = 1.0f / std::sqrt(float(k));
  s.weights.hc_fn.resize(size_t(nmix * k));
  for (auto& e : s.weights.hc_fn) e = fn_scale * normal(rng);
  s.weights.hc_base.resize(size_t(nmix));
  for (auto& e : s.weights.hc_base) e = 0.5f * normal(rng);
  s.weights.hc_scale = {0.5f + uniform(rng), 0.5f + uniform(rng), 0.5f + uniform(rng)};
  s.weights.norm_weight.resize(size_t(hidden));
  for (auto& e : s.weights.norm_weight) e = 1.0f + 0.1f * normal(rng);
  return s;
}

}  // namespace mhc::st::testing
