#include "mhc/schedule/stack_executor.hpp"

#include <fmt/core.h>

#include <vector>

#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/schedule/stack_launches.hpp"

namespace mhc::cuda {

struct StackExecutor::Impl {
  MhcParams p;
  KernelConfig config;
  StackOptions options;
  SublayerFn sublayer;
  KernelPlan plan;  // made once; every launch below resolves it (KernelPlan::tuning)

  std::vector<DeviceSiteWeights> sites;
  std::vector<DeviceBuffer<float>> gains;
  DeviceBuffer<float> final_norm;
  bool has_final_norm = false;

  DeviceBuffer<Bf16> x_in, x[2], layer_input, f, output, trace;
  DeviceBuffer<float> pre_mix_in, pre[2], post[2], comb[2];
  std::unique_ptr<SiteWorkspace> workspace;
  std::unique_ptr<StackSchedule> schedule;
  std::unique_ptr<StackLaunches> stack;                      // over the buffers above
  std::map<std::pair<int64_t, bool>, CapturedGraph> graphs;  // (tokens, overlap) -> graph
  // Host-side caches, so that a forward allocates nothing once its size has been seen: building
  // launch lists (std::function captures) and decisions (reason strings) allocates. The launch
  // lists are keyed by (tokens, overlap): the layout follows from those and the options.
  // At most 2 * max_tokens lists of p.sites() entries each.
  struct LaunchList {
    StackLayout layout = StackLayout::fused_post;
    std::vector<SiteLaunches> sites;
  };
  std::map<std::pair<int64_t, bool>, LaunchList> launch_cache;
  std::map<std::pair<int64_t, ExecMode>, DispatchDecision> decisions;
  int64_t overlapped_sites = 0, native_sites = 0, folded_sites = 0;

