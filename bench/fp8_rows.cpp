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
  // Each row three ways: the FP8 output (kFp8), the bf16 twin then the group quantisation (the
  // engine's alternative, kBf16ThenQuant) and the bf16 twin alone (kBf16: what FP8 adds). The
  // boundary's FP8 output with a staging buffer (b.layer_input: Ops::boundary's form with one),
  // so that where the plan runs the fused boundary kernel it runs too (its wide stages writing
  // FP8 themselves): kFp8 in the default format, the staged form (the torch op's, bitwise the
  // bf16 boundary's quantised), kFp8Folded with Fp8Format::fold_norm (no staged y, no read-back);
  // kFp8Unstaged: without a staging buffer (the post + next input launch and the coefficient
  // launch there).
  enum Mode { kFp8, kBf16ThenQuant, kBf16, kFp8Unstaged, kFp8Folded };
  const auto folded = std::make_shared<Fp8Output>(fp8->out);
  folded->format.fold_norm = true;
  const auto boundary = [&p, m, &w, &ws, t, fp8, folded](Mode mode) -> EnqueueFn {
    return [&p, m, &w, &ws, t, fp8, folded, mode](DeviceSiteBuffers& b, cudaStream_t s) {
      const bool fp8_op = mode == kFp8 || mode == kFp8Unstaged || mode == kFp8Folded;
      CoefficientBuffers out = b.coefficients(w);
      out.x = b.x_next.get();
      out.post = b.post_alt.get();
      out.comb = b.comb_alt.get();
      const InputPathBuffers input{b.pre_mix.get(), w.norm_weight.get(),
                                   mode == kFp8Unstaged ? nullptr : b.layer_input.get(),
                                   !fp8_op              ? nullptr
                                   : mode == kFp8Folded ? folded.get()
                                                        : &fp8->out};
      const PreviousPost previous{b.x.get(), b.post.get(), b.comb.get(), b.sublayer_out.get(),
                                  b.x_next.get()};
      prenorm_coefficients(p, m, out, t, ws, s, &input, &previous);
      if (mode == kBf16ThenQuant) {
        quantize_fp8(m, p.hidden, b.layer_input.get(), fp8->out, {s, t.pdl});
      }
    };
  };
  const auto input_path_row = [&p, m, &w, t, fp8](Mode mode) -> EnqueueFn {
    return [&p, m, &w, t, fp8, mode](DeviceSiteBuffers& b, cudaStream_t s) {
      const LaunchTarget on{s, t.pdl};
      if (mode == kFp8) {
        input_path(p, m, b.x.get(), b.pre_mix.get(), w.norm_weight.get(), fp8->out, on);
        return;
      }
      input_path(p, m, b.x.get(), b.pre_mix.get(), w.norm_weight.get(), b.layer_input.get(), on);
      if (mode == kBf16ThenQuant) quantize_fp8(m, p.hidden, b.layer_input.get(), fp8->out, on);
    };
  };
  const double boundary_bytes = coef_bytes + md * (4 * K + 2 * C + fp8_row);
  const double input_bytes = md * (2 * K + fp8_row);
  // The twins alone write a bf16 layer_input (2 bytes a value) in place of codes and scales.
  const double twin_boundary_bytes = coef_bytes + md * (4 * K + 4 * C);
  const double twin_input_bytes = md * (2 * K + 2 * C);
  // Named "FP8 ..." all: `mhc bench kernels --only FP8` times these alone.
  return {
      {"FP8 boundary", boundary_bytes, boundary(kFp8), true},
      {"FP8 boundary as bf16 + group quant", boundary_bytes, boundary(kBf16ThenQuant), true},
      {"FP8 boundary's bf16 twin alone", twin_boundary_bytes, boundary(kBf16), true},
      {"FP8 boundary folded", boundary_bytes, boundary(kFp8Folded), true},
      {"FP8 boundary without staging", boundary_bytes, boundary(kFp8Unstaged), true},
      {"FP8 input path", input_bytes, input_path_row(kFp8), false},
      {"FP8 input path as bf16 + group quant", input_bytes, input_path_row(kBf16ThenQuant), false},
      {"FP8 input path's bf16 twin alone", twin_input_bytes, input_path_row(kBf16), false}};
}

}  // namespace mhc::bench
