// `mhc bench kernels`: CUDA-graph replays of each kernel family, of the whole site and of a
// stack's steady state, timed with CUDA events, input sets rotated past L2 (mhc/cuda/timing.hpp);
// achieved bandwidth against the bytes floor of the design doc ("Roofline") and against a
// device-to-device copy measured here.
#include "mhc/bench/kernels.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "mhc/bench/fp8_rows.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/head.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/timing.hpp"
#include "mhc/schedule/stack_launches.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::bench {
namespace {

using namespace mhc::cuda;

constexpr double kAnchorCopyBandwidth = 4.27e12;  // bytes/s, anchors/README.md (H200)

// Device-to-device copy bandwidth (bytes read + written per second), median of 20 copies of 1 GB.
double measure_copy_bandwidth(cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer<char> a(bytes), b(bytes);
  MHC_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, bytes, stream));
  cudaEvent_t start, stop;
  MHC_CUDA_CHECK(cudaEventCreate(&start));
  MHC_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  for (int i = 0; i < 23; ++i) {
    MHC_CUDA_CHECK(cudaEventRecord(start, stream));
    MHC_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    MHC_CUDA_CHECK(cudaEventRecord(stop, stream));
    MHC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 3) seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * double(bytes) / seconds[seconds.size() / 2];
}

struct Item {
  std::string name;
  double bytes;  // the floor's bytes for this item
  EnqueueFn enqueue;
  std::optional<LaunchTuning> tuning;  // the coefficient launch's, where the item has one
  int per_graph = 1;            // the graph holds this many instances; times are per instance
  BoundaryTile boundary{0, 0};  // the fused boundary's launch shape, where the item runs it
};

// The fused boundary at every size and shape its kernel takes, whatever the plan's rule, and not
// the 16-row decode fold: what a row named "fused boundary" times.
LaunchOverrides forcing_fused_boundary() {
  LaunchOverrides o;
  o.fused_boundary = true;
  o.fused_input = false;
  return o;
}

// One model site's weights (random; the kernels' speed does not depend on their values).
DeviceSiteWeights random_site_weights(const MhcParams& p) {
  DeviceSiteWeights w;
  w.hc_fn = DeviceBuffer<float>(size_t(p.nmix()) * p.k());
  w.hc_base = DeviceBuffer<float>(p.nmix());
  w.hc_scale = DeviceBuffer<float>(3);
  w.norm_weight = DeviceBuffer<float>(p.hidden);
  std::vector<float> host(w.hc_fn.size());
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = float((i * 2654435761u) % 2001) * 1e-5f - 0.01f;
  w.hc_fn.upload(host.data(), host.size());
  host.assign(size_t(p.hidden), 1.f);
  w.norm_weight.upload(host.data(), host.size());
  host.assign(size_t(p.nmix()), 0.1f);
  w.hc_base.upload(host.data(), host.size());
  const float scale[3] = {1.f, 1.f, 2.f};
  w.hc_scale.upload(scale, 3);
  return w;
}

// What every item of one token count shares.
struct Setup {
  const MhcParams& p;
  const DeviceSiteWeights& w;
  SiteWorkspace& ws;
  StackSchedule& schedule;        // kSitesPerGraph sites; made outside any capture: it creates a
  StackSchedule& model_schedule;  // stream and events; the model's sites (p.sites())
  const KernelPlan& plan;
  Projection proj;
  int64_t m;
  LaunchTuning chosen;  // the plan's, at the benchmark's projection
  double coef_bytes, site_bytes;
  // The plan's tuning for this size with `o` on top (the benchmark's projection kept).
  LaunchTuning tuning(LaunchOverrides o) const {
    o.projection = proj;
    return plan.tuning(p, m, o);
  }
};

// A stack's steady state as the executor launches it: `sites` middle sites of a longer stack
// (every site but the first and the last, which have an extra input path or the final norm), in
// `layout`, without a sublayer, through the executor's own launches and `schedule` (made for at
// least `sites` sites). The stack's buffers are one input set's: x/x_next, pre/pre_mix,
// post/post_alt and comb/comb_alt alternate by site. kSitesPerGraph is the default; the model's
// own site count (2 x layers) is timed beside it at decode sizes, where a graph launch's floor
// (~3 µs) divided by 8 is still ~0.4 µs of a ~6 µs site.
constexpr int kSitesPerGraph = 8;
constexpr int64_t kModelStackMaxTokens = 64;

