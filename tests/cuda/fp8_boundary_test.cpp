// The fused boundary's folded FP8 form (Fp8Format::fold_norm, docs/fp8.md "The folded form"):
// the wide stages quantise y * w per group as they form the row and multiply the group's scale
// by the row's norm factor afterwards. Its codes and scales are not the staged form's bits, so
// they are held to the contract's bounds instead: against the float64 reference of layer_input,
// each dequantised value within half an E4M3 step of its group plus one bf16 step of y; against
// the staged form (the bf16 boundary's layer_input quantised), codes at most one step apart and
// scales within 2^-6 relative. x and the coefficients stay bitwise the bf16 boundary's, UE8M0
// keeps the staged bits, outputs are poisoned first (a NaN code or scale never passes), and the
// checks are shown to catch a perturbed scale or code.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/api.hpp"
#include "mhc/cpu/fp8.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::FoldCase;
using test::FoldOutputs;
using test::poisoned;
using test::same_finite_bits;
using test::to_host;

// The FP8 layer_input on the host: codes [T, C] and the scales as laid out (padding included).
struct HostFp8 {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

// Half an E4M3 step at magnitude `a` (in units of the group's scale): 2^(e - 4) in binade
// [2^e, 2^(e+1)) of the normals (3 mantissa bits), 2^-10 among the subnormals (below 2^-6).
double e4m3_half_step(double a) {
  if (a < std::ldexp(1.0, -6)) return std::ldexp(1.0, -10);
  int e = 0;
  std::frexp(a, &e);  // a = f x 2^e, f in [0.5, 1): binade 2^(e - 1)
  return std::ldexp(1.0, e - 1 - 4);
}

bool nan_code(uint8_t code) { return (code & 0x7f) == 0x7f; }
bool usable_scale(float s) { return std::isfinite(s) && s > 0.f; }

// The first problem of the folded output `got` against the float64 reference `ref` of
// layer_input ("" if none). Per element, with q its code, s its stored scale and x the fp32
// quotient the quantiser rounded (v / s', v = fp32(y_k w), s' the partial scale):
//   |q s - ref| <= |q - x| s + |x s - ref|.
// |q - x| is at most half an E4M3 step at |x|, and so at the larger of |q| and |ref| / s: x
// exceeds both only where it rounds down, to a q in its own binade (a binade's first value is a
// code). x s = fp32(v / s') fp32(s' r_k) = y_k w r_k within three fp32 roundings (2^-24 each),
// while ref = y_ref w r_ref. y_k and y_ref are both the bf16 rounding of the collapse sum, the
// kernel's of its fp32 fmas, the reference's of the float64 sum: equal, or neighbouring bf16
// values where the sum lies near a bf16 midpoint, one bf16 step apart, at most 2^-7 of |y_ref|
// (the step at the bottom of a binade). r_k and r_ref are the fp32 and float64 norm factors of
// those rows: the fp32 sum of at most 8192 squares is within (C - 1) 2^-24 < 2^-11 of exact, the
// square root halves that, the division and the square root add 2^-23, and the few neighbouring
// y's move the sum by a negligible share. So |x s - ref| <= |ref| (2^-7 + 2^-10), the 2^-10
// covering r and the roundings. Where the collapse nearly cancels (y near 0) the fp32 sum's error
// is absolute, about 2^-22 of the streams' terms: below the subnormal half step 2^-10 s unless
// those terms exceed some 9 times the group's largest |y w|. + 1e-30: ref = 0.
std::string reference_problem(const MhcParams& p, int64_t m, const Fp8Format& f, const HostFp8& got,
                              const std::vector<double>& ref) {
  const double relative = std::ldexp(1.0, -7) + std::ldexp(1.0, -10);
  const int64_t groups = fp8_groups(p.hidden, f);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      const float s = got.scales[size_t(fp8_scale_index(t, g, m, p.hidden, f))];
      if (!usable_scale(s))
        return "token " + std::to_string(t) + " group " + std::to_string(g) + ": scale " +
               std::to_string(s);
      for (int64_t c = g * kFp8GroupSize; c < (g + 1) * kFp8GroupSize; ++c) {
        const uint8_t code = got.codes[size_t(t * p.hidden + c)];
        if (nan_code(code))
          return "token " + std::to_string(t) + " column " + std::to_string(c) + ": NaN code";
        const double q = e4m3_to_float(code), want = ref[size_t(t * p.hidden + c)];
        const double bound =
            double(s) * e4m3_half_step(std::max(std::fabs(q), std::fabs(want) / double(s))) +
            std::fabs(want) * relative + 1e-30;
        if (!(std::fabs(q * double(s) - want) <= bound)) {
          return "token " + std::to_string(t) + " column " + std::to_string(c) + ": " +
                 std::to_string(q * double(s)) + " against " + std::to_string(want) + " (bound " +
                 std::to_string(bound) + ")";
        }
      }
    }
  }
  return "";
}

