// The split-K reduction's fixed orders for the prenorm GEMM kernels' epilogues
// (prenorm_common.cuh): a tile's totals from its splits' partial blocks, in ascending order across
// lanes and a butterfly (reduce_splits), or by the balanced pairwise tree of the batch-invariant
// mode (reduce_splits_pairwise), and the same order over partials held in registers or in a
// cluster's shared memory (sum_in_split_order). Every form that must give a tile's bits adds in
// these orders.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "mhc/cuda/common.cuh"

namespace mhc::cuda {

namespace detail {

__device__ __forceinline__ void add_f4(float4& total, const float4& v) {
  total.x += v.x;
  total.y += v.y;
  total.z += v.z;
  total.w += v.w;
}

// Lanes that share one float4 of a tile's totals in the split reduction (reduce_splits and every
// form that must give its bits): as many as fit in `threads` with every float4 covered, up to a
// warp and below the partial count. It follows the tile's valid rows, so it fixes the order in
// which a launch adds its splits.
__device__ __forceinline__ int split_lanes(int n_vec, int threads, int partials) {
  int width = 1;
  while (width < kWarp && width * 2 * n_vec <= threads && width < partials) width *= 2;
  return width;
}

// The tile's totals from its splits' partial blocks, into `sums` (the last CTA, every thread).
// Lanes per float4 of totals: as many as fit (<= 32); each lane sums a strided subset of the
// splits in ascending order, then a butterfly across the lanes. A fixed order: deterministic.
// The loads of a batch of kBatch splits are issued for every pass (float4 of totals a thread
// covers, up to kMaxPasses) before any is added, so that the latency through L2 is paid once
// per batch, not once per batch and pass (the 128-row tile has 3 passes; measured faster). The
// additions per float4 are the same, in the same order, as with one pass at a time.
template <int kThreads, int kMaxVecs>
__device__ __forceinline__ void reduce_splits(const float* tile_partials, int splits,
                                              int n_out_padded, int n_out, float* sums) {
  constexpr int kMaxPasses = (kMaxVecs + kThreads - 1) / kThreads;
  // <= 24 float4 in flight per thread; 24 rather than 16 splits per batch with one pass, so that
  // the decode sizes' 40 splits over 2 lanes take one batch instead of two.
  constexpr int kBatch = kMaxPasses == 1 ? 24 : 8;
  const int n_vec = n_out_padded / 4;
  const int width = split_lanes(n_vec, kThreads, splits);
  const int groups = kThreads / width;
  const int lane_split = int(threadIdx.x) % width;
  float4 total[kMaxPasses];
  const float* base[kMaxPasses];
#pragma unroll
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    total[pass] = make_float4(0.f, 0.f, 0.f, 0.f);
    const int vec = pass * groups + int(threadIdx.x) / width;
    base[pass] = vec < n_vec ? tile_partials + vec * 4 : nullptr;
  }
  for (int s0 = lane_split; s0 < splits; s0 += kBatch * width) {
    float4 batch[kMaxPasses][kBatch];
#pragma unroll
    for (int pass = 0; pass < kMaxPasses; ++pass) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int s = s0 + b * width;
        batch[pass][b] = base[pass] != nullptr && s < splits
                             ? load_coherent_f4(base[pass] + int64_t(s) * n_out_padded)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
#pragma unroll
    for (int pass = 0; pass < kMaxPasses; ++pass) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) add_f4(total[pass], batch[pass][b]);
    }
  }
#pragma unroll
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    const float4 t = group_sum_dynamic(total[pass], width);
    const int vec = pass * groups + int(threadIdx.x) / width;
    if (vec < n_vec && lane_split == 0) {
      const float values[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (vec * 4 + e < n_out) sums[vec * 4 + e] = values[e];
      }
    }
  }
}

}  // namespace detail

// Largest leaf count of the batch-invariant mode: 2^kMaxTreeLevels.
inline constexpr int kMaxTreeLevels = 5;

// The balanced pairwise tree over values pushed in order 0, 1, 2, ... as a binary counter: slot l
// holds the sum of the latest complete aligned block of 2^l values. After value number 2^L - 1
// (L <= kLevels) is pushed, `v` holds the root: ((v0 + v1) + (v2 + v3)) + ... Indices are run-time
// values but every slot index is a compile-time one, so the slots stay in registers.
template <int kLevels, int kValues>
struct PairwiseTree {
  float slot[kLevels][kValues];
  __device__ __forceinline__ void push(float (&v)[kValues], int index) {
    bool placed = false;
#pragma unroll
    for (int l = 0; l < kLevels; ++l) {
      if (!placed) {
        if ((index >> l) & 1) {
#pragma unroll
          for (int i = 0; i < kValues; ++i) v[i] = slot[l][i] + v[i];
        } else {
#pragma unroll
          for (int i = 0; i < kValues; ++i) slot[l][i] = v[i];
          placed = true;
        }
      }
    }
  }
};

