#include "run_report.hpp"

#include <fmt/core.h>

namespace mhc::cli {
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
      "post_columns, fused_boundary, tactics "
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

void RunReport::mtp_checks(const std::vector<MtpCheck>& checks, int trunk_layers,
                           const Tolerances& tol) {
  auto& j = doc_["mtp"];
  j["depths"] = checks.size();
  j["blocks"] = nlohmann::json::array();
  if (checks.empty()) {
    if (text_) fmt::print("MTP blocks: none (the weights have no mtp.{{k}}.* blocks)\n");
    return;
  }
  for (const MtpCheck& c : checks) {
    if (text_) {
      fmt::print(
          "MTP block {} vs float64 reference (fed the stand-in h + e of the streams before it; "
          "docs/mtp.md):\n",
          c.depth);
    }
    nlohmann::json b = {{"depth", c.depth}};
    check_line("site layer_input", c.site.layer_input, tol.activations, b["site_check"]);
    check_line("site pre", c.site.pre, tol.coefficients, b["site_check"]);
    check_line("site post", c.site.post, tol.coefficients, b["site_check"]);
    check_line("site comb", c.site.comb, tol.coefficients, b["site_check"]);
    check_line("site x_next", c.site.x_next, tol.activations, b["site_check"]);
    // The block's layer carries the trunk's rounding noise: the bound of the layer it follows.
    check_line("x after block", c.x, stack_x_tolerance(trunk_layers + c.depth + 1),
               b["stack_check"]);
    check_line("last pre", c.last_pre, kStackPreTolerance, b["stack_check"]);
    check_line("output", c.output, kStackOutputTolerance, b["stack_check"]);
    check_line("head weights", c.head.weights, kFp32Tolerances.coefficients, b["head_check"]);
    check_line("head out", c.head.out, tol.activations, b["head_check"]);
    check_line("head out + norm", c.head.normed, tol.activations, b["head_check"]);
    j["blocks"].push_back(std::move(b));
  }
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
