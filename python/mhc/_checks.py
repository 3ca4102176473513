"""Argument checks shared by the real and the fake implementations of the ops, so that a bad
call fails with the same clear message eagerly, under torch.compile tracing and before any
kernel runs. Each message names the argument and what was expected."""

import torch

BF16 = (torch.bfloat16,)
F32 = (torch.float32,)
NORM_WEIGHT = (torch.float32, torch.bfloat16)


def _names(dtypes):
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(op, name, t, dtypes, shape, device, dims):
    """Checks one tensor argument: a tensor, dtype, device, shape, contiguity.

    `shape` is the expected shape, `dims` its symbolic names (e.g. "[T, n, C]") for the message.
    The common case is one short condition (this runs on every call); the message is built only
    on failure.
    """
    if (
        isinstance(t, torch.Tensor)
        and t.dtype in dtypes
        and (device is None or t.device == device)
        and t.shape == shape
        and t.is_contiguous()
    ):
        return
    _explain(op, name, t, dtypes, shape, device, dims)


def _explain(op, name, t, dtypes, shape, device, dims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mhc.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"mhc.{op}: {name} has dtype {_names((t.dtype,))}, expected {_names(dtypes)}")
    if device is not None and t.device != device:
        raise ValueError(
            f"mhc.{op}: {name} is on {t.device} but residual is on {device}; "
            "all tensors of a call must be on one device"
        )
    if t.shape != shape:
        want = ", ".join(str(s) for s in shape)
        raise ValueError(
            f"mhc.{op}: {name} has shape {list(t.shape)}, expected {dims} = [{want}]"
        )
    raise ValueError(
        f"mhc.{op}: {name} is not contiguous (strides {list(t.stride())}); pass .contiguous()"
    )


def optional(op, name, t, dtypes, shape, device, dims):
    if t is not None:
        tensor(op, name, t, dtypes, shape, device, dims)


def streams(op, residual):
    """residual [T, n, C] bf16: returns (T, n, C)."""
    if not isinstance(residual, torch.Tensor):
        raise TypeError(f"mhc.{op}: residual must be a torch.Tensor, got {type(residual).__name__}")
    if residual.dim() != 3:
        raise ValueError(
            f"mhc.{op}: residual has shape {list(residual.shape)}, expected [T, n, C] "
            "(tokens, streams, hidden); flatten batch and sequence into T"
        )
    t, n, c = residual.shape
    tensor(op, "residual", residual, BF16, (t, n, c), None, "[T, n, C]")
    if residual.device.type not in ("cpu", "cuda"):
        raise ValueError(f"mhc.{op}: residual is on {residual.device}; mhc runs on cpu and cuda")
    return t, n, c


def weights(op, fn, hc_scale, hc_base, n, c, device):
    nmix = n * (n + 2)
    tensor(op, "fn", fn, F32, (nmix, n * c), device, "[n(n+2), n*C]")
    tensor(op, "hc_scale", hc_scale, F32, (3,), device, "[3]")
    tensor(op, "hc_base", hc_base, F32, (nmix,), device, "[n(n+2)]")


def scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
            batch_invariant=False):
    for name, value in (("rms_eps", rms_eps), ("pre_eps", pre_eps), ("sinkhorn_eps", sinkhorn_eps)):
        if not value >= 0.0:
            raise ValueError(f"mhc.{op}: {name} must be a finite number >= 0, got {value}")
    if not post_mult == post_mult:
        raise ValueError(f"mhc.{op}: post_mult is NaN")
    if sinkhorn_iters < 1:
        raise ValueError(f"mhc.{op}: sinkhorn_iters must be >= 1, got {sinkhorn_iters}")
    if projection not in ("tf32", "fp32"):
        raise ValueError(f"mhc.{op}: projection must be 'tf32' or 'fp32', got {projection!r}")
    if not isinstance(batch_invariant, bool):
        raise TypeError(f"mhc.{op}: batch_invariant must be a bool, got "
                        f"{type(batch_invariant).__name__}")


def norm_eps(op, value):
    if not value >= 0.0:
        raise ValueError(f"mhc.{op}: norm_eps must be a finite number >= 0, got {value}")


def coefficient_outputs(op, post, comb, next_pre_mix, t, n, device):
    tensor(op, "post", post, F32, (t, n), device, "[T, n]")
    tensor(op, "comb", comb, F32, (t, n, n), device, "[T, n, n]")
    tensor(op, "next_pre_mix", next_pre_mix, F32, (t, n), device, "[T, n]")


def post_inputs(op, sublayer_out, residual, post, comb):
    t, n, c = streams(op, residual)
    dev = residual.device
    tensor(op, "sublayer_out", sublayer_out, BF16, (t, c), dev, "[T, C]")
    tensor(op, "post", post, F32, (t, n), dev, "[T, n]")
    tensor(op, "comb", comb, F32, (t, n, n), dev, "[T, n, n]")
    return t, n, c


def overlaps(a, b):
    """Whether two tensors' byte ranges intersect (cheap: data pointers only)."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def no_alias(op, out_name, out, in_name, tensor_in):
    """Real implementations only (fake tensors have no data pointers)."""
    if overlaps(out, tensor_in):
        raise ValueError(f"mhc.{op}: {out_name} must not overlap {in_name} (the kernel reads "
                         f"{in_name} while writing {out_name}); use another buffer")
