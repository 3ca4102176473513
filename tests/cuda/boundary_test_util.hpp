// Shared by the boundary tests (fused_boundary_test.cpp, boundary_matrix_test.cpp): one V4.1
// boundary (the previous site's post, the next input path with the carried pre_mix, this site's
// coefficients) through prenorm_coefficients with `previous`, and its checks against the float64
// reference and against the unfused launches.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc::test {

// fused: the boundary kernel wherever it can run (from 1 token; the 16-row decode fold off so
// that it does not take small sizes); else the unfused launches (post + next input, then the
// coefficient launch). splits, stage_columns, rows (tokens per tile): forced (0: the rules, 64
// columns).
inline LaunchOverrides boundary_tuning(bool fused, int splits = 0, int stage_columns = 0,
                                       int rows = 0) {
  LaunchOverrides o;
  o.fused_boundary = fused;
  o.fused_input = false;
  o.boundary.splits = splits;
  o.boundary.stage_columns = stage_columns;
  o.boundary.rows = rows;
  return o;
}

// The boundary of `k` into `out`, launched as the device plan resolves it with `o` (none: the
// plan's dispatch) at the launch's token count (k.m unless `tokens` is given).
inline void run_boundary_with(FoldCase& k, FoldOutputs& out, const LaunchOverrides& o,
                              cuda::SiteWorkspace& ws, bool with_norm = true, int64_t tokens = -1) {
  const cuda::InputPathBuffers input{k.pre_mix.get(), with_norm ? k.w.norm_weight.get() : nullptr,
                                     out.layer_input.get()};
  const cuda::PreviousPost previous{k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.f.get(),
                                    out.x.get()};
  const int64_t m = tokens < 0 ? k.m : tokens;
  cuda::prenorm_coefficients(k.p, m, out.coef.buffers(out.x, k.w), tuning(k.p, m, o), ws, nullptr,
                             &input, &previous);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

// Whether a and b are at most one bf16 ulp apart everywhere (NaN never is).
inline bool within_one_ulp(const std::vector<Bf16>& a, const std::vector<Bf16>& b,
                           std::string* where) {
  if (a.size() != b.size()) {
    *where = "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    const float larger = std::max(std::fabs(x), std::fabs(y));
    const float ulp = larger > 0 ? std::ldexp(1.f, std::ilogb(larger) - 7) : 0.f;
    if (!(std::fabs(x - y) <= ulp)) {
      *where =
          "element " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y);
      return false;
    }
  }
  return true;
}

// Runs fn(t0, t1) over slices of tokens [0, m) on the host's cores: the float64 reference of a
// few thousand tokens at C = 7168 takes minutes on one.
template <typename Fn>
void over_token_slices(int64_t m, const Fn& fn) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  const int64_t per_thread = std::max<int64_t>(16, (m + threads - 1) / threads);
  std::vector<std::thread> pool;
  for (int64_t t0 = 0; t0 < m; t0 += per_thread) {
    pool.emplace_back(fn, t0, std::min(m, t0 + per_thread));
  }
  for (std::thread& t : pool) t.join();
}

