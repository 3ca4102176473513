// The two-stream schedule on a toy stack whose every stage depends on the previous ones, so any
// missing edge shows up as a different result. Native and overlap must agree bitwise, eagerly and
// in CUDA graphs, also when either stream is delayed by a spin kernel.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/two_stream.hpp"
#include "schedule/delay_observer.hpp"
#include "schedule/toy_stack.cuh"

namespace mhc::cuda {
namespace {

using test::bitwise_equal;
using test::DelayObserver;
using test::random_input;
using test::ToyStack;

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MHC_SKIP_WITHOUT_GPU();
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (main_) cudaStreamDestroy(main_);
  }
  cudaStream_t main_ = nullptr;
};

TEST_F(ScheduleTest, OverlapEqualsNativeEagerWithDelays) {
  ToyStack stack(8);
  StackSchedule schedule(8);
  const auto x0 = random_input(1);
  stack.reset(main_, x0);
  schedule.enqueue(main_, false, stack.launches());
  const auto native = stack.result(main_);
  for (DelayObserver d :
       {DelayObserver(0, 0), DelayObserver(2'000'000, 0), DelayObserver(0, 2'000'000)}) {
    stack.reset(main_, x0);
    schedule.enqueue(main_, true, stack.launches(), &d);
    EXPECT_TRUE(bitwise_equal(stack.result(main_), native))
        << "side delay " << d.side_cycles() << " main delay " << d.main_cycles();
  }
  EXPECT_EQ(schedule.overlapped_sites(), 3 * 8);
  EXPECT_EQ(schedule.native_sites(), 8);
}

TEST_F(ScheduleTest, OverlapEqualsNativeInGraphReplays) {
  ToyStack stack(6);
  StackSchedule schedule(6);
  const auto launches = stack.launches();
  CapturedGraph native(main_, [&](cudaStream_t st) { schedule.enqueue(st, false, launches); });
  DelayObserver side_delay(1'000'000, 0);
  CapturedGraph overlap(
      main_, [&](cudaStream_t st) { schedule.enqueue(st, true, launches, &side_delay); });
  for (unsigned replay = 0; replay < 5; ++replay) {
    const auto x0 = random_input(100 + replay);  // inputs change between replays
    stack.reset(main_, x0);
    native.replay(main_);
    const auto expect = stack.result(main_);
    stack.reset(main_, x0);
    overlap.replay(main_);
    EXPECT_TRUE(bitwise_equal(stack.result(main_), expect)) << "replay " << replay;
  }
}

TEST_F(ScheduleTest, GlobalCaptureRejectsHostSync) {
  // The capture mode used for every forward must turn a host synchronisation into an error.
  EXPECT_THROW(
      CapturedGraph(main_, [](cudaStream_t st) { MHC_CUDA_CHECK(cudaStreamSynchronize(st)); }),
      Error);
  cudaGetLastError();  // clear the sticky-free capture error
}

}  // namespace
}  // namespace mhc::cuda
