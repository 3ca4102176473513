// Sinkhorn: the properties of its result, T=1 by direct formula, and fp32 against float64.
#include "../src/cpu/sinkhorn.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

constexpr int kIters = 20;
constexpr double kEpsH = 1e-6;

// Logits like the model's: N(0,1) * scale plus `diagonal` on j == k.
std::vector<float> random_logits(int n, double scale, double diagonal, test::TestRng& rng) {
  std::vector<float> logits(size_t(n * n));
  for (int i = 0; i < n * n; ++i) {
    logits[size_t(i)] = float(rng.normal() * scale + (i / n == i % n ? diagonal : 0.0));
  }
  return logits;
}

struct Sums {
  double worst_row = 0, worst_column = 0;
};

template <typename T>
Sums sums_of(int n, const std::vector<T>& comb) {
  Sums s;
  for (int a = 0; a < n; ++a) {
    double row = 0, column = 0;
    for (int b = 0; b < n; ++b) {
      row += double(comb[size_t(a * n + b)]);
      column += double(comb[size_t(b * n + a)]);
    }
    s.worst_row = std::max(s.worst_row, std::abs(row - 1));
    s.worst_column = std::max(s.worst_column, std::abs(column - 1));
  }
  return s;
}

struct LogitCase {
  double scale, diagonal;
};

class SinkhornProperties : public ::testing::TestWithParam<int> {};

