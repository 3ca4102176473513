"""torch.ops.mhc.pre_fp8 / post_pre_fp8 / boundary_fp8 and their _out forms (docs/fp8.md): the FP8
layer_input bitwise vLLM's per_token_group_quant_fp8 of the bf16 twin's layer_input (written out
here in torch: amax, scale, division, torch's own E4M3 rounding), in both scale layouts and with
UE8M0 scales; the twins' other outputs bitwise; the fakes, torch.compile, the errors alike real and
fake, and no backward."""

import re

import pytest
import torch
from conftest import DEVICES, Site, needs_cuda
from torch._subclasses.fake_tensor import FakeTensorMode

FORMATS = [(False, False), (True, False), (False, True), (True, True)]


def per_token_group_quant(x, column_major_scales, use_ue8m0):
    """vLLM's per_token_group_quant_fp8 of bf16 x [T, C] (its CUDA kernel's arithmetic in float32):
    codes [T, C] float8_e4m3fn and scales [T, C/128], in the layout the ops write."""
    t, c = x.shape
    v = x.float().view(t, c // 128, 128)
    amax = v.abs().amax(-1).clamp_min(1e-10)
    scale = amax / 448.0
    if use_ue8m0:  # the power of two at or above max(scale, 1e-10), exactly
        bits = scale.clamp_min(1e-10).view(torch.int32)
        exponent = (bits >> 23) & 0xFF
        exponent = exponent + ((bits & 0x7FFFFF) != 0).to(torch.int32)
        scale = (exponent << 23).view(torch.float32)
    q = (v / scale.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(t, c)
    return q, scale


def bits(t):
    return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t.view(torch.int32)


def expect_fp8(codes, scales, rows, column_major_scales, use_ue8m0):
    t, c = rows.shape
    # On the CPU: torch's CUDA division by a Python scalar multiplies by its reciprocal, one
    # rounding off the division vLLM's kernel (and mhc's) does; the CPU's divides.
    want_codes, want_scales = per_token_group_quant(rows.cpu(), column_major_scales, use_ue8m0)
    assert codes.shape == (t, c) and codes.dtype == torch.float8_e4m3fn
    assert scales.shape == (t, c // 128) and scales.dtype == torch.float32
    if column_major_scales and t > 1:
        assert scales.stride() == (1, (t + 3) // 4 * 4)
    assert torch.equal(bits(codes.cpu()), bits(want_codes.cpu()))
    assert torch.equal(bits(scales.cpu().contiguous()), bits(want_scales.cpu()))


def _kwargs(column_major_scales, use_ue8m0):
    return {"group_size": 128, "column_major_scales": column_major_scales, "use_ue8m0": use_ue8m0}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens", [0, 1, 7, 33])
@pytest.mark.parametrize("fmt", FORMATS)
def test_pre_fp8_is_the_quantised_twin(mhc, device, tokens, fmt):
    s = Site(tokens=tokens, hidden=256, device=device, seed=tokens)
    for pre_mix in ("carried", None):
        args = s.pre_args(pre_mix=pre_mix)
        twin = torch.ops.mhc.pre(*args)
        out = torch.ops.mhc.pre_fp8(*args, **_kwargs(*fmt))
        assert len(out) == 5
        expect_fp8(out[0], out[1], twin[0], *fmt)
        for a, b in zip(out[2:], twin[1:]):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens", [1, 7])
@pytest.mark.parametrize("fmt", FORMATS)
def test_post_pre_and_boundary_fp8_are_the_quantised_twins(mhc, device, tokens, fmt):
    s = Site(tokens=tokens, hidden=384, device=device, seed=10 + tokens)
    e = s.eps
    pp_args = (*s.post_args(), s.pre_mix, s.norm_weight, e["norm_eps"])
    residual_next, layer_input = torch.ops.mhc.post_pre(*pp_args)
    out = torch.ops.mhc.post_pre_fp8(*pp_args, **_kwargs(*fmt))
    expect_fp8(out[0], out[1], layer_input, *fmt)
    assert torch.equal(out[2], residual_next)
    twin = torch.ops.mhc.boundary(*s.boundary_args())
    out = torch.ops.mhc.boundary_fp8(*s.boundary_args(), **_kwargs(*fmt))
    assert len(out) == 6
    expect_fp8(out[0], out[1], twin[1], *fmt)
    for a, b in zip(out[2:], (twin[0], *twin[2:])):
        assert torch.equal(a, b)


def _twin_and_fp8_out_calls(s, op, fmt):
    """(the bf16 twin's _out call, the FP8 op's _out call, the twin's bf16 layer_input, the FP8
    codes and scales) on site `s` (V4.1: the carried pre_mix; fp32 norm weight)."""
    t, n, c = s.tokens, s.n, s.hidden
    dev = s.residual.device
    f32 = dict(device=dev, dtype=torch.float32)
    rows = torch.empty(t, c, device=dev, dtype=torch.bfloat16)
    codes = torch.empty(t, c, device=dev, dtype=torch.float8_e4m3fn)
    from mhc import fp8_scales

    scales = fp8_scales(t, c, fmt[0], device=dev)
    kw = _kwargs(*fmt)
    mhc = torch.ops.mhc
    e = s.eps
    if op == "pre":
        outs = [torch.empty(t, n, **f32), torch.empty(t, n, n, **f32), torch.empty(t, n, **f32)]
        names = dict(post=outs[0], comb=outs[1], next_pre_mix=outs[2])
        twin = lambda: mhc.pre_out(*s.pre_args(), layer_input=rows, **names)  # noqa: E731
        fp8 = lambda: mhc.pre_fp8_out(*s.pre_args(), layer_input=codes,  # noqa: E731
                                      layer_input_scales=scales, **names, **kw)
    elif op == "post_pre":
        nxt = torch.empty_like(s.residual)
        pp = (*s.post_args(), s.pre_mix, s.norm_weight, e["norm_eps"])
        twin = lambda: mhc.post_pre_out(*pp, residual_next=nxt,  # noqa: E731
                                        next_layer_input=rows)
        fp8 = lambda: mhc.post_pre_fp8_out(*pp, next_layer_input=codes,  # noqa: E731
                                           next_layer_input_scales=scales, residual_next=nxt, **kw)
    else:
        nxt = torch.empty_like(s.residual)
        outs = [torch.empty(t, n, **f32), torch.empty(t, n, n, **f32), torch.empty(t, n, **f32)]
        names = dict(residual_next=nxt, next_post=outs[0], next_comb=outs[1],
                     next_pre_mix=outs[2])
        twin = lambda: mhc.boundary_out(*s.boundary_args(), layer_input=rows,  # noqa: E731
                                        **names)
        fp8 = lambda: mhc.boundary_fp8_out(*s.boundary_args(), layer_input=codes,  # noqa: E731
                                           layer_input_scales=scales, **names, **kw)
    return twin, fp8, rows, codes, scales


@needs_cuda
@pytest.mark.parametrize("op", ["pre", "post_pre", "boundary"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_ops_at_one_token_are_the_twins_launches(mhc, op, fmt):
    """On Hopper the FP8 ops are the library's fused FP8 forms: at one token each queues the
    launches of its bf16 twin (pre and post_pre: ONE kernel), no separate quantisation, and writes
    the twin's bf16 layer_input quantised (the reference quantiser, mhc.fp8_scales' layout)
    bitwise."""
    from test_launches import _kernel_nodes

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the fused input path is the Hopper plan's")
    s = Site(tokens=1, hidden=512, device="cuda", seed=23)
    twin, fp8, rows, codes, scales = _twin_and_fp8_out_calls(s, op, fmt)
    twin_graph, twin_nodes = _kernel_nodes(twin)
    fp8_graph, fp8_nodes = _kernel_nodes(fp8)
    twin_kernels = [n for n in twin_nodes if n.startswith("kernel ")]
    fp8_kernels = [n for n in fp8_nodes if n.startswith("kernel ")]
    if op != "boundary":
        assert len(twin_kernels) == 1 and len(twin_nodes) == 1, twin_nodes
    assert len(fp8_kernels) == len(twin_kernels) and len(fp8_nodes) == len(twin_nodes), (
        fp8_nodes, twin_nodes)
    codes.view(torch.uint8).zero_()
    scales.zero_()
    twin_graph.replay()
    fp8_graph.replay()
    torch.cuda.synchronize()
    expect_fp8(codes, scales, rows, *fmt)


@needs_cuda
@pytest.mark.parametrize("tokens", [1024, 4096])
def test_boundary_fp8_keeps_the_twins_bits_at_a_large_batch(mhc, tokens):
    """Where the built-in Hopper plan runs the fused boundary kernel, boundary_fp8 runs it too,
    with bf16 staging rows of its own (at 4096 tokens its wide stages write FP8 themselves, else
    the bf16 kernel and the group quantisation): its coefficients stay bitwise boundary's (the C++
    API's FP8 boundary without staging would give them within the TF32 tier) and its layer_input
    is boundary's quantised."""
    s = Site(tokens=tokens, hidden=4096, device="cuda", seed=31)
    twin = torch.ops.mhc.boundary(*s.boundary_args())
    for fmt in FORMATS:
        out = torch.ops.mhc.boundary_fp8(*s.boundary_args(), **_kwargs(*fmt))
        expect_fp8(out[0], out[1], twin[1], *fmt)
        for a, b in zip(out[2:], (twin[0], *twin[2:])):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_out_forms_write_the_same(mhc, device):
    s = Site(tokens=5, hidden=256, device=device, seed=3)
    for column_major in (False, True):
        want = torch.ops.mhc.pre_fp8(*s.pre_args(), column_major_scales=column_major)
        codes = torch.empty(5, 256, dtype=torch.float8_e4m3fn, device=device)
        scales = mhc.fp8_scales(5, 256, column_major, device=device)
        post, comb, pre = (torch.empty_like(t) for t in want[2:])
        torch.ops.mhc.pre_fp8_out(*s.pre_args(), layer_input=codes, layer_input_scales=scales,
                                  post=post, comb=comb, next_pre_mix=pre,
                                  column_major_scales=column_major)
        assert torch.equal(bits(codes), bits(want[0]))
        assert torch.equal(bits(scales.contiguous()), bits(want[1].contiguous()))
        assert torch.equal(pre, want[4])


def _fake_call(op, args, kwargs=None):
    mode = FakeTensorMode()
    fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    fake_kwargs = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                   for k, v in (kwargs or {}).items()}
    with mode:
        return op(*fake, **fake_kwargs)


@pytest.mark.parametrize("column_major", [False, True])
def test_fakes_and_compile(mhc, column_major):
    s = Site(tokens=6, hidden=256, seed=5)
    kw = {"column_major_scales": column_major}
    real = torch.ops.mhc.pre_fp8(*s.pre_args(), **kw)
    fake = _fake_call(torch.ops.mhc.pre_fp8, s.pre_args(), kw)
    for r, f in zip(real, fake):
        assert (f.shape, f.dtype, f.stride()) == (r.shape, r.dtype, r.stride())
    real = torch.ops.mhc.boundary_fp8(*s.boundary_args(), **kw)
    fake = _fake_call(torch.ops.mhc.boundary_fp8, s.boundary_args(), kw)
    for r, f in zip(real, fake):
        assert (f.shape, f.dtype, f.stride()) == (r.shape, r.dtype, r.stride())
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: torch.ops.mhc.post_pre_fp8(*a, **kw), fullgraph=True,
                             backend="aot_eager")
    pp_args = (*s.post_args(), s.pre_mix, s.norm_weight, s.eps["norm_eps"])
    with torch.no_grad():
        got = compiled(*pp_args)
    want = torch.ops.mhc.post_pre_fp8(*pp_args, **kw)
    assert torch.equal(bits(got[0]), bits(want[0])) and torch.equal(got[2], want[2])


@pytest.mark.parametrize("column_major", [False, True])
def test_opcheck(mhc, column_major):
    s = Site(tokens=5, hidden=256, seed=15)
    kw = {"column_major_scales": column_major}
    pp_args = (*s.post_args(), s.pre_mix, s.norm_weight, s.eps["norm_eps"])
    for op, args in ((torch.ops.mhc.pre_fp8, s.pre_args()), (torch.ops.mhc.post_pre_fp8, pp_args),
                     (torch.ops.mhc.boundary_fp8, s.boundary_args())):
        torch.library.opcheck(op.default, args, kw)
    want = torch.ops.mhc.pre_fp8(*s.pre_args(), **kw)
    outs = {"layer_input": torch.empty_like(want[0]),
            "layer_input_scales": mhc.fp8_scales(5, 256, column_major),
            "post": torch.empty_like(want[2]), "comb": torch.empty_like(want[3]),
            "next_pre_mix": torch.empty_like(want[4])}
    # test_schema mutates float8 outputs with arithmetic torch lacks on the CPU; the functionalised
    # copy of column-major scales at T % 4 != 0 (not dense) is contiguous, which the op refuses.
    utils = ("test_autograd_registration", "test_faketensor") + (
        () if column_major else ("test_aot_dispatch_dynamic",))
    torch.library.opcheck(torch.ops.mhc.pre_fp8_out.default, s.pre_args(), {**outs, **kw},
                          test_utils=utils)


def _bad_cases():
    s = Site(tokens=5, hidden=256, seed=9)
    odd = Site(tokens=5, hidden=192, seed=9)
    good = {"layer_input": torch.empty(5, 256, dtype=torch.float8_e4m3fn),
            "layer_input_scales": torch.empty(5, 2), "post": torch.empty(5, 4),
            "comb": torch.empty(5, 4, 4), "next_pre_mix": torch.empty(5, 4)}
    return {
        "group_size": (torch.ops.mhc.pre_fp8, s.pre_args(), {"group_size": 64},
                       "mhc.pre_fp8: group_size=64 is not supported"),
        "hidden": (torch.ops.mhc.pre_fp8, odd.pre_args(), {},
                   "mhc.pre_fp8: the hidden size 192 is not a multiple of group_size=128"),
        "codes dtype": (torch.ops.mhc.pre_fp8_out, s.pre_args(),
                        {**good, "layer_input": torch.empty(5, 256, dtype=torch.bfloat16)},
                        "mhc.pre_fp8: layer_input has dtype bfloat16, expected float8_e4m3fn"),
        "scales layout": (torch.ops.mhc.pre_fp8_out, s.pre_args(),
                          {**good, "column_major_scales": True},
                          "mhc.pre_fp8: layer_input_scales must be a float32 tensor [T, C/128] "
                          "= [5, 2]"),
        "twin's check": (torch.ops.mhc.pre_fp8, (*s.pre_args()[:6], -1.0, *s.pre_args()[7:]), {},
                         "mhc.pre: rms_eps must be a finite number >= 0, got -1.0"),
    }


@pytest.mark.parametrize("case", ["codes dtype", "group_size", "hidden", "scales layout",
                                  "twin's check"])
def test_errors_alike_real_and_fake(mhc, case):
    op, args, kwargs, message = _bad_cases()[case]
    with pytest.raises(RuntimeError, match=re.escape(message)):
        op(*args, **kwargs)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _fake_call(op, args, kwargs)


def test_out_errors_write_nothing(mhc):
    s = Site(tokens=5, hidden=256, seed=11)
    codes = torch.zeros(5, 256, dtype=torch.float8_e4m3fn)
    post = torch.zeros(5, 4)
    with pytest.raises(RuntimeError, match="layer_input_scales"):
        torch.ops.mhc.pre_fp8_out(*s.pre_args(), layer_input=codes,
                                  layer_input_scales=torch.zeros(5, 3), post=post,
                                  comb=torch.zeros(5, 4, 4), next_pre_mix=torch.zeros(5, 4))
    assert not codes.view(torch.uint8).any() and not post.any()


def test_inference_only(mhc):
    s = Site(tokens=3, hidden=256, seed=13)
    fn = s.fn.clone().requires_grad_()
    args = list(s.pre_args())
    args[1] = fn
    out = torch.ops.mhc.pre_fp8(*args)
    with pytest.raises(RuntimeError, match="inference-only"):
        out[2].sum().backward()