// The first problem of the folded output against the staged one ("" if none): codes of the same
// sign (unless both zero) at most one step apart (E4M3's magnitudes are monotone in the low seven
// bits), scales within 2^-6 relative. Why the bounds hold: the staged form quantises
// bf16(y r w) with scale max|bf16(y r w)| / 448, the folded one fp32(y w) with scale
// max|y w| / 448 times r (fp32); the two differ by bf16's rounding, 2^-9 relative per value and
// per amax, and a few fp32 roundings (2^-24 each). So the scales agree within about 2^-8 (the
// bound leaves room), and a code's quotient moves by about 2^-8 of itself, less than one E4M3
// step (at least 2^-4 of a normal value, 2^-9 absolute among the subnormals): a value may round
// to the neighbouring code, no farther.
std::string staged_problem(const MhcParams& p, int64_t m, const Fp8Format& f, const HostFp8& got,
                           const HostFp8& staged) {
  for (int64_t i = 0; i < m * p.hidden; ++i) {
    const uint8_t a = got.codes[size_t(i)], b = staged.codes[size_t(i)];
    const int ma = a & 0x7f, mb = b & 0x7f;
    const bool sign_ok = (a & 0x80) == (b & 0x80) || (ma == 0 && mb == 0) ||
                         (std::abs(ma - mb) <= 1 && std::min(ma, mb) == 0);
    if (nan_code(a) || nan_code(b) || !sign_ok || std::abs(ma - mb) > 1) {
      return "element " + std::to_string(i) + ": code " + std::to_string(a) + ", staged " +
             std::to_string(b);
    }
  }
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t g = 0; g < fp8_groups(p.hidden, f); ++g) {
      const size_t at = size_t(fp8_scale_index(t, g, m, p.hidden, f));
      const float a = got.scales[at], b = staged.scales[at];
      if (!usable_scale(a) || !usable_scale(b) ||
          !(std::fabs(double(a) - double(b)) <= std::ldexp(double(b), -6))) {
        return "token " + std::to_string(t) + " group " + std::to_string(g) + ": scale " +
               std::to_string(a) + ", staged " + std::to_string(b);
      }
    }
  }
  return "";
}

struct DeviceWorkspace {
  cuda::DeviceBuffer<uint8_t> memory;
  Workspace ws;
  DeviceWorkspace(const MhcParams& p, int64_t tokens)
      : memory(size_t(workspace_bytes(p, std::max<int64_t>(tokens, 1)))) {
    memory.fill_bytes(0);
    ws = {memory.get(), int64_t(memory.size())};
  }
};

// A poisoned FP8 layer_input: codes 0x7f (NaN) and NaN scales, the column-major padding included.
struct DeviceFp8 {
  cuda::DeviceBuffer<uint8_t> codes;
  cuda::DeviceBuffer<float> scales;
  Fp8Output out;
  DeviceFp8(const MhcParams& p, int64_t m, const Fp8Format& f)
      : codes(size_t(std::max<int64_t>(m * p.hidden, 1))),
        scales(poisoned<float>(size_t(std::max<int64_t>(fp8_scale_floats(m, p.hidden, f), 1)))) {
    codes.fill_bytes(0x7f);
    out = {codes.get(), scales.get(), f};
  }
  HostFp8 host(int64_t m, int hidden) const {
    HostFp8 h{to_host(codes), to_host(scales)};
    h.codes.resize(size_t(m * hidden));
    return h;
  }
};

