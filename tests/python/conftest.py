"""pytest setup for the Python package tests: they import the installed package
(`pip install .`, as scripts/test.sh does), never the source tree."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # reference.py, hf_model.py, model_fixtures.py

torch = pytest.importorskip("torch")

# MHC_REQUIRE_GPU=1 (the GPU machine): a test that would skip for lack of CUDA fails instead, with
# the reason, so that a torch without CUDA, an invisible device or a CPU-only mhc._C cannot pass
# the GPU run as a row of skips.
REQUIRE_GPU = os.environ.get("MHC_REQUIRE_GPU") == "1"


def torch_cuda_missing():
    """Why torch cannot run CUDA tensors here, or None."""
    if torch.version.cuda is None:
        return "torch is built without CUDA"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def c_cuda_missing():
    """Why mhc._C cannot run its CUDA kernels here (or torch CUDA tensors), or None."""
    from mhc import _C

    if not _C.built_with_cuda():
        return "mhc._C is built without CUDA (MHC_PYTHON_CUDA=1 scripts/python-env.sh)"
    if not _C.has_cuda():
        return "mhc._C sees no CUDA device"
    return torch_cuda_missing()


def stream_kernels_missing(n):
    """Why this build of mhc holds no CUDA kernels for `n` streams, or None: a build choice (n = 2
    only with -DMHC_KERNELS_N2=ON, no DeepSeek preset has n = 2), so a plain skip that
    MHC_REQUIRE_GPU=1 leaves alone. A build without CUDA at all is c_cuda_missing's."""
    from mhc import _C

    built = _C.limits()["cuda_kernel_streams"]
    if not _C.built_with_cuda() or n in built:
        return None
    option = "; configure with -DMHC_KERNELS_N2=ON" if n == 2 else ""
    return f"mhc is built without the CUDA kernels for n = {n} (built: n in {built}){option}"


def gpu_mark(missing):
    """The mark of a test that needs CUDA: nothing when `missing` (a reason) is None, else a skip,
    or under MHC_REQUIRE_GPU=1 a failure with the reason (pytest_runtest_call below)."""
    if missing is None:
        return pytest.mark.mhc_gpu
    if REQUIRE_GPU:
        return pytest.mark.mhc_gpu(missing=missing)
    return pytest.mark.skip(reason=f"needs a CUDA GPU: {missing}")


def pytest_configure(config):
    config.addinivalue_line("markers", "mhc_gpu(missing=None): needs CUDA (MHC_REQUIRE_GPU)")
    config.addinivalue_line(
        "markers", "mhc_stream_kernels: launches the per-n CUDA kernels; its device=cuda cases "
        "of an n this build has no kernels for skip (stream_kernels_missing)")


def pytest_collection_modifyitems(config, items):
    """A test marked mhc_stream_kernels, parametrised by `device` and `n`, skips its "cuda" cases
    of an n the library's CUDA kernels were not built for (n = 2 without -DMHC_KERNELS_N2=ON),
    and runs them where they were."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        marked = item.get_closest_marker("mhc_stream_kernels") is not None
        if not marked or params.get("device") != "cuda":
            continue
        missing = stream_kernels_missing(params["n"])
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=missing))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    for mark in item.iter_markers("mhc_gpu"):
        if mark.kwargs.get("missing"):
            pytest.fail(f"MHC_REQUIRE_GPU=1 but {mark.kwargs['missing']}", pytrace=False)


CUDA = torch_cuda_missing() is None
needs_cuda = gpu_mark(torch_cuda_missing())
# "cuda" is always a parameter, marked: without a GPU it shows as a skip (a failure under
# MHC_REQUIRE_GPU=1) instead of vanishing from the run.
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


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
