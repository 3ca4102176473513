"""The torch ops' cost from Python, written as JSON:

- host: eager wall time per call at 1 token, every op, torch.ops.mhc.* (the C++ ops on the stable
  ABI) against the ops as they were before (torch.ops.mhc_dlpack.*: Python kernels over mhc._C
  through DLPack, bench/dlpack_ops.py) and the bare mhc._C call with the same tensors, under
  torch.no_grad (what engines and HF generate run), torch.inference_mode and with grad enabled;
  beside torch.add. Rounds of back-to-back calls, the median round; each round times every
  variant and op of a mode in turn, so that a busy stretch of the host falls on all alike. On CUDA also with the GPU held
  by a spin kernel while a round is queued, so that the time is the host's even where the GPU
  takes longer per call than the host.
- graph (CUDA): the GPU time per op in CUDA graphs, with the method of `mhc bench kernels` (one
  graph per input set, sets rotated past L2, a CUDA event between consecutive replays, median),
  beside that tool's JSON from the same build.

    python bench/python_ops.py --out OUT.json [--device cpu|cuda] [--cpp-json CPP.json]
        [--tokens 1,16,128,1024] [--hidden C] [--calls 2000]

A part that fails (host, host_profile, graph) keeps the rows it measured before the failure and
the other parts still run; the JSON is written with `errors` (part -> the error) and the script
then exits 1.
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

import torch

import mhc
from mhc import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dlpack_ops  # noqa: E402,F401  (registers torch.ops.mhc_dlpack.*)

# The same kernel sequence as an item of `mhc bench kernels`.
CPP_ITEM = {"coefficients": "coefficients (GEMM+stats)", "post": "post",
            "post_pre": "post + next input path",
            # pre_out with pre_mix: Ops::pre, prenorm_coefficients with the input path (fused
            # into the coefficient launch where the plan says, else its launch first).
            "pre": "coef + input path (one launch)"}
EPS = (1e-6, 1e-6, 1e-6, 2.0, 20)  # rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters
OPS = ("hc_prenorm_gemm", "pre", "pre_out", "coefficients", "coefficients_out", "pre_overlap",
       "pre_overlap_out", "join", "post", "post_out", "post_pre", "post_pre_out", "boundary",
       "boundary_out")
SPIN_CYCLES = 200_000_000  # ~0.1 s at H100/H200 clocks: longer than queueing what it holds


class Site:
    """One site's tensors at `tokens` tokens (C = hidden, n = 4), outputs included."""

    def __init__(self, device, tokens, hidden, n=4, seed=0):
        g = torch.Generator(device=device).manual_seed(seed)
        kw = dict(device=device, generator=g)
        nmix = n * (n + 2)
        self.residual = torch.randn(tokens, n, hidden, **kw).bfloat16()
        self.sublayer_out = torch.randn(tokens, hidden, **kw).bfloat16()
        self.pre_mix = torch.rand(tokens, n, **kw) + 0.2
        self.post = torch.rand(tokens, n, **kw) * 2
        self.comb = torch.rand(tokens, n, n, **kw) * 0.5
        self.fn = torch.randn(nmix, n * hidden, **kw) * 1e-2
        self.hc_scale = torch.tensor([1.0, 1.0, 2.0], device=device)
        self.hc_base = torch.full((nmix,), 0.1, device=device)
        self.norm_weight = torch.ones(hidden, device=device)
        f32 = dict(device=device, dtype=torch.float32)
        self.out = (torch.empty(tokens, hidden, dtype=torch.bfloat16, device=device),
                    torch.empty(tokens, n, **f32), torch.empty(tokens, n, n, **f32),
                    torch.empty(tokens, n, **f32))
        self.next = torch.empty_like(self.residual)
        self.gemm = (torch.empty(2, tokens, nmix, **f32), torch.empty(2, tokens, **f32))
        self.ws = (mhc.make_workspace(device, hidden, n, tokens) if device != "cpu"
                   else torch.empty(0, dtype=torch.uint8))

    def pre(self):
        return (self.residual, self.fn, self.hc_scale, self.hc_base, self.norm_weight,
                self.pre_mix, *EPS, 1e-6)

    def coef(self):
        return (self.residual, self.fn, self.hc_scale, self.hc_base, *EPS)

    def post_args(self):
        return (self.sublayer_out, self.residual, self.post, self.comb)

    def boundary(self):
        return (*self.post_args(), self.pre_mix, self.norm_weight, self.fn, self.hc_scale,
                self.hc_base, *EPS, 1e-6)


