// Developer micro-benchmark (not a test; built by CMake as mhc_head_cluster_microbench with
// -DMHC_LAB=ON): a prototype of the head collapse + final RMSNorm (docs/head.md) cut by columns
// across a thread-block cluster, against issue 60's targets (1-16 tokens: one launch, <= 5 us in a
// graph; 4096 / 8192 tokens: within 85% of the bytes floor), timed beside the product kernel
// (mhc::cuda::head) the same way.
//
//
//
// The harness: random inputs (fixed seeds); a float64 host reference of the formula (y rounded to
// bf16 before the norm, as the model stores it); outputs poisoned with NaN bits before each
// checked run (NaN never passes); the product's tolerances (mhc/cpu/compare.hpp kFp32Tolerances:
// weights 5e-5, outputs 8e-3, as rel_norm and max |err| / max |ref|); batch invariance (a token's
// bits alone == in batches of 7, 16, 1031 and 4096 at every T, windows placing it anywhere in its
// group); timing as `mhc bench kernels` does (mhc/cuda/timing.hpp: one CUDA graph per input set,
// sets rotated past L2, CUDA events between replays, median); the bytes floor per token 2nC read +
// 2C written, plus hc_fn, hc_base, hc_scale and the norm weight once, at the D2D copy bandwidth
// measured in the same run.
//
// Run on an sm_90 GPU: mhc_head_cluster_microbench [--hidden a,b] [--tokens a,b] [--reps N]
//                      [--check-only]
//
// The kernel and its variants: head_cluster.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "head_cluster.cuh"
#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/head.hpp"
#include "mhc/cuda/timing.hpp"
#include "micro_timing.hpp"

namespace {

using namespace mhc::cuda;
using namespace mhc::lab;

// ---- inputs and the float64 reference -------------------------------------------------------

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double uniform(uint64_t& s, double lo, double hi) {
  return lo + (hi - lo) * double(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct Host {
  int hidden = 0;
  int64_t tokens = 0;
  std::vector<uint16_t> x;  // [M, n, C] bf16 bits
  std::vector<float> hc_fn, hc_base, hc_scale, norm_weight;
  // The reference: weights [M, n], y [M, C] (bf16 values), out [M, C] (unrounded).
  std::vector<float> ref_w, ref_y, ref_out;
};

Host make_host(int hidden, int64_t tokens, uint64_t seed) {
  Host h;
  h.hidden = hidden;
  h.tokens = tokens;
  const int64_t k = int64_t(kN) * hidden;
  uint64_t s = seed;
  h.x.resize(size_t(tokens * k));
  for (auto& v : h.x) v = mhc::float_to_bf16(float(uniform(s, -1.0, 1.0))).bits;
  // Projections of order 1, as a trained head's (tests/cpu/head_test_util.hpp scales the same).
  const double a = std::sqrt(3.0 / double(k));
  h.hc_fn.resize(size_t(kN * k));
  for (auto& v : h.hc_fn) v = float(uniform(s, -a, a));
  h.hc_base.resize(kN);
  for (auto& v : h.hc_base) v = float(uniform(s, -1.0, 1.0));
  h.hc_scale = {float(uniform(s, 0.5, 1.5))};
  h.norm_weight.resize(size_t(hidden));
  for (auto& v : h.norm_weight) v = float(uniform(s, 0.5, 1.5));
  return h;
}

float bf16_value(uint16_t bits) { return mhc::bf16_to_float(mhc::Bf16{bits}); }

void reference(Host& h, const mhc::MhcParams& p) {
  const int C = h.hidden;
  const int64_t k = int64_t(kN) * C;
  h.ref_w.assign(size_t(h.tokens * kN), 0.f);
  h.ref_y.assign(size_t(h.tokens * C), 0.f);
  h.ref_out.assign(size_t(h.tokens * C), 0.f);
  std::vector<double> v(static_cast<size_t>(k)), y(static_cast<size_t>(C));
  for (int64_t m = 0; m < h.tokens; ++m) {
    double sq = 0;
    for (int64_t i = 0; i < k; ++i) {
      v[size_t(i)] = bf16_value(h.x[size_t(m * k + i)]);
      sq += v[size_t(i)] * v[size_t(i)];
    }
    const double r = 1.0 / std::sqrt(sq / double(k) + p.rms_eps());
    double w[kN];
    for (int j = 0; j < kN; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < k; ++i) dot += double(h.hc_fn[size_t(j * k + i)]) * v[size_t(i)];
      const double z = dot * r * h.hc_scale[0] + h.hc_base[size_t(j)];
      w[j] = 1.0 / (1.0 + std::exp(-z)) + p.pre_eps();
      h.ref_w[size_t(m * kN + j)] = float(w[j]);
    }
    double ysq = 0;
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < kN; ++j) acc += w[j] * v[size_t(j * C + c)];
      y[size_t(c)] = mhc::round_to_bf16(acc);  // stored as bf16 before the norm, as the model does
      ysq += y[size_t(c)] * y[size_t(c)];
      h.ref_y[size_t(m * C + c)] = float(y[size_t(c)]);
    }
    const double scale = 1.0 / std::sqrt(ysq / double(C) + p.norm_eps());
    for (int c = 0; c < C; ++c) {
      h.ref_out[size_t(m * C + c)] = float(y[size_t(c)] * scale * h.norm_weight[size_t(c)]);
    }
  }
}

