"""torch.ops.mhc.head / head_out and mhc.head (docs/head.md): against a float64 reference of the
formula and against transformers' DeepseekV4HyperHead (+ the model's final RMSNorm); the _out
form, zero tokens, a bf16 norm weight, norm_eps's default; fakes, torch.compile, the same errors
in the real and fake paths, and no backward."""

import re

import pytest
import torch
from conftest import DEVICES, rel_err
from torch._subclasses.fake_tensor import FakeTensorMode

ACT_TOL = 8e-3  # bf16 outputs against float64 (design doc, "Numerics")


class Head:
    """Random head inputs: projections of order 1, each stream different."""

    def __init__(self, tokens=7, n=4, hidden=256, device="cpu", seed=0, norm_dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        k = n * hidden
        self.residual = torch.randn(tokens, n, hidden, generator=g).bfloat16().to(device)
        self.fn = (torch.randn(n, k, generator=g) * k**-0.5).to(device)
        self.hc_scale = torch.tensor([0.9]).to(device)
        self.hc_base = (torch.randn(n, generator=g) * 0.5).to(device)
        self.norm_weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(norm_dtype).to(device)
        self.rms_eps, self.hc_eps, self.norm_eps = 1e-6, 1e-3, 1e-5

    def args(self, norm=True):
        return (self.residual, self.fn, self.hc_scale, self.hc_base, self.rms_eps, self.hc_eps,
                self.norm_weight if norm else None, self.norm_eps if norm else None)


def reference(h, norm=True):
    """The formula in float64 (y stored as bf16 before the norm, as the model stores it)."""
    x = h.residual.double().cpu()
    v = x.flatten(1)
    r = torch.rsqrt(v.square().mean(-1, keepdim=True) + h.rms_eps)
    mixes = (v @ h.fn.double().cpu().T) * r
    w = torch.sigmoid(mixes * h.hc_scale.double().cpu() + h.hc_base.double().cpu()) + h.hc_eps
    y = (w.unsqueeze(-1) * x).sum(1)
    if not norm:
        return y
    y = y.bfloat16().double()
    scale = torch.rsqrt(y.square().mean(-1, keepdim=True) + h.norm_eps)
    return y * scale * h.norm_weight.double().cpu()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens", [1, 7, 33])
@pytest.mark.parametrize("norm", [False, True])
def test_matches_reference(mhc, device, tokens, norm):
    h = Head(tokens=tokens, device=device, seed=tokens)
    out = torch.ops.mhc.head(*h.args(norm))
    assert (out.shape, out.dtype, out.device) == ((tokens, 256), torch.bfloat16, h.residual.device)
    err, _ = rel_err(out, reference(h, norm))
    assert err <= ACT_TOL, err


@pytest.mark.parametrize("device", DEVICES)
def test_model_hidden_size(mhc, device):
    h = Head(tokens=5, hidden=5120, device=device, seed=3)
    assert rel_err(mhc.head(*h.args()), reference(h))[0] <= ACT_TOL


@pytest.mark.parametrize("device", DEVICES)
def test_out_form_zero_tokens_and_defaults(mhc, device):
    h = Head(device=device, seed=4)
    want = torch.ops.mhc.head(*h.args())
    out = torch.full_like(want, float("nan"))
    assert mhc.head(*h.args(), out=out) is out
    assert torch.equal(out, want)
    # norm_eps None is rms_eps.
    args = list(h.args())
    args[7] = None
    same = list(h.args())
    same[7] = h.rms_eps
    assert torch.equal(torch.ops.mhc.head(*args), torch.ops.mhc.head(*same))
    empty = Head(tokens=0, device=device)
    assert torch.ops.mhc.head(*empty.args()).shape == (0, 256)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_norm_weight_is_its_widening(mhc, device):
    h = Head(device=device, seed=5, norm_dtype=torch.bfloat16)
    widened = torch.ops.mhc.head(*h.args()[:6], h.norm_weight.float(), h.norm_eps)
    assert torch.equal(torch.ops.mhc.head(*h.args()), widened)


def _hf_head(h, hidden, n):
    hf = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
    from hf_model import small_config

    config = small_config(hidden=hidden)
    config.hc_mult, config.rms_norm_eps, config.hc_eps = n, h.rms_eps, h.hc_eps
    module = hf.DeepseekV4HyperHead(config)
    with torch.no_grad():
        module.hc_fn.copy_(h.fn.cpu())
        module.hc_base.copy_(h.hc_base.cpu())
        module.hc_scale.copy_(h.hc_scale.cpu())
    norm = hf.DeepseekV4RMSNorm(hidden, eps=h.norm_eps)
    with torch.no_grad():
        norm.weight.copy_(h.norm_weight.float().cpu())
    return module.to(h.residual.device), norm.to(h.residual.device)


@pytest.mark.parametrize("device", DEVICES)
def test_matches_transformers_hyper_head(mhc, device):
    """transformers' DeepseekV4HyperHead (and the final RMSNorm) on the same weights: equal to
    bf16 rounding (transformers rounds the normalised row before the weight, mhc once)."""
    h = Head(tokens=9, device=device, seed=6)
    hyper_head, norm = _hf_head(h, 256, 4)
    x = h.residual.unsqueeze(0)  # [batch, seq, n, C]
    with torch.no_grad():
        collapsed = hyper_head(x)[0]
        normed = norm(hyper_head(x))[0]
    ref_plain, ref_norm = reference(h, norm=False), reference(h)
    plain = torch.ops.mhc.head(*h.args(norm=False))
    # transformers' own distance to the float64 reference bounds what mhc may differ from it.
    assert rel_err(plain, collapsed)[0] <= max(2 * rel_err(collapsed, ref_plain)[0], 1e-3)
    assert rel_err(plain, ref_plain)[0] <= ACT_TOL
    fused = torch.ops.mhc.head(*h.args())
    assert rel_err(fused, normed)[0] <= max(2 * rel_err(normed, ref_norm)[0], 1e-3)


def _fake_call(op, args, kwargs=None):
    mode = FakeTensorMode()
    fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    fake_kwargs = {k: mode.from_tensor(v) for k, v in (kwargs or {}).items()}
    with mode:
        return op(*fake, **fake_kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_fake_and_compile(mhc, device):
    h = Head(device=device, seed=7)
    real = torch.ops.mhc.head(*h.args())
    fake = _fake_call(torch.ops.mhc.head, h.args())
    assert (fake.shape, fake.dtype, fake.stride()) == (real.shape, real.dtype, real.stride())
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: torch.ops.mhc.head(*a), fullgraph=True,
                             backend="aot_eager")
    with torch.no_grad():
        assert torch.equal(compiled(*h.args()), real)
    torch.library.opcheck(torch.ops.mhc.head.default, h.args())
    out = torch.empty_like(real)
    torch.library.opcheck(torch.ops.mhc.head_out.default, h.args(), {"out": out})


def _bad_cases(h):
    t, n, c = h.residual.shape
    cases = {
        "fn shape": ((h.residual, h.fn[:, :-8].contiguous(), *h.args()[2:]),
                     "fn has shape [4, 1016], expected [n, n*C] = [4, 1024]"),
        "hc_scale [3]": ((*h.args()[:2], torch.ones(3), *h.args()[3:]),
                         "hc_scale has shape [3], expected [1] = [1]"),
        "hc_base dtype": ((*h.args()[:3], h.hc_base.double(), *h.args()[4:]),
                          "hc_base has dtype float64, expected float32"),
        "norm_weight shape": ((*h.args()[:6], h.norm_weight[:-8].contiguous(), h.norm_eps),
                              "norm_weight has shape [248], expected [C] = [256]"),
        "rms_eps": ((*h.args()[:4], float("inf"), *h.args()[5:]),
                    "rms_eps must be a finite number >= 0, got inf"),
        "hc_eps range": ((*h.args()[:5], 1e31, *h.args()[6:]),
                         "hc_eps must be in [0, 1e+30], got 1e+31"),
        "norm_eps": ((*h.args()[:7], -1.0), "norm_eps must be a finite number >= 0, got -1.0"),
        "residual 2-D": ((h.residual.flatten(1), *h.args()[1:]), "residual has shape [7, 1024]"),
    }
    return cases


@pytest.mark.parametrize("case", sorted(_bad_cases(Head())))
def test_errors_alike_real_and_fake(mhc, case):
    args, message = _bad_cases(Head())[case]
    with pytest.raises(RuntimeError, match=re.escape(f"mhc.head: {message}")):
        torch.ops.mhc.head(*args)
    with pytest.raises(RuntimeError, match=re.escape(f"mhc.head: {message}")):
        _fake_call(torch.ops.mhc.head, args)


def test_out_errors_write_nothing(mhc):
    h = Head()
    out = torch.zeros(7, 128, dtype=torch.bfloat16)
    message = "out has shape [7, 128], expected [T, C] = [7, 256]"
    for call in (lambda: torch.ops.mhc.head_out(*h.args(), out=out),
                 lambda: _fake_call(torch.ops.mhc.head_out, h.args(), {"out": out})):
        with pytest.raises(RuntimeError, match=re.escape(message)):
            call()
    assert not out.any()
    overlapping = h.residual.view(-1)[: 7 * 256].view(7, 256)
    with pytest.raises(RuntimeError, match="out"):
        torch.ops.mhc.head_out(*h.args(), out=overlapping)


def test_inference_only(mhc):
    h = Head()
    fn = h.fn.clone().requires_grad_()
    out = torch.ops.mhc.head(h.residual, fn, *h.args()[2:])
    with pytest.raises(RuntimeError, match="inference-only"):
        out.float().sum().backward()
    with torch.no_grad():
        assert not torch.ops.mhc.head(h.residual, fn, *h.args()[2:]).requires_grad
