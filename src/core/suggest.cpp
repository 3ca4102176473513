#include "mhc/core/suggest.hpp"

#include <fmt/core.h>

#include <algorithm>

namespace mhc {
namespace {

std::string_view without_dashes(std::string_view s) {
  while (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return s;
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known) {
  const std::string_view bare = without_dashes(typed);
  // A long value is no typo of a short name (and its edit distance would cost length^2).
  if (bare.empty() || bare.size() > 64) return "";
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const auto& name : known) {
    const std::string_view candidate = without_dashes(name);
    // A unique prefix counts as close: "dsv41" for "dsv41-flash".
    const size_t distance = (bare.size() >= 2 && candidate.substr(0, bare.size()) == bare)
                                ? 1
                                : edit_distance(bare, candidate);
    if (best == nullptr || distance < best_distance) {
      best = &name;
      best_distance = distance;
    }
  }
  if (best == nullptr) return "";
  // Close means at most one edit per three letters (and always one): typos, not other words.
  const size_t limit = std::max<size_t>(1, std::max(bare.size(), without_dashes(*best).size()) / 3);
  if (best_distance > limit) return "";
  return fmt::format(" (did you mean '{}'?)", *best);
}

}  // namespace mhc
