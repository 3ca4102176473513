"""Checks in Python before any kernel runs, the same in the real and the fake implementations:
scalars (finite, in range), the C++ shape limits on each device, messages that name the right
argument, meta tensors, and nothing written by a refused call."""

import re

import pytest
import torch
from conftest import Site
from torch._subclasses.fake_tensor import FakeTensorMode

S = Site(tokens=4, n=4, hidden=128)
T, N, C = S.tokens, S.n, S.hidden


def _outputs():
    return dict(layer_input=torch.zeros(T, C, dtype=torch.bfloat16), post=torch.zeros(T, N),
                comb=torch.zeros(T, N, N), next_pre_mix=torch.zeros(T, N))


def _scalars(**change):
    e = dict(S.eps, post_mult=S.post_mult, sinkhorn_iters=S.iters)
    e.update(change)
    return (e["rms_eps"], e["pre_eps"], e["sinkhorn_eps"], e["post_mult"], e["sinkhorn_iters"],
            e["norm_eps"])


BAD_SCALARS = {
    "rms_eps": (float("inf"), "rms_eps must be a finite number >= 0, got inf"),
    "norm_eps": (float("inf"), "norm_eps must be a finite number >= 0, got inf"),
    "post_mult": (float("-inf"), "post_mult must be a finite number, got -inf"),
    "sinkhorn_iters": (2**31, "sinkhorn_iters must be >= 1 and <= 1000, got 2147483648"),
}


@pytest.mark.parametrize("form", ["v4", "v41"])
@pytest.mark.parametrize("name", sorted(BAD_SCALARS))
def test_bad_scalar_writes_nothing(mhc, form, name):
    value, message = BAD_SCALARS[name]
    outs = _outputs()
    pre_mix = None if form == "v4" else S.pre_mix
    with pytest.raises(RuntimeError, match=re.escape(message)):
        torch.ops.mhc.pre_out(*S.pre_args()[:5], pre_mix, *_scalars(**{name: value}), **outs)
    assert all(not o.any() for o in outs.values()), "a refused call wrote an output"


def _fake(tensors):
    mode = FakeTensorMode()
    return mode, [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in tensors]


@pytest.mark.parametrize("name", sorted(BAD_SCALARS))
def test_fake_refuses_the_same_scalars(mhc, name):
    value, message = BAD_SCALARS[name]
    mode, args = _fake(S.pre_args()[:6])
    with mode, pytest.raises(RuntimeError, match=re.escape(message)):
        torch.ops.mhc.pre(*args, *_scalars(**{name: value}))


SHAPES = {  # (n, C): the message, real and fake
    (16, 128): "residual has n=16 streams; n must be in 1..8",
    (65, 64): "residual has n=65 streams; n must be in 1..8",
    (4, 12): "residual has hidden size C=12; C must be a positive multiple of 8",
    (4, 2**21): "residual has hidden size C=2097152",
}


