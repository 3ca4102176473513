// The coefficient path for large token counts on sm_90: the prenorm GEMM of prenorm_mma.cuh
// with the same split-K epilogue and stats (finish_prenorm_tile), fed by the copy engine (TMA)
// instead of per-thread loads. The TF32 projection runs on wgmma (sm90_wgmma.cuh: hc_fn truncated
// to TF32 by the tensor cores instead of rounded, a different summation order: the same error tier,
// not the same bits as the register kernel); the compensated fp32 projection keeps mma.sync with
// the register kernel's per-chunk MMA (chunk_mma).
//
// Why. The register-fed kernel stays well below copy bandwidth at thousands of tokens: it
// needs ~250 registers a thread for its loads in flight, so one 8-warp CTA fits an SM and the
// SM waits on memory latency (docs/kernels.md, Nsight Compute). Here one producer thread keeps
// kStages stages of x and hc_fn in flight in shared memory with 2D tensor copies (a few
// requests per 44 KB stage, no registers), and 8 consumer warps (two warpgroups) run the MMAs
// from shared memory. hc_fn is read once per 128-token tile. 2D tensor copies rather than one 1D
// bulk copy per 256-byte row: the per-request cost dominates (docs/decisions.md, "Large
// batches").
//
// Work split. grid = (tiles of 128 tokens, K splits), a split a whole number of 128-wide stages.
// Consumer warp w owns tokens 16w..16w+15 of the tile over the whole split, so no cross-warp
// reduction is needed; the split reduction and stats are finish_prenorm_tile's. Pipeline:
// full[s] completes when stage s's bytes landed (one producer arrival + the bytes); empty[s]
// when all consumer warps are done reading it.
//
// Shared memory holds 128-byte box rows with the 128-byte swizzle (16-byte chunk c of row r at
// chunk c ^ (r % 8)), the layout wgmma's descriptors read. The mma.sync consumers read 16-byte
// chunks of two token rows and two hc_fn rows per lane, with the token rows of MMA row g
// permuted (tile row (g >> 1) | (g & 1) << 2) so that the two rows a quarter-warp reads land in
// opposite bank halves: no bank conflicts.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums (types only; see encode_tensor_map_2d)
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/prenorm_common.cuh"
#include "mhc/cuda/prenorm_launch_checks.cuh"
#include "mhc/cuda/sm90_wgmma.cuh"

