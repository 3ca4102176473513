"""GPU-only behaviour: the overlap on a side stream (bitwise equal to one stream, eagerly and in
CUDA-graph replays), capture of every op in a CUDA graph with static buffers, torch.compile with
CUDA graphs (bitwise with an exact sublayer), the workspace rules under capture, and kernel-side
errors. Skipped without a GPU (a failure under MHC_REQUIRE_GPU=1)."""

import ctypes

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


class _KernelParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", ctypes.c_void_p), *[(f, ctypes.c_uint) for f in
                ("gx", "gy", "gz", "bx", "by", "bz", "smem")], ("params", ctypes.c_void_p),
                ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def _coefficient_in_edges(raw_graph):
    """For each coefficient-kernel node of a cudaGraph_t, its number of incoming edges (the
    driver API: cuGraphGetNodes, cuGraphKernelNodeGetParams_v2, cuFuncGetName)."""
    cu = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_size_t(0)
    assert cu.cuGraphGetNodes(ctypes.c_void_p(raw_graph), None, ctypes.byref(count)) == 0
    nodes = (ctypes.c_void_p * count.value)()
    assert cu.cuGraphGetNodes(ctypes.c_void_p(raw_graph), nodes, ctypes.byref(count)) == 0
    result = []
    for node in nodes:
        kind = ctypes.c_int(-1)
        assert cu.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)) == 0
        if kind.value != 0:  # CU_GRAPH_NODE_TYPE_KERNEL
            continue
        params, name = _KernelParams(), ctypes.c_char_p()
        assert cu.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(params)) == 0
        if params.func:
            assert cu.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(params.func)) == 0
        else:
            assert cu.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(params.kern)) == 0
        if b"prenorm" not in name.value:
            continue
        edges = ctypes.c_size_t(0)
        # With edge data, as programmatic edges make a query without it lossy.
        deps = (ctypes.c_void_p * 16)()
        data = (ctypes.c_ubyte * (8 * 16))()
        edges.value = 16
        assert cu.cuGraphNodeGetDependencies_v2(ctypes.c_void_p(node), deps, data,
                                                ctypes.byref(edges)) == 0
        result.append(edges.value)
    return result


@pytest.mark.parametrize("tokens", [1, 8, 16, 40])
def test_side_stream_fork_in_cuda_graphs(mhc, tokens):
    """The engine recipe (post_pre, then coefficients on the side stream, joined before the next
    post) in a CUDA graph. A launch with programmatic dependent launch takes every edge into it as
    programmatic, and behind two streams it cannot start early: the side launch must hang off
    post_pre alone (the side stream's previous launch is post_pre's dependency through the join).
    A torch kernel queued in between leaves both edges (nothing proves the side stream's edge
    redundant there). Replays on fresh inputs give the bits of the one-stream recipe either way
    (the side launch runs the split loop at up to 16 tokens)."""
    sites = 4
    s, sub = Site(tokens=tokens, hidden=512, device="cuda", seed=80 + tokens), _sublayer()
    side = torch.cuda.Stream()
    scratch = torch.zeros(64, device="cuda")
    arms = {"after_post_pre": None, "after_torch_op": lambda: scratch.add_(1)}
    captured = {}
    for name, between in arms.items():
        stack_v41(s, sub, sites, side.cuda_stream, between)  # warm-up: workspaces exist
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(graph):
            out = stack_v41(s, sub, sites, side.cuda_stream, between)
        captured[name] = (graph, out, _coefficient_in_edges(graph.raw_cuda_graph()))
        graph.instantiate()
    # One coefficient launch per site; the side stream's second and later ones are the test.
    assert len(captured["after_post_pre"][2]) == sites
    assert max(captured["after_post_pre"][2]) == 1
    assert sorted(captured["after_torch_op"][2])[-(sites - 2):] == [2] * (sites - 2)
    for seed in range(3):
        fresh = Site(tokens=tokens, hidden=512, device="cuda", seed=200 + seed)
        s.residual.copy_(fresh.residual)
        s.pre_mix.copy_(fresh.pre_mix)
        expected = stack_v41(s, sub, sites)  # one stream, eagerly
        for graph, out, _ in captured.values():
            for t in out:
                t.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert _equal(out, expected)


