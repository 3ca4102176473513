// The one compiled copy of every mHC kernel instantiation, behind the checked host API of
// mhc/cuda/kernels.hpp.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>

#include "fp8_launch.cuh"
#include "launch_checks.cuh"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/post.cuh"
#include "mhc/cuda/prenorm_mma.cuh"
#include "mhc/cuda/prenorm_splits.cuh"
#include "mhc/cuda/sm90_boundary.cuh"
#include "mhc/cuda/sm90_post_cluster.cuh"
#include "mhc/cuda/sm90_prenorm_tma.cuh"
#include "mhc/cuda/standin.cuh"
#include "mhc/cuda/widen.cuh"
#include "prenorm_dispatch.hpp"

namespace mhc::cuda {

// Declared in prenorm_dispatch.hpp.
int query_row_kernels_max_hidden() {
  int threads = 1024;
  const auto fold = [&threads](const void* kernel) {
    cudaFuncAttributes attr{};
    MHC_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    threads = std::min(threads, attr.maxThreadsPerBlock);
  };
#if defined(MHC_KERNELS_N2)
  fold(reinterpret_cast<const void*>(post_kernel<2, kRowVecs, false>));
  fold(reinterpret_cast<const void*>(post_kernel<2, kRowVecs, true>));
  fold(reinterpret_cast<const void*>(input_path_kernel<2, kRowVecs, Bf16LayerInput>));
  fold(reinterpret_cast<const void*>(post_kernel<2, kRowVecs, true, Fp8LayerInput>));
  fold(reinterpret_cast<const void*>(input_path_kernel<2, kRowVecs, Fp8LayerInput>));
#endif
  fold(reinterpret_cast<const void*>(post_kernel<4, kRowVecs, false>));
  fold(reinterpret_cast<const void*>(post_kernel<4, kRowVecs, true>));
  fold(reinterpret_cast<const void*>(input_path_kernel<4, kRowVecs, Bf16LayerInput>));
  fold(reinterpret_cast<const void*>(post_kernel<4, kRowVecs, true, Fp8LayerInput>));
  fold(reinterpret_cast<const void*>(input_path_kernel<4, kRowVecs, Fp8LayerInput>));
  return std::min(row_kernel_max_hidden(), threads / kWarp * kWarp * kRowVecs * kBf16PerVec);
}

using detail::bits;
using detail::check_launch;
using detail::check_ptr;
using detail::check_shape;
using detail::msg;
using detail::require_that;

namespace {

constexpr int kChunkK = 32;    // K per warp step of the prenorm GEMM
constexpr int kGemmWarps = 8;  // warps per prenorm CTA
constexpr int kMaxRowsPerTile = kTmaRowsPerTile;
// mhc::workspace_layout (core, no CUDA) sizes caller-owned workspaces with these, and the launch
// resolution (KernelPlan::tuning) applies the kernels' limits of mhc/core/kernel_limits.hpp.
static_assert(kChunkK == kPrenormChunkK && kGemmWarps == kPrenormGemmWarps &&
              kMaxRowsPerTile == kPrenormMaxTileRows);
static_assert(kTmaChunksPerStage == kPrenormTmaChunksPerStage &&
              (1 << kMaxTreeLevels) == kBatchInvariantMaxLeaves);
static_assert(kFusedInputMaxHidden == kFusedInputHiddenLimit &&
              kPostClusterMaxCtas * kWarp * kRowVecs * kBf16PerVec == kClusterPostHiddenLimit &&
              1024 * kRowVecs * kBf16PerVec == kRowKernelsHiddenLimit);

}  // namespace

SiteWorkspace::SiteWorkspace(const MhcParams& p, int64_t max_tokens, int max_splits)
    : hidden_(p.hidden), streams_(p.n), max_tokens_(max_tokens) {
  check_shape(p, max_tokens, "SiteWorkspace");
  const int device_limit = query_row_kernels_max_hidden();
  require_that(p.hidden <= device_limit,
               "SiteWorkspace: hidden size C={} is above the kernels' limit {} on this device (the "
               "row kernels run one CTA of C / 32 threads per token)",
               p.hidden, device_limit);
  require_that(max_splits >= 1, "SiteWorkspace: max_splits={} must be >= 1", max_splits);
  const int64_t padded =
      std::max<int64_t>(ceil_div(max_tokens, kMaxRowsPerTile), 1) * kMaxRowsPerTile;
  partial_capacity_ = padded * (p.nmix() + 1) * max_splits;
  const int64_t counters = std::max<int64_t>(ceil_div(max_tokens, 16), 1);
  MHC_CUDA_CHECK(cudaMalloc(&partials_, partial_capacity_ * sizeof(float)));
  MHC_CUDA_CHECK(cudaMalloc(&tile_counters_, counters * sizeof(unsigned)));
  MHC_CUDA_CHECK(cudaMemset(tile_counters_, 0, counters * sizeof(unsigned)));
  MHC_CUDA_CHECK(cudaMemset(partials_, 0, partial_capacity_ * sizeof(float)));
  // cudaMemset runs on the legacy default stream and returns before it is done; a launch on a
  // non-blocking stream does not wait for it, and counters zeroed after the first arrivals would
  // make a later tile's "last CTA" reduce too early. Construction is off the forward path.
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

SiteWorkspace::SiteWorkspace(const MhcParams& p, void* memory, int64_t bytes)
    : owns_(false), hidden_(p.hidden), streams_(p.n) {
  check_shape(p, 0, "SiteWorkspace");
  const WorkspaceLayout layout = workspace_layout_for_bytes(p, bytes);
  max_tokens_ = layout.max_tokens;
  require_that(memory != nullptr, "SiteWorkspace: the workspace memory is null");
  require_that(reinterpret_cast<uintptr_t>(memory) % 256 == 0,
               "SiteWorkspace: the workspace memory must be 256-byte aligned");
  auto* base = static_cast<char*>(memory);
  partial_capacity_ = layout.partial_floats;
  partials_ = reinterpret_cast<float*>(base + layout.partials_offset);
  tile_counters_ = reinterpret_cast<unsigned*>(base + layout.counters_offset);
  weight_scratch_ = reinterpret_cast<float*>(base + layout.weight_offset);
}

SiteWorkspace::~SiteWorkspace() {
  if (!owns_) return;
  cudaFree(partials_);
  cudaFree(tile_counters_);
}

bool tma_cluster_epilogue_fits(const MhcParams& p, int64_t tokens, int splits) {
  if (splits < 2 || splits > kTmaMaxClusterSplits) return false;
  int clusters = 0;
  MHC_CUDA_CHECK(p.n == 2 ? MHC_N2_LAUNCH(tma_cluster_capacity<2>(splits, &clusters))
                          : tma_cluster_capacity<4>(splits, &clusters));
  return clusters >= ceil_div(tokens, kTmaRowsPerTile);
}

namespace {

// K chunks of one batch-invariant leaf: whole TMA stages, so that both kernels cut K alike.
int batch_invariant_leaf_chunks(const MhcParams& p) {
  const int64_t stages = p.k() / (kChunkK * kTmaChunksPerStage);
  return static_cast<int>(ceil_div(stages, batch_invariant_leaves(p)) * kTmaChunksPerStage);
}

// Checks `previous` (see prenorm_coefficients); a fused launch reads these while writing b.
void check_previous_post(const CoefficientBuffers& b, const InputPathBuffers* input,
                         const PreviousPost& previous, const char* what) {
  require_that(input != nullptr, "{}: folding in the previous post needs the input path (input)",
               what);
  check_ptr(previous.x, "previous x", what);
  check_ptr(previous.sublayer_out, "previous sublayer_out", what);
  require_that(previous.post && previous.comb, "{}: previous post and comb must not be null", what);
  require_that(previous.x_next == b.x,
               "{}: previous.x_next must be the launch's x (the streams it forms)", what);
  require_that(previous.x != b.x, "{}: previous x must not alias the launch's x", what);
  require_that(previous.post != b.post && previous.comb != b.comb,
               "{}: previous post/comb must not alias this launch's post/comb outputs", what);
}

// The batch-invariant split of K (PrenormArgs::leaf_chunks): leaves fixed by K, `splits` of them
// per CTA column. Trailing leaves may be empty; they still count in the tree (as zeros).
void set_batch_invariant_splits(const MhcParams& p, const LaunchTuning& tuning, bool compensated,
                                PrenormArgs& args) {
  constexpr const char* what = "prenorm_coefficients";
  const int leaves = batch_invariant_leaves(p);
  const bool tma = tuning.kernel == PrenormKernel::tma128;
  require_that(leaves % tuning.splits == 0 && (tuning.splits & (tuning.splits - 1)) == 0,
               "{}: batch-invariant splits={} must be a power of two dividing the {} leaves", what,
               tuning.splits, leaves);
  require_that(tma || tuning.splits == leaves,
               "{}: the batch-invariant register-fed kernel runs one leaf per split ({} splits, "
               "got {})",
               what, leaves, tuning.splits);
  args.leaf_chunks = batch_invariant_leaf_chunks(p);
  args.leaves_per_split = leaves / tuning.splits;
  args.splits = tuning.splits;
  args.chunks_per_split = args.leaf_chunks * args.leaves_per_split;
  const int cta_levels = compensated ? kTreeLevelsPerCta<true> : kTreeLevelsPerCta<false>;
  args.leaves_per_partial = std::min(args.leaves_per_split, tma ? 1 << cta_levels : 1);
}

// The launch's shape against the tuning's, and the tuning's fields the kernels take.
void check_tuning(const MhcParams& p, const LaunchTuning& t, const char* what) {
  require_that(t.hidden == p.hidden && t.streams == p.n,
               "{}: the launch tuning was resolved for C={} n={}, the launch is C={} n={} "
               "(KernelPlan::tuning for this shape)",
               what, t.hidden, t.streams, p.hidden, p.n);
  require_that(t.splits >= 1 && t.splits <= max_prenorm_splits(p),
               "{}: splits={} must be in 1..{} for K={}", what, t.splits, max_prenorm_splits(p),
               p.k());
}

// The split loop (the 16-row kernel's kSplitLoop instantiation) where the tuning asks for it and
// it runs fewer CTAs than splits; and the 16-row kernel's flagged partials where they fit.
void set_split_reduction(const MhcParams& p, const LaunchTuning& t, const SiteWorkspace& ws,
                         PrenormArgs& args) {
  const bool tile16 = t.kernel == PrenormKernel::mma16;
  if (t.split_ctas > 0 && t.split_ctas < args.splits && tile16 && !t.batch_invariant &&
      args.previous.x == nullptr) {
    args.split_ctas = t.split_ctas;
  }
  static_assert(kFlaggedMaxSplits == kPrenormDecodeSplitLimit);
  const bool flagged =
      t.flagged_partials == FlaggedPartials::always ||
      (t.flagged_partials == FlaggedPartials::outside_split_loop && args.split_ctas == 0);
  args.flagged_partials =
      flagged && tile16 && decode_flagged_fits(args, p.nmix(), ws.partial_capacity());
}

// The input path's CTAs inside the coefficient launch.
void set_fused_input(const MhcParams& p, const InputPathBuffers& input, PrenormArgs& args) {
  constexpr const char* what = "prenorm_coefficients";
  require_that(input.pre_mix != nullptr, "{}: input pre_mix is null", what);
  if (input.fp8 != nullptr) {
    check_fp8_format(input.fp8->format, p.hidden, what);
    args.input.fp8 = fp8_output(*input.fp8, args.tokens, p.hidden, what);
    args.input.layer_input = reinterpret_cast<uint16_t*>(input.fp8->codes);  // on
  } else {
    check_ptr(input.layer_input, "layer_input", what);
    args.input.layer_input = bits(input.layer_input);
  }
  if (input.norm_weight != nullptr) check_ptr(input.norm_weight, "norm_weight", what);
  args.input.pre_mix = input.pre_mix;
  args.input.norm_weight = input.norm_weight;
  args.input.hidden = p.hidden;
  args.input.row_threads = row_kernel_threads(p.hidden);
  args.input.eps_n = static_cast<float>(p.norm_eps());
}

}  // namespace

void prenorm_coefficients(const MhcParams& p, int64_t tokens, const CoefficientBuffers& b,
                          const LaunchTuning& tuning, SiteWorkspace& ws, cudaStream_t cuda_stream,
                          const InputPathBuffers* input, const PreviousPost* previous) {
  constexpr const char* what = "prenorm_coefficients";
  const LaunchTarget stream{cuda_stream, tuning.pdl};
  check_shape(p, tokens, what);
  check_tuning(p, tuning, what);
  require_that(ws.hidden() == p.hidden && ws.streams() == p.n,
               "{}: the workspace was made for C={} n={} and cannot run C={} n={}", what,
               ws.hidden(), ws.streams(), p.hidden, p.n);
  require_that(tokens <= ws.max_tokens(), "{}: {} tokens exceed the workspace's {}", what, tokens,
               ws.max_tokens());
  if (tokens == 0) return;
  check_ptr(b.x, "x", what);
  check_ptr(b.hc_fn, "hc_fn", what);
  require_that(b.hc_base && b.hc_scale && b.pre && b.post && b.comb,
               "{}: hc_base, hc_scale, pre, post and comb must not be null", what);
  const int rows = tuning.rows_per_tile();
  PrenormArgs args;
  args.x = bits(b.x);
  args.hc_fn = b.hc_fn;
  args.tokens = tokens;
  args.k = static_cast<int>(p.k());
  args.splits = tuning.splits;
  const bool compensated = tuning.projection == Projection::fp32;
  if (tuning.batch_invariant) {
    set_batch_invariant_splits(p, tuning, compensated, args);
  } else {
    const int64_t chunks = p.k() / kChunkK;
    // The tma kernel's splits are whole stages of kTmaChunksPerStage chunks (K is a multiple of
    // 128 for every supported shape: C % 64 == 0 and n >= 2).
    const int64_t granule = rows == kTmaRowsPerTile ? kTmaChunksPerStage : 1;
    args.chunks_per_split =
        static_cast<int>(ceil_div(ceil_div(chunks, tuning.splits), granule) * granule);
    // Re-balance so that no split is empty (an empty split would still be counted, but wastes a
    // CTA).
    args.splits = static_cast<int>(ceil_div(chunks, args.chunks_per_split));
  }
  const int64_t tiles = ceil_div(tokens, rows);
  const int blocks = partial_blocks(args);
  const int64_t need = tiles * rows * (p.nmix() + 1) * blocks;
  require_that(blocks == 1 || need <= ws.partial_capacity(),
               "{}: splits={} rows_per_tile={} needs {} partial floats, the workspace holds {}",
               what, tuning.splits, rows, need, ws.partial_capacity());
  args.partials = ws.partials();
  args.tile_counters = ws.tile_counters();
  args.cluster_epilogue = tuning.cluster_epilogue;
  args.coef.hc_base = b.hc_base;
  args.coef.hc_scale = b.hc_scale;
  args.coef.pre_eps = static_cast<float>(p.pre_eps());
  args.coef.sinkhorn_eps = static_cast<float>(p.sinkhorn_eps());
  args.coef.rms_eps = static_cast<float>(p.rms_eps());
  args.coef.post_mult = static_cast<float>(p.post_mult);
  args.coef.sinkhorn_iters = p.sinkhorn_iters;
  args.coef.inv_k = static_cast<float>(1.0 / double(p.k()));
  args.out = {b.pre, b.post, b.comb, b.mixes};
  if (previous != nullptr) check_previous_post(b, input, *previous, what);
  // The fused boundary writes FP8 given a bf16 buffer to stage its unscaled rows in
  // (input->layer_input beside input->fp8); without one the FP8 form runs the unfused launches.
  const bool fp8 = input != nullptr && input->fp8 != nullptr;
  const bool fp8_staged = fp8 && input->layer_input != nullptr;
  const bool fuses = input != nullptr && tuning.fused_input;
  // Only the 16-row kernel forms x from the previous post; any other tile (the TMA kernel of
  // batch-invariant mode) gets the post + next input launch first.
  const bool folds = fuses && rows == 16;
  if (previous != nullptr && !folds && tuning.fused_boundary && (!fp8 || fp8_staged)) {
    launch_boundary(p, tokens, *input, *previous, tuning, ws, args, stream);
    return;
  }
  if (previous != nullptr && !folds) {  // the post + next input launch, then the plain one
    const NextInput next{input->pre_mix, input->norm_weight, input->layer_input, input->fp8};
    post(p, tokens, previous->x, previous->post, previous->comb, previous->sublayer_out,
         previous->x_next, &next, tuning, cuda_stream);
    input = nullptr;
  } else if (previous != nullptr) {
    args.previous.x = bits(previous->x);
    args.previous.post = previous->post;
    args.previous.comb = previous->comb;
    args.previous.sublayer_out = bits(previous->sublayer_out);
    args.previous.x_out = bits(previous->x_next);
  }
  set_split_reduction(p, tuning, ws, args);
  if (input != nullptr) {
    if (fuses) {
      set_fused_input(p, *input, args);
    } else if (fp8) {
      input_path(p, tokens, b.x, input->pre_mix, input->norm_weight, *input->fp8, stream);
    } else {
      input_path(p, tokens, b.x, input->pre_mix, input->norm_weight, input->layer_input, stream);
    }
  }
  const cudaError_t err = p.n == 2
                              ? MHC_N2_LAUNCH(dispatch_prenorm<2>(args, compensated, rows, stream))
                              : dispatch_prenorm<4>(args, compensated, rows, stream);
  check_launch(err, what);
}

void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, Bf16* layer_input, LaunchTarget stream) {
  constexpr const char* what = "input_path";
  check_shape(p, tokens, what);
  if (tokens == 0) return;
  check_ptr(x, "x", what);
  check_ptr(layer_input, "layer_input", what);
  require_that(pre_mix != nullptr, "{}: pre_mix is null", what);
  if (norm_weight != nullptr) check_ptr(norm_weight, "norm_weight", what);
  const float eps_n = static_cast<float>(p.norm_eps());
  const cudaError_t err =
      p.n == 2 ? MHC_N2_LAUNCH(launch_input_path<2>(bits(x), pre_mix, norm_weight, tokens, p.hidden,
                                                    eps_n, bits(layer_input), stream))
               : launch_input_path<4>(bits(x), pre_mix, norm_weight, tokens, p.hidden, eps_n,
                                      bits(layer_input), stream);
  check_launch(err, what);
}

void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, const Fp8Output& layer_input, LaunchTarget stream) {
  constexpr const char* what = "input_path";
  check_shape(p, tokens, what);
  check_fp8_format(layer_input.format, p.hidden, what);
  if (tokens == 0) return;
  check_ptr(x, "x", what);
  require_that(pre_mix != nullptr, "{}: pre_mix is null", what);
  if (norm_weight != nullptr) check_ptr(norm_weight, "norm_weight", what);
  const Fp8LayerInput out = fp8_output(layer_input, tokens, p.hidden, what);
  const float eps_n = static_cast<float>(p.norm_eps());
  const cudaError_t err =
      p.n == 2 ? MHC_N2_LAUNCH(launch_input_path_as<2>(bits(x), pre_mix, norm_weight, tokens,
                                                       p.hidden, eps_n, out, stream))
               : launch_input_path_as<4>(bits(x), pre_mix, norm_weight, tokens, p.hidden, eps_n,
                                         out, stream);
  check_launch(err, what);
}

