"""Lab probe: why `post` in a CUDA graph captured from Python times 5-11% over `mhc bench kernels`'
"post" item at 1 and 16 tokens (docs/python-performance.md, the python_graph tables), although
both graphs hold the same kernel with the same grid.

Times, in one process, one graph per input set rotated past L2 and the C++ benchmark's loop
(mhc._C._time_graph_replays), `post` at 1 and 16 tokens (C = 5120) captured three ways, the
variants' rounds interleaved:
  op           torch.ops.mhc.post_out.default (the python_graph row's capture)
  op_no_pdl    the same after mhc.configure(kernel_config={"pdl": false})
  bare_C       mhc._C.post with the same tensors (the nanobind module: no torch op at all)
and runs `mhc bench kernels --only post --tokens 1,16` before and after (the C++ item), printing
every median and each graph's kernel node.

    PYTHONPATH=python python3 dev/scripts/graph-ratio-probe.py --mhc build-check/mhc
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import torch

import mhc
from mhc import _C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from python_ops import Site  # noqa: E402


def graphs_of(enqueue, sites, stream):
    graphs = []
    with torch.cuda.stream(stream):
        enqueue(sites[0])  # eager warm-up
        torch.cuda.synchronize()
        for s in sites:
            g = torch.cuda.CUDAGraph(keep_graph=True)
            with torch.cuda.graph(g, stream=stream):
                enqueue(s)
            g.instantiate()
            graphs.append(g)
    torch.cuda.synchronize()
    return graphs


def cpp_post(binary, tokens):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "k.json")
        subprocess.run([binary, "bench", "kernels", "--only", "post", "--tokens",
                        ",".join(map(str, tokens)), "--reps", "200", "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(out))["results"]
    return {r["tokens"]: r["median_us"] for r in rows if r["kernel"] == "post"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mhc", required=True, help="the mhc CLI of the same build")
    ap.add_argument("--tokens", default="1,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    hidden, n = 5120, 4
    before = cpp_post(a.mhc, tokens)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    stream = torch.cuda.Stream()
    table = {}
    with torch.no_grad():
        for t in tokens:
            set_bytes = t * (4 * n * hidden + 4 * hidden)
            sets = max(1, min(48, math.ceil(3 * l2 / set_bytes)))
            sites = [Site("cuda", t, hidden, seed=i + 1) for i in range(sets)]
            mhc.DEFAULT_POOL.reserve("cuda", hidden, n, t)
            op = torch.ops.mhc.post_out.default
            variants = {
                "op": lambda s: op(*s.post_args(), out=s.next),
                "bare_C": lambda s: _C.post(*s.post_args(), s.next,
                                            torch.cuda.current_stream().cuda_stream),
            }
            built = {name: graphs_of(fn, sites, stream) for name, fn in variants.items()}
            mhc.configure(kernel_config={"pdl": False})
            built["op_no_pdl"] = graphs_of(variants["op"], sites, stream)
            mhc.configure()  # the defaults again
            for name, graphs in built.items():
                print(f"{t:>3} tokens {name:<10} nodes:", _C._graph_nodes(graphs[0].raw_cuda_graph()))
            times = {name: [] for name in built}
            for _ in range(a.rounds):  # interleaved rounds
                for name, graphs in built.items():
                    med, _, _ = _C._time_graph_replays([g.raw_cuda_graph_exec() for g in graphs],
                                                       a.reps, stream.cuda_stream)
                    times[name].append(med)
            table[t] = {name: statistics.median(v) for name, v in times.items()}
            table[t]["rounds"] = times
    after = cpp_post(a.mhc, tokens)
    print(f"{'tokens':>6} {'C++ before':>10} {'C++ after':>10} " +
          " ".join(f"{k:>10}" for k in ("op", "op_no_pdl", "bare_C")))
    for t in tokens:
        row = table[t]
        print(f"{t:>6} {before[t]:>10.2f} {after[t]:>10.2f} " +
              " ".join(f"{row[k]:>10.2f}" for k in ("op", "op_no_pdl", "bare_C")))
    print(json.dumps({"cpp_before": before, "cpp_after": after, "python": table}))


if __name__ == "__main__":
    main()
