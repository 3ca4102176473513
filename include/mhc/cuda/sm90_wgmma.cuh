// Warpgroup MMA (wgmma, sm_90a only): the TF32 form with A in registers and B in shared memory,
// used by the TMA-fed prenorm kernel (sm90_prenorm_tma.cuh).
//
// Why wgmma there. With mma.sync every consumer warp loads the whole hc_fn stage from shared
// memory into registers and rounds it to TF32 itself: 8 warps x 12 KB of shared-memory reads
// and ~100 conversions per thread per stage, for 4 KB of its own tokens, which leaves the kernel
// issue-bound (docs/kernels.md has the Nsight Compute numbers). wgmma reads B from shared memory
// once per warpgroup of 4 warps, straight from the copy engine's swizzled layout, with no
// per-thread instructions.
//
// Numerics: wgmma's TF32 takes the top 19 bits of hc_fn's fp32 values (truncation), where the
// mma.sync kernels round to nearest. Both are TF32 projections; the error bound of the TF32
// tier (design doc, 2e-3) holds for both and is tested (tests/cuda/kernels_test.cpp).
//
// The register race of the design doc ("Known pitfalls"): A registers and the accumulators
// belong to the tensor cores from the wgmma that reads them until a wait_group that covers its
// commit group. Callers follow wgmma_fence -> wgmma... -> wgmma_commit -> wgmma_wait<N> and write
// an A register only once the group that read it is covered by a wait.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

// Whether this compilation pass has wgmma: the sm_90a image only.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
inline constexpr bool kDeviceHasWgmma = true;
#else
inline constexpr bool kDeviceHasWgmma = false;
#endif

// Shared-memory matrix descriptor of a K-major operand stored as 128-byte rows with the 128-byte
// swizzle (the layout the tensor copies write): rows of 8 x 128 bytes repeat every 1024 bytes
// (the stride between 8-row groups); the leading offset is unused for this layout. `tile` must be
// 1024-byte aligned up to the k offset inside the row, which is added as bytes (a k step of 8
// fp32 is 32 bytes): the hardware applies the swizzle to the final address.
__device__ __forceinline__ uint64_t wgmma_descriptor_sw128(const void* tile) {
  const uint64_t address = shared_address(tile);
  constexpr uint64_t kLeadingOffset = 1;         // 16 bytes, unused with this swizzle
  constexpr uint64_t kStrideOffset = 1024 >> 4;  // 8 rows x 128 bytes
  constexpr uint64_t kSwizzle128 = uint64_t(1) << 62;
  return ((address & 0x3FFFF) >> 4) | (kLeadingOffset << 16) | (kStrideOffset << 32) | kSwizzle128;
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Waits until at most kPending of this warpgroup's committed groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}

// D[64 x N] += A[64 x 8] * B[8 x N]^T, TF32 in, fp32 accumulate. Per warp w of the warpgroup and
// lane (g, t): a = {A[16w+g][t], A[16w+g+8][t], A[16w+g][t+4], A[16w+g+8][t+4]} as fp32 bits;
// d[4i + e] = D[16w + g + 8(e/2)][8i + 2t + e%2] (the mma.sync m16n8 accumulator layout, per
// 8 columns). B: N rows of K, K-major, at `b_desc`.
template <int kN>
__device__ __forceinline__ void wgmma_tf32(float (&d)[kN / 2], const uint32_t (&a)[4],
                                           uint64_t b_desc) {
  static_assert(kN == 8 || kN == 24, "instantiated for NMIX of n = 2 and n = 4");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kN == 8) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)
        : "memory");
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, %16, p, 1, 1;\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc)
        : "memory");
  }
#endif
}

}  // namespace mhc::cuda
