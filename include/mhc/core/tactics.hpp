// Tactics: what `mhc tune` measured on one GPU for one model shape (the largest batch up to which
// the overlap won at every measured size, with the runs behind it), loaded with
// --kernel-config '{"tactics": "FILE"}' and applied by the kernel plan (kernel_plan.hpp) in place
// of the architecture's built-in default. docs/tuning.md. Policy code: no CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/capability.hpp"

namespace mhc {

inline constexpr std::string_view kTacticsFormat = "mhc-tactics-1";

// One measured prenorm range: from the previous range's max_tokens + 1 (1 for the first) up to
// max_tokens (null in the file: every larger size), this kernel and split count.
struct PrenormTactic {
  int64_t max_tokens = 0;  // kNoTokenLimit (kernel_plan.hpp) for the last range
  std::string kernel;      // "mma16", "mma64" or "tma128"
  int splits = 1;
};

// One size of the overlap sweep (`mhc tune`, from `mhc bench overlap`): the overlap schedule's
// gain over the native one, in percent, in each round.
struct OverlapGains {
  int64_t tokens = 0;
  std::vector<double> gain_percent;  // one per round
};
// A size is won when its smallest gain over the rounds is above zero.
bool overlap_won(const OverlapGains& size);
// The largest size up to which every measured size was won (0: the smallest was lost). Throws
// mhc::Error when empty, on sizes not ascending, on a size without rounds or on a gain that is
// not finite.
int64_t overlap_threshold(const std::vector<OverlapGains>& sizes);

// One timing of the prenorm coefficient launch (`mhc tune`, from `mhc bench kernels --sweep`).
struct PrenormTiming {
  int64_t tokens = 0;
  std::string kernel;  // "mma16", "mma64" or "tma128"
  int splits = 1;
  double median_us = 0;
};
// Per measured size the fastest (kernel, splits); neighbouring sizes with the same winner are one
// range, which reaches up to its last measured size (the last range: every larger size). A size
// between two measured ones thus takes the smaller one's winner. Throws mhc::Error when empty.
std::vector<PrenormTactic> fastest_prenorm(const std::vector<PrenormTiming>& timings);

// One timing of a boundary in a stack graph (`mhc tune`, from `mhc bench kernels`): the site
// with the fused boundary kernel and with the two launches it replaces, at one size.
struct BoundaryTiming {
  int64_t tokens = 0;
  double fused_us = 0;
  double unfused_us = 0;
};
// The smallest measured size from which the fused site won (fused_us < unfused_us) at every
// measured size up to the largest; 0 where it lost at the largest (never fuse). Throws
// mhc::Error when empty or on a timing that is not positive.
int64_t fused_boundary_threshold(const std::vector<BoundaryTiming>& timings);

struct Tactics {
  std::string source;      // the file it was read from ("inline" when given as a JSON object)
  bool from_file = false;  // read from `source` by load()
  std::string gpu;         // device name
  ComputeCapability capability;
  int sm_count = 0;
  std::string commit, date;  // of the binary that measured, and when (UTC)
  int hidden = 0, n = 0, layers = 0;
  int overlap_max_tokens = 0;  // the chosen threshold (0: the overlap never won)
  std::string method;          // how the threshold was chosen
  // The fastest prenorm kernel and splits per token range (`mhc tune`; empty: the plan's own),
  // ascending, the last open-ended.
  std::vector<PrenormTactic> prenorm;
  // From this many tokens the fused boundary (0: never), at this shape (n) and any wider C
  // (`mhc tune`; none: the plan's built-in rule).
  std::optional<int64_t> fused_boundary_min_tokens;

  // Canonical JSON (keys sorted, no measurement rows, "prenorm" only when measured so that
  // older tactics keep their hashes): what the config hash covers.
  std::string to_json() const;
  std::string describe() const;  // "tactics FILE: overlap up to 32 tokens (NVIDIA H200, 9.0, ...)"
  // Parses and validates the text of a tactics file; errors name `source`.
  static Tactics parse(std::string_view json_text, const std::string& source);
  // Reads and parses a file; throws mhc::Error naming the path on any failure.
  static Tactics load(const std::string& path);
};

}  // namespace mhc
