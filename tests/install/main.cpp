// Uses the installed library the way an engine would: the umbrella header, the version, and one
// call into the CPU backend (so the static libraries really link).
#include <cstdio>
#include <mhc/core/version.hpp>
#include <mhc/mhc.hpp>
#include <vector>

int main() {
  mhc::MhcParams p;
  p.hidden = 64;
  const std::vector<mhc::Bf16> x(size_t(p.k()), mhc::float_to_bf16(1.0f));
  const std::vector<float> pre_mix(size_t(p.n), 0.25f);
  std::vector<mhc::Bf16> out(size_t(p.hidden));
  mhc::cpu::input_path(p, 1, x.data(), pre_mix.data(), nullptr, out.data());
#if defined(MHC_WITH_CUDA)
  const char* cuda = "cuda";
#else
  const char* cuda = "cpu-only";
#endif
  std::printf("mhc %.*s %s collapse=%g\n", int(mhc::kVersion.size()), mhc::kVersion.data(), cuda,
              double(mhc::bf16_to_float(out[0])));
  return mhc::bf16_to_float(out[0]) == 1.0f ? 0 : 1;
}
