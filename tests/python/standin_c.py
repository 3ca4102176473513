"""A pure-torch stand-in for mhc._C with the contract's signatures (PY_INTERFACE.md), used only
while developing without the extension (MHC_STANDIN=1). Computes through the float64 reference
and writes the caller's buffers in place, like the real module."""

import torch

import reference as ref

__version__ = "0.0.0-standin"


def has_cuda():
    return False


def workspace_bytes(hidden, n, max_tokens):
    return 64 * max(1, max_tokens) * n * (n + 2) * 4


def prenorm_gemm(x, fn, out, sqrsum, num_splits, stream):
    k = x.shape[1]
    chunk = -(-k // num_splits)
    for s in range(num_splits):
        xs, fs = x[:, s * chunk : (s + 1) * chunk], fn[:, s * chunk : (s + 1) * chunk]
        o, q = ref.prenorm_gemm(xs, fs, 1)
        out[s].copy_(o)
        sqrsum[s].copy_(q)


def coefficients(residual, fn, hc_scale, hc_base, pre, post, comb, workspace, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, projection, stream):
    p, q, c = ref.coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                               post_mult, sinkhorn_iters)
    pre.copy_(p)
    post.copy_(q)
    comb.copy_(c)


def input_path(residual, pre_mix, norm_weight, layer_input, norm_eps, stream=0, *, workspace=None):
    layer_input.copy_(ref.input_path(residual, pre_mix, norm_weight, norm_eps))


def post(sublayer_out, residual, post_mix, comb, residual_next, stream):
    residual_next.copy_(ref.post(sublayer_out, residual, post_mix, comb))


def post_pre(sublayer_out, residual, post_mix, comb, next_pre_mix, next_norm_weight,
             residual_next, next_layer_input, norm_eps, stream=0, *, workspace=None):
    post(sublayer_out, residual, post_mix, comb, residual_next, stream)
    input_path(residual_next, next_pre_mix, next_norm_weight, next_layer_input, norm_eps, stream)


def supports_overlap(arch_major, arch_minor, hidden, n, tokens, mode, tp, kernel_config):
    if (arch_major, arch_minor) not in ((9, 0), (10, 0), (10, 3)):
        return False, "arch_unsupported", "stand-in"
    return True, "", ""
