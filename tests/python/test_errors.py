"""Every error path of the ops: a clear exception that names the argument, raised before any
kernel runs, eagerly and under torch.compile tracing."""

import pytest
import torch
from conftest import Site

E = RuntimeError  # every op error (docs/python.md, "Errors")


def _pre(s, **change):
    args = dict(zip(("residual", "fn", "hc_scale", "hc_base", "norm_weight", "pre_mix", "rms_eps",
                     "pre_eps", "sinkhorn_eps", "post_mult", "sinkhorn_iters", "norm_eps"),
                    s.pre_args()))
    kwargs = {k: change.pop(k) for k in ("workspace", "projection", "out") if k in change}
    args.update(change)
    return lambda mhc: mhc.pre(*args.values(), **kwargs)


S = Site(tokens=4, n=4, hidden=128)
META = "meta"

PRE_CASES = {
    "residual dtype": (dict(residual=S.residual.float()), "residual has dtype float32, expected bfloat16"),
    "residual rank": (dict(residual=S.residual.view(4, -1)), "expected [T, n, C]"),
    "residual not contiguous": (dict(residual=S.residual.transpose(0, 1).contiguous().transpose(0, 1)),
                                "residual is not contiguous"),
    # The dispatcher checks the schema's types first, naming the argument.
    "residual not a tensor": (dict(residual=[1, 2]), "for argument 'residual'"),
    "fn shape": (dict(fn=S.fn[:, :-64].contiguous()), "fn has shape [24, 448], expected [n(n+2), n*C] = [24, 512]"),
    "fn dtype": (dict(fn=S.fn.bfloat16()), "fn has dtype bfloat16, expected float32"),
    "fn device": (dict(fn=S.fn.to(META)), "fn is on meta but residual is on cpu"),
    "hc_scale shape": (dict(hc_scale=S.hc_scale[:2].contiguous()), "hc_scale has shape [2], expected [3]"),
    "hc_base dtype": (dict(hc_base=S.hc_base.double()), "hc_base has dtype float64"),
    "norm_weight shape": (dict(norm_weight=S.norm_weight[:64].contiguous()), "norm_weight has shape [64], expected [C] = [128]"),
    "norm_weight dtype": (dict(norm_weight=S.norm_weight.half()), "expected float32 or bfloat16"),
    "pre_mix shape": (dict(pre_mix=S.pre_mix[:3].contiguous()), "pre_mix has shape [3, 4], expected [T, n]"),
    "pre_mix not contiguous": (dict(pre_mix=S.pre_mix.t().contiguous().t()), "pre_mix is not contiguous"),
    "negative eps": (dict(rms_eps=-1.0), "rms_eps must be a finite number >= 0"),
    "nan eps": (dict(sinkhorn_eps=float("nan")), "sinkhorn_eps must be a finite number >= 0"),
    "norm eps": (dict(norm_eps=-1e-6), "norm_eps must be a finite number >= 0"),
    "sinkhorn iters": (dict(sinkhorn_iters=0), "sinkhorn_iters must be >= 1"),
    "inf eps": (dict(pre_eps=float("inf")), "pre_eps must be a finite number >= 0, got inf"),
    "inf norm eps": (dict(norm_eps=float("inf")), "norm_eps must be a finite number >= 0, got inf"),
    "inf post_mult": (dict(post_mult=float("inf")), "post_mult must be a finite number, got inf"),
    "sinkhorn iters too many": (dict(sinkhorn_iters=1001), "sinkhorn_iters must be >= 1 and <= 1000"),
    "sinkhorn iters past int": (dict(sinkhorn_iters=2**31), "sinkhorn_iters must be >= 1 and <= 1000"),
    "out too short": (dict(out=(torch.empty(4, 128, dtype=torch.bfloat16), torch.empty(4, 4))),
                      "out= needs 4 tensors (layer_input, post, comb, next_pre_mix), got 2 items"),
    "projection": (dict(projection="bf16"), "projection must be 'tf32' or 'fp32'"),
    "workspace dtype": (dict(workspace=torch.zeros(16)), "workspace must be a uint8 tensor"),
    "out shape": (dict(out=(torch.empty(4, 64, dtype=torch.bfloat16), S.post, S.comb, torch.empty(4, 4))),
                  "layer_input has shape [4, 64], expected [T, C] = [4, 128]"),
    "out dtype": (dict(out=(torch.empty(4, 128, dtype=torch.bfloat16), S.post.double(), S.comb, torch.empty(4, 4))),
                  "post has dtype float64"),
    "next_pre_mix aliases pre_mix": (dict(out=(torch.empty(4, 128, dtype=torch.bfloat16), torch.empty(4, 4),
                                               torch.empty(4, 4, 4), S.pre_mix)),
                                     "next_pre_mix must not overlap pre_mix"),
}


