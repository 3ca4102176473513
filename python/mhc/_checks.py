"""Argument checks of the ops' fake implementations (torch.compile, meta tensors): the same
conditions, order and messages as the C++ kernels' checks (python/src/torch/checks.cpp), so that a
bad call fails alike eagerly, under torch.compile tracing and before any kernel runs. Each message
names the argument and what was expected. Errors are RuntimeError, as the C++ kernels' are (a
stable-ABI kernel's exception reaches Python as RuntimeError), None for a tensor included (the
dispatcher passes it on); TypeError only for a batch_invariant that is not a bool, which only a
direct Python call can pass (the schema's bool converts)."""

import math

import torch

from mhc import _C

LIMITS = _C.limits()  # the C++ checks' constants: n, C, sinkhorn_iters, the CUDA kernels' n and C
INT_MAX = 2**31 - 1  # an `int` of mhc._C
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
        raise RuntimeError(f"mhc.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise RuntimeError(f"mhc.{op}: {name} has dtype {_names((t.dtype,))}, expected {_names(dtypes)}")
    if device is not None and t.device != device:
        raise RuntimeError(
            f"mhc.{op}: {name} is on {t.device} but residual is on {device}; "
            "all tensors of a call must be on one device"
        )
    if t.shape != shape:
        want = ", ".join(str(s) for s in shape)
        raise RuntimeError(
            f"mhc.{op}: {name} has shape {list(t.shape)}, expected {dims} = [{want}]"
        )
    raise RuntimeError(
        f"mhc.{op}: {name} is not contiguous (strides {list(t.stride())}); pass .contiguous()"
    )


def optional(op, name, t, dtypes, shape, device, dims):
    if t is not None:
        tensor(op, name, t, dtypes, shape, device, dims)


def streams(op, residual):
    """residual [T, n, C] bf16 on cpu, cuda or meta, within the limits of its device: (T, n, C).

    Meta tensors pass (the fake implementations are the ops' Meta kernels); the C++ kernels
    refuse any device but cpu and cuda."""
    if not isinstance(residual, torch.Tensor):
        raise RuntimeError(f"mhc.{op}: residual must be a torch.Tensor, got "
                           f"{type(residual).__name__}")
    if residual.dim() != 3:
        raise RuntimeError(
            f"mhc.{op}: residual has shape {list(residual.shape)}, expected [T, n, C] "
            "(tokens, streams, hidden); flatten batch and sequence into T"
        )
    t, n, c = residual.shape
    tensor(op, "residual", residual, BF16, (t, n, c), None, "[T, n, C]")
    kind = residual.device.type
    if kind not in ("cpu", "cuda", "meta"):
        raise RuntimeError(f"mhc.{op}: residual is on {residual.device}; mhc runs on cpu and cuda")
    shape_limits(op, n, c, kind)
    return t, n, c


def shape_limits(op, n, c, kind):
    """The C++ checks' limits on n and C (mhc::validate on every device, the CUDA kernels' own on
    cuda), so that real and fake implementations refuse the same shapes with the same message."""
    if not 1 <= n <= LIMITS["max_streams"]:
        raise RuntimeError(f"mhc.{op}: residual has n={n} streams; n must be in "
                         f"1..{LIMITS['max_streams']}")
    step, top = LIMITS["hidden_multiple"], LIMITS["max_hidden"]
    if not (0 < c <= top and c % step == 0):
        raise RuntimeError(f"mhc.{op}: residual has hidden size C={c}; C must be a positive "
                         f"multiple of {step} and at most {top}")
    if kind == "cuda":
        if n not in LIMITS["cuda_streams"]:
            raise RuntimeError(f"mhc.{op}: the CUDA kernels support n = 2 or 4 streams, got {n}")
        if c % LIMITS["cuda_hidden_multiple"] != 0:
            raise RuntimeError(f"mhc.{op}: the CUDA kernels need C (the last dimension) to be a "
                             f"multiple of {LIMITS['cuda_hidden_multiple']}, got {c}")


def weights(op, fn, hc_scale, hc_base, n, c, device):
    nmix = n * (n + 2)
    tensor(op, "fn", fn, F32, (nmix, n * c), device, "[n(n+2), n*C]")
    tensor(op, "hc_scale", hc_scale, F32, (3,), device, "[3]")
    tensor(op, "hc_base", hc_base, F32, (nmix,), device, "[n(n+2)]")


def _finite_nonnegative(op, name, value):
    # Comparisons only (no math.isfinite): a symbolic float under torch.compile supports them.
    if not (0.0 <= value < math.inf):
        raise RuntimeError(f"mhc.{op}: {name} must be a finite number >= 0, got {value}")
    param_range(op, name, value)


def param_range(op, name, value):
    """The C++ range of an epsilon or post_mult (mhc::param_ranges, docs/limits.md): e.g. an
    rms_eps of 0 makes an all-zero row NaN, one past fp32 makes layer_input zero."""
    lo, hi = LIMITS["param_ranges"][name]
    if not (lo <= value <= hi):
        raise RuntimeError(f"mhc.{op}: {name} must be in [{lo:g}, {hi:g}], got {value} "
                         "(docs/limits.md, parameter ranges)")


def scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
            batch_invariant=False):
    for name, value in (("rms_eps", rms_eps), ("pre_eps", pre_eps), ("sinkhorn_eps", sinkhorn_eps)):
        _finite_nonnegative(op, name, value)
    if not (-math.inf < post_mult < math.inf):
        raise RuntimeError(f"mhc.{op}: post_mult must be a finite number, got {post_mult}")
    param_range(op, "post_mult", post_mult)
    top = LIMITS["max_sinkhorn_iters"]
    if not 1 <= sinkhorn_iters <= top:
        raise RuntimeError(f"mhc.{op}: sinkhorn_iters must be >= 1 and <= {top}, got {sinkhorn_iters}")
    if projection not in ("tf32", "fp32"):
        raise RuntimeError(f"mhc.{op}: projection must be 'tf32' or 'fp32', got {projection!r}")
    if not isinstance(batch_invariant, bool):
        raise TypeError(f"mhc.{op}: batch_invariant must be a bool, got "
                        f"{type(batch_invariant).__name__}")