def op_calls(ns, s):
    """name -> a no-argument call of op `name` of namespace `ns` on site `s`."""
    o = s.out
    pre_out = dict(layer_input=o[0], post=o[1], comb=o[2], next_pre_mix=o[3])
    coef_out = dict(post=o[1], comb=o[2], next_pre_mix=o[3])
    pp = (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6)
    b_out = dict(residual_next=s.next, layer_input=o[0], next_post=o[1], next_comb=o[2],
                 next_pre_mix=o[3])
    x = s.residual.view(s.residual.shape[0], -1)
    return {
        "hc_prenorm_gemm": lambda: ns.hc_prenorm_gemm(x, s.fn, *s.gemm, 2),
        "pre": lambda: ns.pre(*s.pre()),
        "pre_out": lambda: ns.pre_out(*s.pre(), **pre_out),
        "coefficients": lambda: ns.coefficients(*s.coef()),
        "coefficients_out": lambda: ns.coefficients_out(*s.coef(), **coef_out),
        "pre_overlap": lambda: ns.pre_overlap(*s.pre(), 0),
        "pre_overlap_out": lambda: ns.pre_overlap_out(*s.pre(), 0, **pre_out),
        "join": lambda: ns.join(0, o[1], o[2], o[3]),
        "post": lambda: ns.post(*s.post_args()),
        "post_out": lambda: ns.post_out(*s.post_args(), out=s.next),
        "post_pre": lambda: ns.post_pre(*pp),
        "post_pre_out": lambda: ns.post_pre_out(*pp, residual_next=s.next,
                                                next_layer_input=o[0]),
        "boundary": lambda: ns.boundary(*s.boundary()),
        "boundary_out": lambda: ns.boundary_out(*s.boundary(), **b_out),
    }


def bare_calls(s, stream):
    """The mhc._C call behind an op, with the same tensors (no torch layer at all)."""
    o = s.out
    x = s.residual.view(s.residual.shape[0], -1)
    return {
        "hc_prenorm_gemm": lambda: _C.prenorm_gemm(x, s.fn, *s.gemm, 2, stream),
        "coefficients_out": lambda: _C.coefficients(*s.coef()[:4], o[3], o[1], o[2], s.ws, *EPS,
                                                    "tf32", stream),
        "post_out": lambda: _C.post(*s.post_args(), s.next, stream),
        "post_pre_out": lambda: _C.post_pre(*s.post_args(), s.pre_mix, s.norm_weight, s.next,
                                            o[0], 1e-6, stream, workspace=s.ws),
        "boundary_out": lambda: _C.boundary(*s.post_args(), s.pre_mix, s.norm_weight, s.fn,
                                            s.hc_scale, s.hc_base, s.next, o[0], o[3], o[1], o[2],
                                            s.ws, *EPS, 1e-6, "tf32", stream),
    }


def site_calls(s):
    """op -> the call of its bound form (torch.ops.mhc.site_X.default, the site's weights and
    scalars bound once, as an engine calls it), for the four ops that have one. The Site holds
    the binding (released with it)."""
    m, o = torch.ops.mhc, s.out
    s.bound = mhc.bind_site(s.fn, s.hc_scale, s.hc_base, s.norm_weight, *EPS, 1e-6)
    h = s.bound.handle
    pre, coef = m.site_pre_out.default, m.site_coefficients_out.default
    overlap, boundary = m.site_pre_overlap_out.default, m.site_boundary_out.default
    return {
        "pre_out": lambda: pre(h, s.residual, s.pre_mix, *o),
        "coefficients_out": lambda: coef(h, s.residual, *o[1:]),
        "pre_overlap_out": lambda: overlap(h, s.residual, s.pre_mix, 0, *o),
        "boundary_out": lambda: boundary(h, *s.post_args(), s.pre_mix, s.next, *o),
    }


def twin_calls(s):
    """op -> the call of its mhc::_nograd_ twin (the same kernel, no Autograd router), by the
    twin's OpOverload found once: what the mhc.* functions call under no_grad."""
    return op_calls(mhc._api._Overloads(torch.ops.mhc, "_nograd_"), s)


