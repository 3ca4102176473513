"""FP8 layer inputs (docs/fp8.md): torch.ops.mhc.pre_fp8, post_pre_fp8 and boundary_fp8 and their
_out forms: the fakes (the same checks, order and messages as python/src/torch/fp8.cpp), their
registration beside the other ops (mhc/ops.py calls register), and mhc.fp8_scales, which makes a
scales tensor in the layout the ops write.

Each op takes its bf16 twin's arguments plus group_size (128), column_major_scales and use_ue8m0
(the names of vLLM's per_token_group_quant_fp8) and returns layer_input as float8_e4m3fn [T, C]
and its float32 scales [T, C/128] first, then the twin's other outputs in the twin's order."""

import torch

from mhc import _checks as check
from mhc import _fakes as fake

GROUP_SIZE = 128
NAMES = ("pre_fp8", "pre_fp8_out", "post_pre_fp8", "post_pre_fp8_out", "boundary_fp8",
         "boundary_fp8_out")
SUMMARY = ("its bf16 twin (pre, post_pre or boundary) with layer_input as FP8 E4M3 and float32 "
           "scales per (token, 128-column group): vLLM's per_token_group_quant_fp8 of the twin's "
           "bf16 layer_input, bitwise (docs/fp8.md). Returns layer_input and its scales first, "
           "then the twin's other outputs.")


def _format(op, group_size, hidden):
    if group_size != GROUP_SIZE:
        raise RuntimeError(f"mhc.{op}: group_size={group_size} is not supported (the FP8 layer "
                           f"input takes groups of {GROUP_SIZE} columns)")
    if hidden % GROUP_SIZE != 0:
        raise RuntimeError(f"mhc.{op}: the hidden size {hidden} is not a multiple of "
                           f"group_size={GROUP_SIZE}")


def _scale_strides(t, groups, column_major_scales):
    return (1, (t + 3) // 4 * 4) if column_major_scales else (groups, 1)


def fp8_scales(tokens, hidden, column_major_scales=False, device=None):
    """A float32 scales tensor [tokens, hidden / 128] in the layout the FP8 ops write: row-major,
    or column-major with the token dimension padded to 4 (DeepGEMM's SM90 layout)."""
    groups = hidden // GROUP_SIZE
    return torch.empty_strided((tokens, groups), _scale_strides(tokens, groups,
                                                                column_major_scales),
                               dtype=torch.float32, device=device)


def _outputs(op, name, scales_name, codes, scales, t, c, column_major_scales, device):
    check.tensor(op, name, codes, (torch.float8_e4m3fn,), (t, c), device, "[T, C]")
    groups = c // GROUP_SIZE
    want = _scale_strides(t, groups, column_major_scales)
    ok = (isinstance(scales, torch.Tensor) and scales.dtype == torch.float32
          and scales.device == device and tuple(scales.shape) == (t, groups)
          and (t <= 1 or scales.stride(0) == want[0])
          and (groups <= 1 or scales.stride(1) == want[1]))
    if not ok:
        strides = f"({want[0]}, {want[1]})"
        layout = "column_major_scales" if column_major_scales else "row-major"
        raise RuntimeError(f"mhc.{op}: {scales_name} must be a float32 tensor [T, C/128] = "
                           f"[{t}, {groups}] on {device} with strides {strides} ({layout}), from "
                           "mhc.fp8_scales(...)")


def _new(residual, t, c, column_major_scales):
    return (residual.new_empty((t, c), dtype=torch.float8_e4m3fn),
            fp8_scales(t, c, column_major_scales, residual.device))


def fake_pre_fp8(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, workspace=None,
                 projection="tf32", batch_invariant=False, group_size=128,
                 column_major_scales=False, use_ue8m0=False):
    t, _, c = check.streams("pre_fp8", residual)
    _format("pre_fp8", group_size, c)
    others = fake.fake_pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps,
                           pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                           workspace=workspace, projection=projection,
                           batch_invariant=batch_invariant)
    return (*_new(residual, t, c, column_major_scales), *others[1:])


