// The float64 reference of one site. Written for clarity, not speed: plain loops in the order of
// the design doc, every input converted exactly to double.
#include "mhc/cpu/reference.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#include "sinkhorn.hpp"

namespace mhc::ref {

namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

void check_call(const MhcParams& p, int64_t tokens, const char* what) {
  validate(p);
  if (tokens < 0) {
    throw Error(std::string(what) + ": token count " + std::to_string(tokens) + " is negative");
  }
}

void require(const void* ptr, const char* what) {
  if (ptr == nullptr) throw Error(std::string(what) + ": an input is null");
}

// mixes of one token: (hc_fn . v) * rsqrt(mean(v^2) + eps_n), v = flatten(x[m]).
void mixes_of_token(const MhcParams& p, const Bf16* x_m, const float* hc_fn, double* mixes) {
  const int64_t K = p.k();
  std::vector<double> v(static_cast<size_t>(K));
  double sum_sq = 0;
  for (int64_t i = 0; i < K; ++i) {
    v[size_t(i)] = bf16_to_float(x_m[i]);
    sum_sq += v[size_t(i)] * v[size_t(i)];
  }
  const double r = 1.0 / std::sqrt(sum_sq / double(K) + p.rms_eps());
  for (int i = 0; i < p.nmix(); ++i) {
    const float* row = hc_fn + i * K;
    double acc = 0;
    for (int64_t e = 0; e < K; ++e) acc += double(row[e]) * v[size_t(e)];
    mixes[i] = acc * r;
  }
}

}  // namespace

std::vector<double> detail::collapse_norm(const MhcParams& p, int64_t tokens, const Bf16* x,
                                          const double* pre_mix, const float* norm_weight) {
  const int n = p.n;
  const int64_t C = p.hidden;
  std::vector<double> out(static_cast<size_t>(tokens * C));
  std::vector<double> y(static_cast<size_t>(C));
  for (int64_t m = 0; m < tokens; ++m) {
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0;
      for (int j = 0; j < n; ++j) sum += pre_mix[m * n + j] * bf16_to_float(x[(m * n + j) * C + c]);
      y[size_t(c)] = sum;
    }
    double* out_m = out.data() + m * C;
    if (norm_weight == nullptr) {  // plain collapse: y is the output, left unrounded
      std::copy(y.begin(), y.end(), out_m);
      continue;
    }
    double sum_sq = 0;
    for (double& value : y) {
      value = round_to_bf16(value);  // the model stores y as bf16 before the norm
      sum_sq += value * value;
    }
    const double rs = 1.0 / std::sqrt(sum_sq / double(C) + p.norm_eps());
    for (int64_t c = 0; c < C; ++c) out_m[c] = y[size_t(c)] * rs * double(norm_weight[c]);
  }
  return out;
}

std::vector<double> input_path(const MhcParams& p, int64_t tokens, const Bf16* x,
                               const float* pre_mix, const float* norm_weight) {
  check_call(p, tokens, "ref::input_path");
  if (tokens == 0) return {};
  require(x, "ref::input_path");
  require(pre_mix, "ref::input_path");
  const std::vector<double> pre_mix_d(pre_mix, pre_mix + tokens * p.n);
  return detail::collapse_norm(p, tokens, x, pre_mix_d.data(), norm_weight);
}

SplitPartials prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                           const float* fn) {
  check_prenorm_gemm_shape(tokens, nmix, k, splits);
  SplitPartials result;
  result.out.assign(size_t(splits * tokens * nmix), 0.0);
  result.sqrsum.assign(size_t(splits * tokens), 0.0);
  if (tokens > 0) {
    require(x, "ref::prenorm_gemm");
    require(fn, "ref::prenorm_gemm");
  }
  for (int s = 0; s < splits; ++s) {
    const SplitRange range = prenorm_split_range(k, splits, s);
    for (int64_t m = 0; m < tokens; ++m) {
      const Bf16* x_m = x + m * k;
      double sum_sq = 0;
      for (int64_t e = range.begin; e < range.end; ++e) {
        sum_sq += double(bf16_to_float(x_m[e])) * double(bf16_to_float(x_m[e]));
      }
      result.sqrsum[size_t(s * tokens + m)] = sum_sq;
      for (int64_t i = 0; i < nmix; ++i) {
        double acc = 0;
        for (int64_t e = range.begin; e < range.end; ++e) {
          acc += double(fn[i * k + e]) * double(bf16_to_float(x_m[e]));
        }
        result.out[size_t((s * tokens + m) * nmix + i)] = acc;
      }
    }
  }
  return result;
}

