// Batch-invariant decode on sm_90: the TMA kernel's batch-invariant order (sm90_prenorm_tma.cuh,
// one leaf per split) computed by a launch shaped for 1-16 tokens, so that a token run alone
// gets the bits it gets in a batch of thousands, at about the default decode kernel's cost.
//
// Why. In batch-invariant mode every size runs the TMA kernel's order. At decode sizes its
// 128-row tiles, 4-stage ring and warpgroup MMAs cost well above the default's register-fed
// kernel (docs/batch_invariance.md). This kernel computes the same numbers differently: one CTA
// per leaf and 8 output columns stages its slice of hc_fn and the tokens' x in shared memory with
// cp.async, kLeafChains warps run the leaf's accumulation chains with mma.sync k-steps, and (in
// the first column tile's CTA) kLeafSumsqChains warps the sums of squares; then the TMA kernel's
// own epilogue (finish_prenorm_tile) reduces the leaves.
// Splitting a leaf's columns over CTAs spreads hc_fn over three times as many SMs, and its k
// steps over kLeafChains warps the MMAs over the SM's four tensor cores.
//
// Why the bits are the TMA kernel's. Per token row and leaf that kernel computes, from zero,
// D_c += A_k B_k over the leaf's k8 steps k in ascending order into chain c = k % kLeafChains
// with wgmma.m64nNk8 (A: x widened exactly to TF32 bits; B: hc_fn, which wgmma truncates to
// TF32), and the row's sum of squares as fmaf chains per lane over its fragment elements (chunk,
// k step, row half, k half; k step k into chain k % kLeafSumsqChains); then the chains pairwise
// (sum_chains) and a quad butterfly. Here: mma.sync.m16n8k8 with the same A bits, B masked to
// TF32 (truncation), the same chains in the same k order, and the same sums. mma.sync and wgmma
// give the same bits for the same TF32 operands and order: checked on an H200
// (tests/cuda/wgmma_mma_test.cu), and the batch-invariance tests compare every token of 1-16
// token batches (this kernel) with the same token at 17+ (the TMA kernel). The partial blocks land
// where the TMA kernel puts them, and the same finish_prenorm_tile adds the tree over the leaves
// and runs the stats.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/prenorm_launch_checks.cuh"

