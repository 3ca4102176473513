// The kernel plan of the real device: the image the runtime reports loading must be the one the
// policy predicts from the build's images, and the plan must only offer what that image holds.
#include "mhc/cuda/device_plan.hpp"

#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"

namespace mhc {
namespace {

TEST(DevicePlan, RuntimeReportsThePredictedImageForEveryVariant) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = cuda::default_device_plan();
  const auto predicted = image_for(plan.capability, built_images());
  ASSERT_TRUE(predicted.has_value());
  const auto variants = cuda::query_prenorm_variants();
  ASSERT_EQ(variants.size(), 3u);
  for (const cuda::KernelVariantInfo& v : variants) {
    SCOPED_TRACE(std::string(to_string(v.kernel)));
    EXPECT_EQ(cuda::loaded_image(v), *predicted);
    EXPECT_EQ(v.binary_version, variants[0].binary_version) << "one image for all variants";
    EXPECT_EQ(v.local_bytes, 0u) << "no local memory (the ptxas check, seen at run time)";
  }
  EXPECT_TRUE(plan.image_queried);
  EXPECT_EQ(*plan.image, *predicted);
  EXPECT_EQ(plan.compiled_ahead_of_time(), !predicted->ptx);
}

TEST(DevicePlan, OffersOnlyWhatTheLoadedImageHolds) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = cuda::default_device_plan();
  EXPECT_EQ(plan.tma128_available, plan.image->has_sm90_instructions());
  EXPECT_EQ(cuda::tma_prenorm_available(), plan.tma128_available);
  if (plan.capability.is_sm90() && plan.image->has_wgmma()) {
    EXPECT_TRUE(plan.pdl);
    EXPECT_EQ(plan.prenorm_kernel(1 << 20), PrenormKernel::tma128);
  }
  const KernelConfig force = KernelConfig::parse(R"({"prenorm_kernel": "tma128"})");
  if (plan.tma128_available) {
    EXPECT_EQ(cuda::device_plan(force).prenorm_kernel(1), PrenormKernel::tma128);
  } else {
    EXPECT_THROW(cuda::device_plan(force), Error);
  }
}

}  // namespace
}  // namespace mhc