void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const SiteWeightsView& w,
                  SiteResult& out) {
  check_call(p, tokens, "ref::coefficients");
  const int n = p.n;
  const int nmix = p.nmix();
  out.mixes.assign(size_t(tokens * nmix), 0.0);
  out.pre.assign(size_t(tokens * n), 0.0);
  out.post.assign(size_t(tokens * n), 0.0);
  out.comb.assign(size_t(tokens * n * n), 0.0);
  if (tokens == 0) return;
  for (const void* ptr :
       {(const void*)x, (const void*)w.hc_fn, (const void*)w.hc_base, (const void*)w.hc_scale}) {
    require(ptr, "ref::coefficients");
  }
  const double scale_pre = w.hc_scale[0], scale_post = w.hc_scale[1], scale_comb = w.hc_scale[2];
  std::vector<double> logits(static_cast<size_t>(n * n));
  for (int64_t m = 0; m < tokens; ++m) {
    double* mixes = out.mixes.data() + m * nmix;
    mixes_of_token(p, x + m * p.k(), w.hc_fn, mixes);
    for (int j = 0; j < n; ++j) {
      out.pre[size_t(m * n + j)] =
          sigmoid(mixes[j] * scale_pre + double(w.hc_base[j])) + p.pre_eps();
      out.post[size_t(m * n + j)] =
          p.post_mult * sigmoid(mixes[n + j] * scale_post + double(w.hc_base[n + j]));
    }
    for (int i = 0; i < n * n; ++i) {
      logits[size_t(i)] = mixes[2 * n + i] * scale_comb + double(w.hc_base[2 * n + i]);
    }
    sinkhorn(n, p.sinkhorn_iters, p.sinkhorn_eps(), logits.data(), out.comb.data() + m * n * n);
  }
}

void sinkhorn(int n, int iters, double eps_h, const double* logits, double* comb) {
  ::mhc::cpu::detail::sinkhorn<double>(n, iters, eps_h, logits, comb);
}

std::vector<double> post(const MhcParams& p, int64_t tokens, const Bf16* x, const double* post,
                         const double* comb, const Bf16* sublayer_out) {
  check_call(p, tokens, "ref::post");
  if (tokens == 0) return {};
  for (const void* ptr :
       {(const void*)x, (const void*)post, (const void*)comb, (const void*)sublayer_out}) {
    require(ptr, "ref::post");
  }
  const int n = p.n;
  const int64_t C = p.hidden;
  std::vector<double> x_next(size_t(tokens * p.k()));
  for (int64_t m = 0; m < tokens; ++m) {
    const double* comb_m = comb + m * n * n;
    for (int k = 0; k < n; ++k) {
      for (int64_t c = 0; c < C; ++c) {
        double sum = post[m * n + k] * double(bf16_to_float(sublayer_out[m * C + c]));
        for (int j = 0; j < n; ++j) {  // transpose: row j of comb is the source stream
          sum += comb_m[j * n + k] * double(bf16_to_float(x[(m * n + j) * C + c]));
        }
        x_next[size_t((m * n + k) * C + c)] = sum;
      }
    }
  }
  return x_next;
}

SiteResult run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in) {
  SiteResult result;
  result.layer_input = input_path(p, in.tokens, in.x, in.pre_mix, w.norm_weight);
  coefficients(p, in.tokens, in.x, w, result);
  result.x_next = post(p, in.tokens, in.x, result.post.data(), result.comb.data(), in.sublayer_out);
  return result;
}

}  // namespace mhc::ref