struct FoldedCase {
  int hidden;
  int64_t tokens;
  int splits = 0;  // 0: the plan's choice; else the wide stages forced on this many splits
};

std::string folded_name(const FoldedCase& c) {
  std::string name = "C";
  name += std::to_string(c.hidden);
  name += "_M";
  name += std::to_string(c.tokens);
  name += c.splits > 0 ? "_wide_splits" : "_plan";
  if (c.splits > 0) name += std::to_string(c.splits);
  return name;
}

// One boundary case's runs: the bf16 boundary, then per format the staged and the folded FP8
// forms (each with poisoned outputs and staging).
struct FoldedRun {
  MhcParams p;
  int64_t m;
  FoldCase k;
  DeviceWorkspace ws;
  Ops ops;
  FoldOutputs bf16;
  std::vector<Bf16> x, rows;
  std::vector<double> ref;

  static LaunchOverrides overrides(const FoldedCase& c) {
    LaunchOverrides o;
    if (c.splits > 0) {
      o.fused_boundary = true;
      o.fused_input = false;
      o.boundary.stage_columns = 128;
      o.boundary.splits = c.splits;
    }
    return o;
  }
  explicit FoldedRun(const FoldedCase& c)
      : p(test::small_params(4, c.hidden)),
        m(c.tokens),
        k(p, std::max<int64_t>(m, 1),
          68000 + uint64_t(c.hidden) + uint64_t(m) + uint64_t(c.splits)),
        ws(p, m),
        ops(test::device_plan(), p, overrides(c)),
        bf16(p, std::max<int64_t>(m, 1)) {
    ops.boundary(m, post_into(bf16), k.pre_mix.get(), norm(), bf16.layer_input.get(), next(),
                 coefficients(bf16), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    x = to_host(bf16.x);
    rows = to_host(bf16.layer_input);
    ref = ref::input_path(p, m, x.data(), k.c.pre_mix.data(), k.c.weights.norm_weight.data());
  }
  NormWeight norm() const { return {k.w.norm_weight.get(), false}; }
  HcWeights next() const { return {k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()}; }
  PostArgs post_into(FoldOutputs& out) const {
    return {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), out.x.get()};
  }
  static Coefficients coefficients(FoldOutputs& out) {
    return {out.coef.pre.get(), out.coef.post.get(), out.coef.comb.get()};
  }
  // The FP8 boundary with a poisoned staging buffer; x and the coefficients checked bitwise the
  // bf16 boundary's. *staging_untouched: whether the staging buffer is still all poison.
  HostFp8 fp8(const Fp8Format& f, const std::string& label, bool* staging_untouched = nullptr) {
    DeviceFp8 got(p, m, f);
    const size_t staging_count = size_t(std::max<int64_t>(m, 1) * p.hidden);
    cuda::DeviceBuffer<Bf16> staging = poisoned<Bf16>(staging_count);
    FoldOutputs out(p, std::max<int64_t>(m, 1));
    ops.boundary(m, post_into(out), k.pre_mix.get(), norm(), got.out, staging.get(), next(),
                 coefficients(out), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    if (m > 0) {
      EXPECT_TRUE(same_finite_bits(x, to_host(out.x))) << label << " x";
      EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.pre), to_host(out.coef.pre))) << label;
      EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.post), to_host(out.coef.post))) << label;
      EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.comb), to_host(out.coef.comb))) << label;
    }
    if (staging_untouched != nullptr) {
      const std::vector<Bf16> after = to_host(staging);
      const std::vector<Bf16> poison = to_host(poisoned<Bf16>(staging_count));
      *staging_untouched = std::memcmp(after.data(), poison.data(), after.size() * 2) == 0;
    }
    return got.host(m, p.hidden);
  }
};

// The column-major layout's padding entries: still the poison (the kernels never write them).
void expect_padding_untouched(const MhcParams& p, int64_t m, const Fp8Format& f, const HostFp8& got,
                              const std::string& label) {
  if (!f.column_major_scales) return;
  for (int64_t g = 0; g < fp8_groups(p.hidden, f); ++g) {
    for (int64_t t = m; t < fp8_aligned_tokens(m); ++t) {
      EXPECT_TRUE(std::isnan(got.scales[size_t(fp8_scale_index(t, g, m, p.hidden, f))]))
          << label << ": padding of group " << g << " written";
    }
  }
}

