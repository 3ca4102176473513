"""The Python face of the torch ops: `out=` tuples instead of the `_out` ops' keywords, a
torch.cuda.Stream instead of a raw handle for the overlap, the overlap policy, and the kernel
configuration (mhc.configure, mhc.plan)."""

import json
import os
from typing import NamedTuple, Optional, Sequence

import torch

from mhc import _C
from mhc._docs import wrapper_doc
from mhc import ops as _ops  # noqa: F401  (registers torch.ops.mhc.*)
from mhc._workspace import DEFAULT_POOL, make_workspace  # noqa: F401

class _Overloads:
    """The ops of a torch.ops namespace by their one overload (`torch.ops.mhc.post_out.default`):
    calling the OpOverload skips the packet's overload resolution, about 1.4 µs of host time per
    call (docs/python-performance.md). `prefix`: the ops named prefix + name (the twins)."""

    def __init__(self, namespace, prefix=""):
        self._namespace = namespace
        self._prefix = prefix

    def __getattr__(self, name):
        op = getattr(self._namespace, self._prefix + name).default
        setattr(self, name, op)  # found once
        return op


_routed = _Overloads(torch.ops.mhc)
_nograd = _Overloads(torch.ops.mhc, "_nograd_")


def _ops():
    """The ops a call goes to. With grad disabled (torch.no_grad, torch.inference_mode) each op's
    no-grad twin: the same kernels, without the trip through the C++ autograd router, which
    calls the dispatcher a second time (python/src/torch/registration.cpp) and costs a few µs of
    host time per call (docs/python-performance.md). With grad enabled the op itself, whose router
    keeps the outputs off any backward."""
    return _routed if torch.is_grad_enabled() else _nograd


_DEFAULTS = {}  # no keyword options: every one at its schema default


def _options(workspace, projection, batch_invariant, side_stream=0, main_workspace=None):
    """The ops' keyword options that differ from their schema defaults. Each keyword passed costs
    torch's argument parser a lookup by name and a conversion (a few µs for the usual three on
    the CPU backend), so a default is left to the schema, which holds the same value; anything
    else goes through as given, to be checked there."""
    default_projection = type(projection) is str and projection == "tf32"
    if (workspace is None and default_projection and batch_invariant is False
            and main_workspace is None and type(side_stream) is int and side_stream == 0):
        return _DEFAULTS
    opts = {}
    if workspace is not None:
        opts["workspace"] = workspace
    if not default_projection:
        opts["projection"] = projection
    if batch_invariant is not False:
        opts["batch_invariant"] = batch_invariant
    if not (type(side_stream) is int and side_stream == 0):
        opts["side_stream"] = side_stream
    if main_workspace is not None:
        opts["main_workspace"] = main_workspace
    return opts


def _doc(name, usage):
    def attach(function):
        function.__doc__ = wrapper_doc(name, usage)
        return function

    return attach


def _outputs(op, out, names):
    """The caller's out= buffers, one per output, in order."""
    if not isinstance(out, (tuple, list)) or len(out) != len(names):
        got = f"{len(out)} items" if isinstance(out, (tuple, list)) else type(out).__name__
        raise RuntimeError(f"mhc.{op}: out= needs {len(names)} tensors ({', '.join(names)}), "
                         f"got {got}")
    return tuple(out)


@_doc("hc_prenorm_gemm", "mhc.hc_prenorm_gemm(x, fn, out, sqrsum, num_splits=1) -> None "
      "(writes out and sqrsum)")
def hc_prenorm_gemm(x, fn, out, sqrsum, num_splits=1):
    _ops().hc_prenorm_gemm(x, fn, out, sqrsum, num_splits)


_PRE_OUT = ("layer_input", "post", "comb", "next_pre_mix")


@_doc("pre", "mhc.pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, "
      "sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, out=None, workspace=None, "
      "projection='tf32', batch_invariant=False) -> (layer_input, post, comb, next_pre_mix)\n"
      "out: the four output tensors to write (returned as a tuple); batch_invariant: a token's "
      "outputs do not depend on T (docs/batch_invariance.md).")
def pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
        post_mult, sinkhorn_iters, norm_eps, *, out: Optional[Sequence[torch.Tensor]] = None,
        workspace=None, projection="tf32", batch_invariant=False):
    args = (residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
            post_mult, sinkhorn_iters, norm_eps)
    opts = _options(workspace, projection, batch_invariant)
    return _four_outputs("pre", args, out, opts)


