// A toy stack for the schedule tests: every stage depends on the previous ones, so any missing
// edge between the two streams shows up as a different result. Everything here has internal
// linkage: include it from one source file per test binary.
#pragma once
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "mhc/cuda/check.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda::test {
namespace {

constexpr int kN = 4096;

// coef = mean(x) * 0.5 + site, computed by one block in a fixed order (a toy coefficient path).
// Like mhc's coefficient kernels it waits for its producer (griddepcontrol.wait) before reading
// x, so that a programmatic edge into it (StackSchedule's programmatic fork) is safe; without a
// programmatic dependency the wait returns at once.
__global__ void toy_coefficients(const float* x, float* coef, int site) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
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

// Lets a programmatic dependent start at once (as mhc's posts do), so that a programmatic fork
// really starts the next coefficients early.
__global__ void toy_post(const float* x, const float* coef, const float* f, float* x_next) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
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

}  // namespace
}  // namespace mhc::cuda::test