class Fp8FoldedBoundary : public ::testing::TestWithParam<FoldedCase> {};

TEST_P(Fp8FoldedBoundary, WithinTheContractOfTheStagedForm) {
  MHC_SKIP_WITHOUT_GPU();
  const FoldedCase c = GetParam();
  if (c.splits > 0) {
    MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  }
  FoldedRun run(c);
  const MhcParams& p = run.p;
  const int64_t m = run.m;
  for (bool column_major : {false, true}) {
    const Fp8Format folded{kFp8GroupSize, column_major, false, true};
    const Fp8Format staged{kFp8GroupSize, column_major, false, false};
    const std::string label = folded_name(c) + (column_major ? " column-major" : " row-major");
    bool untouched = false;
    const HostFp8 got = run.fp8(folded, label + " folded", &untouched);
    const HostFp8 want = run.fp8(staged, label + " staged");
    if (m == 0) continue;
    // Forced wide stages with the norm: the folded kernel ran, and it writes no staged y.
    if (c.splits > 0) {
      EXPECT_TRUE(untouched) << label << ": the folded form wrote the staging";
    }
    const std::string vs_ref = reference_problem(p, m, folded, got, run.ref);
    EXPECT_TRUE(vs_ref.empty()) << label << " against the float64 reference: " << vs_ref;
    const std::string vs_staged = staged_problem(p, m, folded, got, want);
    EXPECT_TRUE(vs_staged.empty()) << label << " against the staged form: " << vs_staged;
    // The staged form itself is the bf16 boundary's layer_input quantised, bitwise.
    HostFp8 quantised{std::vector<uint8_t>(size_t(m * p.hidden)), want.scales};
    fp8_quantize_rows(run.rows.data(), m, p.hidden, staged, quantised.codes.data(),
                      quantised.scales.data());
    EXPECT_EQ(quantised.codes, want.codes) << label << " staged codes";
    EXPECT_EQ(std::memcmp(quantised.scales.data(), want.scales.data(), 4 * want.scales.size()), 0)
        << label << " staged scales";
    expect_padding_untouched(p, m, folded, got, label + " folded");
  }
}

// UE8M0 scales cannot take the row factor: with fold_norm asked they are the staged form's bits
// (the bf16 boundary's layer_input through the reference quantiser).
TEST_P(Fp8FoldedBoundary, Ue8m0KeepsTheStagedBits) {
  MHC_SKIP_WITHOUT_GPU();
  const FoldedCase c = GetParam();
  if (c.splits > 0) {
    MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  }
  if (c.tokens == 0 || (c.splits > 0 && c.splits != 1 && c.splits != 3)) return;  // a subset
  FoldedRun run(c);
  for (bool column_major : {false, true}) {
    const Fp8Format f{kFp8GroupSize, column_major, true, true};
    const std::string label = folded_name(c) + " ue8m0" + (column_major ? " column-major" : "");
    const HostFp8 got = run.fp8(f, label);
    HostFp8 want{std::vector<uint8_t>(got.codes.size()), got.scales};
    fp8_quantize_rows(run.rows.data(), run.m, run.p.hidden, f, want.codes.data(),
                      want.scales.data());
    EXPECT_EQ(want.codes, got.codes) << label;
    EXPECT_EQ(std::memcmp(want.scales.data(), got.scales.data(), 4 * got.scales.size()), 0)
        << label;
  }
}

std::vector<FoldedCase> folded_cases() {
  std::vector<FoldedCase> out;
  // The plan's choice: below the fused boundary (the unfused launches, where fold_norm changes
  // nothing), above it (1031: odd) and 4096 (the wide stages on H100 and H200).
  for (int hidden : {4096, 5120, 7168}) {
    for (int64_t m : {0, 1, 7, 1031, 4096}) out.push_back({hidden, m});
  }
  // The folded kernel forced at every split count, odd and partial tiles.
  for (int splits : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 33, 1031}) out.push_back({5120, m, splits});
  }
  out.push_back({4096, 200, 2});
  out.push_back({7168, 200, 1});  // 56 groups on one CTA: within the partial scales' table
  out.push_back({7168, 4096, 4});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Shapes, Fp8FoldedBoundary, ::testing::ValuesIn(folded_cases()),
                         [](const ::testing::TestParamInfo<FoldedCase>& info) {
                           return folded_name(info.param);
                         });

