"""The torch ops as they were before the stable-ABI library, for bench/python_ops.py's comparison:
plain Python kernels (torch.library, a CompositeExplicitAutograd kernel and a Python Autograd
kernel per op) over mhc._C through DLPack, registered as torch.ops.mhc_dlpack.* (the same
schemas). The code of python/mhc/ops.py at the commit before the move to C++, with its Python
workspace pool; the argument checks are mhc/_checks.py's (which the fakes still use) plus the two
that only the real implementations ran. Importing this module registers the namespace.
"""

import contextlib
import types

import torch

from mhc import _C
from mhc import _checks
from mhc._autograd import inference_only
from mhc._fakes import new_boundary_outputs, new_pre_outputs

MAIN = 0


def _runnable(op, residual):
    if residual.device.type not in ("cpu", "cuda"):
        raise ValueError(f"mhc.{op}: residual is on {residual.device}; mhc runs on cpu and cuda")


def _span(t):
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


def _disjoint(op, outputs, inputs):
    outs = [(name, _span(t)) for name, t in outputs if t is not None and t.numel()]
    ins = [(name, _span(t)) for name, t in inputs if t is not None and t.numel()]
    for i, (name, (a0, a1)) in enumerate(outs):
        for other, (b0, b1) in ins:
            if a0 < b1 and b0 < a1:
                raise ValueError(f"mhc.{op}: {name} must not overlap {other}")
        for other, (b0, b1) in outs[:i]:
            if a0 < b1 and b0 < a1:
                raise ValueError(f"mhc.{op}: {name} must not overlap {other}")


check = types.SimpleNamespace(**{k: getattr(_checks, k) for k in dir(_checks)
                                 if not k.startswith("__")},
                              runnable=_runnable, disjoint=_disjoint)

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
_MAIN_WS = "Tensor? main_workspace=None"
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
    "pre_overlap": f"({_OVL}, *, {_OPT}, {_MAIN_WS}) -> (Tensor, Tensor, Tensor, Tensor)",
    "pre_overlap_out": f"({_OVL}, *, {_PRE_OUT}, {_OPT}, {_MAIN_WS}) -> ()",
    "join": "(int side_stream, Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix) -> ()",
    "post": f"({_POST}) -> Tensor",
    "post_out": f"({_POST}, *, Tensor(a!) out) -> ()",
    "post_pre": f"({_POST_PRE}, *, {_WS}) -> (Tensor, Tensor)",
    "post_pre_out": f"({_POST_PRE}, *, Tensor(a!) residual_next, Tensor(b!) next_layer_input, "
                    f"{_WS}) -> ()",
    "boundary": f"({_BOUNDARY}, *, {_OPT}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "boundary_out": f"({_BOUNDARY}, *, {_BOUNDARY_OUT}, {_OPT}) -> ()",
}


def make_workspace(device, hidden, n, max_tokens):
    """A zero-filled workspace for up to `max_tokens` tokens of hidden size C and n streams: a
    uint8 tensor of _C.workspace_bytes(hidden, n, max_tokens) bytes on `device`, for the ops'
    workspace= (one per stream that runs ops concurrently)."""
    size = _C.workspace_bytes(int(hidden), int(n), int(max_tokens))
    return torch.zeros(size, dtype=torch.uint8, device=device)


class WorkspacePool:
    """Workspaces by (device, hidden, n, slot), grown to the largest token count asked for."""

    def __init__(self):
        self._buffers = {}  # key -> (capacity in tokens, uint8 tensor)

    def get(self, device, hidden, n, tokens, slot=MAIN):
        entry = self._buffers.get((device, hidden, n, slot))
        if entry is not None and tokens <= entry[0]:
            return entry[1]
        return self.reserve(device, hidden, n, tokens, slot)

    def reserve(self, device, hidden, n, max_tokens, slot=MAIN):
        """Creates (or grows) the workspace now; call before capturing a graph."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        key = (device, hidden, n, slot)
        entry = self._buffers.get(key)
        if entry is not None and max_tokens <= entry[0]:
            return entry[1]
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"mhc: no workspace for {max_tokens} tokens (C={hidden}, n={n}, slot {slot}) on "
                f"{device} while a CUDA graph is being captured; run the forward once eagerly at "
                "its largest token count before capture, call mhc.DEFAULT_POOL.reserve(...), or "
                "pass workspace=mhc.make_workspace(...)"
            )
        capacity = 16
        while capacity < max_tokens:
            capacity *= 2
        if entry is not None and device.type == "cuda":
            # The old buffer may still be in use by a launch on another stream (the overlap's
            # side stream); growing happens only in eager warm-up, so waiting here is cheap.
            torch.cuda.synchronize(device)
        buf = make_workspace(device, hidden, n, capacity)
        if device.type == "cuda":
            # The zero-fill ran on the current stream; the workspace may be used first on
            # another (a side stream, a capture stream): wait for it once, here.
            torch.cuda.synchronize(device)
        self._buffers[key] = (capacity, buf)
        return buf

    def clear(self):
        self._buffers.clear()



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


# The CPU backend checks the workspace's dtype and ignores it: without workspace= a CPU call
# takes this empty one instead of a zero-filled pool buffer of workspace_bytes(...).
_CPU_NO_WORKSPACE = torch.empty(0, dtype=torch.uint8)


def _workspace(workspace, residual, slot, name="workspace"):
    if workspace is None:
        if not residual.is_cuda:
            return _CPU_NO_WORKSPACE
        t, n, c = residual.shape
        return DEFAULT_POOL.get(residual.device, c, n, t, slot)
    if not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.uint8:
        raise ValueError(f"mhc: {name} must be a uint8 tensor from mhc.make_workspace(...)")
    if workspace.device != residual.device or not workspace.is_contiguous():
        raise ValueError(f"mhc: {name} must be a contiguous tensor on {residual.device}")
    return workspace


def _main_workspace(workspace, main_workspace, residual, norm_weight, on_side):
    """pre_overlap's input path runs on the current stream. Its only scratch is the widened copy
    of a bf16 norm weight on CUDA; when the coefficient path runs on the same stream (no side
    stream, or CPU tensors) it shares `workspace`, else it takes `main_workspace` or, only where
    it needs scratch at all, the current stream's workspace from DEFAULT_POOL."""
    if main_workspace is not None:
        return _workspace(main_workspace, residual, MAIN, "main_workspace")
    if not on_side:
        return _workspace(workspace, residual, MAIN)
    if norm_weight is not None and norm_weight.dtype == torch.bfloat16:
        return _workspace(None, residual, MAIN)
    return None


