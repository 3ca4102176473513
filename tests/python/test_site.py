"""Bound sites (mhc.bind_site, torch.ops.mhc.site_*): bitwise the unbound ops, the registry's
handles and references, and the errors of a bad handle or a bad call."""

import gc

import pytest
import torch
from conftest import DEVICES, Site

OPS = torch.ops.mhc


def bind(mhc, s, norm_weight="default", **options):
    e = s.eps
    nw = s.norm_weight if norm_weight == "default" else norm_weight
    return mhc.bind_site(s.fn, s.hc_scale, s.hc_base, nw, e["rms_eps"], e["pre_eps"],
                         e["sinkhorn_eps"], s.post_mult, s.iters, e["norm_eps"], **options)


def outputs(s, boundary=False):
    t, n, c, dev = s.tokens, s.n, s.hidden, s.residual.device
    f32 = dict(dtype=torch.float32, device=dev)
    # NaN-filled: an output the op leaves unwritten cannot match by accident.
    made = (torch.full((t, c), float("nan"), dtype=torch.bfloat16, device=dev),
            torch.full((t, n), float("nan"), **f32), torch.full((t, n, n), float("nan"), **f32),
            torch.full((t, n), float("nan"), **f32))
    if boundary:
        made = (torch.full_like(s.residual, float("nan")), *made)
    return made


def unbound_and_bound(s, site, op, norm_weight="default"):
    """(the unbound op's outputs, the bound op's) on the same inputs, under no_grad."""
    a, b = outputs(s, op == "boundary"), outputs(s, op == "boundary")
    nw = s.norm_weight if norm_weight == "default" else norm_weight
    h = site.handle
    with torch.no_grad():
        if op in ("pre", "pre_v4"):
            pm = None if op == "pre_v4" else s.pre_mix
            OPS.pre_out(*s.pre_args(pre_mix=pm, norm_weight=nw), layer_input=a[0], post=a[1],
                        comb=a[2], next_pre_mix=a[3])
            OPS.site_pre_out(h, s.residual, pm, *b)
        elif op == "coefficients":
            a, b = a[1:], b[1:]
            OPS.coefficients_out(*s.coef_args(), post=a[0], comb=a[1], next_pre_mix=a[2])
            OPS.site_coefficients_out(h, s.residual, *b)
        elif op == "pre_overlap":
            OPS.pre_overlap_out(*s.pre_args(norm_weight=nw), 0, layer_input=a[0], post=a[1],
                                comb=a[2], next_pre_mix=a[3])
            OPS.site_pre_overlap_out(h, s.residual, s.pre_mix, 0, *b)
        else:
            OPS.boundary_out(*s.boundary_args(norm_weight=nw), residual_next=a[0],
                             layer_input=a[1], next_post=a[2], next_comb=a[3], next_pre_mix=a[4])
            OPS.site_boundary_out(h, *s.post_args(), s.pre_mix, *b)
    return a, b


def assert_bitwise(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert torch.equal(x.view(torch.uint8) if x.numel() else x,
                           y.view(torch.uint8) if y.numel() else y)
        assert not x.isnan().any()


ALL_OPS = ["pre", "pre_v4", "coefficients", "pre_overlap", "boundary"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens,hidden", [(0, 64), (1, 64), (7, 64), (130, 64), (1, 4096),
                                           (33, 4096)])
@pytest.mark.parametrize("op", ALL_OPS)
def test_bound_is_bitwise_unbound(mhc, device, tokens, hidden, op):
    s = Site(tokens=tokens, hidden=hidden, device=device, seed=tokens + hidden)
    with bind(mhc, s) as site:
        assert_bitwise(*unbound_and_bound(s, site, op))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm", ["none", "bf16"])
@pytest.mark.parametrize("op", ["pre", "pre_overlap", "boundary"])
def test_bound_norm_weight_forms(mhc, device, norm, op):
    s = Site(tokens=5, device=device, seed=3)
    nw = None if norm == "none" else s.norm_weight.bfloat16()
    with bind(mhc, s, norm_weight=nw) as site:
        assert_bitwise(*unbound_and_bound(s, site, op, norm_weight=nw))


def test_bound_options_reach_the_launch(mhc):
    """projection, batch_invariant and a bound workspace are the unbound call's."""
    s = Site(tokens=9, seed=4)
    ws = mhc.make_workspace("cpu", s.hidden, s.n, 16)
    with bind(mhc, s, projection="fp32", batch_invariant=True, workspace=ws) as site:
        out = outputs(s)
        with torch.no_grad():
            site.pre(s.residual, s.pre_mix, out=out)
            ref = mhc.pre(*s.pre_args(), projection="fp32", batch_invariant=True, workspace=ws)
        assert_bitwise(ref, out)


