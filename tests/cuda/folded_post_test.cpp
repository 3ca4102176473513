// The previous site's post folded into the coefficient launch (prenorm_coefficients with
// `previous`) against the two launches it replaces: post + next input path, then the coefficient
// path. x, layer_input and every coefficient output must be bitwise equal (same formula, same
// GEMM tiling, the row cut over the same threads). Fresh random inputs, outputs poisoned. Skips
// without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::FoldCase;
using test::FoldOutputs;
using test::to_host;

// folded: one call with `previous`; else post(next = input) then the coefficient path.
void run_path(FoldCase& k, FoldOutputs& out, bool folded, cuda::SiteWorkspace& ws,
              const LaunchTuning& tuning) {
  const cuda::InputPathBuffers input{k.pre_mix.get(), k.w.norm_weight.get(), out.layer_input.get()};
  const cuda::CoefficientBuffers b = out.coef.buffers(out.x, k.w);
  if (folded) {
    const cuda::PreviousPost previous{k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                                      k.f.get(), out.x.get()};
    cuda::prenorm_coefficients(k.p, k.m, b, tuning, ws, nullptr, &input, &previous);
  } else {
    const cuda::NextInput next{input.pre_mix, input.norm_weight, input.layer_input};
    cuda::post(k.p, k.m, k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.f.get(),
               out.x.get(), &next, tuning, nullptr);
    cuda::prenorm_coefficients(k.p, k.m, b, tuning, ws, nullptr);
  }
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

// invariant: the batch-invariant plan's launch, else the default plan's.
void check_fold(const MhcParams& p, int64_t m, uint64_t seed, Projection projection,
                bool invariant = false) {
  FoldCase k(p, m, seed);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  LaunchOverrides o;
  o.projection = projection;
  const LaunchTuning tuning = invariant ? test::invariant_tuning(p, m, o) : test::tuning(p, m, o);
  FoldOutputs want(p, m), got(p, m);
  run_path(k, want, false, ws, tuning);
  run_path(k, got, true, ws, tuning);
  const std::string label = test::case_name(p, m, 1.0);
  EXPECT_TRUE(test::same_finite_bits(to_host(got.x), to_host(want.x))) << label << " x";
  EXPECT_TRUE(test::same_finite_bits(to_host(got.coef.pre), to_host(want.coef.pre)))
      << label << " pre";
  EXPECT_TRUE(test::same_finite_bits(to_host(got.coef.post), to_host(want.coef.post))) << label;
  EXPECT_TRUE(test::same_finite_bits(to_host(got.coef.comb), to_host(want.coef.comb))) << label;
  EXPECT_TRUE(test::same_finite_bits(to_host(got.coef.mixes), to_host(want.coef.mixes))) << label;
  // The folded launch's input-path CTAs cut the row as the post kernel does: the same bits.
  EXPECT_TRUE(test::same_finite_bits(to_host(got.layer_input), to_host(want.layer_input)))
      << label << " layer_input";
}

TEST(CudaFoldedPost, EqualsPostThenCoefficientsAtEveryModelShape) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 5000;
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      for (int64_t m : {1, 3, 16, 17, 64}) {
        check_fold(test::small_params(n, hidden), m, ++seed, Projection::tf32);
      }
    }
  }
}

TEST(CudaFoldedPost, Fp32ProjectionAndTheUnfusedFallback) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  check_fold(p, 13, 5100, Projection::fp32);
  // Above the fused input path's token range the post runs as its own launch first.
  check_fold(p, 65, 5101, Projection::tf32);
  check_fold(p, 300, 5102, Projection::tf32);
}

// Batch-invariant tuning: on the TMA kernel the previous post cannot be folded into the GEMM
// CTAs (only the 16-row kernel forms x), so the call runs post + next input first: the same bits.
TEST(CudaFoldedPost, BatchInvariantTuningKeepsItsKernel) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  for (int64_t m : {1, 16, 64}) check_fold(p, m, 5300 + uint64_t(m), Projection::tf32, true);
}

TEST(CudaFoldedPost, RefusesAliasingAndAMissingInputPath) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  FoldCase k(p, 4, 5200);
  FoldOutputs out(p, 4);
  cuda::SiteWorkspace ws(p, 4, max_prenorm_splits(p));
  const cuda::CoefficientBuffers b = out.coef.buffers(out.x, k.w);
  const cuda::InputPathBuffers input{k.pre_mix.get(), k.w.norm_weight.get(), out.layer_input.get()};
  cuda::PreviousPost previous{k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.f.get(),
                              out.x.get()};
  auto message = [&](const cuda::InputPathBuffers* in, const cuda::PreviousPost& prev) {
    try {
      cuda::prenorm_coefficients(p, 4, b, test::tuning(p, 4), ws, nullptr, in, &prev);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(nullptr, previous).find("needs the input path"), std::string::npos);
  cuda::PreviousPost aliased = previous;
  aliased.post = out.coef.post.get();
  EXPECT_NE(message(&input, aliased).find("must not alias"), std::string::npos);
  aliased = previous;
  aliased.x_next = k.x_prev.get();
  EXPECT_NE(message(&input, aliased).find("x_next must be the launch's x"), std::string::npos);
}

}  // namespace
}  // namespace mhc
