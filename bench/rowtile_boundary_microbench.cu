// Developer micro-benchmark (not a test; built by CMake as mhc_rowtile_boundary_microbench when
// CUDA is on): a prototype of the fused boundary cut by whole rows instead of column splits, to
// measure whether that shape streams at the copy's rate with everything computed (issue 17; the
// question docs/decisions.md left "for measurement" in "Fused boundary kernel, first form").
//
// Each CTA owns tiles of 8 whole rows (tokens) and walks their columns in stages of 128: per stage
// its 4 consumer warps load x_prev (n = 4 streams) and F into registers (kDepth stages ahead),
// form x_next (the post's formula, stored), the collapse y with the carried pre_mix (kept in
// shared memory, bf16), the sums of squares, and the TF32 projection x_next . hc_fn by m16n8k8
// MMAs whose A fragments are the thread's own x_next values (8 of the 16 MMA rows used). hc_fn
// comes pre-packed in the MMA's B-fragment order (one conflict-free 8-byte shared load per MMA),
// one 48 KB stage per 128 columns, multicast by the cluster's rank 0 to every CTA of a cluster
// (the CTAs of a cluster take consecutive tiles, so L2 serves hc_fn once per cluster x 8 rows).
// At a tile's end the whole row is in the CTA: the norm's scale is known without any exchange, y
// is scaled from shared memory into layer_input (no read-back from global memory), and a stats
// warp turns the tile's 24 dot products and sum of squares into pre, post and the Sinkhorn comb
// (token_coefficients) while the consumers stream the next tile. The CTAs are persistent.
//
// Checked against the library: x_next bitwise and layer_input within one bf16 ulp of the row
// kernel's post + next input (launch_post), the sums against a float64 reference of the same
// TF32-rounded hc_fn, the coefficients bitwise against token_coefficients of the kernel's sums.
// Timed beside the runtime's memcpy of the boundary's bytes and the row kernel's post.
// Run on an sm_90 GPU: mhc_rowtile_boundary_microbench [--hidden C] [--tokens a,b] [--json F]
//                      [--commit X] [--check-only]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/bench/micro_timing.hpp"
#include "mhc/cuda/coefficients.cuh"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/post.cuh"
#include "mhc/io/safe_file.hpp"

namespace {

using namespace mhc::cuda;

constexpr int kStreams = 4;
constexpr int kNmix = 24;
constexpr int kSums = kNmix + 1;  // the dot products, then the sum of squares of x_next
constexpr int kRows = 8;          // rows of a tile: the MMA's rows g (g + 8 stay zero)
constexpr int kConsumerWarps = 4;
constexpr int kStageCols = 128;                           // columns of every stream per stage
constexpr int kWarpCols = kStageCols / kConsumerWarps;    // 32: 8 per lane of a quad
constexpr int kKSteps = kWarpCols * kStreams / 8;         // 16 k-steps of 8 per warp and stage
constexpr int kNTiles = kNmix / 8;                        // 3
constexpr int kStageBytes = kConsumerWarps * kKSteps * kNTiles * kWarp * 8;  // 48 KB
constexpr int kProducerWarp = kConsumerWarps, kStatsWarp = kConsumerWarps + 1;
constexpr int kThreads = (kConsumerWarps + 2) * kWarp;
constexpr int kConsumerThreads = kConsumerWarps * kWarp;
static_assert(kStageBytes == 49152, "a stage is 128 columns x 4 streams x 24 fp32");

struct Args {
  const uint16_t* x;            // [M, n, C]
  const uint16_t* f;            // [M, C]
  const float* post;            // [M, n]
  const float* comb;            // [M, n, n]
  const float* pre;             // [M, n]: the carried pre_mix of the collapse
  const float* norm_weight;     // [C]
  const unsigned char* packed;  // hc_fn in B-fragment order, C / 128 stages of kStageBytes
  uint16_t* x_next;             // [M, n, C]
  uint16_t* layer_input;        // [M, C]
  float* sums;                  // [M, kSums]
  CoefficientParams cp;
  CoefficientOutputs out;
  int64_t tokens;
  int hidden;
  float eps_n;
  int cluster_ctas;
  int clusters;
};

__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// One arrival on the barrier at `bar`'s offset in the CTA of cluster rank `rank`, releasing this
// thread's earlier accesses at CTA scope (what the ring needs: the slot's shared reads done), or
// with kClusterScope at cluster scope, which also waits for the thread's global loads and stores
// in flight (the prefetched x of the next steps among them).
template <bool kClusterScope>
__device__ __forceinline__ void arrive_in_cta(uint64_t* bar, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(shared_address(bar)), "r"(rank));
  if constexpr (kClusterScope) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote)
                 : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  }
#endif
}

// `bytes` from global `src` into `dst` (a shared offset) of every CTA in `mask`, each CTA's barrier
// at `bar`'s offset signalled with the bytes.
__device__ __forceinline__ void bulk_multicast(void* dst, const void* src, unsigned bytes,
                                               uint64_t* bar, uint16_t mask, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      ".L2::cache_hint [%0], [%1], %2, [%3], %4, %5;" ::"r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar)), "h"(mask), "l"(policy)
      : "memory");
