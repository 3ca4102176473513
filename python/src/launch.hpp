// The one adapter between the Python bindings and the library's backends: every launcher call of
// mhc._C (nanobind) and of the torch ops library (python/src/torch) goes through here, with
// checked shapes and raw pointers. It owns the kernel configuration of the process's Python
// layer (mhc.configure) and resolves the kernel plan once per device and batch-invariant mode,
// so that a tactics file, the kill switches and the launch decisions reach every op.
//
// No torch and no nanobind here: the bindings check their arguments, then call these.
#pragma once
#include <cstdint>
#include <string>

#include "mhc/api.hpp"
#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/params.hpp"

namespace mhc::launch {

// A bad argument found here (a too small workspace, a bf16 weight without scratch): mhc._C raises
// it as ValueError, the torch ops as RuntimeError. Its message names the argument.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// Where a call runs: the fp32 CPU backend, or the CUDA kernels on `device`, launched on `stream`
// (a cudaStream_t as an integer; the caller made `device` current).
struct Target {
  bool cuda = false;
  int device = 0;
  uintptr_t stream = 0;
};

// Caller-owned scratch on the call's device: the coefficient path's workspace (CUDA; the CPU
// backend needs none). data null: none given.
struct Scratch {
  void* data = nullptr;
  int64_t bytes = 0;
};

// A norm weight [C], fp32 or bf16; data null: none (the plain collapse). `name` is the
// argument's name for messages.
struct NormWeight {
  const void* data = nullptr;
  bool bf16 = false;
  const char* name = "norm_weight";
};

// A site's weights, the coefficient outputs and a post's arrays are the C++ API's HcWeights,
// Coefficients and PostArgs (mhc/api.hpp): one set of field names from the bindings to the kernels.

// Where pre, post_pre and boundary write the layer input: bf16 rows [T, C], or FP8 codes and
// scales (mhc/core/fp8.hpp, docs/fp8.md; the caller checked the format for the hidden size), the
// values of the reference quantiser of those rows, bitwise. On CUDA the FP8 form is the library's
// fused one (the same launches as the bf16 form, writing FP8 directly); on the CPU the bf16 rows
// go through host scratch, then the reference quantiser (the CPU backend has no fused form).
// FP8 with bf16 rows beside it (boundary only): the rows are the staging buffer of Ops' FP8
// boundary, with which the fused boundary kernel runs where the plan has it (the bf16 boundary's
// other outputs bitwise); on the CPU they are unused.
struct LayerInputOut {
  Bf16* bf16 = nullptr;
  const Fp8Output* fp8 = nullptr;
  LayerInputOut(Bf16* rows) : bf16(rows) {}           // NOLINT(google-explicit-constructor)
  LayerInputOut(const Fp8Output& out) : fp8(&out) {}  // NOLINT(google-explicit-constructor)
  LayerInputOut(const Fp8Output& out, Bf16* staging) : bf16(staging), fp8(&out) {}
};

struct CoefficientOptions {
  Projection projection = Projection::tf32;
  bool batch_invariant = false;
  // Nonzero: the overlap's side launch; the stream the launch stream has just waited for (the
  // plan's side-stream CTA count, and in a captured graph the fork of capture_edges.hpp).
  uintptr_t fork_from = 0;
};

// The process's kernel configuration (JSON as `mhc run --kernel-config`, "" for the defaults);
// validated here (mhc::Error naming the bad key), then every device's plans are made again from
// it at their next call. The ops' own projection and batch_invariant keywords add to it: fp32 if
// either asks for it, batch-invariant if either does.
void configure(const std::string& kernel_config_json);
std::string config_json();
// The launch description of CUDA device `device` under the configuration (the kernel plan's
// JSON, as `mhc plan --json`); makes the plan if not made yet.
std::string plan_json(int device, bool batch_invariant);
// Makes the plans of `device` now, outside any capture (DEFAULT_POOL.reserve does; else a
// forward's first call on the device).
void prepare(int device);

// Whether the library holds the CUDA kernels.
bool built_with_cuda();

// DeepGEMM's tf32_hc_prenorm_gemm: out [S, M, N], sqrsum [S, M].
void prenorm_gemm(int64_t m, int64_t n, int64_t k, int splits, const Bf16* x, const float* fn,
                  float* out, float* sqrsum, const Target& at);

// The coefficient path of `x` [T, n, C]; `ws` is needed on CUDA.
void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
                  const Coefficients& out, Scratch ws, const CoefficientOptions& options,
                  const Target& at);