// compare.hpp's statistics: rel_norm = ||got - ref|| / ||ref||, max_abs_rel = max |got - ref| /
// max |ref|, and the non-finite outputs (a NaN never passes).
struct ErrStats {
  double rel_norm = 0, max_abs_rel = 0;
  int64_t nonfinite = 0;
  bool passes(double tol) const { return nonfinite == 0 && rel_norm <= tol && max_abs_rel <= tol; }
};
template <class Got>
ErrStats compare(const Got& got, const float* ref, int64_t count) {
  double d2 = 0, r2 = 0, dmax = 0, rmax = 0;
  ErrStats e;
  for (int64_t i = 0; i < count; ++i) {
    const double g = got(i), r = ref[i];
    if (!std::isfinite(g)) {
      ++e.nonfinite;
      continue;
    }
    d2 += (g - r) * (g - r);
    r2 += r * r;
    dmax = std::max(dmax, std::fabs(g - r));
    rmax = std::max(rmax, std::fabs(r));
  }
  e.rel_norm = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
  e.max_abs_rel = rmax > 0 ? dmax / rmax : dmax;
  return e;
}

// ---- device state -----------------------------------------------------------------------------

template <class T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
  return p;
}

struct Device {
  uint16_t* x = nullptr;
  float *hc_fn = nullptr, *hc_base = nullptr, *hc_scale = nullptr, *norm_weight = nullptr;
  uint16_t* out = nullptr;
  float* weights = nullptr;
  int64_t tokens = 0;
  int hidden = 0;

