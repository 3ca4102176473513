// The FP8 layer input (docs/fp8.md) of every op that writes layer_input (mhc/api.hpp: input_path,
// pre, post_pre by row CTAs and by clusters, boundary, and boundary with a staging buffer, which
// runs the fused boundary kernel): its codes and scales bitwise the
// reference quantiser's (mhc/cpu/fp8.hpp) of the bf16 layer_input the bf16 form writes, its other
// outputs bitwise the bf16 form's, and its dequantised values against the float64 reference;
// fresh random inputs, poisoned outputs, in both scale layouts and with UE8M0 scales; and the
// FP8 forms' argument errors.
#include "mhc/cpu/fp8.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/api.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::FoldCase;
using test::FoldOutputs;
using test::poisoned;
using test::same_finite_bits;
using test::to_device;
using test::to_host;

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
};

std::vector<Fp8Format> formats() {
  return {{128, false, false}, {128, true, false}, {128, false, true}, {128, true, true}};
}

std::string format_name(const Fp8Format& f) {
  return std::string(f.column_major_scales ? " column-major" : " row-major") +
         (f.ue8m0 ? " ue8m0" : "");
}

// got (codes and scales) bitwise the reference quantiser's of `bf16` (the bf16 form's
// layer_input), the padding of the column-major scales untouched; and its dequantised values
// within FP8's rounding of the float64 reference `ref`.
void expect_fp8(const MhcParams& p, int64_t m, const std::vector<Bf16>& bf16, const DeviceFp8& got,
                const std::vector<double>& ref, const std::string& label) {
  const Fp8Format& f = got.out.format;
  std::vector<uint8_t> want_codes(size_t(m * p.hidden));
  std::vector<float> want_scales(got.scales.size());
  const std::vector<float> got_scales = to_host(got.scales);
  want_scales = got_scales;  // the padding: as poisoned
  fp8_quantize_rows(bf16.data(), m, p.hidden, f, want_codes.data(), want_scales.data());
  std::vector<uint8_t> got_codes = to_host(got.codes);
  got_codes.resize(want_codes.size());
  EXPECT_EQ(std::memcmp(want_codes.data(), got_codes.data(), want_codes.size()), 0)
      << label << ": codes differ from the reference quantiser's";
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t g = 0; g < fp8_groups(p.hidden, f); ++g) {
      const int64_t at = fp8_scale_index(t, g, m, p.hidden, f);
      ASSERT_EQ(std::memcmp(&want_scales[size_t(at)], &got_scales[size_t(at)], 4), 0)
          << label << ": scale of token " << t << " group " << g << " is " << got_scales[at]
          << ", the reference quantiser's " << want_scales[at];
    }
  }
  if (m == 0) return;
  const std::vector<double> back =
      fp8_dequantize_rows(got_codes.data(), got_scales.data(), m, p.hidden, f);
  const std::vector<float> back_f(back.begin(), back.end());
  const ErrorStats stats = compare(back_f.data(), ref.data(), m * p.hidden);
  // E4M3 keeps 3 mantissa bits: at most 2^-4 relative per element, about a third of it norm-wise,
  // on top of the bf16 tier.
  EXPECT_TRUE(stats.nonfinite == 0 && stats.rel_norm <= 3e-2 && stats.max_abs_rel <= 7e-2)
      << label << ": " << stats.describe();
}

struct Fp8Case {
  int hidden;
  int64_t tokens;
};

class Fp8Ops : public ::testing::TestWithParam<Fp8Case> {};

