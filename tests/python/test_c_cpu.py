"""Smoke tests of the extension mhc._C on the CPU backend, with numpy arrays.

numpy has no bfloat16, so bf16 arguments are passed as uint16 arrays of their bits (which _C
accepts); the float64 reference here is written from the design doc's formulas, independently of
the C++ one. The torch-level suite (bf16 tensors, CUDA) is in the other files of this directory.
"""

import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

from mhc import _C

ROOT = pathlib.Path(__file__).resolve().parents[2]


def to_bf16_bits(a):
    """Round-to-nearest-even float32 -> bf16 bits (uint16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def rel_err(out, ref):
    return np.linalg.norm(np.asarray(out, np.float64) - ref) / np.linalg.norm(ref)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def ref_sinkhorn(logits, iters, eps):
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True) + eps
    p = p / (p.sum(axis=-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        p = p / (p.sum(axis=-1, keepdims=True) + eps)
        p = p / (p.sum(axis=-2, keepdims=True) + eps)
    return p


def ref_coefficients(x, fn, scale, base, rms_eps, pre_eps, sinkhorn_eps, post_mult, iters):
    t, n, c = x.shape
    v = x.reshape(t, n * c)
    r = 1.0 / np.sqrt((v * v).mean(axis=1) + rms_eps)
    mixes = (v @ fn.T.astype(np.float64)) * r[:, None]
    pre = sigmoid(mixes[:, :n] * scale[0] + base[:n]) + pre_eps
    post = post_mult * sigmoid(mixes[:, n : 2 * n] * scale[1] + base[n : 2 * n])
    logits = (mixes[:, 2 * n :] * scale[2] + base[2 * n :]).reshape(t, n, n)
    return pre, post, ref_sinkhorn(logits, iters, sinkhorn_eps)


def ref_input_path(x, pre_mix, weight, eps):
    y = np.einsum("tj,tjc->tc", pre_mix.astype(np.float64), x)
    if weight is None:
        return y
    y = from_bf16_bits(to_bf16_bits(y))
    rs = 1.0 / np.sqrt((y * y).mean(axis=1) + eps)
    return y * rs[:, None] * weight.astype(np.float64)


def ref_post(f, x, post, comb):
    return post[:, :, None] * f[:, None, :] + np.einsum("tjk,tjc->tkc", comb.astype(np.float64), x)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def site(rng, tokens=5, n=4, c=128):
    x_bits = to_bf16_bits(rng.standard_normal((tokens, n, c)))
    fn = (rng.standard_normal((n * (n + 2), n * c)) / np.sqrt(n * c)).astype(np.float32)
    scale = np.array([0.8, 0.6, 1.3], np.float32)
    base = (0.1 * rng.standard_normal(n * (n + 2))).astype(np.float32)
    return x_bits, fn, scale, base


def test_version_is_the_cmake_project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    assert _C.__version__ == re.search(r"project\(mhc VERSION ([0-9.]+)", text).group(1)
    import mhc

    assert mhc.__version__ == _C.__version__


def test_cli_prints_the_same_version():
    exe = ROOT / os.environ.get("MHC_BUILD_DIR", "build") / "mhc"
    if not exe.exists():
        pytest.skip(f"no CLI at {exe}")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"mhc {_C.__version__}"


def test_queries():
    assert isinstance(_C.has_cuda(), bool)
    small, large = _C.workspace_bytes(5120, 4, 16), _C.workspace_bytes(5120, 4, 4096)
    assert 0 < small < large
    ok, code, why = _C.supports_overlap(9, 0, 5120, 4, 16, "full", 1, "")
    # A binary without the CUDA kernels says so before anything else: it could never overlap.
    want = "sm90_not_opted_in" if _C.built_with_cuda() else "no_prenorm_gemm"
    assert (ok, code) == (False, want) and why
    ok, code, _ = _C.supports_overlap(9, 0, 5120, 4, 16, "full", 1, '{"enable_mhc_overlap": true}')
    assert code != "sm90_not_opted_in" and ok == (code == "")
    with pytest.raises(ValueError, match="mode"):
        _C.supports_overlap(9, 0, 5120, 4, 16, "sometimes", 1, "")


@pytest.mark.parametrize("splits", [1, 3, 7])
def test_prenorm_gemm_split_partials(rng, splits):
    m, n_out, k = 6, 24, 640  # 10 blocks of 64: uneven over 3 and 7 splits
    x_bits = to_bf16_bits(rng.standard_normal((m, k)))
    fn = rng.standard_normal((n_out, k)).astype(np.float32)
    out = np.full((splits, m, n_out), np.nan, np.float32)
    sqrsum = np.full((splits, m), np.nan, np.float32)
    _C.prenorm_gemm(x_bits, fn, out, sqrsum, splits, 0)
    x = from_bf16_bits(x_bits)
    blocks, first = k // 64, 0
    for s in range(splits):
        count = blocks // splits + (1 if s < blocks % splits else 0)
        cols = slice(first * 64, (first + count) * 64)
        first += count
        np.testing.assert_allclose(out[s], x[:, cols] @ fn[:, cols].T.astype(np.float64), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(sqrsum[s], (x[:, cols] ** 2).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(out.sum(axis=0), x @ fn.T.astype(np.float64), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("eps", [(1e-20, 1e-6, 1e-6), (1e-3, 2e-2, 5e-2)])
def test_coefficients_match_float64(rng, eps):
    rms_eps, pre_eps, sinkhorn_eps = eps
    x_bits, fn, scale, base = site(rng)
    t, n = x_bits.shape[:2]
    pre, post = np.full((t, n), np.nan, np.float32), np.full((t, n), np.nan, np.float32)
    comb = np.full((t, n, n), np.nan, np.float32)
    ws = np.zeros(_C.workspace_bytes(128, 4, t), np.uint8)
    _C.coefficients(x_bits, fn, scale, base, pre, post, comb, ws, rms_eps, pre_eps, sinkhorn_eps, 2.0, 20, "fp32", 0)
    ref = ref_coefficients(from_bf16_bits(x_bits), fn, scale, base, rms_eps, pre_eps, sinkhorn_eps, 2.0, 20)
    for got, want in zip((pre, post, comb), ref):
        assert np.isfinite(got).all()
        assert rel_err(got, want) < 5e-5
    # The epsilons reach the result: pre moves by the change of pre_eps.
    pre2 = np.empty_like(pre)
    _C.coefficients(x_bits, fn, scale, base, pre2, post, comb, ws, rms_eps, pre_eps + 0.5, sinkhorn_eps, 2.0, 20, "tf32", 0)
    np.testing.assert_allclose(pre2 - pre, 0.5, rtol=1e-5)


@pytest.mark.parametrize("weight_kind", ["f32", "bf16", "none"])
def test_input_path_post_and_post_pre(rng, weight_kind):
    x_bits, _, _, _ = site(rng)
    t, n, c = x_bits.shape
    pre_mix = rng.uniform(0.2, 1.0, (t, n)).astype(np.float32)
    w32 = rng.uniform(0.5, 1.5, c).astype(np.float32)
    weight = {"f32": w32, "bf16": to_bf16_bits(w32), "none": None}[weight_kind]
    w_ref = None if weight is None else (from_bf16_bits(weight) if weight_kind == "bf16" else w32)
    layer_input = np.full((t, c), 0xFFFF, np.uint16)  # NaN bits
    _C.input_path(x_bits, pre_mix, weight, layer_input, 1e-5, 0)
    want = ref_input_path(from_bf16_bits(x_bits), pre_mix, w_ref, 1e-5)
    assert rel_err(from_bf16_bits(layer_input), want) < 8e-3

    f_bits = to_bf16_bits(rng.standard_normal((t, c)))
    post = rng.uniform(0, 2, (t, n)).astype(np.float32)
    comb = rng.uniform(0, 0.5, (t, n, n)).astype(np.float32)
    x_next = np.full_like(x_bits, 0xFFFF)
    _C.post(f_bits, x_bits, post, comb, x_next, 0)
    want_next = ref_post(from_bf16_bits(f_bits), from_bf16_bits(x_bits), post, comb)
    assert rel_err(from_bf16_bits(x_next), want_next) < 8e-3

    x_next2 = np.full_like(x_bits, 0xFFFF)
    next_input = np.full((t, c), 0xFFFF, np.uint16)
    _C.post_pre(f_bits, x_bits, post, comb, pre_mix, weight, x_next2, next_input, 1e-5, 0)
    np.testing.assert_array_equal(x_next2, x_next)  # the same post, bitwise
    _C.input_path(x_next, pre_mix, weight, layer_input, 1e-5, 0)
    np.testing.assert_array_equal(next_input, layer_input)


def test_zero_tokens_is_a_no_op(rng):
    """T = 0 (docs/python.md: a no-op) through every function: the outputs are zero-row views of
    2-token buffers, which stay as they were, and the workspace stays zero."""
    n, c = 4, 128
    x = np.zeros((0, n, c), np.uint16)
    f = np.zeros((0, c), np.uint16)
    mix, comb = np.full((0, n), 0.5, np.float32), np.full((0, n, n), 0.25, np.float32)
    _, fn, scale, base = site(rng, tokens=1, n=n, c=c)
    weight = np.ones(c, np.float32)
    ws = np.zeros(_C.workspace_bytes(c, n, 16), np.uint8)
    backing = {}

    def out(name, shape, dtype, fill):
        backing[name] = np.full((2, *shape), fill, dtype)
        return backing[name][:0]

    bits, sentinel = 0x4040, np.float32(3.0)  # bf16 3.0, float 3.0
    _C.post(f, x, mix, comb, out("post", (n, c), np.uint16, bits), 0)
    _C.input_path(x, mix, weight, out("input_path", (c,), np.uint16, bits), 1e-5, 0)
    _C.post_pre(f, x, mix, comb, mix, weight, out("post_pre.x", (n, c), np.uint16, bits),
                out("post_pre.li", (c,), np.uint16, bits), 1e-5, 0)
    _C.coefficients(x, fn, scale, base, out("pre", (n,), np.float32, sentinel),
                    out("post_mix", (n,), np.float32, sentinel),
                    out("comb", (n, n), np.float32, sentinel), ws, 1e-20, 1e-6, 1e-6, 2.0, 20,
                    "fp32", 0)
    _C.boundary(f, x, mix, comb, mix, weight, fn, scale, base,
                out("boundary.x", (n, c), np.uint16, bits),
                out("boundary.li", (c,), np.uint16, bits),
                out("boundary.pre", (n,), np.float32, sentinel),
                out("boundary.post", (n,), np.float32, sentinel),
                out("boundary.comb", (n, n), np.float32, sentinel), ws, 1e-20, 1e-6, 1e-6, 2.0, 20,
                1e-5, "fp32", 0)
    gemm_out = np.full((2, 2, 24), sentinel, np.float32)
    gemm_sq = np.full((2, 2), sentinel, np.float32)
    _C.prenorm_gemm(np.zeros((0, 512), np.uint16), np.zeros((24, 512), np.float32),
                    gemm_out[:, :0], gemm_sq[:, :0], 2, 0)
    backing["gemm.out"], backing["gemm.sqrsum"] = gemm_out, gemm_sq
    assert len(backing) == 14
    for name, big in backing.items():
        fill = bits if big.dtype == np.uint16 else sentinel
        assert (big == fill).all(), f"{name}: written outside the zero-token range"
    assert not ws.any()


def test_errors_name_the_argument(rng):
    x_bits, fn, scale, base = site(rng)
    t, n, c = x_bits.shape
    pre, post, comb = (np.zeros((t, n), np.float32), np.zeros((t, n), np.float32), np.zeros((t, n, n), np.float32))
    ws = np.zeros(_C.workspace_bytes(c, n, t), np.uint8)
    args = [x_bits, fn, scale, base, pre, post, comb, ws, 1e-20, 1e-6, 1e-6, 2.0, 20, "tf32", 0]

    def call(i, value, match):
        bad = list(args)
        bad[i] = value
        with pytest.raises(ValueError, match=match):
            _C.coefficients(*bad)

    call(0, x_bits.astype(np.float32), "residual: expected bfloat16")
    call(1, fn[:, :-64], r"fn: expected shape \[24, 512\]")
    call(1, np.asfortranarray(fn), "fn: must be C-contiguous")
    call(4, np.zeros((t, n), np.float64), "pre: expected float32")
    call(5, pre, "post must not overlap pre|pre must not overlap post")
    call(13, "bf16", "projection")
    call(8, -1.0, "rms_eps")
    x_next = np.zeros_like(x_bits)
    f = np.zeros((t, c), np.uint16)
    with pytest.raises(ValueError, match="residual_next must not overlap residual"):
        _C.post(f, x_bits, post, comb, x_bits, 0)
    with pytest.raises(ValueError, match="sublayer_out: expected shape"):
        _C.post(f[:, :64], x_bits, post, comb, x_next, 0)
    with pytest.raises(ValueError, match="num_splits"):
        _C.prenorm_gemm(x_bits.reshape(t, -1), fn, np.zeros((0, t, 24), np.float32), np.zeros((0, t), np.float32), 0, 0)
    with pytest.raises(ValueError, match="K=.*multiple of 64"):
        _C.prenorm_gemm(np.zeros((2, 96), np.uint16), np.zeros((24, 96), np.float32), np.zeros((1, 2, 24), np.float32), np.zeros((1, 2), np.float32), 1, 0)