@pytest.mark.parametrize("case", sorted(PRE_CASES))
def test_pre_errors(mhc, case):
    change, message = PRE_CASES[case]
    call = _pre(S, **dict(change))
    with pytest.raises((E, TypeError, RuntimeError), match=_escape(message)):
        call(mhc)


def _escape(text):
    import re

    return re.escape(text)


POST_CASES = {
    "sublayer_out hidden": (dict(sublayer_out=S.sublayer_out[:, :64].contiguous()), "sublayer_out has shape [4, 64]"),
    "sublayer_out dtype": (dict(sublayer_out=S.sublayer_out.float()), "sublayer_out has dtype float32"),
    "comb shape": (dict(comb=S.comb[:, :2].contiguous()), "comb has shape [4, 2, 4], expected [T, n, n]"),
    "post device": (dict(post=S.post.to(META)), "post is on meta but residual is on cpu"),
    "out aliases residual": (dict(out=S.residual), "out must not overlap residual"),
    "out dtype": (dict(out=S.residual.float()), "out has dtype float32"),
}


@pytest.mark.parametrize("case", sorted(POST_CASES))
def test_post_errors(mhc, case):
    change, message = POST_CASES[case]
    args = dict(zip(("sublayer_out", "residual", "post_mix", "comb"), S.post_args()))
    out = change.pop("out", None)
    args.update({("post_mix" if k == "post" else k): v for k, v in change.items()})
    with pytest.raises(E, match=_escape(message)):
        mhc.post(*args.values(), out=out)


def test_post_pre_errors(mhc):
    args = (*S.post_args(), S.pre_mix, S.norm_weight, 1e-6)
    with pytest.raises(E, match="residual_next must not overlap residual"):
        mhc.post_pre(*args, out=(S.residual, torch.empty(4, 128, dtype=torch.bfloat16)))
    with pytest.raises(E, match=_escape("next_pre_mix has shape [4, 2]")):
        mhc.post_pre(*S.post_args(), S.pre_mix[:, :2].contiguous(), S.norm_weight, 1e-6)
    with pytest.raises(E, match="next_norm_weight has dtype float16"):
        mhc.post_pre(*S.post_args(), S.pre_mix, S.norm_weight.half(), 1e-6)
    with pytest.raises(E, match="norm_eps must be"):
        mhc.post_pre(*S.post_args(), S.pre_mix, S.norm_weight, -1.0)


def test_boundary_errors(mhc):
    args = S.boundary_args()
    with pytest.raises(E, match=_escape("pre_mix has shape [4, 2]")):
        mhc.boundary(*S.post_args(), S.pre_mix[:, :2].contiguous(), *args[5:])
    with pytest.raises(E, match="norm_weight has dtype float16"):
        mhc.boundary(*S.post_args(), S.pre_mix, S.norm_weight.half(), *args[6:])
    with pytest.raises(E, match="norm_eps must be"):
        mhc.boundary(*args[:-1], -1.0)
    outs = mhc.boundary(*args)
    with pytest.raises(E, match="residual_next must not overlap residual"):
        mhc.boundary(*args, out=(S.residual, *outs[1:]))
    with pytest.raises(E, match="next_pre_mix must not overlap pre_mix"):
        mhc.boundary(*args, out=(*outs[:4], S.pre_mix))
    with pytest.raises(E, match=_escape("fn has shape")):
        mhc.boundary(*args[:6], S.fn[:, :8].contiguous(), *args[7:])