// Ends on a column pass, so columns sum to S / (S + eps_h) = 1 - O(eps_h). T=20 row passes do not
// make a near-sparse matrix doubly stochastic (Sinkhorn converges slowly there), so rows are only
// near 1: the worst measured deviation over random cases is about 0.11 (n=8).
TEST_P(SinkhornProperties, NonNegativeColumnsSumToOneRowsNearOne) {
  const int n = GetParam();
  test::TestRng rng(700 + uint64_t(n));
  const LogitCase cases[] = {{1, 0}, {1, 3}, {4, 3}, {10, 0}, {50, 3}, {200, 0}, {1e4, 0}};
  for (const LogitCase& lc : cases) {
    for (int trial = 0; trial < 50; ++trial) {
      const std::vector<float> logits = random_logits(n, lc.scale, lc.diagonal, rng);
      std::vector<float> comb(logits.size(), std::nanf(""));
      cpu::sinkhorn(n, kIters, float(kEpsH), logits.data(), comb.data());
      const std::vector<double> logits_d(logits.begin(), logits.end());
      std::vector<double> want(logits.size(), std::nan(""));
      ref::sinkhorn(n, kIters, kEpsH, logits_d.data(), want.data());
      for (size_t i = 0; i < comb.size(); ++i) {
        ASSERT_TRUE(std::isfinite(comb[i]) && comb[i] >= 0) << "scale " << lc.scale;
        ASSERT_TRUE(std::isfinite(want[i]) && want[i] >= 0) << "scale " << lc.scale;
      }
      const Sums got = sums_of(n, comb), ref_sums = sums_of(n, want);
      EXPECT_LE(got.worst_column, 1e-5) << "scale " << lc.scale;
      EXPECT_LE(ref_sums.worst_column, 1e-5) << "scale " << lc.scale;
      EXPECT_LE(got.worst_row, 0.15) << "scale " << lc.scale;
      const ErrorStats e = compare(comb.data(), want.data(), int64_t(comb.size()));
      EXPECT_TRUE(e.passes(kFp32Tolerances.coefficients))
          << "scale " << lc.scale << ": " << e.describe();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, SinkhornProperties, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// A dense matrix (logits of order 1, no diagonal bias) converges: 20 iterations make it doubly
// stochastic to within 1e-4, and more iterations do not move it further from that.
TEST(Sinkhorn, DenseMatrixBecomesDoublyStochastic) {
  test::TestRng rng(710);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<double> logits = [&] {
      const std::vector<float> f = random_logits(4, 0.5, 0.0, rng);
      return std::vector<double>(f.begin(), f.end());
    }();
    std::vector<double> t20(16), t200(16);
    ref::sinkhorn(4, 20, kEpsH, logits.data(), t20.data());
    ref::sinkhorn(4, 200, kEpsH, logits.data(), t200.data());
    EXPECT_LE(sums_of(4, t20).worst_row, 1e-4);
    EXPECT_LE(sums_of(4, t200).worst_row, sums_of(4, t20).worst_row + 1e-12);
  }
}

// T = 1 is the row softmax (+eps_h) followed by one column pass: computed here by formula.
TEST(Sinkhorn, OneIterationIsSoftmaxThenColumnPass) {
  test::TestRng rng(720);
  const int n = 4;
  for (double scale : {1.0, 30.0}) {
    const std::vector<float> logits = random_logits(n, scale, 2.0, rng);
    double P[4][4];
    for (int j = 0; j < n; ++j) {
      double denom = 0;
      for (int k = 0; k < n; ++k) denom += std::exp(double(logits[size_t(j * n + k)]));
      for (int k = 0; k < n; ++k)
        P[j][k] = std::exp(double(logits[size_t(j * n + k)])) / denom + kEpsH;
    }
    std::vector<double> want(size_t(n * n));
    for (int k = 0; k < n; ++k) {
      const double column = P[0][k] + P[1][k] + P[2][k] + P[3][k];
      for (int j = 0; j < n; ++j) want[size_t(j * n + k)] = P[j][k] / (column + kEpsH);
    }
    std::vector<float> got(size_t(n * n), std::nanf(""));
    cpu::sinkhorn(n, 1, float(kEpsH), logits.data(), got.data());
    const std::vector<double> logits_d(logits.begin(), logits.end());
    std::vector<double> got_ref(size_t(n * n), std::nan(""));
    ref::sinkhorn(n, 1, kEpsH, logits_d.data(), got_ref.data());
    EXPECT_TRUE(compare(got.data(), want.data(), n * n).passes(1e-6));
    for (int i = 0; i < n * n; ++i) EXPECT_NEAR(got_ref[size_t(i)], want[size_t(i)], 1e-12);
  }
}

// n = 4 runs the loops with a compile-time count (sinkhorn.hpp), which the compiler unrolls and
// vectorises: the same bits as the run-time loops, for float and double, over logits from near
// uniform to near sparse and iteration counts from 1 to 50.
TEST(Sinkhorn, FourStreamsUnrolledAreTheRunTimeLoopsBitwise) {
  test::TestRng rng(730);
  const std::integral_constant<int, 4> four;
  for (double scale : {0.1, 1.0, 4.0, 50.0, 1e4}) {
    for (int iters : {1, 2, 20, 50}) {
      const std::vector<float> logits = random_logits(4, scale, 3.0, rng);
      std::vector<float> unrolled(16, std::nanf("")), loops(16, std::nanf(""));
      cpu::detail::sinkhorn_of(four, iters, float(kEpsH), logits.data(), unrolled.data());
      cpu::detail::sinkhorn_of(4, iters, float(kEpsH), logits.data(), loops.data());
      EXPECT_EQ(std::memcmp(unrolled.data(), loops.data(), sizeof(float) * 16), 0)
          << "float, scale " << scale << ", " << iters << " iterations";
      const std::vector<double> logits_d(logits.begin(), logits.end());
      std::vector<double> unrolled_d(16, std::nan("")), loops_d(16, std::nan(""));
      cpu::detail::sinkhorn_of(four, iters, kEpsH, logits_d.data(), unrolled_d.data());
      cpu::detail::sinkhorn_of(4, iters, kEpsH, logits_d.data(), loops_d.data());
      EXPECT_EQ(std::memcmp(unrolled_d.data(), loops_d.data(), sizeof(double) * 16), 0)
          << "double, scale " << scale << ", " << iters << " iterations";
    }
  }
}

// Identical rows of logits: every row softmax is the same, the column pass makes each column
// sum to 1, so every entry is 1/n (up to eps_h) whatever the iteration count.
TEST(Sinkhorn, IdenticalRowsGiveUniformMatrix) {
  const int n = 4;
  std::vector<float> logits(16);
  for (int i = 0; i < 16; ++i) logits[size_t(i)] = float(i % n) * 3.0f;  // rows 0,3,6,9
  std::vector<float> comb(16, std::nanf(""));
  cpu::sinkhorn(n, kIters, float(kEpsH), logits.data(), comb.data());
  for (float v : comb) EXPECT_NEAR(v, 0.25, 1e-5);
}

}  // namespace
}  // namespace mhc