// The checks above catch what they should: on a real folded output, a scale 2^-5 off fails the
// comparison with the staged form, a scale 10% off and a code two steps off fail the reference,
// and a NaN code or scale fails both.
TEST(Fp8FoldedBoundaryChecks, CatchPerturbedScalesAndCodes) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const FoldedCase c{5120, 33, 2};
  FoldedRun run(c);
  const MhcParams& p = run.p;
  const Fp8Format folded{kFp8GroupSize, false, false, true};
  const Fp8Format staged{kFp8GroupSize, false, false, false};
  const HostFp8 got = run.fp8(folded, "checks folded");
  const HostFp8 want = run.fp8(staged, "checks staged");
  ASSERT_TRUE(reference_problem(p, run.m, folded, got, run.ref).empty());
  ASSERT_TRUE(staged_problem(p, run.m, folded, got, want).empty());
  const size_t scale_at = size_t(fp8_scale_index(5, 3, run.m, p.hidden, folded));
  HostFp8 bad = got;
  bad.scales[scale_at] *= 1.f + 1.f / 32.f;
  EXPECT_FALSE(staged_problem(p, run.m, folded, bad, want).empty()) << "scale 2^-5 off";
  bad = got;
  bad.scales[scale_at] *= 1.1f;
  EXPECT_FALSE(reference_problem(p, run.m, folded, bad, run.ref).empty()) << "scale 10% off";
  // The group's largest code (|code| near 448): two steps off.
  bad = got;
  size_t big = 5 * size_t(p.hidden) + 3 * kFp8GroupSize;
  for (size_t i = big; i < big + kFp8GroupSize; ++i) {
    if ((bad.codes[i] & 0x7f) > (bad.codes[big] & 0x7f)) big = i;
  }
  bad.codes[big] = uint8_t(bad.codes[big] - 2);
  EXPECT_FALSE(reference_problem(p, run.m, folded, bad, run.ref).empty()) << "code two steps off";
  EXPECT_FALSE(staged_problem(p, run.m, folded, bad, want).empty()) << "code two steps off";
  bad = got;
  bad.codes[7] = 0x7f;
  EXPECT_FALSE(reference_problem(p, run.m, folded, bad, run.ref).empty()) << "NaN code";
  EXPECT_FALSE(staged_problem(p, run.m, folded, bad, want).empty()) << "NaN code";
  bad = got;
  bad.scales[scale_at] = std::nanf("");
  EXPECT_FALSE(reference_problem(p, run.m, folded, bad, run.ref).empty()) << "NaN scale";
  EXPECT_FALSE(staged_problem(p, run.m, folded, bad, want).empty()) << "NaN scale";
}

// The host checks alone (no GPU): E4M3's half steps and the sign rule near zero.
TEST(Fp8FoldedBoundaryChecks, HalfStepsOfE4m3) {
  EXPECT_EQ(e4m3_half_step(448.0), 16.0);             // binade [256, 512): step 32
  EXPECT_EQ(e4m3_half_step(1.0), 1.0 / 16);           // [1, 2): step 1/8
  EXPECT_EQ(e4m3_half_step(1.0 / 64), 1.0 / 1024);    // the smallest normal: step 2^-9
  EXPECT_EQ(e4m3_half_step(1.0 / 1024), 1.0 / 1024);  // a subnormal: step 2^-9
  // Every pair of neighbouring codes is within one half step of their midpoint.
  for (int code = 0; code < 0x7e; ++code) {
    const double a = e4m3_to_float(uint8_t(code)), b = e4m3_to_float(uint8_t(code + 1));
    EXPECT_LE((b - a) / 2, e4m3_half_step(a) * (1 + 1e-12)) << code;
  }
}