def _four_outputs(name, args, out, opts):
    """Op `name`(*args) returning (layer_input, post, comb, next_pre_mix), or `name`_out writing
    `out`; `opts` are the ops' keyword options (workspace, projection, batch_invariant)."""
    ops = _ops()
    if out is None:
        return getattr(ops, name)(*args, **opts)
    layer_input, post_mix, comb, next_pre_mix = out = _outputs(name, out, _PRE_OUT)
    getattr(ops, name + "_out")(*args, layer_input=layer_input, post=post_mix, comb=comb,
                                next_pre_mix=next_pre_mix, **opts)
    return tuple(out)


def _stream_id(stream):
    """The ops' side_stream argument: 0 for no side stream (None), else the CUDA stream's handle."""
    return 0 if stream is None else stream.cuda_stream


@_doc("coefficients", "mhc.coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, "
      "sinkhorn_eps, post_mult, sinkhorn_iters, *, out=None, stream=None, workspace=None, "
      "projection='tf32', batch_invariant=False) -> (post, comb, next_pre_mix)\n"
      "stream: a torch.cuda.Stream to launch on after the current stream's queued work; "
      "join(stream, ...) before reading the outputs.")
def coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                 sinkhorn_iters, *, out=None, stream: Optional[torch.cuda.Stream] = None,
                 workspace=None, projection="tf32", batch_invariant=False):
    args = (residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
            sinkhorn_iters)
    opts = _options(workspace, projection, batch_invariant, _stream_id(stream))
    if out is None:
        return _ops().coefficients(*args, **opts)
    post_mix, comb, next_pre_mix = out = _outputs("coefficients", out, _PRE_OUT[1:])
    _ops().coefficients_out(*args, post=post_mix, comb=comb, next_pre_mix=next_pre_mix, **opts)
    return tuple(out)


@_doc("pre_overlap", "mhc.pre_overlap(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, "
      "rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, stream, out=None, "
      "workspace=None, main_workspace=None, projection='tf32', batch_invariant=False) -> "
      "(layer_input, post, comb, next_pre_mix)\n"
      "stream: the caller's side stream (torch.cuda.Stream). Call join(stream, post, comb, "
      "next_pre_mix) before post, and keep every argument alive until then. None: no side "
      "stream (everything on the current stream; on CPU tensors the stream is ignored).")
def pre_overlap(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *,
                stream: Optional[torch.cuda.Stream], out=None, workspace=None, main_workspace=None,
                projection="tf32", batch_invariant=False):
    args = (residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
            post_mult, sinkhorn_iters, norm_eps, _stream_id(stream))
    opts = _options(workspace, projection, batch_invariant, main_workspace=main_workspace)
    return _four_outputs("pre_overlap", args, out, opts)


@_doc("join", "mhc.join(stream, post, comb, next_pre_mix) -> None; stream: the "
      "torch.cuda.Stream given to pre_overlap or coefficients (None, or CPU tensors: nothing to "
      "wait for).")
def join(stream: Optional[torch.cuda.Stream], post_mix, comb, next_pre_mix):
    _ops().join(_stream_id(stream), post_mix, comb, next_pre_mix)


@_doc("post", "mhc.post(sublayer_out, residual, post, comb, *, out=None) -> residual_next\n"
      "out: the [T, n, C] bf16 tensor to write (returned).")
def post(sublayer_out, residual, post_mix, comb, *, out=None):
    if out is None:
        return _ops().post(sublayer_out, residual, post_mix, comb)
    _ops().post_out(sublayer_out, residual, post_mix, comb, out=out)
    return out


@_doc("post_pre", "mhc.post_pre(sublayer_out, residual, post, comb, next_pre_mix, "
      "next_norm_weight, norm_eps, *, out=None, workspace=None) -> (residual_next, "
      "next_layer_input)\nout: the two output tensors to write (returned as a tuple).")
def post_pre(sublayer_out, residual, post_mix, comb, next_pre_mix, next_norm_weight, norm_eps, *,
             out=None, workspace=None):
    args = (sublayer_out, residual, post_mix, comb, next_pre_mix, next_norm_weight, norm_eps)
    opts = _DEFAULTS if workspace is None else {"workspace": workspace}
    if out is None:
        return _ops().post_pre(*args, **opts)
    residual_next, next_layer_input = out = _outputs("post_pre", out, _BOUNDARY_OUT[:2])
    _ops().post_pre_out(*args, residual_next=residual_next, next_layer_input=next_layer_input,
                      **opts)
    return tuple(out)


