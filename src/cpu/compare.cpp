// Error of an output against the float64 reference (see mhc/cpu/compare.hpp).
#include "mhc/cpu/compare.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace mhc {

namespace {

// Shared by the float and bf16 overloads; `value(i)` gives out[i] as double.
template <typename Value>
ErrorStats compare_values(Value value, const double* ref, int64_t count) {
  ErrorStats stats;
  stats.count = std::max<int64_t>(count, 0);
  double diff_sq = 0, ref_sq = 0, max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double out = value(i);
    // A non-finite output fails the comparison by itself; leaving it out of the sums keeps the
    // other numbers meaningful for the report.
    if (!std::isfinite(out)) {
      if (stats.nonfinite++ == 0) stats.first_nonfinite = i;
      continue;
    }
    const double diff = std::abs(out - ref[i]);
    diff_sq += diff * diff;
    ref_sq += ref[i] * ref[i];
    // std::max would drop a NaN reference; propagate it so the comparison cannot pass.
    max_diff = (diff > max_diff || std::isnan(diff)) ? diff : max_diff;
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  // When the reference is all zeros, a relative error is meaningless: report the absolute one.
  stats.rel_norm = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  stats.max_abs_rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  return stats;
}

}  // namespace

std::string ErrorStats::describe() const {
  const std::string where =
      nonfinite > 0 ? fmt::format(" (first at flat element {})", first_nonfinite) : "";
  return fmt::format("rel_norm={:.3e} max_abs_rel={:.3e} nonfinite={}{} count={}", rel_norm,
                     max_abs_rel, nonfinite, where, count);
}

ErrorStats compare(const float* out, const double* ref, int64_t count) {
  return compare_values([out](int64_t i) { return double(out[i]); }, ref, count);
}

ErrorStats compare(const Bf16* out, const double* ref, int64_t count) {
  return compare_values([out](int64_t i) { return double(bf16_to_float(out[i])); }, ref, count);
}

}  // namespace mhc