#endif
}

// Where the CTA's tiles are: iteration `it` of cluster q takes tile (q + it * clusters) * ctas +
// rank, so the CTAs of a cluster walk consecutive tiles in step (they share hc_fn's stages).
struct Walk {
  int64_t iterations, fills;
  int stages_per_tile, rank;
  int64_t first_group;
  int clusters, ctas;
  __device__ int64_t tile(int64_t it) const {
    return (first_group + it * clusters) * ctas + rank;
  }
};

__device__ Walk walk_of(const Args& a) {
  Walk w;
  w.ctas = a.cluster_ctas;
  w.clusters = a.clusters;
  w.rank = cluster_cta_rank();
  w.first_group = blockIdx.x / a.cluster_ctas;
  w.stages_per_tile = a.hidden / kStageCols;
  const int64_t groups = ceil_div(ceil_div(a.tokens, kRows), a.cluster_ctas);
  w.iterations = w.first_group < groups ? (groups - 1 - w.first_group) / a.clusters + 1 : 0;
  w.fills = w.iterations * w.stages_per_tile;
  return w;
}

// Rank 0's lane 0 of the producer warp fills the ring for the cluster; every CTA's lane 0 arms
// its own full barrier once the fill before has landed there (the bytes may arrive first: the
// phase waits for the arrival too).
template <int kStages>
__device__ void produce(const Args& a, const Walk& w, unsigned char* ring, uint64_t* full,
                        uint64_t* empty) {
  if (threadIdx.x % kWarp != 0) return;
  const uint64_t policy = l2_policy<L2Eviction::last>();
  const uint16_t mask = uint16_t((1u << w.ctas) - 1);
  for (int64_t fill = 0; fill < w.fills; ++fill) {
    const int slot = int(fill % kStages);
    const unsigned use = unsigned(fill / kStages);
    if (fill >= kStages) mbarrier_wait(&full[slot], (use - 1) & 1);
    mbarrier_arrive_expect_bytes(&full[slot], kStageBytes);
    if (w.rank != 0) continue;
    if (fill >= kStages) mbarrier_wait(&empty[slot], (use - 1) & 1);
    const int stage = int(fill % w.stages_per_tile);
    const unsigned char* src = a.packed + size_t(stage) * kStageBytes;
    for (int part = 0; part < 4; ++part) {
      bulk_multicast(ring + slot * kStageBytes + part * (kStageBytes / 4),
                     src + part * (kStageBytes / 4), kStageBytes / 4, &full[slot], mask, policy);
    }
  }
}

// x_prev's 4 streams and F for one thread at one step (8 columns of its row).
struct Inputs {
  uint4 v[kStreams + 1];
};

__device__ __forceinline__ void load_inputs(const Args& a, const Walk& w, int64_t step, int g,
                                            int col_in_stage, Inputs& in) {
  const int64_t it = step / w.stages_per_tile;
  const int64_t row = w.tile(it) * kRows + g;
  const int c = int(step % w.stages_per_tile) * kStageCols + col_in_stage;
  if (step < w.fills && row < a.tokens) {
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      in.v[j] = load_stream_u4(a.x + (row * kStreams + j) * a.hidden + c);
    }
    in.v[kStreams] = load_stream_u4(a.f + row * a.hidden + c);
  } else {
#pragma unroll
    for (int j = 0; j <= kStreams; ++j) in.v[j] = make_uint4(0, 0, 0, 0);
  }
}

struct RowState {
  float post[kStreams], comb[kStreams][kStreams], pre[kStreams];
  float acc[kNTiles][4];
  float sum_sq_x, sum_sq_y;
  int64_t row;
};

// The tile's row coefficients (post, comb, pre), staged in shared memory by the stats warp one
// tile ahead, so that a tile's first step does not wait on global loads.
struct RowCoefficients {
  float post[kStreams], comb[kStreams][kStreams], pre[kStreams];
};

__device__ __forceinline__ void load_row_coefficients(const Args& a, int64_t row,
                                                      RowCoefficients& c) {
  const bool valid = row < a.tokens;
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
    c.post[j] = valid ? a.post[row * kStreams + j] : 0.f;
    c.pre[j] = valid ? a.pre[row * kStreams + j] : 0.f;
#pragma unroll
    for (int k = 0; k < kStreams; ++k) {
      c.comb[j][k] = valid ? a.comb[(row * kStreams + j) * kStreams + k] : 0.f;
    }
  }
}

__device__ __forceinline__ void begin_tile(int64_t row, const RowCoefficients& staged, RowState& s) {
  s.row = row;
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
    s.post[j] = staged.post[j];
    s.pre[j] = staged.pre[j];
#pragma unroll
    for (int k = 0; k < kStreams; ++k) s.comb[j][k] = staged.comb[j][k];
  }
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) s.acc[n][0] = s.acc[n][1] = s.acc[n][2] = s.acc[n][3] = 0.f;
  s.sum_sq_x = s.sum_sq_y = 0.f;
}

