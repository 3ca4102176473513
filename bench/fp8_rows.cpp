// The FP8 layer input's rows of `mhc bench kernels` (mhc/bench/fp8_rows.hpp).
#include "mhc/bench/fp8_rows.hpp"

#include "mhc/cuda/device_buffer.hpp"

namespace mhc::bench {
namespace {

using namespace mhc::cuda;

struct Fp8Buffers {
  DeviceBuffer<uint8_t> codes;
  DeviceBuffer<float> scales;
  Fp8Output out;
  Fp8Buffers(const MhcParams& p, int64_t m, const Fp8Format& f)
      : codes(size_t(m * p.hidden)), scales(size_t(fp8_scale_floats(m, p.hidden, f))) {
    out = {codes.get(), scales.get(), f};
  }
};

}  // namespace

std::vector<Fp8Row> fp8_rows(const MhcParams& p, int64_t m, const DeviceSiteWeights& w,
                             SiteWorkspace& ws, const LaunchTuning& tuning, double coef_bytes) {
  if (p.hidden % kFp8GroupSize != 0 || m < 1) return {};
  const auto fp8 = std::make_shared<Fp8Buffers>(p, m, Fp8Format{kFp8GroupSize, true, false});
  const double md = double(m), K = double(p.k()), C = double(p.hidden);
  const double fp8_row = C + C / kFp8GroupSize * 4;  // codes and scales per token
  const LaunchTuning t = tuning;
  // The boundary: x_prev and F in, x out (the coefficients read it), the FP8 layer_input out.
  const auto boundary = [&p, m, &w, &ws, t, fp8](bool fp8_op) -> EnqueueFn {
    return [&p, m, &w, &ws, t, fp8, fp8_op](DeviceSiteBuffers& b, cudaStream_t s) {
      CoefficientBuffers out = b.coefficients(w);
      out.x = b.x_next.get();
      out.post = b.post_alt.get();
      out.comb = b.comb_alt.get();
      const InputPathBuffers input{b.pre_mix.get(), w.norm_weight.get(), b.layer_input.get(),
                                   fp8_op ? &fp8->out : nullptr};
      const PreviousPost previous{b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                                  b.x_next.get()};
      prenorm_coefficients(p, m, out, t, ws, s, &input, &previous);
      if (!fp8_op) quantize_fp8(m, p.hidden, b.layer_input.get(), fp8->out, {s, t.pdl});
    };
  };
  const auto input_path_row = [&p, m, &w, t, fp8](bool fp8_op) -> EnqueueFn {
    return [&p, m, &w, t, fp8, fp8_op](DeviceSiteBuffers& b, cudaStream_t s) {
      const LaunchTarget on{s, t.pdl};
      if (fp8_op) {
        input_path(p, m, b.x.get(), b.pre_mix.get(), w.norm_weight.get(), fp8->out, on);
        return;
      }
      input_path(p, m, b.x.get(), b.pre_mix.get(), w.norm_weight.get(), b.layer_input.get(), on);
      quantize_fp8(m, p.hidden, b.layer_input.get(), fp8->out, on);
    };
  };
  const double boundary_bytes = coef_bytes + md * (4 * K + 2 * C + fp8_row);
  const double input_bytes = md * (2 * K + fp8_row);
  // Named "FP8 ..." all: `mhc bench kernels --only FP8` times these alone.
  return {{"FP8 boundary", boundary_bytes, boundary(true), true},
          {"FP8 boundary as bf16 + group quant", boundary_bytes, boundary(false), true},
          {"FP8 input path", input_bytes, input_path_row(true), false},
          {"FP8 input path as bf16 + group quant", input_bytes, input_path_row(false), false}};
}

}  // namespace mhc::bench
