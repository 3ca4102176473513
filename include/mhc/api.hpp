// The C++ API for engines: the mHC ops of one site shape on device pointers and a CUDA stream,
// the same ops as the PyTorch ones (pre, post, post_pre, boundary, coefficients; docs/cpp.md).
//
// Every call goes through the kernel plan (mhc/core/kernel_plan.hpp), the one launch description
// of a device under a kernel config: make it once per device (device_plan), then an Ops per site
// shape, and call. A call checks its arguments (mhc::Error naming the problem), resolves the
// plan for its token count, and enqueues its launches on `stream`: it allocates nothing, does
// not synchronize, and may be captured in a CUDA graph. Zero tokens is a no-op.
//
// No CUDA header is needed: Stream is cudaStream_t. In a build without the CUDA backend every
// call throws mhc::Error saying so.
#pragma once
#include <cstdint>

#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"

struct CUstream_st;

namespace mhc {

using Stream = CUstream_st*;  // cudaStream_t

// Whether this build holds the CUDA kernels, and a CUDA device is visible. Never throws.
bool cuda_available();

// The launch description of CUDA device `device` under `config` (its switches and tactics
// applied): a few runtime queries, so make it once per device and config and keep it. Throws
// mhc::Error without a usable device, or as the config's checks do (a tactics file measured on
// another GPU, a switch the loaded image cannot run).
KernelPlan device_plan(int device, const KernelConfig& config = {});

// Caller-owned device memory for the coefficient path's split-K partials and arrival counters,
// and for a bf16 norm weight widened to fp32. Size it with workspace_bytes, 256-byte aligned
// (cudaMalloc's are), zeroed once (cudaMemset) before its first call, then kept: the kernels
// leave the counters zero again. One call at a time per workspace: calls that may run at once
// (on two streams) need one each. Not owned here.
struct Workspace {
  void* data = nullptr;
  int64_t bytes = 0;
};
// The bytes of a workspace for calls of up to max_tokens tokens of shape `p` (C and n).
int64_t workspace_bytes(const MhcParams& p, int64_t max_tokens);

// A site's hyper-connection weights (hc_fn, hc_scale, hc_base), fp32 device pointers: fn
// [n(n+2), n*C], scale [3], base [n(n+2)].
struct HcWeights {
  const float* fn = nullptr;
  const float* scale = nullptr;
  const float* base = nullptr;
};

// The norm weight [C] of a site's sublayer, fp32 or bf16 (then widened into the workspace by
// each call that reads it); data null: the plain collapse, no norm weight.
struct NormWeight {
  const void* data = nullptr;
  bool bf16 = false;
};

// The coefficient path's outputs, fp32: pre [T, n] (in V4.1 the next site's pre_mix), post [T, n],
// comb [T, n, n].
struct Coefficients {
  float* pre = nullptr;
  float* post = nullptr;
  float* comb = nullptr;
};

// A site's post: residual_next [T, n, C] = bf16(post * sublayer_out + comb^T residual), from
// sublayer_out [T, C] bf16, residual [T, n, C] bf16, post [T, n] and comb [T, n, n] fp32.
struct PostArgs {
  const Bf16* sublayer_out = nullptr;
  const Bf16* residual = nullptr;
  const float* post = nullptr;
  const float* comb = nullptr;
  Bf16* residual_next = nullptr;
};

// The ops of one site shape: p's C, n, epsilons, post_mult and sinkhorn_iters, under `plan`
// (which must outlive it). Made per shape, or per call (cheap: it checks the shape, and
// allocates nothing). Every call runs on the plan's device, which must be current.
class Ops {
 public:
  // Throws mhc::Error where the plan has no kernels for this GPU or the CUDA kernels do not take
  // the shape (n = 2 or 4, C a positive multiple of 64, at most the device's limit).
  Ops(const KernelPlan& plan, const MhcParams& p);
  // The same with a launch's overrides (mhc/core/kernel_plan.hpp): a projection other than the
  // plan's, or a benchmark's forced kernel.
  Ops(const KernelPlan& plan, const MhcParams& p, const LaunchOverrides& overrides);

  const KernelPlan& plan() const { return plan_; }
  const MhcParams& params() const { return p_; }
  // What a call of `tokens` tokens launches (its main-stream launches).
  LaunchTuning tuning(int64_t tokens) const;

