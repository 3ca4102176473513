"""Small multi-site stacks built from the ops, for the compile, graph and overlap tests."""

import torch


def stack_v41(s, sublayer, sites=4, side_stream=0, between=None):
    """V4.1 delayed form with the fused post_pre: one pre, then post_pre + coefficients (the
    engine recipe). side_stream: the coefficients on that stream, joined before the next post;
    between(): work queued on the current stream after each post_pre, before the fork."""
    e = s.eps
    coef_eps = (e["rms_eps"], e["pre_eps"], e["sinkhorn_eps"], s.post_mult, s.iters)
    mhc = torch.ops.mhc
    layer_input, post, comb, pre_mix = mhc.pre(*s.pre_args())
    residual = s.residual
    for site in range(sites):
        out = sublayer(layer_input)
        if side_stream and site > 0:
            mhc.join(side_stream, post, comb, pre_mix)
        if site == sites - 1:
            return mhc.post(out, residual, post, comb), pre_mix
        residual, layer_input = mhc.post_pre(out, residual, post, comb, pre_mix, s.norm_weight,
                                             e["norm_eps"])
        if between is not None:
            between()
        post, comb, pre_mix = mhc.coefficients(residual, s.fn, s.hc_scale, s.hc_base, *coef_eps,
                                               side_stream=side_stream)


def stack_v4(s, sublayer, sites=4):
    """V4 form: each site's own pre, then post."""
    residual = s.residual
    for _ in range(sites):
        args = list(s.pre_args(pre_mix=None))
        args[0] = residual
        layer_input, post, comb, _ = torch.ops.mhc.pre(*args)
        residual = torch.ops.mhc.post(sublayer(layer_input), residual, post, comb)
    return residual


def stack_v41_overlap(s, sublayer, side_stream, sites=4):
    """V4.1 with the coefficient path on a side stream, joined before each post."""
    e = s.eps
    mhc = torch.ops.mhc
    residual, pre_mix = s.residual, s.pre_mix
    for _ in range(sites):
        args = list(s.pre_args())
        args[0], args[5] = residual, pre_mix
        layer_input, post, comb, pre_mix = mhc.pre_overlap(*args, side_stream)
        out = sublayer(layer_input)
        mhc.join(side_stream, post, comb, pre_mix)
        residual = mhc.post(out, residual, post, comb)
    return residual, pre_mix


def stack_v41_plain(s, sublayer, sites=4):
    """The same schedule as stack_v41_overlap on one stream (for bitwise comparison)."""
    residual, pre_mix = s.residual, s.pre_mix
    for _ in range(sites):
        args = list(s.pre_args())
        args[0], args[5] = residual, pre_mix
        layer_input, post, comb, pre_mix = torch.ops.mhc.pre(*args)
        residual = torch.ops.mhc.post(sublayer(layer_input), residual, post, comb)
    return residual, pre_mix


def standin_sublayer(weight):
    """A cheap bf16 sublayer: F = bf16(tanh(layer_input @ W))."""
    return lambda x: torch.tanh(x @ weight)
