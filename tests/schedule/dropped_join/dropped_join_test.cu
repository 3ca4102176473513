// The ordering tests bite: linked with a schedule whose join is dropped (dropped_join.cpp), the
// checks that test_schedule makes (overlap bitwise equal to native while one stream is delayed)
// must see a difference, on the toy stack and on the executor's real kernels. If these pass, so
// would test_schedule's on a broken schedule and they would prove nothing.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "mhc/schedule/two_stream.hpp"
#include "schedule/delay_observer.hpp"
#include "schedule/stack_test_util.hpp"
#include "schedule/toy_stack.cuh"

namespace mhc::cuda {
namespace {

using test::DelayObserver;

class DroppedJoin : public test::WithStream<> {
 protected:
  void TearDown() override {
    // Nothing joins the side stream back: wait for all of it before the buffers go (when the
    // test ran: without a GPU SetUp skipped it and made no stream).
    if (stream_ != nullptr) MHC_CUDA_CHECK(cudaDeviceSynchronize());
    WithStream::TearDown();
  }
};

TEST_F(DroppedJoin, ToyStackOverlapDiffersFromNativeWhenTheSideStreamIsLate) {
  test::ToyStack stack(8);
  StackSchedule schedule(8);
  const auto x0 = test::random_input(1);
  stack.reset(stream_, x0);
  schedule.enqueue(stream_, false, stack.launches());
  const auto native = stack.result(stream_);
  DelayObserver late_side(2'000'000, 0);
  stack.reset(stream_, x0);
  schedule.enqueue(stream_, true, stack.launches(), &late_side);
  const auto overlap = stack.result(stream_);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_FALSE(test::bitwise_equal(overlap, native))
      << "without the join the post must read stale coefficients";
}

TEST_F(DroppedJoin, ExecutorOverlapDiffersFromNativeWhenTheSideStreamIsLate) {
  const MhcParams p = test::small_stack(5120, 4, 4);
  const ModelWeights w = synthetic_model(p, 3);
  StackOptions opt;
  opt.max_tokens = 8;
  StackExecutor ex(w, test::overlap_everywhere(), opt);
  test::load_inputs(ex, 8, 5, true, stream_);
  ex.enqueue_schedule(8, false, stream_);
  const auto native = test::results(ex, 8, stream_);
  DelayObserver late_side(2'000'000, 0);
  ex.enqueue_schedule(8, true, stream_, &late_side);
  const auto overlap = test::results(ex, 8, stream_);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_NE(overlap, native) << "without the join the posts must read stale coefficients";
}

}  // namespace
}  // namespace mhc::cuda