void post(const MhcParams& p, int64_t tokens, const Bf16* x, const float* post_coef,
          const float* comb, const Bf16* sublayer_out, Bf16* x_next, const NextInput* next,
          const LaunchTuning& tuning, cudaStream_t cuda_stream) {
  constexpr const char* what = "post";
  const LaunchTarget stream{cuda_stream, tuning.pdl};
  check_shape(p, tokens, what);
  require_that(tuning.hidden == p.hidden && tuning.streams == p.n,
               "{}: the launch tuning was resolved for C={} n={}, the launch is C={} n={} "
               "(KernelPlan::tuning for this shape)",
               what, tuning.hidden, tuning.streams, p.hidden, p.n);
  if (tokens == 0) return;
  check_ptr(x, "x", what);
  check_ptr(sublayer_out, "sublayer_out", what);
  check_ptr(x_next, "x_next", what);
  require_that(post_coef && comb, "{}: post and comb must not be null", what);
  require_that(x != x_next, "{}: x_next must not alias x", what);
  PostArgs a;
  a.x = bits(x);
  a.post = post_coef;
  a.comb = comb;
  a.sublayer_out = bits(sublayer_out);
  a.x_next = bits(x_next);
  a.hidden = p.hidden;
  a.row_threads = row_kernel_threads(p.hidden);
  a.eps_n = static_cast<float>(p.norm_eps());
  const bool fp8 = next != nullptr && next->fp8 != nullptr;
  PostFp8Args fp8_args;
  if (next != nullptr) {
    require_that(next->pre_mix != nullptr, "{}: next pre_mix is null", what);
    if (fp8) {
      check_fp8_format(next->fp8->format, p.hidden, what);
      fp8_args.next_fp8 = fp8_output(*next->fp8, tokens, p.hidden, what);
    } else {
      check_ptr(next->layer_input, "next layer_input", what);
      a.next_layer_input = bits(next->layer_input);
    }
    if (next->norm_weight != nullptr) check_ptr(next->norm_weight, "next norm_weight", what);
    a.next_pre_mix = next->pre_mix;
    a.next_norm_weight = next->norm_weight;
  }
  // The cluster post where the tuning chose it (the plan checked the image has clusters) and
  // the row fits a cluster.
  const bool cluster = next != nullptr && tuning.cluster_post && post_cluster_fits(p.hidden);
  cudaError_t err;
  if (fp8) {
    static_cast<PostArgs&>(fp8_args) = a;
    err = launch_post_fp8(p.n, fp8_args, tokens, cluster, stream);
  } else if (cluster) {
    err = p.n == 2 ? MHC_N2_LAUNCH(launch_post_cluster<2>(a, tokens, stream))
                   : launch_post_cluster<4>(a, tokens, stream);
  } else if (next == nullptr && tuning.post_columns) {
    err = p.n == 2 ? MHC_N2_LAUNCH(launch_post_columns<2>(a, tokens, stream))
                   : launch_post_columns<4>(a, tokens, stream);
  } else if (p.n == 2) {
    err = MHC_N2_LAUNCH(next ? launch_post<2, true>(a, tokens, stream)
                             : launch_post<2, false>(a, tokens, stream));
  } else {
    err = next ? launch_post<4, true>(a, tokens, stream) : launch_post<4, false>(a, tokens, stream);
  }
  check_launch(err, what);
}

void prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                  const float* fn, float* out, float* sqrsum, LaunchTarget stream) {
  constexpr const char* what = "prenorm_gemm";
  check_prenorm_gemm_shape(tokens, nmix, k, splits);
  require_that(splits <= 65535, "{}: num_splits={} must be at most 65535", what, splits);
  require_that(ceil_div(tokens, 16) <= INT32_MAX, "{}: token count {} out of range", what, tokens);
  if (tokens == 0) return;
  check_ptr(x, "x", what);
  check_ptr(fn, "fn", what);
  require_that(out != nullptr && sqrsum != nullptr, "{}: out and sqrsum must not be null", what);
  PrenormSplitsArgs a;
  a.x = bits(x);
  a.fn = fn;
  a.out = out;
  a.sqrsum = sqrsum;
  a.tokens = tokens;
  a.k = k;
  a.splits = splits;
  check_launch(launch_prenorm_splits(a, static_cast<int>(nmix), stream), what);
}

void widen_bf16(const Bf16* in, int64_t count, float* out, LaunchTarget stream) {
  constexpr const char* what = "widen_bf16";
  require_that(count >= 0, "{}: count {} is negative", what, count);
  if (count == 0) return;
  require_that(in != nullptr && out != nullptr, "{}: in and out must not be null", what);
  check_launch(launch_widen_bf16(bits(in), count, out, stream), what);
}

void standin_sublayer(const MhcParams& p, int64_t tokens, const Bf16* layer_input,
                      const float* gain, Bf16* out, LaunchTarget stream) {
  constexpr const char* what = "standin_sublayer";
  check_shape(p, tokens, what);
  if (tokens == 0) return;
  check_ptr(layer_input, "layer_input", what);
  check_ptr(gain, "gain", what);
  check_ptr(out, "out", what);
  check_launch(launch_standin_sublayer(bits(layer_input), gain, tokens, p.hidden, bits(out),
                                       current_sm_count(), stream),
               what);
}

int current_sm_count() {
  // Cached per device: cudaDeviceGetAttribute is cheap but this sits on the launch path.
  static thread_local int cached_device = -1, cached_count = 0;
  int device = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    MHC_CUDA_CHECK(cudaDeviceGetAttribute(&cached_count, cudaDevAttrMultiProcessorCount, device));
    cached_device = device;
  }
  return cached_count;
}

}  // namespace mhc::cuda
