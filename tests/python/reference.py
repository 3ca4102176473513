"""The float64 reference of one mHC site in torch, written from the design doc
(/work/shared/design/mhc-v41.md, "One site"), independent of the kernels and of mhc._C.

Inputs are converted exactly to float64; bf16 roundings appear only where the contract stores
bf16 (y before the sublayer norm). Outputs are float64.
"""

import torch

F64 = torch.float64


def coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, iters):
    """Step 2: (pre, post, comb) of every token, float64."""
    tokens, n, hidden = residual.shape
    v = residual.reshape(tokens, n * hidden).to(F64)
    r = torch.rsqrt((v * v).sum(-1) / (n * hidden) + rms_eps)
    mixes = (v @ fn.to(F64).T) * r[:, None]
    scale, base = hc_scale.to(F64), hc_base.to(F64)
    pre = torch.sigmoid(mixes[:, :n] * scale[0] + base[:n]) + pre_eps
    post = post_mult * torch.sigmoid(mixes[:, n : 2 * n] * scale[1] + base[n : 2 * n])
    logits = mixes[:, 2 * n :].reshape(tokens, n, n) * scale[2] + base[2 * n :].reshape(n, n)
    comb = torch.softmax(logits, dim=-1) + sinkhorn_eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + sinkhorn_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + sinkhorn_eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + sinkhorn_eps)
    return pre, post, comb


def input_path(residual, pre_mix, norm_weight, norm_eps):
    """Step 1: the collapse (stored as bf16) and the sublayer RMSNorm, float64."""
    y = (pre_mix.to(F64)[:, :, None] * residual.to(F64)).sum(dim=1)
    if norm_weight is None:
        return y
    y = y.to(torch.bfloat16).to(F64)
    r = torch.rsqrt((y * y).mean(-1, keepdim=True) + norm_eps)
    return y * r * norm_weight.to(F64)


def post(sublayer_out, residual, post_mix, comb):
    """Step 4: x_next[k] = post[k] F + sum_j comb[j][k] x[j] (row j of comb is the source)."""
    mixed = torch.einsum("tjk,tjc->tkc", comb.to(F64), residual.to(F64))
    return post_mix.to(F64)[:, :, None] * sublayer_out.to(F64)[:, None, :] + mixed


def pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
        post_mult, iters, norm_eps):
    """torch.ops.mhc.pre in float64: (layer_input, post, comb, next_pre_mix). pre_mix None is
    the V4 form (this site's own pre collapses the streams)."""
    pre_c, post_c, comb = coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps,
                                       sinkhorn_eps, post_mult, iters)
    mix = pre_c if pre_mix is None else pre_mix
    return input_path(residual, mix, norm_weight, norm_eps), post_c, comb, pre_c


def prenorm_gemm(x, fn, num_splits):
    """DeepGEMM's tf32_hc_prenorm_gemm, summed over the splits, float64: (x fn^T, sum x^2)."""
    x64 = x.to(F64)
    return x64 @ fn.to(F64).T, (x64 * x64).sum(-1)
