// The launcher calls of the Python bindings (launch.hpp): the CPU backend for CPU arrays, the C++
// API's ops (mhc/api.hpp) on the configured kernel plan for CUDA arrays.
#include "launch.hpp"

#include <fmt/core.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/core/fp8.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/fp8.hpp"
#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/api.hpp"
#include "mhc/core/kernel_limits.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_plan.hpp"
#endif

namespace mhc::launch {

namespace {

// ---- the configuration and the plans --------------------------------------------------------

struct Configured {
  KernelConfig config;
  std::string json = "{}";
};

#if MHC_WITH_CUDA
// One device's launch description in one batch-invariant mode: the config it was made from
// (projection and batch_invariant included) and its plan. Immutable once made.
struct Resolved {
  KernelConfig config;
  KernelPlan plan;
};
#endif

class State {
 public:
  void configure(const std::string& json) {
    Configured next;
    next.config = KernelConfig::parse(json);  // throws mhc::Error naming the problem
    next.json = next.config.to_json();
    std::lock_guard<std::mutex> lock(mutex_);
    batch_invariant_.store(next.config.batch_invariant, std::memory_order_relaxed);
    configured_ = std::move(next);
#if MHC_WITH_CUDA
    plans_.clear();
#endif
  }
  Configured configured() {
    std::lock_guard<std::mutex> lock(mutex_);
    return configured_;
  }
  // Read by every CUDA call's workspace check: a flag of its own, not the lock.
  bool configured_batch_invariant() const {
    return batch_invariant_.load(std::memory_order_relaxed);
  }
#if MHC_WITH_CUDA
  // The plan of the current device (`device`) in the batch-invariant mode that the call (`asked`)
  // or the configuration asks for, made at its first use.
  std::shared_ptr<const Resolved> resolve(int device, bool asked) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool batch_invariant = asked || configured_.config.batch_invariant;
    auto& slot = plans_[device][batch_invariant ? 1 : 0];
    if (!slot) {
      auto made = std::make_shared<Resolved>();
      made->config = configured_.config;
      made->config.batch_invariant = batch_invariant;
      made->plan = cuda::device_plan(made->config);
      slot = std::move(made);
    }
    return slot;
  }
#endif

