#include "run_report.hpp"

#include <fmt/core.h>

#include <cmath>

#include "mhc/cpu/reference.hpp"

namespace mhc::cli {
namespace {

// splitmix64: a tiny deterministic generator for the site check's fresh inputs.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * float(next() >> 40) / float(1 << 24);
  }
};

std::vector<Bf16> random_bf16(Rng& rng, size_t count, float amplitude) {
  std::vector<Bf16> v(count);
  for (auto& e : v) e = float_to_bf16(rng.uniform(-amplitude, amplitude));
  return v;
}

}  // namespace

SiteCheck check_one_site(Backend& backend, const ModelWeights& w, int64_t tokens, uint64_t seed) {
  const MhcParams& p = w.params;
  const SiteWeightsView site_w = w.sites.at(std::min<size_t>(1, w.sites.size() - 1)).view();
  Rng rng{seed ^ 0x5eedf00dull};
  const std::vector<Bf16> x = random_bf16(rng, size_t(tokens * p.k()), 1.0f);
  const std::vector<Bf16> f = random_bf16(rng, size_t(tokens * p.hidden), 1.0f);
  std::vector<float> pre_mix(size_t(tokens * p.n));
  for (auto& e : pre_mix) e = rng.uniform(0.05f, 1.0f);  // as a carried sigmoid(.) + eps_h

  SiteInputsView in{tokens, x.data(), pre_mix.data(), f.data()};
  SiteOutputs out(p, tokens);
  // Poison: NaN in every float output and a NaN bf16 pattern, so unwritten outputs fail.
  std::fill(out.pre.begin(), out.pre.end(), NAN);
  std::fill(out.post.begin(), out.post.end(), NAN);
  std::fill(out.comb.begin(), out.comb.end(), NAN);
  std::fill(out.layer_input.begin(), out.layer_input.end(), Bf16{0xffff});
  std::fill(out.x_next.begin(), out.x_next.end(), Bf16{0xffff});
  backend.run_site(p, site_w, in, out.view());

  const ref::SiteResult r = ref::run_site(p, site_w, in);
  return SiteCheck{
      compare(out.layer_input.data(), r.layer_input.data(), int64_t(r.layer_input.size())),
      compare(out.pre.data(), r.pre.data(), int64_t(r.pre.size())),
      compare(out.post.data(), r.post.data(), int64_t(r.post.size())),
      compare(out.comb.data(), r.comb.data(), int64_t(r.comb.size())),
      compare(out.x_next.data(), r.x_next.data(), int64_t(r.x_next.size()))};
}

HeadCheck check_head(Backend& backend, const ModelWeights& w, const StackTrace& trace,
                     int64_t tokens) {
  HeadCheck c;
  if (w.head.empty() || trace.x_after_layer.empty()) return c;
  const MhcParams& p = w.params;
  const Bf16* x = trace.x_after_layer.back().data();
  std::vector<Bf16> out(size_t(tokens * p.hidden), Bf16{0xffff});
  std::vector<float> weights(size_t(tokens * p.n), NAN);
  backend.run_head(p, w.head.view(), tokens, x, out.data(), weights.data());
  const ref::HeadResult plain = ref::head(p, tokens, x, w.head.view());
  c.weights = compare(weights.data(), plain.weights.data(), int64_t(plain.weights.size()));
  c.out = compare(out.data(), plain.out.data(), int64_t(plain.out.size()));
  std::fill(out.begin(), out.end(), Bf16{0xffff});
  const HeadWeightsView normed_w = w.head.view(w.final_norm.data());
  backend.run_head(p, normed_w, tokens, x, out.data(), nullptr);
  const ref::HeadResult normed = ref::head(p, tokens, x, normed_w);
  c.normed = compare(out.data(), normed.out.data(), int64_t(normed.out.size()));
  c.ran = true;
  return c;
}

