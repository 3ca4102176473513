// Heuristics of the kernel plan for every GPU without its own table: the portable register-fed
// kernels. Never measured off Hopper: the cut-offs are the H200's (plan_sm90.cpp).
#include "mhc/core/kernel_plan.hpp"

namespace mhc {

ArchRules sm80_rules() {
  ArchRules r = sm90_rules();
  r.name = "sm80";
  r.measured = "not measured on this architecture: the H200's register-kernel cut-offs";
  r.tma128_from_tokens.reset();
  r.pdl = false;
  r.overlap = OverlapAvailability::never;
  r.overlap_side_ctas = 0;  // no side stream
  r.overlap_max_tokens = 16;
  // Flagged partials were measured on Hopper only: the arrival counter here (kernel config
  // flagged_partials turns them on).
  r.flagged_partials_max_tokens = 0;
  // The decode splits of one register stage were measured on Hopper, where the stage's hc_fn
  // loads are issued before the PDL wait: 40 here.
  r.decode_stage_k = 0;
  return r;
}

}  // namespace mhc