namespace mhc::cuda {

template <int kStreams>
struct LeafShape {
  static constexpr int kNmix = kStreams * (kStreams + 2);
  static constexpr int kNTiles = kNmix / 8;
  static constexpr int kStride = kNmix + 1;
  static constexpr int kRows = 16;  // one m16 tile: 1-16 tokens
  // All threads copy; one MMA warp and one sum-of-squares warp compute. 256 threads also fit the
  // fused input-path CTAs (row_kernel_threads(C) <= 256 for C <= kFusedInputMaxHidden).
  static constexpr int kThreads = 256;
  static constexpr int kStageK = 128;  // the TMA kernel's stage: a leaf is whole stages
  // Shared row pitches, padded so that a fragment load (8 rows x 4 k) hits 32 different banks.
  __host__ __device__ static constexpr int w_pitch(int leaf_k) { return leaf_k + 4; }  // floats
  __host__ __device__ static constexpr int x_pitch(int leaf_k) { return leaf_k + 8; }  // bf16
  __host__ __device__ static constexpr size_t smem_bytes(int leaf_k) {
    return size_t(8) * w_pitch(leaf_k) * 4 + size_t(kRows) * x_pitch(leaf_k) * 2;
  }
};

inline constexpr int kLeafDecodeMaxTokens = LeafShape<4>::kRows;
inline constexpr size_t kLeafDecodeMaxSmem = 227 * 1024;  // sm_90's opt-in maximum per CTA

namespace detail {

// Waits until the weights and token stage `s` of `stages` have landed: the groups after it are
// still allowed in flight (at most 7: the immediate's range; waiting for fewer is only stricter).
__device__ __forceinline__ void cp_async_wait_stage(int s, int stages) {
  switch (min(stages - s - 1, 7)) {
    case 0:
      cp_async_wait<0>();
      break;
    case 1:
      cp_async_wait<1>();
      break;
    case 2:
      cp_async_wait<2>();
      break;
    case 3:
      cp_async_wait<3>();
      break;
    case 4:
      cp_async_wait<4>();
      break;
    case 5:
      cp_async_wait<5>();
      break;
    case 6:
      cp_async_wait<6>();
      break;
    default:
      cp_async_wait<7>();
      break;
  }
}

// The leaf's hc_fn rows 8nt..8nt+7 [8][leaf] into shared memory: one cp.async group. Issued before
// the wait for the previous kernel (hc_fn is a weight, no kernel before this one writes it), so its
// latency hides behind the previous kernel's tail under PDL.
template <int kStreams>
__device__ __forceinline__ void copy_leaf_weights(const PrenormArgs& args, int64_t k_begin,
                                                  int stages, int leaf_k, int nt, float* w_s) {
  using S = LeafShape<kStreams>;
  constexpr int kPerRow = S::kStageK / 4;  // 16-byte copies per row and stage
  const int copies = 8 * stages * kPerRow;
  for (int i = int(threadIdx.x); i < copies; i += S::kThreads) {
    const int n = i / (stages * kPerRow), k = (i % (stages * kPerRow)) * 4;
    cp_async_16(w_s + n * S::w_pitch(leaf_k) + k,
                args.hc_fn + (nt * 8 + n) * int64_t(args.k) + k_begin + k, true);
  }
  cp_async_commit();
}

// Stage s of the leaf's token rows [16][128] into shared memory (rows at or past `rows`
// zero-filled): one cp.async group.
template <int kStreams>
__device__ __forceinline__ void copy_leaf_tokens(const PrenormArgs& args, int64_t k_begin, int s,
                                                 int leaf_k, int rows, uint16_t* x_s) {
  using S = LeafShape<kStreams>;
  constexpr int kPerRow = S::kStageK / 8;
  for (int i = int(threadIdx.x); i < S::kRows * kPerRow; i += S::kThreads) {
    const int r = i / kPerRow, k = s * S::kStageK + (i % kPerRow) * 8;
    const bool valid = r < rows;
    cp_async_16(x_s + r * S::x_pitch(leaf_k) + k,
                args.x + int64_t(valid ? r : 0) * args.k + k_begin + k, valid);
  }
  cp_async_commit();
}

// MMA warp `chain`: the CTA's 8 columns over the k steps of stage s in that chain (k step i of
// the leaf into chain i % kLeafChains; a stage is 16 k steps, so the chains restart with each
// stage), in ascending k: one wgmma chain of the TMA kernel.
template <int kStreams>
__device__ __forceinline__ void leaf_stage_mma(const float* w_s, const uint16_t* x_s, int leaf_k,
                                               int s, int chain, float (&acc)[4]) {
  using S = LeafShape<kStreams>;
  static_assert((S::kStageK / 8) % kLeafChains == 0, "every stage covers the chains evenly");
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const uint16_t* x0 = x_s + g * S::x_pitch(leaf_k) + s * S::kStageK + 8 * chain + t;
  const uint16_t* x8 = x0 + 8 * S::x_pitch(leaf_k);
  const float* w = w_s + g * S::w_pitch(leaf_k) + s * S::kStageK + 8 * chain + t;
#pragma unroll
  for (int k = 0; k < S::kStageK; k += 8 * kLeafChains) {
    const uint32_t a[4] = {uint32_t(x0[k]) << 16, uint32_t(x8[k]) << 16, uint32_t(x0[k + 4]) << 16,
                           uint32_t(x8[k + 4]) << 16};
    // wgmma reads hc_fn as TF32 by dropping the low 13 bits: the same here.
    mma_tf32(acc, a, __float_as_uint(w[k]) & 0xffffe000u, __float_as_uint(w[k + 4]) & 0xffffe000u);
  }
}

// Sum-of-squares warp `chain` over stage s: lane (g, t) squares the A fragment elements the TMA
// kernel's lane squares (load_a_fragments) for the k steps of its chain (k step i into chain
// i % kLeafSumsqChains), in that kernel's order: k step, row half r, k half h.
template <int kStreams>
__device__ __forceinline__ void leaf_stage_sumsq(const uint16_t* x_s, int leaf_k, int s, int chain,
                                                 float (&sumsq)[2]) {
  using S = LeafShape<kStreams>;
  static_assert((S::kStageK / 8) % kLeafSumsqChains == 0, "every stage covers the chains evenly");
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const uint16_t* x0 = x_s + g * S::x_pitch(leaf_k) + s * S::kStageK + 8 * chain + t;
#pragma unroll
  for (int k = 0; k < S::kStageK; k += 8 * kLeafSumsqChains) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v = __uint_as_float(uint32_t(x0[r * 8 * S::x_pitch(leaf_k) + k + 4 * h]) << 16);
        sumsq[r] = fmaf(v, v, sumsq[r]);
      }
    }
  }
}

}  // namespace detail

