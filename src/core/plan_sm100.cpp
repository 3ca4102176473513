// Blackwell (the SM100 family: 10.0, 10.3) heuristics of the kernel plan. Nothing was measured
// on Blackwell: the register-fed kernels with the H200's cut-offs, no TMA kernel (its body is in
// the sm_90a image only, so the plan never offers it here, not even when forced) and upstream's
// automatic overlap up to 16 tokens (derived from GB200). Used only where the binary holds SM100
// code (rules_for).
#include "mhc/core/kernel_plan.hpp"

namespace mhc {

ArchRules sm100_rules() {
  ArchRules r = sm90_rules();
  r.name = "sm100";
  r.measured = "not measured on Blackwell: the H200's register-kernel cut-offs; overlap: upstream";
  r.tma128_from_tokens.reset();
  r.pdl = true;
  r.overlap = OverlapAvailability::automatic;
  r.overlap_max_tokens = 16;
  // Flagged partials were measured on Hopper only: the arrival counter here (kernel config
  // flagged_partials turns them on).
  r.flagged_partials_max_tokens = 0;
  // The decode splits of one register stage were measured on Hopper only: 40 here.
  r.decode_stage_k = 0;
  // overlap_side_ctas: the H200's (the same bits whatever it is; its speed unmeasured here).
  return r;
}

}  // namespace mhc
