"""Every op with its input tensors as nn.Parameter (which require grad, as every module's
weights do): eagerly under torch.no_grad and torch.inference_mode, eagerly with grad enabled
(the outputs then carry the inference-only node), and under torch.compile(fullgraph=True); the
results are bitwise those of the same call with plain tensors. On CPU (CI) and CUDA."""

import pytest
import torch
from conftest import DEVICES, Site

OPS = ("hc_prenorm_gemm", "pre", "pre_out", "coefficients", "coefficients_out", "pre_overlap",
       "pre_overlap_out", "join", "post", "post_out", "post_pre", "post_pre_out", "boundary",
       "boundary_out")


def _outputs(s):
    t, n, c = s.tokens, s.n, s.hidden
    dev = s.residual.device
    f32 = dict(dtype=torch.float32, device=dev)
    return dict(layer_input=torch.zeros(t, c, dtype=torch.bfloat16, device=dev),
                post=torch.zeros(t, n, **f32), comb=torch.zeros(t, n, n, **f32),
                next_pre_mix=torch.zeros(t, n, **f32))


def _call(name, s):
    """(args, kwargs) of op `name` on site `s`; fresh output buffers for the _out ops."""
    outs = _outputs(s)
    coef_outs = {k: v for k, v in outs.items() if k != "layer_input"}
    post_pre = (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6)
    boundary_outs = dict(residual_next=torch.zeros_like(s.residual),
                         layer_input=outs["layer_input"], next_post=outs["post"],
                         next_comb=outs["comb"], next_pre_mix=outs["next_pre_mix"])
    t, dev = s.tokens, s.residual.device
    gemm_outs = (torch.zeros(2, t, 24, device=dev), torch.zeros(2, t, device=dev))
    return {
        "hc_prenorm_gemm": ((s.residual.view(t, -1), s.fn, *gemm_outs, 2), {}),
        "pre": (s.pre_args(), {}),
        "pre_out": (s.pre_args(), outs),
        "coefficients": (s.coef_args(), {}),
        "coefficients_out": (s.coef_args(), coef_outs),
        "pre_overlap": ((*s.pre_args(), 0), {}),
        "pre_overlap_out": ((*s.pre_args(), 0), outs),
        "join": ((0, coef_outs["post"], coef_outs["comb"], coef_outs["next_pre_mix"]), {}),
        "post": (s.post_args(), {}),
        "post_out": (s.post_args(), dict(out=torch.zeros_like(s.residual))),
        "post_pre": (post_pre, {}),
        "post_pre_out": (post_pre, dict(residual_next=torch.zeros_like(s.residual),
                                         next_layer_input=outs["layer_input"])),
        "boundary": (s.boundary_args(), {}),
        "boundary_out": (s.boundary_args(), boundary_outs),
    }[name]


def _written(name, args, kwargs, result):
    """What the call produced: its outputs, or the buffers an _out op wrote."""
    if name == "hc_prenorm_gemm":
        return args[2:4]
    if name == "join":
        return args[1:]
    if name.endswith("_out"):
        return tuple(kwargs.values())
    return result if isinstance(result, tuple) else (result,)


def _parameters(s):
    """The site with every input tensor an nn.Parameter."""
    for key, value in vars(s).items():
        if isinstance(value, torch.Tensor):
            setattr(s, key, torch.nn.Parameter(value.clone(), requires_grad=True))
    return s


def _run(name, s, mode):
    args, kwargs = _call(name, s)
    op = getattr(torch.ops.mhc, name)
    if mode == "compiled":
        torch._dynamo.reset()
        with torch.no_grad():
            result = torch.compile(lambda: op(*args, **kwargs), fullgraph=True,
                                   backend="aot_eager")()
    elif mode == "no_grad":
        with torch.no_grad():
            result = op(*args, **kwargs)
    elif mode == "inference_mode":
        with torch.inference_mode():
            result = op(*args, **kwargs)
    else:
        result = op(*args, **kwargs)
    return _written(name, args, kwargs, result)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "grad", "compiled"])
@pytest.mark.parametrize("name", OPS)
def test_parameters_give_the_plain_results(mhc, device, mode, name):
    plain = _run(name, Site(tokens=3, hidden=256, device=device, seed=5), "no_grad")
    got = _run(name, _parameters(Site(tokens=3, hidden=256, device=device, seed=5)), mode)
    assert len(got) == len(plain)
    for g, p in zip(got, plain):
        assert torch.equal(g.detach(), p), name
        if mode != "grad" or name in ("join",):
            continue
        # With grad enabled the outputs hang off the inference-only node (docs/python.md).
        assert g.requires_grad, name
    if mode == "grad" and name != "join":
        with pytest.raises(RuntimeError, match="is inference-only"):
            sum(g.float().sum() for g in got).backward()


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_inductor_with_parameters(mhc, device):
    """The Hugging Face case: a module's parameter weights, the whole site compiled by inductor."""
    torch._dynamo.reset()
    s = _parameters(Site(tokens=5, hidden=256, device=device, seed=6))
    plain = Site(tokens=5, hidden=256, device=device, seed=6)

    def site(x):
        layer_input, post, comb, _ = torch.ops.mhc.pre(*x.pre_args())
        return torch.ops.mhc.post(layer_input * 2, x.residual, post, comb)

    with torch.no_grad():
        got = torch.compile(site, fullgraph=True, backend="inductor")(s)
        want = site(plain)
    assert torch.equal(got, want)