// One step of a consumer thread: the post of its 8 columns (stored), y into shared memory, the sums
// of squares, and the warp's 16 k-steps x 3 n-tiles of MMAs against the stage's hc_fn.
__device__ __forceinline__ void consume_step(const Args& a, const Inputs& in, int c, int lane,
                                             const float2* b_frag, unsigned char* y_row,
                                             RowState& s) {
  float xs[kStreams][8], f[8], out[kStreams][8], y[8];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) unpack_bf16x8(in.v[j], xs[j]);
  unpack_bf16x8(in.v[kStreams], f);
  const bool valid = s.row < a.tokens;
  uint16_t* x_next = a.x_next + s.row * kStreams * a.hidden + c;
#pragma unroll
  for (int k = 0; k < kStreams; ++k) {
    post_stream8_k<kStreams>(xs, f, s.post, s.comb, k, out[k]);
    if (valid) store_u4(x_next + k * a.hidden, pack_bf16x8(out[k]));
#pragma unroll
    for (int e = 0; e < 8; ++e) s.sum_sq_x = fmaf(out[k][e], out[k][e], s.sum_sq_x);
  }
  collapse8<kStreams>(out, s.pre, y);
#pragma unroll
  for (int e = 0; e < 8; ++e) s.sum_sq_y = fmaf(y[e], y[e], s.sum_sq_y);
  *reinterpret_cast<uint4*>(y_row + c * 2) = pack_bf16x8(y);
#pragma unroll
  for (int step = 0; step < kKSteps; ++step) {
    const int k = step / 4, q = step % 4;
    const uint32_t frag[4] = {__float_as_uint(out[k][2 * q]), 0u, __float_as_uint(out[k][2 * q + 1]),
                              0u};
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const float2 b = b_frag[(step * kNTiles + n) * kWarp + lane];
      mma_tf32(s.acc[n], frag, __float_as_uint(b.x), __float_as_uint(b.y));
    }
  }
}

struct TileShared {
  float red[kConsumerWarps][kRows][kNmix];
  float squares[kConsumerWarps][kRows][2];
  float sums[kRows][kSums];
  float row_scale[kRows];
  float params[kCoefficientParamFloats<kStreams>];
  RowCoefficients coefficients[2][kRows];  // tile it's in [it % 2]
};

// A tile's end, by the consumer warps: the warps' partial sums in a fixed order, the stats warp
// handed the tile's sums, y scaled into layer_input from shared memory.
__device__ void end_tile(const Args& a, const Walk& w, int64_t it, RowState& s, int g, int t,
                         const unsigned char* y_smem, int y_pitch, TileShared& ts) {
  const int warp = threadIdx.x / kWarp;
#pragma unroll
  for (int m = 1; m <= 2; m <<= 1) {
    s.sum_sq_x += __shfl_xor_sync(0xffffffffu, s.sum_sq_x, m);
    s.sum_sq_y += __shfl_xor_sync(0xffffffffu, s.sum_sq_y, m);
  }
  if (it > 0) named_sync(3, kConsumerThreads + kWarp);  // the stats warp is done with ts.sums
  if (t == 0) ts.squares[warp][g][0] = s.sum_sq_x, ts.squares[warp][g][1] = s.sum_sq_y;
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
    ts.red[warp][g][8 * n + 2 * t] = s.acc[n][0];
    ts.red[warp][g][8 * n + 2 * t + 1] = s.acc[n][1];
  }
  named_sync(1, kConsumerThreads);
  for (int e = threadIdx.x; e < kRows * kSums; e += kConsumerThreads) {
    const int r = e / kSums, q = e % kSums;
    float v = 0.f;
    for (int p = 0; p < kConsumerWarps; ++p) v += q < kNmix ? ts.red[p][r][q] : ts.squares[p][r][0];
    ts.sums[r][q] = v;
    const int64_t row = w.tile(it) * kRows + r;
    if (row < a.tokens) a.sums[row * kSums + q] = v;
  }
  if (threadIdx.x < kRows) {
    float v = 0.f;
    for (int p = 0; p < kConsumerWarps; ++p) v += ts.squares[p][threadIdx.x][1];
    ts.row_scale[threadIdx.x] = rms_scale(v, a.hidden, a.eps_n);
  }
  named_sync(1, kConsumerThreads);
  named_arrive(2, kConsumerThreads + kWarp);  // the sums are the stats warp's
  // By columns, each thread's norm weights loaded once for the tile's rows.
  const int64_t row0 = w.tile(it) * kRows;
  for (int c = threadIdx.x * 8; c < a.hidden; c += kConsumerThreads * 8) {
    float wv[8];
    unpack_f4x2(load_weight_f4(a.norm_weight + c), load_weight_f4(a.norm_weight + c + 4), wv);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (row0 + r >= a.tokens) break;
      float y[8], o[8];
      unpack_bf16x8(*reinterpret_cast<const uint4*>(y_smem + r * y_pitch + c * 2), y);
      const float scale = ts.row_scale[r];
#pragma unroll
      for (int i = 0; i < 8; ++i) o[i] = y[i] * scale * wv[i];
      store_u4(a.layer_input + (row0 + r) * a.hidden + c, pack_bf16x8(o));
    }
  }
  named_sync(1, kConsumerThreads);  // y's buffer is free for the next tile
}

