// The whole-row tile prototype of the fused boundary (dev/cuda/rowtile_boundary_microbench.cu
// checks and times it; not in the library): each CTA owns tiles of 8 whole rows (tokens) and walks
// their columns in stages of 128. Per stage its consumer warps (Shape) load x_prev (n = 4 streams)
// and F into registers (kDepth stages ahead), form x_next (the post's formula, stored), the
// collapse y with the carried pre_mix (kept in shared memory, bf16), the sums of squares, and the
// TF32 projection x_next . hc_fn by m16n8k8 MMAs whose A fragments are the thread's own x_next
// values (8 of the 16 MMA rows used). hc_fn comes pre-packed in the MMA's B-fragment order (one
// conflict-free 8-byte shared load per MMA), one 48 KB stage per 128 columns, multicast by the
// cluster's rank 0 to every CTA of a cluster (the CTAs of a cluster take consecutive tiles, so L2
// serves hc_fn once per cluster x 8 rows). At a tile's end the whole row is in the CTA: the
// norm's scale is known without any exchange, y is scaled from shared memory into layer_input
// (no read-back from global memory), and a stats warp turns the tile's 24 dot products and sum
// of squares into pre, post and the Sinkhorn comb (token_coefficients) while the consumers stream
// the next tile. The CTAs are persistent.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mhc/cuda/coefficients.cuh"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/post.cuh"

namespace mhc::bench::rowtile {
using namespace mhc::cuda;

constexpr int kStreams = 4;
constexpr int kNmix = 24;
constexpr int kSums = kNmix + 1;  // the dot products, then the sum of squares of x_next
constexpr int kRows = 8;          // rows of a tile: the MMA's rows g (g + 8 stay zero)
constexpr int kStageCols = 128;   // columns of every stream per stage
constexpr int kNTiles = kNmix / 8;
constexpr int kStageBytes = kStageCols * kStreams * kNmix * 4;  // 48 KB of hc_fn

// How a stage's columns are dealt: each lane of a quad (the 4 lanes of an MMA row g) owns
// kLaneCols consecutive columns of its row, so a warp owns 4 x kLaneCols columns of the stage and
// the CTA kStageCols / (4 kLaneCols) consumer warps: 4 at 8 columns a lane (16-byte loads), 8 at
// 4 (8-byte loads, twice the warps to hide each other's latency). A lane's 4 x kLaneCols x_next
// values feed 2 kLaneCols k-steps of 8 (two values each: the MMA's columns t and t + 4).
template <int kLaneCols>
struct Shape {
  static_assert(kLaneCols == 4 || kLaneCols == 8, "a lane owns 4 or 8 columns");
  static constexpr int kWarpCols = 4 * kLaneCols;
  static constexpr int kConsumerWarps = kStageCols / kWarpCols;
  static constexpr int kKSteps = 2 * kLaneCols;
  static constexpr int kProducerWarp = kConsumerWarps, kStatsWarp = kConsumerWarps + 1;
  static constexpr int kThreads = (kConsumerWarps + 2) * kWarp;
  static constexpr int kConsumerThreads = kConsumerWarps * kWarp;
  static_assert(kConsumerWarps * kKSteps * kNTiles * kWarp * 8 == kStageBytes,
                "the warps' B fragments fill one stage");
};

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
  __device__ int64_t tile(int64_t it) const { return (first_group + it * clusters) * ctas + rank; }
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

// 16-byte loads hold 8 bf16, 8-byte loads 4.
template <int kLaneCols>
using LaneVec = std::conditional_t<kLaneCols == 8, uint4, uint2>;

template <int kLaneCols>
__device__ __forceinline__ LaneVec<kLaneCols> load_lane(const uint16_t* ptr) {
  if constexpr (kLaneCols == 8) {
    return load_stream_u4(ptr);
  } else {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(ptr));
    return v;
  }
}

