"""The ops against the float64 reference (design doc tolerances), on CPU and, where present, on
the GPU. Output buffers are poisoned with NaN first, so an output left unwritten fails."""

import pytest
import torch
from conftest import DEVICES, Site, rel_err

import reference as ref

# Design doc, "Numerics": TF32 projection (the GPU default) and fp32 projection (the CPU backend
# always computes the projection in fp32).
COEF_TOL = {"tf32": 2e-3, "fp32": 5e-5}
BF16_TOL = 8e-3


def coef_tol(device, projection):
    return COEF_TOL["fp32" if device == "cpu" else projection]


def poisoned(*tensors):
    return tuple(torch.full_like(t, float("nan")) for t in tensors)


def assert_close(name, out, want, tol):
    rel, max_err = rel_err(out, want)
    assert rel <= tol, f"{name}: rel {rel:.3e} > {tol:.1e} (max element error {max_err:.3e})"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("form", ["v4", "v41"])
@pytest.mark.parametrize("norm", ["f32", "bf16", "none"])
def test_pre_matches_reference(mhc, device, n, form, norm):
    norm_dtype = torch.bfloat16 if norm == "bf16" else torch.float32
    s = Site(tokens=9, n=n, hidden=256, device=device, seed=n, norm_dtype=norm_dtype)
    args = s.pre_args(pre_mix=None if form == "v4" else "carried",
                      norm_weight=None if norm == "none" else "default")
    got = mhc.pre(*args)
    want = ref.pre(*args)
    tol = coef_tol(device, "tf32")
    for name, g, w in zip(("post", "comb", "next_pre_mix"), got[1:], want[1:]):
        assert g.dtype == torch.float32 and g.device.type == device
        assert_close(name, g, w, tol)
    assert got[0].dtype == torch.bfloat16 and got[0].shape == (9, 256)
    # V4 collapses with this site's computed pre: the bf16 bound plus the coefficients' error.
    assert_close("layer_input", got[0], want[0], BF16_TOL + (tol if form == "v4" else 0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("projection", ["tf32", "fp32"])
def test_pre_out_writes_every_buffer(mhc, device, n, projection):
    s = Site(tokens=5, n=n, device=device, seed=3)
    args = s.pre_args()
    want = ref.pre(*args)
    out = poisoned(*mhc.pre(*args))
    returned = mhc.pre(*args, out=out, projection=projection)
    assert all(a is b for a, b in zip(returned, out))
    for name, g, w in zip(("layer_input", "post", "comb", "next_pre_mix"), out, want):
        assert_close(name, g, w, BF16_TOL if name == "layer_input" else coef_tol(device, projection))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
def test_coefficients_equal_pre(mhc, device, n):
    s = Site(tokens=6, n=n, device=device, seed=4)
    _, post, comb, nxt = mhc.pre(*s.pre_args())
    got = mhc.coefficients(*s.coef_args())
    want = ref.coefficients(*s.coef_args())
    for name, a, b, w in zip(("post", "comb", "next_pre_mix"), got, (post, comb, nxt),
                             (want[1], want[2], want[0])):
        assert torch.equal(a, b), name
        assert_close(name, a, w, coef_tol(device, "tf32"))
    out = poisoned(*got)
    mhc.coefficients(*s.coef_args(), out=out)
    for a, b in zip(out, got):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
def test_separate_epsilons_matter(mhc, device, n):
    """Each epsilon reaches the computation it names (exchanging two changes the result)."""
    s = Site(tokens=4, n=n, device=device, seed=5)
    s.eps = dict(rms_eps=1e-2, pre_eps=0.5, sinkhorn_eps=0.25, norm_eps=3.0)
    base = mhc.pre(*s.pre_args())
    want = ref.pre(*s.pre_args())
    for name, g, w in zip(("layer_input", "post", "comb", "next_pre_mix"), base, want):
        assert_close(name, g, w, BF16_TOL if name == "layer_input" else coef_tol(device, "tf32"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
def test_post_matches_reference(mhc, device, n):
    s = Site(tokens=8, n=n, device=device, seed=6)
    got = mhc.post(*s.post_args())
    assert got.dtype == torch.bfloat16 and got.shape == s.residual.shape
    assert_close("residual_next", got, ref.post(*s.post_args()), BF16_TOL)
    (out,) = poisoned(got)
    assert mhc.post(*s.post_args(), out=out) is out
    assert torch.equal(out, got)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("norm", ["f32", "bf16", "none"])
def test_post_pre_is_post_then_input_path(mhc, device, n, norm):
    norm_dtype = torch.bfloat16 if norm == "bf16" else torch.float32
    s = Site(tokens=8, n=n, device=device, seed=7, norm_dtype=norm_dtype)
    weight = None if norm == "none" else s.norm_weight
    eps = s.eps["norm_eps"]
    residual_next, layer_input = mhc.post_pre(*s.post_args(), s.pre_mix, weight, eps)
    assert torch.equal(residual_next, mhc.post(*s.post_args()))
    assert_close("residual_next", residual_next, ref.post(*s.post_args()), BF16_TOL)
    want = ref.input_path(residual_next, s.pre_mix, weight, eps)
    assert_close("next_layer_input", layer_input, want, BF16_TOL)
    out = poisoned(residual_next, layer_input)
    mhc.post_pre(*s.post_args(), s.pre_mix, weight, eps, out=out)
    assert torch.equal(out[0], residual_next) and torch.equal(out[1], layer_input)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("tokens", [1, 9, 70, 300])
@pytest.mark.parametrize("norm", ["f32", "bf16", "none"])
def test_boundary_is_post_pre_then_coefficients(mhc, device, n, tokens, norm):
    """One call per boundary: the bits of post_pre followed by coefficients on residual_next (the
    plan's built-in rules: on CUDA the decode fold, or post + next input then the coefficient
    launch), and every buffer of the out= form written."""
    norm_dtype = torch.bfloat16 if norm == "bf16" else torch.float32
    s = Site(tokens=tokens, n=n, device=device, seed=11, norm_dtype=norm_dtype)
    weight = None if norm == "none" else s.norm_weight
    args = s.boundary_args(norm_weight=weight)
    got = mhc.boundary(*args)
    residual_next, layer_input = mhc.post_pre(*s.post_args(), s.pre_mix, weight,
                                              s.eps["norm_eps"])
    e = s.eps
    coef = mhc.coefficients(residual_next, s.fn, s.hc_scale, s.hc_base, e["rms_eps"],
                            e["pre_eps"], e["sinkhorn_eps"], s.post_mult, s.iters)
    names = ("residual_next", "layer_input", "next_post", "next_comb", "next_pre_mix")
    for name, g, w in zip(names, got, (residual_next, layer_input, *coef)):
        assert g.device.type == device and g.dtype == w.dtype and g.shape == w.shape, name
        assert torch.equal(g, w), name
    want = ref.pre(residual_next, s.fn, s.hc_scale, s.hc_base, weight, s.pre_mix, e["rms_eps"],
                   e["pre_eps"], e["sinkhorn_eps"], s.post_mult, s.iters, e["norm_eps"])
    assert_close("layer_input", got[1], want[0], BF16_TOL)
    for name, g, w in zip(names[2:], got[2:], want[1:]):
        assert_close(name, g, w, coef_tol(device, "tf32"))
    out = poisoned(*got)
    returned = mhc.boundary(*args, out=out)
    assert all(a is b for a, b in zip(returned, out))
    for name, a, b in zip(names, out, got):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_hc_prenorm_gemm(mhc, device, n, num_splits):
    s = Site(tokens=10, n=n, device=device, seed=8)
    x = s.residual.view(s.tokens, -1)
    out = torch.full((num_splits, 10, s.fn.shape[0]), float("nan"), device=device)
    sqrsum = torch.full((num_splits, 10), float("nan"), device=device)
    mhc.hc_prenorm_gemm(x, s.fn, out, sqrsum, num_splits)
    mixes, sq = ref.prenorm_gemm(x, s.fn, num_splits)
    assert_close("out (summed over splits)", out.sum(0), mixes, coef_tol(device, "tf32"))
    assert_close("sqrsum (summed over splits)", sqrsum.sum(0), sq, 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_prenorm_gemm_two_dimensional_single_split(mhc, device):
    """DeepGEMM's [M, N] / [M] outputs when there is one split."""
    s = Site(tokens=3, device=device, seed=9)
    x = s.residual.view(3, -1)
    out = torch.full((3, 24), float("nan"), device=device)
    sqrsum = torch.full((3,), float("nan"), device=device)
    mhc.hc_prenorm_gemm(x, s.fn, out, sqrsum, 1)
    mixes, sq = ref.prenorm_gemm(x, s.fn, 1)
    assert_close("out", out, mixes, coef_tol(device, "tf32"))
    assert_close("sqrsum", sqrsum, sq, 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_tokens(mhc, device):
    s = Site(tokens=0, device=device)
    layer_input, post, comb, nxt = mhc.pre(*s.pre_args())
    assert layer_input.shape == (0, 256) and comb.shape == (0, 4, 4)
    assert mhc.post(*s.post_args()).shape == (0, 4, 256)


@pytest.mark.parametrize("device", DEVICES)
def test_run_to_run_bitwise(mhc, device):
    s = Site(tokens=33, device=device, seed=10)
    a, b = mhc.pre(*s.pre_args()), mhc.pre(*s.pre_args())
    assert all(torch.equal(x, y) for x, y in zip(a, b))