def coefficient_outputs(op, post, comb, next_pre_mix, t, n, device,
                        names=("post", "comb", "next_pre_mix")):
    tensor(op, names[0], post, F32, (t, n), device, "[T, n]")
    tensor(op, names[1], comb, F32, (t, n, n), device, "[T, n, n]")
    tensor(op, names[2], next_pre_mix, F32, (t, n), device, "[T, n]")


def post_inputs(op, sublayer_out, residual, post, comb):
    t, n, c = streams(op, residual)
    dev = residual.device
    tensor(op, "sublayer_out", sublayer_out, BF16, (t, c), dev, "[T, C]")
    tensor(op, "post", post, F32, (t, n), dev, "[T, n]")
    tensor(op, "comb", comb, F32, (t, n, n), dev, "[T, n, n]")
    return t, n, c


# ---- the checks of each op, shared by its real and fake implementations -------------------


def pre_args(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
             sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant):
    t, n, c = streams(op, residual)
    dev = residual.device
    weights(op, fn, hc_scale, hc_base, n, c, dev)
    optional(op, "norm_weight", norm_weight, NORM_WEIGHT, (c,), dev, "[C]")
    optional(op, "pre_mix", pre_mix, F32, (t, n), dev, "[T, n]")
    scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
            batch_invariant)
    _finite_nonnegative(op, "norm_eps", norm_eps)
    return t, n, c


def pre_outputs(op, residual, layer_input, post, comb, next_pre_mix):
    t, n, c = residual.shape
    dev = residual.device
    tensor(op, "layer_input", layer_input, BF16, (t, c), dev, "[T, C]")
    coefficient_outputs(op, post, comb, next_pre_mix, t, n, dev)


