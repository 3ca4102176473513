"""The Python face of the torch ops: `out=` tuples instead of the `_out` ops' keywords, a
torch.cuda.Stream instead of a raw handle for the overlap, and the overlap policy."""

from typing import NamedTuple, Optional, Sequence

import torch

from mhc import _C
from mhc import ops as _ops  # noqa: F401  (registers torch.ops.mhc.*)
from mhc._workspace import DEFAULT_POOL, make_workspace  # noqa: F401

_mhc = torch.ops.mhc


def hc_prenorm_gemm(x, fn, out, sqrsum, num_splits=1):
    """DeepGEMM's tf32_hc_prenorm_gemm: writes out[s] = x_s fn_s^T and sqrsum[s] = sum x_s^2."""
    _mhc.hc_prenorm_gemm(x, fn, out, sqrsum, num_splits)


def pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
        post_mult, sinkhorn_iters, norm_eps, *, out: Optional[Sequence[torch.Tensor]] = None,
        workspace=None, projection="tf32", batch_invariant=False):
    """One site's pre: (layer_input, post, comb, next_pre_mix). pre_mix None: the V4 form.
    batch_invariant: a token's outputs do not depend on T (docs/batch_invariance.md)."""
    args = (residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
            post_mult, sinkhorn_iters, norm_eps)
    opts = dict(workspace=workspace, projection=projection, batch_invariant=batch_invariant)
    return _four_outputs(_mhc.pre, _mhc.pre_out, args, out, opts)


def _four_outputs(op, op_out, args, out, opts):
    """op(*args) returning (layer_input, post, comb, next_pre_mix), or op_out writing `out`;
    `opts` are the ops' keyword options (workspace, projection, batch_invariant)."""
    if out is None:
        return op(*args, **opts)
    layer_input, post_mix, comb, next_pre_mix = out
    op_out(*args, layer_input=layer_input, post=post_mix, comb=comb, next_pre_mix=next_pre_mix,
           **opts)
    return tuple(out)


def coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                 sinkhorn_iters, *, out=None, stream: Optional[torch.cuda.Stream] = None,
                 workspace=None, projection="tf32", batch_invariant=False):
    """The coefficient path alone: (post, comb, next_pre_mix). With `stream`, launched on that
    side stream after the current stream's queued work; join(stream, ...) before reading them."""
    args = (residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
            sinkhorn_iters)
    side = 0 if stream is None else stream.cuda_stream
    opts = dict(side_stream=side, workspace=workspace, projection=projection,
                batch_invariant=batch_invariant)
    if out is None:
        return _mhc.coefficients(*args, **opts)
    post_mix, comb, next_pre_mix = out
    _mhc.coefficients_out(*args, post=post_mix, comb=comb, next_pre_mix=next_pre_mix, **opts)
    return tuple(out)


def pre_overlap(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, stream: torch.cuda.Stream,
                out=None, workspace=None, projection="tf32", batch_invariant=False):
    """V4.1 pre with the overlap: layer_input on the current stream, (post, comb, next_pre_mix)
    on `stream` (the caller's side stream). Call join(stream, post, comb, next_pre_mix) before
    post, and keep every argument alive until then."""
    args = (residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
            post_mult, sinkhorn_iters, norm_eps, stream.cuda_stream)
    opts = dict(workspace=workspace, projection=projection, batch_invariant=batch_invariant)
    return _four_outputs(_mhc.pre_overlap, _mhc.pre_overlap_out, args, out, opts)


def join(stream: torch.cuda.Stream, post_mix, comb, next_pre_mix):
    """The current stream waits for the side stream's coefficient path."""
    _mhc.join(stream.cuda_stream, post_mix, comb, next_pre_mix)


def post(sublayer_out, residual, post_mix, comb, *, out=None):
    """residual_next[T, n, C] = bf16(post[k] F + sum_j comb[j][k] residual[j])."""
    if out is None:
        return _mhc.post(sublayer_out, residual, post_mix, comb)
    _mhc.post_out(sublayer_out, residual, post_mix, comb, out=out)
    return out


def post_pre(sublayer_out, residual, post_mix, comb, next_pre_mix, next_norm_weight, norm_eps, *,
             out=None, workspace=None):
    """This site's post and the next site's input path (V4.1): (residual_next, next_layer_input)."""
    args = (sublayer_out, residual, post_mix, comb, next_pre_mix, next_norm_weight, norm_eps)
    if out is None:
        return _mhc.post_pre(*args, workspace=workspace)
    residual_next, next_layer_input = out
    _mhc.post_pre_out(*args, residual_next=residual_next, next_layer_input=next_layer_input,
                      workspace=workspace)
    return tuple(out)


def boundary(sublayer_out, residual, post_mix, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
             rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, out=None,
             workspace=None, projection="tf32", batch_invariant=False):
    """A whole V4.1 boundary in one call: this site's post, the next site's input path with the
    carried pre_mix, and the next site's coefficients. Returns (residual_next, layer_input,
    next_post, next_comb, next_pre_mix): post_pre then coefficients, fused where the kernel plan
    can (docs/python.md)."""
    args = (sublayer_out, residual, post_mix, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
            rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps)
    opts = dict(workspace=workspace, projection=projection, batch_invariant=batch_invariant)
    if out is None:
        return _mhc.boundary(*args, **opts)
    residual_next, layer_input, next_post, next_comb, next_pre_mix = out
    _mhc.boundary_out(*args, residual_next=residual_next, layer_input=layer_input,
                      next_post=next_post, next_comb=next_comb, next_pre_mix=next_pre_mix, **opts)
    return tuple(out)


class OverlapDecision(NamedTuple):
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
        if device is None and not torch.cuda.is_available():
            raise ValueError("mhc.supports_overlap: no CUDA device; pass arch=(major, minor)")
        arch = torch.cuda.get_device_capability(device)
    ok, code, reason = _C.supports_overlap(int(arch[0]), int(arch[1]), int(hidden), int(n),
                                           int(tokens), str(mode), int(tp), str(kernel_config))
    return OverlapDecision(bool(ok), str(code), str(reason))