_BOUNDARY_OUT = ("residual_next", "layer_input", "next_post", "next_comb", "next_pre_mix")


@_doc("boundary", "mhc.boundary(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, "
      "hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, "
      "out=None, workspace=None, projection='tf32', batch_invariant=False) -> (residual_next, "
      "layer_input, next_post, next_comb, next_pre_mix)\nout: the five output tensors to write "
      "(returned as a tuple).")
def boundary(sublayer_out, residual, post_mix, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
             rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, out=None,
             workspace=None, projection="tf32", batch_invariant=False):
    args = (sublayer_out, residual, post_mix, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
            rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps)
    opts = _options(workspace, projection, batch_invariant)
    if out is None:
        return _ops().boundary(*args, **opts)
    residual_next, layer_input, next_post, next_comb, next_pre_mix = out = _outputs(
        "boundary", out, _BOUNDARY_OUT)
    _ops().boundary_out(*args, residual_next=residual_next, layer_input=layer_input,
                      next_post=next_post, next_comb=next_comb, next_pre_mix=next_pre_mix, **opts)
    return tuple(out)


class OverlapDecision(NamedTuple):
    """mhc.supports_overlap's answer: whether the policy overlaps, and if not, why."""

    overlap: bool
    reason_code: str  # stable identifier of the first failed condition; "" when overlapping
    reason: str  # one sentence for people; "" when overlapping


def supports_overlap(device=None, *, hidden, n, tokens, mode="full", tp=1, kernel_config="",
                     arch=None):
    """The C++ dispatch policy (docs/dispatch.md): would the coefficient path overlap here?

    `arch` (major, minor) defaults to the compute capability of `device` (a CUDA device);
    `mode` is "eager", "piecewise" or "full" (CUDA-graph capture mode of the forward);
    `kernel_config` is the JSON an engine takes, e.g. '{"enable_mhc_overlap": true}'.
    """
    if arch is None:
        where = "" if device is None else f" ({device} is not one)"
        if not torch.cuda.is_available() or (
                device is not None and torch.device(device).type != "cuda"):
            raise ValueError(f"mhc.supports_overlap: no CUDA device{where}; pass "
                             "arch=(major, minor)")
        arch = torch.cuda.get_device_capability(device)
    ok, code, reason = _C.supports_overlap(int(arch[0]), int(arch[1]), int(hidden), int(n),
                                           int(tokens), str(mode), int(tp), str(kernel_config))
    return OverlapDecision(bool(ok), str(code), str(reason))


def configure(kernel_config=None, tactics=None):
    """Sets the kernel configuration of every op in this process (and of mhc._C).

    `kernel_config` is the engine's JSON (a str, as `mhc run --kernel-config` takes it) or a dict
    of the same keys ('{"enable_mhc_overlap": true}', kill switches such as "fused_boundary":
    false, "projection": "fp32", "batch_invariant": true); `tactics` a file from `mhc tune`
    (the same as "tactics": PATH). None and None: the defaults. Each CUDA device's launch
    description (mhc.plan) is made again from it at its next call, outside any capture. The ops'
    own projection= and batch_invariant= add to it: fp32 where either asks for it, batch-invariant
    where either does. A bad key or value raises RuntimeError naming it.
    """
    if kernel_config is None:
        config = {}
    elif isinstance(kernel_config, str):
        config = kernel_config if tactics is None else json.loads(kernel_config or "{}")
    else:
        config = dict(kernel_config)
    if tactics is not None:
        if "tactics" in config:
            raise RuntimeError("mhc.configure: tactics given twice (the tactics= argument and "
                               "the kernel config's \"tactics\" key)")
        config["tactics"] = os.fspath(tactics)
    text = config if isinstance(config, str) else json.dumps(config)
    torch.ops.mhc._configure(text)  # validates (RuntimeError naming the problem)
    _C.configure(text)


def plan(device=None, *, batch_invariant=False):
    """The launch description the ops use on CUDA `device` (default: the current one) under the
    configuration (mhc.configure): the kernel plan as `mhc plan --json` prints it, as a dict.
    `batch_invariant=True`: the plan of the ops' batch-invariant calls."""
    device = torch.device("cuda") if device is None else torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError(f"mhc.plan: {device} is not a CUDA device here; the kernel plan is "
                           "a CUDA device's")
    index = torch.cuda.current_device() if device.index is None else device.index
    return json.loads(torch.ops.mhc._plan(index, batch_invariant))