 private:
  std::mutex mutex_;
  Configured configured_;
  std::atomic<bool> batch_invariant_{false};  // configured_.config.batch_invariant
#if MHC_WITH_CUDA
  std::map<int, std::array<std::shared_ptr<const Resolved>, 2>> plans_;
#endif
};

State& state() {
  static State* s = new State();  // never destroyed: calls may come during interpreter exit
  return *s;
}

// ---- the CPU backend --------------------------------------------------------------------------

// The fp32 weight the CPU backend reads: a bf16 one widened (exactly) into `widened`.
const float* cpu_norm_weight(const NormWeight& w, int64_t hidden, std::vector<float>& widened) {
  if (!w.data) return nullptr;
  if (!w.bf16) return static_cast<const float*>(w.data);
  const auto* bits = static_cast<const Bf16*>(w.data);
  widened.resize(size_t(hidden));
  for (size_t i = 0; i < widened.size(); ++i) widened[i] = bf16_to_float(bits[i]);
  return widened.data();
}

SiteWeightsView view(const HcWeights& w) {
  return {.hc_fn = w.fn, .hc_base = w.base, .hc_scale = w.scale, .norm_weight = nullptr};
}

// The CPU backend's layer input: `write` fills bf16 rows [T, C], the caller's, or for an FP8
// layer input host scratch that the reference quantiser then reads (mhc/cpu/fp8.hpp: the CPU
// backend has no fused FP8 form, and its values are the quantised bf16 rows by definition).
template <typename Write>
void cpu_layer_input(const MhcParams& p, int64_t tokens, LayerInputOut layer_input, Write&& write) {
  if (!layer_input.fp8) return write(layer_input.bf16);
  std::vector<Bf16> rows(size_t(tokens) * size_t(p.hidden));
  write(rows.data());
  const Fp8Output& fp8 = *layer_input.fp8;
  check_fp8_format(fp8.format, p.hidden, "layer_input");
  fp8_quantize_rows(rows.data(), tokens, p.hidden, fp8.format, fp8.codes, fp8.scales);
}

void cpu_boundary(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* pre_mix,
                  const NormWeight& w, LayerInputOut layer_input, const HcWeights& next,
                  const Coefficients& out) {
  std::vector<float> widened;
  const float* weight = cpu_norm_weight(w, p.hidden, widened);
  cpu::post(p, tokens, in.residual, in.post, in.comb, in.sublayer_out, in.residual_next);
  cpu_layer_input(p, tokens, layer_input, [&](Bf16* rows) {
    cpu::input_path(p, tokens, in.residual_next, pre_mix, weight, rows);
  });
  cpu::coefficients(p, tokens, in.residual_next, view(next), out.pre, out.post, out.comb);
}

// ---- the CUDA kernels -------------------------------------------------------------------------

#if MHC_WITH_CUDA
cudaStream_t to_stream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

// Refuses a workspace too small for `tokens` (or for the batch-invariant tree).
void check_room(const MhcParams& p, Scratch ws, int64_t tokens, bool batch_invariant) {
  const WorkspaceLayout layout = workspace_layout_for_bytes(p, ws.bytes);
  if (layout.max_tokens < tokens) {
    throw ArgumentError(fmt::format(
        "workspace: {} bytes serve {} tokens, the call has {} (size it with workspace_bytes)",
        ws.bytes, layout.max_tokens, tokens));
  }
  // workspace_bytes sizes for the default mode's most splits, never fewer than the tree's leaves
  // (docs/batch_invariance.md), so this cannot fail on a workspace from workspace_bytes.
  if (batch_invariant && batch_invariant_leaves(p) > layout.max_splits) {
    throw ArgumentError(fmt::format(
        "workspace: batch_invariant needs room for {} split partials per token, the workspace "
        "has {}",
        batch_invariant_leaves(p), layout.max_splits));
  }
}

// Refuses a bf16 weight without room to widen it.
void check_widening(const NormWeight& w, const MhcParams& p, Scratch ws) {
  if (!w.data || !w.bf16) return;
  if (!ws.data) {
    throw ArgumentError(std::string(w.name) +
                        ": a bfloat16 norm weight on CUDA needs workspace= (scratch to widen it "
                        "into), or pass it as float32");
  }
  const WorkspaceLayout layout = workspace_layout_for_bytes(p, ws.bytes);
  if (ws.bytes < layout.weight_offset + layout.weight_floats * 4) {
    throw ArgumentError(
        "workspace: too small for the widened norm weight (size it with workspace_bytes)");
  }
}

// Every CUDA launch goes through the C++ API (mhc/api.hpp), as an engine's would: its Ops on the
// device's plan in the batch-invariant mode the op or the configuration asks for, with the op's
// projection (fp32 where it asks for it). The checks above run first, so that a bad workspace is
// an ArgumentError naming the Python argument.
struct DeviceOps {
  std::shared_ptr<const Resolved> resolved;  // keeps the plan the Ops refer to alive
  Ops ops;
};

LaunchOverrides overrides_of(const CoefficientOptions& options) {
  LaunchOverrides o;
  if (options.projection == Projection::fp32) o.projection = Projection::fp32;
  return o;
}

DeviceOps ops_on(const MhcParams& p, int device, bool batch_invariant = false,
                 const LaunchOverrides& overrides = {}) {
  const profile::Scope timed(profile::kPlan);
  std::shared_ptr<const Resolved> resolved = state().resolve(device, batch_invariant);
  const KernelPlan& plan = resolved->plan;
  return {std::move(resolved), Ops(plan, p, overrides)};
}

mhc::Workspace workspace_of(Scratch ws) { return {ws.data, ws.bytes}; }
mhc::NormWeight weight_of(const NormWeight& w) { return {w.data, w.bf16}; }

void cuda_coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
                       const Coefficients& out, Scratch ws, const CoefficientOptions& options,
                       const Target& at) {
  const DeviceOps d = ops_on(p, at.device, options.batch_invariant, overrides_of(options));
  check_room(p, ws, tokens, d.resolved->plan.batch_invariant);
  // The overlap's side launch (docs/overlap.md): fork_from is the stream the side stream has just
  // waited for; the same stream, or none, is a plain launch.
  const bool side = options.fork_from != 0 && options.fork_from != at.stream;
  d.ops.coefficients(tokens, x, w, out, workspace_of(ws), to_stream(at.stream),
                     side ? to_stream(options.fork_from) : nullptr);
}

