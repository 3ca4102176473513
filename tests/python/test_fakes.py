"""The fake (meta) implementations against the real ones: shapes, dtypes, strides, devices; and
torch.library.opcheck (schema, fake tensor, AOT dispatch) on every op."""

import pytest
import torch
from conftest import DEVICES, Site
from torch._subclasses.fake_tensor import FakeTensorMode


def _fake_call(op, args, kwargs):
    mode = FakeTensorMode(allow_non_fake_inputs=False)

    def fake(x):
        return mode.from_tensor(x) if isinstance(x, torch.Tensor) else x

    with mode:
        return op(*[fake(a) for a in args], **{k: fake(v) for k, v in kwargs.items()})


def _same_meta(real, fake):
    real = real if isinstance(real, (tuple, list)) else (real,)
    fake = fake if isinstance(fake, (tuple, list)) else (fake,)
    assert len(real) == len(fake)
    for r, f in zip(real, fake):
        assert (r.shape, r.dtype, r.stride(), r.device) == (f.shape, f.dtype, f.stride(), f.device)


def _functional_cases(s):
    ops = torch.ops.mhc
    return {
        "pre_v41": (ops.pre, s.pre_args(), {}),
        "pre_v4": (ops.pre, s.pre_args(pre_mix=None), {}),
        "pre_no_norm": (ops.pre, s.pre_args(norm_weight=None), {}),
        "coefficients": (ops.coefficients, s.coef_args(), {}),
        "post": (ops.post, s.post_args(), {}),
        "post_pre": (ops.post_pre, (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6), {}),
        "boundary": (ops.boundary, s.boundary_args(), {}),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["pre_v41", "pre_v4", "pre_no_norm", "coefficients", "post",
                                  "post_pre", "boundary"])
def test_fake_matches_real(mhc, device, case):
    s = Site(tokens=6, device=device, seed=1)
    op, args, kwargs = _functional_cases(s)[case]
    _same_meta(op(*args, **kwargs), _fake_call(op, args, kwargs))


def _opcheck_cases(s):
    ops = torch.ops.mhc
    t, n, c = s.tokens, s.n, s.hidden
    dev = s.residual.device
    f32 = dict(dtype=torch.float32, device=dev)
    outs = dict(layer_input=torch.empty(t, c, dtype=torch.bfloat16, device=dev),
                post=torch.empty(t, n, **f32), comb=torch.empty(t, n, n, **f32),
                next_pre_mix=torch.empty(t, n, **f32))
    coef_outs = {k: v for k, v in outs.items() if k != "layer_input"}
    x = s.residual.view(t, -1)
    return [
        (ops.hc_prenorm_gemm, (x, s.fn, torch.empty(2, t, 24, **f32), torch.empty(2, t, **f32), 2), {}),
        (ops.pre, s.pre_args(), {}),
        (ops.pre, s.pre_args(pre_mix=None), {}),
        (ops.pre_out, s.pre_args(), outs),
        (ops.coefficients, s.coef_args(), {}),
        (ops.coefficients_out, s.coef_args(), coef_outs),
        (ops.pre_overlap, (*s.pre_args(), 0), {}),
        (ops.pre_overlap_out, (*s.pre_args(), 0), outs),
        (ops.join, (0, coef_outs["post"], coef_outs["comb"], coef_outs["next_pre_mix"]), {}),
        (ops.post, s.post_args(), {}),
        (ops.post_out, s.post_args(), dict(out=torch.empty_like(s.residual))),
        (ops.post_pre, (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6), {}),
        (ops.post_pre_out, (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6),
         dict(residual_next=torch.empty_like(s.residual), next_layer_input=outs["layer_input"])),
        (ops.boundary, s.boundary_args(), {}),
        (ops.boundary_out, s.boundary_args(),
         dict(residual_next=torch.empty_like(s.residual), layer_input=outs["layer_input"],
              next_post=outs["post"], next_comb=outs["comb"], next_pre_mix=outs["next_pre_mix"])),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", range(15))
def test_opcheck(mhc, device, index):
    s = Site(tokens=5, device=device, seed=2)
    op, args, kwargs = _opcheck_cases(s)[index]
    torch.library.opcheck(op, args, kwargs,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