namespace detail {

// Batch-invariant form of reduce_splits: the partial blocks (each the root of an aligned block of
// leaves) summed by the pairwise tree. `width` lanes per float4 of totals each reduce an aligned
// block of blocks / width partials, then an ascending butterfly (offsets 1, 2, 4, ...) adds the
// lanes' roots exactly as the tree's upper levels would (fp addition commutes, so both lanes of a
// pair get the same bits). As in reduce_splits, a batch of kBatch partials is loaded for every
// pass before any is added, so that the latency through L2 is paid once per batch; each batch is
// an aligned subtree, added in registers, and its root goes up the tree.
template <int kThreads, int kMaxVecs>
__device__ __forceinline__ void reduce_splits_pairwise(const float* tile_partials, int blocks,
                                                       int n_out_padded, int n_out, float* sums) {
  constexpr int kBatchLevels = 3;
  constexpr int kBatch = 1 << kBatchLevels;
  constexpr int kPasses = (kMaxVecs + kThreads - 1) / kThreads;
  const int n_vec = n_out_padded / 4;
  const int width = split_lanes(n_vec, kThreads, blocks);
  const int per_lane = blocks / width;
  const int groups = kThreads / width;
  const int lane_block = int(threadIdx.x) % width;
  PairwiseTree<kMaxTreeLevels - kBatchLevels, 4> tree[kPasses];
  float root[kPasses][4];
  const float* base[kPasses];
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int vec = pass * groups + int(threadIdx.x) / width;
    base[pass] = vec < n_vec
                     ? tile_partials + int64_t(lane_block) * per_lane * n_out_padded + vec * 4
                     : nullptr;
  }
  for (int s0 = 0; s0 < per_lane; s0 += kBatch) {
    const int count = min(kBatch, per_lane - s0);  // a power of two
    float4 batch[kPasses][kBatch];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        batch[pass][b] = base[pass] != nullptr && b < count
                             ? load_coherent_f4(base[pass] + int64_t(s0 + b) * n_out_padded)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
#pragma unroll
      for (int w = 1; w < kBatch; w *= 2) {
#pragma unroll
        for (int b = 0; b + w < kBatch; b += 2 * w) {
          if (b + w < count) add_f4(batch[pass][b], batch[pass][b + w]);
        }
      }
      root[pass][0] = batch[pass][0].x;
      root[pass][1] = batch[pass][0].y;
      root[pass][2] = batch[pass][0].z;
      root[pass][3] = batch[pass][0].w;
      tree[pass].push(root[pass], s0 / kBatch);
    }
  }
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    for (int offset = 1; offset < width; offset *= 2) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        root[pass][e] += __shfl_xor_sync(0xffffffffu, root[pass][e], offset);
    }
    const int vec = pass * groups + int(threadIdx.x) / width;
    if (vec < n_vec && lane_block == 0) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (vec * 4 + e < n_out) sums[vec * 4 + e] = root[pass][e];
      }
    }
  }
}

}  // namespace detail

namespace detail {

// The xor butterfly over kWidth lanes (lane l adds lane l ^ offset's sum, offsets kWidth / 2 down
// to 1), lane 0's result: at offset o only lanes below o feed lane 0, and lane l < o adds lane
// l + o (= l ^ o) to its own sum, as the shuffle does.
template <int kWidth>
__device__ __forceinline__ float butterfly_lane0(float (&lanes)[kWidth]) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int l = 0; l < offset; ++l) lanes[l] = lanes[l] + lanes[l + offset];
  }
  return lanes[0];
}

// One value's total over `count` partials get(0), get(1), ... (at most kCount; every index a
// compile-time constant once unrolled, so partials may sit in registers) in reduce_splits' order:
// kWidth lanes, lane l adding partials l, l + kWidth, ... from zero in ascending order, then the
// lanes' butterfly (butterfly_lane0).
template <int kWidth, int kCount, typename Get>
__device__ __forceinline__ float sum_in_split_order(const Get& get, int count) {
  float lanes[kWidth];
#pragma unroll
  for (int l = 0; l < kWidth; ++l) lanes[l] = 0.f;
#pragma unroll
  for (int q = 0; q < kCount; ++q) {
    if (q < count) lanes[q % kWidth] += get(q);
  }
  return butterfly_lane0(lanes);
}

// sum_in_split_order for a run-time lane count `width` (a power of two, 1..kMaxWidth).
template <int kMaxWidth, int kCount, typename Get>
__device__ __forceinline__ float sum_in_split_order_of_width(const Get& get, int count, int width) {
  if constexpr (kMaxWidth > 1) {
    if (width < kMaxWidth) {
      return sum_in_split_order_of_width<kMaxWidth / 2, kCount>(get, count, width);
    }
  }
  return sum_in_split_order<kMaxWidth, kCount>(get, count);
}

}  // namespace detail

}  // namespace mhc::cuda