template <int kStages, int kDepth, bool kClusterScope>
__device__ void consume(const Args& a, const Walk& w, unsigned char* ring, uint64_t* full,
                        uint64_t* empty, unsigned char* y_smem, int y_pitch, TileShared& ts) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int col_in_stage = warp * kWarpCols + t * 8;
  Inputs buf[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) load_inputs(a, w, d, g, col_in_stage, buf[d]);
  RowState s;
  for (int64_t step0 = 0; step0 < w.fills; step0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int64_t step = step0 + d;
      if (step >= w.fills) break;
      const Inputs in = buf[d];
      load_inputs(a, w, step + kDepth, g, col_in_stage, buf[d]);
      const int64_t it = step / w.stages_per_tile;
      const int stage = int(step % w.stages_per_tile);
      if (stage == 0) begin_tile(w.tile(it) * kRows + g, ts.coefficients[it % 2][g], s);
      const int slot = int(step % kStages);
      mbarrier_wait(&full[slot], unsigned(step / kStages) & 1);
      const float2* b_frag =
          reinterpret_cast<const float2*>(ring + slot * kStageBytes) + warp * kKSteps * kNTiles * kWarp;
      consume_step(a, in, stage * kStageCols + col_in_stage, lane, b_frag, y_smem + g * y_pitch, s);
      // The slot's shared reads ordered before the copy engine's next write to it (the library's
      // rings do the same: release_ring_slot), then one arrival per warp on the first CTA's barrier.
      fence_shared_for_async_writes();
      __syncwarp();
      if (lane == 0) arrive_in_cta<kClusterScope>(&empty[slot], 0);
      if (stage == w.stages_per_tile - 1) end_tile(a, w, it, s, g, t, y_smem, y_pitch, ts);
    }
  }
  if (w.iterations > 0) named_sync(3, kConsumerThreads + kWarp);  // the stats warp's last arrival
}

// Lane r < 8 of the stats warp stages row r's coefficients of iteration `it` (when it has one).
__device__ __forceinline__ void stage_tile_coefficients(const Args& a, const Walk& w, int64_t it,
                                                        TileShared& ts) {
  const int lane = threadIdx.x % kWarp;
  if (lane < kRows && it < w.iterations) {
    load_row_coefficients(a, w.tile(it) * kRows + lane, ts.coefficients[it % 2][lane]);
  }
}

// The stats warp: lane r < 8 turns row r's sums into pre, post and comb, then stages the
// coefficients of the tile after next (the consumers' wait for this warp's arrival on barrier 3
// at the next tile's end orders them before that tile's first step).
__device__ void stats(const Args& a, const Walk& w, TileShared& ts) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t it = 0; it < w.iterations; ++it) {
    named_sync(2, kConsumerThreads + kWarp);
    const int64_t row = w.tile(it) * kRows + lane;
    if (lane < kRows && row < a.tokens) {
      token_coefficients<kStreams>(ts.sums[lane], row, a.cp, ts.params, a.out);
    }
    stage_tile_coefficients(a, w, it + 2, ts);
    __syncwarp();
    named_arrive(3, kConsumerThreads + kWarp);
  }
}

// kClusterScope: the ring's arrivals released at cluster scope (the first form, a variant).
template <int kStages, int kDepth, bool kClusterScope = false>
__global__ void __launch_bounds__(kThreads, 1) rowtile_boundary_kernel(const __grid_constant__ Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  __shared__ TileShared ts;
  const Walk w = walk_of(a);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], a.cluster_ctas * kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  stage_coefficient_params<kStreams>(a.cp, ts.params);
  if (threadIdx.x / kWarp == kStatsWarp) {
    stage_tile_coefficients(a, w, 0, ts);
    stage_tile_coefficients(a, w, 1, ts);
  }
  __syncthreads();
  cluster_arrive();  // every CTA's barriers initialised before the first multicast or arrival
  cluster_wait();
  unsigned char* ring = smem;
  unsigned char* y_smem = smem + kStages * kStageBytes;
  const int y_pitch = 2 * a.hidden + 64;  // rows 64 bytes apart in the banks
  const int warp = threadIdx.x / kWarp;
  if (warp == kProducerWarp) {
    produce<kStages>(a, w, ring, full, empty);
  } else if (warp == kStatsWarp) {
    stats(a, w, ts);
  } else {
    consume<kStages, kDepth, kClusterScope>(a, w, ring, full, empty, y_smem, y_pitch, ts);
  }
  __syncwarp();
  cluster_arrive();  // no CTA leaves while a peer may still arrive on its barriers
  cluster_wait();
#endif
}

