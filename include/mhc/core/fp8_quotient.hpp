// The FP8 quantiser's quotient v / s (docs/fp8.md, step 4) without a division per value: plain
// C++, compiled for the host (its test) and the device (fp8.cuh's quantiser).
//
// Every value of a 128-column group is divided by the group's one scale s. An IEEE float32
// division per value (__fdiv_rn) is a subroutine of a dozen instructions with a slow-path branch;
// in a row kernel at decode, one CTA forms a whole row and its threads each divide dozens of
// values in series. Here the scale's reciprocal r = RN(1 / s) is formed once per group, and each
// value takes a multiply and two fused multiply-adds:
//   q0 = RN(v * r),  e = v - q0 * s (exact, one FMA),  q = RN(q0 + e * r)   (one FMA)
// Markstein's theorem: where r is 1 / s correctly rounded and q0 is within one ulp of v / s, q is
// v / s correctly rounded, as long as nothing underflows; so q is the division's bits. The scale
// lies in [1e-10 / 448, bf16's largest / 448], so r is a normal number, and |v| <= amax keeps
// |v / s| near 448 at most. The remainder e underflows only for |v| below about 2^-100, and the
// quotient only below 2^-126: there |v / s| < 2^-58 and both forms give E4M3's zero of v's
// sign, so the codes still agree where the quotients' bits may not. A scale
// of infinity (a group holding an infinity) has r = 0, where the identity fails: the caller
// divides instead (fp8_quotient_exact). tests/core/fp8_quotient_test.cpp checks the identity
// against the division for every bf16 value over thousands of scales, and that the plain
// product v * r would not pass the same check.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define MHC_FP8_QUOTIENT_FN __host__ __device__ __forceinline__
#else
#define MHC_FP8_QUOTIENT_FN inline
#endif

namespace mhc {

// v / s rounded to nearest even, from r = RN(1 / s) (r a normal number, not zero).
MHC_FP8_QUOTIENT_FN float fp8_quotient(float v, float s, float r) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(v, r);  // never contracted into a neighbouring add
#else
  const float q0 = v * r;
#endif
  const float e = fmaf(-q0, s, v);
  return e == 0.0f ? q0 : fmaf(e, r, q0);  // q0 exact (-0 among them: + 0 would make it +0)
}

// Whether fp8_quotient holds for the reciprocal r of a scale: r finite and not zero (a scale of
// infinity, or one so large that r is subnormal, falls back to the division).
MHC_FP8_QUOTIENT_FN bool fp8_quotient_exact(float r) {
  return r >= 1.17549435e-38f && r <= 3.40282347e38f;  // a normal positive float
}

}  // namespace mhc

#undef MHC_FP8_QUOTIENT_FN