void RunReport::header(const std::string& preset_name, const MhcParams& p, int64_t tokens,
                       uint64_t seed, const Backend& backend, const KernelConfig& cfg) {
  doc_["preset"] = preset_name;
  doc_["params"] = {{"hidden", p.hidden},
                    {"n", p.n},
                    {"layers", p.layers},
                    {"sites", p.sites()},
                    {"sinkhorn_iters", p.sinkhorn_iters},
                    {"eps_h", p.eps_h},
                    {"eps_n", p.eps_n},
                    {"post_mult", p.post_mult}};
  doc_["tokens"] = tokens;
  doc_["seed"] = seed;
  doc_["backend"] = {{"name", backend.name()}, {"description", backend.description()}};
  doc_["kernel_config"] = nlohmann::json::parse(cfg.to_json());
  doc_["kernel_config_hash"] = fmt::format("{:016x}", cfg.hash());
  doc_["batch_invariant"] = cfg.batch_invariant;
  if (!text_) return;
  fmt::print("mhc run: preset {} ({}), {} tokens, {} sites, seed {}\n", preset_name, describe(p),
             tokens, p.sites(), seed);
  fmt::print("backend: {} ({})\n", backend.name(), backend.description());
  fmt::print("kernel config: {} (hash {:016x})\n", cfg.describe(), cfg.hash());
  if (cfg.batch_invariant) {
    fmt::print(
        "batch-invariant mode: on (each token's outputs are bitwise those it gets alone, on this "
        "GPU model and build: docs/batch_invariance.md)\n");
  }
}

void RunReport::dispatch(const DispatchDecision& d, bool on_gpu) {
  doc_["dispatch"] = nlohmann::json::parse(d.to_json());
  doc_["dispatch"]["applies"] = on_gpu;
  doc_["dispatch"]["max_tokens_source"] = d.max_tokens_source;
  if (!text_) return;
  if (!on_gpu) {
    fmt::print("dispatch: overlap no (the CPU backend runs on one stream; policy says: {})\n",
               d.reason_code);
    return;
  }
  fmt::print("dispatch: {}\n", d.describe());
  fmt::print("threshold from: {}\n", d.max_tokens_source);
}

void RunReport::plan(const KernelPlan& plan) {
  doc_["kernel_plan"] = nlohmann::json::parse(plan.to_json());
  if (!text_) return;
  fmt::print("kernel plan: {}\n", plan.summary());
  fmt::print(
      "plan switches: prenorm_kernel, prenorm_splits, fused_input, folded_post, cluster_post, "
      "fused_boundary, tactics "
      "(kernel config; `mhc plan` explains); in force: {}\n",
      plan.overrides_text());
}

void RunReport::schedules(const nlohmann::json& row) {
  doc_["schedules"] = row;
  if (!text_) return;
  fmt::print(
      "schedules: native {:.2f} us/layer, overlap {:.2f} us/layer, gain {:+.2f}% (stand-in "
      "decoder, FULL graphs, {} interleaved replays each, median)\n",
      row.at("native_us_per_layer").get<double>(), row.at("overlap_us_per_layer").get<double>(),
      row.at("gain_percent").get<double>(), row.at("reps").get<int>());
}

void RunReport::gpu_forward(const std::string& mode, bool overlapped, bool graph_replayed,
                            bool sync_checked, const std::string& trace_path) {
  doc_["forward"] = {{"mode", mode},
                     {"overlapped", overlapped},
                     {"graph_replayed", graph_replayed},
                     {"sync_checked", sync_checked},
                     {"trace", trace_path}};
  if (!text_) return;
  fmt::print("forward: mode {}, {} schedule{}{}\n", mode, overlapped ? "overlap" : "native",
             graph_replayed ? ", FULL CUDA graph replay" : ", eager launches",
             sync_checked ? ", no host sync inside (global-mode capture succeeded)" : "");
  if (!trace_path.empty()) fmt::print("trace: {} (open in ui.perfetto.dev)\n", trace_path);
}

void RunReport::check_line(const std::string& what, const ErrorStats& e, double tol,
                           nlohmann::json& into, bool print) {
  const bool ok = e.passes(tol);
  failures_ += ok ? 0 : 1;
  into[what] = {{"rel_norm", e.rel_norm},
                {"max_abs_rel", e.max_abs_rel},
                {"nonfinite", e.nonfinite},
                {"tolerance", tol},
                {"pass", ok}};
  if (print && text_) {
    fmt::print("  {:<22} rel {:9.3e}  max {:9.3e}  tol {:7.1e}  {}\n", what, e.rel_norm,
               e.max_abs_rel, tol, ok ? "PASS" : "FAIL");
  }
}

