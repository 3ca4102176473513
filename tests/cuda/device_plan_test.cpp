// The kernel plan of the real device: the image the runtime reports loading must be the one the
// policy predicts from the build's images, and the plan must only offer what that image holds.
#include "mhc/cuda/device_plan.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

TEST(DevicePlan, RuntimeReportsThePredictedImageForEveryVariant) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
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
  // The device it describes, and the facts only the runtime knows.
  int device = -1;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  EXPECT_EQ(plan.device, device);
  EXPECT_GT(plan.row_kernels_max_hidden, 0);
  EXPECT_EQ(plan.to_json(), cuda::device_plan(KernelConfig{}).to_json()) << "made twice, the same";
}

TEST(DevicePlan, OffersOnlyWhatTheLoadedImageHolds) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  EXPECT_EQ(plan.tma128_available, plan.image->has_sm90_instructions());
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

// Programmatic edges in a graph captured from two dependent post launches on one stream: PDL
// shows up as a programmatic dependency between the kernel nodes.
int programmatic_edges(const MhcParams& p, bool pdl) {
  LaunchOverrides o;
  o.pdl = pdl;  // false: without; true: the plan's
  const int64_t tokens = 3;
  const test::SiteCase c = test::random_site_case(p, tokens, 900, 1.0);
  auto x = test::to_device(c.x);
  auto f = test::to_device(c.sublayer_out);
  std::vector<float> post_h(size_t(tokens * p.n), 0.5f), comb_h(size_t(tokens * p.n * p.n), 0.25f);
  auto post_d = test::to_device(post_h);
  auto comb_d = test::to_device(comb_h);
  cuda::DeviceBuffer<Bf16> mid(c.x.size()), out(c.x.size());
  cudaStream_t stream = nullptr;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const LaunchTuning t = test::tuning(p, tokens, o);
  cuda::post(p, tokens, x.get(), post_d.get(), comb_d.get(), f.get(), mid.get(), nullptr, t,
             stream);
  cuda::post(p, tokens, mid.get(), post_d.get(), comb_d.get(), f.get(), out.get(), nullptr, t,
             stream);
  MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) {
    MHC_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  }
  int programmatic = 0;
  for (const cudaGraphEdgeData& e : data) {
    if (e.type == cudaGraphDependencyTypeProgrammatic) ++programmatic;
  }
  MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  MHC_CUDA_CHECK(cudaStreamDestroy(stream));
  EXPECT_EQ(count, 1u) << "two kernel nodes, one edge";
  return programmatic;
}

// The kernel config's pdl switch reaches the launches: the plan's tuning carries it, and a launch
// asked not to use PDL has a plain edge where the default has a programmatic one.
TEST(DevicePlan, PdlSwitchReachesTheLaunches) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const KernelPlan off = cuda::device_plan(KernelConfig::parse(R"({"pdl": false})"));
  EXPECT_FALSE(off.pdl);
  EXPECT_FALSE(off.tuning(p, 4).pdl);
  EXPECT_EQ(programmatic_edges(p, false), 0);
  if (!test::device_plan().pdl) GTEST_SKIP() << "this image has no PDL";
  EXPECT_TRUE(test::tuning(p, 4).pdl);
  EXPECT_EQ(programmatic_edges(p, true), 1) << "the default launches with PDL";
}

}  // namespace
}  // namespace mhc
