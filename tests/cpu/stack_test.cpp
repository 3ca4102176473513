// The fp32 CPU stack against the float64 reference stack, and its agreement with site-by-site
// runs. Bounds are the measured errors with a margin; see docs/numerics.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/core/backend.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc {
namespace {

struct StackErrors {
  std::vector<ErrorStats> x_after_layer;
  ErrorStats last_pre, output;
};

StackErrors stack_errors(const ModelWeights& w, int64_t tokens, uint64_t embedding_seed) {
  const std::vector<Bf16> x0 = synthetic_embeddings(w.params, tokens, embedding_seed);
  const StackTrace got = cpu_stack(w, tokens, x0.data());
  const StackReference want = reference_stack(w, tokens, x0.data());
  StackErrors e;
  EXPECT_EQ(got.x_after_layer.size(), size_t(w.params.layers));
  EXPECT_EQ(want.x_after_layer.size(), size_t(w.params.layers));
  for (size_t l = 0; l < got.x_after_layer.size() && l < want.x_after_layer.size(); ++l) {
    e.x_after_layer.push_back(compare(got.x_after_layer[l].data(), want.x_after_layer[l].data(),
                                      int64_t(want.x_after_layer[l].size())));
  }
  e.last_pre = compare(got.last_pre.data(), want.last_pre.data(), int64_t(want.last_pre.size()));
  e.output = compare(got.output.data(), want.output.data(), int64_t(want.output.size()));
  return e;
}

void print_growth(const char* label, const StackErrors& e) {
  for (size_t l = 0; l < e.x_after_layer.size(); ++l) {
    std::printf("[ stack    ] %s layer %2zu x: %s\n", label, l,
                e.x_after_layer[l].describe().c_str());
  }
  std::printf("[ stack    ] %s last_pre: %s\n", label, e.last_pre.describe().c_str());
  std::printf("[ stack    ] %s output:   %s\n", label, e.output.describe().c_str());
}

// The library's stack bounds (mhc/cpu/compare.hpp, derived in docs/numerics.md): one flipped bf16
// ulp plus a random-walk growth of bf16 rounding noise with depth.
double x_bound_after_layer(size_t layer) { return stack_x_tolerance(int(layer) + 1); }

void expect_within(const StackErrors& e, double pre_bound, double out_bound) {
  for (size_t l = 0; l < e.x_after_layer.size(); ++l) {
    EXPECT_TRUE(e.x_after_layer[l].passes(x_bound_after_layer(l)))
        << "layer " << l << " (bound " << x_bound_after_layer(l)
        << "): " << e.x_after_layer[l].describe();
  }
  EXPECT_TRUE(e.last_pre.passes(pre_bound)) << "last_pre: " << e.last_pre.describe();
  EXPECT_TRUE(e.output.passes(out_bound)) << "output: " << e.output.describe();
}

TEST(CpuStack, SmallModelTracksTheReference) {
  MhcParams p = test::small_params(4, 512, 4);
  const ModelWeights w = synthetic_model(p, 21);
  const StackErrors e = stack_errors(w, 3, 22);
  print_growth("C=512 L=4 M=3", e);
  expect_within(e, kFp32Tolerances.coefficients, 1e-2);
}

TEST(CpuStack, TwoStreamModelTracksTheReference) {
  MhcParams p = test::small_params(2, 256, 6);
  const ModelWeights w = synthetic_model(p, 23);
  const StackErrors e = stack_errors(w, 5, 24);
  print_growth("n=2 C=256 L=6 M=5", e);
  expect_within(e, kFp32Tolerances.coefficients, 1e-2);
}

// The real preset: DeepSeek-V4.1-Flash, all 80 sites.
TEST(CpuStack, Dsv41FlashTracksTheReference) {
  const auto start = std::chrono::steady_clock::now();
  const ModelWeights w = synthetic_model(preset("dsv41-flash"), 31);
  const StackErrors e = stack_errors(w, 2, 32);
  print_growth("dsv41-flash M=2", e);
  expect_within(e, kStackPreTolerance, kStackOutputTolerance);
  std::printf("[ stack    ] dsv41-flash M=2 took %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace
}  // namespace mhc
