"""The head collapse (docs/head.md) against torch.compile of the same math, on the GPU, written as
JSON: torch.ops.mhc.head and the compiled formula, each with and without the fused final RMSNorm,
timed with the method of `mhc bench kernels` (one CUDA graph per input set, sets rotated past L2,
a CUDA event between consecutive replays, median), with the bytes floor of that tool's head rows
(per token x read once and out written once, hc_fn [n, K] and the norm weight once).

    python bench/head_compile.py --out OUT.json [--hidden 4096,5120,7168]
        [--tokens 1,2,4,8,16,4096,8192] [--reps 200] [--cpp-json KERNELS.json ...]

--cpp-json: `mhc bench kernels --json` files of the same build (one per hidden size), whose
"head collapse" rows are set beside the rows here.
"""

import argparse
import datetime
import json
import math
import statistics

import torch

import mhc  # noqa: F401  (registers torch.ops.mhc)

N = 4
RMS_EPS, HC_EPS = 1e-20, 1e-6  # DeepSeek-V4.1 (docs/head.md)
SPIN_CYCLES = 20_000_000  # holds the stream while the replays are queued (host slower than GPU)
ANCHOR_BYTES_PER_S = 4.27e12  # the kernel benchmark's anchor (H200 copy bandwidth)


def head_math(residual, fn, hc_scale, hc_base, norm_weight):
    """The head collapse as the models write it (DeepSeek's ParallelHead.hc_head, vLLM's and
    SGLang's references), then the final RMSNorm in fp32 with one rounding, as mhc's op does."""
    t, n, c = residual.shape
    x = residual.flatten(1).float()
    rsqrt = torch.rsqrt(x.square().mean(-1, keepdim=True) + RMS_EPS)
    mixes = torch.nn.functional.linear(x, fn) * rsqrt
    w = torch.sigmoid(mixes * hc_scale + hc_base) + HC_EPS
    y = torch.sum(w.unsqueeze(-1) * x.view(t, n, c), dim=1).to(torch.bfloat16)
    if norm_weight is None:
        return y
    yf = y.float()
    return (yf * torch.rsqrt(yf.square().mean(-1, keepdim=True) + RMS_EPS) * norm_weight).to(
        torch.bfloat16)


def mhc_head(residual, fn, hc_scale, hc_base, norm_weight):
    return torch.ops.mhc.head(residual, fn, hc_scale, hc_base, RMS_EPS, HC_EPS, norm_weight,
                              RMS_EPS)


def floor_bytes(tokens, hidden, norm):
    k = N * hidden
    return tokens * (2 * k + 2 * hidden) + 4 * N * k + 4 * (N + 1) + (4 * hidden if norm else 0)