def host_profile(device, hidden, calls, rows):
    """Where each stable op's host time goes, per call (µs), and each bound op's (site_X, its
    registry lookup counted as checks): its C++ kernel's phases (checks; setup: workspace,
    device and stream; launch: the launcher calls, of which plan: the launch description and the
    Ops), from torch.ops.mhc._host_profile, and the wall time per call, whose rest is Python, the
    dispatcher and the stable ABI's boxing. no_grad, the GPU held. Appends to `rows`."""
    with torch.no_grad():
        s = Site(device, 1, hidden, seed=7)
        calls_of = dict(op_calls(torch.ops.mhc, s))
        calls_of.update({f"site_{op}": fn for op, fn in site_calls(s).items()})
        for op, fn in calls_of.items():
            if not op.endswith("_out") and op not in ("hc_prenorm_gemm", "join"):
                continue
            for _ in range(20):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda._sleep(SPIN_CYCLES)
            n = min(calls, 500)
            torch.ops.mhc._host_profile(True)
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            wall = (time.perf_counter() - t0) / n * 1e6
            sums = json.loads(torch.ops.mhc._host_profile(False))
            if device == "cuda":
                torch.cuda.synchronize()
            per = {k[:-3] + "_us": v / 1e3 / n for k, v in sums.items() if k.endswith("_ns")}
            inside = per["checks_us"] + per["setup_us"] + per["launch_us"]
            rows.append(dict(op=op, calls=n, kernel_calls=sums["calls"], wall_us=wall, **per,
                             outside_kernel_us=wall - inside))
            print(f"profile {op:<22} wall {wall:7.2f} checks {per['checks_us']:5.2f} setup "
                  f"{per['setup_us']:5.2f} launch {per['launch_us']:6.2f} (plan "
                  f"{per['plan_us']:5.2f}) outside {wall - inside:6.2f} us", flush=True)


MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode,
         "grad": lambda: torch.enable_grad()}