// input_path and pre (V4.1 and V4): the bf16 forms' layer_input through the reference quantiser.
TEST_P(Fp8Ops, InputPathAndPre) {
  MHC_SKIP_WITHOUT_GPU();
  const auto [hidden, m] = GetParam();
  const MhcParams p = test::small_params(4, hidden);
  const Ops ops(test::device_plan(), p);
  FoldCase k(p, std::max<int64_t>(m, 1), 61000 + uint64_t(hidden) + uint64_t(m));
  DeviceWorkspace ws(p, m);
  const NormWeight norm{k.w.norm_weight.get(), false};
  const std::vector<double> ref =
      ref::input_path(p, m, k.c.x.data(), k.c.pre_mix.data(), k.c.weights.norm_weight.data());
  FoldOutputs bf16(p, std::max<int64_t>(m, 1));
  ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), norm, bf16.layer_input.get(), ws.ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Bf16> bf16_rows = to_host(bf16.layer_input);
  for (const Fp8Format& f : formats()) {
    const std::string label = test::case_name(p, m, 1.0) + format_name(f);
    DeviceFp8 a(p, m, f), b(p, m, f);
    ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), norm, a.out, ws.ws, nullptr);
    FoldOutputs fp8(p, std::max<int64_t>(m, 1)), twin(p, std::max<int64_t>(m, 1));
    ops.pre(m, k.x_prev.get(), {k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()}, norm,
            k.pre_mix.get(), b.out, {fp8.coef.pre.get(), fp8.coef.post.get(), fp8.coef.comb.get()},
            ws.ws, nullptr);
    ops.pre(m, k.x_prev.get(), {k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()}, norm,
            k.pre_mix.get(), twin.layer_input.get(),
            {twin.coef.pre.get(), twin.coef.post.get(), twin.coef.comb.get()}, ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    expect_fp8(p, m, bf16_rows, a, ref, label + " input_path");
    expect_fp8(p, m, bf16_rows, b, ref, label + " pre");
    if (m > 0) {
      // The coefficients of the FP8 form: those of the bf16 form's launch.
      EXPECT_TRUE(same_finite_bits(to_host(twin.coef.pre), to_host(fp8.coef.pre))) << label;
      EXPECT_TRUE(same_finite_bits(to_host(twin.coef.comb), to_host(fp8.coef.comb))) << label;
    }
    // V4: the collapse with this site's own pre, after the coefficients.
    DeviceFp8 c(p, m, f);
    FoldOutputs v4(p, std::max<int64_t>(m, 1));
    ops.pre(m, k.x_prev.get(), {k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()}, norm,
            nullptr, c.out, {v4.coef.pre.get(), v4.coef.post.get(), v4.coef.comb.get()}, ws.ws,
            nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    if (m > 0) {
      FoldOutputs v4_bf16(p, m);
      ops.input_path(m, k.x_prev.get(), v4.coef.pre.get(), norm, v4_bf16.layer_input.get(), ws.ws,
                     nullptr);
      MHC_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<double> ref_v4 = ref::input_path(
          p, m, k.c.x.data(), to_host(v4.coef.pre).data(), k.c.weights.norm_weight.data());
      expect_fp8(p, m, to_host(v4_bf16.layer_input), c, ref_v4, label + " pre V4");
    }
  }
}

