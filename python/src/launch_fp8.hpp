// The FP8 layer input's quantisation in the launch adapter (launch.hpp, docs/fp8.md): the
// reference quantiser for CPU arrays, the CUDA group quantisation for CUDA arrays. No torch and
// no nanobind here.
#pragma once
#include <cstdint>

#include "launch.hpp"
#include "mhc/core/fp8.hpp"

namespace mhc::launch {

// Quantises bf16 rows [T, C] into out's codes and scales (its format checked here). On CUDA the
// caller has made at.device current; the launch goes on at.stream.
void quantize_fp8(int64_t tokens, int hidden, const Bf16* rows, const Fp8Output& out,
                  const Target& at);

}  // namespace mhc::launch
