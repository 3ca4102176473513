// The T-step Sinkhorn projection of the design doc ("One site", step 2), written once for the
// fp32 CPU backend (T = float) and the float64 reference (T = double).
//   P = softmax over k of logits[j][:] (max-subtracted), P += eps_h; column pass; then T-1 times
//   row pass, column pass. Row j is the source stream. Ends on a column pass.
#pragma once
#include <algorithm>
#include <cmath>

namespace mhc::cpu::detail {

// Count is int, or std::integral_constant<int, 4> for DeepSeek-V4's n = 4 (sinkhorn below picks
// it): the same code and the same IEEE operations in the same order, so the same bits, but the
// compiler unrolls the loops and divides a row's or column's four elements at once. Most of a
// 1-token coefficient call's time on the CPU backend was this function with a run-time n.

// P[j][k] /= (sum_k P[j][k] + eps_h).
template <typename T, typename Count = int>
void sinkhorn_row_pass(Count n, T eps_h, T* P) {
  for (int j = 0; j < n; ++j) {
    T sum = 0;
    for (int k = 0; k < n; ++k) sum += P[j * n + k];
    const T denom = sum + eps_h;
    for (int k = 0; k < n; ++k) P[j * n + k] /= denom;
  }
}

// P[j][k] /= (sum_j P[j][k] + eps_h).
template <typename T, typename Count = int>
void sinkhorn_column_pass(Count n, T eps_h, T* P) {
  for (int k = 0; k < n; ++k) {
    T sum = 0;
    for (int j = 0; j < n; ++j) sum += P[j * n + k];
    const T denom = sum + eps_h;
    for (int j = 0; j < n; ++j) P[j * n + k] /= denom;
  }
}

template <typename T, typename Count>
void sinkhorn_of(Count n, int iters, T eps_h, const T* logits, T* comb) {
  for (int j = 0; j < n; ++j) {
    const T* row = logits + j * n;
    T* out = comb + j * n;
    const T row_max = *std::max_element(row, row + n);
    T sum = 0;
    for (int k = 0; k < n; ++k) {
      out[k] = std::exp(row[k] - row_max);
      sum += out[k];
    }
    for (int k = 0; k < n; ++k) out[k] = out[k] / sum + eps_h;
  }
  sinkhorn_column_pass(n, eps_h, comb);
  for (int it = 1; it < iters; ++it) {
    sinkhorn_row_pass(n, eps_h, comb);
    sinkhorn_column_pass(n, eps_h, comb);
  }
}

template <typename T>
void sinkhorn(int n, int iters, T eps_h, const T* logits, T* comb) {
  if (n == 4) return sinkhorn_of(std::integral_constant<int, 4>{}, iters, eps_h, logits, comb);
  sinkhorn_of(n, iters, eps_h, logits, comb);
}

}  // namespace mhc::cpu::detail
