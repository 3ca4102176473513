"""The torch ops torch.ops.mhc.*: plain Python over mhc._C (DLPack, no libtorch linking).

Every op has a fake (meta) implementation for torch.compile, checks its arguments before any
kernel runs (mhc/_checks.py), launches on torch.cuda.current_stream() (CUDA tensors) or runs the
CPU backend (CPU tensors), and has an `_out` twin that writes caller-owned buffers (static
CUDA-graph buffers) instead of allocating. Argument reference: docs/python.md.
"""

import contextlib

import torch

from mhc import _C
from mhc import _checks as check
from mhc._workspace import DEFAULT_POOL, MAIN

LIB = torch.library.Library("mhc", "DEF")  # noqa: the op namespace lives as long as the module

_COEF = ("Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base")
_EPS = ("float rms_eps, float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters")
_OPT = "Tensor? workspace=None, str projection='tf32', bool batch_invariant=False"
_PRE = f"{_COEF}, Tensor? norm_weight, Tensor? pre_mix, {_EPS}, float norm_eps"
_OVL = f"{_COEF}, Tensor? norm_weight, Tensor pre_mix, {_EPS}, float norm_eps, int side_stream"
_PRE_OUT = "Tensor(a!) layer_input, Tensor(b!) post, Tensor(c!) comb, Tensor(d!) next_pre_mix"
_COEF_OUT = "Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix"
_POST = "Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb"
_POST_PRE = f"{_POST}, Tensor next_pre_mix, Tensor? next_norm_weight, float norm_eps"
_WS = "Tensor? workspace=None"
_BOUNDARY = (f"{_POST}, Tensor pre_mix, Tensor? norm_weight, Tensor fn, Tensor hc_scale, "
             f"Tensor hc_base, {_EPS}, float norm_eps")
_BOUNDARY_OUT = ("Tensor(a!) residual_next, Tensor(b!) layer_input, Tensor(c!) next_post, "
                 "Tensor(d!) next_comb, Tensor(e!) next_pre_mix")

SCHEMAS = {
    "hc_prenorm_gemm": "(Tensor x, Tensor fn, Tensor(a!) out, Tensor(b!) sqrsum, int num_splits) -> ()",
    "pre": f"({_PRE}, *, {_OPT}) -> (Tensor, Tensor, Tensor, Tensor)",
    "pre_out": f"({_PRE}, *, {_PRE_OUT}, {_OPT}) -> ()",
    "coefficients": f"({_COEF}, {_EPS}, *, int side_stream=0, {_OPT}) -> (Tensor, Tensor, Tensor)",
    "coefficients_out": f"({_COEF}, {_EPS}, *, {_COEF_OUT}, int side_stream=0, {_OPT}) -> ()",
    "pre_overlap": f"({_OVL}, *, {_OPT}) -> (Tensor, Tensor, Tensor, Tensor)",
    "pre_overlap_out": f"({_OVL}, *, {_PRE_OUT}, {_OPT}) -> ()",
    "join": "(int side_stream, Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix) -> ()",
    "post": f"({_POST}) -> Tensor",
    "post_out": f"({_POST}, *, Tensor(a!) out) -> ()",
    "post_pre": f"({_POST_PRE}, *, {_WS}) -> (Tensor, Tensor)",
    "post_pre_out": f"({_POST_PRE}, *, Tensor(a!) residual_next, Tensor(b!) next_layer_input, "
                    f"{_WS}) -> ()",
    "boundary": f"({_BOUNDARY}, *, {_OPT}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "boundary_out": f"({_BOUNDARY}, *, {_BOUNDARY_OUT}, {_OPT}) -> ()",
}


def _stream(t):
    """The handle of the current stream of t's device (0 for CPU tensors). The raw getter skips
    building a torch.cuda.Stream object on every call (inductor's generated code uses it too)."""
    return _raw_stream(t.device.index) if t.is_cuda else 0


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream)


_SAME_DEVICE = contextlib.nullcontext()


def _on_device(t):
    """Launches go to t's device: switch only when the current device differs (rare)."""
    if t.is_cuda and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return _SAME_DEVICE


def _workspace(workspace, residual, slot):
    t, n, c = residual.shape
    if workspace is None:
        return DEFAULT_POOL.get(residual.device, c, n, t, slot)
    if not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.uint8:
        raise ValueError("mhc: workspace must be a uint8 tensor from mhc.make_workspace(...)")
    if workspace.device != residual.device or not workspace.is_contiguous():
        raise ValueError(f"mhc: workspace must be a contiguous tensor on {residual.device}")
    return workspace


# ---- argument checks shared by real and fake implementations --------------------------------


