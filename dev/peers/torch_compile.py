"""torch.compile beside mhc: the boundary an engine would run in plain PyTorch (the post of one
site, then the coefficients and the collapse of the next: the math bench_peers times for the
peers), compiled with torch.compile in its default mode with static shapes, one compile per shape.

Phase 1 compiles every shape and checks each compiled output against a float64 evaluation of the
same formulas (design doc) on the same inputs, coefficients from the compiled x_next as in
bench_peers; a shape that fails is reported wrong and not timed. Phase 2 waits for --go FILE (so
that nothing else runs on the GPU while it times), then times each passing shape with the method
of bench_peers: a CUDA graph per input set, sets rotated past L2, rounds of warm-up and timed
replays with CUDA events between consecutive replays, the median of the rounds' medians.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

DEV = os.environ.get("PEERS_TORCH_DEVICE", "cuda")  # "cpu": a dry run of the checks, no timing
PRESETS = {4096: dict(eps_n=1e-20), 5120: dict(eps_n=1e-20), 7168: dict(eps_n=1e-20)}
EPS_H, POST_MULT, ITERS, N = 1e-6, 2.0, 20, 4
COEF_TOL, BF16_TOL = 2e-3, 8e-3


def boundary(x, f, post_in, comb_in, fn, base, scale, eps_n):
    """x [M, 4, C] bf16, f [M, C] bf16, post_in [M, 4], comb_in [M, 4, 4] (row = source stream),
    fn [24, 4C], base [24], scale [3]: x_next, then pre, post, comb and the collapse of x_next."""
    if x.dtype == torch.float64:  # the reference: a float64 batched product is exact enough
        xn = post_in.double()[:, :, None] * f.double()[:, None, :] + torch.einsum(
            "mjk,mjc->mkc", comb_in.double(), x)
    else:  # fp32 products and sums, as the kernels do (a matmul here would round x to TF32)
        mix = (comb_in[:, :, :, None] * x.float()[:, :, None, :]).sum(1)
        xn = (post_in[:, :, None] * f.float()[:, None, :] + mix).to(torch.bfloat16)
    return (xn,) + pre(xn, fn, base, scale, eps_n)


def pre(xn, fn, base, scale, eps_n):
    dt = torch.float64 if xn.dtype == torch.float64 else torch.float32
    v = xn.to(dt).flatten(1)
    r = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps_n)
    mixes = (v @ fn.to(dt).t()) * r
    s, b = scale.to(dt), base.to(dt)
    pre_c = torch.sigmoid(mixes[:, :N] * s[0] + b[:N]) + EPS_H
    post_c = POST_MULT * torch.sigmoid(mixes[:, N:2 * N] * s[1] + b[N:2 * N])
    lg = (mixes[:, 2 * N:] * s[2] + b[2 * N:]).view(-1, N, N)
    p = torch.softmax(lg, -1) + EPS_H
    p = p / (p.sum(1, keepdim=True) + EPS_H)
    for _ in range(ITERS - 1):
        p = p / (p.sum(2, keepdim=True) + EPS_H)
        p = p / (p.sum(1, keepdim=True) + EPS_H)
    li = (pre_c[:, :, None] * xn.to(dt)).sum(1)
    if dt == torch.float32:
        li = li.to(torch.bfloat16)
    return pre_c, post_c, p, li


def rel(out, ref):
    d = (out.double() - ref).norm() / ref.norm().clamp_min(1e-300)
    return float(d)


def make_inputs(C, M, sets, g):
    out = []
    for _ in range(sets):
        x = (torch.rand(M, N, C, device=DEV, generator=g) * 2 - 1).bfloat16()
        f = (torch.rand(M, C, device=DEV, generator=g) * 2 - 1).bfloat16()
        post_in = torch.rand(M, N, device=DEV, generator=g) * 2
        comb_in = torch.rand(M, N, N, device=DEV, generator=g) * 0.5
        out.append((x, f, post_in, comb_in))
    return out


def weights(C, g):
    K = N * C
    a = math.sqrt(3.0 / K)
    fn = (torch.rand(N * (N + 2), K, device=DEV, generator=g) * 2 - 1) * a
    base = (torch.rand(N * (N + 2), device=DEV, generator=g) * 2 - 1) * 0.5
    scale = torch.tensor([1.0, 1.0, 2.0], device=DEV)
    return fn, base, scale


def check(compiled, inputs, w, eps_n):
    x, f, post_in, comb_in = inputs
    got = compiled(x, f, post_in, comb_in, *w)
    if DEV == "cuda":
        torch.cuda.synchronize()
    xn_ref = boundary(x.double(), f, post_in, comb_in, *w, eps_n)[0]
    # The coefficients and the collapse from the compiled x_next, as bench_peers does.
    ref = pre(got[0].double(), *w, eps_n)
    errs = {"x_next": rel(got[0], xn_ref)}
    for name, o, r in zip(("pre", "post", "comb", "layer_input"), got[1:], ref):
        errs[name] = rel(o, r)
    tol = {"x_next": BF16_TOL, "layer_input": BF16_TOL}
    bad = [f"{k} rel {v:.2e} > {tol.get(k, COEF_TOL):.0e}" for k, v in errs.items()
           if not v <= tol.get(k, COEF_TOL)]
    return errs, ("ok" if not bad else "; ".join(bad))


def time_graphs(graphs, rounds, reps, warmup):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    meds, lo = [], float("inf")
    for _ in range(rounds):
        for i in range(max(warmup, len(graphs))):
            graphs[i % len(graphs)].replay()
        ev[0].record()
        for q in range(reps):
            graphs[q % len(graphs)].replay()
            ev[q + 1].record()
        torch.cuda.synchronize()
        us = sorted(ev[q].elapsed_time(ev[q + 1]) * 1e3 for q in range(reps))
        meds.append(us[len(us) // 2])
        lo = min(lo, us[0])
    return sorted(meds)[len(meds) // 2], lo, meds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2,4,8,16,64,128,1024,4096,8192")
    ap.add_argument("--hidden", default="4096,5120,7168")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--go", help="wait for this file before timing")
    ap.add_argument("--compiled", help="create this file when every shape is compiled")
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds; stop compiling then")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0 = time.time()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch._dynamo.config.cache_size_limit = 1024
    torch._dynamo.config.accumulated_cache_size_limit = 4096
    cuda = DEV == "cuda"
    l2 = torch.cuda.get_device_properties(0).L2_cache_size if cuda else 50 << 20
    g = torch.Generator(device=DEV).manual_seed(0)
    doc = dict(gpu=torch.cuda.get_device_name() if cuda else "cpu", torch=torch.__version__,
               mode="torch.compile(mode='default', dynamic=False), one compile per shape",
               rows=[])
    work = []
    for C in map(int, a.hidden.split(",")):
        w = weights(C, g)
        eps_n = PRESETS[C]["eps_n"]
        for M in map(int, a.tokens.split(",")):
            row = dict(C=C, M=M)
            doc["rows"].append(row)
            if time.time() - t0 > a.deadline:
                row["error"] = "not compiled: out of time"
                continue
            set_bytes = M * (4 * N * C + 4 * C)
            sets = max(1, min(48, -(-3 * l2 // set_bytes)))
            inputs = make_inputs(C, M, sets, g)
            fn = torch.compile(lambda *t, e=eps_n: boundary(*t, e), dynamic=False)
            try:
                tc = time.time()
                errs, verdict = check(fn, inputs[0], w, eps_n)
                row.update(compile_s=time.time() - tc, errors=errs, check=verdict, sets=sets)
            except Exception as e:  # a compile failure is a result, not a crash
                row["error"] = f"{type(e).__name__}: {e}"[:300]
                continue
            print(f"  torch.compile C={C} M={M}: {verdict} ({row['compile_s']:.1f} s)", flush=True)
            if verdict == "ok":
                work.append((row, fn, inputs, w))
    def save():
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)

    save()
    if a.compiled:
        open(a.compiled, "w").close()
    if a.go:
        while not os.path.exists(a.go):
            time.sleep(0.2)
    for row, fn, inputs, w in work if DEV == "cuda" else []:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        graphs = []
        with torch.cuda.stream(s):
            for t in inputs:
                fn(*t, *w)
            torch.cuda.synchronize()
            for t in inputs:
                gr = torch.cuda.CUDAGraph()
                with torch.cuda.graph(gr, stream=s):
                    fn(*t, *w)
                graphs.append(gr)
        torch.cuda.synchronize()
        med, lo, meds = time_graphs(graphs, a.rounds, a.reps, 6)
        row.update(median_us=med, min_us=lo, round_us=meds)
        del graphs
        save()
    save()
    print(f"torch.compile: {sum('median_us' in r for r in doc['rows'])} shapes timed, "
          f"{time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
