"""mhc._C on CUDA through torch tensors (bf16 for real): each function against the CPU backend
on the same inputs (itself checked against float64 in test_c_cpu.py) at the TF32 tolerances, on
a side stream, with outputs poisoned first. Skips without torch, a GPU or a CUDA build."""

import pytest

torch = pytest.importorskip("torch")
from conftest import c_cuda_missing, gpu_mark  # noqa: E402
from mhc import _C  # noqa: E402

# A skip without a GPU or a CUDA build; a failure under MHC_REQUIRE_GPU=1 (conftest.py).
pytestmark = gpu_mark(c_cuda_missing())


def rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    assert torch.isfinite(a).all() and torch.isfinite(b).all()
    return ((a - b).norm() / b.norm()).item()


def site(t=37, n=4, c=1024, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, n, c, generator=g).bfloat16()
    fn = torch.randn(n * (n + 2), n * c, generator=g) / (n * c) ** 0.5
    scale = torch.tensor([0.8, 0.6, 1.3])
    base = 0.1 * torch.randn(n * (n + 2), generator=g)
    return x, fn, scale, base


def test_prenorm_gemm_matches_cpu():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(100, 20480, generator=g).bfloat16()
    fn = torch.randn(24, 20480, generator=g)
    for splits in (1, 7, 16):
        out = torch.full((splits, 100, 24), float("nan"))  # the CPU reference, poisoned too
        sq = torch.full((splits, 100), float("nan"))
        _C.prenorm_gemm(x, fn, out, sq, splits, 0)
        dout = torch.full((splits, 100, 24), float("nan"), device="cuda")
        dsq = torch.full((splits, 100), float("nan"), device="cuda")
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            _C.prenorm_gemm(x.cuda(), fn.cuda(), dout, dsq, splits, stream.cuda_stream)
        stream.synchronize()
        assert rel(dout, out) < 2e-3
        assert rel(dsq, sq) < 1e-5


@pytest.mark.parametrize("eps", [(1e-20, 1e-6, 1e-6), (1e-3, 1e-2, 3e-2)])
def test_coefficients_match_cpu(eps):
    _, fn, scale, base = site()
    t, n, c = 37, 4, 1024
    dws = torch.zeros(_C.workspace_bytes(c, n, 64), dtype=torch.uint8, device="cuda")
    args = [a.cuda() for a in (fn, scale, base)]
    # One workspace for several token counts, each call with new streams (so that a partial or a
    # counter left from the call before cannot pass for this one's) and each call checked.
    for tokens, seed in ((t, 0), (5, 1), (t, 2)):
        x = site(t=tokens, seed=seed)[0]
        outs = [torch.full(s, float("nan")) for s in ((tokens, n), (tokens, n), (tokens, n, n))]
        _C.coefficients(x, fn, scale, base, *outs, torch.zeros(0, dtype=torch.uint8), *eps, 2.0,
                        20, "fp32", 0)
        douts = [torch.full((t,) + o.shape[1:], float("nan"), device="cuda") for o in outs]
        _C.coefficients(x.cuda(), *args, *[o[:tokens] for o in douts], dws, *eps, 2.0, 20, "tf32",
                        torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        for got, want in zip(douts, outs):
            assert rel(got[:tokens], want) < 2e-3, tokens
            assert torch.isnan(got[tokens:]).all(), tokens  # rows past the call: untouched
        # What the next call on this workspace reads is re-armed (mhc::workspace_layout): the
        # arrival counters (eight uint32 per 128-token block, after C floats of weight scratch)
        # are back at zero and no flagged partial is left marked written (the word 0xffffffff).
        # The partials themselves stay: the next launch overwrites them before it reads them.
        words = dws.view(torch.int32)
        assert not words[c : c + 8].any(), tokens
        assert not (words[c + 8 :] == -1).any(), tokens
    with pytest.raises(ValueError, match="workspace"):
        _C.coefficients(x.cuda(), *args, *douts, dws[:1024], *eps, 2.0, 20, "tf32", 0)


@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.bfloat16, None])
def test_input_path_and_post_pre_match_cpu(weight_dtype):
    x, _, _, _ = site(seed=2)
    t, n, c = x.shape
    g = torch.Generator().manual_seed(3)
    pre_mix = torch.rand(t, n, generator=g) + 0.2
    w = None if weight_dtype is None else (torch.rand(c, generator=g) + 0.5).to(weight_dtype)
    f = torch.randn(t, c, generator=g).bfloat16()
    post = 2 * torch.rand(t, n, generator=g)
    comb = torch.rand(t, n, n, generator=g) / n
    li = torch.full((t, c), float("nan"), dtype=torch.bfloat16)
    _C.input_path(x, pre_mix, w, li, 1e-5, 0)
    xn, nli = torch.full_like(x, float("nan")), torch.full_like(li, float("nan"))
    _C.post_pre(f, x, post, comb, pre_mix, w, xn, nli, 1e-5, 0)

    dev = lambda a: None if a is None else a.cuda()  # noqa: E731
    ws = torch.zeros(_C.workspace_bytes(c, n, t), dtype=torch.uint8, device="cuda")
    dli = torch.full((t, c), float("nan"), dtype=torch.bfloat16, device="cuda")
    _C.input_path(dev(x), dev(pre_mix), dev(w), dli, 1e-5, 0, workspace=ws)
    dxn = torch.full_like(dev(x), float("nan"))
    dnli = torch.full((t, c), float("nan"), dtype=torch.bfloat16, device="cuda")
    _C.post_pre(dev(f), dev(x), dev(post), dev(comb), dev(pre_mix), dev(w), dxn, dnli, 1e-5, 0,
                workspace=ws)
    dxp = torch.full_like(dxn, float("nan"))
    _C.post(dev(f), dev(x), dev(post), dev(comb), dxp, 0)
    torch.cuda.synchronize()
    assert rel(dli, li) < 8e-3
    assert rel(dxn, xn) < 8e-3
    assert rel(dnli, nli) < 8e-3
    assert torch.equal(dxp, dxn)  # post_pre's post is post's, bitwise
    if weight_dtype is torch.bfloat16:
        with pytest.raises(ValueError, match="workspace"):
            _C.input_path(dev(x), dev(pre_mix), dev(w), dli, 1e-5, 0)