namespace mhc::cuda {

template <int kStreams>
struct TmaShape {
  static constexpr int kNmix = kStreams * (kStreams + 2);
  static constexpr int kNTiles = kNmix / 8;
  static constexpr int kStride = kNmix + 1;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kRows = 16 * kConsumerWarps;
  static constexpr int kThreads = kWarp * (kConsumerWarps + 1);  // + the producer warp
  static constexpr int kStageK = 128;                            // K per stage
  static constexpr int kChunksPerStage = kStageK / 32;
  static constexpr int kStages = 4;
  static constexpr int kSwizzleBytes = 128;         // one box row; the 128-byte swizzle's span
  static constexpr int kXBoxK = kSwizzleBytes / 2;  // bf16 per box row
  static constexpr int kWBoxK = kSwizzleBytes / 4;  // fp32 per box row
  static constexpr int kXBoxBytes = kRows * kSwizzleBytes;
  static constexpr int kWBoxBytes = kNmix * kSwizzleBytes;
  static constexpr int kXBytes = (kStageK / kXBoxK) * kXBoxBytes;
  static constexpr int kStageBytes = kXBytes + (kStageK / kWBoxK) * kWBoxBytes;
  static constexpr int kAlign = 1024;  // the swizzle repeats every 8 rows of 128 bytes
  static constexpr int kSmemBytes = kStages * kStageBytes + kAlign;  // + alignment slack
  static_assert(kXBoxBytes % kAlign == 0 && kWBoxBytes % kAlign == 0, "boxes stay aligned");
};

// K chunks (32 wide) per split must be a multiple of this for the bulk kernel.
inline constexpr int kTmaChunksPerStage = TmaShape<4>::kChunksPerStage;
inline constexpr int kTmaRowsPerTile = TmaShape<4>::kRows;
// Most splits whose tile the kernel reduces in one cluster (the portable cluster size).
inline constexpr int kTmaMaxClusterSplits = 8;

namespace detail {

// Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled box.
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * 128 + ((chunk ^ (row & 7)) << 4);
}

// The producer (one thread): for each stage of the split, waits until the consumers released
// the slot, announces the bytes, and issues the tensor copies of x (128 tokens x 64 k per box)
// and hc_fn (NMIX rows x 32 k per box).
template <int kStreams>
__device__ __forceinline__ void produce_stages(const CUtensorMap* x_map, const CUtensorMap* w_map,
                                               unsigned char* stages, uint64_t* full,
                                               uint64_t* empty, int64_t row0, int stage_begin,
                                               int stage_count) {
  using S = TmaShape<kStreams>;
  // x is read once: first out of L2; hc_fn is re-read by every tile: kept.
  const uint64_t stream_policy = l2_policy<L2Eviction::first>();
  const uint64_t weight_policy = l2_policy<L2Eviction::last>();
  for (int i = 0; i < stage_count; ++i) {
    const int s = i % S::kStages;
    if (i >= S::kStages) mbarrier_wait(&empty[s], unsigned(i / S::kStages - 1) & 1u);
    unsigned char* x_stage = stages + s * S::kStageBytes;
    unsigned char* w_stage = x_stage + S::kXBytes;
    const int k0 = (stage_begin + i) * S::kStageK;
    mbarrier_arrive_expect_bytes(&full[s], S::kStageBytes);
#pragma unroll
    for (int b = 0; b < S::kStageK / S::kXBoxK; ++b) {
      tensor_copy_to_shared(x_stage + b * S::kXBoxBytes, x_map, k0 + b * S::kXBoxK, int(row0),
                            &full[s], stream_policy);
    }
#pragma unroll
    for (int b = 0; b < S::kStageK / S::kWBoxK; ++b) {
      tensor_copy_to_shared(w_stage + b * S::kWBoxBytes, w_map, k0 + b * S::kWBoxK, 0, &full[s],
                            weight_policy);
    }
  }
}

// A consumer warp: the MMAs of its 16 tokens over every stage of the split.
template <int kStreams, bool kCompensated>
__device__ __forceinline__ void consume_stages(const unsigned char* stages, uint64_t* full,
                                               uint64_t* empty, int stage_begin, int stage_end,
                                               int row_base, int row_of_g,
                                               float (&acc)[1][kStreams * (kStreams + 2) / 8][4],
                                               float (&sumsq)[1][2]) {
  using S = TmaShape<kStreams>;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  for (int i = stage_begin; i < stage_end; ++i) {
    const int s = i % S::kStages;
    mbarrier_wait(&full[s], unsigned(i / S::kStages) & 1u);
    const unsigned char* x_stage = stages + s * S::kStageBytes;
    const unsigned char* w_stage = x_stage + S::kXBytes;
#pragma unroll
    for (int c = 0; c < S::kChunksPerStage; ++c) {
      // Chunk c's 32 k: half of an x box row (16-byte chunks 4(c%2)..+3), one whole hc_fn box.
      const unsigned char* x_box = x_stage + (c / 2) * S::kXBoxBytes;
      const unsigned char* w_box = w_stage + c * S::kWBoxBytes;
      uint4 xv[1][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_base + row_of_g + h * 8;
        xv[0][h] = *reinterpret_cast<const uint4*>(x_box + swizzled(row, (c % 2) * 4 + t));
      }
      float4 wv[S::kNTiles][2];
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        const int row = nt * 8 + g;
        wv[nt][0] = *reinterpret_cast<const float4*>(w_box + swizzled(row, 2 * t));
        wv[nt][1] = *reinterpret_cast<const float4*>(w_box + swizzled(row, 2 * t + 1));
      }
      chunk_mma<kStreams, 1, kCompensated>(xv, wv, acc, sumsq);
    }
    release_ring_slot(&empty[s]);
  }
}

