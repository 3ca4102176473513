// The head collapse's CTA forms (mhc/cuda/head.cuh: one token or several per CTA, the forms
// where the cluster form does not run, docs/head.md) against the float64 reference at the model's
// hidden sizes and 1, odd and large token counts, with and without the final norm; bitwise the
// input path's collapse with the same weights; the two forms bitwise the same, at token counts
// that do and do not fill the last CTA; a token's bits independent of the batch (alone under one
// form, in a batch under the other) and of the run; zero tokens; the refusals. The cluster form
// has its own suite (head_cluster_test.cpp). Inputs fresh random per case, outputs poisoned
// (0xFF: NaN) before every launch; a NaN fails every comparison.
#include "mhc/cuda/head.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/head_test_util.hpp"
#include "gpu_test_util.hpp"
#include "head_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::DeviceHead;
using test::head_shape_name;
using test::HeadCase;
using test::HeadShape;
using test::poisoned;
using test::to_device;
using test::to_host;
using test::token_row;

cuda::LaunchTarget default_stream() { return test::head_stream(); }

constexpr cuda::HeadForm kOne = cuda::HeadForm::kTokenPerCta;
constexpr cuda::HeadForm kSeveral = cuda::HeadForm::kTokensPerCta;

std::vector<HeadShape> head_shapes() {
  std::vector<HeadShape> shapes;
  for (bool norm : {false, true}) {
    for (int hidden : {4096, 5120, 7168}) {
      for (int64_t tokens : {1, 2, 7, 16, 17, 33, 1031}) {
        shapes.push_back({4, hidden, tokens, 1.0, norm});
      }
      shapes.push_back({2, hidden, 7, 1.0, norm});
    }
    shapes.push_back({4, 5120, 4096, 1.0, norm});
    shapes.push_back({4, 7168, 4096, 1.0, norm});
    shapes.push_back({2, 5120, 1100, 1.0, norm});
    shapes.push_back({2, 4096, 513, 1.0, norm});
    for (double amplitude : {1e-3, 1e2}) shapes.push_back({4, 5120, 9, amplitude, norm});
  }
  return shapes;
}

class HeadKernel : public ::testing::TestWithParam<HeadShape> {};

