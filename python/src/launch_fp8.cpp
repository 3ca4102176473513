#include "launch_fp8.hpp"

#include "mhc/cpu/fp8.hpp"
#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/cuda/kernels.hpp"
#endif

namespace mhc::launch {

void quantize_fp8(int64_t tokens, int hidden, const Bf16* rows, const Fp8Output& out,
                  const Target& at) {
  check_fp8_format(out.format, hidden, "quantize_fp8");
  if (tokens == 0) return;
  if (at.cuda) {
#if MHC_WITH_CUDA
    cuda::quantize_fp8(tokens, hidden, rows, out,
                       cuda::LaunchTarget(reinterpret_cast<cudaStream_t>(at.stream), false));
    return;
#else
    throw ArgumentError(
        "the arrays are on a CUDA device, but mhc was built without the CUDA backend");
#endif
  }
  fp8_quantize_rows(rows, tokens, hidden, out.format, out.codes, out.scales);
}

}  // namespace mhc::launch
