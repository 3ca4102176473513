"""The overlap as an engine runs it from Python: a stack of stand-in sublayers (two bf16 GEMMs per
site through torch, the widths of `mhc bench overlap`: C for attention sites, 5C/4 for FFN sites,
each site its own weights) with the V4.1 boundary between them, each arm in one CUDA graph:

  sublayers      the sublayers alone (no mHC work)
  native         post_pre, then coefficients on the current stream
  overlap        post_pre, then coefficients on a side stream (torch.ops.mhc with side_stream:
                 the plan's side launch and, where safe, a programmatic fork), joined before the
                 next post
  overlap_plain  the same fork with the side launch as before: mhc._C.coefficients without
                 fork_from (one CTA per split, an ordinary edge)

mHC cost per site = (arm - sublayers) / sites: for the overlap arms, what the main stream pays.
Every arm's final residual is checked bitwise against native's. Writes JSON.

    python bench/python_overlap.py --out OUT.json [--tokens 1,4,16,32] [--layers 40]
"""

import argparse
import json
import time

import torch
from graph_timing import median_replay_us  # bench/, the script's own directory

import mhc
from mhc import _C

EPS = (1e-6, 1e-6, 1e-6, 2.0, 20)  # rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters
NORM_EPS = 1e-6
ARMS = ("sublayers", "native", "overlap", "overlap_plain")


