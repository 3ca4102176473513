"""The head collapse (docs/head.md): torch.ops.mhc.head / head_out's checks and fakes (the same
conditions, order and messages as python/src/torch/head.cpp), and mhc.head."""

import math

import torch

from mhc import _checks as check
from mhc._docs import wrapper_doc


def _epsilon(op, name, value, range_name):
    # Comparisons only (no math.isfinite): a symbolic float under torch.compile supports them.
    if not (0.0 <= value < math.inf):
        raise RuntimeError(f"mhc.{op}: {name} must be a finite number >= 0, got {value}")
    lo, hi = check.LIMITS["param_ranges"][range_name]
    if not (lo <= value <= hi):
        raise RuntimeError(f"mhc.{op}: {name} must be in [{lo:g}, {hi:g}], got {value} "
                           "(docs/limits.md, parameter ranges)")


def head_args(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps):
    op = "head"
    t, n, c = check.streams(op, residual)
    dev = residual.device
    check.tensor(op, "fn", fn, check.F32, (n, n * c), dev, "[n, n*C]")
    check.tensor(op, "hc_scale", hc_scale, check.F32, (1,), dev, "[1]")
    check.tensor(op, "hc_base", hc_base, check.F32, (n,), dev, "[n]")
    check.optional(op, "norm_weight", norm_weight, check.NORM_WEIGHT, (c,), dev, "[C]")
    _epsilon(op, "rms_eps", rms_eps, "rms_eps")
    _epsilon(op, "hc_eps", hc_eps, "pre_eps")  # added to a sigmoid, as pre_eps is
    if norm_eps is not None:
        _epsilon(op, "norm_eps", norm_eps, "norm_eps")
    return t, n, c


def fake_head(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight=None, norm_eps=None):
    t, _, c = head_args(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps)
    return residual.new_empty((t, c))


def fake_head_out(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight=None,
                  norm_eps=None, *, out):
    t, _, c = head_args(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps)
    check.tensor("head", "out", out, check.BF16, (t, c), residual.device, "[T, C]")


FAKES = {"head": fake_head, "head_out": fake_head_out}


def head(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight=None, norm_eps=None, *,
         out=None):
    args = (residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps)
    if out is None:  # the OpOverloads: no overload resolution per call
        return torch.ops.mhc.head.default(*args)
    torch.ops.mhc.head_out.default(*args, out=out)
    return out


head.__doc__ = wrapper_doc("head", "mhc.head(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, "
                           "norm_weight=None, norm_eps=None, *, out=None) -> out\n"
                           "out: the [T, C] bf16 tensor to write (returned).")
