"""What a call costs beyond its kernels: the host-time profile of the ops' C++ kernels
(torch.ops.mhc._host_profile), and on CUDA the launches each op queues (its CUDA graph's nodes,
listed by mhc._C._graph_nodes) and the benchmark's timing of captured graphs by the C++ loop
(mhc._C._time_graph_replays)."""

import json

import pytest
import torch
from conftest import DEVICES, Site, needs_cuda


def _out_calls(s):
    """op -> a call of its _out form on site `s` (V4.1: the carried pre_mix; fp32 norm weight)."""
    t, n, c = s.tokens, s.n, s.hidden
    dev = s.residual.device
    f32 = dict(device=dev, dtype=torch.float32)
    layer_input = torch.empty(t, c, device=dev, dtype=torch.bfloat16)
    post, comb, pre = torch.empty(t, n, **f32), torch.empty(t, n, n, **f32), torch.empty(t, n, **f32)
    nxt = torch.empty_like(s.residual)
    mhc = torch.ops.mhc
    e = s.eps
    return {
        "pre_out": lambda: mhc.pre_out(*s.pre_args(), layer_input=layer_input, post=post,
                                       comb=comb, next_pre_mix=pre),
        "coefficients_out": lambda: mhc.coefficients_out(*s.coef_args(), post=post, comb=comb,
                                                         next_pre_mix=pre),
        "post_out": lambda: mhc.post_out(*s.post_args(), out=nxt),
        "post_pre_out": lambda: mhc.post_pre_out(*s.post_args(), s.pre_mix, s.norm_weight,
                                                 e["norm_eps"], residual_next=nxt,
                                                 next_layer_input=layer_input),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_host_profile_counts_every_call_and_only_while_on(mhc, device):
    s = Site(tokens=3, hidden=256, device=device, seed=5)
    call = _out_calls(s)["post_pre_out"]
    call()
    torch.ops.mhc._host_profile(False)  # off, and the sums so far dropped
    call()
    assert json.loads(torch.ops.mhc._host_profile(True))["calls"] == 0
    for _ in range(7):
        call()
    sums = json.loads(torch.ops.mhc._host_profile(False))
    assert sums["calls"] == 7
    phases = [sums[k] for k in ("checks_ns", "setup_ns", "launch_ns")]
    assert all(v >= 0 for v in phases) and sums["launch_ns"] > 0 and sums["checks_ns"] > 0
    assert 0 <= sums["plan_ns"] <= sums["launch_ns"]
    call()
    assert json.loads(torch.ops.mhc._host_profile(False))["calls"] == 0


def _kernel_nodes(call):
    from mhc import _C

    call()  # eager warm-up: the pool's workspace exists before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        call()
    nodes = _C._graph_nodes(graph.raw_cuda_graph())
    graph.instantiate()
    return graph, nodes


@needs_cuda
@pytest.mark.parametrize("op", ["pre_out", "coefficients_out", "post_out", "post_pre_out"])
def test_one_launch_per_op_at_decode_size(mhc, op):
    """At one token each op is one kernel launch on Hopper: pre_out's input path rides in the
    coefficient launch (the plan's fused input path), post_pre is one launch."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the fused input path is the Hopper plan's")
    s = Site(tokens=1, hidden=512, device="cuda", seed=9)
    _, nodes = _kernel_nodes(_out_calls(s)[op])
    kernels = [n for n in nodes if n.startswith("kernel ")]
    assert len(kernels) == 1 and len(nodes) == 1, nodes


@needs_cuda
def test_graph_replays_timed_by_the_cpp_loop(mhc):
    from mhc import _C

    s = Site(tokens=16, hidden=512, device="cuda", seed=4)
    graph, _ = _kernel_nodes(_out_calls(s)["post_out"])
    stream = torch.cuda.Stream()
    median, least, warmup = _C._time_graph_replays([graph.raw_cuda_graph_exec()], 50,
                                                   stream.cuda_stream)
    assert 0 < least <= median < 1e4 and warmup == 20