// The float64 reference of a boundary: x from ref::post, and the coefficients and layer_input
// computed from the kernels' x (`x_bits`, bf16 as stored), so that the TF32 tier applies to them.
struct BoundaryReference {
  std::vector<double> x, layer_input;
  ref::SiteResult coef;
  BoundaryReference(const FoldCase& k, const std::vector<Bf16>& x_bits, bool with_norm) {
    const MhcParams& p = k.p;
    const int64_t n = p.n, nmix = p.nmix(), stream = p.k(), hidden = p.hidden;
    const std::vector<float> post = to_host(k.prev_post), comb = to_host(k.prev_comb);
    const std::vector<double> post_d(post.begin(), post.end()), comb_d(comb.begin(), comb.end());
    x.resize(size_t(k.m * stream));
    layer_input.resize(size_t(k.m * hidden));
    coef.mixes.resize(size_t(k.m * nmix));
    coef.pre.resize(size_t(k.m * n));
    coef.post.resize(size_t(k.m * n));
    coef.comb.resize(size_t(k.m * n * n));
    const float* norm_weight = with_norm ? k.c.weights.norm_weight.data() : nullptr;
    over_token_slices(k.m, [&](int64_t t0, int64_t t1) {
      const int64_t m = t1 - t0;
      const std::vector<double> x_slice =
          ref::post(p, m, k.c.x.data() + t0 * stream, post_d.data() + t0 * n,
                    comb_d.data() + t0 * n * n, k.c.sublayer_out.data() + t0 * hidden);
      std::copy(x_slice.begin(), x_slice.end(), x.begin() + t0 * stream);
      ref::SiteResult c;
      ref::coefficients(p, m, x_bits.data() + t0 * stream, k.c.weights.view(), c);
      std::copy(c.mixes.begin(), c.mixes.end(), coef.mixes.begin() + t0 * nmix);
      std::copy(c.pre.begin(), c.pre.end(), coef.pre.begin() + t0 * n);
      std::copy(c.post.begin(), c.post.end(), coef.post.begin() + t0 * n);
      std::copy(c.comb.begin(), c.comb.end(), coef.comb.begin() + t0 * n * n);
      const std::vector<double> li = ref::input_path(p, m, x_bits.data() + t0 * stream,
                                                     k.c.pre_mix.data() + t0 * n, norm_weight);
      std::copy(li.begin(), li.end(), layer_input.begin() + t0 * hidden);
    });
  }
};

// `got` within the tiers of `r`: x within the activations tier of ref::post, the coefficients
// and layer_input within the TF32 tier of the reference computed from the kernels' x.
inline void expect_boundary_matches(const BoundaryReference& r, const FoldCase& k,
                                    const FoldOutputs& got, const std::string& label) {
  const MhcParams& p = k.p;
  const int64_t m = k.m;
  MHC_EXPECT_CLOSE(compare(to_host(got.x).data(), r.x.data(), m * p.k()),
                   kTf32Tolerances.activations, label + " x");
  const double tol = kTf32Tolerances.coefficients;
  MHC_EXPECT_CLOSE(compare(to_host(got.coef.mixes).data(), r.coef.mixes.data(), m * p.nmix()), tol,
                   label + " mixes");
  MHC_EXPECT_CLOSE(compare(to_host(got.coef.pre).data(), r.coef.pre.data(), m * p.n), tol,
                   label + " pre");
  MHC_EXPECT_CLOSE(compare(to_host(got.coef.post).data(), r.coef.post.data(), m * p.n), tol,
                   label + " post");
  MHC_EXPECT_CLOSE(compare(to_host(got.coef.comb).data(), r.coef.comb.data(), m * p.n * p.n), tol,
                   label + " comb");
  MHC_EXPECT_CLOSE(compare(to_host(got.layer_input).data(), r.layer_input.data(), m * p.hidden),
                   kTf32Tolerances.activations, label + " layer_input");
}

inline void expect_boundary_matches_reference(const FoldCase& k, const FoldOutputs& got,
                                              bool with_norm, const std::string& label) {
  expect_boundary_matches(BoundaryReference(k, to_host(got.x), with_norm), k, got, label);
}

// x bitwise `want`'s (the post kernel's bits) and layer_input within one bf16 ulp of it.
inline void expect_boundary_agrees(const FoldOutputs& got, const FoldOutputs& want,
                                   const std::string& label) {
  EXPECT_TRUE(same_bits(to_host(got.x), to_host(want.x))) << label << " x (the post kernel's bits)";
  std::string where;
  EXPECT_TRUE(within_one_ulp(to_host(got.layer_input), to_host(want.layer_input), &where))
      << label << " layer_input against the unfused path: " << where;
}

}  // namespace mhc::test