// post_pre by row CTAs and by clusters (where the image has them), and boundary: x bitwise the
// bf16 post_pre's, layer_input its quantisation, the boundary's coefficients those of the
// coefficient launch on that x.
TEST_P(Fp8Ops, PostPreAndBoundary) {
  MHC_SKIP_WITHOUT_GPU();
  const auto [hidden, m] = GetParam();
  const MhcParams p = test::small_params(4, hidden);
  FoldCase k(p, std::max<int64_t>(m, 1), 62000 + uint64_t(hidden) + uint64_t(m));
  DeviceWorkspace ws(p, m);
  const NormWeight norm{k.w.norm_weight.get(), false};
  const HcWeights next{k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()};
  for (bool cluster : {false, true}) {
    if (cluster && !test::device_plan().tma128_available) continue;
    LaunchOverrides o;
    o.cluster_post = cluster;
    const Ops ops(test::device_plan(), p, o);
    FoldOutputs bf16(p, std::max<int64_t>(m, 1));
    const PostArgs post_bf16{k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                             bf16.x.get()};
    ops.post_pre(m, post_bf16, k.pre_mix.get(), norm, bf16.layer_input.get(), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<Bf16> x_bf16 = to_host(bf16.x);
    const std::vector<double> ref =
        ref::input_path(p, m, x_bf16.data(), k.c.pre_mix.data(), k.c.weights.norm_weight.data());
    const std::vector<Bf16> rows = to_host(bf16.layer_input);
    FoldOutputs coef(p, std::max<int64_t>(m, 1));
    if (m > 0) {
      ops.coefficients(m, bf16.x.get(), next,
                       {coef.coef.pre.get(), coef.coef.post.get(), coef.coef.comb.get()}, ws.ws,
                       nullptr);
      MHC_CUDA_CHECK(cudaDeviceSynchronize());
    }
    for (const Fp8Format& f : formats()) {
      const std::string label =
          test::case_name(p, m, 1.0) + format_name(f) + (cluster ? " cluster_post" : " row post");
      DeviceFp8 a(p, m, f), b(p, m, f);
      FoldOutputs pp(p, std::max<int64_t>(m, 1)), bd(p, std::max<int64_t>(m, 1));
      ops.post_pre(m, {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), pp.x.get()},
                   k.pre_mix.get(), norm, a.out, ws.ws, nullptr);
      ops.boundary(m, {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), bd.x.get()},
                   k.pre_mix.get(), norm, b.out, next,
                   {bd.coef.pre.get(), bd.coef.post.get(), bd.coef.comb.get()}, ws.ws, nullptr);
      MHC_CUDA_CHECK(cudaDeviceSynchronize());
      expect_fp8(p, m, rows, a, ref, label + " post_pre");
      expect_fp8(p, m, rows, b, ref, label + " boundary");
      if (m == 0) continue;
      EXPECT_TRUE(same_finite_bits(x_bf16, to_host(pp.x))) << label << " post_pre x";
      EXPECT_TRUE(same_finite_bits(x_bf16, to_host(bd.x))) << label << " boundary x";
      EXPECT_TRUE(same_finite_bits(to_host(coef.coef.pre), to_host(bd.coef.pre))) << label;
      EXPECT_TRUE(same_finite_bits(to_host(coef.coef.post), to_host(bd.coef.post))) << label;
      EXPECT_TRUE(same_finite_bits(to_host(coef.coef.comb), to_host(bd.coef.comb))) << label;
    }
  }
}