template <int kLaneCols>
__device__ __forceinline__ void unpack_lane(const LaneVec<kLaneCols>& v, float (&out)[kLaneCols]) {
  if constexpr (kLaneCols == 8) {
    unpack_bf16x8(v, out);
  } else {
    out[0] = bf16_lo(v.x), out[1] = bf16_hi(v.x), out[2] = bf16_lo(v.y), out[3] = bf16_hi(v.y);
  }
}

// kLaneCols values rounded to bf16 once (one cvt.rn.bf16x2 per pair): the packed words to store,
// and the values as floats for the sums and the MMA (the bits the store holds).
template <int kLaneCols>
__device__ __forceinline__ LaneVec<kLaneCols> round_lane(const float (&in)[kLaneCols],
                                                         float (&rounded)[kLaneCols]) {
  uint32_t words[kLaneCols / 2];
#pragma unroll
  for (int i = 0; i < kLaneCols / 2; ++i) {
    words[i] = pack_bf16x2(in[2 * i], in[2 * i + 1]);
    rounded[2 * i] = bf16_lo(words[i]);
    rounded[2 * i + 1] = bf16_hi(words[i]);
  }
  if constexpr (kLaneCols == 8) {
    return make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    return make_uint2(words[0], words[1]);
  }
}

template <int kLaneCols>
__device__ __forceinline__ void store_lane(void* ptr, const LaneVec<kLaneCols>& v) {
  if constexpr (kLaneCols == 8) {
    store_u4(ptr, v);
  } else {
    *reinterpret_cast<uint2*>(ptr) = v;
  }
}

// x_prev's 4 streams and F for one thread at one step (kLaneCols columns of its row).
template <int kLaneCols>
struct Inputs {
  LaneVec<kLaneCols> v[kStreams + 1];
};

// A position in a CTA's walk: its tile iteration and the stage in that tile, advanced by one
// step at a time (no 64-bit division per step).
struct Cursor {
  int it = 0;  // tiles per CTA fit 32 bits: tokens / 8 / CTAs
  int stage = 0;
  __device__ __forceinline__ void advance(const Walk& w) {
    if (++stage == w.stages_per_tile) stage = 0, ++it;
  }
};