def test_site_methods_make_outputs(mhc):
    s = Site(tokens=4, seed=5)
    with bind(mhc, s) as site, torch.no_grad():
        assert_bitwise(mhc.pre(*s.pre_args()), site.pre(s.residual, s.pre_mix))
        assert_bitwise(mhc.coefficients(*s.coef_args()), site.coefficients(s.residual))
        assert_bitwise(mhc.pre_overlap(*s.pre_args(), stream=None),
                       site.pre_overlap(s.residual, s.pre_mix, None))
        assert_bitwise(mhc.boundary(*s.boundary_args()),
                       site.boundary(*s.post_args(), s.pre_mix))


def test_weights_are_references(mhc):
    """An in-place update of a bound weight (what load_state_dict does) is what the next call
    reads."""
    s = Site(tokens=6, seed=6)
    with bind(mhc, s) as site:
        before = unbound_and_bound(s, site, "boundary")[1]
        with torch.no_grad():
            s.fn.mul_(1.5)
            s.hc_base.add_(0.25)
            s.norm_weight.copy_(torch.linspace(0.5, 1.5, s.hidden))
        ref, now = unbound_and_bound(s, site, "boundary")
        assert_bitwise(ref, now)
        assert not torch.equal(before[1], now[1]) and not torch.equal(before[2], now[2])


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_parameters_under_no_grad(mhc, mode):
    s = Site(tokens=3, seed=7)
    params = [torch.nn.Parameter(t) for t in (s.fn, s.hc_scale, s.hc_base, s.norm_weight)]
    s.fn, s.hc_scale, s.hc_base, s.norm_weight = params
    with bind(mhc, s) as site, mode():
        out = site.pre(s.residual, s.pre_mix)
        ref = mhc.pre(*s.pre_args())
    assert_bitwise(ref, out)
    assert not any(o.requires_grad for o in out)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_grad_mode_is_refused(mhc, requires_grad):
    """With grad enabled a bound op refuses the call: its bound weights, here parameters that
    require grad, are invisible to autograd, so a backward would miss their gradients."""
    s = Site(tokens=3, seed=8)
    s.fn = torch.nn.Parameter(s.fn)
    s.residual.requires_grad_(requires_grad)
    with bind(mhc, s) as site, torch.enable_grad():
        out = outputs(s)
        with pytest.raises(RuntimeError, match=r"mhc.site_pre_out is inference-only: call it "
                           r"under torch.no_grad\(\)"):
            OPS.site_pre_out.default(site.handle, s.residual, s.pre_mix, *out)
        assert out[1].isnan().all()  # refused before any launch


def test_release_then_use_raises(mhc):
    s = Site(tokens=2, seed=9)
    count = int(OPS._site_count())
    site = bind(mhc, s)
    assert int(OPS._site_count()) == count + 1
    site.close()
    site.close()  # twice is harmless
    assert int(OPS._site_count()) == count
    with torch.no_grad():
        with pytest.raises(RuntimeError, match=f"site {site.handle} was released"):
            site.pre(s.residual, s.pre_mix)
        for handle in (0, -3, site.handle + 10**6):
            with pytest.raises(RuntimeError, match=f"site {handle} was never bound"):
                OPS.site_coefficients_out(handle, s.residual, *outputs(s)[1:])


def test_collection_releases(mhc):
    s = Site(tokens=2, seed=10)
    count = int(OPS._site_count())
    site = bind(mhc, s)
    handle = site.handle
    del site
    gc.collect()
    assert int(OPS._site_count()) == count
    with torch.no_grad(), pytest.raises(RuntimeError, match=f"site {handle} was released"):
        OPS.site_pre_out(handle, s.residual, s.pre_mix, *outputs(s))


def test_handles_are_never_reused(mhc):
    s = Site(tokens=2, seed=11)
    seen = []
    for _ in range(4):
        site = bind(mhc, s)
        seen.append(site.handle)
        site.close()
    assert seen == sorted(set(seen)) and seen[0] >= 1


SUFFIX = r" \(in mhc\.{}: fn, hc_scale, hc_base, norm_weight and workspace are site {}'s"


