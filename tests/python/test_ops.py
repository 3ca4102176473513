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


@pytest.mark.mhc_stream_kernels
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


@pytest.mark.mhc_stream_kernels
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


@pytest.mark.mhc_stream_kernels
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
def test_pre_overlap_without_a_side_stream_is_pre(mhc, device):
    """stream=None (docs/python.md): no side stream, everything on the current stream; on CPU
    tensors, where a stream means nothing, the call a CPU-only user writes. join(None) is a no-op."""
    s = Site(tokens=5, n=4, device=device, seed=6)
    want = mhc.pre(*s.pre_args())
    got = mhc.pre_overlap(*s.pre_args(), stream=None)
    mhc.join(None, *got[1:])
    for name, a, b in zip(("layer_input", "post", "comb", "next_pre_mix"), got, want):
        assert torch.equal(a, b), name
    out = poisoned(*got)
    assert all(a is b for a, b in zip(mhc.pre_overlap(*s.pre_args(), stream=None, out=out), out))
    for name, a, b in zip(("layer_input", "post", "comb", "next_pre_mix"), out, want):
        assert torch.equal(a, b), name


@pytest.mark.mhc_stream_kernels
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


@pytest.mark.mhc_stream_kernels
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


@pytest.mark.mhc_stream_kernels
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


@pytest.mark.mhc_stream_kernels
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


SENTINEL = -3.0  # the value of the rows around an empty out= view (finite: NaN != NaN)


def _empty_views(device, *specs):
    """For each (shape, dtype): a zero-token view [:0] of a 2-token buffer filled with SENTINEL
    (for [S, T, ...] gemm outputs, [:, :0]). Returns (views, backing buffers)."""
    views, backing = [], []
    for shape, dtype, gemm in specs:
        big = torch.full(shape, SENTINEL, dtype=dtype, device=device)
        views.append(big[:, :0] if gemm else big[:0])
        backing.append(big)
    return views, backing


def _untouched(name, backing):
    for i, big in enumerate(backing):
        assert bool((big == SENTINEL).all()), f"{name}: output {i} written outside the empty range"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 4])
def test_zero_tokens(mhc, device, n):
    """T = 0 through every public op and its out= form: outputs of T = 0 rows with the right
    dtypes, nothing written around out= views of zero rows, and a given workspace left as it
    was (all zero)."""
    c = 256
    s = Site(tokens=0, n=n, hidden=c, device=device)
    f32, bf16 = torch.float32, torch.bfloat16
    pre_specs = (((2, c), bf16, False), ((2, n), f32, False), ((2, n, n), f32, False),
                 ((2, n), f32, False))
    pre_shapes = ((0, c), (0, n), (0, n, n), (0, n))
    ws = mhc.make_workspace(device, c, n, 16)
    e = s.eps

    def check(name, got, shapes, dtypes):
        assert len(got) == len(shapes), name
        for g, shape, dtype in zip(got, shapes, dtypes):
            assert g.shape == shape and g.dtype == dtype and g.device.type == device, name

    pre_dtypes = (bf16, f32, f32, f32)
    for form in ("v41", "v4"):
        args = s.pre_args(pre_mix=None if form == "v4" else "carried")
        check("pre", mhc.pre(*args), pre_shapes, pre_dtypes)
        views, backing = _empty_views(device, *pre_specs)
        assert all(a is b for a, b in zip(mhc.pre(*args, out=views, workspace=ws), views))
        _untouched("pre_out", backing)

    check("coefficients", mhc.coefficients(*s.coef_args()), pre_shapes[1:], pre_dtypes[1:])
    views, backing = _empty_views(device, *pre_specs[1:])
    mhc.coefficients(*s.coef_args(), out=views, workspace=ws)
    _untouched("coefficients_out", backing)

    check("pre_overlap", torch.ops.mhc.pre_overlap(*s.pre_args(), 0), pre_shapes, pre_dtypes)
    views, backing = _empty_views(device, *pre_specs)
    torch.ops.mhc.pre_overlap_out(*s.pre_args(), 0, layer_input=views[0], post=views[1],
                                  comb=views[2], next_pre_mix=views[3], workspace=ws)
    _untouched("pre_overlap_out", backing)
    torch.ops.mhc.join(0, *views[1:])
    _untouched("join", backing)

    residual_spec = ((2, n, c), bf16, False)
    check("post", (mhc.post(*s.post_args()),), ((0, n, c),), (bf16,))
    views, backing = _empty_views(device, residual_spec)
    assert mhc.post(*s.post_args(), out=views[0]) is views[0]
    _untouched("post_out", backing)

    pp = (*s.post_args(), s.pre_mix, s.norm_weight, e["norm_eps"])
    check("post_pre", mhc.post_pre(*pp), ((0, n, c), (0, c)), (bf16, bf16))
    views, backing = _empty_views(device, residual_spec, ((2, c), bf16, False))
    mhc.post_pre(*pp, out=views, workspace=ws)
    _untouched("post_pre_out", backing)

    check("boundary", mhc.boundary(*s.boundary_args()), ((0, n, c), *pre_shapes),
          (bf16, *pre_dtypes))
    views, backing = _empty_views(device, residual_spec, *pre_specs)
    mhc.boundary(*s.boundary_args(), out=views, workspace=ws)
    _untouched("boundary_out", backing)

    x = s.residual.view(0, n * c)
    nmix = s.fn.shape[0]
    views, backing = _empty_views(device, ((2, 2, nmix), f32, True), ((2, 2), f32, True))
    mhc.hc_prenorm_gemm(x, s.fn, views[0], views[1], 2)
    _untouched("hc_prenorm_gemm", backing)
    assert not ws.any(), "a zero-token call wrote the workspace"


