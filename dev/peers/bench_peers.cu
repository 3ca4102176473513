// The peers beside mhc on one GPU, in one process: FlashInfer's mhc_post against mhc's post;
// DeepGEMM's tf32_hc_prenorm_gemm + FlashInfer's mhc_pre_big_fuse against mhc's coefficient
// launch with the collapse (the same math: V4's collapse with this site's own pre, no norm); the
// boundary an engine composes from those peers (post, prenorm GEMM, big fuse) against mhc's
// post + pre and mhc's V4.1 boundary. Every implementation's outputs are checked against mhc's
// float64 reference at every shape before it is timed; one that fails is reported wrong and not
// timed. Timing: peers_timing.hpp. Usage: dev/peers/run.sh (or --help).
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mhc/api.hpp"
#include "peers.hpp"
#include "peers_check.hpp"
#include "peers_timing.hpp"

namespace peers {
namespace {

using mhc::Bf16;
using json = nlohmann::json;

template <class T>
struct Buf {  // device memory, move-only
  T* p = nullptr;
  size_t n = 0;
  Buf() = default;
  explicit Buf(size_t count) : n(count) {
    check_cuda(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  }
  Buf(Buf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  Buf& operator=(Buf&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~Buf() {
    if (p) cudaFree(p);
  }
  std::vector<T> host() const {
    std::vector<T> h(n);
    check_cuda(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

struct Options {
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 64, 128, 1024, 4096, 8192};
  std::vector<int> hidden{4096, 5120, 7168};
  std::vector<int> splits{1, 2, 4, 8, 16};
  TimingOptions timing;
  std::string json_path = "peers.json", commit = "unknown", driver = "unknown", versions;
};

mhc::MhcParams params_for(int hidden) {
  switch (hidden) {
    case 4096:
      return mhc::preset("dsv4-flash");
    case 5120:
      return mhc::preset("dsv41-flash");
    case 7168:
      return mhc::preset("dsv4-pro");
    default:
      throw std::runtime_error(fmt::format("no preset has C = {}", hidden));
  }
}

// One site's weights: projection entries of about unit output, so that sigmoids and the
// Sinkhorn see logits of order one (a check at saturation would prove little).
struct Weights {
  std::vector<float> fn, base, scale, norm;
  Buf<float> d_fn, d_base, d_scale, d_norm;
  explicit Weights(const mhc::MhcParams& p) {
    const size_t k = size_t(p.k()), m = size_t(p.nmix());
    fn.resize(m * k);
    const float a = std::sqrt(3.f / float(k));
    uint64_t s = 0x2545f4914f6cdd1dull;
    auto uni = [&] {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      return float(s >> 40) / 16777216.f;
    };
    for (auto& v : fn) v = a * (2.f * uni() - 1.f);
    base.resize(m);
    for (auto& v : base) v = 0.5f * (2.f * uni() - 1.f);
    scale = {1.f, 1.f, 2.f};
    norm.resize(size_t(p.hidden));
    for (auto& v : norm) v = 0.5f + uni();
    d_fn = up(fn), d_base = up(base), d_scale = up(scale), d_norm = up(norm);
  }
  static Buf<float> up(const std::vector<float>& h) {
    Buf<float> b(h.size());
    check_cuda(cudaMemcpy(b.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice), "upload");
    return b;
  }
  mhc::HcWeights hc() const { return {d_fn.p, d_scale.p, d_base.p}; }
  mhc::SiteWeightsView view() const { return {fn.data(), base.data(), scale.data(), norm.data()}; }
};

// One input set and every implementation's outputs for it.
struct Set {
  Buf<Bf16> x, f, mhc_xn, peer_xn, mhc_li, peer_li;
  Buf<float> post_in, comb_in, pre_mix, mhc_pre, mhc_post, mhc_comb, peer_post, peer_comb, d, sq;
  Set(const mhc::MhcParams& p, int64_t m, int max_splits, uint64_t seed, cudaStream_t s)
      : x(m * p.k()),
        f(m * p.hidden),
        mhc_xn(m * p.k()),
        peer_xn(m * p.k()),
        mhc_li(m * p.hidden),
        peer_li(m * p.hidden),
        post_in(m * p.n),
        comb_in(m * p.n * p.n),
        pre_mix(m * p.n),
        mhc_pre(m * p.n),
        mhc_post(m * p.n),
        mhc_comb(m * p.n * p.n),
        peer_post(m * p.n),
        peer_comb(m * p.n * p.n),
        d(size_t(max_splits) * m * p.nmix()),
        sq(size_t(max_splits) * m) {
    fill_bf16(x.p, int64_t(x.n), seed * 8 + 1, s);
    fill_bf16(f.p, int64_t(f.n), seed * 8 + 2, s);
    fill_f32(post_in.p, int64_t(post_in.n), 0.f, 2.f, seed * 8 + 3, s);
    fill_f32(comb_in.p, int64_t(comb_in.n), 0.f, 0.5f, seed * 8 + 4, s);
    fill_f32(pre_mix.p, int64_t(pre_mix.n), 0.2f, 1.2f, seed * 8 + 5, s);
  }
};

struct Shape {
  const mhc::MhcParams& p;
  int64_t m;
  const Weights& w;
  const mhc::Ops& ops;
  mhc::Workspace ws;
  std::vector<Set>& sets;
};

// Enqueue helpers: the same calls the checks run eagerly and the timing captures.
void mhc_post(const Shape& s, Set& b, cudaStream_t st) {
  s.ops.post(s.m, {b.f.p, b.x.p, b.post_in.p, b.comb_in.p, b.mhc_xn.p}, st);
}
void mhc_pre_v4(const Shape& s, Set& b, const Bf16* x, cudaStream_t st) {
  s.ops.pre(s.m, x, s.w.hc(), {}, nullptr, b.mhc_li.p, {b.mhc_pre.p, b.mhc_post.p, b.mhc_comb.p},
            s.ws, st);
}
void mhc_boundary_v41(const Shape& s, Set& b, cudaStream_t st) {
  s.ops.boundary(s.m, {b.f.p, b.x.p, b.post_in.p, b.comb_in.p, b.mhc_xn.p}, b.pre_mix.p,
                 {s.w.d_norm.p, false}, b.mhc_li.p, s.w.hc(),
                 {b.mhc_pre.p, b.mhc_post.p, b.mhc_comb.p}, s.ws, st);
}
void fi_post(const Shape& s, Set& b, cudaStream_t st) {
  flashinfer_post(b.f.p, b.x.p, b.post_in.p, b.comb_in.p, b.peer_xn.p, s.m, s.p.hidden, st);
}
void peer_pre(const Shape& s, Set& b, const Bf16* x, int splits, cudaStream_t st) {
  deepgemm_prenorm(x, s.w.d_fn.p, b.d.p, b.sq.p, s.m, s.p.k(), splits, st);
  flashinfer_pre_big_fuse(b.d.p, b.sq.p, x, s.w.d_scale.p, s.w.d_base.p, b.peer_post.p,
                          b.peer_comb.p, b.peer_li.p, s.m, s.p.hidden, s.p.rms_eps(), s.p.pre_eps(),
                          s.p.sinkhorn_eps(), s.p.post_mult, s.p.sinkhorn_iters, splits, st);
}

// The float64 reference of what a boundary computes from x_next, kept for the next
// implementation whose x_next is bitwise the same (post kernels usually agree bit for bit).
struct NextRef {
  std::vector<Bf16> xn;
  RefCoefficients coef;
  std::vector<double> li_v4, li_v41;
};

const NextRef& next_ref(NextRef& cache, const Shape& s, const std::vector<Bf16>& xn,
                        const std::vector<float>& pre_mix) {
  const bool same =
      cache.xn.size() == xn.size() && std::equal(xn.begin(), xn.end(), cache.xn.begin(),
                                                 [](Bf16 a, Bf16 b) { return a.bits == b.bits; });
  if (same) return cache;
  cache.xn = xn;
  cache.coef = ref_coefficients(s.p, s.m, xn.data(), s.w.view());
  const std::vector<float> pre(cache.coef.pre.begin(), cache.coef.pre.end());
  cache.li_v4 = ref_input_path(s.p, s.m, xn.data(), pre.data(), nullptr);
  cache.li_v41 = ref_input_path(s.p, s.m, xn.data(), pre_mix.data(), s.w.norm.data());
  return cache;
}

void add_coefs(Verdict& v, const RefCoefficients& r, const Set& b, bool mhc) {
  if (mhc) v.add("pre", compare(r.pre, b.mhc_pre.host().data(), r.pre.size()), kCoefTol);
  const auto post = (mhc ? b.mhc_post : b.peer_post).host();
  const auto comb = (mhc ? b.mhc_comb : b.peer_comb).host();
  v.add("post", compare(r.post, post.data(), r.post.size()), kCoefTol);
  v.add("comb", compare(r.comb, comb.data(), r.comb.size()), kCoefTol);
}

void add_bf16(Verdict& v, const char* what, const std::vector<double>& r, const Buf<Bf16>& out) {
  v.add(what, compare(r, out.host().data(), r.size()), kBf16Tol);
}

struct Entry {
  std::string group, impl, name;
  int splits = 0;
  Verdict verdict;
  Entry(std::string g, std::string i, std::string n, int s = 0)
      : group(std::move(g)), impl(std::move(i)), name(std::move(n)), splits(s) {}
};

json run_shape(const Options& o, const mhc::MhcParams& p, int64_t m, const Weights& w,
               const mhc::KernelPlan& plan, cudaStream_t st, int64_t l2) {
  const int max_splits = *std::max_element(o.splits.begin(), o.splits.end());
  const int64_t set_bytes = m * (4 * p.k() + 4 * p.hidden);
  const int nsets = rotation_sets(set_bytes, l2);
  std::vector<Set> sets;
  sets.reserve(size_t(nsets));
  for (int i = 0; i < nsets; ++i) sets.emplace_back(p, m, max_splits, uint64_t(i) + 1, st);
  const mhc::Ops ops(plan, p);
  Buf<uint8_t> wsb(size_t(mhc::workspace_bytes(p, m)));
  check_cuda(cudaMemset(wsb.p, 0, wsb.n), "workspace");
  const Shape s{p, m, w, ops, {wsb.p, int64_t(wsb.n)}, sets};
  Set& b0 = sets[0];
  check_cuda(cudaStreamSynchronize(st), "inputs");
  const auto x = b0.x.host(), f = b0.f.host();
  const auto post_in = b0.post_in.host(), comb_in = b0.comb_in.host(), pre_mix = b0.pre_mix.host();
  const auto r_post = ref_post(p, m, x.data(), post_in.data(), comb_in.data(), f.data());
  const auto r_coef = ref_coefficients(p, m, x.data(), w.view());
  const std::vector<float> r_pre(r_coef.pre.begin(), r_coef.pre.end());
  const auto r_li = ref_input_path(p, m, x.data(), r_pre.data(), nullptr);
  NextRef cache;

  std::vector<Entry> entries;
  std::vector<Item> items;
  // Runs `enqueue` on set 0, checks it with `check`, and queues it for timing if it passed.
  auto add = [&](Entry e, std::function<void(Set&, cudaStream_t)> enqueue,
                 std::function<void(Verdict&)> check) {
    try {  // a call that throws (a launch refused, a CUDA error) is a failed check
      enqueue(b0, st);
      check_cuda(cudaStreamSynchronize(st), e.name);
      check(e.verdict);
    } catch (const std::exception& ex) {
      e.verdict.failures.push_back(std::string("error: ") + ex.what());
      check_cuda(cudaDeviceSynchronize(), e.name + " (the context after its error)");
    }
    Item it{e.name, [&sets, enqueue](int i, cudaStream_t t) { enqueue(sets[size_t(i)], t); },
            e.verdict.ok()};
    fmt::print("  C={} M={} {}: {}\n", p.hidden, m, e.name, e.verdict.text());
    entries.push_back(std::move(e));
    items.push_back(std::move(it));
  };

  // Post.
  add(
      {"post", "mhc", "mhc post"}, [&](Set& b, cudaStream_t t) { mhc_post(s, b, t); },
      [&](Verdict& v) { add_bf16(v, "x_next", r_post, b0.mhc_xn); });
  add(
      {"post", "peer", "FlashInfer mhc_post"}, [&](Set& b, cudaStream_t t) { fi_post(s, b, t); },
      [&](Verdict& v) { add_bf16(v, "x_next", r_post, b0.peer_xn); });
  // The coefficient path with the collapse (V4 math, no norm).
  add(
      {"coefficients", "mhc", "mhc pre (coefficients + collapse)"},
      [&](Set& b, cudaStream_t t) { mhc_pre_v4(s, b, b.x.p, t); },
      [&](Verdict& v) {
        add_coefs(v, r_coef, b0, true);
        add_bf16(v, "layer_input", r_li, b0.mhc_li);
      });
  add(
      {"coefficients", "info", "mhc coefficients alone"},
      [&](Set& b, cudaStream_t t) {
        ops.coefficients(m, b.x.p, w.hc(), {b.mhc_pre.p, b.mhc_post.p, b.mhc_comb.p}, s.ws, t);
      },
      [&](Verdict& v) { add_coefs(v, r_coef, b0, true); });
  for (int sp : o.splits) {
    add(
        {"coefficients", "peer", fmt::format("DeepGEMM prenorm S={} + FlashInfer big_fuse", sp),
         sp},
        [&, sp](Set& b, cudaStream_t t) { peer_pre(s, b, b.x.p, sp, t); },
        [&](Verdict& v) {
          add_coefs(v, r_coef, b0, false);
          add_bf16(v, "layer_input", r_li, b0.peer_li);
        });
  }
  // The boundary: post of one site, coefficients and collapse of the next.
  auto check_next = [&](Verdict& v, const Buf<Bf16>& xn_buf, bool mhc, bool v41) {
    const auto xn = xn_buf.host();
    v.add("x_next", compare(r_post, xn.data(), xn.size()), kBf16Tol);
    const NextRef& r = next_ref(cache, s, xn, pre_mix);
    add_coefs(v, r.coef, b0, mhc);
    add_bf16(v, "layer_input", v41 ? r.li_v41 : r.li_v4, mhc ? b0.mhc_li : b0.peer_li);
  };
  add(
      {"boundary", "mhc", "mhc post + pre"},
      [&](Set& b, cudaStream_t t) {
        mhc_post(s, b, t);
        mhc_pre_v4(s, b, b.mhc_xn.p, t);
      },
      [&](Verdict& v) { check_next(v, b0.mhc_xn, true, false); });
  add(
      {"boundary", "info", "mhc V4.1 boundary (carried pre_mix, normed)"},
      [&](Set& b, cudaStream_t t) { mhc_boundary_v41(s, b, t); },
      [&](Verdict& v) { check_next(v, b0.mhc_xn, true, true); });
  for (int sp : o.splits) {
    add(
        {"boundary", "peer", fmt::format("FlashInfer post + DeepGEMM S={} + big_fuse", sp), sp},
        [&, sp](Set& b, cudaStream_t t) {
          fi_post(s, b, t);
          peer_pre(s, b, b.peer_xn.p, sp, t);
        },
        [&](Verdict& v) { check_next(v, b0.peer_xn, false, false); });
  }

  const auto times = time_interleaved(items, nsets, st, o.timing);
  json row = {{"C", p.hidden}, {"M", m}, {"sets", nsets}, {"set_bytes", set_bytes}};
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    json errs = json::object();
    for (const auto& [what, err] : e.verdict.errors)
      errs[what] = {{"rel", std::isnan(err.rel) ? json(nullptr) : json(err.rel)},
                    {"max_abs", std::isnan(err.max_abs) ? json(nullptr) : json(err.max_abs)}};
    json item = {
        {"group", e.group},          {"impl", e.impl}, {"name", e.name}, {"splits", e.splits},
        {"check", e.verdict.text()}, {"errors", errs}};
    if (items[i].timed) {
      item["median_us"] = times[i].median_us;
      item["min_us"] = times[i].min_us;
      item["round_us"] = times[i].round_us;
    }
    row["items"].push_back(item);
  }
  return row;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) v.push_back(std::stoll(t));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--tokens")
      o.tokens = parse_list(next());
    else if (a == "--hidden") {
      o.hidden.clear();
      for (auto v : parse_list(next())) o.hidden.push_back(int(v));
    } else if (a == "--splits") {
      o.splits.clear();
      for (auto v : parse_list(next())) o.splits.push_back(int(v));
    } else if (a == "--rounds")
      o.timing.rounds = std::stoi(next());
    else if (a == "--reps")
      o.timing.reps = std::stoi(next());
    else if (a == "--json")
      o.json_path = next();
    else if (a == "--commit")
      o.commit = next();
    else if (a == "--driver")
      o.driver = next();
    else if (a == "--versions")
      o.versions = next();
    else {
      std::puts(
          "bench_peers [--tokens 1,2,...] [--hidden 4096,5120,7168] [--splits 1,2,4,8,16]\n"
          "  [--rounds 5] [--reps 30] [--json FILE] [--commit C] [--driver D] [--versions FILE]");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int run_main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "properties");
  int runtime = 0, driver_api = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver_api);
  const mhc::KernelPlan plan = mhc::device_plan(0);
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  json doc = {{"gpu", prop.name},
              {"sm_count", prop.multiProcessorCount},
              {"l2_bytes", prop.l2CacheSize},
              {"driver", o.driver},
              {"cuda_driver_api", driver_api},
              {"cuda_runtime", runtime},
              {"commit", o.commit},
              {"date", utc_now()},
              {"mhc_plan", plan.summary()},
              {"tolerances", {{"coefficients", kCoefTol}, {"bf16_outputs", kBf16Tol}}},
              {"method", fmt::format("each item captured in a CUDA graph per input set, sets "
                                     "rotated past the L2, {} rounds interleaved across items, "
                                     "{} warm-up and {} timed replays per item per round, CUDA "
                                     "events between consecutive replays; an item's time is the "
                                     "median of its rounds' medians",
                                     o.timing.rounds, o.timing.warmup, o.timing.reps)},
              {"rows", json::array()}};
  if (!o.versions.empty()) {
    std::ifstream in(o.versions);
    if (in) doc["peers"] = json::parse(in);
  }
  int failed = 0;
  for (int c : o.hidden) {
    const mhc::MhcParams p = params_for(c);
    const Weights w(p);
    for (int64_t m : o.tokens) {
      try {
        doc["rows"].push_back(run_shape(o, p, m, w, plan, st, prop.l2CacheSize));
      } catch (const std::exception& e) {
        ++failed;
        fmt::print("C={} M={}: ERROR {}\n", c, m, e.what());
        doc["rows"].push_back({{"C", c}, {"M", m}, {"error", e.what()}});
        if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) {
          fmt::print("the CUDA context is lost: stopping\n");
          std::ofstream(o.json_path) << doc.dump(1);
          return 1;
        }
      }
      std::ofstream(o.json_path) << doc.dump(1);
    }
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace peers

int main(int argc, char** argv) {
  try {
    return peers::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_peers: %s\n", e.what());
    return 1;
  }
}
