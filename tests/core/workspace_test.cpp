// The raw prenorm GEMM's split layout (DeepGEMM's) and the caller-owned workspace layout.
#include "mhc/core/workspace.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "mhc/core/error.hpp"

namespace mhc {
namespace {

TEST(PrenormSplitRange, DealsBlocksInOrderFirstSplitsTakeTheRest) {
  // 10 blocks of 64 over 3 splits: 4, 3, 3 blocks.
  EXPECT_EQ(prenorm_split_range(640, 3, 0).begin, 0);
  EXPECT_EQ(prenorm_split_range(640, 3, 0).end, 256);
  EXPECT_EQ(prenorm_split_range(640, 3, 1).begin, 256);
  EXPECT_EQ(prenorm_split_range(640, 3, 1).end, 448);
  EXPECT_EQ(prenorm_split_range(640, 3, 2).end, 640);
  // More splits than blocks: the last ones are empty.
  EXPECT_EQ(prenorm_split_range(128, 4, 3).begin, prenorm_split_range(128, 4, 3).end);
}

TEST(PrenormSplitRange, ShapeChecks) {
  EXPECT_NO_THROW(check_prenorm_gemm_shape(0, 24, 20480, 16));
  EXPECT_THROW(check_prenorm_gemm_shape(-1, 24, 20480, 16), Error);
  EXPECT_THROW(check_prenorm_gemm_shape(4, 40, 20480, 16), Error);
  EXPECT_THROW(check_prenorm_gemm_shape(4, 24, 20480 + 32, 16), Error);
  EXPECT_THROW(check_prenorm_gemm_shape(4, 24, 20480, 0), Error);
}

TEST(WorkspaceLayout, DependsOnTheSizeOnlyAndServesItsTokens) {
  MhcParams p;  // C = 5120, n = 4
  for (int64_t tokens : {0, 1, 16, 129, 4096}) {
    const WorkspaceLayout w = workspace_layout(p, tokens);
    EXPECT_GE(w.max_tokens, tokens);
    const WorkspaceLayout back = workspace_layout_for_bytes(p, w.bytes);
    EXPECT_EQ(back.max_tokens, w.max_tokens);
    EXPECT_EQ(back.bytes, w.bytes);
    // Where the counters are does not depend on the size: calls with any token count agree.
    EXPECT_EQ(w.counters_offset, workspace_layout(p, 1).counters_offset);
    EXPECT_GE(w.counters * 16, w.max_tokens);
    EXPECT_EQ(w.partials_offset % 16, 0);
    EXPECT_GE(w.partials_offset, w.counters_offset + w.counters * 4);
  }
  EXPECT_EQ(workspace_layout_for_bytes(p, 100).max_tokens, 0);
  EXPECT_THROW(workspace_layout(p, -1), Error);
}

// A size computed from a caller's token count never wraps: every count up to INT64_MAX either
// gives a layout whose sizes fit an int64 or an error naming the count (was: signed overflow, and
// a negative size for 2^63-1).
TEST(WorkspaceLayout, HugeTokenCountsAreRefusedNotWrapped) {
  for (const MhcParams& p : {MhcParams{}, [] {
                               MhcParams q;
                               q.hidden = 1 << 20;
                               q.n = 8;
                               return q;
                             }()}) {
    for (int64_t tokens : {int64_t{1} << 40, int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<int64_t>::max() - 127}) {
      try {
        const WorkspaceLayout w = workspace_layout(p, tokens);
        EXPECT_GE(w.max_tokens, tokens);
        EXPECT_GT(w.bytes, w.partials_offset);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("max_tokens={}", tokens)),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("2^63-1 bytes"), std::string::npos) << e.what();
      }
    }
    // The largest count it takes has a positive size, and the layout of that many bytes agrees.
    int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();
    while (lo < hi) {  // the largest accepted count, by bisection
      const int64_t mid = lo + (hi - lo) / 2 + 1;
      try {
        workspace_layout(p, mid);
        lo = mid;
      } catch (const Error&) {
        hi = mid - 1;
      }
    }
    const WorkspaceLayout top = workspace_layout(p, lo);
    EXPECT_GT(top.bytes, 0);
    EXPECT_EQ(workspace_layout_for_bytes(p, top.bytes).max_tokens, top.max_tokens);
  }
  MhcParams p;
  // Sizes near the int64 ends: no overflow in the room left after the weight scratch.
  EXPECT_EQ(workspace_layout_for_bytes(p, std::numeric_limits<int64_t>::min()).max_tokens, 0);
  EXPECT_GT(workspace_layout_for_bytes(p, std::numeric_limits<int64_t>::max()).bytes, 0);
}

}  // namespace
}  // namespace mhc