void cuda_boundary(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* pre_mix,
                   const NormWeight& w, LayerInputOut layer_input, const HcWeights& next,
                   const Coefficients& out, Scratch ws, const CoefficientOptions& options,
                   const Target& at) {
  const DeviceOps d = ops_on(p, at.device, options.batch_invariant, overrides_of(options));
  check_room(p, ws, tokens, d.resolved->plan.batch_invariant);
  check_widening(w, p, ws);
  if (layer_input.fp8) {  // the fused FP8 form (Ops' FP8 overload; bf16: its staging, or null)
    return d.ops.boundary(tokens, in, pre_mix, weight_of(w), *layer_input.fp8, layer_input.bf16,
                          next, out, workspace_of(ws), to_stream(at.stream));
  }
  d.ops.boundary(tokens, in, pre_mix, weight_of(w), layer_input.bf16, next, out, workspace_of(ws),
                 to_stream(at.stream));
}

void cuda_pre(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
              const float* pre_mix, const NormWeight& norm, LayerInputOut layer_input,
              const Coefficients& out, Scratch ws, const CoefficientOptions& options,
              const Target& at) {
  const DeviceOps d = ops_on(p, at.device, options.batch_invariant, overrides_of(options));
  check_room(p, ws, tokens, d.resolved->plan.batch_invariant);
  check_widening(norm, p, ws);
  if (layer_input.fp8) {  // the fused FP8 form (Ops' FP8 overloads)
    return d.ops.pre(tokens, x, w, weight_of(norm), pre_mix, *layer_input.fp8, out,
                     workspace_of(ws), to_stream(at.stream));
  }
  d.ops.pre(tokens, x, w, weight_of(norm), pre_mix, layer_input.bf16, out, workspace_of(ws),
            to_stream(at.stream));
}

// One event per device and thread for stream_wait: recorded and waited for at once, so reusing
// it is safe (a wait takes the event's state when it is queued).
cudaEvent_t fork_event(int device) {
  thread_local std::unordered_map<int, cudaEvent_t>* events =
      new std::unordered_map<int, cudaEvent_t>();
  auto it = events->find(device);
  if (it != events->end()) return it->second;
  cudaEvent_t event = nullptr;
  MHC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  events->emplace(device, event);
  return event;
}
#else
[[noreturn]] void no_cuda() {
  throw ArgumentError(
      "the arrays are on a CUDA device, but mhc was built without the CUDA backend");
}
#endif

}  // namespace

// ---- the API ----------------------------------------------------------------------------------

void configure(const std::string& kernel_config_json) { state().configure(kernel_config_json); }

std::string config_json() { return state().configured().json; }

bool built_with_cuda() {
#if MHC_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#if MHC_WITH_CUDA
namespace {
// Runs `f` with `device` current (the plan describes the current device), then the caller's.
template <typename F>
auto on_device(int device, F&& f) {
  int previous = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != device) MHC_CUDA_CHECK(cudaSetDevice(device));
  struct Restore {
    int previous, device;
    ~Restore() {
      if (previous != device) cudaSetDevice(previous);
    }
  } restore{previous, device};
  return f();
}
}  // namespace
#endif

std::string plan_json(int device, bool batch_invariant) {
#if MHC_WITH_CUDA
  return on_device(device,
                   [&] { return state().resolve(device, batch_invariant)->plan.to_json(); });
#else
  (void)device;
  (void)batch_invariant;
  throw ArgumentError("mhc was built without the CUDA backend: there is no kernel plan");
#endif
}