def time_graphs(fn, tokens, hidden, norm, reps, l2_bytes):
    """Median and min µs of one replay; one graph per input set, as mhc bench kernels."""
    set_bytes = tokens * (2 * N * hidden + 2 * hidden)
    sets = max(1, min(48, math.ceil(3 * l2_bytes / set_bytes)))
    gen = torch.Generator(device="cuda").manual_seed(1)
    k = N * hidden
    weights = dict(
        fn=torch.randn(N, k, device="cuda", generator=gen) / math.sqrt(k),
        hc_scale=torch.rand(1, device="cuda", generator=gen) * 0.5 + 0.5,
        hc_base=torch.rand(N, device="cuda", generator=gen) - 0.5,
        norm_weight=(torch.rand(hidden, device="cuda", generator=gen) * 0.4 + 0.8) if norm
        else None)
    inputs = [torch.randn(tokens, N, hidden, device="cuda", generator=gen).to(torch.bfloat16)
              for _ in range(sets)]
    stream = torch.cuda.Stream()
    graphs, outs = [], []
    with torch.cuda.stream(stream):
        for x in inputs[:2]:  # warm-up: compilation, autotuning, the op's workspace
            fn(x, **weights)
        torch.cuda.synchronize()
        for x in inputs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                outs.append(fn(x, **weights))
            graphs.append(g)
        for i in range(max(20, 2 * sets)):
            graphs[i % sets].replay()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
        torch.cuda._sleep(SPIN_CYCLES)
        events[0].record()
        for i in range(reps):
            graphs[i % sets].replay()
            events[i + 1].record()
    torch.cuda.synchronize()
    us = [1000 * events[i].elapsed_time(events[i + 1]) for i in range(reps)]
    # The two agree where they should: the compiled math against the op on the last set.
    ref = head_math(inputs[-1], **weights).float()
    err = (outs[-1].float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
    return statistics.median(us), min(us), sets, err


def cpp_rows(paths):
    rows = {}
    for path in paths:
        doc = json.load(open(path))
        hidden = int(doc["params"].split("C=")[1].split()[0]) if "C=" in doc["params"] else None
        for r in doc["results"]:
            if r["kernel"].startswith("head collapse"):
                rows[(r["kernel"], hidden, r["tokens"])] = r["median_us"]
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", default="4096,5120,7168")
    ap.add_argument("--tokens", default="1,2,4,8,16,4096,8192")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--cpp-json", nargs="*", default=[])
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--driver", default="unknown")
    ap.add_argument("--static", action="store_true",
                    help="torch.compile(dynamic=False): one compilation per shape (default: "
                         "torch's automatic dynamic shapes, a recompile on the second token count)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/head_compile.py needs a CUDA GPU")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    cpp = cpp_rows(a.cpp_json)
    compiled = torch.compile(head_math, fullgraph=True, dynamic=False if a.static else None)
    rows = []
    with torch.no_grad():
        for hidden in [int(h) for h in a.hidden.split(",")]:
            for tokens in [int(t) for t in a.tokens.split(",")]:
                for norm in (False, True):
                    kernel = "head collapse + final norm" if norm else "head collapse"
                    row = dict(kernel=kernel, hidden=hidden, tokens=tokens,
                               bytes=floor_bytes(tokens, hidden, norm))
                    row["floor_us_at_4.27TBps"] = row["bytes"] / ANCHOR_BYTES_PER_S * 1e6
                    for name, fn in (("mhc", mhc_head), ("torch_compile", compiled)):
                        med, mn, sets, err = time_graphs(fn, tokens, hidden, norm, a.reps, l2)
                        row[f"{name}_median_us"] = med
                        row[f"{name}_min_us"] = mn
                        row[f"{name}_max_rel_err_vs_compiled_math"] = err
                        row[f"{name}_fraction_of_4.27TBps"] = row["floor_us_at_4.27TBps"] / med
                        row["input_sets"] = sets
                    row["cpp_median_us"] = cpp.get((kernel, hidden, tokens))
                    row["speedup_vs_compile"] = row["torch_compile_median_us"] / row[
                        "mhc_median_us"]
                    rows.append(row)
                    print(f"{kernel:<27} C={hidden:<5} T={tokens:<5} mhc {row['mhc_median_us']:8.2f}"
                          f" us  compile {row['torch_compile_median_us']:8.2f} us  floor "
                          f"{row['floor_us_at_4.27TBps']:7.2f} us", flush=True)
    doc = dict(tool="bench/head_compile.py", gpu=torch.cuda.get_device_name(0),
               driver=a.driver, commit=a.commit,
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               torch=torch.__version__, cuda_runtime=torch.version.cuda, n=N,
               rms_eps=RMS_EPS, hc_eps=HC_EPS, reps=a.reps,
               compile_dynamic=False if a.static else "automatic",
               method="one CUDA graph per input set, sets rotated past L2, a CUDA event between "
                      "consecutive replays after a spin kernel holds the stream, median "
                      "(as mhc bench kernels); torch.compile(fullgraph=True) of the same formula, "
                      "warmed up before capture",
               results=rows)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
