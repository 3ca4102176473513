"""GPU-only behaviour: the overlap on a side stream (bitwise equal to one stream, eagerly and in
CUDA-graph replays), capture of every op in a CUDA graph with static buffers, torch.compile with
CUDA graphs, the workspace rules under capture, and kernel-side errors. Skipped without a GPU."""

import pytest
import torch
from conftest import Site, needs_cuda
from model_fixtures import stack_v41, stack_v41_overlap, stack_v41_plain, standin_sublayer

pytestmark = needs_cuda


def _sublayer(hidden=512):
    g = torch.Generator().manual_seed(21)
    w = (torch.randn(hidden, hidden, generator=g) * hidden**-0.5).bfloat16().cuda()
    return standin_sublayer(w)


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("tokens", [1, 16, 130])
def test_overlap_bitwise_equal_to_one_stream(mhc, tokens):
    s, sub = Site(tokens=tokens, hidden=512, device="cuda", seed=tokens), _sublayer()
    side = torch.cuda.Stream()
    plain = stack_v41_plain(s, sub)
    overlapped = stack_v41_overlap(s, sub, side.cuda_stream)
    torch.cuda.synchronize()
    assert _equal(plain, overlapped)


def test_overlap_in_cuda_graph_replays(mhc):
    """The fork and join become graph edges: repeated replays on fresh inputs stay bitwise equal
    to the one-stream eager result."""
    s, sub = Site(tokens=8, hidden=512, device="cuda", seed=31), _sublayer()
    side = torch.cuda.Stream()
    stack_v41_overlap(s, sub, side.cuda_stream)  # eager warm-up: workspaces exist before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = stack_v41_overlap(s, sub, side.cuda_stream)
    for seed in range(5):
        fresh = Site(tokens=8, hidden=512, device="cuda", seed=100 + seed)
        s.residual.copy_(fresh.residual)
        s.pre_mix.copy_(fresh.pre_mix)
        for t in out:
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _equal(out, stack_v41_plain(s, sub))  # s holds the fresh inputs now


def test_every_out_op_captures_in_a_graph(mhc):
    s = Site(tokens=4, hidden=512, device="cuda", seed=41)
    bufs = [t.clone() for t in mhc.pre(*s.pre_args())]
    nxt = torch.empty_like(s.residual)
    li2 = torch.empty_like(bufs[0])
    x = s.residual.view(4, -1)
    gemm_out, gemm_sq = torch.empty(2, 4, 24, device="cuda"), torch.empty(2, 4, device="cuda")
    boundary = [t.clone() for t in mhc.boundary(*s.boundary_args())]
    mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, 1e-6)  # warm the workspace
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mhc.pre(*s.pre_args(), out=bufs)
        mhc.post(bufs[0], s.residual, bufs[1], bufs[2], out=nxt)
        mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, 1e-6, out=(nxt, li2))
        mhc.hc_prenorm_gemm(x, s.fn, gemm_out, gemm_sq, 2)
        mhc.boundary(*s.boundary_args(), out=boundary)
    for t in (*bufs, nxt, li2, gemm_out, *boundary):
        t.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _equal(bufs, mhc.pre(*s.pre_args()))
    assert torch.equal(nxt, mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, 1e-6)[0])
    assert torch.isfinite(gemm_out).all()
    assert _equal(boundary, mhc.boundary(*s.boundary_args()))


def test_capture_without_workspace_raises(mhc):
    mhc.DEFAULT_POOL.clear()
    s = Site(tokens=4, hidden=512, device="cuda", seed=51)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="no workspace"):
        with torch.cuda.graph(graph):
            mhc.pre(*s.pre_args())
    mhc.DEFAULT_POOL.reserve("cuda", 512, 4, 64)


def test_explicit_workspace(mhc):
    s = Site(tokens=4, hidden=512, device="cuda", seed=52)
    ws = mhc.make_workspace("cuda", 512, 4, 4)
    assert _equal(mhc.pre(*s.pre_args(), workspace=ws), mhc.pre(*s.pre_args()))
    small = mhc.make_workspace("cuda", 512, 4, 1)[:16]
    with pytest.raises(ValueError, match="workspace"):
        mhc.pre(*s.pre_args(), workspace=small)


def test_compiled_stack_in_cuda_graphs(mhc):
    """torch.compile(fullgraph=True, mode="reduce-overhead"): inductor's CUDA graphs around the
    ops, bitwise equal to eager for the ops' outputs."""
    torch._dynamo.reset()
    s, sub = Site(tokens=8, hidden=512, device="cuda", seed=61), _sublayer()
    eager = stack_v41(s, sub)
    fn = torch.compile(lambda: stack_v41(s, sub), fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        out = fn()
    torch.cuda.synchronize()
    torch.testing.assert_close(out[0].float(), eager[0].float(), rtol=2e-2, atol=2e-2)


def test_kernel_shape_error_is_clear(mhc):
    """C = 100 is not a multiple of 64: the CUDA kernels refuse it with a ValueError."""
    s = Site(tokens=2, hidden=100, device="cuda", seed=71)
    with pytest.raises(ValueError, match="100"):
        mhc.pre(*s.pre_args())


def test_cross_device_tensors_rejected(mhc):
    s = Site(tokens=2, hidden=512, device="cuda", seed=72)
    args = list(s.pre_args())
    args[1] = args[1].cpu()
    with pytest.raises(ValueError, match="fn is on cpu but residual is on cuda:0"):
        mhc.pre(*args)