EnqueueFn stack_steady_state(const Setup& c, StackLayout layout, const LaunchTuning& tuning,
                             int sites = kSitesPerGraph) {
  return [&c, layout, tuning, sites](DeviceSiteBuffers& b, cudaStream_t s) {
    StackBuffers sb;
    sb.x_in = b.x.get();
    sb.x[0] = b.x.get();
    sb.x[1] = b.x_next.get();
    sb.pre_mix_in = b.pre_mix.get();
    sb.pre[0] = b.pre.get();
    sb.pre[1] = b.pre_mix.get();
    sb.post[0] = b.post.get();
    sb.post[1] = b.post_alt.get();
    sb.comb[0] = b.comb.get();
    sb.comb[1] = b.comb_alt.get();
    sb.layer_input = b.layer_input.get();
    sb.sublayer_out = b.sublayer_out.get();
    sb.output = b.layer_input.get();  // only the last site writes it, and it is not launched
    const std::vector<const DeviceSiteWeights*> weights(size_t(sites) + 2, &c.w);
    const StackLaunches stack(c.p, weights, sb, c.ws, nullptr);
    std::vector<SiteLaunches> launches;
    for (int i = 1; i <= sites; ++i) launches.push_back(stack.site(layout, i, c.m, tuning));
    (sites == kSitesPerGraph ? c.schedule : c.model_schedule).enqueue(s, false, launches);
  };
}

// The boundary in one call with a previous post: prenorm_coefficients with `previous`, whose
// launch `tuning` decides (the fused boundary kernel where it forces it).
void add_boundary_item(const Setup& c, const char* name, const LaunchTuning& tuning,
                       std::vector<Item>& items) {
  const double md = double(c.m), K = double(c.p.k()), C = double(c.p.hidden);
  items.push_back(
      {name, c.coef_bytes + md * (2 * K + 4 * C),
       [&c, tuning](DeviceSiteBuffers& b, cudaStream_t s) {
         CoefficientBuffers out = b.coefficients(c.w);
         out.x = b.x_next.get();
         out.post = b.post_alt.get();
         out.comb = b.comb_alt.get();
         const InputPathBuffers input{b.pre_mix.get(), c.w.norm_weight.get(), b.layer_input.get()};
         const PreviousPost previous{b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                                     b.x_next.get()};
         prenorm_coefficients(c.p, c.m, out, tuning, c.ws, s, &input, &previous);
       },
       tuning, 1, boundary_launch_tile(c.p, c.m, tuning, c.ws)});
}