void prepare(int device) {
#if MHC_WITH_CUDA
  on_device(device, [&] {
    state().resolve(device, false);
    state().resolve(device, true);
  });
#else
  (void)device;
#endif
}

void prenorm_gemm(int64_t m, int64_t n, int64_t k, int splits, const Bf16* x, const float* fn,
                  float* out, float* sqrsum, const Target& at) {
  if (m == 0) return;
  if (!at.cuda) return cpu::prenorm_gemm(m, n, k, splits, x, fn, out, sqrsum);
#if MHC_WITH_CUDA
  mhc::prenorm_gemm(state().resolve(at.device, false)->plan, m, n, k, splits, x, fn, out, sqrsum,
                    to_stream(at.stream));
#else
  no_cuda();
#endif
}

void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
                  const Coefficients& out, Scratch ws, const CoefficientOptions& options,
                  const Target& at) {
  if (tokens == 0) return;
  if (!at.cuda) return cpu::coefficients(p, tokens, x, view(w), out.pre, out.post, out.comb);
#if MHC_WITH_CUDA
  cuda_coefficients(p, tokens, x, w, out, ws, options, at);
#else
  (void)ws;
  (void)options;
  no_cuda();
#endif
}

void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const NormWeight& w, Bf16* layer_input, Scratch ws, const Target& at) {
  if (tokens == 0) return;
  if (!at.cuda) {
    std::vector<float> widened;
    return cpu::input_path(p, tokens, x, pre_mix, cpu_norm_weight(w, p.hidden, widened),
                           layer_input);
  }
#if MHC_WITH_CUDA
  check_widening(w, p, ws);
  ops_on(p, at.device)
      .ops.input_path(tokens, x, pre_mix, weight_of(w), layer_input, workspace_of(ws),
                      to_stream(at.stream));
#else
  (void)ws;
  no_cuda();
#endif
}

void pre(const MhcParams& p, int64_t tokens, const Bf16* x, const HcWeights& w,
         const float* pre_mix, const NormWeight& norm, LayerInputOut layer_input,
         const Coefficients& out, Scratch ws, const CoefficientOptions& options, const Target& at) {
  if (tokens == 0) return;
  if (at.cuda) {
#if MHC_WITH_CUDA
    return cuda_pre(p, tokens, x, w, pre_mix, norm, layer_input, out, ws, options, at);
#else
    no_cuda();
#endif
  }
  const auto collapse = [&](const float* mix) {
    cpu_layer_input(p, tokens, layer_input,
                    [&](Bf16* rows) { input_path(p, tokens, x, mix, norm, rows, ws, at); });
  };
  if (pre_mix) collapse(pre_mix);
  coefficients(p, tokens, x, w, out, ws, options, at);
  if (!pre_mix) collapse(out.pre);
}

void post(const MhcParams& p, int64_t tokens, const PostArgs& in, const Target& at) {
  if (tokens == 0) return;
  if (!at.cuda) {
    return cpu::post(p, tokens, in.residual, in.post, in.comb, in.sublayer_out, in.residual_next);
  }
#if MHC_WITH_CUDA
  ops_on(p, at.device).ops.post(tokens, in, to_stream(at.stream));
#else
  no_cuda();
#endif
}

void post_pre(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* next_pre_mix,
              const NormWeight& w, LayerInputOut next_layer_input, Scratch ws, const Target& at) {
  if (tokens == 0) return;
  if (!at.cuda) {
    std::vector<float> widened;
    const float* weight = cpu_norm_weight(w, p.hidden, widened);
    cpu::post(p, tokens, in.residual, in.post, in.comb, in.sublayer_out, in.residual_next);
    return cpu_layer_input(p, tokens, next_layer_input, [&](Bf16* rows) {
      cpu::input_path(p, tokens, in.residual_next, next_pre_mix, weight, rows);
    });
  }
#if MHC_WITH_CUDA
  check_widening(w, p, ws);
  const DeviceOps d = ops_on(p, at.device);
  if (next_layer_input.fp8) {  // the fused FP8 form (Ops' FP8 overloads)
    return d.ops.post_pre(tokens, in, next_pre_mix, weight_of(w), *next_layer_input.fp8,
                          workspace_of(ws), to_stream(at.stream));
  }
  d.ops.post_pre(tokens, in, next_pre_mix, weight_of(w), next_layer_input.bf16, workspace_of(ws),
                 to_stream(at.stream));
#else
  (void)ws;
  no_cuda();
#endif
}

