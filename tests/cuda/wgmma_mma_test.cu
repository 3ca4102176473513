// The numerical fact the batch-invariant decode kernel (sm90_prenorm_leaf.cuh) rests on: a chain
// of k8 steps of mma.sync.m16n8k8 TF32 with B truncated to TF32 gives bitwise the accumulators of
// wgmma.m64n24k8 TF32 (B read from 128-byte-swizzled shared memory, truncated by the hardware),
// for the same A bits and k order. Operands spread over 2^+-20; outputs poisoned. The same chain
// with B rounded (cvt.rna) must differ: the comparison can fail. sm_90a only (skips elsewhere).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/sm90_wgmma.cuh"

namespace mhc {
namespace {

constexpr int kRows = 64, kN = 24, kChunks = 20, kK = kChunks * 32;
constexpr int kBoxBytes = kN * 128;  // one chunk of B: 24 rows of 32 fp32, 1024-byte aligned

__device__ int swizzled(int row, int chunk16) { return row * 128 + ((chunk16 ^ (row & 7)) << 4); }

__device__ void a_fragment(const uint16_t* x, int row, int k0, int t, uint32_t (&a)[4]) {
  a[0] = uint32_t(x[row * kK + k0 + t]) << 16;
  a[1] = uint32_t(x[(row + 8) * kK + k0 + t]) << 16;
  a[2] = uint32_t(x[row * kK + k0 + t + 4]) << 16;
  a[3] = uint32_t(x[(row + 8) * kK + k0 + t + 4]) << 16;
}

__device__ void store_fragment(float* out, int warp, int lane, const float (&d)[12]) {
  const int g = lane / 4, t = lane % 4;
  for (int e = 0; e < 12; ++e) {
    const int row = 16 * warp + g + 8 * ((e % 4) / 2), col = (e / 4) * 8 + 2 * t + e % 2;
    out[row * kN + col] = d[e];
  }
}

__global__ void __launch_bounds__(128) chain_wgmma(const uint16_t* x, const float* w, float* out) {
  extern __shared__ __align__(1024) unsigned char boxes[];
  for (int i = int(threadIdx.x); i < kN * kK; i += blockDim.x) {
    const int n = i / kK, k = i % kK, kk = k % 32;
    *reinterpret_cast<float*>(boxes + (k / 32) * kBoxBytes + swizzled(n, kk / 4) + (kk % 4) * 4) =
        w[n * kK + k];
  }
  cuda::fence_shared_for_async_writes();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float d[12] = {};
  for (int k0 = 0; k0 < kK; k0 += 8) {
    uint32_t a[4];
    a_fragment(x, 16 * warp + lane / 4, k0, lane % 4, a);
    cuda::wgmma_fence();
    cuda::wgmma_tf32<kN>(
        d, a, cuda::wgmma_descriptor_sw128(boxes + (k0 / 32) * kBoxBytes + 4 * (k0 % 32)));
    cuda::wgmma_commit();
    cuda::wgmma_wait<0>();
  }
  store_fragment(out, warp, lane, d);
}

template <bool kRound>
__global__ void chain_mma(const uint16_t* x, const float* w, float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float acc[3][4] = {};
  for (int k0 = 0; k0 < kK; k0 += 8) {
    uint32_t a[4];
    a_fragment(x, 16 * warp + g, k0, t, a);
    for (int nt = 0; nt < 3; ++nt) {
      const float f0 = w[(nt * 8 + g) * kK + k0 + t], f1 = w[(nt * 8 + g) * kK + k0 + t + 4];
      const uint32_t b0 = kRound ? cuda::to_tf32(f0) : __float_as_uint(f0) & 0xffffe000u;
      const uint32_t b1 = kRound ? cuda::to_tf32(f1) : __float_as_uint(f1) & 0xffffe000u;
      cuda::mma_tf32(acc[nt], a, b0, b1);
    }
  }
  float d[12];
  for (int e = 0; e < 12; ++e) d[e] = acc[e / 4][e % 4];
  store_fragment(out, warp, lane, d);
}

TEST(Sm90Numerics, MmaSyncWithTruncatedBEqualsWgmma) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  if (!plan.image || !plan.image->has_wgmma()) GTEST_SKIP() << "wgmma needs the sm_90a image";
  const int smem = kChunks * kBoxBytes;
  MHC_CUDA_CHECK(
      cudaFuncSetAttribute(chain_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int trial = 0; trial < 6; ++trial) {
    std::mt19937 rng(4100 + trial);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> exponent(-20, 20);
    std::vector<Bf16> x(kRows * kK);
    std::vector<float> w(kN * kK);
    for (Bf16& v : x) v = float_to_bf16(std::ldexp(normal(rng), trial % 2 ? exponent(rng) : 0));
    for (float& v : w) v = std::ldexp(normal(rng), trial % 3 == 0 ? exponent(rng) : 0);
    const auto dx = test::to_device(x);
    const auto dw = test::to_device(w);
    auto wgmma = test::poisoned<float>(kRows * kN), truncated = test::poisoned<float>(kRows * kN),
         rounded = test::poisoned<float>(kRows * kN);
    const auto* xb = reinterpret_cast<const uint16_t*>(dx.get());
    chain_wgmma<<<1, 128, smem>>>(xb, dw.get(), wgmma.get());
    chain_mma<false><<<1, 128>>>(xb, dw.get(), truncated.get());
    chain_mma<true><<<1, 128>>>(xb, dw.get(), rounded.get());
    MHC_CUDA_CHECK(cudaGetLastError());
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> want = test::to_host(wgmma);
    for (float v : want) ASSERT_FALSE(std::isnan(v)) << "trial " << trial;
    EXPECT_TRUE(test::same_bits(test::to_host(truncated), want)) << "trial " << trial;
    EXPECT_FALSE(test::same_bits(test::to_host(rounded), want))
        << "trial " << trial << ": rounding B must change the bits (else the check is blind)";
  }
}

}  // namespace
}  // namespace mhc
