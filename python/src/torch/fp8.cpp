#include "fp8.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <vector>

#include "../launch_fp8.hpp"
#include "device.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/params.hpp"
#include "ops.hpp"

namespace mhc::torch_ops {

namespace {

// The format the FP8 arguments ask for: group_size 128 and C a multiple of it.
Fp8Format fp8_format(const char* op, int64_t group_size, int64_t hidden, bool column_major_scales,
                     bool use_ue8m0) {
  if (group_size != kFp8GroupSize) {
    fail(
        fmt::format("mhc.{}: group_size={} is not supported (the FP8 layer input takes groups "
                    "of {} columns)",
                    op, group_size, kFp8GroupSize));
  }
  if (hidden % kFp8GroupSize != 0) {
    fail(fmt::format("mhc.{}: the hidden size {} is not a multiple of group_size={}", op, hidden,
                     kFp8GroupSize));
  }
  // The staged form of the fused boundary (fold_norm false, also the default): the op's schema
  // has no choice, and its layer_input is documented bitwise the bf16 op's quantised
  // (docs/decisions.md, "The FP8 boundary stages by default; folding the norm is opt-in").
  return {kFp8GroupSize, column_major_scales, use_ue8m0, false};
}

// The FP8 layer_input [T, C] float8_e4m3fn (contiguous) and its scales [T, C/128] float32:
// contiguous (row-major), or with strides (1, round_up(T, 4)) (column-major, DeepGEMM's).
void fp8_outputs(const char* op, const char* name, const char* scales_name, const Tensor& codes,
                 const Tensor& scales, const Streams& s, const Fp8Format& f, const Where& dev) {
  tensor(op, name, codes, DTypes{{aoti_torch_dtype_float8_e4m3fn(), 0}, 1}, {s.t, s.c}, &dev,
         "[T, C]");
  const int64_t groups = fp8_groups(s.c, f);
  defined(op, scales_name, scales);
  const bool shape = scales.dim() == 2 && scales.size(0) == s.t && scales.size(1) == groups;
  const bool strides = shape && (s.t <= 1 || scales.stride(0) == fp8_scale_token_stride(s.c, f)) &&
                       (groups <= 1 || scales.stride(1) == fp8_scale_group_stride(s.t, f));
  if (dtype_of(scales) != aoti_torch_dtype_float32() || !(where(scales) == dev) || !strides) {
    fail(
        fmt::format("mhc.{}: {} must be a float32 tensor [T, C/128] = [{}, {}] on {} with "
                    "strides {} ({}), from mhc.fp8_scales(...)",
                    op, scales_name, s.t, groups, dev.text(),
                    f.column_major_scales ? fmt::format("(1, {})", fp8_aligned_tokens(s.t))
                                          : fmt::format("({}, 1)", groups),
                    f.column_major_scales ? "column_major_scales" : "row-major"));
  }
}

Tensor new_codes(const Streams& s, const Where& dev) {
  return new_tensor({s.t, s.c}, aoti_torch_dtype_float8_e4m3fn(), dev);
}

Tensor new_scales(const Streams& s, const Fp8Format& f, const Where& dev) {
  const int64_t sizes[2] = {s.t, fp8_groups(s.c, f)};
  const int64_t strides[2] = {fp8_scale_token_stride(s.c, f), fp8_scale_group_stride(s.t, f)};
  AtenTensorHandle handle = nullptr;
  if (aoti_torch_empty_strided(2, sizes, strides, aoti_torch_dtype_float32(), dev.type, dev.index,
                               &handle) != AOTI_TORCH_SUCCESS) {
    fail("mhc: allocating the FP8 scales failed");
  }
  return Tensor(handle);
}

// Whether boundary_fp8 at this call's size gives the twin's bits without staging rows (see
// launch::fp8_boundary_is_the_twins); a shape the plan refuses goes to the staged form, whose
// checks (the twin's) name the problem.
bool boundary_fuses_fp8(const Tensor& residual, const Streams& s, const std::string& projection,
                        bool batch_invariant) {
  if (!where(residual).cuda()) return true;  // the CPU form is the twin's rows, quantised
  try {
    MhcParams p;
    p.hidden = int(s.c);
    p.n = int(s.n);
    p.layers = 1;
    validate(p);
    Launching launch(residual);
    return launch::fp8_boundary_is_the_twins(
        p, s.t, {projection == "fp32" ? Projection::fp32 : Projection::tf32, batch_invariant, 0},
        launch.target);
  } catch (const std::exception&) {
    return false;
  }
}

// The FP8 outputs (checked by fp8_outputs) as the library's FP8 layer input.
Fp8Output fp8_output(const Tensor& codes, const Tensor& scales, const Fp8Format& f) {
  return {static_cast<uint8_t*>(codes.data_ptr()), static_cast<float*>(scales.data_ptr()), f};
}

}  // namespace

// Each op is its bf16 twin (ops.cpp's pre_to, post_pre_to, boundary_to: the same checks and
// launches) writing the FP8 layer input instead of the bf16 one: on CUDA the library's fused FP8
// form (mhc::Ops' FP8 overloads: the twin's launches, no bf16 round trip), on the CPU the twin's
// rows quantised by the reference quantiser (launch.cpp). Either way the values docs/fp8.md
// defines, bitwise.
void pre_fp8_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
                 OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
                 Tensor layer_input_scales, Tensor post, Tensor comb, Tensor next_pre_mix,
                 OptTensor workspace, std::string projection, bool batch_invariant,
                 int64_t group_size, bool column_major_scales, bool use_ue8m0) {
  const char* op = "pre_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  fp8_outputs(op, "layer_input", "layer_input_scales", layer_input, layer_input_scales, s, f, dev);
  disjoint(op, {{"layer_input", &layer_input}, {"layer_input_scales", &layer_input_scales}},
           {{"residual", &residual},
            {"post", &post},
            {"comb", &comb},
            {"next_pre_mix", &next_pre_mix},
            {"pre_mix", maybe(pre_mix)},
            {"norm_weight", maybe(norm_weight)},
            {"workspace", maybe(workspace)}});
  const Fp8Output out = fp8_output(layer_input, layer_input_scales, f);
  pre_to(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
         post_mult, sinkhorn_iters, norm_eps, {nullptr, &out}, post, comb, next_pre_mix, workspace,
         projection, batch_invariant);
}

