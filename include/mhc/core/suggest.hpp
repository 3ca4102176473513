// "Did you mean" for a mistyped name (a kernel config key, a command, an option, a choice): the
// known name closest to what was typed, when it is close enough to be a typo and not another word.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mhc {

// Edit distance with adjacent transpositions (optimal string alignment): a swapped pair of letters
// is one edit, as people make them.
size_t edit_distance(std::string_view a, std::string_view b);

// " (did you mean 'X'?)" for the name in `known` closest to `typed`, or "" when none is close:
// at most one edit per three letters (and always one), or `typed` a prefix of at least two letters
// ("dsv41" for "dsv41-flash"). Leading dashes are ignored on both sides ("--tokns" against
// "--tokens"); a name typed longer than 64 bytes gets none. The suggestion is one of `known`, as
// given there.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace mhc