def _check_pre(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant):
    t, n, c = check.streams(op, residual)
    dev = residual.device
    check.weights(op, fn, hc_scale, hc_base, n, c, dev)
    check.optional(op, "norm_weight", norm_weight, check.NORM_WEIGHT, (c,), dev, "[C]")
    check.optional(op, "pre_mix", pre_mix, check.F32, (t, n), dev, "[T, n]")
    check.scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                  batch_invariant)
    check.norm_eps(op, norm_eps)
    return t, n, c


def _check_pre_out(op, residual, layer_input, post, comb, next_pre_mix):
    t, n, c = residual.shape
    dev = residual.device
    check.tensor(op, "layer_input", layer_input, check.BF16, (t, c), dev, "[T, C]")
    check.coefficient_outputs(op, post, comb, next_pre_mix, t, n, dev)


def _check_coefficients(op, residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                        post_mult, sinkhorn_iters, projection, batch_invariant):
    t, n, c = check.streams(op, residual)
    check.weights(op, fn, hc_scale, hc_base, n, c, residual.device)
    check.scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                  batch_invariant)
    return t, n, c


def _check_post_pre(op, sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                    norm_eps):
    t, n, c = check.post_inputs(op, sublayer_out, residual, post, comb)
    dev = residual.device
    check.tensor(op, "next_pre_mix", next_pre_mix, check.F32, (t, n), dev, "[T, n]")
    check.optional(op, "next_norm_weight", next_norm_weight, check.NORM_WEIGHT, (c,), dev, "[C]")
    check.norm_eps(op, norm_eps)
    return t, n, c


def _check_boundary(op, sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                    hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                    projection, batch_invariant):
    t, n, c = check.post_inputs(op, sublayer_out, residual, post, comb)
    dev = residual.device
    check.tensor(op, "pre_mix", pre_mix, check.F32, (t, n), dev, "[T, n]")
    check.optional(op, "norm_weight", norm_weight, check.NORM_WEIGHT, (c,), dev, "[C]")
    check.norm_eps(op, norm_eps)
    check.weights(op, fn, hc_scale, hc_base, n, c, dev)
    check.scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                  batch_invariant)
    return t, n, c


def _check_boundary_out(op, residual, residual_next, layer_input, next_post, next_comb,
                        next_pre_mix):
    t, n, c = residual.shape
    dev = residual.device
    check.tensor(op, "residual_next", residual_next, check.BF16, (t, n, c), dev, "[T, n, C]")
    check.tensor(op, "layer_input", layer_input, check.BF16, (t, c), dev, "[T, C]")
    check.coefficient_outputs(op, next_post, next_comb, next_pre_mix, t, n, dev)


def _check_gemm(x, fn, out, sqrsum, num_splits):
    op = "hc_prenorm_gemm"
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"mhc.{op}: x must be a [M, K] tensor")
    m, k = x.shape
    check.tensor(op, "x", x, check.BF16, (m, k), None, "[M, K]")
    if not isinstance(fn, torch.Tensor) or fn.dim() != 2:
        raise ValueError(f"mhc.{op}: fn must be a [N, K] tensor")
    nmix = fn.shape[0]
    check.tensor(op, "fn", fn, check.F32, (nmix, k), x.device, "[N, K]")
    if num_splits < 1:
        raise ValueError(f"mhc.{op}: num_splits must be >= 1, got {num_splits}")
    # DeepGEMM also takes [M, N] / [M] when there is one split.
    out_shape = (num_splits, m, nmix) if out.dim() == 3 or num_splits > 1 else (m, nmix)
    sqr_shape = (num_splits, m) if sqrsum.dim() == 2 or num_splits > 1 else (m,)
    check.tensor(op, "out", out, check.F32, out_shape, x.device, "[num_splits, M, N]")
    check.tensor(op, "sqrsum", sqrsum, check.F32, sqr_shape, x.device, "[num_splits, M]")


# ---- real implementations -------------------------------------------------------------------