template <int kLaneCols>
__device__ __forceinline__ void load_inputs(const Args& a, const Walk& w, const Cursor& at, int g,
                                            int col_in_stage, Inputs<kLaneCols>& in) {
  const int64_t row = w.tile(at.it) * kRows + g;
  const int c = at.stage * kStageCols + col_in_stage;
  const bool inside = at.it < w.iterations && row < a.tokens;
#pragma unroll
  for (int j = 0; j <= kStreams; ++j) {
    const uint16_t* src =
        j < kStreams ? a.x + (row * kStreams + j) * a.hidden + c : a.f + row * a.hidden + c;
    in.v[j] = inside ? load_lane<kLaneCols>(src) : LaneVec<kLaneCols>{};
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

__device__ __forceinline__ void begin_tile(int64_t row, const RowCoefficients& staged,
                                           RowState& s) {
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

// One step of a consumer thread: the post of its kLaneCols columns (stored; post_stream8's
// operations per value, so the same bits), y into shared memory (collapse8's), the sums of
// squares, and the warp's k-steps x 3 n-tiles of MMAs against the stage's hc_fn.
template <int kLaneCols>
__device__ __forceinline__ void consume_step(const Args& a, const Inputs<kLaneCols>& in, int c,
                                             int lane, const float2* b_frag, unsigned char* y_row,
                                             RowState& s) {
  constexpr int L = kLaneCols;
  float xs[kStreams][L], f[L], out[kStreams][L], y[L], sum[L];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) unpack_lane<L>(in.v[j], xs[j]);
  unpack_lane<L>(in.v[kStreams], f);
  const bool valid = s.row < a.tokens;
  uint16_t* x_next = a.x_next + s.row * kStreams * a.hidden + c;
#pragma unroll
  for (int k = 0; k < kStreams; ++k) {
#pragma unroll
    for (int e = 0; e < L; ++e) {
      sum[e] = s.post[k] * f[e];
#pragma unroll
      for (int j = 0; j < kStreams; ++j) sum[e] = fmaf(s.comb[j][k], xs[j][e], sum[e]);
    }
    const LaneVec<L> packed = round_lane<L>(sum, out[k]);
#pragma unroll
    for (int e = 0; e < L; ++e) s.sum_sq_x = fmaf(out[k][e], out[k][e], s.sum_sq_x);
    if (valid) store_lane<L>(x_next + k * a.hidden, packed);
  }
#pragma unroll
  for (int e = 0; e < L; ++e) {
    sum[e] = 0.f;
#pragma unroll
    for (int j = 0; j < kStreams; ++j) sum[e] = fmaf(s.pre[j], out[j][e], sum[e]);
  }
  store_lane<L>(y_row + c * 2, round_lane<L>(sum, y));
#pragma unroll
  for (int e = 0; e < L; ++e) s.sum_sq_y = fmaf(y[e], y[e], s.sum_sq_y);
#pragma unroll
  for (int step = 0; step < Shape<L>::kKSteps; ++step) {
    const int k = 2 * step / L, e = 2 * step % L;
    const uint32_t frag[4] = {__float_as_uint(out[k][e]), 0u, __float_as_uint(out[k][e + 1]), 0u};
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const float2 b = b_frag[(step * kNTiles + n) * kWarp + lane];
      mma_tf32(s.acc[n], frag, __float_as_uint(b.x), __float_as_uint(b.y));
    }
  }
}

template <int kLaneCols>
struct TileShared {
  static constexpr int kConsumerWarps = Shape<kLaneCols>::kConsumerWarps;
  float red[kConsumerWarps][kRows][kNmix];
  float squares[kConsumerWarps][kRows][2];
  float sums[kRows][kSums];
  float row_scale[kRows];
  float params[kCoefficientParamFloats<kStreams>];
  RowCoefficients coefficients[2][kRows];  // tile it's in [it % 2]
};

// A tile's end, by the consumer warps: the warps' partial sums in a fixed order, the stats warp
// handed the tile's sums, y scaled into layer_input from shared memory.
template <int kLaneCols>
__device__ void end_tile(const Args& a, const Walk& w, int64_t it, RowState& s, int g, int t,
                         const unsigned char* y_smem, int y_pitch, TileShared<kLaneCols>& ts) {
  constexpr int kConsumerWarps = Shape<kLaneCols>::kConsumerWarps;
  constexpr int kConsumerThreads = Shape<kLaneCols>::kConsumerThreads;
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

template <int kLaneCols, int kStages, int kDepth, bool kClusterScope>
__device__ void consume(const Args& a, const Walk& w, unsigned char* ring, uint64_t* full,
                        uint64_t* empty, unsigned char* y_smem, int y_pitch,
                        TileShared<kLaneCols>& ts) {
  using S = Shape<kLaneCols>;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int col_in_stage = warp * S::kWarpCols + t * kLaneCols;
  Inputs<kLaneCols> buf[kDepth];
  Cursor ahead;  // the step whose inputs are loaded next
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    load_inputs(a, w, ahead, g, col_in_stage, buf[d]);
    ahead.advance(w);
  }
  RowState s;
  Cursor at;
  int slot = 0;
  unsigned phase = 0;
  for (int64_t step0 = 0; step0 < w.fills; step0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (step0 + d >= w.fills) break;
      const Inputs<kLaneCols> in = buf[d];
      load_inputs(a, w, ahead, g, col_in_stage, buf[d]);
      ahead.advance(w);
      if (at.stage == 0) begin_tile(w.tile(at.it) * kRows + g, ts.coefficients[at.it % 2][g], s);
      mbarrier_wait(&full[slot], phase);
      const float2* b_frag = reinterpret_cast<const float2*>(ring + slot * kStageBytes) +
                             warp * S::kKSteps * kNTiles * kWarp;
      consume_step(a, in, at.stage * kStageCols + col_in_stage, lane, b_frag, y_smem + g * y_pitch,
                   s);
      // The slot's shared reads ordered before the copy engine's next write to it (the library's
      // rings do the same: release_ring_slot), then one arrival per warp on the first CTA's
      // barrier.
      fence_shared_for_async_writes();
      __syncwarp();
      if (lane == 0) arrive_in_cta<kClusterScope>(&empty[slot], 0);
      if (at.stage == w.stages_per_tile - 1) end_tile(a, w, at.it, s, g, t, y_smem, y_pitch, ts);
      at.advance(w);
      if (++slot == kStages) slot = 0, phase ^= 1u;
    }
  }
  if (w.iterations > 0)
    named_sync(3, S::kConsumerThreads + kWarp);  // the stats warp's last arrival
}

