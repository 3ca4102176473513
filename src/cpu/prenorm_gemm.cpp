// The raw split partials of the prenorm GEMM on the CPU (fp32; see mhc/cpu/fp32_site.hpp).
#include <vector>

#include "internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cpu/fp32_site.hpp"

namespace mhc::cpu {

void prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                  const float* fn, float* out, float* sqrsum) {
  check_prenorm_gemm_shape(tokens, nmix, k, splits);
  if (tokens == 0) return;
  if (x == nullptr || fn == nullptr || out == nullptr || sqrsum == nullptr) {
    throw Error("cpu::prenorm_gemm: an input or output is null");
  }
  detail::parallel_for(tokens, nmix * k, [&](int64_t begin, int64_t end) {
    std::vector<float> v(static_cast<size_t>(k));
    for (int64_t m = begin; m < end; ++m) {
      for (int64_t e = 0; e < k; ++e) v[size_t(e)] = bf16_to_float(x[m * k + e]);
      for (int s = 0; s < splits; ++s) {
        const SplitRange range = prenorm_split_range(k, splits, s);
        const float* vs = v.data() + range.begin;
        const int64_t width = range.end - range.begin;
        sqrsum[s * tokens + m] = detail::dot(vs, vs, width);
        for (int64_t i = 0; i < nmix; ++i) {
          out[(s * tokens + m) * nmix + i] = detail::dot(fn + i * k + range.begin, vs, width);
        }
      }
    }
  });
}

}  // namespace mhc::cpu