// The 16 A fragments (4 k steps x {row g, row g + 8} x {k t, k t + 4}) of one 32-wide chunk for
// wgmma: single bf16 loads (the fragment's k order is B's, which the copy engine fixed), widened
// exactly to TF32 bits; the rows' sums of squares in the same pass, k step j into chain
// j % kChains. The 8 rows a load instruction touches sit in 8 different 16-byte swizzle slots:
// no bank conflicts.
template <int kChains>
__device__ __forceinline__ void load_a_fragments(const unsigned char* x_box, int half_row, int row,
                                                 int t, uint32_t (&a)[4][4],
                                                 float (&sumsq)[kChains][2]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int offset = swizzled(row + 8 * r, half_row * 4 + j) + 2 * (4 * h + t);
        const uint32_t bits = uint32_t(*reinterpret_cast<const uint16_t*>(x_box + offset)) << 16;
        a[j][r + 2 * h] = bits;
        const float value = __uint_as_float(bits);
        sumsq[j % kChains][r] = fmaf(value, value, sumsq[j % kChains][r]);
      }
    }
  }
}

// A consumer warp with wgmma (TF32, sm_90a): its 16 tokens' A fragments from shared memory, B
// (hc_fn) read by the tensor cores once per warpgroup. k step j of every chunk accumulates into
// chain j % kChains and its squares into chain j % kSumsqChains (1 and 1: the default order;
// kLeafChains and kLeafSumsqChains: the batch-invariant one), the chains summed pairwise at the
// end. A registers are double-buffered by chunk parity; chunk c's
// registers are rewritten at chunk c + 2, after the wait that follows chunk c + 1's commit has
// covered chunk c's group. A stage is released once the first chunk of the next stage has
// waited, i.e. when every group that read it is done; the last stage of the range only with
// release_last (more stages follow in this CTA: a batch-invariant leaf boundary).
template <int kStreams, int kChains, int kSumsqChains>
__device__ __forceinline__ void consume_stages_wgmma(const unsigned char* stages, uint64_t* full,
                                                     uint64_t* empty, int stage_begin,
                                                     int stage_end, bool release_last, int row,
                                                     float (&acc)[kStreams * (kStreams + 2) / 8][4],
                                                     float (&sumsq)[2]) {
  using S = TmaShape<kStreams>;
  static_assert(S::kChunksPerStage % 2 == 0, "A buffers alternate by chunk parity");
  static_assert(4 % kChains == 0 && 4 % kSumsqChains == 0, "a chunk's 4 k steps cover the chains");
  const int lane = threadIdx.x % kWarp, t = lane % 4;
  float(&d)[S::kNmix / 2] = reinterpret_cast<float(&)[S::kNmix / 2]>(acc);
  float chains[kChains][S::kNmix / 2], sumsq_chains[kSumsqChains][2];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
#pragma unroll
    for (int i = 0; i < S::kNmix / 2; ++i) chains[c][i] = c == 0 ? d[i] : 0.f;
  }
#pragma unroll
  for (int c = 0; c < kSumsqChains; ++c) {
    sumsq_chains[c][0] = c == 0 ? sumsq[0] : 0.f;
    sumsq_chains[c][1] = c == 0 ? sumsq[1] : 0.f;
  }
  uint32_t a[2][4][4];
  for (int i = stage_begin; i < stage_end; ++i) {
    const int s = i % S::kStages;
    mbarrier_wait(&full[s], unsigned(i / S::kStages) & 1u);
    const unsigned char* x_stage = stages + s * S::kStageBytes;
    const unsigned char* w_stage = x_stage + S::kXBytes;
#pragma unroll
    for (int c = 0; c < S::kChunksPerStage; ++c) {
      load_a_fragments<kSumsqChains>(x_stage + (c / 2) * S::kXBoxBytes, c % 2, row, t, a[c % 2],
                                     sumsq_chains);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // k step j of the chunk: 8 fp32 = 32 bytes into each 128-byte hc_fn row.
        wgmma_tf32<S::kNmix>(chains[j % kChains], a[c % 2][j],
                             wgmma_descriptor_sw128(w_stage + c * S::kWBoxBytes + 32 * j));
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (c == 0 && i > stage_begin) release_ring_slot(&empty[(i - 1) % S::kStages]);
    }
  }
  wgmma_wait<0>();
  if (release_last && stage_end > stage_begin) {
    release_ring_slot(&empty[(stage_end - 1) % S::kStages]);
  }
  sum_chains(chains);
  sum_chains(sumsq_chains);