  Impl(const ModelWeights& w, const KernelConfig& cfg, const StackOptions& opt, SublayerFn fn);
  StackLayout layout(int64_t tokens, bool overlap) const;
  LaunchList launches(int64_t tokens, bool overlap);
  const LaunchList& cached_launches(int64_t tokens, bool overlap);
  DispatchDecision decide(int64_t tokens, ExecMode mode) const;
  const DispatchDecision& cached_decision(int64_t tokens, ExecMode mode);
  void enqueue(int64_t tokens, bool overlap, cudaStream_t stream,
               StageObserver* observer = nullptr);
  // Copies x after site s into the layer trace when s is an FFN site (odd).
  void copy_trace(int s, int64_t tokens, const Bf16* x_after, cudaStream_t st) const {
    if (s % 2 == 0) return;
    const size_t count = size_t(tokens * p.k());
    Bf16* slot = trace.get() + size_t(s / 2) * size_t(options.max_tokens) * size_t(p.k());
    MHC_CUDA_CHECK(
        cudaMemcpyAsync(slot, x_after, count * sizeof(Bf16), cudaMemcpyDeviceToDevice, st));
  }
  StackBuffers stack_buffers() const;
};

StackExecutor::Impl::Impl(const ModelWeights& w, const KernelConfig& cfg, const StackOptions& opt,
                          SublayerFn fn)
    : p(w.params), config(cfg), options(opt), sublayer(std::move(fn)) {
  validate(p);
  if (options.max_tokens < 1) throw Error("StackExecutor: max_tokens must be at least 1");
  if (int(w.sites.size()) != p.sites()) {
    throw Error(fmt::format("StackExecutor: {} site weights for {} layers (need {})",
                            w.sites.size(), p.layers, p.sites()));
  }
  plan = device_plan(config);

  for (int s = 0; s < p.sites(); ++s) {
    sites.emplace_back(p, w.sites[size_t(s)].view());
    gains.emplace_back(size_t(p.hidden));
    gains.back().upload(w.standin_gain.at(size_t(s)).data(), size_t(p.hidden));
  }
  has_final_norm = !w.final_norm.empty();
  final_norm = DeviceBuffer<float>(size_t(p.hidden));
  if (has_final_norm) final_norm.upload(w.final_norm.data(), size_t(p.hidden));

  const size_t m = size_t(options.max_tokens);
  x_in = DeviceBuffer<Bf16>(m * size_t(p.k()));
  for (auto& b : x) b = DeviceBuffer<Bf16>(m * size_t(p.k()));
  layer_input = DeviceBuffer<Bf16>(m * size_t(p.hidden));
  f = DeviceBuffer<Bf16>(m * size_t(p.hidden));
  output = DeviceBuffer<Bf16>(m * size_t(p.hidden));
  if (options.trace_layers) trace = DeviceBuffer<Bf16>(size_t(p.layers) * m * size_t(p.k()));
  for (auto& b : pre) b = DeviceBuffer<float>(m * size_t(p.n));
  for (auto& b : post) b = DeviceBuffer<float>(m * size_t(p.n));
  for (auto& b : comb) b = DeviceBuffer<float>(m * size_t(p.n * p.n));
  // One-hot on stream 0 (the model's first site) until the caller writes a carried pre_mix.
  std::vector<float> hot(m * size_t(p.n), 0.f);
  for (size_t t = 0; t < m; ++t) hot[t * size_t(p.n)] = 1.f;
  pre_mix_in = DeviceBuffer<float>(hot.size());
  pre_mix_in.upload(hot.data(), hot.size());

  workspace = std::make_unique<SiteWorkspace>(p, options.max_tokens, max_prenorm_splits(p));
  // The programmatic fork needs every coefficient kernel to wait for its producer: the plan's pdl.
  schedule = std::make_unique<StackSchedule>(p.sites(), plan.pdl);
  if (!sublayer) {
    sublayer = [this](int s, int64_t tokens, const Bf16* in, Bf16* out, cudaStream_t st) {
      standin_sublayer(p, tokens, in, gains[size_t(s)].get(), out, {st, plan.pdl});
    };
  }
  std::vector<const DeviceSiteWeights*> site_weights;
  for (const auto& site : sites) site_weights.push_back(&site);
  SiteDoneFn trace_fn;
  if (options.trace_layers) {
    trace_fn = [this](int s, int64_t tokens, const Bf16* x_after, cudaStream_t st) {
      copy_trace(s, tokens, x_after, st);
    };
  }
  stack = std::make_unique<StackLaunches>(p, std::move(site_weights), stack_buffers(), *workspace,
                                          sublayer, std::move(trace_fn));
}

StackBuffers StackExecutor::Impl::stack_buffers() const {
  StackBuffers b;
  b.x_in = x_in.get();
  b.pre_mix_in = pre_mix_in.get();
  for (int i = 0; i < 2; ++i) {
    b.x[i] = x[i].get();
    b.pre[i] = pre[i].get();
    b.post[i] = post[i].get();
    b.comb[i] = comb[i].get();
  }
  b.layer_input = layer_input.get();
  b.sublayer_out = f.get();
  b.output = output.get();
  b.final_norm = has_final_norm ? final_norm.get() : nullptr;
  return b;
}

StackLayout StackExecutor::Impl::layout(int64_t tokens, bool overlap) const {
  if (overlap) return StackLayout::fused_post;
  const LaunchTuning tuning = plan.tuning(p, tokens);
  const bool input_fuses = tuning.fused_input;
  // Native, above the decode sizes (where the input path rides in the coefficient launch) and
  // where the plan fuses the boundary (sm90: n = 4, C >= 4096, from 768 tokens): the previous
  // post, the input path and the coefficients in one launch. Never at sizes where the overlap
  // may run (its launches are the unfused ones, whose coefficients differ in the last bits), so
  // that the two schedules agree bitwise wherever the policy could pick either.
  if (!input_fuses && tokens > plan.overlap_max_tokens && tuning.fused_boundary) {
    return StackLayout::fused_boundary;
  }
  if (!options.native_decode_schedule || !input_fuses) return StackLayout::fused_post;
  const bool fold = options.fold_previous_post && tuning.folded_post;
  return fold ? StackLayout::folded_decode : StackLayout::decode;
}

StackExecutor::Impl::LaunchList StackExecutor::Impl::launches(int64_t tokens, bool overlap) {
  // The side stream's coefficient launch on fewer SMs: its time hides behind the sublayer, whose
  // kernels want the SMs (the same bits, so the schedules still agree bitwise).
  LaunchOverrides side;
  side.side_stream = overlap;
  const LaunchTuning tuning = plan.tuning(p, tokens, side);
  LaunchList list;
  list.layout = layout(tokens, overlap);
  list.sites.reserve(size_t(p.sites()));
  for (int s = 0; s < p.sites(); ++s)
    list.sites.push_back(stack->site(list.layout, s, tokens, tuning));
  return list;
}

const StackExecutor::Impl::LaunchList& StackExecutor::Impl::cached_launches(int64_t tokens,
                                                                            bool overlap) {
  const auto key = std::make_pair(tokens, overlap);
  auto it = launch_cache.find(key);
  if (it == launch_cache.end()) it = launch_cache.emplace(key, launches(tokens, overlap)).first;
  return it->second;
}

DispatchDecision StackExecutor::Impl::decide(int64_t tokens, ExecMode mode) const {
  DispatchInputs in;
  in.capability = plan.capability;
  in.images = plan.built;
  in.loaded_image = plan.image;
  in.prenorm_gemm_available = plan.has_kernels();
  in.hidden = p.hidden;
  in.n = p.n;
  in.ubatching = options.ubatching;
  in.mode = mode;
  in.tokens = tokens;
  in.tp = options.tp;
  in.config = config;
  return mhc::decide(in);
}

// Everything decide() reads besides (tokens, mode) is fixed for the executor's life (options.tp
// included: a TP group does not change size under a running executor), so caching is exact.
const DispatchDecision& StackExecutor::Impl::cached_decision(int64_t tokens, ExecMode mode) {
  const auto key = std::make_pair(tokens, mode);
  auto it = decisions.find(key);
  if (it == decisions.end()) it = decisions.emplace(key, decide(tokens, mode)).first;
  return it->second;
}

void StackExecutor::Impl::enqueue(int64_t tokens, bool overlap, cudaStream_t stream,
                                  StageObserver* observer) {
  schedule->enqueue(stream, overlap, cached_launches(tokens, overlap).sites, observer);
}

StackExecutor::StackExecutor(const ModelWeights& weights, const KernelConfig& config,
                             const StackOptions& options, SublayerFn sublayer)
    : impl_(std::make_unique<Impl>(weights, config, options, std::move(sublayer))) {}

StackExecutor::~StackExecutor() = default;

DispatchDecision StackExecutor::decide(int64_t tokens, ExecMode mode) const {
  return impl_->decide(tokens, mode);
}

StackLayout StackExecutor::layout(int64_t tokens, bool overlap) const {
  return impl_->layout(tokens, overlap);
}

void StackExecutor::prepare_full_graph(int64_t tokens, cudaStream_t stream) {
  if (tokens < 1 || tokens > impl_->options.max_tokens) {
    throw Error(fmt::format("prepare_full_graph: tokens {} outside 1..{}", tokens,
                            impl_->options.max_tokens));
  }
  const bool overlap = impl_->cached_decision(tokens, ExecMode::full).overlap;
  auto key = std::make_pair(tokens, overlap);
  if (impl_->graphs.count(key)) return;
  impl_->graphs.emplace(key,
                        CapturedGraph(
                            stream, [&](cudaStream_t st) { impl_->enqueue(tokens, overlap, st); },
                            impl_->options.capture_mode));
}

void StackExecutor::prepare_launches(int64_t tokens, ExecMode mode) {
  if (tokens < 0 || tokens > impl_->options.max_tokens) {
    throw Error(fmt::format("prepare_launches: tokens {} outside 0..{}", tokens,
                            impl_->options.max_tokens));
  }
  const bool overlap = impl_->cached_decision(tokens, mode).overlap;
  if (tokens > 0) impl_->cached_launches(tokens, overlap);
}

ForwardInfo StackExecutor::forward(int64_t tokens, ExecMode mode, cudaStream_t stream) {
  if (tokens < 0 || tokens > impl_->options.max_tokens) {
    throw Error(fmt::format("forward: tokens {} outside 0..{} (the executor's max_tokens)", tokens,
                            impl_->options.max_tokens));
  }
  ForwardInfo info{impl_->cached_decision(tokens, mode)};
  if (tokens == 0) return info;
  info.overlapped = info.decision.overlap;
  if (mode == ExecMode::full) {
    auto it = impl_->graphs.find({tokens, info.overlapped});
    if (it == impl_->graphs.end()) {
      throw Error(
          fmt::format("forward: no FULL graph prepared for {} tokens; call "
                      "prepare_full_graph before serving",
                      tokens));
    }
    it->second.replay(stream);
    info.graph_replayed = true;
  } else {
    // Eager and piecewise both run the sublayer outside any graph the executor owns, so the
    // policy never picks the overlap for them.
    impl_->enqueue(tokens, info.overlapped, stream);
  }
  (info.overlapped ? impl_->overlapped_sites : impl_->native_sites) += impl_->p.sites();
  // The list exists: the enqueue above, or the capture of the replayed graph, made it.
  if (impl_->cached_launches(tokens, info.overlapped).layout == StackLayout::folded_decode) {
    impl_->folded_sites += impl_->p.sites();
  }
  return info;
}

Bf16* StackExecutor::x_in() const { return impl_->x_in.get(); }
float* StackExecutor::pre_mix_in() const { return impl_->pre_mix_in.get(); }

void StackExecutor::enqueue_schedule(int64_t tokens, bool overlap, cudaStream_t stream,
                                     StageObserver* observer) {
  if (tokens < 1 || tokens > impl_->options.max_tokens) {
    throw Error(fmt::format("enqueue_schedule: tokens {} outside 1..{}", tokens,
                            impl_->options.max_tokens));
  }
  impl_->enqueue(tokens, overlap, stream, observer);
}

void StackExecutor::poison_results(cudaStream_t stream) {
  Impl& m = *impl_;
  const auto poison = [&](auto& buffer) {
    if (buffer.size() == 0) return;
    MHC_CUDA_CHECK(
        cudaMemsetAsync(buffer.get(), 0xFF, buffer.size() * sizeof(*buffer.get()), stream));
  };
  for (DeviceBuffer<Bf16>* b : {&m.x[0], &m.x[1], &m.layer_input, &m.f, &m.output, &m.trace}) {
    poison(*b);
  }
  for (int i = 0; i < 2; ++i) {
    poison(m.pre[i]);
    poison(m.post[i]);
    poison(m.comb[i]);
  }
}

cudaStream_t StackExecutor::side_stream() const { return impl_->schedule->side_stream(); }
const Bf16* StackExecutor::output() const { return impl_->output.get(); }
const Bf16* StackExecutor::x_final() const { return impl_->x[impl_->p.sites() % 2].get(); }
const float* StackExecutor::last_pre() const {
  return impl_->pre[size_t(impl_->p.sites() - 1) % 2].get();
}
const Bf16* StackExecutor::layer_trace(int layer) const {
  if (!impl_->options.trace_layers)
    throw Error("layer_trace: the executor was built without trace_layers");
  return impl_->trace.get() +
         size_t(layer) * size_t(impl_->options.max_tokens) * size_t(impl_->p.k());
}
const Bf16* StackExecutor::layer_input() const { return impl_->layer_input.get(); }
const MhcParams& StackExecutor::params() const { return impl_->p; }
const KernelPlan& StackExecutor::plan() const { return impl_->plan; }
int64_t StackExecutor::overlapped_sites() const { return impl_->overlapped_sites; }
int64_t StackExecutor::native_sites() const { return impl_->native_sites; }
int64_t StackExecutor::folded_sites() const { return impl_->folded_sites; }

}  // namespace mhc::cuda