void add_site_items(const Setup& c, bool sweep, std::vector<Item>& items) {
  const MhcParams& p = c.p;
  const double md = double(c.m), K = double(p.k()), C = double(p.hidden);
  const LaunchTuning& chosen = c.chosen;
  items.push_back({"empty kernel (graph floor)",
                   0.0,
                   [](DeviceSiteBuffers&, cudaStream_t s) { enqueue_empty_kernel(s); },
                   {}});
  items.push_back({"input_path",
                   md * (2 * K + 2 * C),
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     input_path(c.p, c.m, b.x.get(), b.pre_mix.get(), c.w.norm_weight.get(),
                                b.layer_input.get(), {s, c.chosen.pdl});
                   },
                   {}});
  items.push_back({"coefficients (GEMM+stats)", c.coef_bytes,
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     prenorm_coefficients(c.p, c.m, b.coefficients(c.w), c.chosen, c.ws, s);
                   },
                   chosen});
  items.push_back(
      {"coef + input path (one launch)", c.coef_bytes + md * (2 * C),
       [&c](DeviceSiteBuffers& b, cudaStream_t s) {
         const InputPathBuffers input{b.pre_mix.get(), c.w.norm_weight.get(), b.layer_input.get()};
         prenorm_coefficients(c.p, c.m, b.coefficients(c.w), c.chosen, c.ws, s, &input);
       },
       chosen});
  if (sweep) {
    for (PrenormKernel kernel :
         {PrenormKernel::mma16, PrenormKernel::mma64, PrenormKernel::tma128}) {
      if (kernel == PrenormKernel::tma128 && !c.plan.tma128_available) continue;
      for (int splits : {1, 2, 4, 8, 16, 32, 66, 132, max_prenorm_splits(p)}) {
        if (splits > max_prenorm_splits(p)) continue;
        LaunchOverrides o;
        o.kernel = kernel;
        o.splits = splits;
        const LaunchTuning t = c.tuning(o);
        items.push_back({"  coefficients sweep", c.coef_bytes,
                         [&c, t](DeviceSiteBuffers& b, cudaStream_t s) {
                           prenorm_coefficients(c.p, c.m, b.coefficients(c.w), t, c.ws, s);
                         },
                         t});
      }
    }
  }
  items.push_back({"post",
                   md * (4 * K + 2 * C),
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     post(c.p, c.m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                          b.x_next.get(), nullptr, c.chosen, s);
                   },
                   {}});
  items.push_back({"post + next input path",
                   md * (4 * K + 4 * C),
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     const NextInput next{b.pre.get(), c.w.norm_weight.get(), b.layer_input.get()};
                     post(c.p, c.m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                          b.x_next.get(), &next, c.chosen, s);
                   },
                   {}});
  items.push_back({"site (input, coef, post)", c.site_bytes,
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     enqueue_site(c.p, c.m, c.w, b, c.chosen, c.ws, s);
                   },
                   chosen});
  // In a stack at larger sizes the input path of site s comes out of the post of site s-1:
  // per site, the coefficient path plus the fused post.
  items.push_back({"coef + post with next input", c.site_bytes,
                   [&c](DeviceSiteBuffers& b, cudaStream_t s) {
                     prenorm_coefficients(c.p, c.m, b.coefficients(c.w), c.chosen, c.ws, s);
                     const NextInput next{b.pre.get(), c.w.norm_weight.get(), b.layer_input.get()};
                     post(c.p, c.m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                          b.x_next.get(), &next, c.chosen, s);
                   },
                   chosen});
  // The same boundary in one launch (sm90_boundary.cuh) at every size, whatever the plan's rule:
  // the previous post (x -> x_next), the next input path and the coefficients of x_next. Only
  // where the forced tuning does take the kernel: a row named "fused boundary" must never time
  // the two launches it replaces.
  const LaunchOverrides fused = forcing_fused_boundary();
  if (c.tuning(fused).fused_boundary) {
    add_boundary_item(c, "fused boundary (one launch)", c.tuning(fused), items);
    if (sweep) {
      // 32-column stages (4 in the ring at n = 4 instead of 2): in the sweep only until they
      // have run on a GPU.
      LaunchOverrides narrow = fused;
      narrow.boundary.stage_columns = 32;
      add_boundary_item(c, "fused boundary, 32-column stages", c.tuning(narrow), items);
      LaunchOverrides half = fused;  // 64-token tiles
      half.boundary.rows = 64;
      std::vector<LaunchOverrides> shapes = {fused, narrow, half};
      if (c.p.hidden % 128 == 0) {
        LaunchOverrides wide = fused;  // 32-token tiles of 128-column stages
        wide.boundary.stage_columns = 128;
        shapes.push_back(wide);
      }
      for (const LaunchOverrides& shape : shapes) {
        for (int splits : {1, 2, 3, 4, 5, 6, 7, 8}) {
          LaunchOverrides t = shape;
          t.boundary.splits = splits;
          add_boundary_item(c, "  fused boundary sweep", c.tuning(t), items);
        }
      }
    }
  }
}