TEST_P(HeadKernel, MatchesReferenceAndInputPath) {
  MHC_SKIP_WITHOUT_GPU();
  const HeadShape& s = GetParam();
  if (!test::kernels_built_for(s.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const HeadCase c = test::head_case(s, uint64_t(s.hidden * 977 + s.tokens * 3 + s.norm));
  const MhcParams& p = c.p;
  DeviceHead d(c);
  const auto [out, weights] = d.run(p, c.tokens, s.norm, kOne);
  // The other CTA form: the same bits.
  const auto several = d.run(p, c.tokens, s.norm, kSeveral);
  EXPECT_TRUE(test::same_finite_bits(out, several.first));
  EXPECT_TRUE(test::same_finite_bits(weights, several.second));
  const ref::HeadResult r = ref::head(p, c.tokens, c.x.data(), c.view(s.norm));
  const ErrorStats w_err = compare(weights.data(), r.weights.data(), c.tokens * p.n);
  const ErrorStats out_err = compare(out.data(), r.out.data(), c.tokens * p.hidden);
  EXPECT_TRUE(w_err.passes(kFp32Tolerances.coefficients)) << "weights " << w_err.describe();
  EXPECT_TRUE(out_err.passes(kFp32Tolerances.activations)) << "out " << out_err.describe();

  // The collapse and norm are the input path's: the same bits from the same weights.
  auto via_input_path = poisoned<Bf16>(out.size());
  cuda::input_path(p, c.tokens, d.x.get(), d.weights.get(), s.norm ? d.norm.get() : nullptr,
                   via_input_path.get(), default_stream());
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(test::same_finite_bits(out, to_host(via_input_path)));

  // Run to run, and without the weights output, the same bits.
  const auto again = d.run(p, c.tokens, s.norm, kOne);
  EXPECT_TRUE(test::same_finite_bits(out, again.first));
  EXPECT_TRUE(test::same_finite_bits(weights, again.second));
  for (cuda::HeadForm form : {kOne, kSeveral}) {
    cuda::HeadBuffers no_weights = d.buffers(p, s.norm);
    no_weights.weights = nullptr;
    d.out.fill_bytes(0xFF);
    cuda::head(p, c.tokens, no_weights, default_stream(), form);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(test::same_finite_bits(out, to_host(d.out))) << "form " << int(form);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HeadKernel, ::testing::ValuesIn(head_shapes()), head_shape_name);

// A token alone (one token per CTA under the CTA forms' rule) and in batches of both forms, at
// positions first, inside and last in a CTA of several tokens, with and without the norm.
TEST(HeadKernelBatch, TokenBitsDoNotDependOnTheBatch) {
  MHC_SKIP_WITHOUT_GPU();
  constexpr int64_t kBatched = int64_t(cuda::kHeadTokensPerCta) * 140 + 3;
  ASSERT_EQ(cuda::head_form_for(1, false), kOne);
  ASSERT_EQ(cuda::head_form_for(kBatched, false), kSeveral);
  for (int hidden : {4096, 7168}) {
    const HeadCase c = test::random_head_case(test::small_params(4, hidden), kBatched, 11);
    const MhcParams& p = c.p;
    DeviceHead all(c);
    for (bool norm : {false, true}) {
      const auto batch = all.run(p, c.tokens, norm, cuda::head_form_for(c.tokens, false));
      const auto small = all.run(p, 37, norm, cuda::head_form_for(37, false));  // one per CTA
      for (int64_t m : {int64_t{0}, int64_t{17}, int64_t{36}, kBatched - 3, kBatched - 1}) {
        HeadCase one = c;
        one.tokens = 1;
        one.x.assign(c.x.begin() + m * p.k(), c.x.begin() + (m + 1) * p.k());
        DeviceHead d(one);
        const auto alone = d.run(p, 1, norm, cuda::head_form_for(1, false));
        EXPECT_TRUE(test::same_finite_bits(alone.first, token_row(batch.first, m, p.hidden)))
            << "token " << m << " C=" << hidden << " norm " << norm;
        if (m < 37) {
          EXPECT_TRUE(test::same_finite_bits(alone.first, token_row(small.first, m, p.hidden)))
              << "token " << m;
        }
      }
    }
  }
}

TEST(HeadKernelBatch, Bf16NormWeightGivesItsWideningsBits) {
  MHC_SKIP_WITHOUT_GPU();
  HeadCase c = test::random_head_case(test::small_params(4, 7168), 19, 13);
  std::vector<Bf16> norm_bf16;
  for (float& v : c.norm_weight) {
    norm_bf16.push_back(float_to_bf16(v));
    v = bf16_to_float(norm_bf16.back());  // the float weight of the same values
  }
  DeviceHead d(c);
  const auto weight_bf16 = to_device(norm_bf16);
  cuda::HeadBuffers b = d.buffers(c.p, false);
  b.norm_weight_bf16 = weight_bf16.get();
  std::vector<cuda::HeadForm> forms = {kOne, kSeveral};
  if (cuda::head_cluster_fits(c.p.n, c.p.hidden)) forms.push_back(cuda::HeadForm::kCluster);
  for (cuda::HeadForm form : forms) {
    const auto want = d.run(c.p, c.tokens, true, form);
    d.out.fill_bytes(0xFF);
    cuda::head(c.p, c.tokens, b, default_stream(), form);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(test::same_finite_bits(want.first, to_host(d.out))) << "form " << int(form);
  }
  b.norm_weight = d.norm.get();  // both: refused
  EXPECT_THROW(cuda::head(c.p, c.tokens, b, default_stream()), Error);
}

TEST(HeadKernelBatch, ZeroTokensWritesNothing) {
  MHC_SKIP_WITHOUT_GPU();
  const HeadCase c = test::random_head_case(test::small_params(4, 4096), 2, 5);
  DeviceHead d(c);
  d.out.fill_bytes(0xFF);
  for (cuda::HeadForm form : {cuda::HeadForm::kPlan, kOne, kSeveral, cuda::HeadForm::kCluster}) {
    cuda::head(c.p, 0, d.buffers(c.p, true), default_stream(), form);
  }
  cuda::head(c.p, 0, cuda::HeadBuffers{}, default_stream());  // nothing is read or written
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  for (Bf16 v : to_host(d.out)) ASSERT_EQ(v.bits, 0xFFFF);
}

TEST(HeadKernelBatch, RefusesBadArguments) {
  MHC_SKIP_WITHOUT_GPU();
  const HeadCase c = test::random_head_case(test::small_params(4, 4096), 4, 9);
  DeviceHead d(c);
  const MhcParams& p = c.p;
  const auto refuses = [&](const MhcParams& params, int64_t tokens, const cuda::HeadBuffers& b,
                           const char* why) {
    EXPECT_THROW(cuda::head(params, tokens, b, default_stream()), Error) << why;
  };
  cuda::HeadBuffers b = d.buffers(p, true);
  MhcParams three = p;
  three.n = 3;
  refuses(three, 4, b, "n = 3");
  MhcParams odd = p;
  odd.hidden = 4096 + 32;
  refuses(odd, 4, b, "C not a multiple of 64");
  MhcParams wide = p;
  wide.hidden = cuda::head_max_hidden(4) + 64;
  refuses(wide, 1, b, "C above the kernel's limit");
  refuses(p, -1, b, "negative tokens");
  for (auto field :
       {&cuda::HeadBuffers::hc_fn, &cuda::HeadBuffers::hc_base, &cuda::HeadBuffers::hc_scale}) {
    cuda::HeadBuffers missing = b;
    missing.*field = nullptr;
    refuses(p, 4, missing, "a null weight");
  }
  cuda::HeadBuffers no_x = b, no_out = b, misaligned = b, overlapping = b;
  no_x.x = nullptr;
  no_out.out = nullptr;
  misaligned.x = d.x.get() + 1;
  overlapping.out = d.x.get() + p.hidden;
  refuses(p, 4, no_x, "null x");
  refuses(p, 4, no_out, "null out");
  refuses(p, 3, misaligned, "x not 16-byte aligned");
  refuses(p, 4, overlapping, "out overlapping x");
  for (Bf16 v : to_host(d.out)) ASSERT_EQ(v.bits, 0xFFFF);  // nothing launched
}

}  // namespace
}  // namespace mhc
