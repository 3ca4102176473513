// The deterministic synthetic model, the first site's inputs and the stand-in sublayer.
//
// Same seed, same bits on every machine: the generator is splitmix64, and every value is made
// from integers with IEEE-exact operations (+, -, *, sqrt and an explicit std::fma, all correctly
// rounded), never with libm's exp/log/cos or std::*_distribution, whose results vary between
// libraries. The explicit fma also keeps a compiler that contracts a*b+c (-ffp-contract) from
// changing the bits on machines that have an FMA instruction.
#include "mhc/cpu/model.hpp"

#include <cmath>
#include <string>

#include "mhc/core/error.hpp"

namespace mhc {

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One independent stream per (seed, site, tensor): a site's weights do not depend on how many
// layers the model has, and a token's embedding does not depend on the batch size.
uint64_t stream_seed(uint64_t seed, uint64_t a, uint64_t b) {
  return mix64(mix64(mix64(seed) + a) + b);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float and double).
  double unit() { return double(next() >> 40) * 0x1p-24; }
  double uniform(double lo, double hi) { return std::fma(hi - lo, unit(), lo); }
  // Approximately N(0, 1) times `scale`: the sum of four 16-bit uniforms (Irwin-Hall), centred
  // exactly and scaled to unit variance with one multiplication. Tails end at +-3.46 sigma.
  double normal(double scale) {
    const uint64_t r = next();
    const int64_t sum = int64_t(r & 0xffff) + int64_t((r >> 16) & 0xffff) +
                        int64_t((r >> 32) & 0xffff) + int64_t(r >> 48);
    return double(sum - 2 * 65535) * (kUnitVariance * scale);
  }
  // +1 or -1.
  double sign() { return (next() >> 63) != 0 ? -1.0 : 1.0; }

 private:
  // 1 / std of a sum of four uniforms on 0..65535: variance 4 * (65536^2 - 1) / 12.
  static inline const double kUnitVariance = std::sqrt(3.0 / (65536.0 * 65536.0 - 1.0));
  uint64_t state_;
};

// Tensor tags of the per-site streams.
enum Tensor : uint64_t {
  kHcFn = 1,
  kHcBase,
  kHcScale,
  kNormWeight,
  kStandinGain,
  kFinalNorm,
  kHeadFn,
  kHeadBase,
  kHeadScale
};

std::vector<float> uniform_vector(size_t count, SplitMix64 rng, double lo, double hi) {
  std::vector<float> out(count);
  for (float& v : out) v = float(rng.uniform(lo, hi));
  return out;
}

SiteWeights synthetic_site(const MhcParams& p, uint64_t seed, int site) {
  const int n = p.n;
  SiteWeights w;
  SplitMix64 fn_rng(stream_seed(seed, uint64_t(site), kHcFn));
  // N(0,1)/sqrt(K) rows against a unit-RMS v: mixes of order 1.
  const double fn_scale = 1.0 / std::sqrt(double(p.k()));
  w.hc_fn.resize(size_t(p.nmix()) * size_t(p.k()));
  for (float& v : w.hc_fn) v = float(fn_rng.normal(fn_scale));

  SplitMix64 base_rng(stream_seed(seed, uint64_t(site), kHcBase));
  w.hc_base.resize(size_t(p.nmix()));
  for (int i = 0; i < p.nmix(); ++i) {
    double value = base_rng.uniform(-0.5, 0.5);
    const int comb_index = i - 2 * n;
    // A +2..4 diagonal on the comb logits: comb favours keeping each stream, as trained ones do.
    if (comb_index >= 0 && comb_index / n == comb_index % n) value += base_rng.uniform(2.0, 4.0);
    w.hc_base[size_t(i)] = float(value);
  }

  SplitMix64 scale_rng(stream_seed(seed, uint64_t(site), kHcScale));
  const double pre_scale = scale_rng.uniform(0.5, 1.0);
  const double post_scale = scale_rng.uniform(0.5, 1.0);
  const double comb_scale = scale_rng.uniform(1.0, 4.0);
  w.hc_scale = {float(pre_scale), float(post_scale), float(comb_scale)};

  w.norm_weight = uniform_vector(
      size_t(p.hidden), SplitMix64(stream_seed(seed, uint64_t(site), kNormWeight)), 0.8, 1.2);
  return w;
}

