"""mhc._C.head (docs/head.md, docs/python.md): the same bits as torch.ops.mhc.head_out on the same
tensors (one launcher), on the CPU and, where there is one, on a GPU on a side stream; the
collapse alone and with the final norm (fp32 and bf16 weights); zero tokens; ValueError naming the
argument."""

import pytest
import torch
from conftest import DEVICES
from mhc import _C
from test_head import Head


def c_head(h, out, norm, stream=0):
    _C.head(h.residual, h.fn, h.hc_scale, h.hc_base, h.norm_weight if norm else None, out,
            h.rms_eps, h.hc_eps, h.norm_eps if norm else None, stream)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm", [False, True])
def test_same_bits_as_the_torch_op(mhc, device, norm_dtype, norm):
    h = Head(tokens=9, device=device, seed=5, norm_dtype=norm_dtype)
    want = torch.ops.mhc.head(*h.args(norm))
    out = torch.full_like(want, float("nan"))
    if device == "cuda":
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            c_head(h, out, norm, stream.cuda_stream)
        torch.cuda.current_stream().wait_stream(stream)
    else:
        c_head(h, out, norm)
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


def test_zero_tokens_is_a_no_op(mhc):
    h = Head(tokens=0)
    out = torch.empty(0, 256, dtype=torch.bfloat16)
    c_head(h, out, True)


def test_norm_eps_defaults_to_rms_eps(mhc):
    h = Head(tokens=3)
    want = torch.ops.mhc.head(h.residual, h.fn, h.hc_scale, h.hc_base, h.rms_eps, h.hc_eps,
                              h.norm_weight, None)
    out = torch.empty_like(want)
    _C.head(h.residual, h.fn, h.hc_scale, h.hc_base, h.norm_weight, out, h.rms_eps, h.hc_eps)
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("case", ["fn", "hc_scale", "hc_base", "norm_weight", "out"])
def test_errors_name_the_argument(mhc, case):
    h = Head(tokens=3)
    out = torch.empty(3, 256, dtype=torch.bfloat16)
    if case == "fn":
        h.fn = h.fn[:, :-1].contiguous()
    elif case == "hc_scale":
        h.hc_scale = torch.ones(3)
    elif case == "hc_base":
        h.hc_base = h.hc_base.double()
    elif case == "norm_weight":
        h.norm_weight = h.norm_weight[:-1].contiguous()
    else:
        out = torch.empty(3, 255, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=case):
        c_head(h, out, True)
