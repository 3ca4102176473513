// Random head-collapse cases (docs/head.md) for the CPU and GPU tests: seeded, scaled like a
// trained head (projections of order 1), outputs poisoned so that an unwritten one fails.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/head_views.hpp"

namespace mhc::test {

struct HeadCase {
  MhcParams p;
  int64_t tokens = 0;
  HeadWeights weights;
  std::vector<float> norm_weight;  // the final RMSNorm's [C]
  std::vector<Bf16> x;             // [M, n, C]
  HeadWeightsView view(bool norm) const {
    return weights.view(norm ? norm_weight.data() : nullptr);
  }
};

inline HeadWeights random_head_weights(const MhcParams& p, TestRng& rng) {
  HeadWeights w;
  const double fn_scale = 1.0 / std::sqrt(double(p.k()));
  w.hc_fn.resize(size_t(head_fn_count(p)));
  for (float& v : w.hc_fn) v = float(rng.normal() * fn_scale);
  w.hc_base.resize(size_t(head_base_count(p)));
  for (float& v : w.hc_base) v = float(rng.uniform(-1.0, 1.0));
  w.hc_scale = {float(rng.uniform(0.5, 1.5))};
  return w;
}

// Streams of amplitude `amplitude`, each stream of a token different.
inline HeadCase random_head_case(const MhcParams& p, int64_t tokens, uint64_t seed,
                                 double amplitude = 1.0) {
  TestRng rng(seed);
  HeadCase c;
  c.p = p;
  c.tokens = tokens;
  c.weights = random_head_weights(p, rng);
  c.norm_weight.resize(size_t(p.hidden));
  for (float& v : c.norm_weight) v = float(rng.uniform(0.5, 1.5));
  c.x = random_bf16(size_t(tokens * p.k()), rng, amplitude);
  return c;
}

// One parameterised case of the CPU and GPU head suites: the shape, the streams' amplitude and
// whether the final norm is fused.
struct HeadShape {
  int n;
  int hidden;
  int64_t tokens;
  double amplitude;
  bool norm;
};

inline std::string name_of(const HeadShape& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "n%d_C%d_M%lld_amp%s_%s", s.n, s.hidden, (long long)s.tokens,
                s.amplitude == 1.0  ? "1"
                : s.amplitude < 1.0 ? "small"
                                    : "large",
                s.norm ? "norm" : "plain");
  return buf;
}

// The test's name, and how gtest prints the parameter (not as bytes).
inline std::string head_shape_name(const ::testing::TestParamInfo<HeadShape>& info) {
  return name_of(info.param);
}
inline void PrintTo(const HeadShape& s, std::ostream* os) { *os << name_of(s); }

// The shape's random case (small_params of its n and C), seeded by `seed`.
inline HeadCase head_case(const HeadShape& s, uint64_t seed) {
  return random_head_case(small_params(s.n, s.hidden), s.tokens, seed, s.amplitude);
}

inline std::vector<Bf16> poisoned_bf16(size_t count) {
  return std::vector<Bf16>(count, Bf16{0xFFFF});
}
inline std::vector<float> poisoned_f32(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace mhc::test