def coefficient_args(op, residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                     post_mult, sinkhorn_iters, projection, batch_invariant):
    t, n, c = streams(op, residual)
    weights(op, fn, hc_scale, hc_base, n, c, residual.device)
    scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
            batch_invariant)
    return t, n, c


def post_pre_args(op, sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                  norm_eps):
    t, n, c = post_inputs(op, sublayer_out, residual, post, comb)
    dev = residual.device
    tensor(op, "next_pre_mix", next_pre_mix, F32, (t, n), dev, "[T, n]")
    optional(op, "next_norm_weight", next_norm_weight, NORM_WEIGHT, (c,), dev, "[C]")
    _finite_nonnegative(op, "norm_eps", norm_eps)
    return t, n, c


def boundary_args(op, sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                  hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
                  projection, batch_invariant):
    t, n, c = post_inputs(op, sublayer_out, residual, post, comb)
    dev = residual.device
    tensor(op, "pre_mix", pre_mix, F32, (t, n), dev, "[T, n]")
    optional(op, "norm_weight", norm_weight, NORM_WEIGHT, (c,), dev, "[C]")
    _finite_nonnegative(op, "norm_eps", norm_eps)
    weights(op, fn, hc_scale, hc_base, n, c, dev)
    scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
            batch_invariant)
    return t, n, c


def boundary_outputs(op, residual, residual_next, layer_input, next_post, next_comb,
                     next_pre_mix):
    t, n, c = residual.shape
    dev = residual.device
    tensor(op, "residual_next", residual_next, BF16, (t, n, c), dev, "[T, n, C]")
    tensor(op, "layer_input", layer_input, BF16, (t, c), dev, "[T, C]")
    coefficient_outputs(op, next_post, next_comb, next_pre_mix, t, n, dev,
                        names=("next_post", "next_comb", "next_pre_mix"))


def gemm_args(x, fn, out, sqrsum, num_splits):
    op = "hc_prenorm_gemm"
    for name, t in (("x", x), ("fn", fn), ("out", out), ("sqrsum", sqrsum)):
        if not isinstance(t, torch.Tensor):
            raise RuntimeError(f"mhc.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dim() != 2:
        raise RuntimeError(f"mhc.{op}: x must be a [M, K] tensor, got shape {list(x.shape)}")
    m, k = x.shape
    tensor(op, "x", x, BF16, (m, k), None, "[M, K]")
    if fn.dim() != 2:
        raise RuntimeError(f"mhc.{op}: fn must be a [N, K] tensor, got shape {list(fn.shape)}")
    nmix = fn.shape[0]
    tensor(op, "fn", fn, F32, (nmix, k), x.device, "[N, K]")
    if not 1 <= num_splits <= INT_MAX:
        raise RuntimeError(f"mhc.{op}: num_splits must be >= 1 and <= {INT_MAX}, got {num_splits}")
    # DeepGEMM also takes [M, N] / [M] when there is one split.
    if out.dim() == 3 or num_splits > 1:
        tensor(op, "out", out, F32, (num_splits, m, nmix), x.device, "[num_splits, M, N]")
    else:
        tensor(op, "out", out, F32, (m, nmix), x.device, "[M, N]")
    if sqrsum.dim() == 2 or num_splits > 1:
        tensor(op, "sqrsum", sqrsum, F32, (num_splits, m), x.device, "[num_splits, M]")
    else:
        tensor(op, "sqrsum", sqrsum, F32, (m,), x.device, "[M]")
    # The kernel's limits on every device (mhc::check_prenorm_gemm_shape).
    if nmix not in (8, 16, 24, 32):
        raise RuntimeError(f"mhc.{op}: fn has N={nmix} rows; N must be 8, 16, 24 or 32")
    block = LIMITS["prenorm_block_k"]
    if not (k > 0 and k % block == 0):
        raise RuntimeError(f"mhc.{op}: K={k} must be a positive multiple of {block}")
