"""Outputs that overlap inputs or each other: a RuntimeError naming both, raised before anything
is written (pre_out and pre_overlap_out launch twice, so the C++ checks of the second launch would
come after the first had written)."""

import re

import pytest
import torch
from conftest import Site

S = Site(tokens=4, n=4, hidden=128)
T, N, C = S.tokens, S.n, S.hidden


def _fresh_outputs():
    return dict(layer_input=torch.zeros(T, C, dtype=torch.bfloat16), post=torch.zeros(T, N),
                comb=torch.zeros(T, N, N), next_pre_mix=torch.zeros(T, N))


def _inputs(form):
    names = ("residual", "fn", "hc_scale", "hc_base", "norm_weight", "pre_mix")
    args = dict(zip(names, (x.clone() for x in S.pre_args()[:6])))
    if form == "v4":
        args["pre_mix"] = None
    return args


def _carve(holder, dtype, shape):
    """A tensor of `shape` and `dtype` over the first bytes of `holder`."""
    count = 1
    for extent in shape:
        count *= extent
    return holder.view(-1).view(torch.uint8)[:count * dtype.itemsize].view(dtype).view(shape)


# (form, output, what it overlaps, the message)
CASES = [
    ("v41", "layer_input", "fn", "layer_input must not overlap fn"),
    ("v41", "layer_input", "hc_base", "layer_input must not overlap hc_base"),
    ("v41", "post", "layer_input", "post must not overlap layer_input"),
    ("v4", "comb", "layer_input", "comb must not overlap layer_input"),
    ("v4", "next_pre_mix", "norm_weight", "next_pre_mix must not overlap norm_weight"),
    ("v4", "post", "norm_weight", "post must not overlap norm_weight"),
]


def _setup(form, out_name, other_name):
    args, outs = _inputs(form), _fresh_outputs()
    holder = outs if other_name in outs else args
    if out_name == "layer_input" and other_name == "hc_base":
        # hc_base [24] f32 is smaller than layer_input: carve hc_base out of layer_input instead.
        args["hc_base"] = _carve(outs["layer_input"], torch.float32, (24,))
        args["hc_base"].copy_(S.hc_base)
    else:
        big = holder[other_name]
        outs[out_name] = _carve(big, outs[out_name].dtype, tuple(outs[out_name].shape))
    return args, outs


def _bits(t):
    return t.reshape(-1).view(torch.uint8)  # bitwise: a bf16 view of f32 data may hold NaNs


def _call(op, args, outs, overlap):
    e = S.eps
    scalars = (e["rms_eps"], e["pre_eps"], e["sinkhorn_eps"], S.post_mult, S.iters, e["norm_eps"])
    extra = (12345,) if overlap else ()
    op(*args.values(), *scalars, *extra, **outs)


@pytest.mark.parametrize("overlap", [False, True], ids=["pre_out", "pre_overlap_out"])
@pytest.mark.parametrize("form,out_name,other_name,message", CASES)
def test_pre_out_refuses_overlaps_before_writing(mhc, overlap, form, out_name, other_name,
                                                 message):
    if overlap and form == "v4":
        pytest.skip("pre_overlap is V4.1 only")
    args, outs = _setup(form, out_name, other_name)
    before = {k: _bits(v).clone() for k, v in (*args.items(), *outs.items()) if v is not None}
    op = torch.ops.mhc.pre_overlap_out if overlap else torch.ops.mhc.pre_out
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _call(op, args, outs, overlap)
    for name, value in (*args.items(), *outs.items()):
        if value is not None:
            assert torch.equal(_bits(value), before[name]), f"{name} was written"


def test_post_out_names_out(mhc):
    """post_out's own name for its output, `out`, not the C++ binding's residual_next."""
    buf = torch.empty(T * N * C, dtype=torch.bfloat16)
    sublayer_out = buf[:T * C].view(T, C)
    sublayer_out.copy_(S.sublayer_out)
    with pytest.raises(RuntimeError, match="out must not overlap sublayer_out"):
        torch.ops.mhc.post_out(sublayer_out, S.residual, S.post, S.comb, out=buf.view(T, N, C))


def test_empty_outputs_never_overlap(mhc):
    """Zero tokens: empty tensors share pointers harmlessly."""
    s = Site(tokens=0, n=4, hidden=128)
    out = (torch.empty(0, 128, dtype=torch.bfloat16), torch.empty(0, 4), torch.empty(0, 4, 4),
           torch.empty(0, 4))
    mhc.pre(*s.pre_args(), out=out)