// layer_input = bf16(rmsnorm(bf16(sum_j pre_mix[:, j] x[:, j])) * norm_weight). A bf16 weight on
// CUDA is widened into `ws` first (ArgumentError without it).
void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const NormWeight& w, Bf16* layer_input, Scratch ws, const Target& at);

void post(const MhcParams& p, int64_t tokens, const PostArgs& in, const Target& at);

// Both paths of one site: V4.1 (pre_mix given) the input path with the carried pre_mix and the
// coefficients, in one launch on CUDA where the plan fuses them (the bits of the two launches);
// V4 (pre_mix null) the coefficients, then the collapse with this site's own pre (out.pre). `ws`
// is needed on CUDA (the coefficients, and a bf16 weight's widening).
void pre(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
         const float* pre_mix, const NormWeight& norm, LayerInputOut layer_input,
         const Coefficients& out, Scratch ws, const CoefficientOptions& options, const Target& at);

// post, then the next site's input path on residual_next (one launch on CUDA).
void post_pre(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* next_pre_mix,
              const NormWeight& w, LayerInputOut next_layer_input, Scratch ws, const Target& at);

// A V4.1 boundary: post_pre, then the coefficients of residual_next (one prenorm_coefficients
// call on CUDA, which the plan may run as one launch).
void boundary(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* pre_mix,
              const NormWeight& w, LayerInputOut layer_input, const HcWeights& next,
              const Coefficients& out, Scratch ws, const CoefficientOptions& options,
              const Target& at);

// Whether boundary with an FP8 layer input and no staging rows gives every other output of the
// bf16 boundary bitwise at `tokens`: everywhere but on CUDA where the plan runs the fused boundary
// kernel (there that form runs the post + next input launch, then the coefficients, whose bits
// are within the TF32 tier of the fused boundary's; with staging rows it runs the fused boundary:
// docs/fp8.md). On CUDA at.device is current. Throws what the plan's tuning throws for a shape it
// does not serve.
bool fp8_boundary_is_the_twins(const MhcParams& p, int64_t tokens,
                               const CoefficientOptions& options, const Target& at);

// The scratch checks of coefficients (the workspace's room for `tokens`) and of input_path (a
// bf16 weight's scratch), for callers that refuse a call before its first launch. Nothing to
// check on the CPU.
void check_coefficient_workspace(const MhcParams& p, int64_t tokens, Scratch ws,
                                 bool batch_invariant, const Target& at);
void check_weight_scratch(const MhcParams& p, const NormWeight& w, Scratch ws, const Target& at);

// `waiter` waits for the work queued so far on `producer` (an event recorded on one, waited for
// on the other: capture-safe, it becomes a graph edge). CUDA streams of `device`, made current.
void stream_wait(uintptr_t waiter, uintptr_t producer, int device);

// Where a call's host time goes (bench/python_ops.py --profile): off by default, when each
// phase costs one relaxed load. On, every op call adds the steady-clock time of its phases
// (thread-local sums, read and reset by take_profile) to these counters.
namespace profile {
enum Phase { kChecks, kSetup, kPlan, kLaunch, kPhases };
bool enabled();
void enable(bool on);
void add(Phase phase, int64_t ns);
void count_call();
// {"calls": N, "checks_ns": ..., "setup_ns": ..., "plan_ns": ..., "launch_ns": ...} of this
// thread since the last take, and resets them.
std::string take();
int64_t now_ns();

// Adds the time from its construction to its destruction to `phase` (where profiling is on).
class Scope {
 public:
  explicit Scope(Phase phase) : phase_(phase), start_(enabled() ? now_ns() : -1) {}
  ~Scope() {
    if (start_ >= 0) add(phase_, now_ns() - start_);
  }
  // Ends this phase and starts `next` (one clock read for both).
  void next(Phase next) {
    if (start_ < 0) return;
    const int64_t t = now_ns();
    add(phase_, t - start_);
    phase_ = next;
    start_ = t;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  int64_t start_;
};
}  // namespace profile

}  // namespace mhc::launch