template <int kStreams>
__global__ void __launch_bounds__(LeafShape<kStreams>::kThreads, 1)
    sm90_prenorm_leaf_kernel(const PrenormArgs args) {
// Only where the TMA kernel, whose bits it reproduces, exists (the sm_90a image).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = LeafShape<kStreams>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float sums[S::kRows * S::kStride];
  __shared__ int is_last_cta;
  // blockIdx.y: (leaf split, column tile) pairs, then the fused input-path CTAs.
  const int gemm_ctas = args.splits * S::kNTiles;
  const int rows = static_cast<int>(args.tokens);  // one tile: at most kRows
  if (int(blockIdx.y) >= gemm_ctas) {              // a fused input-path CTA: one token's input path
    allow_dependents();
    wait_for_producer();
    fused_input_path_token<kStreams>(args, int(blockIdx.y) - gemm_ctas, sums);
    return;
  }
  const int split = int(blockIdx.y) / S::kNTiles, nt = int(blockIdx.y) % S::kNTiles;
  // This split's leaf: the TMA kernel's stage range for it (trailing leaves may be short or
  // empty), one leaf per split.
  const int stage_begin = split * (args.chunks_per_split / 4);
  const int stage_end = min(args.k / S::kStageK, stage_begin + args.leaf_chunks / 4);
  const int stages = max(0, stage_end - stage_begin);
  const int leaf_k = args.leaf_chunks * 32;
  float* w_s = reinterpret_cast<float*>(smem);
  uint16_t* x_s = reinterpret_cast<uint16_t*>(smem + size_t(8) * S::w_pitch(leaf_k) * 4);
  const int64_t k_begin = int64_t(stage_begin) * S::kStageK;
  detail::copy_leaf_weights<kStreams>(args, k_begin, stages, leaf_k, nt, w_s);  // group 0
  allow_dependents();
  wait_for_producer();  // x comes from the previous kernel
  for (int s = 0; s < stages; ++s) {
    detail::copy_leaf_tokens<kStreams>(args, k_begin, s, leaf_k, rows, x_s);  // group 1 + s
  }

  // Warps 0..kLeafChains-1: one MMA chain each (one warp's mma.sync issue rate bounds a chain);
  // the next kLeafSumsqChains warps, in the first column tile's CTA only: the rows' sums of
  // squares (once per leaf). The chains meet in shared memory and are summed as sum_chains does.
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  static_assert(kLeafChains + kLeafSumsqChains <= S::kThreads / kWarp, "a warp per chain");
  const bool mma_warp = warp < kLeafChains;
  const bool sumsq_warp = nt == 0 && warp >= kLeafChains && warp < kLeafChains + kLeafSumsqChains;
  __shared__ float4 chain_acc[kLeafChains][kWarp];
  __shared__ float2 chain_sumsq[kLeafSumsqChains][kWarp];
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  float sumsq[2] = {0.f, 0.f};
  for (int s = 0; s < stages; ++s) {
    detail::cp_async_wait_stage(s, stages);
    __syncthreads();  // every thread's copies of stage s landed
    if (mma_warp) {
      detail::leaf_stage_mma<kStreams>(w_s, x_s, leaf_k, s, warp, acc);
    } else if (sumsq_warp) {
      detail::leaf_stage_sumsq<kStreams>(x_s, leaf_k, s, warp - kLeafChains, sumsq);
    }
  }
  if (mma_warp) chain_acc[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  if (sumsq_warp) chain_sumsq[warp - kLeafChains][lane] = make_float2(sumsq[0], sumsq[1]);
  __syncthreads();
  if (warp == 0) {
    float chains[kLeafChains][4];
#pragma unroll
    for (int c = 0; c < kLeafChains; ++c) {
      const float4 v = chain_acc[c][lane];
      chains[c][0] = v.x, chains[c][1] = v.y, chains[c][2] = v.z, chains[c][3] = v.w;
    }
    detail::sum_chains(chains);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] = chains[0][e];
  } else if (warp == kLeafChains && nt == 0) {
    float chains[kLeafSumsqChains][2];
#pragma unroll
    for (int c = 0; c < kLeafSumsqChains; ++c) {
      chains[c][0] = chain_sumsq[c][lane].x, chains[c][1] = chain_sumsq[c][lane].y;
    }
    detail::sum_chains(chains);
    sumsq[0] = group_sum<4>(chains[0][0]);
    sumsq[1] = group_sum<4>(chains[0][1]);
  }

  // The leaf's values as the TMA kernel stores them: partial block `split` of tile 0, or straight
  // to `sums` when the leaf is the whole tree; each CTA its 8 columns.
  const int n_out_padded = padded_partial_floats<kStreams>(rows);
  const int blocks = partial_blocks(args);
  float* dest = blocks == 1 ? sums : args.partials + int64_t(split) * n_out_padded;
  if (warp == 0) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >= 2 ? 8 : 0);
      if (row < rows) dest[row * S::kStride + nt * 8 + 2 * t + (e & 1)] = acc[e];
    }
  } else if (warp == kLeafChains && nt == 0 && t == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (g + 8 * h < rows) dest[(g + 8 * h) * S::kStride + S::kNmix] = sumsq[h];
    }
  }
  static_assert(staged_output_floats<kStreams>(S::kRows) <= 8 * S::w_pitch(S::kStageK),
                "the outputs fit where hc_fn was staged (a leaf is at least one stage)");
  finish_prenorm_tile<kStreams, S::kThreads, S::kRows>(args, 0, 0, rows, sums, args.partials,
                                                       n_out_padded, reinterpret_cast<float*>(smem),
                                                       &is_last_cta, gemm_ctas);