// The bound of reference_problem on a host model of the folded arithmetic (no GPU): the kernel's
// collapse (fp32 fmas in stream order, y rounded to bf16), an fp32 norm factor of those rows, the
// group's partial scale and codes of fp32 y * w (the reference quantiser's functions, fp8.cuh's
// arithmetic) and the scale partial x factor, against the float64 reference. Some y of the model
// are the reference's bf16 neighbours (the fp32 and float64 sums round differently), the case
// the bound's one bf16 step covers.
TEST(Fp8FoldedBoundaryChecks, BoundCoversTheFoldedArithmetic) {
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 256, hidden = p.hidden;
  const test::SiteCase c = test::random_site_case(p, m, 68500);
  const Fp8Format f{kFp8GroupSize, false, false, true};
  const float* w = c.weights.norm_weight.data();
  HostFp8 got{std::vector<uint8_t>(size_t(m * hidden)),
              std::vector<float>(size_t(fp8_scale_floats(m, hidden, f)))};
  int64_t neighbours = 0;
  std::vector<float> y(static_cast<size_t>(hidden));
  for (int64_t t = 0; t < m; ++t) {
    float sum_sq = 0.f;
    for (int64_t col = 0; col < hidden; ++col) {
      float acc = 0.f;
      double exact = 0.0;
      for (int j = 0; j < p.n; ++j) {
        const float pre = c.pre_mix[size_t(t * p.n + j)];
        const float x = bf16_to_float(c.x[size_t((t * p.n + j) * hidden + col)]);
        acc = std::fma(pre, x, acc);
        exact += double(pre) * double(x);
      }
      y[size_t(col)] = bf16_to_float(float_to_bf16(acc));
      neighbours += double(y[size_t(col)]) != round_to_bf16(exact);
      sum_sq = std::fma(y[size_t(col)], y[size_t(col)], sum_sq);
    }
    const float r = 1.f / std::sqrt(sum_sq / float(hidden) + float(p.norm_eps()));
    for (int64_t g = 0; g < fp8_groups(hidden, f); ++g) {
      float v[kFp8GroupSize];
      float amax = 0.f;
      for (int e = 0; e < kFp8GroupSize; ++e) {
        const size_t col = size_t(g * kFp8GroupSize + e);
        v[e] = y[col] * w[col];
        amax = std::fmax(amax, std::fabs(v[e]));
      }
      const float partial = fp8_group_scale(amax, false);
      for (int e = 0; e < kFp8GroupSize; ++e) {
        got.codes[size_t(t * hidden + g * kFp8GroupSize + e)] = fp8_quantize(v[e], partial);
      }
      got.scales[size_t(fp8_scale_index(t, g, m, hidden, f))] = partial * r;
    }
  }
  const std::vector<double> ref =
      ref::input_path(p, m, c.x.data(), c.pre_mix.data(), c.weights.norm_weight.data());
  EXPECT_GT(neighbours, 0) << "no y of the model is the reference's neighbour";
  EXPECT_EQ(reference_problem(p, m, f, got, ref), "");
  // With that bound the reference check still fails a scale 10% off, the group's largest code two
  // steps off (64 of its scale against a bound of about 20) and a NaN code or scale.
  const size_t scale_at = size_t(fp8_scale_index(5, 3, m, hidden, f));
  HostFp8 bad = got;
  bad.scales[scale_at] *= 1.1f;
  EXPECT_NE(reference_problem(p, m, f, bad, ref), "") << "scale 10% off";
  bad = got;
  size_t big = size_t(5 * hidden + 3 * kFp8GroupSize);
  for (size_t i = big; i < big + kFp8GroupSize; ++i) {
    if ((bad.codes[i] & 0x7f) > (bad.codes[big] & 0x7f)) big = i;
  }
  bad.codes[big] = uint8_t(bad.codes[big] - 2);
  EXPECT_NE(reference_problem(p, m, f, bad, ref), "") << "code two steps off";
  bad = got;
  bad.codes[7] = 0x7f;
  EXPECT_NE(reference_problem(p, m, f, bad, ref), "") << "NaN code";
  bad = got;
  bad.scales[scale_at] = std::nanf("");
  EXPECT_NE(reference_problem(p, m, f, bad, ref), "") << "NaN scale";
}

// The default is the staged form (docs/decisions.md): the folded one is asked for.
TEST(Fp8FoldedBoundaryChecks, TheDefaultIsStaged) { EXPECT_FALSE(Fp8Format{}.fold_norm); }

}  // namespace
}  // namespace mhc