@pytest.mark.parametrize("device", DEVICES)
def test_run_to_run_bitwise(mhc, device):
    """Two runs on buffers poisoned before each give the same bits; the negative control: other
    inputs give other bits in every output (so the comparison can fail)."""
    s = Site(tokens=33, device=device, seed=10)
    runs = []
    for site in (s, s, Site(tokens=33, device=device, seed=110)):
        out = poisoned(*mhc.pre(*site.pre_args()))
        mhc.pre(*site.pre_args(), out=out)
        for t in out:
            assert torch.isfinite(t.float()).all()
        runs.append(out)
    names = ("layer_input", "post", "comb", "next_pre_mix")
    for name, a, b, other in zip(names, *runs):
        assert torch.equal(a, b), name
        assert not torch.equal(a, other), name


# The model sizes (V4-Flash C = 4096, V4-Pro C = 7168, and 5120 between) at n = 2 and 4, 1-3
# tokens on the CPU against the float64 reference: the other tests use C <= 512.
@pytest.mark.parametrize("hidden", [4096, 5120, 7168])
@pytest.mark.parametrize("n", [2, 4])
def test_model_hidden_sizes_match_reference(mhc, n, hidden):
    tokens = 1 + hidden % 3
    s = Site(tokens=tokens, n=n, hidden=hidden, seed=hidden + n)
    e, tol = s.eps, coef_tol("cpu", "tf32")

    def run(op, *args, **kw):
        out = poisoned(*op(*args, **kw))
        returned = op(*args, **kw, out=out)
        assert all(a is b for a, b in zip(returned, out))
        return out

    layer_input, post, comb, nxt = run(mhc.pre, *s.pre_args())
    want = ref.pre(*s.pre_args())
    assert_close("pre.layer_input", layer_input, want[0], BF16_TOL)
    for name, g, w in zip(("pre.post", "pre.comb", "pre.next_pre_mix"), (post, comb, nxt),
                          want[1:]):
        assert_close(name, g, w, tol)

    coef = run(mhc.coefficients, *s.coef_args())
    want_coef = ref.coefficients(*s.coef_args())
    for name, g, w in zip(("post", "comb", "next_pre_mix"), coef,
                          (want_coef[1], want_coef[2], want_coef[0])):
        assert_close("coefficients." + name, g, w, tol)

    (residual_next,) = poisoned(s.residual)
    mhc.post(*s.post_args(), out=residual_next)
    assert_close("post", residual_next, ref.post(*s.post_args()), BF16_TOL)

    pp = run(mhc.post_pre, *s.post_args(), s.pre_mix, s.norm_weight, e["norm_eps"])
    assert torch.equal(pp[0], residual_next)
    assert_close("post_pre.next_layer_input", pp[1],
                 ref.input_path(residual_next, s.pre_mix, s.norm_weight, e["norm_eps"]), BF16_TOL)

    got = run(mhc.boundary, *s.boundary_args())
    assert torch.equal(got[0], residual_next)
    want = ref.pre(residual_next, s.fn, s.hc_scale, s.hc_base, s.norm_weight, s.pre_mix,
                   e["rms_eps"], e["pre_eps"], e["sinkhorn_eps"], s.post_mult, s.iters,
                   e["norm_eps"])
    assert_close("boundary.layer_input", got[1], want[0], BF16_TOL)
    for name, g, w in zip(("next_post", "next_comb", "next_pre_mix"), got[2:], want[1:]):
        assert_close("boundary." + name, g, w, tol)