std::vector<float> synthetic_gain(const MhcParams& p, uint64_t seed, int site) {
  SplitMix64 rng(stream_seed(seed, uint64_t(site), kStandinGain));
  std::vector<float> gain(size_t(p.hidden));
  for (float& g : gain) {
    const double sign = rng.sign();
    g = float(sign * rng.uniform(0.3, 0.7));
  }
  return gain;
}

// The head collapse's weights, keyed past the last site like the final norm: projections of
// order 1 and weights around sigmoid(0), so that every stream contributes.
HeadWeights synthetic_head(const MhcParams& p, uint64_t seed) {
  HeadWeights w;
  SplitMix64 fn_rng(stream_seed(seed, ~uint64_t{0}, kHeadFn));
  const double fn_scale = 1.0 / std::sqrt(double(p.k()));
  w.hc_fn.resize(size_t(head_fn_count(p)));
  for (float& v : w.hc_fn) v = float(fn_rng.normal(fn_scale));
  w.hc_base = uniform_vector(size_t(head_base_count(p)),
                             SplitMix64(stream_seed(seed, ~uint64_t{0}, kHeadBase)), -0.5, 0.5);
  w.hc_scale = uniform_vector(size_t(kHeadScaleCount),
                              SplitMix64(stream_seed(seed, ~uint64_t{0}, kHeadScale)), 0.5, 1.0);
  return w;
}

}  // namespace

ModelWeights synthetic_model(const MhcParams& p, uint64_t seed) {
  validate(p);
  ModelWeights w;
  w.params = p;
  w.sites.reserve(size_t(p.sites()));
  w.standin_gain.reserve(size_t(p.sites()));
  for (int site = 0; site < p.sites(); ++site) {
    w.sites.push_back(synthetic_site(p, seed, site));
    w.standin_gain.push_back(synthetic_gain(p, seed, site));
  }
  // The final norm's stream is keyed past the last site so it never collides with a site's.
  w.final_norm = uniform_vector(size_t(p.hidden),
                                SplitMix64(stream_seed(seed, ~uint64_t{0}, kFinalNorm)), 0.8, 1.2);
  w.head = synthetic_head(p, seed);
  return w;
}

std::vector<Bf16> synthetic_embeddings(const MhcParams& p, int64_t tokens, uint64_t seed) {
  validate(p);
  if (tokens < 0) throw Error("synthetic_embeddings: negative token count");
  const int64_t C = p.hidden;
  std::vector<Bf16> x(static_cast<size_t>(tokens * p.k()));
  for (int64_t m = 0; m < tokens; ++m) {
    SplitMix64 rng(stream_seed(seed ^ 0x656d626564ULL, uint64_t(m), 0));
    Bf16* stream0 = x.data() + m * p.k();
    for (int64_t c = 0; c < C; ++c) stream0[c] = float_to_bf16(float(rng.normal(1.0)));
    for (int j = 1; j < p.n; ++j) std::copy(stream0, stream0 + C, stream0 + j * C);
  }
  return x;
}

std::vector<float> first_site_pre_mix(const MhcParams& p, int64_t tokens) {
  if (tokens < 0) throw Error("first_site_pre_mix: negative token count");
  std::vector<float> pre_mix(static_cast<size_t>(tokens * p.n), 0.0f);
  for (int64_t m = 0; m < tokens; ++m) pre_mix[size_t(m * p.n)] = 1.0f;
  return pre_mix;
}

void standin_sublayer(const MhcParams& p, int64_t tokens, const Bf16* layer_input,
                      const float* gain, Bf16* out) {
  const int64_t C = p.hidden;
  for (int64_t m = 0; m < tokens; ++m) {
    for (int64_t c = 0; c < C; ++c) {
      out[m * C + c] = float_to_bf16(gain[c] * bf16_to_float(layer_input[m * C + c]));
    }
  }
}

}  // namespace mhc