Tensors5 pre_fp8(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
                 OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps, OptTensor workspace,
                 std::string projection, bool batch_invariant, int64_t group_size,
                 bool column_major_scales, bool use_ue8m0) {
  const char* op = "pre_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  const int32_t f32 = aoti_torch_dtype_float32();
  Tensors5 out{new_codes(s, dev), new_scales(s, f, dev), new_tensor({s.t, s.n}, f32, dev),
               new_tensor({s.t, s.n, s.n}, f32, dev), new_tensor({s.t, s.n}, f32, dev)};
  pre_fp8_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
              post_mult, sinkhorn_iters, norm_eps, std::get<0>(out), std::get<1>(out),
              std::get<2>(out), std::get<3>(out), std::get<4>(out), workspace, projection,
              batch_invariant, group_size, column_major_scales, use_ue8m0);
  return out;
}

void post_pre_fp8_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                      Tensor next_layer_input, Tensor next_layer_input_scales, Tensor residual_next,
                      OptTensor workspace, int64_t group_size, bool column_major_scales,
                      bool use_ue8m0) {
  const char* op = "post_pre_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  fp8_outputs(op, "next_layer_input", "next_layer_input_scales", next_layer_input,
              next_layer_input_scales, s, f, dev);
  disjoint(op,
           {{"next_layer_input", &next_layer_input},
            {"next_layer_input_scales", &next_layer_input_scales}},
           {{"sublayer_out", &sublayer_out},
            {"residual", &residual},
            {"post", &post},
            {"comb", &comb},
            {"next_pre_mix", &next_pre_mix},
            {"next_norm_weight", maybe(next_norm_weight)},
            {"residual_next", &residual_next},
            {"workspace", maybe(workspace)}});
  const Fp8Output out = fp8_output(next_layer_input, next_layer_input_scales, f);
  post_pre_to(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps,
              residual_next, {nullptr, &out}, workspace);
}