void boundary(const MhcParams& p, int64_t tokens, const PostArgs& in, const float* pre_mix,
              const NormWeight& w, LayerInputOut layer_input, const HcWeights& next,
              const Coefficients& out, Scratch ws, const CoefficientOptions& options,
              const Target& at) {
  if (tokens == 0) return;
  if (!at.cuda) return cpu_boundary(p, tokens, in, pre_mix, w, layer_input, next, out);
#if MHC_WITH_CUDA
  cuda_boundary(p, tokens, in, pre_mix, w, layer_input, next, out, ws, options, at);
#else
  (void)ws;
  (void)options;
  no_cuda();
#endif
}

bool fp8_boundary_is_the_twins(const MhcParams& p, int64_t tokens,
                               const CoefficientOptions& options, const Target& at) {
  if (!at.cuda || tokens == 0) return true;
#if MHC_WITH_CUDA
  const LaunchTuning t =
      ops_on(p, at.device, options.batch_invariant, overrides_of(options)).ops.tuning(tokens);
  // The 16-row coefficient launch with the fused input path folds the post in (FP8 too); any
  // other with fused_boundary runs the fused boundary kernel only given staging rows
  // (cuda::prenorm_coefficients).
  const bool folds = t.fused_input && t.rows_per_tile() == 16;
  return folds || !t.fused_boundary;
#else
  (void)p;
  (void)options;
  no_cuda();
#endif
}

void check_coefficient_workspace(const MhcParams& p, int64_t tokens, Scratch ws,
                                 bool batch_invariant, const Target& at) {
  if (!at.cuda) return;
#if MHC_WITH_CUDA
  check_room(p, ws, tokens, batch_invariant || state().configured_batch_invariant());
#else
  (void)p;
  (void)tokens;
  (void)ws;
  (void)batch_invariant;
  no_cuda();
#endif
}

void check_weight_scratch(const MhcParams& p, const NormWeight& w, Scratch ws, const Target& at) {
  if (!at.cuda) return;
#if MHC_WITH_CUDA
  check_widening(w, p, ws);
#else
  (void)p;
  (void)w;
  (void)ws;
  no_cuda();
#endif
}

void stream_wait(uintptr_t waiter, uintptr_t producer, int device) {
#if MHC_WITH_CUDA
  if (waiter == producer) return;
  const cudaEvent_t event = fork_event(device);
  MHC_CUDA_CHECK(cudaEventRecord(event, to_stream(producer)));
  MHC_CUDA_CHECK(cudaStreamWaitEvent(to_stream(waiter), event, 0));
#else
  (void)waiter;
  (void)producer;
  (void)device;
  no_cuda();
#endif
}

// ---- the host-time profile ----------------------------------------------------------------------

namespace profile {
namespace {
std::atomic<bool> g_enabled{false};
struct Sums {
  int64_t calls = 0;
  std::array<int64_t, kPhases> ns{};
};
thread_local Sums t_sums;
}  // namespace

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void enable(bool on) {
  t_sums = Sums{};
  g_enabled.store(on, std::memory_order_relaxed);
}
void add(Phase phase, int64_t ns) { t_sums.ns[size_t(phase)] += ns; }
void count_call() {
  if (enabled()) ++t_sums.calls;
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::string take() {
  const Sums s = t_sums;
  t_sums = Sums{};
  return fmt::format(
      R"({{"calls": {}, "checks_ns": {}, "setup_ns": {}, "plan_ns": {}, "launch_ns": {}}})",
      s.calls, s.ns[kChecks], s.ns[kSetup], s.ns[kPlan], s.ns[kLaunch]);
}
}  // namespace profile

}  // namespace mhc::launch
