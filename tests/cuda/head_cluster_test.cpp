// The head collapse's cluster form (mhc/cuda/sm90_head_cluster.cuh, docs/head.md), the head's
// form on sm_90 at every token count: against the float64 reference at the model's hidden sizes
// and 0, 1, odd, group-boundary and large token counts, with and without the final norm (fp32 and
// bf16 weights); a token's bits the same alone and in batches of every group size at any offset;
// run to run; the plan launching it; the rule of its group sizes. Its bits are not the CTA forms'
// (another reduction order): the checks are the reference and its own invariance. Outputs
// poisoned (0xFF: NaN) before every launch; a NaN fails every comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cpu/head_test_util.hpp"
#include "gpu_test_util.hpp"
#include "head_test_util.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/cuda/head.hpp"

namespace mhc {
namespace {

using test::DeviceHead;
using test::head_shape_name;
using test::HeadCase;
using test::HeadShape;
using test::to_host;
using test::token_row;

constexpr cuda::HeadForm kCluster = cuda::HeadForm::kCluster;

#define MHC_SKIP_WITHOUT_HEAD_CLUSTER() MHC_SKIP_WITHOUT_SM90A_KERNELS("the head's cluster form")

// The cluster form's outputs against the float64 reference (kFp32Tolerances).
void expect_matches_reference(const HeadCase& c, bool norm, const std::vector<Bf16>& out,
                              const std::vector<float>& weights) {
  const ref::HeadResult r = ref::head(c.p, c.tokens, c.x.data(), c.view(norm));
  const ErrorStats w_err = compare(weights.data(), r.weights.data(), c.tokens * c.p.n);
  const ErrorStats out_err = compare(out.data(), r.out.data(), c.tokens * c.p.hidden);
  EXPECT_TRUE(w_err.passes(kFp32Tolerances.coefficients)) << "weights " << w_err.describe();
  EXPECT_TRUE(out_err.passes(kFp32Tolerances.activations)) << "out " << out_err.describe();
}

std::vector<HeadShape> cluster_shapes() {
  std::vector<HeadShape> shapes;
  for (bool norm : {false, true}) {
    for (int hidden : {4096, 5120, 7168}) {
      // 1 and 16: one token a group; 7: odd; 17, 64: groups of four; 1031, 4096: the large groups.
      for (int64_t tokens : {1, 7, 16, 17, 64, 1031, 4096}) {
        shapes.push_back({4, hidden, tokens, 1.0, norm});
      }
      shapes.push_back({2, hidden, 1031, 1.0, norm});
    }
    for (double amplitude : {1e-3, 1e2}) shapes.push_back({4, 5120, 9, amplitude, norm});
  }
  return shapes;
}

class HeadCluster : public ::testing::TestWithParam<HeadShape> {};

TEST_P(HeadCluster, MatchesReferenceRunToRun) {
  MHC_SKIP_WITHOUT_HEAD_CLUSTER();
  const HeadShape& s = GetParam();
  if (!test::kernels_built_for(s.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  ASSERT_TRUE(cuda::head_cluster_fits(s.n, s.hidden));
  const HeadCase c = test::head_case(s, uint64_t(s.hidden * 131 + s.tokens * 7 + s.norm));
  DeviceHead d(c);
  const auto [out, weights] = d.run(c.p, c.tokens, s.norm, kCluster);
  expect_matches_reference(c, s.norm, out, weights);
  const auto again = d.run(c.p, c.tokens, s.norm, kCluster);
  EXPECT_TRUE(test::same_finite_bits(out, again.first));
  EXPECT_TRUE(test::same_finite_bits(weights, again.second));
  // Without the weights output: the same bits.
  cuda::HeadBuffers no_weights = d.buffers(c.p, s.norm);
  no_weights.weights = nullptr;
  d.out.fill_bytes(0xFF);
  cuda::head(c.p, c.tokens, no_weights, test::head_stream(), kCluster);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(test::same_finite_bits(out, to_host(d.out)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HeadCluster, ::testing::ValuesIn(cluster_shapes()),
                         head_shape_name);

TEST(HeadClusterPlan, ZeroTokensWritesNothing) {
  MHC_SKIP_WITHOUT_HEAD_CLUSTER();
  const HeadCase c = test::random_head_case(test::small_params(4, 5120), 3, 21);
  DeviceHead d(c);
  for (bool norm : {false, true}) {
    const auto [out, weights] = d.run(c.p, 0, norm, kCluster);
    for (Bf16 v : out) ASSERT_EQ(v.bits, 0xFFFF);
    for (float v : weights) ASSERT_TRUE(std::isnan(v));
  }
}

// Group sizes by M: one token up to 16, four below 1024, then eight up to C = 5120 and four above.
TEST(HeadClusterPlan, GroupSizeRule) {
  for (int64_t m : {1, 2, 16}) EXPECT_EQ(cuda::head_cluster_tokens(m, 5120), 1) << m;
  for (int64_t m : {17, 64, 1023}) EXPECT_EQ(cuda::head_cluster_tokens(m, 5120), 4) << m;
  for (int64_t m : {1024, 8192}) {
    EXPECT_EQ(cuda::head_cluster_tokens(m, 4096), 8) << m;
    EXPECT_EQ(cuda::head_cluster_tokens(m, 5120), 8) << m;
    EXPECT_EQ(cuda::head_cluster_tokens(m, 7168), 4) << m;
  }
  for (int64_t m : {1, 17, 1024, 8192}) {
    EXPECT_EQ(cuda::head_form_for(m, true), kCluster) << m;
  }
}

// Where it is planned, the plan launches the cluster form at every token count (the same bits as
// forcing it), and those bits are not the CTA forms' (so the comparison can tell the forms apart).
TEST(HeadClusterPlan, PlanLaunchesTheClusterForm) {
  MHC_SKIP_WITHOUT_HEAD_CLUSTER();
  for (int hidden : {4096, 5120, 7168}) {
    ASSERT_TRUE(cuda::head_cluster_fits(4, hidden)) << "C=" << hidden;
  }
  EXPECT_FALSE(cuda::head_cluster_fits(4, 4096 + 32));  // not whole 16-byte vectors per CTA
  EXPECT_FALSE(cuda::head_cluster_fits(3, 4096));
  if (!cuda::head_cluster_planned(4, 5120)) GTEST_SKIP() << "the cluster form is switched off";
  const HeadCase c = test::random_head_case(test::small_params(4, 5120), 1031, 23);
  DeviceHead d(c);
  for (int64_t m : {int64_t{1}, int64_t{64}, c.tokens}) {
    const auto planned = d.run(c.p, m, true, cuda::HeadForm::kPlan);
    const auto forced = d.run(c.p, m, true, kCluster);
    const auto cta = d.run(c.p, m, true, cuda::head_form_for(m, false));
    EXPECT_TRUE(test::same_finite_bits(planned.first, forced.first)) << "M=" << m;
    EXPECT_TRUE(test::same_finite_bits(planned.second, forced.second)) << "M=" << m;
    if (m == c.tokens) {
      EXPECT_FALSE(test::same_bits(planned.first, cta.first)) << "M=" << m;
    }
  }
}

// A token's bits alone (groups of one) and in batches of every group size, at offsets placing it
// first, inside and last in its group, the last group partial; with and without the norm. Every
// window's tokens are compared with the whole batch's, and a sample of the batch with each token
// alone.
TEST(HeadClusterBatch, TokenBitsDoNotDependOnTheBatch) {
  MHC_SKIP_WITHOUT_HEAD_CLUSTER();
  constexpr int64_t kBatch = 4096 + 13;
  // (tokens, first token): groups of 1 (7, 16), of 4 (17, 64; and 1031 at C = 7168), of 8
  // (1031, 4096 at C <= 5120).
  const std::pair<int64_t, int64_t> windows[] = {
      {7, 2}, {16, 9}, {17, 1}, {64, 3}, {1031, 0}, {1031, 5}, {1031, 13}, {4096, 13}, {kBatch, 0}};
  for (int hidden : {4096, 7168}) {
    const HeadCase c = test::random_head_case(test::small_params(4, hidden), kBatch, 29);
    const MhcParams& p = c.p;
    DeviceHead all(c);
    for (bool norm : {false, true}) {
      const auto batch = all.run(p, kBatch, norm, kCluster);
      for (const auto& [tokens, first] : windows) {
        const auto got = all.run(p, tokens, norm, kCluster, first);
        for (int64_t m = first; m < first + tokens; ++m) {
          ASSERT_TRUE(test::same_finite_bits(token_row(got.first, m, p.hidden),
                                             token_row(batch.first, m, p.hidden)) &&
                      test::same_finite_bits(token_row(got.second, m, p.n),
                                             token_row(batch.second, m, p.n)))
              << "token " << m << " in " << tokens << " from " << first << ", C=" << hidden
              << " norm " << norm;
        }
      }
      for (int64_t m : {int64_t{0}, int64_t{3}, int64_t{7}, int64_t{8}, int64_t{1030},
                        int64_t{2049}, kBatch - 2, kBatch - 1}) {
        const auto alone = all.run(p, 1, norm, kCluster, m);
        EXPECT_TRUE(test::same_finite_bits(token_row(alone.first, m, p.hidden),
                                           token_row(batch.first, m, p.hidden)))
            << "token " << m << " C=" << hidden << " norm " << norm;
      }
    }
  }
}

// Small, for compute-sanitizer (device-validate runs Sanitize*): every group size, with and
// without the norm, a bf16 norm weight, at a small C (most threads of a CTA hold no vector).
TEST(SanitizeHeadCluster, EveryGroupSizeSmall) {
  MHC_SKIP_WITHOUT_HEAD_CLUSTER();
  for (int64_t tokens : {1, 17, 1031}) {
    const HeadCase c = test::random_head_case(test::small_params(4, 256), tokens, 31);
    DeviceHead d(c);
    for (bool norm : {false, true}) {
      const auto [out, weights] = d.run(c.p, tokens, norm, kCluster);
      expect_matches_reference(c, norm, out, weights);
    }
    std::vector<Bf16> norm_bf16;
    for (float v : c.norm_weight) norm_bf16.push_back(float_to_bf16(v));
    const auto weight_bf16 = test::to_device(norm_bf16);
    cuda::HeadBuffers b = d.buffers(c.p, false);
    b.norm_weight_bf16 = weight_bf16.get();
    d.out.fill_bytes(0xFF);
    d.weights.fill_bytes(0xFF);
    cuda::head(c.p, tokens, b, test::head_stream(), kCluster);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    HeadCase widened = c;
    for (size_t i = 0; i < norm_bf16.size(); ++i) {
      widened.norm_weight[i] = bf16_to_float(norm_bf16[i]);
    }
    expect_matches_reference(widened, true, to_host(d.out), to_host(d.weights));
  }
}

}  // namespace
}  // namespace mhc