#pragma unroll
  for (int i = 0; i < S::kNmix / 2; ++i) d[i] = chains[0][i];
  sumsq[0] = sumsq_chains[0][0];
  sumsq[1] = sumsq_chains[0][1];
}

// A consumer warp's MMAs over stages [stage_begin, stage_end) of its split from zero, with the
// rows' sums of squares reduced over the quad: wgmma for the TF32 projection where this image has
// it; the compensated (fp32) projection needs hc_fn's low parts as a second B operand and stays
// on mma.sync. kChains, kSumsqChains: the wgmma consumers' chains (consume_stages_wgmma).
template <int kStreams, bool kCompensated, int kChains = 1, int kSumsqChains = 1>
__device__ __forceinline__ void consume_range(const unsigned char* stages, uint64_t* full,
                                              uint64_t* empty, int stage_begin, int stage_end,
                                              bool release_last, int warp, int row_of_g,
                                              float (&acc)[1][kStreams * (kStreams + 2) / 8][4],
                                              float (&sumsq)[1][2]) {
  constexpr bool kWgmma = kDeviceHasWgmma && !kCompensated;
  const int g = int(threadIdx.x % kWarp) / 4;
#pragma unroll
  for (int nt = 0; nt < kStreams * (kStreams + 2) / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][nt][e] = 0.f;
  }
  sumsq[0][0] = sumsq[0][1] = 0.f;
  if constexpr (kWgmma) {
    consume_stages_wgmma<kStreams, kChains, kSumsqChains>(
        stages, full, empty, stage_begin, stage_end, release_last, warp * 16 + g, acc[0], sumsq[0]);
  } else {
    consume_stages<kStreams, kCompensated>(stages, full, empty, stage_begin, stage_end, warp * 16,
                                           row_of_g, acc, sumsq);
  }
  quad_sums(sumsq[0]);
}

// Batch-invariant: the split's leaves one after another, each from zero in kLeafChains chains
// (TF32; consume_stages_wgmma), summed by the pairwise tree (PairwiseTree, args.leaf_chunks); the
// root of every subtree of args.leaves_per_partial leaves is stored as partial block `first_block`
// + i.
template <int kStreams, bool kCompensated>
__device__ __forceinline__ void consume_leaves(const PrenormArgs& args, const unsigned char* stages,
                                               uint64_t* full, uint64_t* empty, int stage_count,
                                               int warp, int row_of_g, float* tile_partials,
                                               int first_block, int rows_valid, int n_out_padded) {
  constexpr int kNTiles = kStreams * (kStreams + 2) / 8;
  constexpr int kValues = kNTiles * 4 + 2;
  const int leaf_stages = args.leaf_chunks / TmaShape<kStreams>::kChunksPerStage;
  const int per_block = args.leaves_per_partial;
  PairwiseTree<kTreeLevelsPerCta<kCompensated>, kValues> tree;
  float acc[1][kNTiles][4], sumsq[1][2], v[kValues];
  for (int leaf = 0; leaf < args.leaves_per_split; ++leaf) {
    const int begin = min(leaf * leaf_stages, stage_count);
    const int end = min(begin + leaf_stages, stage_count);
    consume_range<kStreams, kCompensated, kLeafChains, kLeafSumsqChains>(
        stages, full, empty, begin, end, end < stage_count, warp, row_of_g, acc, sumsq);
#pragma unroll
    for (int i = 0; i < kValues - 2; ++i) v[i] = acc[0][i / 4][i % 4];
    v[kValues - 2] = sumsq[0][0];
    v[kValues - 1] = sumsq[0][1];
    tree.push(v, leaf % per_block);
    if ((leaf + 1) % per_block == 0) {
#pragma unroll
      for (int i = 0; i < kValues - 2; ++i) acc[0][i / 4][i % 4] = v[i];
      sumsq[0][0] = v[kValues - 2];
      sumsq[0][1] = v[kValues - 1];
      const int block = first_block + leaf / per_block;
      store_fragment_rows<kStreams>(tile_partials + int64_t(block) * n_out_padded, warp * 16,
                                    rows_valid, acc[0], sumsq[0], row_of_g,
                                    int(threadIdx.x % kWarp) % 4);
    }
  }
}

}  // namespace detail