class Stack:
    """Weights of `layers` layers (two sites each) and static buffers for up to max_tokens."""

    def __init__(self, layers, hidden, n, max_tokens):
        self.sites, self.hidden, self.n = 2 * layers, hidden, n
        g = torch.Generator(device="cuda").manual_seed(1)
        kw = dict(device="cuda", generator=g)
        nmix = n * (n + 2)
        self.fn = [torch.randn(nmix, n * hidden, **kw) * (n * hidden) ** -0.5
                   for _ in range(self.sites)]
        self.hc_scale = torch.tensor([1.0, 0.8, 1.5], device="cuda")
        self.hc_base = torch.randn(nmix, **kw) * 0.1
        self.norm_weight = torch.ones(hidden, device="cuda")
        self.weights = []
        for s in range(self.sites):
            width = hidden if s % 2 == 0 else (hidden * 5 // 4 + 63) // 64 * 64
            w_in = torch.empty(hidden, width, dtype=torch.bfloat16, device="cuda")
            w_out = torch.empty(width, hidden, dtype=torch.bfloat16, device="cuda")
            w_in.uniform_(-hidden ** -0.5, hidden ** -0.5, generator=g)
            w_out.uniform_(-width ** -0.5, width ** -0.5, generator=g)
            self.weights.append((w_in, w_out))
        t = max_tokens
        self.x0 = torch.randn(t, n, hidden, **kw).bfloat16()
        self.pre_mix0 = torch.rand(t, n, **kw) + 0.2
        self.residual = [torch.empty(t, n, hidden, dtype=torch.bfloat16, device="cuda")
                         for _ in range(2)]
        self.layer_input = torch.zeros(t, hidden, dtype=torch.bfloat16, device="cuda")
        self.hidden_buf = torch.empty(t, hidden * 2, dtype=torch.bfloat16, device="cuda")
        self.out = torch.empty(t, hidden, dtype=torch.bfloat16, device="cuda")
        self.post = torch.empty(t, n, device="cuda")
        self.comb = torch.empty(t, n, n, device="cuda")
        self.pre_mix = [torch.empty(t, n, device="cuda") for _ in range(2)]
        self.ws_main = mhc.make_workspace("cuda", hidden, n, t)
        self.ws_side = mhc.make_workspace("cuda", hidden, n, t)
        self.side = torch.cuda.Stream()

    def sublayer(self, site, tokens):
        w_in, w_out = self.weights[site]
        h = self.hidden_buf[:tokens, : w_in.shape[1]]
        torch.matmul(self.layer_input[:tokens], w_in, out=h)
        torch.matmul(h, w_out, out=self.out[:tokens])

    def coefficients(self, arm, site, x, next_pre_mix, tokens):
        ops, side = torch.ops.mhc, self.side.cuda_stream
        outs = dict(post=self.post[:tokens], comb=self.comb[:tokens], next_pre_mix=next_pre_mix)
        args = (x, self.fn[site], self.hc_scale, self.hc_base, *EPS)
        if arm == "native":
            ops.coefficients_out(*args, **outs, workspace=self.ws_main)
        elif arm == "overlap":
            ops.coefficients_out(*args, **outs, side_stream=side, workspace=self.ws_side)
        else:  # overlap_plain: the side stream waits for main, the launch as before this change
            self.side.wait_stream(torch.cuda.current_stream())
            _C.coefficients(x, self.fn[site], self.hc_scale, self.hc_base, next_pre_mix,
                            self.post[:tokens], self.comb[:tokens], self.ws_side, *EPS, "tf32",
                            side)

    def forward(self, arm, tokens):
        """The whole stack; returns the final residual buffer."""
        ops = torch.ops.mhc
        if arm == "sublayers":
            for site in range(self.sites):
                self.sublayer(site, tokens)
            return self.out[:tokens]
        x = self.x0[:tokens]
        carried = self.pre_mix0[:tokens]
        _C.input_path(x, carried, self.norm_weight, self.layer_input[:tokens], NORM_EPS,
                      torch.cuda.current_stream().cuda_stream, workspace=self.ws_main)
        self.coefficients(arm, 0, x, self.pre_mix[0][:tokens], tokens)
        for site in range(self.sites):
            self.sublayer(site, tokens)
            if arm != "native":
                ops.join(self.side.cuda_stream, self.post[:tokens], self.comb[:tokens],
                         self.pre_mix[site % 2][:tokens])
            nxt = self.residual[site % 2][:tokens]
            if site == self.sites - 1:
                ops.post_out(self.out[:tokens], x, self.post[:tokens], self.comb[:tokens],
                             out=nxt)
                return nxt
            mix = self.pre_mix[site % 2][:tokens]
            ops.post_pre_out(self.out[:tokens], x, self.post[:tokens], self.comb[:tokens], mix,
                             self.norm_weight, NORM_EPS, residual_next=nxt,
                             next_layer_input=self.layer_input[:tokens], workspace=self.ws_main)
            x = nxt
            self.coefficients(arm, site + 1, x, self.pre_mix[(site + 1) % 2][:tokens], tokens)
        return x


def time_arm(stack, arm, tokens, reps):
    stack.forward(arm, tokens)  # eager warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = stack.forward(arm, tokens)
    return median_replay_us(graph, reps, warmups=3), out.clone()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2,4,8,16,32")
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=5120)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--driver", default="")
    a = ap.parse_args()
    tokens_list = [int(t) for t in a.tokens.split(",")]
    stack = Stack(a.layers, a.hidden, 4, max(tokens_list))
    rows = []
    print(f"{'tokens':>6} {'round':>5} {'sublayers us/S':>14} {'native mHC us/S':>15} "
          f"{'overlap main us/S':>17} {'overlap_plain main us/S':>23} bitwise")
    for rnd in range(a.rounds):
        for tokens in tokens_list:
            times, outs = {}, {}
            for arm in ARMS:
                times[arm], outs[arm] = time_arm(stack, arm, tokens, a.reps)
            per_site = {arm: (times[arm] - times["sublayers"]) / stack.sites
                        for arm in ARMS[1:]}
            equal = all(torch.equal(outs["native"], outs[arm]) for arm in ARMS[2:])
            rows.append(dict(tokens=tokens, round=rnd + 1,
                             us_per_forward={arm: times[arm] for arm in ARMS},
                             sublayers_us_per_site=times["sublayers"] / stack.sites,
                             mhc_us_per_site=per_site, bitwise_equal=equal))
            print(f"{tokens:>6} {rnd + 1:>5} {times['sublayers'] / stack.sites:>14.2f} "
                  f"{per_site['native']:>15.2f} {per_site['overlap']:>17.2f} "
                  f"{per_site['overlap_plain']:>23.2f} {'yes' if equal else 'NO'}", flush=True)
    props = torch.cuda.get_device_properties(0)
    report = dict(tool="bench/python_overlap.py",
                  date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=a.commit,
                  gpu=props.name, compute_capability=f"{props.major}.{props.minor}",
                  driver=a.driver, torch=torch.__version__,
                  cuda_runtime=torch.version.cuda, mhc=mhc.__version__,
                  params=dict(hidden=a.hidden, n=4, layers=a.layers, sites=stack.sites),
                  method=("each arm one CUDA graph of the whole stack (torch.cuda.graph), 3 warm "
                          f"replays, a CUDA event between consecutive replays, median of {a.reps};"
                          " mHC us per site = (arm - sublayers) / sites"),
                  results=rows)
    json.dump(report, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
