// Kernel configuration, parsed from JSON text the way an engine takes
// --kernel-config '{"enable_mhc_overlap": true}'. Policy code: no CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

  // Throws mhc::Error naming the unknown key, the key with the wrong type or value, or the byte
  // position of broken JSON. "" and "{}" give the defaults.
  static KernelConfig parse(std::string_view json_text);

  // Canonical JSON with every field (null where unset), keys sorted; batch_invariant only when
  // true, so that every config recorded before the key existed keeps its bytes and hash.
  std::string to_json() const;
  // Stable across runs, machines and builds: FNV-1a 64 over to_json(). Covers every field, since
  // each changes either the numbers (projection) or the captured graph (overlap, threshold).
  uint64_t hash() const;
  // Human one-liner, e.g. "enable_mhc_overlap=unset overlap_max_tokens=default projection=tf32"
  // (and " batch_invariant=on" when on).
  std::string describe() const;
};

}  // namespace mhc