// The head collapse (docs/head.md) after the last site, alone (as the engines call it) and with
// the final RMSNorm fused (one launch gives the LM head's input). The site weights' first n rows
// of hc_fn, hc_base and hc_scale stand for the head's (its speed does not depend on their values).
// Bytes floor per token: x read once (2nC) and out written once (2C); hc_fn (4nK), the base, the
// scale and the norm weight (4C) once per launch.
void add_head_items(const Setup& c, std::vector<Item>& items) {
  const MhcParams& p = c.p;
  if (p.n != 4 || p.hidden % 64 != 0 || p.hidden > head_max_hidden(p.n)) return;
  const double md = double(c.m), K = double(p.k()), C = double(p.hidden);
  const double weights = 4.0 * p.n * K + 4.0 * (p.n + 1);
  // The plan's form under the rows' plain names (head_form_for: the cluster form on sm_90 images,
  // else the CTA forms' crossover); the two CTA forms forced, with the norm, in rows of their own
  // (where the cluster form is planned, its comparison; elsewhere they place the crossover).
  const std::pair<HeadForm, std::string> forms[] = {
      {HeadForm::kPlan, ""},
      {HeadForm::kTokenPerCta, " (1 token/CTA)"},
      {HeadForm::kTokensPerCta, " (" + std::to_string(kHeadTokensPerCta) + " tokens/CTA)"},
  };
  for (const auto& [form, suffix] : forms) {
    for (bool norm : {false, true}) {
      if (!norm && form != HeadForm::kPlan) continue;
      items.push_back({std::string(norm ? "head collapse + final norm" : "head collapse") + suffix,
                       md * (2 * K + 2 * C) + weights + (norm ? 4 * C : 0),
                       [&c, norm, form = form](DeviceSiteBuffers& b, cudaStream_t s) {
                         HeadBuffers hb;
                         hb.x = b.x.get();
                         hb.hc_fn = c.w.hc_fn.get();
                         hb.hc_base = c.w.hc_base.get();
                         hb.hc_scale = c.w.hc_scale.get();
                         hb.norm_weight = norm ? c.w.norm_weight.get() : nullptr;
                         hb.out = b.layer_input.get();
                         head(c.p, c.m, hb, LaunchTarget(s, false), form);
                       },
                       {}});
    }
  }
}

// The stack's steady state: in a stack at larger sizes the input path of site s comes out of the
// post of site s-1 (fused_post); at decode sizes it rides in the coefficient launch (decode); and
// with the fold each site's post rides in the next site's coefficient launch (folded_decode). A
// real model captures all its sites in one graph, so the per-graph launch floor is paid once per
// forward, not per site: kSitesPerGraph sites per graph, times per site.
void add_stack_items(const Setup& c, bool sweep, std::vector<Item>& items) {
  const bool decode = c.chosen.fused_input;
  items.push_back(
      {"site in stack, 8 per graph (each)", c.site_bytes,
       stack_steady_state(c, decode ? StackLayout::decode : StackLayout::fused_post, c.chosen),
       c.chosen, kSitesPerGraph});
  if (decode) {
    items.push_back({"site in stack, post folded (each)", c.site_bytes,
                     stack_steady_state(c, StackLayout::folded_decode, c.chosen), c.chosen,
                     kSitesPerGraph});
  }
  if (c.m <= kModelStackMaxTokens) {
    const int sites = c.p.sites();
    items.push_back({"site in stack, model's sites per graph (each)", c.site_bytes,
                     stack_steady_state(c, decode ? StackLayout::decode : StackLayout::fused_post,
                                        c.chosen, sites),
                     c.chosen, sites});
  }
  // The fused boundary layout (one launch per site besides the sublayer) at every size the image
  // has it, whatever the plan's rule; bytes as the fused launch's floor.
  const LaunchOverrides forced = forcing_fused_boundary();
  const LaunchTuning fused = c.tuning(forced);
  if (fused.fused_boundary) {
    const double md = double(c.m), K = double(c.p.k()), C = double(c.p.hidden);
    const double bytes = c.coef_bytes + md * (2 * K + 4 * C);
    items.push_back({"site in stack, fused boundary (each)", bytes,
                     stack_steady_state(c, StackLayout::fused_boundary, fused), fused,
                     kSitesPerGraph, boundary_launch_tile(c.p, c.m, fused, c.ws)});
    // Each tile shape forced (its split rule), against the rule's choice above: where the plan
    // fuses the boundary, and in the sweep.
    const bool plan_fuses = c.chosen.fused_boundary;
    for (int rows : {128, 64, 32}) {
      if (!sweep && !plan_fuses) break;
      LaunchOverrides o = forced;
      o.boundary.rows = rows;
      // 32-row tiles: the wide stages (128 columns, each row's 256 bytes in one piece).
      if (rows == 32 && c.p.hidden % 128 != 0) continue;
      if (rows == 32) o.boundary.stage_columns = 128;
      const LaunchTuning t = c.tuning(o);
      items.push_back({rows == 128  ? "site in stack, fused boundary, 128-row tiles"
                       : rows == 64 ? "site in stack, fused boundary, 64-row tiles"
                                    : "site in stack, fused boundary, wide stages",
                       bytes, stack_steady_state(c, StackLayout::fused_boundary, t), t,
                       kSitesPerGraph, boundary_launch_tile(c.p, c.m, t, c.ws)});
    }
  }
}

