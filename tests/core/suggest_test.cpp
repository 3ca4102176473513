// "Did you mean": the edit distance it ranks by, and when a name counts as close.
#include "mhc/core/suggest.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mhc {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", "abc"), 0u);
  EXPECT_EQ(edit_distance("abc", "abd"), 1u);
  EXPECT_EQ(edit_distance("abc", "ab"), 1u);
  EXPECT_EQ(edit_distance("ab", "abc"), 1u);
  EXPECT_EQ(edit_distance("abcd", "abdc"), 1u);  // a swapped pair is one typo
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(DidYouMean, NamesTheClosestKnownName) {
  const std::vector<std::string> known = {"run", "site", "dispatch", "export-example"};
  EXPECT_EQ(did_you_mean("rn", known), " (did you mean 'run'?)");
  EXPECT_EQ(did_you_mean("dispach", known), " (did you mean 'dispatch'?)");
  EXPECT_EQ(did_you_mean("export-exmaple", known), " (did you mean 'export-example'?)");
  EXPECT_EQ(did_you_mean("export", known), " (did you mean 'export-example'?)");  // a prefix
}

TEST(DidYouMean, IgnoresLeadingDashes) {
  EXPECT_EQ(did_you_mean("--tokns", {"--tokens", "--hidden"}), " (did you mean '--tokens'?)");
}

TEST(DidYouMean, SaysNothingWhenNothingIsClose) {
  const std::vector<std::string> known = {"run", "site", "dispatch"};
  EXPECT_EQ(did_you_mean("zebra", known), "");
  EXPECT_EQ(did_you_mean("", known), "");
  EXPECT_EQ(did_you_mean("r", {}), "");
  EXPECT_EQ(did_you_mean(std::string(65, 'r'), known), "");  // no quadratic cost for a long value
}

}  // namespace
}  // namespace mhc
