"""The bound ops' fakes (mhc/_fakes.py): torch.compile(fullgraph=True) with a site's handle as a
constant int, bitwise eager; the fakes' errors are the C++ kernels'; opcheck's schema and fake
tensor tests."""

import pytest
import torch
from conftest import DEVICES, Site
from test_site import bind, outputs
from torch._subclasses.fake_tensor import FakeTensorMode

OPS = torch.ops.mhc


def _stack(site, nxt, s, out, boundary_out):
    """A V4.1 site then a boundary into the next: the bound ops as an engine calls them."""
    OPS.site_pre_out.default(site.handle, s.residual, s.pre_mix, *out)
    sublayer = out[0] * 0.5  # a stand-in sublayer between the two
    OPS.site_boundary_out.default(nxt.handle, sublayer, s.residual, out[1], out[2], out[3],
                                  *boundary_out)
    OPS.site_coefficients_out.default(nxt.handle, boundary_out[0], *out[1:])
    return (*out, *boundary_out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_bound_ops_equal_eager(mhc, device, backend):
    torch._dynamo.reset()
    s = Site(tokens=5, device=device, seed=21)
    nxt_weights = Site(tokens=5, device=device, seed=22)
    with bind(mhc, s) as site, bind(mhc, nxt_weights) as nxt, torch.no_grad():
        eager = _stack(site, nxt, s, outputs(s), outputs(s, boundary=True))
        compiled_out, compiled_b = outputs(s), outputs(s, boundary=True)
        fn = torch.compile(lambda: _stack(site, nxt, s, compiled_out, compiled_b),
                           fullgraph=True, backend=backend)
        compiled = fn()
    for e, c in zip(eager, compiled):
        if backend == "aot_eager":
            assert torch.equal(e, c)
        else:  # inductor may compute the stand-in sublayer differently
            torch.testing.assert_close(c.float(), e.float(), rtol=2e-2, atol=2e-2)
    # The compiled call wrote the caller's buffers (the outputs are mutated in place).
    assert torch.equal(compiled_b[0], compiled[4]) and not compiled_b[0].isnan().any()


def test_compiled_call_of_a_released_site_raises(mhc):
    torch._dynamo.reset()
    s = Site(tokens=3, seed=23)
    site = bind(mhc, s)
    site.close()
    out = outputs(s)
    fn = torch.compile(lambda: OPS.site_pre_out.default(site.handle, s.residual, s.pre_mix, *out),
                       fullgraph=True, backend="aot_eager")
    with torch.no_grad(), pytest.raises(Exception, match=f"site {site.handle} was released"):
        fn()


def test_bind_inside_compile_is_refused(mhc):
    torch._dynamo.reset()
    s = Site(tokens=3, seed=24)
    fn = torch.compile(lambda: OPS.bind_site.default(s.fn, s.hc_scale, s.hc_base, None, 1e-6,
                                                     1e-6, 1e-6, 2.0, 20, 1e-6),
                       fullgraph=True, backend="aot_eager")
    with torch.no_grad(), pytest.raises(Exception, match="bind sites before tracing"):
        fn()


def _fake_call(op, args):
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    with mode:
        return op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])


def _bad_calls(s, other, h):
    out, b = outputs(s), outputs(s, boundary=True)
    short = (out[0], out[1][:, :2].contiguous(), *out[2:])
    return [
        (OPS.site_pre_out.default, (h, other.residual, other.pre_mix, *outputs(other))),
        (OPS.site_pre_out.default, (h, s.residual, s.pre_mix[:1].contiguous(), *out)),
        (OPS.site_pre_overlap_out.default, (h, s.residual, s.pre_mix, 0, *short)),
        (OPS.site_coefficients_out.default, (h, s.residual.float(), *out[1:])),
        (OPS.site_boundary_out.default, (h, *s.post_args(), s.pre_mix, b[0][:1], *b[1:])),
        (OPS.site_boundary_out.default, (h, *other.post_args(), other.pre_mix,
                                         *outputs(other, boundary=True))),
        (OPS.site_pre_out.default, (h + 10**6, s.residual, s.pre_mix, *out)),
    ]


@pytest.mark.parametrize("index", range(7))
def test_fake_errors_are_the_kernels(mhc, index):
    s, other = Site(tokens=4, seed=25), Site(tokens=4, hidden=128, seed=25)
    with bind(mhc, s) as site, torch.no_grad():
        op, args = _bad_calls(s, other, site.handle)[index]
        with pytest.raises(RuntimeError) as real:
            op(*args)
        with pytest.raises(RuntimeError) as fake:
            _fake_call(op, args)
    assert str(fake.value) == str(real.value)


def test_fake_refuses_grad_mode(mhc):
    s = Site(tokens=2, seed=26)
    with bind(mhc, s) as site, torch.enable_grad():
        with pytest.raises(RuntimeError, match="inference-only"):
            _fake_call(OPS.site_pre_out.default, (site.handle, s.residual, s.pre_mix,
                                                  *outputs(s)))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(mhc, device):
    s = Site(tokens=5, device=device, seed=27)
    with bind(mhc, s) as site, torch.no_grad():
        h, out, b = site.handle, outputs(s), outputs(s, boundary=True)
        for op, args in [(OPS.site_pre_out, (h, s.residual, s.pre_mix, *out)),
                         (OPS.site_pre_out, (h, s.residual, None, *out)),
                         (OPS.site_coefficients_out, (h, s.residual, *out[1:])),
                         (OPS.site_pre_overlap_out, (h, s.residual, s.pre_mix, 0, *out)),
                         (OPS.site_boundary_out, (h, *s.post_args(), s.pre_mix, *b))]:
            torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
