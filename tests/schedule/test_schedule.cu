// The two-stream schedule on a toy stack whose every stage depends on the previous ones, so any
// missing edge shows up as a different result. Native and overlap must agree bitwise, eagerly and
// in CUDA graphs, also when either stream is delayed by a spin kernel.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda {
namespace {

constexpr int kN = 4096;

// coef = mean(x) * 0.5 + site, computed by one block in a fixed order (a toy coefficient path).
__global__ void toy_coefficients(const float* x, float* coef, int site) {
  __shared__ float partial[256];
  float acc = 0;
  for (int i = threadIdx.x; i < kN; i += blockDim.x) acc += x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *coef = partial[0] / kN * 0.5f + float(site) * 0.01f;
}

__global__ void toy_input_path(const float* x, const float* pre_mix, float* layer_input) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) layer_input[i] = x[i] * (*pre_mix) + 1.0f;
}

__global__ void toy_sublayer(const float* layer_input, float* f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) f[i] = sinf(layer_input[i]);
}

__global__ void toy_post(const float* x, const float* coef, const float* f, float* x_next) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) x_next[i] = x[i] * (*coef) + f[i];
}

struct ToyStack {
  int sites;
  float* x[2];     // ping-pong streams
  float* coef[2];  // ping-pong: the input path reads the previous site's while the side writes
  float *layer_input, *f;
  explicit ToyStack(int s) : sites(s) {
    for (int i = 0; i < 2; ++i) {
      MHC_CUDA_CHECK(cudaMalloc(&x[i], kN * sizeof(float)));
      MHC_CUDA_CHECK(cudaMalloc(&coef[i], sizeof(float)));
    }
    MHC_CUDA_CHECK(cudaMalloc(&layer_input, kN * sizeof(float)));
    MHC_CUDA_CHECK(cudaMalloc(&f, kN * sizeof(float)));
  }
  ~ToyStack() {
    for (int i = 0; i < 2; ++i) {
      cudaFree(x[i]);
      cudaFree(coef[i]);
    }
    cudaFree(layer_input);
    cudaFree(f);
  }
  void reset(cudaStream_t st, const std::vector<float>& x0) {
    const float one = 1.0f;
    MHC_CUDA_CHECK(
        cudaMemcpyAsync(x[0], x0.data(), kN * sizeof(float), cudaMemcpyHostToDevice, st));
    MHC_CUDA_CHECK(cudaMemcpyAsync(coef[1], &one, sizeof(float), cudaMemcpyHostToDevice, st));
    MHC_CUDA_CHECK(cudaStreamSynchronize(st));
  }
  std::vector<SiteLaunches> launches() {
    std::vector<SiteLaunches> out;
    for (int s = 0; s < sites; ++s) {
      const int in = s % 2, outb = 1 - in;
      SiteLaunches l;
      l.input_path = [this, in, outb, s](cudaStream_t st) {
        toy_input_path<<<kN / 256, 256, 0, st>>>(x[in], coef[outb], layer_input);
      };
      l.coefficients = [this, in, outb, s](cudaStream_t st) {
        toy_coefficients<<<1, 256, 0, st>>>(x[in], coef[in], s);
      };
      l.sublayer = [this, in, outb, s](cudaStream_t st) {
        toy_sublayer<<<kN / 256, 256, 0, st>>>(layer_input, f);
      };
      l.post = [this, in, outb, s](cudaStream_t st) {
        toy_post<<<kN / 256, 256, 0, st>>>(x[in], coef[in], f, x[outb]);
      };
      out.push_back(l);
    }
    return out;
  }
  std::vector<float> result(cudaStream_t st) {
    std::vector<float> host(kN);
    MHC_CUDA_CHECK(cudaStreamSynchronize(st));
    MHC_CUDA_CHECK(
        cudaMemcpy(host.data(), x[sites % 2], kN * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }
};

std::vector<float> random_input(unsigned seed) {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i)
    v[i] = float((seed * 2654435761u + i * 40503u) % 1000) / 1000.0f - 0.5f;
  return v;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

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
  for (ScheduleDelays d :
       {ScheduleDelays{0, 0}, ScheduleDelays{2'000'000, 0}, ScheduleDelays{0, 2'000'000}}) {
    stack.reset(main_, x0);
    schedule.enqueue(main_, true, stack.launches(), d);
    EXPECT_TRUE(bitwise_equal(stack.result(main_), native))
        << "side delay " << d.side_cycles << " main delay " << d.main_cycles;
  }
  EXPECT_EQ(schedule.overlapped_sites(), 3 * 8);
  EXPECT_EQ(schedule.native_sites(), 8);
}

TEST_F(ScheduleTest, OverlapEqualsNativeInGraphReplays) {
  ToyStack stack(6);
  StackSchedule schedule(6);
  const auto launches = stack.launches();
  CapturedGraph native(main_, [&](cudaStream_t st) { schedule.enqueue(st, false, launches); });
  CapturedGraph overlap(main_, [&](cudaStream_t st) {
    schedule.enqueue(st, true, launches, ScheduleDelays{1'000'000, 0});
  });
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
