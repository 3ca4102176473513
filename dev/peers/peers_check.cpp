#include "peers_check.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "mhc/cpu/reference.hpp"

namespace peers {
namespace {

// body(begin, end) over [0, tokens) in contiguous ranges, one per hardware thread.
template <class F>
void parallel_tokens(int64_t tokens, F body) {
  const int64_t threads = std::clamp<int64_t>(int64_t(std::thread::hardware_concurrency()), 1,
                                              std::max<int64_t>(tokens, 1));
  const int64_t chunk = (tokens + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t b = 0; b < tokens; b += chunk)
    pool.emplace_back(body, b, std::min(tokens, b + chunk));
  for (auto& t : pool) t.join();
}

template <class T, class Widen>
Error compare_with(const std::vector<double>& ref, const T* out, size_t count, Widen widen) {
  struct Part {
    double num = 0, den = 0, max_abs = 0;
    bool bad = false;
  };
  const int64_t chunk = 1 << 20;
  const int64_t parts = (int64_t(count) + chunk - 1) / chunk;
  std::vector<Part> part(size_t(std::max<int64_t>(parts, 1)));
  parallel_tokens(parts, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      Part& p = part[size_t(c)];
      const size_t end = std::min(count, size_t((c + 1) * chunk));
      for (size_t i = size_t(c * chunk); i < end; ++i) {
        const double o = widen(out[i]);
        const double d = o - ref[i];
        if (!std::isfinite(o)) p.bad = true;
        p.num += d * d;
        p.den += ref[i] * ref[i];
        p.max_abs = std::max(p.max_abs, std::abs(d));
      }
    }
  });
  Part t;
  for (const Part& p : part) {
    t.num += p.num, t.den += p.den, t.max_abs = std::max(t.max_abs, p.max_abs);
    t.bad = t.bad || p.bad;
  }
  Error e;
  e.rel = t.bad ? NAN : std::sqrt(t.num) / std::max(std::sqrt(t.den), 1e-300);
  e.max_abs = t.bad ? NAN : t.max_abs;
  return e;
}

}  // namespace

Error compare(const std::vector<double>& ref, const float* out, size_t count) {
  return compare_with(ref, out, count, [](float v) { return double(v); });
}
Error compare(const std::vector<double>& ref, const mhc::Bf16* out, size_t count) {
  return compare_with(ref, out, count, [](mhc::Bf16 v) { return double(mhc::bf16_to_float(v)); });
}

RefCoefficients ref_coefficients(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                                 const mhc::SiteWeightsView& w) {
  const int n = p.n;
  RefCoefficients r;
  r.pre.resize(size_t(tokens * n));
  r.post.resize(size_t(tokens * n));
  r.comb.resize(size_t(tokens * n * n));
  parallel_tokens(tokens, [&](int64_t b, int64_t e) {
    mhc::ref::SiteResult s;
    mhc::ref::coefficients(p, e - b, x + b * p.k(), w, s);
    std::copy(s.pre.begin(), s.pre.end(), r.pre.begin() + b * n);
    std::copy(s.post.begin(), s.post.end(), r.post.begin() + b * n);
    std::copy(s.comb.begin(), s.comb.end(), r.comb.begin() + b * n * n);
  });
  return r;
}

std::vector<double> ref_input_path(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                                   const float* mix, const float* norm_weight) {
  std::vector<double> out(size_t(tokens * p.hidden));
  parallel_tokens(tokens, [&](int64_t b, int64_t e) {
    const auto part = mhc::ref::input_path(p, e - b, x + b * p.k(), mix + b * p.n, norm_weight);
    std::copy(part.begin(), part.end(), out.begin() + b * p.hidden);
  });
  return out;
}

std::vector<double> ref_post(const mhc::MhcParams& p, int64_t tokens, const mhc::Bf16* x,
                             const float* post, const float* comb, const mhc::Bf16* f) {
  const int n = p.n;
  std::vector<double> out(size_t(tokens * p.k()));
  parallel_tokens(tokens, [&](int64_t b, int64_t e) {
    const std::vector<double> post_d(post + b * n, post + e * n);
    const std::vector<double> comb_d(comb + b * n * n, comb + e * n * n);
    const auto part =
        mhc::ref::post(p, e - b, x + b * p.k(), post_d.data(), comb_d.data(), f + b * p.hidden);
    std::copy(part.begin(), part.end(), out.begin() + b * p.k());
  });
  return out;
}

void Verdict::add(const std::string& what, const Error& e, double tol) {
  errors.emplace_back(what, e);
  if (!e.ok(tol)) failures.push_back(fmt::format("{} rel {:.2e} > {:.0e}", what, e.rel, tol));
}

std::string Verdict::text() const {
  if (failures.empty()) return "ok";
  std::string s;
  for (const auto& f : failures) s += (s.empty() ? "" : "; ") + f;
  return s;
}

}  // namespace peers
