// FP8 layer inputs (docs/fp8.md): layer_input as E4M3 codes [T, C] plus float32 scales per
// (token, group of group_size columns), the quantisation of vLLM's per_token_group_quant_fp8
// applied to the bf16 layer_input. This header holds the format and the scales' layouts: plain
// C++, shared by the kernels' launchers, the C++ API, the CPU reference and the torch ops.
#pragma once
#include <cstdint>

namespace mhc {

// The group size every FP8 path takes (DeepSeek-V4.x's activation blocks, DeepGEMM's SM90 FP8
// GEMM's); the kernels' group reduction is a half-warp of 16-byte vectors of bf16.
inline constexpr int kFp8GroupSize = 128;
// E4M3's largest finite value (torch.finfo(torch.float8_e4m3fn).max) and the floor of a group's
// amax (vLLM's eps, 1e-10), which also floors the UE8M0 scale before its rounding up.
inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp8AmaxFloor = 1e-10f;

// How layer_input is quantised and where its scales go. Scales of token t and group g:
// row-major at t * G + g (a [T, G] tensor); column-major at g * round_up(T, 4) + t, DeepGEMM's
// SM90 layout for the activations' scales (MN-major, the token dimension padded to 16 bytes for
// its TMA loads; a [T, G] view with strides (1, round_up(T, 4))). ue8m0: every scale the power of
// two at or above amax / 448 (exponent-only scales).
//
// fold_norm (opt-in): where the fused boundary kernel learns a row's RMSNorm factor only after
// the whole row is formed (its wide stages), it quantises y * w per group as it forms the row and
// multiplies the group's scale by the factor afterwards (the "folded" form: no staged y, no
// read-back), instead of staging y and quantising bf16(y * factor * w) in a second pass (the
// "staged" form, the default). The folded codes and scales are not bitwise the bf16
// layer_input's quantised (docs/fp8.md gives the bounds), and on an H100 the folded kernel was
// measured slower than the staged one; UE8M0 scales cannot absorb the factor, so they keep the
// staged form. Every other FP8 path has the whole row at once and ignores it (docs/decisions.md,
// "The FP8 boundary stages by default; folding the norm is opt-in").
struct Fp8Format {
  int group_size = kFp8GroupSize;
  bool column_major_scales = false;
  bool ue8m0 = false;
  bool fold_norm = false;
};

// An FP8 layer_input in device memory: E4M3 codes [T, C] (float8_e4m3fn bits, 16-byte aligned)
// and float32 scales laid out as `format` says; the values of vLLM's per_token_group_quant_fp8
// of the bf16 layer_input (docs/fp8.md).
struct Fp8Output {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  Fp8Format format;
};

inline int64_t fp8_groups(int64_t hidden, const Fp8Format& f) { return hidden / f.group_size; }
// Tokens rounded up to 4: the column-major layout's stride between groups.
inline int64_t fp8_aligned_tokens(int64_t tokens) { return (tokens + 3) / 4 * 4; }
// Elements between the scales of consecutive tokens, and of consecutive groups.
inline int64_t fp8_scale_token_stride(int64_t hidden, const Fp8Format& f) {
  return f.column_major_scales ? 1 : fp8_groups(hidden, f);
}
inline int64_t fp8_scale_group_stride(int64_t tokens, const Fp8Format& f) {
  return f.column_major_scales ? fp8_aligned_tokens(tokens) : 1;
}
// Floats the scales of `tokens` tokens occupy (with the column-major padding).
inline int64_t fp8_scale_floats(int64_t tokens, int64_t hidden, const Fp8Format& f) {
  return (f.column_major_scales ? fp8_aligned_tokens(tokens) : tokens) * fp8_groups(hidden, f);
}
inline int64_t fp8_scale_index(int64_t token, int64_t group, int64_t tokens, int64_t hidden,
                               const Fp8Format& f) {
  return token * fp8_scale_token_stride(hidden, f) + group * fp8_scale_group_stride(tokens, f);
}

// Throws mhc::Error unless the format is one the kernels write for hidden size `hidden`:
// group_size 128 and C a multiple of it. `what` names the caller in the message.
void check_fp8_format(const Fp8Format& f, int64_t hidden, const char* what);

}  // namespace mhc