def interleaved_rounds(entries, rounds, device):
    """entries: (key, fn, calls, hold). Each round times `calls` back-to-back calls of every
    entry in turn (the order rotated from round to round), so that a slow stretch of a shared
    host falls on all of them alike; `hold`: a spin kernel holds the GPU while the entry's round
    is queued. Returns key -> (median, least) of the rounds' wall time per call (µs)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _, fn, _, _ in entries:
        for _ in range(20):
            fn()
    sync()
    times = {key: [] for key, _, _, _ in entries}
    for r in range(rounds):
        shift = r % len(entries)
        for key, fn, calls, hold in entries[shift:] + entries[:shift]:
            if hold:
                torch.cuda._sleep(SPIN_CYCLES)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[key].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    return {key: (statistics.median(v), min(v)) for key, v in times.items()}


def host_costs(device, hidden, calls, rounds, modes, rows):
    """The host rows (appended to `rows`), per mode, variant, op and GPU hold."""
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0
    holds = (False, True) if device == "cuda" else (False,)
    for mode in modes:
        with MODES[mode]():
            s = Site(device, 1, hidden, seed=7)  # made in the mode (inference tensors there)
            a, b = s.residual.float(), s.residual.float()
            variants = {"stable": op_calls(torch.ops.mhc, s),
                        # the no-grad twin called directly: the stable op without its C++
                        # autograd router (what the router costs under no_grad)
                        "stable_twin": twin_calls(s),
                        # the OpOverloads (torch.ops.mhc.X.default), as the mhc.* functions call
                        "stable_overload": op_calls(mhc._api._Overloads(torch.ops.mhc), s),
                        # the bound forms (inference only: not under grad)
                        "stable_site": {} if mode == "grad" else site_calls(s),
                        "dlpack": op_calls(torch.ops.mhc_dlpack, s),
                        "bare_C": bare_calls(s, stream)}
            variants["torch_add"] = {"add_out": lambda: torch.add(a, b, out=a),
                                     "add": lambda: torch.add(a, b)}
            # ~150 µs a call at most: a held round of `calls` fits the spin's 0.1 s.
            entries = [((variant, op, hold), fn, min(calls, 500) if hold else calls, hold)
                       for variant, table in variants.items() for op, fn in table.items()
                       for hold in holds]
            timed = interleaved_rounds(entries, rounds, device)
            for (variant, op, hold), _, n, _ in entries:
                us, least = timed[(variant, op, hold)]
                rows.append(dict(op=op, variant=variant, mode=mode, gpu_held=hold,
                                 calls_per_round=n, rounds=rounds, us_per_call=us,
                                 min_round_us_per_call=least))
                print(f"host {mode:<14} {variant:<9} {op:<17} held={hold!s:<5} "
                      f"{us:8.2f} us", flush=True)


def enqueue(op, s):
    ops = torch.ops.mhc
    o = s.out
    if op == "coefficients":
        ops.coefficients_out(*s.coef(), post=o[1], comb=o[2], next_pre_mix=o[3])
    elif op == "pre":
        ops.pre_out(*s.pre(), layer_input=o[0], post=o[1], comb=o[2], next_pre_mix=o[3])
    elif op == "post":
        ops.post_out(*s.post_args(), out=s.next)
    elif op == "post_pre":
        ops.post_pre_out(*s.post_args(), s.pre_mix, s.norm_weight, 1e-6, residual_next=s.next,
                         next_layer_input=o[0])
    else:
        raise ValueError(op)


def time_graphs(op, tokens, reps, l2_bytes, hidden, n=4):
    """The GPU time of one op call per CUDA graph replay (µs): the graphs timed by the C++
    loop of `mhc bench kernels` (mhc._C._time_graph_replays: warm-up, then a CUDA event between
    consecutive replays, median), and, for comparison, by the former Python loop (replays queued
    from Python behind a spin kernel). One graph per input set, sets rotated past L2, one set of
    weights, as the C++ benchmark has."""
    set_bytes = tokens * (4 * n * hidden + 4 * hidden)
    sets = max(1, min(48, math.ceil(3 * l2_bytes / set_bytes)))
    sites = [Site("cuda", tokens, hidden, seed=i + 1) for i in range(sets)]
    weights = sites[0]
    for s in sites:  # one set of weights, as the C++ benchmark has
        s.fn, s.hc_scale, s.hc_base, s.norm_weight = (weights.fn, weights.hc_scale,
                                                      weights.hc_base, weights.norm_weight)
    stream = torch.cuda.Stream()
    mhc.DEFAULT_POOL.reserve("cuda", hidden, n, tokens)
    graphs = []
    with torch.cuda.stream(stream):
        enqueue(op, sites[0])  # eager warm-up
        torch.cuda.synchronize()
        for s in sites:
            g = torch.cuda.CUDAGraph(keep_graph=True)  # its nodes are listed below
            with torch.cuda.graph(g, stream=stream):
                enqueue(op, s)
            g.instantiate()
            graphs.append(g)
        nodes = _C._graph_nodes(graphs[0].raw_cuda_graph())
        torch.cuda.synchronize()
        med, least, _ = _C._time_graph_replays([g.raw_cuda_graph_exec() for g in graphs], reps,
                                               stream.cuda_stream)
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
    return dict(median=med, least=least, held_median=statistics.median(us), sets=sets,
                nodes=nodes)


def graph_costs(tokens_list, reps, hidden, cpp_json, rows):
    """The graph rows (appended to `rows`), per op and token count."""
    cpp = {}
    if cpp_json:
        for r in json.load(open(cpp_json))["results"]:
            cpp[(r["kernel"], r["tokens"])] = r["median_us"]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    with torch.no_grad():
        for op in ("coefficients", "pre", "post", "post_pre"):
            for tokens in tokens_list:
                t = time_graphs(op, tokens, reps, l2, hidden)
                ref = cpp.get((CPP_ITEM[op], tokens))
                med = t["median"]
                held = t["held_median"]
                rows.append(dict(op=op, tokens=tokens, python_graph_median_us=med,
                                 python_graph_min_us=t["least"], python_loop_held_median_us=held,
                                 input_sets=t["sets"], graph_nodes=t["nodes"],
                                 cpp_item=CPP_ITEM[op], cpp_median_us=ref,
                                 ratio=(med / ref if ref else None),
                                 ratio_python_loop_held=(held / ref if ref else None)))
                print(f"graph {op:<13} {tokens:>5} python {med:8.2f} us (Python loop, held: "
                      f"{held:8.2f})  C++ {ref if ref else float('nan'):8.2f} us  ratio "
                      f"{(med / ref) if ref else float('nan'):.3f}  nodes {len(t['nodes'])}",
                      flush=True)


def run_part(name, fn, errors):
    """Runs a part of the benchmark; its exception is kept in `errors` (name -> "Type: message")
    and printed, so that the parts before and after it still reach the JSON."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (any failure: the report keeps it)
        errors[name] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
        print(f"{name}: FAILED ({errors[name]}); its rows so far are kept", file=sys.stderr,
              flush=True)


