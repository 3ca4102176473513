"""pytest setup for the Python package tests: they import the installed package
(`pip install .`, as scripts/test.sh does), never the source tree."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # reference.py, hf_model.py, model_fixtures.py

torch = pytest.importorskip("torch")

CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def rel_err(out, ref):
    """Norm-wise relative error and max element error against a float64 reference."""
    diff = out.double().cpu() - ref.double().cpu()
    if not torch.isfinite(out.double()).all():
        return float("inf"), float("inf")
    return (diff.norm() / ref.double().cpu().norm().clamp_min(1e-300)).item(), diff.abs().max().item()


class Site:
    """Random inputs of one site (design doc shapes), deterministic per seed."""

    def __init__(self, tokens=7, n=4, hidden=256, device="cpu", seed=0, norm_dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        nmix, k = n * (n + 2), n * hidden
        self.tokens, self.n, self.hidden = tokens, n, hidden
        self.residual = torch.randn(tokens, n, hidden, generator=g).bfloat16().to(device)
        self.fn = (torch.randn(nmix, k, generator=g) * k**-0.5).to(device)
        self.hc_scale = torch.tensor([1.0, 0.8, 1.5]).to(device)
        self.hc_base = (torch.randn(nmix, generator=g) * 0.1).to(device)
        self.norm_weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(norm_dtype).to(device)
        self.pre_mix = (0.2 + torch.rand(tokens, n, generator=g)).to(device)
        self.sublayer_out = torch.randn(tokens, hidden, generator=g).bfloat16().to(device)
        self.post = (2 * torch.rand(tokens, n, generator=g)).to(device)
        comb = torch.rand(tokens, n, n, generator=g)
        self.comb = (comb / comb.sum(-1, keepdim=True)).to(device)
        # Four different epsilons, so that swapping two of them shows.
        self.eps = dict(rms_eps=1e-6, pre_eps=1e-4, sinkhorn_eps=1e-3, norm_eps=1e-5)
        self.post_mult, self.iters = 2.0, 20

    def pre_args(self, pre_mix="carried", norm_weight="default"):
        e = self.eps
        pm = self.pre_mix if pre_mix == "carried" else pre_mix
        nw = self.norm_weight if norm_weight == "default" else norm_weight
        return (self.residual, self.fn, self.hc_scale, self.hc_base, nw, pm, e["rms_eps"],
                e["pre_eps"], e["sinkhorn_eps"], self.post_mult, self.iters, e["norm_eps"])

    def coef_args(self):
        e = self.eps
        return (self.residual, self.fn, self.hc_scale, self.hc_base, e["rms_eps"], e["pre_eps"],
                e["sinkhorn_eps"], self.post_mult, self.iters)

    def post_args(self):
        return (self.sublayer_out, self.residual, self.post, self.comb)

    def boundary_args(self, norm_weight="default"):
        """mhc.boundary's: this site's post inputs, the carried pre_mix and the next site's
        weights (this Site's own weights stand in for the next site's)."""
        e = self.eps
        nw = self.norm_weight if norm_weight == "default" else norm_weight
        return (*self.post_args(), self.pre_mix, nw, self.fn, self.hc_scale, self.hc_base,
                e["rms_eps"], e["pre_eps"], e["sinkhorn_eps"], self.post_mult, self.iters,
                e["norm_eps"])


@pytest.fixture
def mhc():
    import mhc as module

    return module