def test_every_out_op_captures_in_a_graph(mhc):
    """Each op's out= form captured in one graph, each op writing buffers of its own: after a
    replay on poisoned buffers, every output is bitwise its eager result (the same kernels on the
    same inputs)."""
    s = Site(tokens=4, hidden=512, device="cuda", seed=41)
    x = s.residual.view(4, -1)
    eps = 1e-6
    pre = [t.clone() for t in mhc.pre(*s.pre_args())]
    post_next = torch.empty_like(s.residual)
    post_pre = [torch.empty_like(s.residual), torch.empty_like(pre[0])]
    gemm_out, gemm_sq = torch.empty(2, 4, 24, device="cuda"), torch.empty(2, 4, device="cuda")
    boundary = [t.clone() for t in mhc.boundary(*s.boundary_args())]
    mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, eps)  # warm the workspace
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mhc.pre(*s.pre_args(), out=pre)
        mhc.post(pre[0], s.residual, pre[1], pre[2], out=post_next)
        mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, eps, out=post_pre)
        mhc.hc_prenorm_gemm(x, s.fn, gemm_out, gemm_sq, 2)
        mhc.boundary(*s.boundary_args(), out=boundary)
    outputs = (*pre, post_next, *post_pre, gemm_out, gemm_sq, *boundary)
    for t in outputs:
        t.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    want_pre = mhc.pre(*s.pre_args())
    want_gemm = torch.full_like(gemm_out, float("nan")), torch.full_like(gemm_sq, float("nan"))
    mhc.hc_prenorm_gemm(x, s.fn, *want_gemm, 2)
    want = (*want_pre, mhc.post(want_pre[0], s.residual, want_pre[1], want_pre[2]),
            *mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, eps), *want_gemm,
            *mhc.boundary(*s.boundary_args()))
    torch.cuda.synchronize()
    names = ("pre.layer_input", "pre.post", "pre.comb", "pre.next_pre_mix", "post",
             "post_pre.residual_next", "post_pre.next_layer_input", "gemm.out", "gemm.sqrsum",
             "boundary.residual_next", "boundary.layer_input", "boundary.next_post",
             "boundary.next_comb", "boundary.next_pre_mix")
    assert len(outputs) == len(want) == len(names)
    for name, got, w in zip(names, outputs, want):
        assert torch.isfinite(got.float()).all(), name
        assert torch.equal(got, w), name


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
    with pytest.raises(RuntimeError, match="workspace: 16 bytes serve"):
        mhc.pre(*s.pre_args(), workspace=small)


@pytest.mark.parametrize("sublayer", ["exact", "standin"])
def test_compiled_stack_in_cuda_graphs(mhc, sublayer):
    """torch.compile(fullgraph=True, mode="reduce-overhead"): inductor's CUDA graphs around the
    ops. With an exact sublayer (F = 2 x, no rounding) every output of the stack is bitwise the
    eager one: the ops are opaque to inductor and run the same kernels. With the tanh(x W)
    stand-in inductor may fuse the sublayer differently, so the outputs agree within the
    tolerance of test_compile.py's inductor case (rtol = atol = 2e-2), all of them."""
    torch._dynamo.reset()
    s = Site(tokens=8, hidden=512, device="cuda", seed=61)
    sub = (lambda y: y * 2) if sublayer == "exact" else _sublayer()
    eager = stack_v41(s, sub)
    fn = torch.compile(lambda: stack_v41(s, sub), fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        out = [t.clone() for t in fn()]  # cudagraph trees reuse the output memory per replay
    torch.cuda.synchronize()
    assert len(out) == len(eager) == 2  # residual, pre_mix
    for name, got, want in zip(("residual", "pre_mix"), out, eager):
        assert torch.isfinite(got.float()).all(), name
        if sublayer == "exact":
            assert torch.equal(got, want), name
        else:
            torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2,
                                       msg=name)


def test_kernel_shape_error_is_clear(mhc):
    """C = 72 is a hidden size the library takes (a multiple of 8) but not a multiple of 64: the
    CUDA kernels refuse it, naming C."""
    s = Site(tokens=2, hidden=72, device="cuda", seed=71)
    with pytest.raises(RuntimeError, match=r"C=72\b.*multiple of 64|multiple of 64, got 72"):
        mhc.pre(*s.pre_args())


def test_cross_device_tensors_rejected(mhc):
    s = Site(tokens=2, hidden=512, device="cuda", seed=72)
    args = list(s.pre_args())
    args[1] = args[1].cpu()
    with pytest.raises(RuntimeError, match="fn is on cpu but residual is on cuda:0"):
        mhc.pre(*args)