def pre_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, layer_input, post, comb,
                 next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    op = "pre"
    _check_pre(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    _check_pre_out(op, residual, layer_input, post, comb, next_pre_mix)
    if pre_mix is not None:
        check.no_alias(op, "next_pre_mix", next_pre_mix, "pre_mix", pre_mix)
    ws = _workspace(workspace, residual, MAIN)
    with _on_device(residual):
        stream = _stream(residual)
        coef = (residual, fn, hc_scale, hc_base, next_pre_mix, post, comb, ws, rms_eps, pre_eps,
                sinkhorn_eps, post_mult, sinkhorn_iters, projection, stream)
        if pre_mix is None:  # V4: this site's own pre collapses the streams
            _C.coefficients(*coef, batch_invariant=batch_invariant)
            _C.input_path(residual, next_pre_mix, norm_weight, layer_input, norm_eps, stream,
                          workspace=ws)
        else:  # V4.1: the carried pre_mix; the sublayer need not wait for the coefficients
            _C.input_path(residual, pre_mix, norm_weight, layer_input, norm_eps, stream,
                          workspace=ws)
            _C.coefficients(*coef, batch_invariant=batch_invariant)


def _new_pre_outputs(residual):
    t, n, c = residual.shape
    f32 = dict(dtype=torch.float32, device=residual.device)
    return (residual.new_empty((t, c)), torch.empty((t, n), **f32),
            torch.empty((t, n, n), **f32), torch.empty((t, n), **f32))


def pre_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
             sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, workspace=None,
             projection="tf32", batch_invariant=False):
    check.streams("pre", residual)
    out = _new_pre_outputs(residual)
    pre_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, layer_input=out[0],
                 post=out[1], comb=out[2], next_pre_mix=out[3], workspace=workspace,
                 projection=projection, batch_invariant=batch_invariant)
    return out


def _side_stream_enter(residual, side_stream):
    """The side stream waits for all work already queued on the current stream (whatever
    produced residual), then becomes the launch stream of the coefficient path."""
    side = torch.cuda.ExternalStream(side_stream, device=residual.device)
    side.wait_stream(torch.cuda.current_stream(residual.device))
    return side_stream


def coefficients_out_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                          post_mult, sinkhorn_iters, *, post, comb, next_pre_mix, side_stream=0,
                          workspace=None, projection="tf32", batch_invariant=False):
    op = "coefficients"
    t, n, c = _check_coefficients(op, residual, fn, hc_scale, hc_base, rms_eps, pre_eps,
                                  sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                                  batch_invariant)
    check.coefficient_outputs(op, post, comb, next_pre_mix, t, n, residual.device)
    on_side = side_stream != 0 and residual.is_cuda
    ws = _workspace(workspace, residual, side_stream if on_side else MAIN)
    with _on_device(residual):
        main = _stream(residual)
        stream = _side_stream_enter(residual, side_stream) if on_side else main
        # fork_from: the C++ side takes the plan's side-stream launch and, under capture, hangs
        # it off main's last nodes alone where it can (mhc/schedule/capture_edges.hpp).
        _C.coefficients(residual, fn, hc_scale, hc_base, next_pre_mix, post, comb, ws, rms_eps,
                        pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection, stream,
                        batch_invariant=batch_invariant, fork_from=main if on_side else 0)


def coefficients_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                      sinkhorn_iters, *, side_stream=0, workspace=None, projection="tf32",
                      batch_invariant=False):
    check.streams("coefficients", residual)
    _, post, comb, next_pre_mix = _new_pre_outputs(residual)
    coefficients_out_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                          post_mult, sinkhorn_iters, post=post, comb=comb,
                          next_pre_mix=next_pre_mix, side_stream=side_stream,
                          workspace=workspace, projection=projection,
                          batch_invariant=batch_invariant)
    return post, comb, next_pre_mix


def pre_overlap_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                         sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                         layer_input, post, comb, next_pre_mix, workspace=None,
                         projection="tf32", batch_invariant=False):
    op = "pre_overlap"
    if pre_mix is None:
        raise ValueError("mhc.pre_overlap: pre_mix is required (the V4.1 delayed form); the V4 "
                         "form cannot overlap, its input path needs this site's coefficients")
    _check_pre(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    _check_pre_out(op, residual, layer_input, post, comb, next_pre_mix)
    check.no_alias(op, "next_pre_mix", next_pre_mix, "pre_mix", pre_mix)
    # The side stream forks after the input path is queued, so the sublayer's launch, queued
    # next on the current stream, is not held behind the coefficient path.
    # The input path runs on the current stream: its scratch (a bf16 norm weight widened to
    # fp32) comes from the current stream's workspace, not the side stream's.
    ws = _workspace(workspace if side_stream == 0 else None, residual, MAIN)
    with _on_device(residual):
        _C.input_path(residual, pre_mix, norm_weight, layer_input, norm_eps, _stream(residual),
                      workspace=ws)
    coefficients_out_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                          post_mult, sinkhorn_iters, post=post, comb=comb,
                          next_pre_mix=next_pre_mix, side_stream=side_stream,
                          workspace=workspace, projection=projection,
                          batch_invariant=batch_invariant)