// hc_fn [24, n C] fp32 -> TF32-rounded, in the order the consumers read: stage, warp, k-step,
// n-tile, lane, then (b0, b1) = rows k = t and t + 4 of the MMA's B at column n = g.
__global__ void pack_hc_fn(const float* hc_fn, int hidden, float* packed) {
  const int64_t total = int64_t(hidden / kStageCols) * kStageBytes / 4;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int half = int(i % 2), lane = int(i / 2 % kWarp);
    const int64_t rest = i / 2 / kWarp;
    const int n_tile = int(rest % kNTiles), step = int(rest / kNTiles % kKSteps);
    const int warp = int(rest / kNTiles / kKSteps % kConsumerWarps);
    const int stage = int(rest / kNTiles / kKSteps / kConsumerWarps);
    const int g = lane / 4, t = lane % 4, k = step / 4, q = step % 4;
    const int column = stage * kStageCols + warp * kWarpCols + t * 8 + 2 * q + half;
    const float v = hc_fn[int64_t(n_tile * 8 + g) * kStreams * hidden + k * hidden + column];
    packed[i] = __uint_as_float(to_tf32(v));
  }
}

// ---- inputs, references and checks ---------------------------------------------------------

__device__ __forceinline__ float uniform(uint64_t i, uint32_t salt) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) * 2246822519u ^ salt * 3266489917u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return float(h >> 8) * (1.f / 16777216.f);  // [0, 1)
}
__global__ void fill_bf16(uint16_t* out, int64_t count, uint32_t salt, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = uint16_t(f32_to_bf16_bits(lo + (hi - lo) * uniform(uint64_t(i), salt)));
  }
}
__global__ void fill_f32(float* out, int64_t count, uint32_t salt, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = lo + (hi - lo) * uniform(uint64_t(i), salt);
  }
}

struct Failures {
  unsigned long long x_next, layer_input_any, layer_input_far, sums, coefficients;
  float max_sum_error;  // |got - want| / sum |terms|
};

__global__ void compare_bits16(const uint16_t* want, const uint16_t* got, int64_t count,
                               unsigned long long* any, unsigned long long* far) {
  unsigned long long local_any = 0, local_far = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int a = want[i], b = got[i];
    local_any += a != b;
    local_far += ((a ^ b) & 0x8000) != 0 ? a != b : abs(a - b) > 1;  // one bf16 ulp apart
  }
  if (local_any) atomicAdd(any, local_any);
  if (far != nullptr && local_far) atomicAdd(far, local_far);
}

// Row `blockIdx.x`'s 24 dot products and sum of squares in float64 from the reference x_next and
// the TF32-rounded hc_fn; counts sums off by more than 1e-4 of the sum of |terms|.
__global__ void check_sums(const uint16_t* x_next, const float* hc_fn, const float* got,
                           int hidden, Failures* fails) {
  __shared__ double part[256][2];
  const int64_t row = blockIdx.x, k_total = int64_t(kStreams) * hidden;
  for (int q = 0; q < kSums; ++q) {
    double s = 0, abs_s = 0;
    for (int64_t k = threadIdx.x; k < k_total; k += blockDim.x) {
      const double x = __uint_as_float(uint32_t(x_next[row * k_total + k]) << 16);
      const double h = q < kNmix ? double(__uint_as_float(to_tf32(hc_fn[q * k_total + k]))) : x;
      s += x * h;
      abs_s += fabs(x * h);
    }
    part[threadIdx.x][0] = s, part[threadIdx.x][1] = abs_s;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0, abs_total = 0;
      for (int i = 0; i < blockDim.x; ++i) total += part[i][0], abs_total += part[i][1];
      const double error = fabs(double(got[row * kSums + q]) - total) / (abs_total + 1e-30);
      if (!(error <= 1e-4)) atomicAdd(&fails->sums, 1ull);  // NaN fails
      if (error == error) atomicMax(reinterpret_cast<int*>(&fails->max_sum_error),
                                    __float_as_int(float(error)));
    }
    __syncthreads();
  }
}

__global__ void reference_coefficients(const float* sums, int64_t tokens, CoefficientParams cp,
                                       const float* params, CoefficientOutputs out) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < tokens) token_coefficients<kStreams>(sums + row * kSums, row, cp, params, out);
}

__global__ void compare_f32_bits(const float* want, const float* got, int64_t count,
                                 unsigned long long* wrong) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (__float_as_uint(want[i]) != __float_as_uint(got[i]) || want[i] != want[i]) {
      atomicAdd(wrong, 1ull);
    }
  }
}

// ---- the host side ---------------------------------------------------------------------------

struct Variant {
  const char* name;
  int stages, depth, cluster_ctas;
  bool cluster_scope_release = false;
};

using Kernel = void (*)(Args);
Kernel kernel_for(const Variant& v) {
  if (v.cluster_scope_release) return rowtile_boundary_kernel<2, 2, true>;
  if (v.stages == 3) return rowtile_boundary_kernel<3, 2>;
  if (v.depth == 1) return rowtile_boundary_kernel<2, 1>;
  if (v.depth == 3) return rowtile_boundary_kernel<2, 3>;
  return rowtile_boundary_kernel<2, 2>;
}

