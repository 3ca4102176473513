"""batch_invariant=True on the coefficient-path ops (docs/batch_invariance.md): the keyword
reaches every op, its fakes and torch.compile; on CUDA a token's outputs are bitwise the ones it
gets alone at every batch size, and the default mode is shown to differ (so the test can bite).
The CPU backend is invariant in both modes: there the option must not change a bit."""

import pytest
import torch
from conftest import CUDA, DEVICES, Site, needs_cuda
from test_fakes import _fake_call, _same_meta


def _outs(s):
    t, n, c, dev = s.tokens, s.n, s.hidden, s.residual.device
    f32 = dict(dtype=torch.float32, device=dev)
    return dict(layer_input=torch.full((t, c), float("nan"), dtype=torch.bfloat16, device=dev),
                post=torch.full((t, n), float("nan"), **f32),
                comb=torch.full((t, n, n), float("nan"), **f32),
                next_pre_mix=torch.full((t, n), float("nan"), **f32))


def _run(op, s, batch_invariant):
    """One op on s's inputs; the outputs it returns or writes, in the functional order."""
    ops, bi = torch.ops.mhc, dict(batch_invariant=batch_invariant)
    coef = ("post", "comb", "next_pre_mix")
    if op == "pre":
        return ops.pre(*s.pre_args(), **bi)
    if op == "pre_v4":
        return ops.pre(*s.pre_args(pre_mix=None), **bi)
    if op == "coefficients":
        return ops.coefficients(*s.coef_args(), **bi)
    if op == "pre_overlap":
        return ops.pre_overlap(*s.pre_args(), 0, **bi)
    outs = _outs(s)
    if op == "coefficients_out":
        ops.coefficients_out(*s.coef_args(), **{k: outs[k] for k in coef}, **bi)
        return tuple(outs[k] for k in coef)
    if op == "pre_out":
        ops.pre_out(*s.pre_args(), **outs, **bi)
    else:
        assert op == "pre_overlap_out"
        ops.pre_overlap_out(*s.pre_args(), 0, **outs, **bi)
    return tuple(outs.values())


OPS = ["pre", "pre_v4", "pre_out", "coefficients", "coefficients_out", "pre_overlap",
       "pre_overlap_out"]


@pytest.mark.parametrize("op", OPS)
def test_every_op_takes_it_and_cpu_bits_do_not_change(mhc, op):
    s = Site(tokens=9, seed=3)
    for a, b in zip(_run(op, s, True), _run(op, s, False)):
        assert not a.isnan().any()
        assert torch.equal(a, b)


def test_python_api_threads_it(mhc):
    s = Site(tokens=4, seed=4)
    args = s.pre_args()[:5] + (None,) + s.pre_args()[6:]
    assert all(torch.equal(a, b) for a, b in zip(mhc.pre(*args, batch_invariant=True),
                                                 mhc.pre(*args)))
    out = tuple(torch.empty_like(t) for t in mhc.coefficients(*s.coef_args()))
    mhc.coefficients(*s.coef_args(), out=out, batch_invariant=True)
    assert all(torch.equal(a, b) for a, b in zip(out, mhc.coefficients(*s.coef_args())))


def test_rejects_a_non_bool(mhc):
    s = Site(tokens=2)
    with pytest.raises((TypeError, RuntimeError)):  # the schema's bool (it takes 1 and None)
        torch.ops.mhc.pre(*s.pre_args(), batch_invariant="yes")
    for value in ("yes", 1, None):  # the fakes' own check (called directly, not through torch)
        with pytest.raises(TypeError, match="batch_invariant must be a bool"):
            mhc._fakes.fake_pre(*s.pre_args(), batch_invariant=value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["pre", "coefficients", "pre_overlap"])
def test_fake_matches_real(mhc, device, op):
    s = Site(tokens=6, device=device, seed=1)
    real = getattr(torch.ops.mhc, op)
    args = (*s.pre_args(), 0) if op == "pre_overlap" else (
        s.pre_args() if op == "pre" else s.coef_args())
    kwargs = dict(batch_invariant=True)
    _same_meta(real(*args, **kwargs), _fake_call(real, args, kwargs))
    torch.library.opcheck(real, args, kwargs,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_traces_it(mhc, device):
    torch._dynamo.reset()
    s = Site(tokens=5, device=device, seed=5)

    def stack():
        layer_input, post, comb, pre_mix = torch.ops.mhc.pre(*s.pre_args(), batch_invariant=True)
        return (layer_input, *torch.ops.mhc.coefficients(*s.coef_args(), batch_invariant=True))

    compiled = torch.compile(stack, fullgraph=True, backend="aot_eager")()
    assert all(torch.equal(a, b) for a, b in zip(compiled, stack()))


# ---- CUDA: the property itself ------------------------------------------------------------

SIZES = [1, 7, 16, 17, 64, 257, 1536, 2048, 4097]
HIDDEN = 2048  # K = 8192: 32 leaves, and the default mode's split count varies over SIZES


@pytest.fixture(scope="module")
def big():
    return Site(tokens=max(SIZES), hidden=HIDDEN, device="cuda", seed=7) if CUDA else None


def _slice(s, lo, hi):
    """Tokens [lo, hi) of s as a Site of their own (contiguous copies, shared weights)."""
    part = Site.__new__(Site)
    part.__dict__.update(s.__dict__)
    part.tokens = hi - lo
    part.residual, part.pre_mix = s.residual[lo:hi].clone(), s.pre_mix[lo:hi].clone()
    return part


def _pre(s, form, projection, batch_invariant):
    args = s.pre_args(pre_mix=None) if form == "v4" else s.pre_args()
    return torch.ops.mhc.pre(*args, projection=projection, batch_invariant=batch_invariant)


def _mismatches(big, form, projection, batch_invariant):
    """(M, t, output index) of every token t whose bits differ from its bits alone (t = 0, M/2,
    M-1) or, t = "all", of any of the M tokens whose bits differ from the largest batch's."""
    bad, alone = [], {}
    largest = _pre(big, form, projection, batch_invariant)
    for m in SIZES:
        rows = sorted({0, m // 2, m - 1})
        batch = _pre(_slice(big, 0, m), form, projection, batch_invariant)
        bad += [(m, "all", i) for i, (a, b) in enumerate(zip(batch, largest))
                if not torch.equal(a, b[:m])]
        for t in rows:
            if t not in alone:
                alone[t] = _pre(_slice(big, t, t + 1), form, projection, batch_invariant)
            for i, (out, ref) in enumerate(zip(batch, alone[t])):
                a, b = out[t], ref[0]
                assert not a.float().isnan().any()
                if not torch.equal(a, b):
                    bad.append((m, t, i))
    torch.cuda.synchronize()
    return bad


@needs_cuda
@pytest.mark.parametrize("form", ["v41", "v4"])
@pytest.mark.parametrize("projection", ["tf32", "fp32"])
def test_token_bits_independent_of_batch(mhc, big, form, projection):
    """(layer_input, post, comb, next_pre_mix) of tokens 0, M/2 and M-1 at every M against the
    same token run alone, and of every token against the largest batch."""
    assert _mismatches(big, form, projection, True) == []


@needs_cuda
@pytest.mark.parametrize("projection", ["tf32", "fp32"])
def test_default_mode_is_not_invariant(mhc, big, projection):
    """Without the mode some token's coefficients change with M: the property test can fail."""
    assert _mismatches(big, "v4", projection, False) != []