// kCluster: grid (splits, tiles), each tile's splits one cluster (finish_prenorm_tile_in_cluster);
// else grid (tiles, splits + input-path CTAs) and the workspace's split reduction.
template <int kStreams, bool kCompensated, bool kCluster = false>
__global__ void __launch_bounds__(TmaShape<kStreams>::kThreads, 1)
    sm90_prenorm_tma_kernel(const PrenormArgs args, const __grid_constant__ CUtensorMap x_map,
                            const __grid_constant__ CUtensorMap w_map) {
// The body exists in the sm_90a image only (KernelImage::has_wgmma; the plan offers the kernel
// nowhere else): elsewhere it is unmeasured, and its mma.sync form spills (docs/decisions.md,
// "One kernel plan").
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = TmaShape<kStreams>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[S::kStages], empty[S::kStages];
  __shared__ float sums[S::kRows * S::kStride];
  __shared__ int is_last_cta;
  // Aligned by an offset from smem_raw, not by a round trip through an integer: the compiler
  // then still knows `stages` is shared memory and reads it with LDS, not generic loads.
  const uint32_t misalign = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) % S::kAlign;
  unsigned char* stages = smem_raw + (misalign == 0 ? 0 : S::kAlign - misalign);

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t tile = kCluster ? blockIdx.y : blockIdx.x;
  const int split = kCluster ? blockIdx.x : blockIdx.y;
  const int64_t row0 = tile * S::kRows;
  if (!kCluster && split >= args.splits) {  // a fused input-path CTA: one token's input path
    const int64_t token = row0 + (split - args.splits);
    allow_dependents();
    wait_for_producer();
    if (token < args.tokens) fused_input_path_token<kStreams>(args, token, sums);
    return;
  }
  const int rows_valid = tile_rows_valid<S::kRows>(args.tokens, row0);
  const int stage_begin = split * (args.chunks_per_split / S::kChunksPerStage);
  const int stage_end =
      min(args.k / S::kStageK, stage_begin + args.chunks_per_split / S::kChunksPerStage);
  const int stage_count = stage_end - stage_begin;

  if (threadIdx.x == S::kConsumerWarps * kWarp) {  // the producer thread
    prefetch_tensor_map(&x_map);
    prefetch_tensor_map(&w_map);
  }
  init_ring_barriers<S::kStages>(full, empty, S::kConsumerWarps);
  __syncthreads();
  allow_dependents();
  wait_for_producer();  // x comes from the previous kernel

  const int n_out_padded = padded_partial_floats<kStreams>(rows_valid);
  const int blocks = partial_blocks(args);
  float* tile_partials = args.partials + row0 * S::kStride * blocks;
  if (warp == S::kConsumerWarps) {
    if (lane == 0) {
      detail::produce_stages<kStreams>(&x_map, &w_map, stages, full, empty, row0, stage_begin,
                                       stage_count);
    }
  } else {
    const int g = lane / 4;
    constexpr bool kWgmma = kDeviceHasWgmma && !kCompensated;
    const int row_of_g = kWgmma ? g : (g >> 1) | ((g & 1) << 2);
    if (!kCluster && args.leaf_chunks > 0 && blocks > 1) {  // clusters: never batch-invariant
      detail::consume_leaves<kStreams, kCompensated>(
          args, stages, full, empty, stage_count, warp, row_of_g, tile_partials,
          split * (blocks / args.splits), rows_valid, n_out_padded);
    } else if (!kCluster && args.leaf_chunks > 0) {  // the whole tree in this CTA: to `sums`
      detail::consume_leaves<kStreams, kCompensated>(args, stages, full, empty, stage_count, warp,
                                                     row_of_g, sums, 0, rows_valid, 0);
    } else {
      float acc[1][S::kNTiles][4];
      float sumsq[1][2];
      detail::consume_range<kStreams, kCompensated>(stages, full, empty, 0, stage_count, false,
                                                    warp, row_of_g, acc, sumsq);
      // In a cluster always `sums`, but through a flag the launch set rather than a constant:
      // with the destination known to be shared memory, ptxas serialises the wgmma pipeline
      // above (its C7515 note).
      const bool to_shared = kCluster ? args.cluster_epilogue : args.splits == 1;
      float* dest = to_shared ? sums : tile_partials + int64_t(split) * n_out_padded;
      store_fragment_rows<kStreams>(dest, warp * 16, rows_valid, acc[0], sumsq[0], row_of_g,
                                    lane % 4);
    }
  }
  // The stage ring is idle once every stage was consumed: it stages the outputs.
  static_assert((S::kRows * S::kStride + 4 + staged_output_floats<kStreams>(S::kRows)) * 4 <=
                S::kStages * S::kStageBytes);
  if constexpr (kCluster) {
    finish_prenorm_tile_in_cluster<kStreams, S::kThreads, S::kRows>(
        args, row0, rows_valid, sums, split, args.splits, reinterpret_cast<float*>(stages));
  } else {
    finish_prenorm_tile<kStreams, S::kThreads, S::kRows>(
        args, tile, row0, rows_valid, sums, tile_partials, n_out_padded,
        reinterpret_cast<float*>(stages), &is_last_cta);
  }
