#include "launch_head.hpp"

#include <vector>

#include "mhc/cpu/fp32_site.hpp"
#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/cuda/head.hpp"
#endif

namespace mhc::launch {

void head(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeights& w,
          const NormWeight& norm, Bf16* out, const Target& at) {
  if (at.cuda) {
#if MHC_WITH_CUDA
    cuda::HeadBuffers b;
    b.x = x;
    b.hc_fn = w.fn;
    b.hc_base = w.base;
    b.hc_scale = w.scale;
    b.out = out;
    if (norm.bf16) {
      b.norm_weight_bf16 = static_cast<const Bf16*>(norm.data);
    } else {
      b.norm_weight = static_cast<const float*>(norm.data);
    }
    cuda::head(p, tokens, b, cuda::LaunchTarget(reinterpret_cast<cudaStream_t>(at.stream), false));
    return;
#else
    throw ArgumentError(
        "the arrays are on a CUDA device, but mhc was built without the CUDA backend");
#endif
  }
  // The CPU backend reads an fp32 weight: a bf16 one widened (exactly).
  std::vector<float> widened;
  const float* weight = static_cast<const float*>(norm.data);
  if (norm.data != nullptr && norm.bf16) {
    const auto* bits = static_cast<const Bf16*>(norm.data);
    widened.resize(size_t(p.hidden));
    for (size_t i = 0; i < widened.size(); ++i) widened[i] = bf16_to_float(bits[i]);
    weight = widened.data();
  }
  cpu::head(p, tokens, x, HeadWeightsView{w.fn, w.base, w.scale, weight}, out);
}

}  // namespace mhc::launch