Tensors3 post_pre_fp8(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                      OptTensor workspace, int64_t group_size, bool column_major_scales,
                      bool use_ue8m0) {
  const char* op = "post_pre_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  Tensors3 out{new_codes(s, dev), new_scales(s, f, dev),
               new_tensor({s.t, s.n, s.c}, aoti_torch_dtype_bfloat16(), dev)};
  post_pre_fp8_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps,
                   std::get<0>(out), std::get<1>(out), std::get<2>(out), workspace, group_size,
                   column_major_scales, use_ue8m0);
  return out;
}

void boundary_fp8_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor pre_mix, OptTensor norm_weight, Tensor fn, Tensor hc_scale,
                      Tensor hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
                      Tensor layer_input_scales, Tensor residual_next, Tensor next_post,
                      Tensor next_comb, Tensor next_pre_mix, OptTensor workspace,
                      std::string projection, bool batch_invariant, int64_t group_size,
                      bool column_major_scales, bool use_ue8m0) {
  const char* op = "boundary_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  fp8_outputs(op, "layer_input", "layer_input_scales", layer_input, layer_input_scales, s, f, dev);
  disjoint(op, {{"layer_input", &layer_input}, {"layer_input_scales", &layer_input_scales}},
           {{"sublayer_out", &sublayer_out},
            {"residual", &residual},
            {"post", &post},
            {"comb", &comb},
            {"pre_mix", &pre_mix},
            {"norm_weight", maybe(norm_weight)},
            {"residual_next", &residual_next},
            {"next_post", &next_post},
            {"next_comb", &next_comb},
            {"next_pre_mix", &next_pre_mix},
            {"workspace", maybe(workspace)}});
  const Fp8Output out = fp8_output(layer_input, layer_input_scales, f);
  if (boundary_fuses_fp8(residual, s, projection, batch_invariant)) {
    return boundary_to(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                       hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                       residual_next, {nullptr, &out}, next_post, next_comb, next_pre_mix,
                       workspace, projection, batch_invariant);
  }
  // Where the plan runs the fused boundary kernel (large batches), that kernel with bf16 staging
  // rows of its own (Ops' FP8 boundary with staging): the twin's coefficients bitwise, the twin's
  // layer_input quantised, FP8 written by the kernel where its shape owns whole groups.
  const Tensor staging = new_tensor({s.t, s.c}, aoti_torch_dtype_bfloat16(), dev);
  boundary_to(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
              rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, residual_next,
              {&staging, &out}, next_post, next_comb, next_pre_mix, workspace, projection,
              batch_invariant);
}

Tensors6 boundary_fp8(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor pre_mix, OptTensor norm_weight, Tensor fn, Tensor hc_scale,
                      Tensor hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps,
                      OptTensor workspace, std::string projection, bool batch_invariant,
                      int64_t group_size, bool column_major_scales, bool use_ue8m0) {
  const char* op = "boundary_fp8";
  const Streams s = streams(op, residual);
  const Where dev = where(residual);
  const Fp8Format f = fp8_format(op, group_size, s.c, column_major_scales, use_ue8m0);
  const int32_t f32 = aoti_torch_dtype_float32();
  Tensors6 out{new_codes(s, dev),
               new_scales(s, f, dev),
               new_tensor({s.t, s.n, s.c}, aoti_torch_dtype_bfloat16(), dev),
               new_tensor({s.t, s.n}, f32, dev),
               new_tensor({s.t, s.n, s.n}, f32, dev),
               new_tensor({s.t, s.n}, f32, dev)};
  boundary_fp8_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
                   rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                   std::get<0>(out), std::get<1>(out), std::get<2>(out), std::get<3>(out),
                   std::get<4>(out), std::get<5>(out), workspace, projection, batch_invariant,
                   group_size, column_major_scales, use_ue8m0);
  return out;
}

}  // namespace mhc::torch_ops
