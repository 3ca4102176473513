// The head collapse (docs/head.md) on the CPU: the fp32 backend and the float64 reference. The
// collapse and the final norm are the input path's (detail::collapse_norm) with the head's own
// weights in place of the carried pre_mix.
#include <cmath>
#include <string>
#include <vector>

#include "internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {

namespace {

void check_head_call(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeightsView& w,
                     const char* what) {
  validate(p);
  if (tokens < 0) {
    throw Error(std::string(what) + ": token count " + std::to_string(tokens) + " is negative");
  }
  if (tokens == 0) return;
  if (x == nullptr || w.hc_fn == nullptr || w.hc_base == nullptr || w.hc_scale == nullptr) {
    throw Error(std::string(what) + ": x, hc_fn, hc_base and hc_scale must not be null");
  }
}

// The collapse weights of one token from its projection `dot[i] = hc_fn[i] . v` and the RMS
// factor r: sigmoid(dot[i] * r * scale + base[i]) + eps, in T's arithmetic.
template <typename T>
void head_weights_of_token(const MhcParams& p, const HeadWeightsView& w, const T* dot, T r,
                           T* out) {
  const T scale = T(w.hc_scale[0]);
  const T eps = T(p.pre_eps());
  for (int j = 0; j < p.n; ++j) {
    const T z = dot[j] * r * scale + T(w.hc_base[j]);
    out[j] = T(1) / (T(1) + std::exp(-z)) + eps;
  }
}

}  // namespace

void cpu::head(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeightsView& w,
               Bf16* out, float* weights) {
  constexpr const char* what = "cpu::head";
  check_head_call(p, tokens, x, w, what);
  if (tokens == 0) return;
  if (out == nullptr) throw Error(std::string(what) + ": out is null");
  const int n = p.n;
  const int64_t K = p.k();
  std::vector<float> own_weights;
  if (weights == nullptr) {
    own_weights.resize(size_t(tokens * n));
    weights = own_weights.data();
  }
  detail::parallel_for(tokens, (n + 1) * K, [&](int64_t begin, int64_t end) {
    std::vector<float> v(static_cast<size_t>(K));
    float dots[kMaxStreams];
    for (int64_t m = begin; m < end; ++m) {
      const Bf16* x_m = x + m * K;
      for (int64_t e = 0; e < K; ++e) v[size_t(e)] = bf16_to_float(x_m[e]);
      // The norm applied after the projection, as at the sites (design doc, step 2).
      const float r =
          1.0f / std::sqrt(detail::dot(v.data(), v.data(), K) / float(K) + float(p.rms_eps()));
      for (int j = 0; j < n; ++j) dots[j] = detail::dot(w.hc_fn + j * K, v.data(), K);
      head_weights_of_token<float>(p, w, dots, r, weights + m * n);
    }
  });
  detail::collapse_norm(p, tokens, x, weights, w.norm_weight, out);
}

ref::HeadResult ref::head(const MhcParams& p, int64_t tokens, const Bf16* x,
                          const HeadWeightsView& w) {
  check_head_call(p, tokens, x, w, "ref::head");
  HeadResult result;
  if (tokens == 0) return result;
  const int n = p.n;
  const int64_t K = p.k();
  result.weights.assign(size_t(tokens * n), 0.0);
  std::vector<double> v(static_cast<size_t>(K));
  double dots[kMaxStreams];
  for (int64_t m = 0; m < tokens; ++m) {
    double sum_sq = 0;
    for (int64_t e = 0; e < K; ++e) {
      v[size_t(e)] = bf16_to_float(x[m * K + e]);
      sum_sq += v[size_t(e)] * v[size_t(e)];
    }
    const double r = 1.0 / std::sqrt(sum_sq / double(K) + p.rms_eps());
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t e = 0; e < K; ++e) acc += double(w.hc_fn[j * K + e]) * v[size_t(e)];
      dots[j] = acc;
    }
    head_weights_of_token<double>(p, w, dots, r, result.weights.data() + m * n);
  }
  result.out = detail::collapse_norm(p, tokens, x, result.weights.data(), w.norm_weight);
  return result;
}

}  // namespace mhc