struct Device {
  cudaDeviceProp prop{};
  int driver = 0, runtime = 0, sm_clock_khz = 0, mem_clock_khz = 0;
};

Device query_device() {
  Device d;
  int device = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  MHC_CUDA_CHECK(cudaGetDeviceProperties(&d.prop, device));
  MHC_CUDA_CHECK(cudaDriverGetVersion(&d.driver));
  MHC_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime));
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, device));
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  return d;
}

nlohmann::json time_item(const Item& item, const MhcParams& p, int64_t m, const Device& d, int reps,
                         double copy_bw, cudaStream_t stream, const Progress& progress) {
  TimedResult r = time_rotated_graphs(p, m, d.prop.l2CacheSize, reps, stream, item.enqueue);
  r.median_us /= item.per_graph;
  r.min_us /= item.per_graph;
  const double gbps = item.bytes / (r.median_us * 1e-6) / 1e9;  // 0 for the empty kernel
  const double floor_us = item.bytes / kAnchorCopyBandwidth * 1e6;
  std::string tuning = item.tuning ? item.tuning->describe() : "";
  if (item.boundary.splits > 0) {
    tuning = fmt::format("boundary {}x{} ", item.boundary.rows, item.boundary.splits) + tuning;
  }
  // Items without a coefficient launch report 0 splits (the JSON's readers expect the keys).
  LaunchTuning t = item.tuning.value_or(LaunchTuning{});
  if (!item.tuning) t.splits = 0;
  progress.clear();
  fmt::print("{:<34} {:>6} {:>10.2f} {:>9.0f} {:>10.2f} {:>7.0f}%  {}\n", item.name, m, r.median_us,
             gbps, floor_us, 100.0 * gbps * 1e9 / copy_bw, tuning);
  return {{"kernel", item.name},
          {"tokens", m},
          {"median_us", r.median_us},
          {"min_us", r.min_us},
          {"bytes", item.bytes},
          {"gb_per_s", gbps},
          {"floor_us_at_4.27TBps", floor_us},
          {"fraction_of_4.27TBps", floor_us / r.median_us},
          {"fraction_of_measured_copy", gbps * 1e9 / copy_bw},
          {"splits", t.splits},
          {"boundary_splits", t.boundary.splits},
          {"boundary_stage_columns", t.boundary.stage_columns},
          {"boundary_rows", t.boundary.rows},
          {"boundary_tile_rows", item.boundary.rows},
          {"boundary_tile_splits", item.boundary.splits},
          {"rows_per_tile", item.tuning ? t.rows_per_tile() : 0},
          {"input_sets", r.sets},
          {"instances_per_graph", item.per_graph},
          {"reps", r.reps}};
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json report(const KernelBenchOptions& o, const Device& d, double copy_bw,
                      nlohmann::json results) {
  return {
      {"tool", "mhc bench kernels"},
      {"date", now_utc()},
      {"commit", o.commit},
      {"gpu", d.prop.name},
      {"compute_capability", fmt::format("{}.{}", d.prop.major, d.prop.minor)},
      {"sm_count", d.prop.multiProcessorCount},
      {"l2_bytes", d.prop.l2CacheSize},
      {"driver_version", d.driver},
      {"runtime_version", d.runtime},
      {"sm_clock_khz_peak", d.sm_clock_khz},
      {"memory_clock_khz_peak", d.mem_clock_khz},
      {"measured_copy_bytes_per_s", copy_bw},
      {"preset", o.preset_name},
      {"params", describe(o.params)},
      {"projection", std::string(to_string(o.projection))},
      {"batch_invariant", o.config.batch_invariant},
      {"cluster_post",
       o.config.cluster_post ? nlohmann::json(*o.config.cluster_post) : nlohmann::json("plan")},
      {"flagged_partials", o.config.flagged_partials ? nlohmann::json(*o.config.flagged_partials)
                                                     : nlohmann::json("plan")},
      {"post_columns",
       o.config.post_columns ? nlohmann::json(*o.config.post_columns) : nlohmann::json("plan")},
      {"kernel_config", nlohmann::json::parse(o.config.to_json())},
      {"method",
       "each item captured in a CUDA graph per input set, input sets rotated past L2, CUDA "
       "events between consecutive replays, warm-up, median; stack items run the executor's "
       "launches (mhc/schedule/stack_launches.hpp) for 8 middle sites of a stack"},
      {"bytes_floor",
       "per token: site 6K+4C bytes + hc_fn once; GEMM 2K + hc_fn; head 2K+2C + its hc_fn "
       "[n, K] and norm weight once; see docs"},
      {"results", std::move(results)}};
}

void check_options(const KernelBenchOptions& o) {
  validate(o.params);
  if (o.tokens.empty()) throw Error("mhc bench kernels: no token counts given");
  for (int64_t m : o.tokens) {
    if (m <= 0) throw Error(fmt::format("--tokens: {} is not a positive token count", m));
  }
  if (o.reps < 5) throw Error("--reps must be at least 5");
  if (o.only.size() > 64) throw Error("--only: at most 64 characters");
  if (!device_present()) throw Error("mhc bench kernels needs a CUDA GPU; none is visible");
}

}  // namespace

