// `mhc run`: the main job. A DeepSeek-V4.1-shaped mHC stack on deterministic synthetic weights,
// validated against the float64 reference and timed, on the best backend present.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "commands.hpp"
#include "mhc/core/backend.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/io/checkpoint.hpp"
#include "overlap_rounds.hpp"
#include "run_report.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/device_plan.hpp"
#include "mhc/schedule/stack_run.hpp"
#endif
#if MHC_WITH_NCCL
#include "mhc/dist/tp_run.hpp"
#include "mhc/dist/tp_runner.hpp"
#endif

namespace mhc::cli {
namespace {

struct RunOptions {
  std::string preset_name{kDefaultPreset};
  int64_t tokens = 16;
  int layers = 0;  // 0: the preset's
  int hidden = 0;  // 0: the preset's
  int hc = 0;      // 0: the preset's
  uint64_t seed = 1;
  std::string kernel_config;
  std::string backend = "auto";
  int timing_reps = 0;  // 0: backend-appropriate default
  std::string mode = "full";
  std::string sync_check = "off";
  std::string trace_path;
  int tp = 0;  // --tp N: tensor parallelism over N GPUs (0: off)
  bool json = false;
  std::string weights_dir;  // --weights: mHC parameters from a checkpoint instead of synthetic
};

MhcParams resolve_params(const RunOptions& o) {
  MhcParams p = preset(o.preset_name);
  if (o.layers > 0) p.layers = o.layers;
  if (o.hidden > 0) p.hidden = o.hidden;
  if (o.hc > 0) p.n = o.hc;
  validate(p);
  if (o.tokens < 0) throw Error(fmt::format("--tokens {} must be >= 0", o.tokens));
  return p;
}

// --tp is checked before any work: its own validation replaces the single-GPU stack check.
void check_tp_options(const RunOptions& o) {
  if (o.tp == 0) return;
  if (o.tp < 0) throw Error(fmt::format("--tp {}: expected a TP size >= 1", o.tp));
#if !MHC_WITH_NCCL
  throw Error("--tp needs the CUDA backend built with NCCL; this build has none");
#endif
  if (o.backend == "cpu") throw Error("--tp needs the cuda backend");
  if (!o.trace_path.empty() || o.sync_check != "off") {
    throw Error("--tp cannot be combined with --trace or --sync-check");
  }
#if MHC_WITH_NCCL
  check_tp_fits(o.tp, dist::visible_gpus());
#endif
}

// --tp N: the stack with the cuBLAS stand-in decoder sharded over N GPUs (one thread per GPU,
// NCCL all-reduce), validated against the same stack on one GPU (docs/tensor_parallel.md).
void run_tensor_parallel(const RunOptions& o, const ModelWeights& w, const std::vector<Bf16>& x0,
                         const KernelConfig& cfg, ExecMode mode, bool site_passed) {
#if MHC_WITH_NCCL
  dist::TpRunConfig c;
  c.world = o.tp;
  c.mode = mode;
  if (o.timing_reps > 0) c.timing_reps = o.timing_reps;
  const dist::TpRunReport r = dist::run_stack_tp(w, o.tokens, x0.data(), cfg, c);
  const bool pass = r.passed() && site_passed;
  if (o.json) {
    fmt::print("{}\n", r.to_json());
  } else {
    fmt::print("{}result: {}\n", r.describe(), pass ? "PASS" : "FAIL");
  }
  if (!pass) throw Error("validation failed (see the FAIL lines above)");
#else
  (void)o, (void)w, (void)x0, (void)cfg, (void)mode, (void)site_passed;
#endif
}

// The dispatch decision the CPU backend is asked about (it runs one stream, so it never overlaps;
// the GPU path asks the executor instead).
DispatchDecision dispatch_for(const Backend& backend, const MhcParams& p, const KernelConfig& cfg,
                              int64_t tokens, ExecMode mode) {
  DispatchInputs in;
  in.capability = backend.capability().value_or(ComputeCapability{0, 0});
  in.prenorm_gemm_available = backend.capability().has_value();
  in.hidden = p.hidden;
  in.n = p.n;
  in.mode = mode;
  in.tokens = tokens;
  in.config = cfg;
  return decide(in);
}

// --weights: C, n and layers come from the checkpoint (checked against --preset when given).
ckpt::Loaded load_weights(const RunOptions& o, bool preset_given) {
  if (o.layers > 0 || o.hidden > 0 || o.hc > 0) {
    throw Error(
        "--layers, --hidden and --hc cannot be combined with --weights (the checkpoint's "
        "shapes decide)");
  }
  if (o.tokens < 0) throw Error(fmt::format("--tokens {} must be >= 0", o.tokens));
  ckpt::LoadOptions lo;
  lo.seed = o.seed;
  if (preset_given) {
    lo.expect = preset(o.preset_name);
    lo.expect_name = o.preset_name;
  }
  ckpt::Loaded loaded = ckpt::load(o.weights_dir, lo);
  fmt::print(o.json ? stderr : stdout, "{}", ckpt::describe(loaded.report, loaded.weights.params));
  return loaded;
}

void run(const RunOptions& o, bool preset_given) {
  std::optional<ckpt::Loaded> ck;
  if (!o.weights_dir.empty()) ck = load_weights(o, preset_given);
  const MhcParams p = ck ? ck->weights.params : resolve_params(o);
  const KernelConfig cfg = KernelConfig::parse(o.kernel_config);
  const ExecMode mode = parse_exec_mode(o.mode);
  check_tp_options(o);
  if (o.sync_check != "off" && o.sync_check != "error") {
    throw Error(fmt::format("--sync-check '{}': expected off or error", o.sync_check));
  }
  auto backend = make_backend(o.backend, cfg);
  const bool on_gpu = backend->capability().has_value();
  if (!on_gpu && !o.trace_path.empty()) throw Error("--trace needs the cuda backend");
  RunReport report(o.json);
  report.header(ck ? "none (--weights " + o.weights_dir + ")" : o.preset_name, p, o.tokens, o.seed,
                *backend, cfg);

  const ModelWeights weights = ck ? std::move(ck->weights) : synthetic_model(p, o.seed);
  const Tolerances tol = backend->tolerances(cfg);
  report.site_check(check_one_site(*backend, weights, o.tokens, o.seed), tol);

  const std::vector<Bf16> x0 = synthetic_embeddings(p, o.tokens, o.seed + 1);
  if (o.tp > 0) return run_tensor_parallel(o, weights, x0, cfg, mode, report.all_passed());
  StackTrace trace;
  if (on_gpu) {
#if MHC_WITH_CUDA
    cuda::StackRunOptions run_opt{mode, o.sync_check == "error", o.trace_path};
    cuda::StackRunResult r = cuda::run_stack(weights, o.tokens, x0.data(), cfg, run_opt);
    report.plan(cuda::device_plan(cfg));
    report.dispatch(r.decision, true);
    report.gpu_forward(o.mode, r.overlapped, r.graph_replayed, r.sync_checked, o.trace_path);
    trace = std::move(r.trace);
#endif
  } else {
    report.dispatch(dispatch_for(*backend, p, cfg, o.tokens, mode), false);
    trace = backend->run_stack(weights, o.tokens, x0.data());
  }
  const StackReference ref = reference_stack(weights, o.tokens, x0.data());
  report.stack_check(trace, ref, p, o.tokens);

  const int reps = o.timing_reps > 0 ? o.timing_reps : (backend->name() == "cpu" ? 5 : 200);
  report.timing(backend->time_site(weights, o.tokens, reps), p, o.tokens);
  if (on_gpu && o.tokens > 0) {
    const OverlapSweep sweep{{o.tokens}, o.timing_reps > 0 ? o.timing_reps : 40, 1, 0, 0};
    report.schedules(measure_overlap_rounds(weights.params, weights, sweep).at(0).at(0));
  }
  report.finish();
  if (!report.all_passed()) throw Error("validation failed (see the FAIL lines above)");
}

}  // namespace

void register_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run a DeepSeek-V4.1-shaped mHC stack on synthetic weights: validate against "
      "float64 and time each site");
  auto* preset_opt = cmd->add_option("--preset", opts->preset_name,
                                     "Model preset: dsv41-flash, dsv4-flash, dsv4-pro")
                         ->capture_default_str();
  cmd->add_option("--tokens,-m", opts->tokens, "Tokens in the batch (0 is allowed)")
      ->capture_default_str();
  cmd->add_option("--layers", opts->layers, "Decoder layers (default: the preset's)");
  cmd->add_option("--hidden", opts->hidden, "Hidden size C (default: the preset's)");
  cmd->add_option("--hc", opts->hc, "Residual streams n (default: the preset's)");
  cmd->add_option("--seed", opts->seed, "Seed of the synthetic weights and inputs")
      ->capture_default_str();
  cmd->add_option("--kernel-config", opts->kernel_config,
                  R"(Kernel configuration JSON, e.g. '{"enable_mhc_overlap": true}')");
  cmd->add_option("--backend", opts->backend, "auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--timing-reps", opts->timing_reps,
                  "Timed repetitions (default: cpu 5, cuda 200)");
  cmd->add_option("--mode", opts->mode, "Execution mode of the GPU forward: eager, piecewise, full")
      ->capture_default_str();
  cmd->add_option("--sync-check", opts->sync_check,
                  "error: capture the forward in global mode first, so any host sync inside it "
                  "is an error (FULL mode always does)")
      ->capture_default_str();
  cmd->add_option("--trace", opts->trace_path,
                  "Write a Chrome trace (GPU-timed, per stream) of one forward to this file");
  cmd->add_option("--tp", opts->tp,
                  "Tensor parallelism over N GPUs (one thread each, NCCL all-reduce): the cuBLAS "
                  "stand-in decoder sharded over them, validated against TP=1");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the text report");
  cmd->add_option("--weights", opts->weights_dir,
                  "Checkpoint directory (model.safetensors.index.json + shards, or one "
                  ".safetensors file): real mHC parameters instead of synthetic ones");
  cmd->callback([opts, preset_opt] { run(*opts, preset_opt->count() > 0); });
}

}  // namespace mhc::cli