std::vector<Fp8Case> cases() {
  std::vector<Fp8Case> out;
  for (int hidden : {4096, 5120, 7168}) {
    // 1031: odd, and above the sizes where the bf16 boundary runs its fused kernel.
    for (int64_t m : {0, 1, 7, 33, 1031}) out.push_back({hidden, m});
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(Shapes, Fp8Ops, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Fp8Case>& info) {
                           return "C" + std::to_string(info.param.hidden) + "_M" +
                                  std::to_string(info.param.tokens);
                         });

// The FP8 boundary with a staging buffer, staged (Fp8Format::fold_norm false) against the bf16
// boundary under the same overrides: where the fused boundary kernel runs (the plan's choice, or
// forced), its wide stages write FP8 themselves at any split count, its other shapes and the plain
// collapse go through the bf16 kernel and the group quantisation. Either way layer_input's codes
// and scales are bitwise the reference quantiser's of the bf16 boundary's layer_input, x and the
// coefficients bitwise the bf16 boundary's, the dequantised values near the float64 reference;
// outputs and the staging buffer poisoned first (NaN codes and scales never pass: expect_fp8
// compares them all).
struct StagedCase {
  int hidden;
  int64_t tokens;
  int stage_columns = 0;  // 0: the plan's choice; else the fused boundary forced, this shape
  int splits = 0;
  bool norm = true;
};

std::string staged_name(const StagedCase& c) {
  return "C" + std::to_string(c.hidden) + "_M" + std::to_string(c.tokens) +
         (c.stage_columns > 0
              ? "_cols" + std::to_string(c.stage_columns) + "_splits" + std::to_string(c.splits)
              : "_plan") +
         (c.norm ? "" : "_plain");
}

class Fp8StagedBoundary : public ::testing::TestWithParam<StagedCase> {};

TEST_P(Fp8StagedBoundary, QuantisesTheBf16BoundaryBitwise) {
  MHC_SKIP_WITHOUT_GPU();
  const StagedCase c = GetParam();
  if (c.stage_columns > 0) MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const MhcParams p = test::small_params(4, c.hidden);
  const int64_t m = c.tokens, rows_m = std::max<int64_t>(m, 1);
  LaunchOverrides o;
  if (c.stage_columns > 0) {
    o.fused_boundary = true;
    o.fused_input = false;
    o.boundary.stage_columns = c.stage_columns;
    o.boundary.splits = c.splits;
  }
  const Ops ops(test::device_plan(), p, o);
  FoldCase k(p, rows_m, 67000 + uint64_t(c.hidden) + uint64_t(m) + uint64_t(c.splits));
  DeviceWorkspace ws(p, m);
  const NormWeight norm = c.norm ? NormWeight{k.w.norm_weight.get(), false} : NormWeight{};
  const HcWeights next{k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()};
  const auto post_into = [&](FoldOutputs& out) {
    return PostArgs{k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), out.x.get()};
  };
  const auto coefficients = [](FoldOutputs& out) {
    return Coefficients{out.coef.pre.get(), out.coef.post.get(), out.coef.comb.get()};
  };
  FoldOutputs bf16(p, rows_m);
  ops.boundary(m, post_into(bf16), k.pre_mix.get(), norm, bf16.layer_input.get(), next,
               coefficients(bf16), ws.ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Bf16> x_bf16 = to_host(bf16.x);
  const std::vector<Bf16> rows = to_host(bf16.layer_input);
  const std::vector<double> ref = ref::input_path(
      p, m, x_bf16.data(), k.c.pre_mix.data(), c.norm ? k.c.weights.norm_weight.data() : nullptr);
  for (const Fp8Format& f : formats()) {  // the default, staged (folded: fp8_boundary_test.cpp)
    const std::string label = staged_name(c) + format_name(f);
    DeviceFp8 got(p, m, f);
    cuda::DeviceBuffer<Bf16> staging = poisoned<Bf16>(size_t(rows_m * p.hidden));
    FoldOutputs out(p, rows_m);
    ops.boundary(m, post_into(out), k.pre_mix.get(), norm, got.out, staging.get(), next,
                 coefficients(out), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    expect_fp8(p, m, rows, got, ref, label);
    if (m == 0) continue;
    EXPECT_TRUE(same_finite_bits(x_bf16, to_host(out.x))) << label << " x";
    EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.pre), to_host(out.coef.pre))) << label;
    EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.post), to_host(out.coef.post))) << label;
    EXPECT_TRUE(same_finite_bits(to_host(bf16.coef.comb), to_host(out.coef.comb))) << label;
  }
  // The forced wide stages with the norm are the FP8 kernel: one launch, as the bf16 boundary.
  if (m > 0 && c.stage_columns == 128 && c.norm) {
    FoldOutputs out(p, rows_m);
    DeviceFp8 got(p, m, {});
    cuda::DeviceBuffer<Bf16> staging(size_t(rows_m * p.hidden));
    const auto fp8 = test::captured_kernels([&](cudaStream_t s) {
      ops.boundary(m, post_into(out), k.pre_mix.get(), norm, got.out, staging.get(), next,
                   coefficients(out), ws.ws, s);
    });
    const auto twin = test::captured_kernels([&](cudaStream_t s) {
      ops.boundary(m, post_into(out), k.pre_mix.get(), norm, out.layer_input.get(), next,
                   coefficients(out), ws.ws, s);
    });
    EXPECT_EQ(fp8.size(), twin.size()) << staged_name(c) << ": the FP8 kernel, no quantisation";
  }
}

std::vector<StagedCase> staged_cases() {
  std::vector<StagedCase> out;
  // The plan's choice: below the fused boundary (twin launches), and above it (1031 odd; 4096,
  // where the plan takes the wide stages on H100 and H200).
  for (int hidden : {4096, 5120, 7168}) {
    for (int64_t m : {0, 1, 7, 1031, 4096}) out.push_back({hidden, m});
  }
  // The FP8 kernel forced (wide stages) at every split the cluster epilogue takes, odd and
  // partial tiles; the bf16 kernel + quantisation forced (64-column stages) and the plain
  // collapse.
  for (int splits : {1, 2, 3, 8}) {
    for (int64_t m : {1, 33, 1031}) out.push_back({5120, m, 128, splits});
  }
  out.push_back({4096, 200, 128, 2});
  out.push_back({7168, 200, 128, 4});
  out.push_back({5120, 300, 64, 2});
  out.push_back({5120, 300, 32, 1});
  out.push_back({5120, 200, 128, 2, false});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Shapes, Fp8StagedBoundary, ::testing::ValuesIn(staged_cases()),
                         [](const ::testing::TestParamInfo<StagedCase>& info) {
                           return staged_name(info.param);
                         });