  // Before the sublayer: the coefficients of residual [T, n, C] into `out`, and the sublayer's
  // input layer_input [T, C] bf16 = bf16(rmsnorm(bf16(sum_j pre_mix[:, j] residual[:, j])) *
  // norm_weight). V4.1 (pre_mix [T, n] fp32, the previous site's out.pre): one launch where the
  // plan fuses the input path into the coefficient launch. V4 (pre_mix null): the collapse takes
  // this site's own pre, after the coefficients.
  void pre(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
           const float* pre_mix, Bf16* layer_input, const Coefficients& out, Workspace ws,
           Stream stream) const;
  // The coefficient path alone. forked_from: for the overlap's side stream, the stream it has
  // just waited for (the plan's side-stream CTA count, and in a captured graph a dependency on
  // that stream's last launches only: docs/overlap.md); null: a plain launch.
  void coefficients(int64_t tokens, const Bf16* residual, const HcWeights& w,
                    const Coefficients& out, Workspace ws, Stream stream,
                    Stream forked_from = nullptr) const;
  // layer_input alone (pre's collapse), e.g. on the main stream beside a side-stream
  // coefficients call. The workspace is read only for a bf16 norm weight.
  void input_path(int64_t tokens, const Bf16* residual, const float* pre_mix,
                  NormWeight norm_weight, Bf16* layer_input, Workspace ws, Stream stream) const;
  // After the sublayer: residual_next (must not overlap any input).
  void post(int64_t tokens, const PostArgs& a, Stream stream) const;
  // post, and the next site's layer_input from residual_next with next_pre_mix and its norm
  // weight, in one launch.
  void post_pre(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                NormWeight next_norm_weight, Bf16* next_layer_input, Workspace ws,
                Stream stream) const;
  // A V4.1 boundary: post_pre with the carried pre_mix, then the coefficients of residual_next
  // with the next site's weights into `out`; one launch where the plan runs the fold or the
  // fused boundary (then within the TF32 tier of the separate launches: docs/kernels.md).
  void boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                Bf16* layer_input, const HcWeights& next, const Coefficients& out, Workspace ws,
                Stream stream) const;
  // The head (the final collapse and norm after the last site) joins these ops here.

  // The same ops with an FP8 layer_input (mhc/core/fp8.hpp, docs/fp8.md): E4M3 codes [T, C] and
  // float32 scales per (token, 128-column group), row-major or in DeepGEMM's SM90 column-major
  // layout, optionally powers of two: bitwise vLLM's per_token_group_quant_fp8 of the bf16
  // layer_input the bf16 form writes. C must be a multiple of 128. Where the bf16 form runs the
  // fused boundary (large batches), this FP8 boundary runs the post + next input launch, then the
  // coefficients (those within the TF32 tier of the fused boundary's); the one below with a
  // staging buffer runs the fused boundary.
  void pre(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
           const float* pre_mix, const Fp8Output& layer_input, const Coefficients& out,
           Workspace ws, Stream stream) const;
  void input_path(int64_t tokens, const Bf16* residual, const float* pre_mix,
                  NormWeight norm_weight, const Fp8Output& layer_input, Workspace ws,
                  Stream stream) const;
  void post_pre(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                NormWeight next_norm_weight, const Fp8Output& next_layer_input, Workspace ws,
                Stream stream) const;
  void boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                const Fp8Output& layer_input, const HcWeights& next, const Coefficients& out,
                Workspace ws, Stream stream) const;
  // The FP8 boundary with `staging`, bf16 [T, C] device memory of the caller's (16-byte aligned,
  // overlapping no other array; null: the form above), which the fused boundary kernel stages its
  // rows in before its norm, as the bf16 boundary stages them in layer_input: where the plan runs
  // that kernel, this form runs it too (its wide stages writing the FP8 layer_input themselves,
  // one byte a value instead of two; its other shapes writing bf16 into `staging`, then the group
  // quantisation), so that every output but layer_input is bitwise the bf16 boundary's and
  // layer_input is its layer_input quantised (the default, staged form); with
  // layer_input.format.fold_norm (opt-in) and float scales the wide stages fold the norm factor
  // into the group scales instead and do not touch `staging` (codes and scales within
  // docs/fp8.md's bounds of those bits, "The folded form"). Elsewhere `staging` is not touched.
  // Its contents afterwards are unspecified.
  void boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                const Fp8Output& layer_input, Bf16* staging, const HcWeights& next,
                const Coefficients& out, Workspace ws, Stream stream) const;

 private:
  // layer_input in bf16 (fp8 null) or FP8 (bf16 then the fused boundary's staging, or null).
  struct LayerInputOut {
    Bf16* bf16 = nullptr;
    const Fp8Output* fp8 = nullptr;
  };
  void pre_to(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
              const float* pre_mix, LayerInputOut layer_input, const Coefficients& out,
              Workspace ws, Stream stream) const;
  void input_path_to(int64_t tokens, const Bf16* residual, const float* pre_mix,
                     NormWeight norm_weight, LayerInputOut layer_input, Workspace ws,
                     Stream stream) const;
  void post_pre_to(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                   NormWeight next_norm_weight, LayerInputOut next_layer_input, Workspace ws,
                   Stream stream) const;
  void boundary_to(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                   LayerInputOut layer_input, const HcWeights& next, const Coefficients& out,
                   Workspace ws, Stream stream) const;

  const KernelPlan& plan_;
  MhcParams p_;
  LaunchOverrides overrides_;
};

// DeepGEMM's tf32_hc_prenorm_gemm on `plan`'s device: out [S, M, N] and sqrsum [S, M] fp32, the
// split partials of x [M, K] bf16 @ fn [N, K]^T fp32 over S = splits splits of K.
void prenorm_gemm(const KernelPlan& plan, int64_t m, int64_t n, int64_t k, int splits,
                  const Bf16* x, const float* fn, float* out, float* sqrsum, Stream stream);

}  // namespace mhc