  explicit Device(const Host& h) : tokens(h.tokens), hidden(h.hidden) {
    const auto up = [](auto* dst, const auto& src) {
      MHC_MICRO_CHECK(
          cudaMemcpy(dst, src.data(), src.size() * sizeof(src[0]), cudaMemcpyHostToDevice));
    };
    x = device_alloc<uint16_t>(h.x.size());
    hc_fn = device_alloc<float>(h.hc_fn.size());
    hc_base = device_alloc<float>(kN);
    hc_scale = device_alloc<float>(1);
    norm_weight = device_alloc<float>(size_t(h.hidden));
    out = device_alloc<uint16_t>(size_t(h.tokens * h.hidden));
    weights = device_alloc<float>(size_t(h.tokens * kN));
    up(x, h.x);
    up(hc_fn, h.hc_fn);
    up(hc_base, h.hc_base);
    up(hc_scale, h.hc_scale);
    up(norm_weight, h.norm_weight);
  }
  ~Device() {
    for (void* p : {static_cast<void*>(x), static_cast<void*>(hc_fn), static_cast<void*>(hc_base),
                    static_cast<void*>(hc_scale), static_cast<void*>(norm_weight),
                    static_cast<void*>(out), static_cast<void*>(weights)}) {
      cudaFree(p);
    }
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  Args args(const uint16_t* x_at, int64_t m, uint16_t* out_at, float* weights_at, bool norm,
            const mhc::MhcParams& p) const {
    Args a;
    a.x = x_at;
    a.hc_fn = hc_fn;
    a.hc_base = hc_base;
    a.hc_scale = hc_scale;
    a.norm_weight = norm ? norm_weight : nullptr;
    a.out = out_at;
    a.weights = weights_at;
    a.hidden = hidden;
    a.tokens = int(m);
    a.rms_eps = float(p.rms_eps());
    a.hc_eps = float(p.pre_eps());
    a.norm_eps = float(p.norm_eps());
    return a;
  }
  HeadBuffers product_buffers(const uint16_t* x_at, uint16_t* out_at, float* weights_at,
                              bool norm) const {
    HeadBuffers b;
    b.x = reinterpret_cast<const mhc::Bf16*>(x_at);
    b.hc_fn = hc_fn;
    b.hc_base = hc_base;
    b.hc_scale = hc_scale;
    b.norm_weight = norm ? norm_weight : nullptr;
    b.out = reinterpret_cast<mhc::Bf16*>(out_at);
    b.weights = weights_at;
    return b;
  }
};

// Poisons out and weights (0xFF: NaN in bf16 and fp32), runs `launch`, returns out's M x C bits
// and the M x n weights.
template <class Launch>
void run_poisoned(Device& d, int64_t m, Launch&& launch, std::vector<uint16_t>& out,
                  std::vector<float>& weights) {
  MHC_MICRO_CHECK(cudaMemset(d.out, 0xFF, size_t(m * d.hidden) * 2));
  MHC_MICRO_CHECK(cudaMemset(d.weights, 0xFF, size_t(m * kN) * 4));
  MHC_MICRO_CHECK(launch());
  MHC_MICRO_CHECK(cudaDeviceSynchronize());
  out.resize(size_t(m * d.hidden));
  weights.resize(size_t(m * kN));
  MHC_MICRO_CHECK(cudaMemcpy(out.data(), d.out, out.size() * 2, cudaMemcpyDeviceToHost));
  MHC_MICRO_CHECK(
      cudaMemcpy(weights.data(), d.weights, weights.size() * 4, cudaMemcpyDeviceToHost));
}

// Both outputs (with and without the norm) and the weights of one run against the reference.
struct Check {
  ErrStats w, y, out;
  bool ok() const { return w.passes(5e-5) && y.passes(8e-3) && out.passes(8e-3); }
};
template <class Launch>  // Launch(bool norm) -> cudaError_t
Check check_run(Device& d, const Host& h, int64_t m, Launch&& launch) {
  std::vector<uint16_t> out;
  std::vector<float> w;
  Check c;
  run_poisoned(
      d, m, [&] { return launch(false); }, out, w);
  c.y =
      compare([&](int64_t i) { return bf16_value(out[size_t(i)]); }, h.ref_y.data(), m * h.hidden);
  run_poisoned(
      d, m, [&] { return launch(true); }, out, w);
  c.out = compare([&](int64_t i) { return bf16_value(out[size_t(i)]); }, h.ref_out.data(),
                  m * h.hidden);
  c.w = compare([&](int64_t i) { return double(w[size_t(i)]); }, h.ref_w.data(), m * kN);
  return c;
}

// ---- batch invariance -------------------------------------------------------------------------

// For a variant family (one S, every T it has): the batch of 4096 tokens at T = 1 is the bits'
// standard; every T's batch of 4096, windows of 7, 16 and 1031 tokens from offsets that place
// tokens anywhere in their groups, and tokens alone must match it bit for bit.
bool check_invariance(Device& d, const mhc::MhcParams& p, int ctas,
                      const std::vector<const Variant*>& family) {
  constexpr int64_t kBatch = 4096;
  if (d.tokens < kBatch + 64 || family.empty()) return true;
  const int C = d.hidden;
  const int64_t k = int64_t(kN) * C;
  std::vector<uint16_t> standard, got;
  std::vector<float> w;
  const auto run = [&](const Variant& v, int64_t offset, int64_t m, std::vector<uint16_t>& o) {
    run_poisoned(
        d, m, [&] { return v.launch(d.args(d.x + offset * k, m, d.out, d.weights, true, p), 0); },
        o, w);
  };
  run(*family.front(), 0, kBatch, standard);
  bool ok = true;
  const auto expect_rows = [&](const std::vector<uint16_t>& o, int64_t offset, int64_t m,
                               const char* what, int t) {
    const bool same = std::memcmp(o.data(), standard.data() + offset * C, size_t(m * C) * 2) == 0;
    if (!same) {
      std::printf("  FAIL batch invariance S=%d T=%d: %s (offset %lld, %lld tokens)\n", ctas, t,
                  what, (long long)offset, (long long)m);
    }
    ok = ok && same;
  };
  for (const Variant* v : family) {
    run(*v, 0, kBatch, got);
    expect_rows(got, 0, kBatch, "batch of 4096", v->tokens_per_group);
    for (int64_t m : {int64_t(7), int64_t(16), int64_t(1031)}) {
      for (int64_t offset : {int64_t(0), int64_t(5), int64_t(13)}) {
        run(*v, offset, m, got);
        expect_rows(got, offset, m, "window", v->tokens_per_group);
      }
    }
    for (int64_t token : {0, 1, 6, 7, 15, 1030, 2049, 4095}) {
      run(*v, token, 1, got);
      expect_rows(got, token, 1, "token alone", v->tokens_per_group);
    }
  }
  return ok;
}

// ---- timing -----------------------------------------------------------------------------------

// Input sets for one (C, M): enough copies of x and out that a set is cold in L2 when it comes
// back (time_rotated_graphs's rule); the weights are shared, as in a model.
struct Sets {
  std::vector<uint16_t*> x, out;
  Sets(const Device& d, int64_t m, int64_t l2_bytes) {
    const int64_t set_bytes = m * (int64_t(kN) * d.hidden * 2 + int64_t(d.hidden) * 2);
    const int sets = int(std::clamp<int64_t>(ceil_div(3 * l2_bytes, set_bytes), 1, 48));
    for (int i = 0; i < sets; ++i) {
      x.push_back(device_alloc<uint16_t>(size_t(m * kN * d.hidden)));
      out.push_back(device_alloc<uint16_t>(size_t(m * d.hidden)));
      MHC_MICRO_CHECK(
          cudaMemcpy(x.back(), d.x, size_t(m * kN * d.hidden) * 2, cudaMemcpyDeviceToDevice));
    }
  }
  ~Sets() {
    for (auto* p : x) cudaFree(p);
    for (auto* p : out) cudaFree(p);
  }
  Sets(const Sets&) = delete;
  Sets& operator=(const Sets&) = delete;
};

// Median us of one graph per set (`enqueue(set, stream)` captured), replays timed by
// mhc::cuda::time_graph_replays (bench kernels' loop).
template <class Enqueue>
double time_graphs(int sets, int reps, cudaStream_t stream, Enqueue&& enqueue) {
  std::vector<cudaGraphExec_t> execs(size_t(sets), nullptr);
  for (int i = 0; i < sets; ++i) {
    cudaGraph_t graph = nullptr;
    MHC_MICRO_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue(i, stream);
    MHC_MICRO_CHECK(cudaStreamEndCapture(stream, &graph));
    MHC_MICRO_CHECK(cudaGraphInstantiate(&execs[size_t(i)], graph, 0));
    MHC_MICRO_CHECK(cudaGraphDestroy(graph));
  }
  const TimedResult r = time_graph_replays(execs, reps, stream);
  for (auto& g : execs) MHC_MICRO_CHECK(cudaGraphExecDestroy(g));
  return r.median_us;
}

// D2D copy bandwidth (bytes read + written per second), median of 20 copies of 1 GB: bench
// kernels' measure_copy_bandwidth.
double copy_bandwidth(cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  char* a = device_alloc<char>(bytes);
  char* b = device_alloc<char>(bytes);
  MHC_MICRO_CHECK(cudaMemsetAsync(a, 1, bytes, stream));
  cudaEvent_t start, stop;
  MHC_MICRO_CHECK(cudaEventCreate(&start));
  MHC_MICRO_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  for (int i = 0; i < 23; ++i) {
    MHC_MICRO_CHECK(cudaEventRecord(start, stream));
    MHC_MICRO_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
    MHC_MICRO_CHECK(cudaEventRecord(stop, stream));
    MHC_MICRO_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    MHC_MICRO_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 3) seconds.push_back(ms / 1e3);
  }
  MHC_MICRO_CHECK(cudaEventDestroy(start));
  MHC_MICRO_CHECK(cudaEventDestroy(stop));
  MHC_MICRO_CHECK(cudaFree(a));
  MHC_MICRO_CHECK(cudaFree(b));
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * double(bytes) / seconds[seconds.size() / 2];
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return v;
}