template <typename T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

struct Buffers {
  uint16_t *x, *f, *x_next, *layer_input, *x_next_ref, *layer_input_ref;
  float *post, *comb, *pre, *norm_weight, *hc_fn, *packed, *sums, *params;
  float *out_pre, *out_post, *out_comb, *ref_pre, *ref_post, *ref_comb;
  Failures* fails;
};

struct Row {
  std::string variant;
  int tokens, ctas;
  float us;
  double tb_per_s;
};

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long value = std::strtol(p, &end, 10);
    if (end == p || value <= 0 || value > (1 << 20)) {
      std::fprintf(stderr, "bad list: %s\n", text);
      std::exit(2);
    }
    out.push_back(int(value));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') {
      std::fprintf(stderr, "bad list: %s\n", text);
      std::exit(2);
    }
  }
  return out;
}

int dynamic_smem(const Variant& v, int hidden) {
  return v.stages * kStageBytes + kRows * (2 * hidden + 64);
}

// Sets up one variant's launch at `tokens`; false where it does not fit the device.
bool prepare(const Variant& v, const Buffers& b, int tokens, int hidden, const CoefficientParams& cp,
             Args& a, int& ctas) {
  const Kernel kernel = kernel_for(v);
  cudaFuncAttributes attr{};
  MHC_MICRO_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int optin = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int smem = dynamic_smem(v, hidden);
  if (smem + int(attr.sharedSizeBytes) > optin) return false;
  int max_clusters = 0;
  MHC_MICRO_CHECK(max_active_clusters(kernel, v.cluster_ctas, kThreads, smem, &max_clusters));
  if (max_clusters < 1) return false;
  const int64_t groups = ceil_div(ceil_div(tokens, kRows), v.cluster_ctas);
  a = Args{b.x,           b.f,     b.post,       b.comb,
           b.pre,         b.norm_weight, reinterpret_cast<const unsigned char*>(b.packed),
           b.x_next,      b.layer_input, b.sums, cp,
           CoefficientOutputs{b.out_pre, b.out_post, b.out_comb, nullptr},
           tokens,        hidden,  1e-6f,        v.cluster_ctas,
           int(std::min<int64_t>(groups, max_clusters))};
  ctas = a.clusters * v.cluster_ctas;
  return true;
}

void launch(const Variant& v, const Args& a, int ctas, int hidden) {
  MHC_MICRO_CHECK(launch_kernel_in_clusters(kernel_for(v), dim3(ctas), dim3(kThreads),
                                            dynamic_smem(v, hidden), v.cluster_ctas,
                                            LaunchTarget(nullptr, false), a));
}