# ---- real implementations -------------------------------------------------------------------


def _pre_disjoint(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, outputs,
                  workspaces):
    """pre's outputs against its inputs and each other, before either launch writes anything."""
    check.disjoint(op, zip(("layer_input", "post", "comb", "next_pre_mix"), outputs),
                   (("residual", residual), ("fn", fn), ("hc_scale", hc_scale),
                    ("hc_base", hc_base), ("norm_weight", norm_weight), ("pre_mix", pre_mix),
                    *workspaces))


def pre_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, layer_input, post, comb,
                 next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    op = "pre"
    check.pre_args(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                   sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    check.pre_outputs(op, residual, layer_input, post, comb, next_pre_mix)
    check.runnable(op, residual)
    ws = _workspace(workspace, residual, MAIN)
    _pre_disjoint(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix,
                  (layer_input, post, comb, next_pre_mix), (("workspace", ws),))
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


def pre_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
             sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, workspace=None,
             projection="tf32", batch_invariant=False):
    check.streams("pre", residual)
    out = new_pre_outputs(residual)
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
    t, n, c = check.coefficient_args(op, residual, fn, hc_scale, hc_base, rms_eps, pre_eps,
                                     sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                                     batch_invariant)
    check.coefficient_outputs(op, post, comb, next_pre_mix, t, n, residual.device)
    check.runnable(op, residual)
    on_side = side_stream != 0 and residual.is_cuda
    ws = _workspace(workspace, residual, side_stream if on_side else MAIN)
    check.disjoint(op, (("post", post), ("comb", comb), ("next_pre_mix", next_pre_mix)),
                   (("residual", residual), ("fn", fn), ("hc_scale", hc_scale),
                    ("hc_base", hc_base), ("workspace", ws)))
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
    _, post, comb, next_pre_mix = new_pre_outputs(residual)
    coefficients_out_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                          post_mult, sinkhorn_iters, post=post, comb=comb,
                          next_pre_mix=next_pre_mix, side_stream=side_stream,
                          workspace=workspace, projection=projection,
                          batch_invariant=batch_invariant)
    return post, comb, next_pre_mix


