// `mhc site`: one V4.1 mHC site (design doc, "One site") on tensors from a safetensors file, run by
// a backend, with the outputs written to another safetensors file.
#include <fmt/core.h>

#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "commands.hpp"
#include "memory.hpp"
#include "mhc/core/backend.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cpu/fp8.hpp"
#include "mhc/io/safe_file.hpp"
#include "mhc/io/safetensors.hpp"
#include "options.hpp"

namespace mhc::cli {
namespace {

struct SiteArgs {
  std::string inputs;
  std::string out;
  std::string backend = "auto";
  std::string kernel_config;
  std::string fp8;  // "": none; else the FP8 layer_input's scale layout (docs/fp8.md)
  JsonOutput json;
};

// --fp8: layer_input also as FP8 (docs/fp8.md), the quantisation of the bf16 layer_input that
// the FP8 ops write bitwise: layer_input_fp8 [M, C] F8_E4M3 and layer_input_scales as stored,
// [M, C/128] row-major or [C/128, round_up(M, 4)] column-major (padding zero).
void add_fp8_outputs(const std::string& layout, const MhcParams& p, int64_t tokens,
                     const SiteOutputs& out, st::Writer& w) {
  const Fp8Format f{kFp8GroupSize, layout.rfind("column", 0) == 0,
                    layout.find("ue8m0") != std::string::npos};
  check_fp8_format(f, p.hidden, "mhc site --fp8");
  std::vector<uint8_t> codes(size_t(tokens * p.hidden));
  std::vector<float> scales(size_t(fp8_scale_floats(tokens, p.hidden, f)), 0.f);
  fp8_quantize_rows(out.layer_input.data(), tokens, p.hidden, f, codes.data(), scales.data());
  w.add("layer_input_fp8", st::Dtype::F8_E4M3, {tokens, p.hidden}, std::as_bytes(std::span(codes)));
  const int64_t groups = fp8_groups(p.hidden, f);
  w.add_f32("layer_input_scales",
            f.column_major_scales ? st::Shape{groups, fp8_aligned_tokens(tokens)}
                                  : st::Shape{tokens, groups},
            scales);
  w.set_metadata("fp8", layout);
}

// Everything needed to reproduce the run; values are exact (shortest round-trip text).
std::map<std::string, std::string> output_metadata(const st::SiteFileInputs& in,
                                                   const Backend& backend,
                                                   const KernelConfig& config,
                                                   const std::string& inputs_path) {
  const MhcParams& p = in.params;
  return {
      {"producer", "mhc site"},
      {"inputs", valid_utf8(inputs_path)},
      {"backend", backend.name()},
      {"backend_description", backend.description()},
      {"tokens", fmt::format("{}", in.tokens)},
      {"n", fmt::format("{}", p.n)},
      {"hidden", fmt::format("{}", p.hidden)},
      {"eps_h", fmt::format("{}", p.eps_h)},
      {"eps_n", fmt::format("{}", p.eps_n)},
      {"sinkhorn_iters", fmt::format("{}", p.sinkhorn_iters)},
      {"post_mult", fmt::format("{}", p.post_mult)},
      {"kernel_config", config.to_json()},
      {"kernel_config_hash", fmt::format("0x{:016x}", config.hash())},
  };
}

void print_summary(const SiteArgs& a, const st::SiteFileInputs& in, const Backend& backend,
                   const KernelConfig& config, double ms) {
  const MhcParams& p = in.params;
  auto line = [](std::string_view label, const std::string& value) {
    fmt::print("{:<10}{}\n", label, value);
  };
  line("inputs", a.inputs);
  line("shape",
       fmt::format("M={} n={} C={} (K={}, NMIX={})", in.tokens, p.n, p.hidden, p.k(), p.nmix()));
  line("params", fmt::format("sinkhorn_iters={} eps_h={:g} eps_n={:g} post_mult={:g}",
                             p.sinkhorn_iters, p.eps_h, p.eps_n, p.post_mult));
  line("backend", fmt::format("{} ({})", backend.name(), backend.description()));
  line("config", fmt::format("{} (hash 0x{:016x})", config.describe(), config.hash()));
  line("run", fmt::format("{:.3f} ms (one run_site call on host buffers, host clock)", ms));
  line("output", fmt::format("{}: layer_input [{}, {}] bf16, pre/post [{}, {}] f32, comb [{}, {}, "
                             "{}] f32, x_next [{}, {}, {}] bf16",
                             a.out, in.tokens, p.hidden, in.tokens, p.n, in.tokens, p.n, p.n,
                             in.tokens, p.n, p.hidden));
}

nlohmann::json summary_json(const SiteArgs& a, const st::SiteFileInputs& in, const Backend& backend,
                            const KernelConfig& config, double ms) {
  const MhcParams& p = in.params;
  return {{"inputs", a.inputs},
          {"output", a.out},
          {"tokens", in.tokens},
          {"params",
           {{"hidden", p.hidden},
            {"n", p.n},
            {"sinkhorn_iters", p.sinkhorn_iters},
            {"eps_h", p.eps_h},
            {"eps_n", p.eps_n},
            {"post_mult", p.post_mult}}},
          {"backend", {{"name", backend.name()}, {"description", backend.description()}}},
          {"kernel_config", nlohmann::json::parse(config.to_json())},
          {"kernel_config_hash", fmt::format("{:016x}", config.hash())},
          {"run_ms", ms}};
}

// What `site` holds on the host, from the header alone, before a tensor is read: each input
// copied out of the mapping (a bf16 norm weight widened to f32), the outputs, and the outputs once
// more as the writer's copy. Sizes from x's shape [M, n, C]; a malformed x is left to the reader.
void check_site_memory(const st::File& f) {
  uint64_t inputs = 0;
  for (const st::TensorInfo& t : f.tensors()) {
    const uint64_t widen = t.name == "norm_weight" && t.dtype == st::Dtype::BF16 ? 2 : 1;
    const auto bytes = checked_product({t.nbytes(), widen});
    if (!bytes || __builtin_add_overflow(inputs, *bytes, &inputs)) inputs = UINT64_MAX;
  }
  const st::TensorInfo* x = f.find("x");
  if (x == nullptr || x->shape.size() != 3) return;
  const uint64_t m = uint64_t(x->shape[0]), n = uint64_t(x->shape[1]), c = uint64_t(x->shape[2]);
  // bf16 layer_input [M, C] and x_next [M, n, C]; f32 pre, post [M, n] and comb [M, n, n].
  const auto per_token = checked_product({n + 1, c, 2});
  const auto coefficients = checked_product({n + 2, n, 4});
  std::optional<uint64_t> outputs;
  if (per_token && coefficients && *per_token <= UINT64_MAX - *coefficients) {
    outputs = checked_product({m, *per_token + *coefficients});
  }
  require_host_memory(fmt::format("mhc site on {} (M={} n={} C={})", f.path(), m, n, c),
                      {{"inputs", inputs == UINT64_MAX ? std::nullopt : std::optional(inputs)},
                       {"outputs", outputs},
                       {"the output file's image", outputs}});
}

void run_site_command(SiteArgs& a) {
  // Cheap checks first: a bad config or a missing GPU is reported before a large file is read.
  const KernelConfig config = KernelConfig::parse(a.kernel_config);
  const auto backend = make_backend(a.backend, config);
  const std::vector<std::string> inputs{a.inputs};
  io::check_output(a.out, inputs);  // a bad --out before the work, not after
  a.json.check(joined(inputs, files_read(config)), {a.out});
  const st::File file = st::File::open(a.inputs);
  check_site_memory(file);
  const st::SiteFileInputs in = st::read_site_inputs(file);
  SiteOutputs out(in.params, in.tokens);
  const auto start = std::chrono::steady_clock::now();
  backend->run_site(in.params, in.weights.view(), in.inputs(), out.view());
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  try {
    st::check_site_outputs_finite(in.params, out);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: not written: {} (inputs {})", a.out, e.what(), a.inputs));
  }
  st::Writer writer = st::site_outputs_writer(in.params, in.tokens, out,
                                              output_metadata(in, *backend, config, a.inputs));
  if (!a.fp8.empty()) add_fp8_outputs(a.fp8, in.params, in.tokens, out, writer);
  writer.write(a.out, inputs);
  if (!a.json.to_stdout()) print_summary(a, in, *backend, config, elapsed.count());
  a.json.emit(summary_json(a, in, *backend, config, elapsed.count()));
}

}  // namespace

void register_site(CLI::App& app) {
  auto args = std::make_shared<SiteArgs>();
  auto* cmd = add_command(
      app, "site", "Run one mHC site on tensors from a safetensors file (see docs/safetensors.md)",
      {"mhc site --inputs in.safetensors --out out.safetensors --backend cpu"});
  cmd->add_option("--inputs", args->inputs,
                  "Input file: x, pre_mix, hc_fn, hc_base, hc_scale, norm_weight, sublayer_out")
      ->required();
  cmd->add_option("--out", args->out,
                  "Output file: layer_input, pre, post, comb, x_next (+ metadata)")
      ->required();
  cmd->add_option("--fp8", args->fp8,
                  "Also write layer_input as FP8 (layer_input_fp8, layer_input_scales; "
                  "docs/fp8.md) with these scales")
      ->check(one_of({"row", "column", "row-ue8m0", "column-ue8m0"}));
  add_backend_option(cmd, args->backend);
  add_kernel_config_option(cmd, args->kernel_config);
  args->json.add_to(cmd);
  cmd->callback([args] { run_site_command(*args); });
}

}  // namespace mhc::cli