#endif
}

// Whether the launch can take this kernel: batch-invariant TF32 order of the TMA kernel with one
// leaf per split, one tile of at most 16 tokens, a leaf that fits in shared memory, no folded
// previous post, and the leaves meeting in partial blocks. Host-side, after the batch-invariant
// split fields are set.
template <int kStreams>
bool leaf_decode_fits(const PrenormArgs& args) {
  // With one leaf in all (one partial block) the column CTAs could not meet: the TMA kernel then.
  const bool blocks_meet = partial_blocks(args) > 1 || LeafShape<kStreams>::kNTiles == 1;
  return blocks_meet && args.leaf_chunks > 0 && args.leaves_per_split == 1 && args.tokens >= 1 &&
         args.tokens <= LeafShape<kStreams>::kRows && args.previous.x == nullptr &&
         LeafShape<kStreams>::smem_bytes(args.leaf_chunks * 32) <= kLeafDecodeMaxSmem;
}

// launch_sm90_prenorm_leaf's preconditions: prenorm_args_valid and leaf_decode_fits, leaves of
// whole kStageK stages (the kernel stages a leaf's hc_fn in shared memory sized by leaf_chunks and
// cuts K by chunks_per_split / 4), and the fused input path's row cut within the CTA's threads.
template <int kStreams>
inline bool leaf_args_valid(const PrenormArgs& a) {
  using S = LeafShape<kStreams>;
  constexpr int kStageChunks = S::kStageK / 32;
  return prenorm_args_valid<kStreams>(a) && leaf_decode_fits<kStreams>(a) &&
         fused_input_fits(a, S::kThreads) && a.leaf_chunks % kStageChunks == 0 &&
         a.chunks_per_split % kStageChunks == 0;
}

// Raw launcher: refuses arguments outside leaf_args_valid (cudaErrorInvalidValue);
// mhc::cuda::prenorm_coefficients checks them with messages.
template <int kStreams>
cudaError_t launch_sm90_prenorm_leaf(const PrenormArgs& args, LaunchTarget on) {
  using S = LeafShape<kStreams>;
  if (!leaf_args_valid<kStreams>(args)) return cudaErrorInvalidValue;
  const size_t smem = S::smem_bytes(args.leaf_chunks * 32);
  const auto kernel = sm90_prenorm_leaf_kernel<kStreams>;
  if (const cudaError_t err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      err != cudaSuccess) {
    return err;
  }
  const int64_t input_ctas = args.input.layer_input == nullptr ? 0 : args.tokens;
  const dim3 grid(1, static_cast<unsigned>(args.splits * S::kNTiles + input_ctas));
  return launch_kernel(kernel, grid, dim3(S::kThreads), smem, on, args);
}

}  // namespace mhc::cuda