@pytest.mark.parametrize("fake", [False, True], ids=["real", "fake"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_limits(mhc, fake, shape):
    n, c = shape
    residual = torch.empty(0 if c > 4096 else 1, n, c, dtype=torch.bfloat16)
    args = (torch.empty(residual.shape[0], c, dtype=torch.bfloat16), residual,
            torch.empty(residual.shape[0], n), torch.empty(residual.shape[0], n, n))
    mode, fargs = _fake(args) if fake else (None, args)
    with (mode or torch.no_grad()), pytest.raises(RuntimeError, match=re.escape(SHAPES[shape])):
        torch.ops.mhc.post(*fargs)


def test_c_extension_names_the_real_n(mhc):
    """mhc._C reports the caller's n, not a clamped one."""
    r = torch.zeros(1, 65, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="streams n=65 must be in 1..8"):
        mhc._C.post(torch.zeros(1, 64, dtype=torch.bfloat16), r, torch.zeros(1, 65),
                    torch.zeros(1, 65, 65), torch.empty_like(r))


def test_c_extension_limits_sinkhorn_iters(mhc):
    ws = torch.zeros(16, dtype=torch.uint8)
    args = (S.residual, S.fn, S.hc_scale, S.hc_base, torch.empty(T, N), torch.empty(T, N),
            torch.empty(T, N, N), ws, 1e-6, 1e-6, 1e-6, 2.0)
    with pytest.raises(ValueError, match="sinkhorn_iters=1001 must be at most 1000"):
        mhc._C.coefficients(*args, 1001, "fp32")
    assert mhc._C.limits()["max_sinkhorn_iters"] == 1000


def test_fake_cuda_limits(mhc):
    """A fake CUDA residual gets the CUDA kernels' limits (n 2 or 4, C a multiple of 64)."""
    mode = FakeTensorMode()
    with mode:
        try:
            r = torch.empty(2, 3, 64, dtype=torch.bfloat16, device="cuda")
        except Exception as e:  # noqa: BLE001 (a torch without fake CUDA tensors here)
            pytest.skip(f"no fake CUDA tensors: {e}")
        post, comb = torch.empty(2, 3, device="cuda"), torch.empty(2, 3, 3, device="cuda")
        f = torch.empty(2, 64, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(RuntimeError, match="the CUDA kernels support n = 2 or 4 streams, got 3"):
            torch.ops.mhc.post(f, r, post, comb)


def test_boundary_out_names_next_outputs(mhc):
    args = S.boundary_args()
    outs = dict(residual_next=torch.empty_like(S.residual),
                layer_input=torch.empty(T, C, dtype=torch.bfloat16), next_post=torch.empty(T, N),
                next_comb=torch.empty(T, N, N), next_pre_mix=torch.empty(T, N))
    with pytest.raises(RuntimeError, match="next_comb has dtype float64"):
        torch.ops.mhc.boundary_out(*args, **dict(outs, next_comb=torch.empty(T, N, N).double()))
    with pytest.raises(RuntimeError, match=re.escape("next_post has shape [4, 5]")):
        torch.ops.mhc.boundary_out(*args, **dict(outs, next_post=torch.empty(T, N + 1)))


def test_prenorm_gemm_messages(mhc):
    x = S.residual.view(T, -1)
    with pytest.raises(RuntimeError, match="out must be a torch.Tensor, got NoneType"):
        mhc.hc_prenorm_gemm(x, S.fn, None, None, 1)
    with pytest.raises(RuntimeError, match=re.escape("expected [M, N] = [4, 24]")):
        mhc.hc_prenorm_gemm(x, S.fn, torch.empty(96), torch.empty(4), 1)
    with pytest.raises(RuntimeError, match=re.escape("fn has N=12 rows; N must be 8, 16, 24 or 32")):
        mhc.hc_prenorm_gemm(x, S.fn[:12].contiguous(), torch.empty(4, 12), torch.empty(4), 1)


def test_out_tuple_lengths(mhc):
    with pytest.raises(RuntimeError, match=re.escape("out= needs 3 tensors (post, comb, next_pre_mix)")):
        mhc.coefficients(*S.coef_args(), out=(torch.empty(T, N),))
    with pytest.raises(RuntimeError, match="out= needs 5 tensors"):
        mhc.boundary(*S.boundary_args(), out=(torch.empty_like(S.residual),))
    with pytest.raises(RuntimeError, match="out= needs 2 tensors"):
        mhc.post_pre(*S.post_args(), S.pre_mix, S.norm_weight, 1e-6, out=[S.residual] * 3)


def test_supports_overlap_on_cpu_asks_for_arch(mhc):
    with pytest.raises(ValueError, match=re.escape("pass arch=(major, minor)")):
        mhc.supports_overlap("cpu", hidden=5120, n=4, tokens=8)


def test_meta_tensors_get_the_fake(mhc):
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in S.pre_args()]
    layer_input, post, comb, nxt = torch.ops.mhc.pre(*meta)
    assert layer_input.device.type == "meta" and layer_input.shape == (T, C)
    assert comb.shape == (T, N, N) and nxt.dtype == torch.float32
    out = torch.ops.mhc.post(*(t.to("meta") for t in S.post_args()))
    assert out.device.type == "meta" and out.shape == S.residual.shape
    with pytest.raises(RuntimeError, match="n=16 streams"):  # the limits hold on meta too
        torch.ops.mhc.post(torch.empty(1, 64, dtype=torch.bfloat16, device="meta"),
                           torch.empty(1, 16, 64, dtype=torch.bfloat16, device="meta"),
                           torch.empty(1, 16, device="meta"), torch.empty(1, 16, 16, device="meta"))


def test_kernels_by_dispatch_key(mhc):
    """C++ kernels for CPU and CUDA tensors, the C++ autograd router, the Python fakes for meta
    (so a kernel never sees a meta tensor), and the twins the router sends calls to."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in mhc.ops.NAMES:
        for op in (name, f"_nograd_{name}", f"_grad_{name}"):
            assert has(f"mhc::{op}", "CPU") and has(f"mhc::{op}", "CUDA"), op
            assert has(f"mhc::{op}", "Meta"), op
        assert has(f"mhc::{name}", "Autograd") and has(f"mhc::_grad_{name}", "Autograd"), name
        assert not has(f"mhc::_nograd_{name}", "Autograd"), name


def test_every_op_and_function_is_documented(mhc):
    for name in mhc.ops.SCHEMAS:
        doc = getattr(torch.ops.mhc, name).__doc__
        assert doc and ("[T, n" in doc or "[M, K]" in doc) and "Inference only" in doc, name
    for name in ("pre", "coefficients", "pre_overlap", "join", "post", "post_pre", "boundary",
                 "hc_prenorm_gemm", "make_workspace", "supports_overlap"):
        doc = getattr(mhc, name).__doc__
        assert doc and any(w in doc for w in ("bf16", "f32", "uint8", "arch")), name