// Outliers: a group far larger than the others, a zero group and a group of tiny values (the
// UE8M0 floor) through the input path, against the reference quantiser.
TEST(Fp8Ops, GroupsOfZerosTinyAndHugeValues) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 3;
  FoldCase k(p, m, 63000);
  // Token 0: its first group scaled up 2^20 (one stream), its second zero; token 1: tiny.
  std::vector<Bf16> x = k.c.x;
  for (int j = 0; j < p.n; ++j) {
    for (int c = 0; c < 128; ++c) {
      x[size_t(j * p.hidden + c)] =
          float_to_bf16(bf16_to_float(x[size_t(j * p.hidden + c)]) * (j == 0 ? 1048576.f : 1.f));
      x[size_t(j * p.hidden + 128 + c)] = float_to_bf16(0.f);
    }
  }
  for (int64_t i = p.k(); i < 2 * p.k(); ++i) x[size_t(i)] = float_to_bf16(1e-30f);
  const auto x_d = to_device(x);
  const Ops ops(test::device_plan(), p);
  DeviceWorkspace ws(p, m);
  // No norm weight: the plain collapse keeps the tiny and huge magnitudes.
  FoldOutputs bf16(p, m);
  ops.input_path(m, x_d.get(), k.pre_mix.get(), {}, bf16.layer_input.get(), ws.ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> ref = ref::input_path(p, m, x.data(), k.c.pre_mix.data(), nullptr);
  for (const Fp8Format& f : formats()) {
    DeviceFp8 a(p, m, f);
    ops.input_path(m, x_d.get(), k.pre_mix.get(), {}, a.out, ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    expect_fp8(p, m, to_host(bf16.layer_input), a, ref, "outliers" + format_name(f));
  }
}

// At decode sizes the FP8 forms launch what the bf16 forms launch (the input path inside the
// coefficient launch, the previous post folded in): as many kernels, on the same grids.
TEST(Fp8Ops, DecodeFormsLaunchAsTheBf16FormsDo) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const Ops ops(test::device_plan(), p);
  for (int64_t m : {1, 16}) {
    FoldCase k(p, m, 66000 + uint64_t(m));
    DeviceWorkspace ws(p, m);
    FoldOutputs bf16(p, m), fp8_out(p, m);
    DeviceFp8 fp8(p, m, {});
    const NormWeight norm{k.w.norm_weight.get(), false};
    const HcWeights w{k.w.hc_fn.get(), k.w.hc_scale.get(), k.w.hc_base.get()};
    const auto grids = [](const std::vector<cudaKernelNodeParams>& kernels) {
      std::vector<unsigned> out;
      for (const auto& n : kernels) out.push_back(n.gridDim.x * n.gridDim.y * n.gridDim.z);
      return out;
    };
    const auto pre = [&](bool as_fp8) {
      return test::captured_kernels([&](cudaStream_t s) {
        const Coefficients c{bf16.coef.pre.get(), bf16.coef.post.get(), bf16.coef.comb.get()};
        if (as_fp8) {
          ops.pre(m, k.x_prev.get(), w, norm, k.pre_mix.get(), fp8.out, c, ws.ws, s);
        } else {
          ops.pre(m, k.x_prev.get(), w, norm, k.pre_mix.get(), bf16.layer_input.get(), c, ws.ws, s);
        }
      });
    };
    EXPECT_EQ(grids(pre(true)), grids(pre(false))) << "pre, M=" << m;
    const auto boundary = [&](bool as_fp8) {
      return test::captured_kernels([&](cudaStream_t s) {
        const PostArgs a{k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                         fp8_out.x.get()};
        const Coefficients c{bf16.coef.pre.get(), bf16.coef.post.get(), bf16.coef.comb.get()};
        if (as_fp8) {
          ops.boundary(m, a, k.pre_mix.get(), norm, fp8.out, w, c, ws.ws, s);
        } else {
          ops.boundary(m, a, k.pre_mix.get(), norm, bf16.layer_input.get(), w, c, ws.ws, s);
        }
      });
    };
    EXPECT_EQ(grids(boundary(true)), grids(boundary(false))) << "boundary, M=" << m;
  }
}

