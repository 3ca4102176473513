"""mhc is inference-only: a backward through any op raises a clear error instead of silently
giving no gradient, and under torch.no_grad() nothing records a graph."""

import pytest
import torch
from conftest import Site

MESSAGE = "is inference-only: it has no backward"


def _site():
    s = Site(tokens=3, n=4, hidden=128)
    s.fn.requires_grad_()
    return s


def test_backward_through_pre_raises(mhc):
    s = _site()
    outputs = mhc.pre(*s.pre_args())
    assert outputs[1].requires_grad
    with pytest.raises(RuntimeError, match="mhc.pre " + MESSAGE):
        outputs[1].sum().backward()
    assert s.fn.grad is None


def test_backward_through_post_raises(mhc):
    s = Site(tokens=3, n=4, hidden=128)
    residual = s.residual.clone().requires_grad_()
    out = mhc.post(s.sublayer_out, residual, s.post, s.comb)
    with pytest.raises(RuntimeError, match="mhc.post " + MESSAGE):
        out.float().sum().backward()


def test_backward_through_an_out_buffer_raises(mhc):
    s = _site()
    out = tuple(torch.empty_like(t) for t in mhc.pre(*s.pre_args()))
    mhc.pre(*s.pre_args(), out=out)
    assert out[2].requires_grad
    with pytest.raises(RuntimeError, match="mhc.pre_out " + MESSAGE):
        out[2].sum().backward()


def test_no_grad_records_nothing(mhc):
    s = _site()
    with torch.no_grad():
        outputs = mhc.pre(*s.pre_args())
    assert not any(o.requires_grad for o in outputs)
    plain = Site(tokens=3, n=4, hidden=128)
    assert not any(o.requires_grad for o in mhc.boundary(*plain.boundary_args()))


def test_compile_with_grad_raises_the_same_error(mhc):
    """AOTAutograd traces the backward at compile time: the error comes then."""
    torch._dynamo.reset()
    s = _site()
    fn = torch.compile(lambda: torch.ops.mhc.pre(*s.pre_args()), fullgraph=True,
                       backend="aot_eager")
    with pytest.raises(Exception, match=MESSAGE):
        fn()[1].sum().backward()