def fake_pre_fp8_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                     sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, layer_input,
                     layer_input_scales, post, comb, next_pre_mix, workspace=None,
                     projection="tf32", batch_invariant=False, group_size=128,
                     column_major_scales=False, use_ue8m0=False):
    t, _, c = check.streams("pre_fp8", residual)
    _format("pre_fp8", group_size, c)
    _outputs("pre_fp8", "layer_input", "layer_input_scales", layer_input, layer_input_scales, t,
             c, column_major_scales, residual.device)
    fake.fake_pre_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                      sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                      layer_input=residual.new_empty((t, c)), post=post, comb=comb,
                      next_pre_mix=next_pre_mix, workspace=workspace, projection=projection,
                      batch_invariant=batch_invariant)


def fake_post_pre_fp8(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                      norm_eps, *, workspace=None, group_size=128, column_major_scales=False,
                      use_ue8m0=False):
    t, _, c = check.streams("post_pre_fp8", residual)
    _format("post_pre_fp8", group_size, c)
    residual_next, _ = fake.fake_post_pre(sublayer_out, residual, post, comb, next_pre_mix,
                                          next_norm_weight, norm_eps, workspace=workspace)
    return (*_new(residual, t, c, column_major_scales), residual_next)


def fake_post_pre_fp8_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                          norm_eps, *, next_layer_input, next_layer_input_scales, residual_next,
                          workspace=None, group_size=128, column_major_scales=False,
                          use_ue8m0=False):
    t, _, c = check.streams("post_pre_fp8", residual)
    _format("post_pre_fp8", group_size, c)
    _outputs("post_pre_fp8", "next_layer_input", "next_layer_input_scales", next_layer_input,
             next_layer_input_scales, t, c, column_major_scales, residual.device)
    fake.fake_post_pre_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                           norm_eps, residual_next=residual_next,
                           next_layer_input=residual.new_empty((t, c)), workspace=workspace)


def fake_boundary_fp8(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                      hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                      *, workspace=None, projection="tf32", batch_invariant=False, group_size=128,
                      column_major_scales=False, use_ue8m0=False):
    t, _, c = check.streams("boundary_fp8", residual)
    _format("boundary_fp8", group_size, c)
    residual_next, _, next_post, next_comb, next_pre_mix = fake.fake_boundary(
        sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base, rms_eps,
        pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, workspace=workspace,
        projection=projection, batch_invariant=batch_invariant)
    return (*_new(residual, t, c, column_major_scales), residual_next, next_post, next_comb,
            next_pre_mix)


def fake_boundary_fp8_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                          hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                          norm_eps, *, layer_input, layer_input_scales, residual_next, next_post,
                          next_comb, next_pre_mix, workspace=None, projection="tf32",
                          batch_invariant=False, group_size=128, column_major_scales=False,
                          use_ue8m0=False):
    t, _, c = check.streams("boundary_fp8", residual)
    _format("boundary_fp8", group_size, c)
    _outputs("boundary_fp8", "layer_input", "layer_input_scales", layer_input, layer_input_scales,
             t, c, column_major_scales, residual.device)
    fake.fake_boundary_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                           hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                           norm_eps, residual_next=residual_next,
                           layer_input=residual.new_empty((t, c)), next_post=next_post,
                           next_comb=next_comb, next_pre_mix=next_pre_mix, workspace=workspace,
                           projection=projection, batch_invariant=batch_invariant)


FAKES = {
    "pre_fp8": fake_pre_fp8,
    "pre_fp8_out": fake_pre_fp8_out,
    "post_pre_fp8": fake_post_pre_fp8,
    "post_pre_fp8_out": fake_post_pre_fp8_out,
    "boundary_fp8": fake_boundary_fp8,
    "boundary_fp8_out": fake_boundary_fp8_out,
}


def register(lib, noting, inference_only):
    """The FP8 ops' fakes and inference-only autograd kernels, as mhc/ops.py registers the others':
    `lib` its torch.library fragment, `noting` its error-noting wrapper."""
    for name in NAMES:
        fake_fn = noting(FAKES[name])
        for op in (name, f"_nograd_{name}", f"_grad_{name}"):
            torch.library.register_fake(f"mhc::{op}", fake_fn, lib=lib)
        grad = getattr(torch.ops.mhc, f"_grad_{name}")
        lib.impl(f"_grad_{name}", noting(inference_only(grad.default, name)), "Autograd",
                 with_keyset=True)
        packet = getattr(torch.ops.mhc, name)
        schema = str(packet.default._schema)[len(f"mhc::{name}"):]
        packet.__doc__ = packet.default.__doc__ = f"torch.ops.mhc.{name}{schema}\n\n{SUMMARY}"