// The stand-alone group quantisation (cuda::quantize_fp8, the benchmark's comparison) against the
// reference quantiser: groups of random magnitudes from 2^-40 to 2^40, a zero group, values that
// quantise exactly (a group of E4M3 values with amax 448) and a NaN.
TEST(Fp8Ops, StandaloneQuantisationEqualsTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  for (int64_t m : {1, 5, 1031}) {
    const int hidden = 7168;
    test::TestRng rng(65000 + uint64_t(m));
    std::vector<Bf16> rows(size_t(m * hidden));
    for (int64_t g = 0; g < m * hidden / 128; ++g) {
      const double scale = std::ldexp(1.0, int(rng.uniform(-40, 40)));
      for (int i = 0; i < 128; ++i) {
        rows[size_t(g * 128 + i)] = float_to_bf16(float(rng.normal() * scale));
      }
    }
    for (int i = 0; i < 128; ++i) rows[size_t(128 + i)] = float_to_bf16(0.f);
    for (int i = 0; i < 128 && m > 1; ++i) {  // E4M3 values, 448 among them: scale 1, exact codes
      rows[size_t(hidden + i)] = float_to_bf16(e4m3_to_float(uint8_t(i == 0 ? 0x7e : i % 0x7e)));
    }
    rows[size_t(3 * 128 + 5)] = float_to_bf16(std::nanf(""));
    const auto rows_d = to_device(rows);
    const MhcParams p = test::small_params(4, hidden);
    for (const Fp8Format& f : formats()) {
      DeviceFp8 got(p, m, f);
      cuda::quantize_fp8(m, hidden, rows_d.get(), got.out, {nullptr, false});
      MHC_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> want_codes(rows.size());
      std::vector<float> want_scales = to_host(got.scales);
      fp8_quantize_rows(rows.data(), m, hidden, f, want_codes.data(), want_scales.data());
      EXPECT_EQ(to_host(got.codes), want_codes) << "M=" << m << format_name(f);
      const std::vector<float> got_scales = to_host(got.scales);
      EXPECT_EQ(std::memcmp(got_scales.data(), want_scales.data(), 4 * want_scales.size()), 0)
          << "M=" << m << format_name(f);
    }
  }
}

// The FP8 forms refuse a group size other than 128, C not a multiple of it, missing codes or
// scales and scales overlapping the codes, naming the problem.
TEST(Fp8Ops, RefusesBadFormatsAndArrays) {
  MHC_SKIP_WITHOUT_GPU();
  const auto expect_error = [](const std::function<void()>& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 4;
  FoldCase k(p, m, 64000);
  DeviceWorkspace ws(p, m);
  const Ops ops(test::device_plan(), p);
  DeviceFp8 a(p, m, {});
  Fp8Output bad = a.out;
  bad.format.group_size = 64;
  expect_error([&] { ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), {}, bad, ws.ws, nullptr); },
               "group_size=64");
  bad = a.out;
  bad.codes = nullptr;
  expect_error([&] { ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), {}, bad, ws.ws, nullptr); },
               "layer_input codes is null");
  bad = a.out;
  bad.scales = nullptr;
  expect_error([&] { ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), {}, bad, ws.ws, nullptr); },
               "layer_input scales is null");
  bad = a.out;
  bad.scales = reinterpret_cast<float*>(a.codes.get());
  expect_error([&] { ops.input_path(m, k.x_prev.get(), k.pre_mix.get(), {}, bad, ws.ws, nullptr); },
               "overlaps");
  const MhcParams odd = test::small_params(4, 5120 + 64);  // a bf16 shape, not an FP8 one
  FoldCase ko(odd, m, 64001);
  DeviceWorkspace wso(odd, m);
  const Ops ops_odd(test::device_plan(), odd);
  DeviceFp8 ao(odd, m, {});
  expect_error(
      [&] {
        ops_odd.input_path(m, ko.x_prev.get(), ko.pre_mix.get(), {}, ao.out, wso.ws, nullptr);
      },
      "not a multiple of group_size=128");
}

}  // namespace
}  // namespace mhc