def machine(device, driver):
    if device == "cuda":
        return dict(gpu=torch.cuda.get_device_name(0), driver=driver,
                    cuda_runtime=torch.version.cuda)
    model = ""
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return dict(gpu=None, cpu=model or platform.processor(), cpu_count=os.cpu_count(),
                driver=driver or None)


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def summary(rows):
    """op -> {variant: µs} in no_grad, the host's own time (GPU held where there is one)."""
    held = any(r["gpu_held"] for r in rows)
    table = {}
    for r in rows:
        if r["mode"] == "no_grad" and r["gpu_held"] == held:
            table.setdefault(r["op"], {})[r["variant"]] = r["us_per_call"]
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tokens", default="1,16,128,1024", help="graph timing token counts")
    ap.add_argument("--hidden", type=int, default=None, help="C (default 5120 CUDA, 64 CPU)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--cpp-json", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--driver", default="")
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-phase host profile")
    ap.add_argument("--modes", default=",".join(MODES), help="no_grad,inference_mode,grad")
    a = ap.parse_args()
    hidden = a.hidden or (5120 if a.device == "cuda" else 64)
    host, profile, graphs, errors = [], [], [], {}
    run_part("host", lambda: host_costs(a.device, hidden, a.calls, a.rounds, a.modes.split(","),
                                        host), errors)
    if not a.no_profile:
        run_part("host_profile", lambda: host_profile(a.device, hidden, a.calls, profile), errors)
    if a.device == "cuda" and not a.no_graphs:
        run_part("graph", lambda: graph_costs([int(t) for t in a.tokens.split(",")], a.reps,
                                              hidden, a.cpp_json, graphs), errors)
    report = dict(
        tool="bench/python_ops.py", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        commit=a.commit or git_commit(), device=a.device, **machine(a.device, a.driver),
        torch=torch.__version__, python=platform.python_version(), mhc=mhc.__version__,
        shape=dict(hidden=hidden, n=4, tokens=1),
        method=("host: the median (and the least) of `rounds` rounds of `calls_per_round` "
                "back-to-back eager calls at 1 token, wall time per call, every variant and op "
                "of a mode timed in each round in turn; gpu_held: a spin kernel holds the GPU "
                "while the round is queued (the host's time alone). stable: torch.ops.mhc.*; "
                "stable_overload: torch.ops.mhc.X.default; stable_twin: the no-grad twin's "
                "overload torch.ops.mhc._nograd_X.default (what mhc.* calls under no_grad); "
                "stable_site: the bound form torch.ops.mhc.site_X.default (a site bound once); "
                "dlpack: the Python ops over mhc._C before (bench/dlpack_ops.py); bare_C: the "
                "mhc._C call alone; torch_add: torch.add on a [1, 4, C] float tensor. graph: "
                "one CUDA graph per input set, sets rotated past L2 as `mhc bench kernels`, "
                "timed by the same C++ loop (warm-up, a CUDA event between consecutive replays, "
                f"median of {a.reps}); python_loop_held: the former Python loop behind a spin "
                "kernel. host_profile: the C++ kernel's phases (torch.ops.mhc._host_profile)."),
        load_average=(os.getloadavg() if hasattr(os, "getloadavg") else None),
        host=host, host_summary_no_grad=summary(host), host_profile=profile, graph=graphs)
    if errors:
        report["errors"] = errors  # part -> its error; that part's rows stop where it failed
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"\n{'op (no_grad)':<18}{'stable':>10}{'.default':>10}{'twin':>10}{'site':>10}"
          f"{'dlpack':>10}{'bare _C':>10}{'torch':>10}  µs per call")
    for op, v in report["host_summary_no_grad"].items():
        cells = "".join(f"{v[k]:10.2f}" if k in v else f"{'':>10}"
                        for k in ("stable", "stable_overload", "stable_twin", "stable_site",
                                  "dlpack", "bare_C", "torch_add"))
        print(f"{op:<18}{cells}")
    for r in graphs:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else "n/a"
        held = f"{r['ratio_python_loop_held']:.3f}" if r["ratio_python_loop_held"] else "n/a"
        print(f"graph {r['op']:<13}{r['tokens']:>6} {r['python_graph_median_us']:8.2f} us  "
              f"ratio to C++ {ratio} (Python loop held: {held})  nodes {len(r['graph_nodes'])}")
    if errors:
        for name, err in errors.items():
            print(f"FAILED {name}: {err}", file=sys.stderr)
        print(f"wrote {a.out} with the parts measured; failed: {', '.join(errors)}",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