def pre_overlap_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                     sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                     workspace=None, projection="tf32", batch_invariant=False):
    check.streams("pre_overlap", residual)
    out = _new_pre_outputs(residual)
    pre_overlap_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                         sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream,
                         layer_input=out[0], post=out[1], comb=out[2], next_pre_mix=out[3],
                         workspace=workspace, projection=projection,
                         batch_invariant=batch_invariant)
    return out


def join_impl(side_stream, post, comb, next_pre_mix):
    """The current stream waits for the side stream; the three coefficient tensors are named so
    that torch.compile keeps their readers after the join."""
    if side_stream != 0 and post.is_cuda:
        side = torch.cuda.ExternalStream(side_stream, device=post.device)
        torch.cuda.current_stream(post.device).wait_stream(side)


def post_out_impl(sublayer_out, residual, post, comb, *, out):
    op = "post"
    t, n, c = check.post_inputs(op, sublayer_out, residual, post, comb)
    check.tensor(op, "out", out, check.BF16, (t, n, c), residual.device, "[T, n, C]")
    check.no_alias(op, "out", out, "residual", residual)
    with _on_device(residual):
        _C.post(sublayer_out, residual, post, comb, out, _stream(residual))


def post_impl(sublayer_out, residual, post, comb):
    check.streams("post", residual)
    out = torch.empty_like(residual)
    post_out_impl(sublayer_out, residual, post, comb, out=out)
    return out


def post_pre_out_impl(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                      norm_eps, *, residual_next, next_layer_input, workspace=None):
    op = "post_pre"
    t, n, c = _check_post_pre(op, sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    dev = residual.device
    check.tensor(op, "residual_next", residual_next, check.BF16, (t, n, c), dev, "[T, n, C]")
    check.tensor(op, "next_layer_input", next_layer_input, check.BF16, (t, c), dev, "[T, C]")
    check.no_alias(op, "residual_next", residual_next, "residual", residual)
    ws = _workspace(workspace, residual, MAIN)
    with _on_device(residual):
        _C.post_pre(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                    residual_next, next_layer_input, norm_eps, _stream(residual), workspace=ws)


def post_pre_impl(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps, *,
                  workspace=None):
    t, n, c = check.streams("post_pre", residual)
    residual_next = torch.empty_like(residual)
    next_layer_input = residual.new_empty((t, c))
    post_pre_out_impl(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps,
                      residual_next=residual_next, next_layer_input=next_layer_input,
                      workspace=workspace)
    return residual_next, next_layer_input


def boundary_out_impl(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                      hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                      *, residual_next, layer_input, next_post, next_comb, next_pre_mix,
                      workspace=None, projection="tf32", batch_invariant=False):
    op = "boundary"
    _check_boundary(op, sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                    hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                    projection, batch_invariant)
    _check_boundary_out(op, residual, residual_next, layer_input, next_post, next_comb,
                        next_pre_mix)
    check.no_alias(op, "residual_next", residual_next, "residual", residual)
    check.no_alias(op, "next_pre_mix", next_pre_mix, "pre_mix", pre_mix)
    ws = _workspace(workspace, residual, MAIN)
    with _on_device(residual):
        _C.boundary(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                    hc_base, residual_next, layer_input, next_pre_mix, next_post, next_comb, ws,
                    rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                    projection, _stream(residual), batch_invariant=batch_invariant)


def _new_boundary_outputs(residual):
    layer_input, next_post, next_comb, next_pre_mix = _new_pre_outputs(residual)
    return torch.empty_like(residual), layer_input, next_post, next_comb, next_pre_mix


def boundary_impl(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
                  rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *,
                  workspace=None, projection="tf32", batch_invariant=False):
    check.streams("boundary", residual)
    out = _new_boundary_outputs(residual)
    boundary_out_impl(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                      hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                      norm_eps, residual_next=out[0], layer_input=out[1], next_post=out[2],
                      next_comb=out[3], next_pre_mix=out[4], workspace=workspace,
                      projection=projection, batch_invariant=batch_invariant)
    return out


def hc_prenorm_gemm_impl(x, fn, out, sqrsum, num_splits):
    _check_gemm(x, fn, out, sqrsum, num_splits)
    with _on_device(x):
        m, nmix = x.shape[0], fn.shape[0]
        _C.prenorm_gemm(x, fn, out.view(num_splits, m, nmix), sqrsum.view(num_splits, m),
                        num_splits, _stream(x))


# ---- fake implementations: the same checks, outputs of the right shape, nothing launched ------


def _fake_pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
              sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, workspace=None,
              projection="tf32", batch_invariant=False):
    _check_pre("pre", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    return _new_pre_outputs(residual)


def _fake_pre_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                  sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, layer_input, post, comb,
                  next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    _check_pre("pre", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    _check_pre_out("pre", residual, layer_input, post, comb, next_pre_mix)


def _fake_coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                       sinkhorn_iters, *, side_stream=0, workspace=None, projection="tf32",
                       batch_invariant=False):
    _check_coefficients("coefficients", residual, fn, hc_scale, hc_base, rms_eps, pre_eps,
                        sinkhorn_eps, post_mult, sinkhorn_iters, projection, batch_invariant)
    return _new_pre_outputs(residual)[1:]


def _fake_coefficients_out(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                           post_mult, sinkhorn_iters, *, post, comb, next_pre_mix, side_stream=0,
                           workspace=None, projection="tf32", batch_invariant=False):
    t, n, _ = _check_coefficients("coefficients", residual, fn, hc_scale, hc_base, rms_eps,
                                  pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                                  batch_invariant)
    check.coefficient_outputs("coefficients", post, comb, next_pre_mix, t, n, residual.device)


def _fake_pre_overlap(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                      sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                      workspace=None, projection="tf32", batch_invariant=False):
    _check_pre("pre_overlap", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps,
               pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection,
               batch_invariant)
    return _new_pre_outputs(residual)


def _fake_pre_overlap_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                          sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                          layer_input, post, comb, next_pre_mix, workspace=None,
                          projection="tf32", batch_invariant=False):
    _check_pre("pre_overlap", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps,
               pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection,
               batch_invariant)
    _check_pre_out("pre_overlap", residual, layer_input, post, comb, next_pre_mix)