// Lane r < 8 of the stats warp stages row r's coefficients of iteration `it` (when it has one).
template <int kLaneCols>
__device__ __forceinline__ void stage_tile_coefficients(const Args& a, const Walk& w, int64_t it,
                                                        TileShared<kLaneCols>& ts) {
  const int lane = threadIdx.x % kWarp;
  if (lane < kRows && it < w.iterations) {
    load_row_coefficients(a, w.tile(it) * kRows + lane, ts.coefficients[it % 2][lane]);
  }
}

// The stats warp: lane r < 8 turns row r's sums into pre, post and comb, then stages the
// coefficients of the tile after next (the consumers' wait for this warp's arrival on barrier 3
// at the next tile's end orders them before that tile's first step).
template <int kLaneCols>
__device__ void stats(const Args& a, const Walk& w, TileShared<kLaneCols>& ts) {
  constexpr int kConsumerThreads = Shape<kLaneCols>::kConsumerThreads;
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
template <int kLaneCols, int kStages, int kDepth, bool kClusterScope = false>
__global__ void __launch_bounds__(Shape<kLaneCols>::kThreads, 1)
    rowtile_boundary_kernel(const __grid_constant__ Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = Shape<kLaneCols>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  __shared__ TileShared<kLaneCols> ts;
  const Walk w = walk_of(a);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], a.cluster_ctas * S::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  stage_coefficient_params<kStreams>(a.cp, ts.params);
  if (threadIdx.x / kWarp == S::kStatsWarp) {
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
  if (warp == S::kProducerWarp) {
    produce<kStages>(a, w, ring, full, empty);
  } else if (warp == S::kStatsWarp) {
    stats(a, w, ts);
  } else {
    consume<kLaneCols, kStages, kDepth, kClusterScope>(a, w, ring, full, empty, y_smem, y_pitch,
                                                       ts);
  }
  __syncwarp();
  cluster_arrive();  // no CTA leaves while a peer may still arrive on its barriers
  cluster_wait();
#endif
}

// hc_fn [24, n C] fp32 -> TF32-rounded, in the order the consumers read: stage, warp, k-step,
// n-tile, lane, then (b0, b1) = rows k = t and t + 4 of the MMA's B at column n = g: the hc_fn
// entries of the x_next values lane (g, t) puts in the MMA's columns t and t + 4 (consume_step).
template <int kLaneCols>
__global__ void pack_hc_fn(const float* hc_fn, int hidden, float* packed) {
  using S = Shape<kLaneCols>;
  const int64_t total = int64_t(hidden / kStageCols) * kStageBytes / 4;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int half = int(i % 2), lane = int(i / 2 % kWarp);
    const int64_t rest = i / 2 / kWarp;
    const int n_tile = int(rest % kNTiles), step = int(rest / kNTiles % S::kKSteps);
    const int warp = int(rest / kNTiles / S::kKSteps % S::kConsumerWarps);
    const int stage = int(rest / kNTiles / S::kKSteps / S::kConsumerWarps);
    const int g = lane / 4, t = lane % 4;
    const int k = 2 * step / kLaneCols, e = 2 * step % kLaneCols;
    const int column = stage * kStageCols + warp * S::kWarpCols + t * kLaneCols + e + half;
    const float v = hc_fn[int64_t(n_tile * 8 + g) * kStreams * hidden + k * hidden + column];
    packed[i] = __uint_as_float(to_tf32(v));
  }
}

}  // namespace mhc::bench::rowtile