#endif
}

// cuTensorMapEncodeTiled, a driver function, taken from the runtime's entry-point query, so
// that nothing links libcuda directly; null where the driver lacks it.
using TensorMapEncoder = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                      const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                      const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                      CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                             cudaEnableDefault, &found);
    return err == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<TensorMapEncoder>(fn)
               : nullptr;
  }();
  return encode;
}

// cuTensorMapEncodeTiled (tensor_map_encoder) of a kRank-dimensional map with unit element
// strides, no interleave and zero fill out of range; cudaErrorNotSupported where the driver lacks
// the function, cudaErrorInvalidValue where it refuses the map.
template <int kRank>
inline cudaError_t encode_tiled_map(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                                    const cuuint64_t (&dims)[kRank],
                                    const cuuint64_t (&strides)[kRank - 1],
                                    const cuuint32_t (&box)[kRank], CUtensorMapSwizzle swizzle,
                                    CUtensorMapL2promotion promotion) {
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint32_t element_strides[kRank];
  for (cuuint32_t& stride : element_strides) stride = 1;
  const CUresult r =
      encode(map, type, kRank, const_cast<void*>(base), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A 2D tensor map of a row-major [outer][inner] array for boxes of box_inner x box_outer
// elements, with the 128-byte swizzle and 256-byte L2 promotion unless asked otherwise.
inline cudaError_t encode_tensor_map_2d(
    CUtensorMap* map, CUtensorMapDataType type, int element_bytes, const void* base, uint64_t inner,
    uint64_t outer, uint32_t box_inner, uint32_t box_outer,
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B,
    CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t row_stride[1] = {inner * uint64_t(element_bytes)};
  const cuuint32_t box[2] = {box_inner, box_outer};
  return encode_tiled_map<2>(map, type, base, dims, row_stride, box, swizzle, promotion);
}

// hc_fn [nmix][k] fp32 for boxes of box_k columns of every row (128 bytes a row at box_k = 32, the
// 128-byte swizzle): the B operand's map of the TMA kernel and the fused boundary.
inline cudaError_t encode_hc_fn_map(CUtensorMap* map, const float* hc_fn, int k, int nmix,
                                    int box_k) {
  return encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, hc_fn, uint64_t(k),
                              uint64_t(nmix), uint32_t(box_k), uint32_t(nmix));
}

// A row-major [outer][inner] bf16 array (inner a multiple of 64) as 128-byte lines: the 3D map
// {64, inner / 64, outer}, for boxes of {64, lines, box_outer}, 128-byte swizzle. The copy engine
// walks a box row by row, each row's lines x 128 contiguous bytes in turn, and shared memory holds
// it as [box_outer][lines][64] with the swizzle over its 128-byte lines.
inline cudaError_t encode_tensor_map_lines(
    CUtensorMap* map, const void* base, uint64_t inner, uint64_t outer, uint32_t lines,
    uint32_t box_outer, CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  if (inner % 64 != 0) return cudaErrorInvalidValue;
  const cuuint64_t dims[3] = {64, inner / 64, outer};
  const cuuint64_t strides[2] = {128, inner * 2};  // bytes between lines, between rows
  const cuuint32_t box[3] = {64, lines, box_outer};
  return encode_tiled_map<3>(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims, strides, box,
                             CU_TENSOR_MAP_SWIZZLE_128B, promotion);
}

// How many clusters of `splits` CTAs of the cluster-epilogue kernel the current device holds at
// once (one CTA per SM, clusters within a GPC).
template <int kStreams, bool kCompensated>
cudaError_t sm90_prenorm_tma_cluster_capacity(int splits, int* clusters) {
  using S = TmaShape<kStreams>;
  return max_active_clusters(sm90_prenorm_tma_kernel<kStreams, kCompensated, true>, splits,
                             S::kThreads, S::kSmemBytes, clusters);
}

// launch_sm90_prenorm_tma's preconditions besides prenorm_args_valid: every split a whole,
// non-empty number of kStageK stages (the kernel cuts K by chunks_per_split / kChunksPerStage),
// batch-invariant leaves too (consume_leaves), and the fused input path's row cut within the
// CTA's threads.
template <int kStreams>
inline bool tma_args_valid(const PrenormArgs& a) {
  using S = TmaShape<kStreams>;
  return prenorm_args_valid<kStreams>(a) && fused_input_fits(a, S::kThreads) &&
         a.chunks_per_split >= S::kChunksPerStage && a.chunks_per_split % S::kChunksPerStage == 0 &&
         a.leaf_chunks % S::kChunksPerStage == 0;
}

// Raw launcher: refuses arguments outside tma_args_valid (cudaErrorInvalidValue);
// mhc::cuda::prenorm_coefficients checks them with messages and runs this only where
// the plan has the TMA kernel (KernelPlan::tma128_available). The tensor maps hold x's address and
// token count, so they are made per launch (a host call, no allocation); a CUDA graph keeps them
// with the captured kernel parameters.
template <int kStreams, bool kCompensated>
cudaError_t launch_sm90_prenorm_tma(const PrenormArgs& args, LaunchTarget on) {
  using S = TmaShape<kStreams>;
  if (!tma_args_valid<kStreams>(args)) return cudaErrorInvalidValue;
  CUtensorMap x_map, w_map;
  if (const cudaError_t err =
          encode_tensor_map_2d(&x_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, args.x,
                               uint64_t(args.k), uint64_t(args.tokens), S::kXBoxK, S::kRows);
      err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err = encode_hc_fn_map(&w_map, args.hc_fn, args.k, S::kNmix, S::kWBoxK);
      err != cudaSuccess) {
    return err;
  }
  // With the input path fused: one more CTA per token of the tile (per token with one tile).
  const int64_t tiles = ceil_div(args.tokens, S::kRows);
  const int64_t input_ctas =
      args.input.layer_input == nullptr ? 0 : (tiles == 1 ? args.tokens : S::kRows);
  const bool clusters = args.cluster_epilogue && args.leaf_chunks == 0 && input_ctas == 0 &&
                        args.splits >= 2 && args.splits <= kTmaMaxClusterSplits;
  if (clusters) {
    // Only where every tile's cluster is resident at once, the case measured (docs/kernels.md);
    // a host query, no synchronisation.
    int resident = 0;
    cudaError_t err =
        sm90_prenorm_tma_cluster_capacity<kStreams, kCompensated>(args.splits, &resident);
    if (err != cudaSuccess) return err;
    if (resident >= tiles) {
      return launch_kernel_in_clusters(
          sm90_prenorm_tma_kernel<kStreams, kCompensated, true>,
          dim3(static_cast<unsigned>(args.splits), static_cast<unsigned>(tiles)), dim3(S::kThreads),
          S::kSmemBytes, static_cast<unsigned>(args.splits), on, args, x_map, w_map);
    }
  }
  const auto kernel = sm90_prenorm_tma_kernel<kStreams, kCompensated>;
  if (const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(args.splits + input_ctas));
  return launch_kernel(kernel, grid, dim3(S::kThreads), S::kSmemBytes, on, args, x_map, w_map);
}

}  // namespace mhc::cuda
