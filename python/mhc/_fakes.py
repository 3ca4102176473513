"""The fake (meta) implementations of the ops, for torch.compile and meta tensors: the real
implementations' checks (mhc/_checks.py), outputs of the right shape, nothing launched."""

import torch

from mhc import _checks as check


def new_pre_outputs(residual):
    t, n, c = residual.shape
    f32 = dict(dtype=torch.float32, device=residual.device)
    return (residual.new_empty((t, c)), torch.empty((t, n), **f32),
            torch.empty((t, n, n), **f32), torch.empty((t, n), **f32))


def new_boundary_outputs(residual):
    layer_input, next_post, next_comb, next_pre_mix = new_pre_outputs(residual)
    return torch.empty_like(residual), layer_input, next_post, next_comb, next_pre_mix


def fake_hc_prenorm_gemm(x, fn, out, sqrsum, num_splits):
    check.gemm_args(x, fn, out, sqrsum, num_splits)


def fake_pre(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
              sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, workspace=None,
              projection="tf32", batch_invariant=False):
    check.pre_args("pre", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    return new_pre_outputs(residual)


def fake_pre_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                  sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *, layer_input, post, comb,
                  next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    check.pre_args("pre", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, batch_invariant)
    check.pre_outputs("pre", residual, layer_input, post, comb, next_pre_mix)


def fake_coefficients(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                       sinkhorn_iters, *, side_stream=0, workspace=None, projection="tf32",
                       batch_invariant=False):
    check.coefficient_args("coefficients", residual, fn, hc_scale, hc_base, rms_eps, pre_eps,
                        sinkhorn_eps, post_mult, sinkhorn_iters, projection, batch_invariant)
    return new_pre_outputs(residual)[1:]


def fake_coefficients_out(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                           post_mult, sinkhorn_iters, *, post, comb, next_pre_mix, side_stream=0,
                           workspace=None, projection="tf32", batch_invariant=False):
    t, n, _ = check.coefficient_args("coefficients", residual, fn, hc_scale, hc_base, rms_eps,
                                  pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection,
                                  batch_invariant)
    check.coefficient_outputs("coefficients", post, comb, next_pre_mix, t, n, residual.device)


def overlap_needs_pre_mix(pre_mix):
    if pre_mix is None:
        raise RuntimeError("mhc.pre_overlap: pre_mix is required (the V4.1 delayed form); the V4 "
                           "form cannot overlap, its input path needs this site's coefficients")


def fake_pre_overlap(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                      sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                      workspace=None, projection="tf32", batch_invariant=False,
                      main_workspace=None):
    overlap_needs_pre_mix(pre_mix)
    check.pre_args("pre_overlap", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps,
               pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection,
               batch_invariant)
    return new_pre_outputs(residual)


def fake_pre_overlap_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                          sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, *,
                          layer_input, post, comb, next_pre_mix, workspace=None,
                          projection="tf32", batch_invariant=False, main_workspace=None):
    overlap_needs_pre_mix(pre_mix)
    check.pre_args("pre_overlap", residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps,
               pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection,
               batch_invariant)
    check.pre_outputs("pre_overlap", residual, layer_input, post, comb, next_pre_mix)


def fake_join(side_stream, post, comb, next_pre_mix):
    pass


def fake_post(sublayer_out, residual, post, comb):
    check.post_inputs("post", sublayer_out, residual, post, comb)
    return torch.empty_like(residual)


def fake_post_out(sublayer_out, residual, post, comb, *, out):
    t, n, c = check.post_inputs("post", sublayer_out, residual, post, comb)
    check.tensor("post", "out", out, check.BF16, (t, n, c), residual.device, "[T, n, C]")


def fake_post_pre(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps, *,
                   workspace=None):
    t, _, c = check.post_pre_args("post_pre", sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    return torch.empty_like(residual), residual.new_empty((t, c))


def fake_post_pre_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight,
                       norm_eps, *, residual_next, next_layer_input, workspace=None):
    t, n, c = check.post_pre_args("post_pre", sublayer_out, residual, post, comb, next_pre_mix,
                              next_norm_weight, norm_eps)
    dev = residual.device
    check.tensor("post_pre", "residual_next", residual_next, check.BF16, (t, n, c), dev,
                 "[T, n, C]")
    check.tensor("post_pre", "next_layer_input", next_layer_input, check.BF16, (t, c), dev,
                 "[T, C]")


def fake_boundary(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
                   rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, *,
                   workspace=None, projection="tf32", batch_invariant=False):
    check.boundary_args("boundary", sublayer_out, residual, post, comb, pre_mix, norm_weight, fn,
                    hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                    norm_eps, projection, batch_invariant)
    return new_boundary_outputs(residual)


def fake_boundary_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale,
                       hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                       norm_eps, *, residual_next, layer_input, next_post, next_comb,
                       next_pre_mix, workspace=None, projection="tf32", batch_invariant=False):
    check.boundary_args("boundary", sublayer_out, residual, post, comb, pre_mix, norm_weight, fn,
                    hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters,
                    norm_eps, projection, batch_invariant)
    check.boundary_outputs("boundary", residual, residual_next, layer_input, next_post, next_comb,
                        next_pre_mix)


