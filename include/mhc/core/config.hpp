// Kernel configuration, parsed from JSON text the way an engine takes
// --kernel-config '{"enable_mhc_overlap": true}'. Policy code: no CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mhc/core/tactics.hpp"

namespace mhc {

enum class Projection { tf32, fp32 };
std::string_view to_string(Projection p);

struct KernelConfig {
  // null: automatic (on for the SM100 family, off on SM90); true: also permits SM90; false: off.
  std::optional<bool> enable_mhc_overlap;
  // null: the architecture's default (see default_overlap_max_tokens in dispatch.hpp).
  std::optional<int> overlap_max_tokens;
  Projection projection = Projection::tf32;
  // Every kernel reduces a token's values in one fixed order whatever the batch: a token's
  // outputs are bitwise those it gets alone (docs/batch_invariance.md). Costs some speed.
  bool batch_invariant = false;

  // Kernel-plan switches (mhc/core/kernel_plan.hpp), for debugging in production the way the
  // engines' environment switches are; unset: the plan decides. Written to to_json() only when
  // set, so the hashes of configs without them are unchanged.
  std::optional<std::string> prenorm_kernel;  // "mma16", "mma64" or "tma128" at every size
  std::optional<int> prenorm_splits;          // K splits at every size
  std::optional<bool> fused_input;            // false: never; true: wherever 16-row tiles run
  std::optional<bool> folded_post;            // false: never; true: wherever the input fuses
  std::optional<bool> cluster_post;           // false: never; true: at every size it fits (sm_90)
  // The plain post (no next input path) by 8-column vectors over many CTAs: false: never (one
  // CTA per token); true: at every size. Both give the same bits.
  std::optional<bool> post_columns;
  // The TMA prenorm kernel's splits of a tile as one cluster (sm_90a): false: never; true: the
  // plan's default, wherever the clusters fit.
  std::optional<bool> cluster_epilogue;
  std::optional<bool> fused_boundary;  // false: never; true: wherever eligible (sm_90)
  // The 16-row decode kernel's flagged partials (decode_flagged.cuh): false: never (the arrival
  // counter); true: wherever they fit, at every token count.
  std::optional<bool> flagged_partials;
  std::optional<bool> pdl;  // programmatic dependent launch; true needs the sm_90 instructions
  // CTAs in all for the overlap's side-stream coefficient launch (0: one per split).
  std::optional<int> overlap_side_ctas;
  // Measured by `mhc tune`: "tactics": "FILE" (loaded and validated at parse) or the object.
  std::optional<Tactics> tactics;

  // Throws mhc::Error naming the unknown key, the key with the wrong type or value, or the byte
  // position of broken JSON. "" and "{}" give the defaults.
  static KernelConfig parse(std::string_view json_text);

  // Canonical JSON, keys sorted: the first three fields always (null where unset), the plan
  // switches and the tactics (as an object) where set, batch_invariant only when true, so that
  // every config recorded before those keys existed keeps its bytes and hash.
  std::string to_json() const;
  // Stable across runs, machines and builds: FNV-1a 64 over to_json(). Covers every field, since
  // each changes either the numbers (projection) or the captured graph (overlap, threshold).
  uint64_t hash() const;
  // Human one-liner, e.g. "enable_mhc_overlap=unset overlap_max_tokens=default projection=tf32"
  // (and " batch_invariant=on" when on).
  std::string describe() const;
};

}  // namespace mhc