def pre_overlap_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                         sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                         layer_input, post, comb, next_pre_mix, workspace=None,
                         projection="tf32", batch_invariant=False, main_workspace=None):
    op = "pre_overlap"
    if pre_mix is None:
        raise ValueError("mhc.pre_overlap: pre_mix is required (the V4.1 delayed form); the V4 "
                         "form cannot overlap, its input path needs this site's coefficients")
    check.pre_args(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                   sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    check.pre_outputs(op, residual, layer_input, post, comb, next_pre_mix)
    check.runnable(op, residual)
    on_side = side_stream != 0 and residual.is_cuda
    # The side stream forks after the input path is queued, so the sublayer's launch, queued
    # next on the current stream, is not held behind the coefficient path. The input path runs
    # on the current stream: its scratch is never the side stream's workspace.
    main_ws = _main_workspace(workspace, main_workspace, residual, norm_weight, on_side)
    _pre_disjoint(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix,
                  (layer_input, post, comb, next_pre_mix),
                  (("workspace", workspace), ("main_workspace", main_ws)))
    # The coefficient path checks its own arguments again; they are the ones checked above.
    # Its workspace checks run before the input path writes layer_input:
    _workspace(workspace, residual, side_stream if on_side else MAIN)
    with _on_device(residual):
        _C.input_path(residual, pre_mix, norm_weight, layer_input, norm_eps, _stream(residual),
                      workspace=main_ws)
    coefficients_out_impl(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                          post_mult, sinkhorn_iters, post=post, comb=comb,
                          next_pre_mix=next_pre_mix, side_stream=side_stream,
                          workspace=workspace, projection=projection,
                          batch_invariant=batch_invariant)


def pre_overlap_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                     sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                     workspace=None, projection="tf32", batch_invariant=False,
                     main_workspace=None):
    check.streams("pre_overlap", residual)
    out = new_pre_outputs(residual)
    pre_overlap_out_impl(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                         sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream,
                         layer_input=out[0], post=out[1], comb=out[2], next_pre_mix=out[3],
                         workspace=workspace, projection=projection,
                         batch_invariant=batch_invariant, main_workspace=main_workspace)
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
    check.runnable(op, residual)
    check.disjoint(op, (("out", out),), (("sublayer_out", sublayer_out), ("residual", residual),
                                         ("post", post), ("comb", comb)))
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
    t, n, c = check.post_pre_args(op, sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    dev = residual.device
    check.tensor(op, "residual_next", residual_next, check.BF16, (t, n, c), dev, "[T, n, C]")
    check.tensor(op, "next_layer_input", next_layer_input, check.BF16, (t, c), dev, "[T, C]")
    check.runnable(op, residual)
    ws = _workspace(workspace, residual, MAIN)
    check.disjoint(op, (("residual_next", residual_next), ("next_layer_input", next_layer_input)),
                   (("residual", residual), ("sublayer_out", sublayer_out), ("post", post),
                    ("comb", comb), ("next_pre_mix", next_pre_mix),
                    ("next_norm_weight", next_norm_weight), ("workspace", ws)))
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
    check.boundary_args(op, sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                    hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                    projection, batch_invariant)
    check.boundary_outputs(op, residual, residual_next, layer_input, next_post, next_comb,
                        next_pre_mix)
    check.runnable(op, residual)
    ws = _workspace(workspace, residual, MAIN)
    check.disjoint(op, (("residual_next", residual_next), ("layer_input", layer_input),
                        ("next_post", next_post), ("next_comb", next_comb),
                        ("next_pre_mix", next_pre_mix)),
                   (("residual", residual), ("sublayer_out", sublayer_out), ("post", post),
                    ("comb", comb), ("pre_mix", pre_mix), ("norm_weight", norm_weight),
                    ("fn", fn), ("hc_scale", hc_scale), ("hc_base", hc_base), ("workspace", ws)))
    with _on_device(residual):
        _C.boundary(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                    hc_base, residual_next, layer_input, next_pre_mix, next_post, next_comb, ws,
                    rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                    projection, _stream(residual), batch_invariant=batch_invariant)


def boundary_impl(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
                  rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *,
                  workspace=None, projection="tf32", batch_invariant=False):
    check.streams("boundary", residual)
    out = new_boundary_outputs(residual)
    boundary_out_impl(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                      hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                      norm_eps, residual_next=out[0], layer_input=out[1], next_post=out[2],
                      next_comb=out[3], next_pre_mix=out[4], workspace=workspace,
                      projection=projection, batch_invariant=batch_invariant)
    return out


def hc_prenorm_gemm_impl(x, fn, out, sqrsum, num_splits):
    op = "hc_prenorm_gemm"
    check.gemm_args(x, fn, out, sqrsum, num_splits)
    check.runnable(op, x)
    check.disjoint(op, (("out", out), ("sqrsum", sqrsum)), (("x", x), ("fn", fn)))
    with _on_device(x):
        m, nmix = x.shape[0], fn.shape[0]
        _C.prenorm_gemm(x, fn, out.view(num_splits, m, nmix), sqrsum.view(num_splits, m),
                        num_splits, _stream(x))


IMPLS = {
    "hc_prenorm_gemm": hc_prenorm_gemm_impl,
    "pre": pre_impl,
    "pre_out": pre_out_impl,
    "coefficients": coefficients_impl,
    "coefficients_out": coefficients_out_impl,
    "pre_overlap": pre_overlap_impl,
    "pre_overlap_out": pre_overlap_out_impl,
    "join": join_impl,
    "post": post_impl,
    "post_out": post_out_impl,
    "post_pre": post_pre_impl,
    "post_pre_out": post_pre_out_impl,
    "boundary": boundary_impl,
    "boundary_out": boundary_out_impl,
}


DEFAULT_POOL = WorkspacePool()

LIB = torch.library.Library("mhc_dlpack", "DEF")  # noqa: lives as long as the module

for _name, _schema in SCHEMAS.items():
    LIB.define(_name + _schema)
    LIB.impl(_name, IMPLS[_name], "CompositeExplicitAutograd")
    _packet = getattr(torch.ops.mhc_dlpack, _name)
    LIB.impl(_name, inference_only(_packet.default, _name), "Autograd", with_keyset=True)
