// `mhc export-example DIR`: writes a small synthetic DeepSeek-V4.1-style checkpoint (two shards +
// index by default) for `mhc run --weights DIR`, the tests and the docs.
#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "memory.hpp"
#include "mhc/core/error.hpp"
#include "mhc/io/checkpoint.hpp"
#include "options.hpp"

namespace mhc::cli {
namespace {

struct ExportArgs {
  std::string dir;
  std::string naming = "official";
  std::string norm_dtype = "f32";
  bool no_final_norm = false;
  bool no_config = false;
  bool no_head = false;
  ckpt::ExportOptions opt;
  JsonOutput json;
};

void print_report(const ExportArgs& a, const MhcParams& p, const ckpt::ExportReport& r) {
  fmt::print("wrote {} ({} naming, seed {}): {}{}{}\n", a.dir, a.naming, a.opt.seed, describe(p),
             a.opt.head ? ", head collapse" : "",
             a.opt.mtp ? fmt::format(", {} MTP block(s)", a.opt.mtp) : "");
  for (const auto& f : r.files) fmt::print("  {}\n", f);
  fmt::print("{} mHC/norm tensors; decoys that `mhc run --weights` must not read: ", r.mhc_tensors);
  for (size_t i = 0; i < r.decoys.size(); ++i) fmt::print("{}{}", i ? ", " : "", r.decoys[i]);
  fmt::print("\n{} bytes in all. Try: mhc run --weights {} --seed {}\n", r.total_bytes, a.dir,
             a.opt.seed);
}

nlohmann::json report_json(const ExportArgs& a, const MhcParams& p, const ckpt::ExportReport& r) {
  return {
      {"dir", a.dir},       {"naming", a.naming},
      {"seed", a.opt.seed}, {"params", {{"hidden", p.hidden}, {"n", p.n}, {"layers", p.layers}}},
      {"head", a.opt.head}, {"mtp_depths", a.opt.mtp},
      {"files", r.files},   {"mhc_tensors", r.mhc_tensors},
      {"decoys", r.decoys}, {"total_bytes", r.total_bytes}};
}

void export_example(ExportArgs& a) {
  const auto naming = ckpt::parse_naming(a.naming);
  if (!naming) throw Error(fmt::format("--naming '{}': expected official or hf", a.naming));
  a.opt.naming = *naming;
  a.opt.norm_bf16 = a.norm_dtype == "bf16";
  a.opt.final_norm = !a.no_final_norm;
  a.opt.config_json = !a.no_config;
  a.opt.head = !a.no_head;
  const MhcParams p = ckpt::example_params(a.opt);
  std::vector<std::string> written;
  for (const auto& name : ckpt::export_file_names()) {
    written.push_back((std::filesystem::path(a.dir) / name).string());
  }
  a.json.check({}, written);
  // The model is held once as weights and once more as the tensors being written; an MTP block
  // is one more layer.
  MhcParams all = p;
  all.layers = p.layers + a.opt.mtp;
  const auto weights = model_weight_bytes(all);
  require_host_memory(
      fmt::format("mhc export-example (C={} n={} layers={})", p.hidden, p.n, p.layers),
      {{"weights", weights}, {"tensors to write", weights}});
  const ckpt::ExportReport r = ckpt::export_example(a.dir, a.opt);
  if (!a.json.to_stdout()) print_report(a, p, r);
  a.json.emit(report_json(a, p, r));
}

}  // namespace

void register_export_example(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd =
      add_command(app, "export-example",
                  "Write a small synthetic checkpoint in the DeepSeek-V4.1 layout (shards + "
                  "model.safetensors.index.json) for `mhc run --weights`",
                  {"mhc export-example /tmp/ckpt --layers 4 && mhc run --weights /tmp/ckpt"});
  cmd->add_option("dir", a->dir, "Directory to write: new or empty (see --force)")->required();
  add_layers_option(cmd, a->opt.layers, "Decoder layers")->capture_default_str();
  add_hidden_option(cmd, a->opt.hidden, "Hidden size C")->capture_default_str();
  add_streams_option(cmd, a->opt.hc, "Residual streams n")->capture_default_str();
  cmd->add_option("--naming", a->naming,
                  "Tensor names: official (layers.{i}.hc_attn_fn) or hf "
                  "(model.layers.{i}.attn_hc.fn)")
      ->check(one_of({"official", "hf"}))
      ->capture_default_str();
  cmd->add_option("--seed", a->opt.seed, "Seed of the synthetic weights")
      ->check(integer_in<uint64_t>(0))
      ->capture_default_str();
  cmd->add_flag("--single-file", a->opt.single_file,
                "One model.safetensors instead of two shards + index");
  cmd->add_option("--norm-dtype", a->norm_dtype, "Dtype of the norm weights")
      ->check(one_of({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--no-final-norm", a->no_final_norm, "Leave out the final norm.weight");
  cmd->add_flag("--no-config", a->no_config, "Leave out config.json");
  cmd->add_flag("--no-head", a->no_head,
                "Leave out the head collapse's hc_head_fn/base/scale (docs/head.md)");
  cmd->add_option("--mtp", a->opt.mtp,
                  "MTP blocks to write after the trunk: each a layer's sites, its head collapse "
                  "and its final norm (docs/mtp.md)")
      ->check(integer_in(0, ckpt::kMaxExportMtp))
      ->capture_default_str();
  a->json.add_to(cmd);
  cmd->add_flag("--force", a->opt.force,
                "Write into a non-empty directory, replacing only the checkpoint files an "
                "earlier export-example wrote there");
  cmd->callback([a] { export_example(*a); });
}

}  // namespace mhc::cli