// Runs the variant once on poisoned outputs and checks it against the references; prints and
// returns false on any failure.
bool check(const Variant& v, const Buffers& b, int tokens, int hidden, const CoefficientParams& cp,
           int sms) {
  Args a;
  int ctas = 0;
  if (!prepare(v, b, tokens, hidden, cp, a, ctas)) return true;
  const int64_t x_elems = int64_t(tokens) * kStreams * hidden, li_elems = int64_t(tokens) * hidden;
  // The references: the row kernel's post + next input, then the sums and coefficients.
  PostArgs pa;
  pa.x = b.x, pa.post = b.post, pa.comb = b.comb, pa.sublayer_out = b.f, pa.x_next = b.x_next_ref;
  pa.hidden = hidden, pa.row_threads = row_kernel_threads(hidden), pa.eps_n = 1e-6f;
  pa.next_pre_mix = b.pre, pa.next_norm_weight = b.norm_weight;
  pa.next_layer_input = b.layer_input_ref;
  MHC_MICRO_CHECK((launch_post<kStreams, true>(pa, tokens, LaunchTarget(nullptr, false))));
  MHC_MICRO_CHECK(cudaMemset(b.x_next, 0xff, x_elems * 2));  // poisoned: NaN in bf16 and fp32
  MHC_MICRO_CHECK(cudaMemset(b.layer_input, 0xff, li_elems * 2));
  MHC_MICRO_CHECK(cudaMemset(b.sums, 0xff, size_t(tokens) * kSums * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_pre, 0xff, size_t(tokens) * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_post, 0xff, size_t(tokens) * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_comb, 0xff, size_t(tokens) * kStreams * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.fails, 0, sizeof(Failures)));
  launch(v, a, ctas, hidden);
  MHC_MICRO_CHECK(cudaGetLastError());
  compare_bits16<<<4 * sms, 256>>>(b.x_next_ref, b.x_next, x_elems, &b.fails->x_next, nullptr);
  compare_bits16<<<4 * sms, 256>>>(b.layer_input_ref, b.layer_input, li_elems,
                                   &b.fails->layer_input_any, &b.fails->layer_input_far);
  check_sums<<<tokens, 256>>>(b.x_next_ref, b.hc_fn, b.sums, hidden, b.fails);
  reference_coefficients<<<ceil_div(tokens, 128), 128>>>(
      b.sums, tokens, cp, b.params, CoefficientOutputs{b.ref_pre, b.ref_post, b.ref_comb, nullptr});
  compare_f32_bits<<<sms, 256>>>(b.ref_pre, b.out_pre, int64_t(tokens) * kStreams,
                                 &b.fails->coefficients);
  compare_f32_bits<<<sms, 256>>>(b.ref_post, b.out_post, int64_t(tokens) * kStreams,
                                 &b.fails->coefficients);
  compare_f32_bits<<<sms, 256>>>(b.ref_comb, b.out_comb, int64_t(tokens) * kStreams * kStreams,
                                 &b.fails->coefficients);
  MHC_MICRO_CHECK(cudaGetLastError());
  Failures f{};
  MHC_MICRO_CHECK(cudaMemcpy(&f, b.fails, sizeof f, cudaMemcpyDeviceToHost));
  const bool ok = f.x_next == 0 && f.layer_input_far == 0 && f.sums == 0 && f.coefficients == 0;
  std::printf("check %-44s C=%d M=%-5d %s: x_next %llu wrong, layer_input %llu differ (%llu by more "
              "than 1 ulp), sums %llu off (max %.2e), coefficients %llu wrong\n",
              v.name, hidden, tokens, ok ? "PASS" : "FAIL", f.x_next, f.layer_input_any,
              f.layer_input_far, f.sums, double(f.max_sum_error), f.coefficients);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int hidden = 5120;
  std::vector<int> token_counts = {2048, 4096, 8192};
  std::vector<int> check_counts = {1, 13, 1003};
  const char* json_path = nullptr;
  std::string commit = "unknown";
  bool check_only = false;  // for compute-sanitizer: the checks, no timing
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--check-only")) {
      check_only = true;
    } else if (!std::strcmp(argv[i], "--hidden") && has_value) {
      hidden = parse_list(argv[++i]).at(0);
    } else if (!std::strcmp(argv[i], "--tokens") && has_value) {
      token_counts = parse_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json") && has_value) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--commit") && has_value) {
      commit = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--hidden C] [--tokens a,b] [--json F] [--commit X] "
                   "[--check-only]\n",
                   argv[0]);
      return 2;
    }
  }
  if (hidden % kStageCols != 0 || hidden > 16384) {
    std::fprintf(stderr, "--hidden must be a multiple of %d up to 16384\n", kStageCols);
    return 2;
  }
  if (check_only) check_counts.clear();  // only --tokens
  int sms = 0, driver = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  MHC_MICRO_CHECK(cudaDriverGetVersion(&driver));
  cudaDeviceProp prop{};
  MHC_MICRO_CHECK(cudaGetDeviceProperties(&prop, 0));
  int max_tokens = 0;
  for (int m : token_counts) max_tokens = std::max(max_tokens, m);
  for (int m : check_counts) max_tokens = std::max(max_tokens, m);
  const size_t x_elems = size_t(max_tokens) * kStreams * hidden, li = size_t(max_tokens) * hidden;
  const size_t k_total = size_t(kStreams) * hidden;
  Buffers b{};
  b.x = device_alloc<uint16_t>(x_elems), b.x_next = device_alloc<uint16_t>(x_elems);
  b.x_next_ref = device_alloc<uint16_t>(x_elems);
  b.f = device_alloc<uint16_t>(li), b.layer_input = device_alloc<uint16_t>(li);
  b.layer_input_ref = device_alloc<uint16_t>(li);
  b.post = device_alloc<float>(max_tokens * kStreams), b.pre = device_alloc<float>(max_tokens * kStreams);
  b.comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.norm_weight = device_alloc<float>(hidden), b.hc_fn = device_alloc<float>(kNmix * k_total);
  b.packed = device_alloc<float>(kNmix * k_total), b.sums = device_alloc<float>(max_tokens * kSums);
  b.params = device_alloc<float>(kCoefficientParamFloats<kStreams>);
  for (float** p : {&b.out_pre, &b.out_post, &b.ref_pre, &b.ref_post}) {
    *p = device_alloc<float>(max_tokens * kStreams);
  }
  b.out_comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.ref_comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.fails = device_alloc<Failures>(1);
  fill_bf16<<<4 * sms, 256>>>(b.x, x_elems, 1, -2.f, 2.f);
  fill_bf16<<<4 * sms, 256>>>(b.f, li, 2, -1.f, 1.f);
  fill_f32<<<sms, 256>>>(b.post, max_tokens * kStreams, 3, 0.f, 2.f);
  fill_f32<<<sms, 256>>>(b.comb, max_tokens * kStreams * kStreams, 4, 0.f, 0.5f);
  fill_f32<<<sms, 256>>>(b.pre, max_tokens * kStreams, 5, 0.f, 1.f);
  fill_f32<<<sms, 256>>>(b.norm_weight, hidden, 6, 0.5f, 1.5f);
  fill_f32<<<4 * sms, 256>>>(b.hc_fn, kNmix * k_total, 7, -0.02f, 0.02f);
  fill_f32<<<1, 32>>>(b.params, kNmix, 8, -0.5f, 0.5f);                 // hc_base
  fill_f32<<<1, 32>>>(b.params + kNmix, 3, 9, 0.5f, 1.5f);              // hc_scale
  pack_hc_fn<<<4 * sms, 256>>>(b.hc_fn, hidden, b.packed);
  MHC_MICRO_CHECK(cudaGetLastError());
  CoefficientParams cp;
  cp.hc_base = b.params, cp.hc_scale = b.params + kNmix;
  cp.inv_k = 1.f / float(k_total);
  const std::vector<Variant> variants = {
      {"8-row tiles, 2 stages, 2 ahead, clusters of 4", 2, 2, 4},
      {"the same, ring arrivals released at cluster scope", 2, 2, 4, true},
      {"8-row tiles, 2 stages, 2 ahead, clusters of 8", 2, 2, 8},
      {"8-row tiles, 2 stages, 2 ahead, clusters of 2", 2, 2, 2},
      {"8-row tiles, 2 stages, 1 ahead, clusters of 4", 2, 1, 4},
      {"8-row tiles, 2 stages, 3 ahead, clusters of 4", 2, 3, 4},
      {"8-row tiles, 3 stages, 2 ahead, clusters of 4", 3, 2, 4},
  };
  bool all_pass = true;
  for (const Variant& v : variants) {
    for (int m : check_counts) all_pass = check(v, b, m, hidden, cp, sms) && all_pass;
    for (int m : token_counts) all_pass = check(v, b, m, hidden, cp, sms) && all_pass;
  }
  if (check_only) return all_pass ? 0 : 1;
  std::vector<Row> rows;
  std::printf("C = %d, n = %d\n%-64s %6s %6s %9s %7s\n", hidden, kStreams, "variant", "tokens",
              "CTAs", "us", "TB/s");
  for (int tokens : token_counts) {
    const double bytes = double(tokens) * hidden * 2 * 2 * (kStreams + 1);  // the floor's bytes
    const auto record = [&](const std::string& name, int ctas, float us) {
      rows.push_back({name, tokens, ctas, us, bytes / us * 1e-6});
      std::printf("%-64s %6d %6d %9.2f %7.3f\n", name.c_str(), tokens, ctas, us, bytes / us * 1e-6);
    };
    record("cudaMemcpyAsync of the same bytes", 0, mhc::bench::median_launch_us([&] {
             MHC_MICRO_CHECK(cudaMemcpyAsync(b.x_next_ref, b.x, size_t(tokens) * k_total * 2,
                                             cudaMemcpyDeviceToDevice));
             MHC_MICRO_CHECK(cudaMemcpyAsync(b.layer_input_ref, b.f, size_t(tokens) * hidden * 2,
                                             cudaMemcpyDeviceToDevice));
           }, 20));
    PostArgs pa;
    pa.x = b.x, pa.post = b.post, pa.comb = b.comb, pa.sublayer_out = b.f, pa.x_next = b.x_next_ref;
    pa.hidden = hidden, pa.row_threads = row_kernel_threads(hidden), pa.eps_n = 1e-6f;
    pa.next_pre_mix = b.pre, pa.next_norm_weight = b.norm_weight;
    pa.next_layer_input = b.layer_input_ref;
    record("post + next input (row kernel, no coefficients)", tokens,
           mhc::bench::median_launch_us([&] {
             MHC_MICRO_CHECK((launch_post<kStreams, true>(pa, tokens, LaunchTarget(nullptr, false))));
           }, 20));
    for (const Variant& v : variants) {
      Args a;
      int ctas = 0;
      if (!prepare(v, b, tokens, hidden, cp, a, ctas)) continue;
      record(v.name, ctas, mhc::bench::median_launch_us([&] { launch(v, a, ctas, hidden); }, 20));
    }
  }
  if (json_path != nullptr) {
    char date[16];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    nlohmann::ordered_json doc = {
        {"tool", "mhc_rowtile_boundary_microbench (bench/rowtile_boundary_microbench.cu)"},
        {"gpu", prop.name},
        {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
        {"driver_version", std::to_string(driver)},
        {"commit", commit},
        {"date", date},
        {"hidden", hidden},
        {"checks_passed", all_pass},
        {"method", "C = " + std::to_string(hidden) +
                       ", n = 4: the whole-row tile prototype (post, collapse, norm, TF32 "
                       "projection, stats) against the runtime's memcpy of the same bytes and "
                       "the row kernel's post + next input; one launch per timing between CUDA "
                       "events, 3 warm-ups, median of 20; TB/s = the fused floor's bytes "
                       "(4C(n + 1) per token) / time; hc_fn's reads from L2 not counted"}};
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      results.push_back({{"variant", r.variant},
                         {"tokens", r.tokens},
                         {"ctas", r.ctas},
                         {"median_us", std::round(r.us * 100.0) / 100.0},
                         {"tb_per_s", std::round(r.tb_per_s * 1000.0) / 1000.0}});
    }
    doc["results"] = results;
    mhc::io::write_file(json_path, doc.dump(1) + "\n");  // a temporary renamed into place
  }
  return all_pass ? 0 : 1;
}
