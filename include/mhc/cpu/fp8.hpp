// The reference quantiser of the FP8 layer input (docs/fp8.md): vLLM's per_token_group_quant_fp8
// on bf16 values, in float32 as its CUDA kernel computes it, and E4M3 encoded by exact round to
// nearest even. The kernels are tested bitwise against it.
#pragma once
#include <cstdint>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/fp8.hpp"

namespace mhc {

// E4M3 (float8_e4m3fn) code of a finite float with |v| <= 448, rounded to nearest even (the
// sign of zero kept); the value of a code (NaN for 0x7f and 0xff).
uint8_t e4m3_from_float(float v);
float e4m3_to_float(uint8_t code);

// The scale of a group whose largest magnitude is amax: max(amax, 1e-10) / 448, or with ue8m0
// the power of two at or above max(that, 1e-10).
float fp8_group_scale(float amax, bool ue8m0);
// One value's code under `scale`: e4m3(clamp(v / scale, -448, 448)), the division in float32.
uint8_t fp8_quantize(float v, float scale);

// Quantises rows [T, C] of bf16 values into codes [T, C] and scales laid out as `f` says
// (mhc/core/fp8.hpp; the column-major padding left as it was). Sizes are the caller's.
void fp8_quantize_rows(const Bf16* rows, int64_t tokens, int64_t hidden, const Fp8Format& f,
                       uint8_t* codes, float* scales);

// The dequantised value of code (t, c): e4m3_to_float(code) * its group's scale.
std::vector<double> fp8_dequantize_rows(const uint8_t* codes, const float* scales, int64_t tokens,
                                        int64_t hidden, const Fp8Format& f);

}  // namespace mhc
