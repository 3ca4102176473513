"""The torch ops on the GPU: per-op time in CUDA graphs from Python, with the method of
`mhc bench kernels` (one graph per input set, sets rotated past L2, a CUDA event between
consecutive replays, warm-up, median), set beside that tool's JSON from the same build; and the
eager host overhead per call (torch.ops.mhc.* and the bare mhc._C call). Writes JSON.

    python bench/python_ops.py --cpp-json CPP.json --out OUT.json [--tokens 1,16,128,1024]
"""

import argparse
import json
import math
import statistics
import time

import torch

import mhc
from mhc import _C

# The same kernel sequence as an item of `mhc bench kernels`.
CPP_ITEM = {"coefficients": "coefficients (GEMM+stats)", "post": "post",
            "post_pre": "post + next input path"}


class Inputs:
    def __init__(self, tokens, n=4, hidden=5120, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        kw = dict(device="cuda", generator=g)
        self.residual = torch.randn(tokens, n, hidden, **kw).bfloat16()
        self.sublayer_out = torch.randn(tokens, hidden, **kw).bfloat16()
        self.pre_mix = torch.rand(tokens, n, **kw) + 0.2
        self.post = torch.rand(tokens, n, **kw) * 2
        self.comb = torch.rand(tokens, n, n, **kw) * 0.5
        self.out = (torch.empty(tokens, hidden, dtype=torch.bfloat16, device="cuda"),
                    torch.empty(tokens, n, device="cuda"), torch.empty(tokens, n, n, device="cuda"),
                    torch.empty(tokens, n, device="cuda"))
        self.next = torch.empty_like(self.residual)


class Weights:
    def __init__(self, n=4, hidden=5120):
        nmix = n * (n + 2)
        self.fn = torch.randn(nmix, n * hidden, device="cuda") * 1e-2
        self.hc_scale = torch.tensor([1.0, 1.0, 2.0], device="cuda")
        self.hc_base = torch.full((nmix,), 0.1, device="cuda")
        self.norm_weight = torch.ones(hidden, device="cuda")


SPIN_CYCLES = 200_000_000  # ~0.1 s at H200 clocks: longer than queueing 200 replays takes

EPS = (1e-6, 1e-6, 1e-6, 2.0, 20)  # rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters


def enqueue(op, w, b):
    ops = torch.ops.mhc
    if op == "coefficients":
        ops.coefficients_out(b.residual, w.fn, w.hc_scale, w.hc_base, *EPS, post=b.out[1],
                             comb=b.out[2], next_pre_mix=b.out[3])
    elif op == "pre":
        ops.pre_out(b.residual, w.fn, w.hc_scale, w.hc_base, w.norm_weight, b.pre_mix, *EPS, 1e-6,
                    layer_input=b.out[0], post=b.out[1], comb=b.out[2], next_pre_mix=b.out[3])
    elif op == "post":
        ops.post_out(b.sublayer_out, b.residual, b.post, b.comb, out=b.next)
    elif op == "post_pre":
        ops.post_pre_out(b.sublayer_out, b.residual, b.post, b.comb, b.pre_mix, w.norm_weight,
                         1e-6, residual_next=b.next, next_layer_input=b.out[0])
    else:
        raise ValueError(op)


def time_graphs(op, w, tokens, reps, l2_bytes, hidden=5120, n=4):
    set_bytes = tokens * (4 * n * hidden + 4 * hidden)
    sets = max(1, min(48, math.ceil(3 * l2_bytes / set_bytes)))
    buffers = [Inputs(tokens, seed=i + 1) for i in range(sets)]
    stream = torch.cuda.Stream()
    mhc.DEFAULT_POOL.reserve("cuda", hidden, n, tokens)
    graphs = []
    with torch.cuda.stream(stream):
        enqueue(op, w, buffers[0])  # eager warm-up
        torch.cuda.synchronize()
        for b in buffers:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                enqueue(op, w, b)
            graphs.append(g)
        for i in range(max(20, 2 * sets)):
            graphs[i % sets].replay()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
        # Python enqueues a replay more slowly than a small graph runs: a spin kernel holds the
        # stream while all replays are queued, so the events time the GPU, not the host loop.
        torch.cuda._sleep(SPIN_CYCLES)
        events[0].record()
        for i in range(reps):
            graphs[i % sets].replay()
            events[i + 1].record()
    torch.cuda.synchronize()
    us = [1000 * events[i].elapsed_time(events[i + 1]) for i in range(reps)]
    return statistics.median(us), min(us), sets


def host_overhead(op, w, calls=2000):
    """Eager wall time per call on the host (1 token: the GPU never holds the host back)."""
    b = Inputs(1, seed=7)
    s = torch.cuda.current_stream().cuda_stream
    direct = {
        "coefficients": lambda: _C.coefficients(b.residual, w.fn, w.hc_scale, w.hc_base, b.out[3],
                                                b.out[1], b.out[2], ws, *EPS, "tf32", s),
        "post": lambda: _C.post(b.sublayer_out, b.residual, b.post, b.comb, b.next, s),
    }
    ws = mhc.DEFAULT_POOL.get(torch.device("cuda", 0), 5120, 4, 1)
    result = {}
    for name, fn in (("torch_op", lambda: enqueue(op, w, b)), ("bare_C", direct.get(op))):
        if fn is None:
            continue
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        result[name + "_us_per_call"] = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,16,128,1024")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--cpp-json", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--driver", default="")
    a = ap.parse_args()
    cpp = {}
    if a.cpp_json:
        for r in json.load(open(a.cpp_json))["results"]:
            cpp[(r["kernel"], r["tokens"])] = r["median_us"]
    props = torch.cuda.get_device_properties(0)
    w = Weights()
    rows = []
    for op in ("coefficients", "pre", "post", "post_pre"):
        estimate = None
        host = host_overhead(op, w)
        for tokens in [int(t) for t in a.tokens.split(",")]:
            med, mn, sets = time_graphs(op, w, tokens, a.reps, props.L2_cache_size)
            ref = cpp.get((CPP_ITEM.get(op, ""), tokens))
            if op == "pre" and cpp:  # two launches; C++ times them in separate graphs
                parts = [cpp.get((k, tokens)) for k in ("input_path", "coefficients (GEMM+stats)",
                                                         "empty kernel (graph floor)")]
                estimate = parts[0] + parts[1] - parts[2] if None not in parts else None
            rows.append(dict(op=op, tokens=tokens, python_graph_median_us=med, python_graph_min_us=mn,
                             input_sets=sets, cpp_item=CPP_ITEM.get(op), cpp_median_us=ref,
                             cpp_estimate_us=(estimate if op == "pre" and cpp else None),
                             ratio=(med / ref if ref else None), **host))
            print(f"{op:<13} {tokens:>5} python {med:8.2f} us  C++ {ref if ref else float('nan'):8.2f} us"
                  f"  ratio {(med / ref) if ref else float('nan'):.3f}  host {host}", flush=True)
    report = dict(tool="bench/python_ops.py", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  commit=a.commit, gpu=props.name, driver=a.driver,
                  torch=torch.__version__, cuda_runtime=torch.version.cuda, mhc=mhc.__version__,
                  preset="dsv41-flash (C=5120 n=4)", method=(
                      "per op: one CUDA graph per input set (torch.cuda.graph), sets rotated past L2 "
                      "as `mhc bench kernels`, CUDA event between consecutive replays, median of "
                      f"{a.reps}; host: eager wall time per call over 2000 calls at 1 token"),
                  results=rows)
    json.dump(report, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