def test_overlap_needs_pre_mix(mhc):
    args = list(S.pre_args())
    args[5] = None
    with pytest.raises(E, match="pre_mix is required"):
        torch.ops.mhc.pre_overlap(*args, 0)


def test_prenorm_gemm_errors(mhc):
    x = S.residual.view(4, -1)
    out, sq = torch.empty(2, 4, 24), torch.empty(2, 4)
    with pytest.raises(E, match="num_splits must be >= 1"):
        mhc.hc_prenorm_gemm(x, S.fn, out, sq, 0)
    with pytest.raises(E, match=_escape("out has shape [2, 4, 24], expected [num_splits, M, N] = [3, 4, 24]")):
        mhc.hc_prenorm_gemm(x, S.fn, out, sq, 3)
    with pytest.raises(E, match="x has dtype float32"):
        mhc.hc_prenorm_gemm(x.float(), S.fn, out, sq, 2)
    with pytest.raises(E, match=_escape("fn has shape [24, 256], expected [N, K] = [24, 512]")):
        mhc.hc_prenorm_gemm(x, S.fn[:, :256].contiguous(), out, sq, 2)


def test_errors_raise_under_compile(mhc):
    """The fakes run the same checks: a bad shape fails at trace time with the same message."""
    torch._dynamo.reset()
    bad = S.fn[:, :-64].contiguous()
    fn = torch.compile(lambda: torch.ops.mhc.pre(S.residual, bad, *S.pre_args()[2:]),
                       fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match=_escape("fn has shape [24, 448]")):
        fn()


def test_supports_overlap_reason_codes(mhc):
    """The C++ policy's decision and reason code (docs/dispatch.md). A build without the CUDA
    backend has no prenorm GEMM kernel, so the policy says so wherever it would overlap."""
    def code(**kw):
        kw.setdefault("tokens", 8)
        return mhc.supports_overlap(hidden=5120, n=4, **kw)

    opt_in = '{"enable_mhc_overlap": true}'
    assert code(arch=(8, 0)).reason_code == "arch_unsupported"
    assert code(arch=(10, 0), kernel_config='{"enable_mhc_overlap": false}').reason_code == "disabled_by_config"
    if not mhc._C.built_with_cuda():  # the binary lacks the kernels: that is the reason, always
        assert code(arch=(9, 0)).reason_code == "no_prenorm_gemm"
        assert code(arch=(9, 0), kernel_config=opt_in).reason_code == "no_prenorm_gemm"
        return
    assert code(arch=(9, 0)).reason_code == "sm90_not_opted_in"
    decision = code(arch=(9, 0), kernel_config=opt_in)
    assert decision.overlap and decision.reason_code == "" and decision.reason == ""
    # Hopper's opt-in rather than SM100's default: a build may hold the sm_90a image alone (the
    # wheel's default), and for a GPU without its kernels the reason is the missing GEMM.
    assert code(arch=(9, 0), kernel_config=opt_in, mode="eager").reason_code == "not_full_graph"
    assert code(arch=(9, 0), kernel_config=opt_in, tokens=4096).reason_code == "too_many_tokens"
    assert code(arch=(9, 0), kernel_config=opt_in, tokens=0).reason_code == "zero_tokens"


def test_supports_overlap_errors(mhc):
    # Not an op: the policy query raises ValueError, as mhc._C does.
    with pytest.raises(ValueError, match="enable_mhc_overlap"):
        mhc.supports_overlap(hidden=5120, n=4, tokens=8, arch=(9, 0),
                             kernel_config='{"enable_mhc_overlap": 3}')
    with pytest.raises(ValueError, match="mode"):
        mhc.supports_overlap(hidden=5120, n=4, tokens=8, arch=(9, 0), mode="sometimes")
