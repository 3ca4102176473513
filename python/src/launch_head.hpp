// The head collapse (docs/head.md) in the launch adapter (launch.hpp): the CPU backend for CPU
// arrays, the CUDA kernel for CUDA arrays. No torch and no nanobind here.
#pragma once
#include <cstdint>

#include "launch.hpp"

namespace mhc::launch {

struct HeadWeights {  // hc_fn [n, n*C], hc_base [n], hc_scale [1], fp32
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
};

// out [T, C] = bf16(sum_j w_j x_j) with w = sigmoid(rms-normalised projection * scale + base) +
// hc_eps (p.pre_eps()), normalised with `norm` where it is given (norm.data null: the collapse
// alone). A bf16 norm weight needs no scratch: the CUDA kernel widens it as it reads it. On CUDA
// the caller has made at.device current; the launch goes without programmatic dependent launch.
void head(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeights& w,
          const NormWeight& norm, Bf16* out, const Target& at);

}  // namespace mhc::launch