void RunReport::site_check(const SiteCheck& c, const Tolerances& tol) {
  if (text_) fmt::print("one site vs float64 reference (fresh inputs, carried pre_mix):\n");
  auto& j = doc_["site_check"];
  check_line("layer_input", c.layer_input, tol.activations, j);
  check_line("pre", c.pre, tol.coefficients, j);
  check_line("post", c.post, tol.coefficients, j);
  check_line("comb", c.comb, tol.coefficients, j);
  check_line("x_next", c.x_next, tol.activations, j);
}

void RunReport::stack_check(const StackTrace& trace, const StackReference& ref, const MhcParams& p,
                            int64_t tokens) {
  if (text_) {
    fmt::print(
        "stack of {} layers vs float64 reference (one-hot first site, stand-in sublayer;\n"
        "  bounds grow with depth as bf16 rounding noise does, see docs/numerics.md):\n",
        p.layers);
  }
  auto& j = doc_["stack_check"];
  const int64_t x_count = tokens * p.k();
  for (int layer = 0; layer < p.layers; ++layer) {
    const ErrorStats e =
        compare(trace.x_after_layer.at(layer).data(), ref.x_after_layer.at(layer).data(), x_count);
    // Text shows the first layers, every 10th and the last; JSON has all.
    const bool show = layer < 2 || (layer + 1) % 10 == 0 || layer + 1 == p.layers;
    check_line(fmt::format("x after layer {}", layer + 1), e, stack_x_tolerance(layer + 1),
               j["layers"], show);
  }
  check_line("last pre", compare(trace.last_pre.data(), ref.last_pre.data(), tokens * p.n),
             kStackPreTolerance, j);
  check_line("output", compare(trace.output.data(), ref.output.data(), tokens * p.hidden),
             kStackOutputTolerance, j);
}

void RunReport::head_check(const HeadCheck& c, const Tolerances& tol) {
  auto& j = doc_["head_check"];
  j["ran"] = c.ran;
  if (!c.ran) {
    if (text_) fmt::print("head collapse: not run (the weights have no hc_head fn/base/scale)\n");
    return;
  }
  if (text_) {
    fmt::print("head collapse vs float64 reference (the stack's last streams; docs/head.md):\n");
  }
  // The head's projection is fp32 on every backend (no TF32): the fp32 tier.
  check_line("head weights", c.weights, kFp32Tolerances.coefficients, j);
  check_line("head out", c.out, tol.activations, j);
  check_line("head out + final norm", c.normed, tol.activations, j);
}

void RunReport::timing(const SiteTiming& t, const MhcParams& p, int64_t tokens) {
  // Bytes floor per site (design doc, "Roofline"): 6K + 4C per token plus hc_fn once.
  const double floor_bytes = double(tokens) * (6.0 * double(p.k()) + 4.0 * p.hidden) +
                             double(p.nmix()) * double(p.k()) * 4.0;
  const double gbps = t.median_us > 0 ? floor_bytes / (t.median_us * 1e3) : 0;
  doc_["timing"] = {{"median_us_per_site", t.median_us},
                    {"reps", t.reps},
                    {"method", t.method},
                    {"floor_bytes", floor_bytes},
                    {"floor_gbps", gbps}};
  if (!text_) return;
  fmt::print("time per site: {:.2f} us (median of {}, {}), {:.1f} GB/s on the bytes floor\n",
             t.median_us, t.reps, t.method, gbps);
}

void RunReport::finish() {
  doc_["failures"] = failures_;
  doc_["pass"] = failures_ == 0;
  if (text_) {
    fmt::print("result: {}\n",
               failures_ == 0 ? "PASS" : fmt::format("FAIL ({} checks)", failures_));
  }
  json_.emit(doc_);
}

}  // namespace mhc::cli