nlohmann::json bench_kernels(const KernelBenchOptions& o) {
  check_options(o);
  const MhcParams& p = o.params;
  const KernelPlan plan = device_plan(o.config);
  fmt::print("mhc bench kernels: {} ({}), projection {}{}, commit {}\n", o.preset_name, describe(p),
             to_string(o.projection), plan.overrides.empty() ? "" : ", " + plan.overrides_text(),
             o.commit.empty() ? "unknown" : o.commit);
  const Device d = query_device();
  cudaStream_t stream;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_bw = measure_copy_bandwidth(stream);
  const int64_t max_tokens = *std::max_element(o.tokens.begin(), o.tokens.end());
  SiteWorkspace ws(p, std::max<int64_t>(max_tokens, 16), max_prenorm_splits(p));
  const DeviceSiteWeights w = random_site_weights(p);
  StackSchedule schedule(kSitesPerGraph);
  StackSchedule model_schedule(std::max(kSitesPerGraph, p.sites()));
  const double K = double(p.k()), C = double(p.hidden), weight_bytes = p.nmix() * K * 4;
  LaunchOverrides benchmark_projection;
  benchmark_projection.projection = o.projection;

  nlohmann::json results = nlohmann::json::array();
  fmt::print("{:<34} {:>6} {:>10} {:>9} {:>10} {:>8}  tuning\n", "kernel", "M", "us", "GB/s",
             "floor us", "of copy");
  for (size_t mi = 0; mi < o.tokens.size(); ++mi) {
    const int64_t m = o.tokens[mi];
    const double md = double(m);
    const Setup c{p,
                  w,
                  ws,
                  schedule,
                  model_schedule,
                  plan,
                  o.projection,
                  m,
                  plan.tuning(p, m, benchmark_projection),
                  md * 2 * K + weight_bytes + md * (2 * p.n + p.n * p.n) * 4,
                  md * (6 * K + 4 * C) + weight_bytes};
    std::vector<Item> items;
    add_site_items(c, o.sweep_tuning, items);
    for (Fp8Row& r : fp8_rows(p, m, w, ws, c.chosen, c.coef_bytes)) {  // docs/fp8.md
      items.push_back(
          {r.name, r.bytes, r.enqueue,
           r.coefficient_launch ? std::optional<LaunchTuning>(c.chosen) : std::nullopt});
    }
    add_head_items(c, items);
    add_stack_items(c, o.sweep_tuning, items);
    if (!o.only.empty()) {
      std::erase_if(items, [&o](const Item& item) {
        const bool floor = item.name.rfind("empty kernel", 0) == 0;
        return !floor && item.name.find(o.only) == std::string::npos;
      });
    }
    for (size_t i = 0; i < items.size(); ++i) {
      results.push_back(time_item(items[i], p, m, d, o.reps, copy_bw, stream, o.progress));
      // Each size an equal share of the run, each of its items an equal share of that.
      const double sizes_done = double(mi) + double(i + 1) / double(items.size());
      o.progress.report(sizes_done / double(o.tokens.size()), fmt::format("M={}", m));
    }
  }
  cudaStreamDestroy(stream);
  o.progress.clear();
  fmt::print("copy bandwidth measured here: {:.2f} TB/s (anchor: 4.27 TB/s)\n", copy_bw / 1e12);
  return report(o, d, copy_bw, std::move(results));
}

}  // namespace mhc::bench