@pytest.mark.parametrize("device", DEVICES)
def test_call_errors_name_the_site(mhc, device):
    s = Site(tokens=4, device=device, seed=12)
    other = Site(tokens=4, hidden=128, device=device, seed=12)
    with bind(mhc, s) as site, torch.no_grad():
        h = site.handle
        with pytest.raises(RuntimeError, match=r"mhc.pre: fn has shape \[24, 1024\], expected "
                           r"\[n\(n\+2\), n\*C\] = \[24, 512\]" + SUFFIX.format("site_pre_out", h)):
            site.pre(other.residual, other.pre_mix)
        with pytest.raises(RuntimeError, match=r"mhc.boundary: residual has dtype float32"):
            site.boundary(s.sublayer_out, s.residual.float(), s.post, s.comb, s.pre_mix)
        bad = outputs(s)
        bad = (bad[0][:, :8].contiguous(), *bad[1:])
        with pytest.raises(RuntimeError, match=r"mhc.pre_overlap: layer_input has shape"):
            site.pre_overlap(s.residual, s.pre_mix, None, out=bad)
        with torch.no_grad():
            s.fn.data = s.fn.data.double()  # the bound tensor itself changed under the site
        with pytest.raises(RuntimeError, match=r"mhc.coefficients: fn has dtype float64"):
            site.coefficients(s.residual)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=DEVICES[1].marks)])
def test_site_on_another_device_is_refused(mhc, device):
    s, here = Site(tokens=3, device="cpu", seed=13), Site(tokens=3, device=device, seed=13)
    with bind(mhc, s) as site, torch.no_grad():
        with pytest.raises(RuntimeError, match=r"mhc.pre: fn is on cpu but residual is on cuda"):
            site.pre(here.residual, here.pre_mix)
    with pytest.raises(RuntimeError, match=r"mhc.bind_site: hc_scale is on cuda:0 but fn is on "
                       r"cpu; a site's tensors must be on one device"):
        mhc.bind_site(s.fn, here.hc_scale, s.hc_base, None, 1e-6, 1e-6, 1e-6, 2.0, 20, 1e-6)


def test_bind_errors(mhc):
    s = Site(tokens=3, seed=14)
    e = (1e-6, 1e-6, 1e-6, 2.0, 20, 1e-6)
    cases = [
        ((s.fn[:, :-1], s.hc_scale, s.hc_base, None, *e), {},
         r"mhc.bind_site: fn has shape \[24, 1023\], expected \[n\(n\+2\), n\*C\]"),
        ((s.fn[:23], s.hc_scale, s.hc_base, None, *e), {}, r"fn has shape \[23, 1024\]"),
        ((s.fn, s.hc_scale[:2], s.hc_base, None, *e), {},
         r"mhc.bind_site: hc_scale has shape \[2\], expected \[3\]"),
        ((s.fn, s.hc_scale, s.hc_base.double(), None, *e), {},
         r"mhc.bind_site: hc_base has dtype float64"),
        ((s.fn, s.hc_scale, s.hc_base, s.norm_weight[:8], *e), {},
         r"mhc.bind_site: norm_weight has shape \[8\], expected \[C\] = \[256\]"),
        ((s.fn, s.hc_scale, s.hc_base, None, -1.0, *e[1:]), {}, r"rms_eps must be a finite"),
        ((s.fn, s.hc_scale, s.hc_base, None, *e[:4], 0, 1e-6), {}, r"sinkhorn_iters must be"),
        ((s.fn, s.hc_scale, s.hc_base, None, *e), {"projection": "bf16"},
         r"projection must be 'tf32' or 'fp32', got 'bf16'"),
        ((s.fn, s.hc_scale, s.hc_base, None, *e), {"workspace": torch.zeros(8)},
         r"mhc.bind_site: workspace must be a contiguous 1-D uint8 tensor"),
    ]
    count = int(OPS._site_count())
    for args, kwargs, message in cases:
        with pytest.raises(RuntimeError, match=message):
            mhc.bind_site(*args, **kwargs)
    assert int(OPS._site_count()) == count  # nothing bound by a refused call


def test_bound_ops_have_no_autograd_kernel(mhc):
    """No router under no_grad: the bound ops have kernels on the backend keys alone (torch's
    fallback passes a no_grad call straight down), and no twins."""
    for name in ("site_pre_out", "site_coefficients_out", "site_pre_overlap_out",
                 "site_boundary_out"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"mhc::{name}", "CPU")
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"mhc::{name}", "Autograd")
        assert not hasattr(OPS, f"_nograd_{name}")