struct Row {
  double product_us = 0, product_frac = 0;
  std::map<int, std::pair<double, int>> best;  // S -> (us, T)
  double floor_us = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> hiddens = {4096, 5120, 7168};
  std::vector<int64_t> token_counts = {1, 2, 4, 8, 16, 64, 1024, 4096, 8192};
  int reps = 300;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--hidden") && i + 1 < argc) {
      hiddens = parse_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      token_counts = parse_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--check-only")) {
      check_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--hidden a,b] [--tokens a,b] [--reps N] [--check-only]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  MHC_MICRO_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  MHC_MICRO_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_bw = copy_bandwidth(stream);
  std::printf("%s (cc %d.%d, %d SMs, L2 %d MB), D2D copy %.0f GB/s (read + written)\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              copy_bw / 1e9);
  double empty_us = 0;
  if (!check_only) {
    empty_us = time_graphs(1, reps, stream, [](int, cudaStream_t s) { enqueue_empty_kernel(s); });
    std::printf("empty kernel (graph floor): %.2f us\n", empty_us);
  }

  bool all_ok = true;
  std::map<int, std::map<int64_t, Row>> table;  // C -> M -> row
  const int64_t max_tokens =
      std::max<int64_t>(*std::max_element(token_counts.begin(), token_counts.end()), 4096 + 64);
  for (const int64_t hidden64 : hiddens) {
    const int hidden = int(hidden64);
    mhc::MhcParams p;  // DeepSeek-V4.1's epsilons: rms 1e-20, hc 1e-6, norm 1e-20
    p.n = kN;
    p.hidden = hidden;
    Host h = make_host(hidden, max_tokens, 0x5eed0000u + uint64_t(hidden));
    reference(h, p);
    Device d(h);
    std::printf("\nC = %d, n = %d: variants (S CTAs per cluster, T tokens per group)\n", hidden,
                kN);
    std::vector<const Variant*> usable;
    for (const Variant& v : variants()) {
      int clusters = 0;
      // A refusal (an attribute or the cluster query) skips the variant, not the run.
      const cudaError_t err = v.prepare(hidden, prop.sharedMemPerBlockOptin, &clusters);
      if (err != cudaSuccess) {
        std::printf("  S=%2d T=%2d: refused (%s)\n", v.ctas, v.tokens_per_group,
                    cudaGetErrorString(err));
        (void)cudaGetLastError();
        continue;
      }
      std::printf("  S=%2d T=%2d: %s", v.ctas, v.tokens_per_group,
                  clusters > 0 ? "" : "not launchable (columns, shared memory or clusters)\n");
      if (clusters > 0) {
        std::printf("%d clusters resident at once\n", clusters);
        usable.push_back(&v);
      }
    }
    // Batch invariance per S.
    for (int ctas : {4, 8, 16}) {
      std::vector<const Variant*> family;
      for (const Variant* v : usable) {
        if (v->ctas == ctas) family.push_back(v);
      }
      const bool ok = check_invariance(d, p, ctas, family);
      if (!family.empty()) {
        std::printf("  batch invariance S=%d (T = 1..16, batches 1, 7, 16, 1031, 4096): %s\n", ctas,
                    ok ? "ok" : "FAIL");
      }
      all_ok = all_ok && ok;
    }

    for (const int64_t m : token_counts) {
      const double bytes = double(m) * (2.0 * kN * hidden + 2.0 * hidden) + 4.0 * kN * kN * hidden +
                           4.0 * (kN + 1) + 4.0 * hidden;
      const double floor_us = bytes / copy_bw * 1e6;
      Row& row = table[hidden][m];
      row.floor_us = floor_us;
      std::printf("\n C=%d M=%lld: bytes floor %.2f us\n", hidden, (long long)m, floor_us);
      // The product, checked and timed.
      const auto product = [&](const uint16_t* x_at, uint16_t* out_at, float* w_at, bool norm,
                               cudaStream_t s) {
        head(p, m, d.product_buffers(x_at, out_at, w_at, norm), LaunchTarget(s, false));
        return cudaGetLastError();
      };
      const Check pc =
          check_run(d, h, m, [&](bool norm) { return product(d.x, d.out, d.weights, norm, 0); });
      std::printf("  product            w %.1e  y %.1e  out %.1e  %s", pc.w.max_abs_rel,
                  pc.y.max_abs_rel, pc.out.max_abs_rel, pc.ok() ? "ok" : "FAIL");
      all_ok = all_ok && pc.ok();
      std::unique_ptr<Sets> sets;
      if (!check_only) {
        sets = std::make_unique<Sets>(d, m, prop.l2CacheSize);
        const double us =
            time_graphs(int(sets->x.size()), reps, stream, [&](int i, cudaStream_t s) {
              MHC_MICRO_CHECK(product(sets->x[size_t(i)], sets->out[size_t(i)], nullptr, true, s));
            });
        row.product_us = us;
        row.product_frac = floor_us / us;
        std::printf("  %8.2f us  %5.1f%% of floor", us, 100.0 * floor_us / us);
      }
      std::printf("\n");
      for (const Variant* v : usable) {
        if (v->tokens_per_group > 1 && v->tokens_per_group > m) continue;  // idle tokens only
        const Check c = check_run(d, h, m, [&](bool norm) {
          return v->launch(d.args(d.x, m, d.out, d.weights, norm, p), 0);
        });
        std::printf("  cluster S=%2d T=%2d  w %.1e  y %.1e  out %.1e  %s", v->ctas,
                    v->tokens_per_group, c.w.max_abs_rel, c.y.max_abs_rel, c.out.max_abs_rel,
                    c.ok() ? "ok" : "FAIL");
        all_ok = all_ok && c.ok();
        if (!check_only) {
          const double us =
              time_graphs(int(sets->x.size()), reps, stream, [&](int i, cudaStream_t s) {
                MHC_MICRO_CHECK(v->launch(
                    d.args(sets->x[size_t(i)], m, sets->out[size_t(i)], nullptr, true, p), s));
              });
          std::printf("  %8.2f us  %5.1f%% of floor", us, 100.0 * floor_us / us);
          auto it = row.best.find(v->ctas);
          if (c.ok() && (it == row.best.end() || us < it->second.first)) {
            row.best[v->ctas] = {us, v->tokens_per_group};
          }
        }
        std::printf("\n");
      }
    }
  }

  if (!check_only) {
    std::printf(
        "\nSummary: head collapse + final norm, median us of graph replays (inputs rotated past "
        "L2), %% of the bytes floor at %.0f GB/s; empty-graph floor %.2f us; cluster columns: the "
        "fastest T at that S [T]\n",
        copy_bw / 1e9, empty_us);
    for (const auto& [hidden, rows] : table) {
      std::printf("C=%d\n%8s %18s %22s %22s %22s\n", hidden, "tokens", "product", "S=4", "S=8",
                  "S=16");
      for (const auto& [m, row] : rows) {
        std::printf("%8lld %9.2f (%5.1f%%)", (long long)m, row.product_us,
                    100.0 * row.product_frac);
        for (int ctas : {4, 8, 16}) {
          const auto it = row.best.find(ctas);
          if (it == row.best.end()) {
            std::printf(" %22s", "-");
          } else {
            std::printf(" %9.2f (%5.1f%%) [%2d]", it->second.first,
                        100.0 * row.floor_us / it->second.first, it->second.second);
          }
        }
        std::printf("\n");
      }
    }
  }
  std::printf("\n%s\n", all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  MHC_MICRO_CHECK(cudaStreamDestroy(stream));
  return all_ok ? 0 : 1;
}
