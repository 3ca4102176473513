// The report of `mhc run`: text for people and, with --json [FILE], one JSON object (on stdout
// instead of the text, or in FILE). Collects pass/fail of every check so the command can exit
// non-zero when any fails.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/core/backend.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"
#include "options.hpp"
#include "run_checks.hpp"

namespace mhc::cli {

class RunReport {
 public:
  explicit RunReport(const JsonOutput& json) : json_(json), text_(!json.to_stdout()) {}
  void header(const std::string& preset_name, const MhcParams& p, int64_t tokens, uint64_t seed,
              const Backend& backend, const KernelConfig& cfg);
  void dispatch(const DispatchDecision& d, bool on_gpu);
  // The kernel plan in force (kernel_plan.hpp) and the switches that change it.
  void plan(const KernelPlan& plan);
  // Native and overlap schedules side by side at this size (a row of the overlap measurement).
  void schedules(const nlohmann::json& row);
  void gpu_forward(const std::string& mode, bool overlapped, bool graph_replayed, bool sync_checked,
                   const std::string& trace_path);
  void site_check(const SiteCheck& c, const Tolerances& tol);
  void stack_check(const StackTrace& trace, const StackReference& ref, const MhcParams& p,
                   int64_t tokens);
  void head_check(const HeadCheck& c, const Tolerances& tol);
  // The MTP blocks (docs/mtp.md): none, or each block's checks; `trunk_layers` sets the depth
  // their stack bounds are taken at (the blocks carry the trunk's rounding noise).
  void mtp_checks(const std::vector<MtpCheck>& checks, int trunk_layers, const Tolerances& tol);
  void timing(const SiteTiming& t, const MhcParams& p, int64_t tokens);
  void finish();
  bool all_passed() const { return failures_ == 0; }

 private:
  void check_line(const std::string& what, const ErrorStats& e, double tol, nlohmann::json& into,
                  bool print = true);
  const JsonOutput& json_;
  bool text_;  // print the text report (not when the JSON report takes stdout)
  int failures_ = 0;
  nlohmann::json doc_;
};

}  // namespace mhc::cli
