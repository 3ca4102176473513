// `mhc bench kernels`: CUDA-graph replays of each kernel family and of the whole site, timed with
// CUDA events, input sets rotated past L2 (timing.hpp); achieved bandwidth against the bytes
// floor of the design doc ("Roofline") and against a device-to-device copy measured here.
#include "mhc/cuda/bench.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/kernels.hpp"
#include "timing.hpp"

namespace mhc::cuda {
namespace {

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
  PrenormTuning tuning;
  int per_graph = 1;  // the graph holds this many instances; times are per instance
};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

std::string bench_kernels(const KernelBenchOptions& o) {
  const MhcParams& p = o.params;
  validate(p);
  int device = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  MHC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, sm_clock_khz = 0, mem_clock_khz = 0;
  MHC_CUDA_CHECK(cudaDriverGetVersion(&driver));
  MHC_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device));
  MHC_CUDA_CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  cudaStream_t stream;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const double copy_bw = measure_copy_bandwidth(stream);
  const int64_t max_tokens = *std::max_element(o.tokens.begin(), o.tokens.end());
  SiteWorkspace ws(p, std::max<int64_t>(max_tokens, 16), max_prenorm_splits(p));
  // One model site's weights (random; the kernels' speed does not depend on their values).
  DeviceSiteWeights w;
  w.hc_fn = DeviceBuffer<float>(size_t(p.nmix()) * p.k());
  w.hc_base = DeviceBuffer<float>(p.nmix());
  w.hc_scale = DeviceBuffer<float>(3);
  w.norm_weight = DeviceBuffer<float>(p.hidden);
  {
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
  }
  const double K = double(p.k()), C = double(p.hidden), weight_bytes = p.nmix() * K * 4;
  const Projection proj = o.projection;

  nlohmann::json results = nlohmann::json::array();
  fmt::print("{:<34} {:>6} {:>10} {:>9} {:>10} {:>8}  tuning\n", "kernel", "M", "us", "GB/s",
             "floor us", "of copy");
  for (int64_t m : o.tokens) {
    const double md = double(m);
    const PrenormTuning chosen = choose_prenorm_tuning(default_device_plan(), p, m);
    std::vector<Item> items;
    items.push_back({"empty kernel (graph floor)",
                     0.0,
                     [](DeviceSiteBuffers&, cudaStream_t s) { enqueue_empty_kernel(s); },
                     {}});
    const double coef_bytes = md * 2 * K + weight_bytes + md * (2 * p.n + p.n * p.n) * 4;
    items.push_back({"input_path",
                     md * (2 * K + 2 * C),
                     [&, m](DeviceSiteBuffers& b, cudaStream_t s) {
                       input_path(p, m, b.x.get(), b.pre_mix.get(), w.norm_weight.get(),
                                  b.layer_input.get(), s);
                     },
                     {}});
    items.push_back({"coefficients (GEMM+stats)", coef_bytes,
                     [&, m, chosen](DeviceSiteBuffers& b, cudaStream_t s) {
                       prenorm_coefficients(p, m, b.coefficients(w), proj, chosen, ws, s);
                     },
                     chosen});
    items.push_back(
        {"coef + input path (one launch)", coef_bytes + md * (2 * C),
         [&, m, chosen](DeviceSiteBuffers& b, cudaStream_t s) {
           const InputPathBuffers input{b.pre_mix.get(), w.norm_weight.get(), b.layer_input.get()};
           prenorm_coefficients(p, m, b.coefficients(w), proj, chosen, ws, s, &input);
         },
         chosen});
    if (o.sweep_tuning) {
      for (int rows : {16, 64, 128}) {
        if (rows == 128 && !tma_prenorm_available()) continue;
        for (int splits : {1, 2, 4, 8, 16, 32, 66, 132, max_prenorm_splits(p)}) {
          if (splits > max_prenorm_splits(p)) continue;
          const PrenormTuning t{splits, rows, -1};
          items.push_back({"  coefficients sweep", coef_bytes,
                           [&, m, t](DeviceSiteBuffers& b, cudaStream_t s) {
                             prenorm_coefficients(p, m, b.coefficients(w), proj, t, ws, s);
                           },
                           t});
        }
      }
    }
    items.push_back({"post",
                     md * (4 * K + 2 * C),
                     [&, m](DeviceSiteBuffers& b, cudaStream_t s) {
                       post(p, m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                            b.x_next.get(), nullptr, s);
                     },
                     {}});
    items.push_back({"post + next input path",
                     md * (4 * K + 4 * C),
                     [&, m](DeviceSiteBuffers& b, cudaStream_t s) {
                       NextInput next{b.pre.get(), w.norm_weight.get(), b.layer_input.get()};
                       post(p, m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                            b.x_next.get(), &next, s);
                     },
                     {}});
    const double site_bytes = md * (6 * K + 4 * C) + weight_bytes;
    items.push_back({"site (input, coef, post)", site_bytes,
                     [&, m, chosen](DeviceSiteBuffers& b, cudaStream_t s) {
                       enqueue_site(p, m, w, b, proj, chosen, ws, s);
                     },
                     chosen});
    // In a stack at larger sizes the input path of site s comes out of the post of site s-1:
    // per site, the coefficient path plus the fused post.
    items.push_back({"coef + post with next input", site_bytes,
                     [&, m, chosen](DeviceSiteBuffers& b, cudaStream_t s) {
                       prenorm_coefficients(p, m, b.coefficients(w), proj, chosen, ws, s);
                       NextInput next{b.pre.get(), w.norm_weight.get(), b.layer_input.get()};
                       post(p, m, b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                            b.x_next.get(), &next, s);
                     },
                     chosen});
    // A real model captures all its sites in one graph, so the per-graph launch floor is paid
    // once per forward, not per site: eight stack sites (x and x_next, pre and pre_mix
    // alternating) per graph, on the stack's schedule for this size (as run_stack).
    constexpr int kSitesPerGraph = 8;
    const bool decode_schedule = input_path_fuses(p, m, chosen);
    items.push_back(
        {"site in stack, 8 per graph (each)", site_bytes,
         [&, m, chosen, decode_schedule](DeviceSiteBuffers& b, cudaStream_t s) {
           for (int i = 0; i < kSitesPerGraph; ++i) {
             const bool even = i % 2 == 0;
             Bf16* in = even ? b.x.get() : b.x_next.get();
             Bf16* out = even ? b.x_next.get() : b.x.get();
             float* pre = even ? b.pre.get() : b.pre_mix.get();
             float* pre_mix = even ? b.pre_mix.get() : b.pre.get();
             CoefficientBuffers c = b.coefficients(w);
             c.x = in;
             c.pre = pre;
             if (decode_schedule) {
               const InputPathBuffers input{pre_mix, w.norm_weight.get(), b.layer_input.get()};
               prenorm_coefficients(p, m, c, proj, chosen, ws, s, &input);
               post(p, m, in, b.post.get(), b.comb.get(), b.sublayer_out.get(), out, nullptr, s);
             } else {
               prenorm_coefficients(p, m, c, proj, chosen, ws, s);
               NextInput next{pre, w.norm_weight.get(), b.layer_input.get()};
               post(p, m, in, b.post.get(), b.comb.get(), b.sublayer_out.get(), out, &next, s);
             }
           }
         },
         chosen, kSitesPerGraph});
    // The decode schedule with each site's post folded into the next site's coefficient launch
    // (PreviousPost): one launch per site. post/comb alternate between two buffers, since a
    // launch reads the previous site's while writing its own.
    if (decode_schedule) {
      items.push_back({"site in stack, post folded (each)", site_bytes,
                       [&, m, chosen](DeviceSiteBuffers& b, cudaStream_t s) {
                         for (int i = 0; i < kSitesPerGraph; ++i) {
                           const bool even = i % 2 == 0;
                           Bf16* prev_x = even ? b.x.get() : b.x_next.get();
                           Bf16* this_x = even ? b.x_next.get() : b.x.get();
                           CoefficientBuffers c = b.coefficients(w);
                           c.x = this_x;
                           c.pre = even ? b.pre.get() : b.pre_mix.get();
                           c.post = even ? b.post.get() : b.post_alt.get();
                           c.comb = even ? b.comb.get() : b.comb_alt.get();
                           const InputPathBuffers input{even ? b.pre_mix.get() : b.pre.get(),
                                                        w.norm_weight.get(), b.layer_input.get()};
                           const PreviousPost previous{prev_x,
                                                       even ? b.post_alt.get() : b.post.get(),
                                                       even ? b.comb_alt.get() : b.comb.get(),
                                                       b.sublayer_out.get(), this_x};
                           prenorm_coefficients(p, m, c, proj, chosen, ws, s, &input, &previous);
                         }
                       },
                       chosen, kSitesPerGraph});
    }
    for (const Item& item : items) {
      TimedResult r = time_rotated_graphs(p, m, prop.l2CacheSize, o.reps, stream, item.enqueue);
      r.median_us /= item.per_graph;
      r.min_us /= item.per_graph;
      const double gbps = item.bytes / (r.median_us * 1e-6) / 1e9;  // 0 for the empty kernel
      const double floor_us = item.bytes / kAnchorCopyBandwidth * 1e6;
      const std::string tuning = item.tuning.splits ? item.tuning.describe() : "";
      fmt::print("{:<34} {:>6} {:>10.2f} {:>9.0f} {:>10.2f} {:>7.0f}%  {}\n", item.name, m,
                 r.median_us, gbps, floor_us, 100.0 * gbps * 1e9 / copy_bw, tuning);
      results.push_back({{"kernel", item.name},
                         {"tokens", m},
                         {"median_us", r.median_us},
                         {"min_us", r.min_us},
                         {"bytes", item.bytes},
                         {"gb_per_s", gbps},
                         {"floor_us_at_4.27TBps", floor_us},
                         {"fraction_of_4.27TBps", floor_us / r.median_us},
                         {"fraction_of_measured_copy", gbps * 1e9 / copy_bw},
                         {"splits", item.tuning.splits},
                         {"rows_per_tile", item.tuning.rows_per_tile},
                         {"input_sets", r.sets},
                         {"instances_per_graph", item.per_graph},
                         {"reps", r.reps}});
    }
  }
  cudaStreamDestroy(stream);

  nlohmann::json report = {
      {"tool", "mhc bench kernels"},
      {"date", now_utc()},
      {"commit", o.commit},
      {"gpu", prop.name},
      {"compute_capability", fmt::format("{}.{}", prop.major, prop.minor)},
      {"sm_count", prop.multiProcessorCount},
      {"l2_bytes", prop.l2CacheSize},
      {"driver_version", driver},
      {"runtime_version", runtime},
      {"sm_clock_khz_peak", sm_clock_khz},
      {"memory_clock_khz_peak", mem_clock_khz},
      {"measured_copy_bytes_per_s", copy_bw},
      {"preset", o.preset_name},
      {"params", describe(p)},
      {"projection", std::string(to_string(o.projection))},
      {"method",
       "each item captured in a CUDA graph per input set, input sets rotated past L2, CUDA events "
       "between consecutive replays, warm-up, median"},
      {"bytes_floor", "per token: site 6K+4C bytes + hc_fn once; GEMM 2K + hc_fn; see docs"},
      {"results", results}};
  fmt::print("copy bandwidth measured here: {:.2f} TB/s (anchor: 4.27 TB/s)\n", copy_bw / 1e12);
  const std::string text = report.dump(2);
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    if (!f) throw Error("cannot write " + o.json_path);
    f << text << "\n";
  }
  return text;
}

}  // namespace mhc::cuda