def _fake_join(side_stream, post, comb, next_pre_mix):
    pass


def _fake_post(sublayer_out, residual, post, comb):
    check.post_inputs("post", sublayer_out, residual, post, comb)
    return torch.empty_like(residual)


def _fake_post_out(sublayer_out, residual, post, comb, *, out):
    t, n, c = check.post_inputs("post", sublayer_out, residual, post, comb)
    check.tensor("post", "out", out, check.BF16, (t, n, c), residual.device, "[T, n, C]")


def _fake_post_pre(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps, *,
                   workspace=None):
    t, _, c = _check_post_pre("post_pre", sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    return torch.empty_like(residual), residual.new_empty((t, c))


def _fake_post_pre_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                       norm_eps, *, residual_next, next_layer_input, workspace=None):
    t, n, c = _check_post_pre("post_pre", sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    dev = residual.device
    check.tensor("post_pre", "residual_next", residual_next, check.BF16, (t, n, c), dev,
                 "[T, n, C]")
    check.tensor("post_pre", "next_layer_input", next_layer_input, check.BF16, (t, c), dev,
                 "[T, C]")


def _fake_boundary(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
                   rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *,
                   workspace=None, projection="tf32", batch_invariant=False):
    _check_boundary("boundary", sublayer_out, residual, post, comb, pre_mix, norm_weight, fn,
                    hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                    norm_eps, projection, batch_invariant)
    return _new_boundary_outputs(residual)


def _fake_boundary_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                       hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                       norm_eps, *, residual_next, layer_input, next_post, next_comb,
                       next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    _check_boundary("boundary", sublayer_out, residual, post, comb, pre_mix, norm_weight, fn,
                    hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                    norm_eps, projection, batch_invariant)
    _check_boundary_out("boundary", residual, residual_next, layer_input, next_post, next_comb,
                        next_pre_mix)


IMPLS = {
    "hc_prenorm_gemm": (hc_prenorm_gemm_impl, _check_gemm),
    "pre": (pre_impl, _fake_pre),
    "pre_out": (pre_out_impl, _fake_pre_out),
    "coefficients": (coefficients_impl, _fake_coefficients),
    "coefficients_out": (coefficients_out_impl, _fake_coefficients_out),
    "pre_overlap": (pre_overlap_impl, _fake_pre_overlap),
    "pre_overlap_out": (pre_overlap_out_impl, _fake_pre_overlap_out),
    "join": (join_impl, _fake_join),
    "post": (post_impl, _fake_post),
    "post_out": (post_out_impl, _fake_post_out),
    "post_pre": (post_pre_impl, _fake_post_pre),
    "post_pre_out": (post_pre_out_impl, _fake_post_pre_out),
    "boundary": (boundary_impl, _fake_boundary),
    "boundary_out": (boundary_out_impl, _fake_boundary_out),
}

for _name, _schema in SCHEMAS.items():
    LIB.define(_name + _schema)
    _real, _fake = IMPLS[_name]
    # One Python kernel for CPU and CUDA tensors: mhc._C picks the backend from the device.
    LIB.impl(_name, _real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"mhc::{_name}", _fake, lib=LIB)