def test_mixed_devices_are_refused():
    x, fn, scale, base = site(t=2)
    with pytest.raises(ValueError, match="device"):
        _C.post(x[:, 0].contiguous().cuda(), x, torch.rand(2, 4), torch.rand(2, 4, 4),
                torch.empty_like(x), 0)


def test_calls_capture_in_a_cuda_graph():
    """No synchronisation and no allocation inside a call: it captures and replays."""
    x, fn, scale, base = (a.cuda() for a in site(t=8, seed=4))
    t, n, c = x.shape
    ws = torch.zeros(_C.workspace_bytes(c, n, t), dtype=torch.uint8, device="cuda")
    pre = torch.full((t, n), float("nan"), device="cuda")
    post = torch.full((t, n), float("nan"), device="cuda")
    comb = torch.full((t, n, n), float("nan"), device="cuda")
    f = torch.randn(t, c, device="cuda").bfloat16()
    x_next = torch.full_like(x, float("nan"))
    layer_input = torch.full((t, c), float("nan"), dtype=torch.bfloat16, device="cuda")

    def step():
        s = torch.cuda.current_stream().cuda_stream
        _C.coefficients(x, fn, scale, base, pre, post, comb, ws, 1e-20, 1e-6, 1e-6, 2.0, 20, "tf32", s)
        _C.post_pre(f, x, post, comb, pre, None, x_next, layer_input, 1e-20, s)

    step()
    torch.cuda.synchronize()
    outputs = (pre, post, comb, x_next, layer_input)
    eager = tuple(o.clone() for o in outputs)
    for want in eager:
        assert torch.isfinite(want.float()).all()
    for out in outputs:
        out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip(outputs, eager):
        assert torch.equal(got, want)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_parameters_are_read_through_detach(device):
    """nn.Parameter arrays (requires_grad: torch refuses their DLPack export) give the results of
    plain tensors: mhc._C reads them through detach()."""
    x, fn, scale, base = (t.to(device) for t in site(t=5, c=256, seed=9))
    t, n = x.shape[:2]
    ws = torch.zeros(_C.workspace_bytes(256, n, t), dtype=torch.uint8, device=device)
    got, want = [], []
    for wrap in (torch.nn.Parameter, lambda v: v):
        outs = [torch.zeros(t, n, device=device), torch.zeros(t, n, device=device),
                torch.zeros(t, n, n, device=device)]
        _C.coefficients(wrap(x.clone()), wrap(fn.clone()), wrap(scale.clone()),
                        wrap(base.clone()), *outs, ws, 1e-6, 1e-6, 1e-6, 2.0, 20, "tf32",
                        torch.cuda.current_stream().cuda_stream if device == "cuda" else 0)
        (got if wrap is torch.nn.Parameter else want).append(outs)
    torch.cuda.synchronize()
    for a, b in zip(got[0], want[0]):
        assert torch.equal(a, b)
