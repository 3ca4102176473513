"""The fake (meta) implementations of the ops, for torch.compile and meta tensors: the real
implementations' checks (mhc/_checks.py), outputs of the right shape, nothing launched."""

import torch

from mhc import _checks as check
from mhc import _native


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


# ---- bound sites (python/src/torch/site.hpp): the bound op's checks, then its unbound op's with
# the site's n, C and device standing in for the bound tensors ----------------------------------

_DEVICE_TYPES = {0: "cpu", 1: "cuda"}  # c10::DeviceType codes


def _bound(op, handle):
    """The site of `handle` (n, C, device text) as the C++ lookup finds it, and grad mode."""
    state, shape = _native.site_state(handle)
    if state == -1:
        raise RuntimeError(f"mhc.{op}: site {handle} was released (mhc.release_site or "
                           "Site.close()); bind the site again with mhc.bind_site")
    if state != 1:
        raise RuntimeError(f"mhc.{op}: site {handle} was never bound in this process (a site "
                           "is the handle mhc.bind_site returns)")
    if torch.is_grad_enabled():
        raise RuntimeError(f"mhc.{op} is inference-only: call it under torch.no_grad() or "
                           "torch.inference_mode() (its bound weights are invisible to "
                           "autograd); with grad enabled use the unbound op, whose backward "
                           "raises")
    n, c, kind, index, norm = shape
    device = _DEVICE_TYPES.get(kind, f"device type {kind}")
    return n, c, device if index < 0 else f"{device}:{index}", bool(norm)


def _on_device(family, name, device, residual):
    if device != str(residual.device):
        raise RuntimeError(f"mhc.{family}: {name} is on {device} but residual is on "
                           f"{residual.device}; all tensors of a call must be on one device")


def _bound_norm_weight(family, site, residual, c):
    """check.optional on the bound norm_weight [C], which the fake does not hold."""
    _, bound_c, device, norm = site
    if norm:
        _on_device(family, "norm_weight", device, residual)
        if bound_c != c:
            raise RuntimeError(f"mhc.{family}: norm_weight has shape [{bound_c}], expected [C] = "
                               f"[{c}]")


def _bound_weights(family, site, residual, n, c):
    """check.weights on fn, which the fake does not hold: its device, then its shape."""
    bound_n, bound_c, device, _ = site
    _on_device(family, "fn", device, residual)
    if (bound_n, bound_c) != (n, c):
        raise RuntimeError(f"mhc.{family}: fn has shape [{bound_n * (bound_n + 2)}, "
                           f"{bound_n * bound_c}], expected [n(n+2), n*C] = [{n * (n + 2)}, "
                           f"{n * c}]")


def _with_site(op, handle, check_call):
    site = _bound(op, handle)
    try:
        check_call(site)
    except RuntimeError as e:
        raise RuntimeError(f"{e} (in mhc.{op}: fn, hc_scale, hc_base, norm_weight and workspace "
                           f"are site {handle}'s, bound by mhc.bind_site)") from None


def _site_pre_checks(family, site, residual, pre_mix, outputs):
    t, n, c = check.streams(family, residual)
    _bound_weights(family, site, residual, n, c)
    _bound_norm_weight(family, site, residual, c)
    check.optional(family, "pre_mix", pre_mix, check.F32, (t, n), residual.device, "[T, n]")
    check.pre_outputs(family, residual, *outputs)


def fake_bind_site(fn, hc_scale, hc_base, norm_weight, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                   sinkhorn_iters, norm_eps, *, workspace=None, projection="tf32",
                   batch_invariant=False):
    raise RuntimeError("mhc.bind_site binds real tensors: bind sites before tracing (outside "
                       "torch.compile) and pass the handle, an int, into the traced code")


def fake_site_pre_out(site, residual, pre_mix, layer_input, post, comb, next_pre_mix):
    outputs = (layer_input, post, comb, next_pre_mix)
    _with_site("site_pre_out", site,
               lambda s: _site_pre_checks("pre", s, residual, pre_mix, outputs))


def fake_site_pre_overlap_out(site, residual, pre_mix, side_stream, layer_input, post, comb,
                              next_pre_mix):
    outputs = (layer_input, post, comb, next_pre_mix)
    _with_site("site_pre_overlap_out", site,
               lambda s: _site_pre_checks("pre_overlap", s, residual, pre_mix, outputs))


def fake_site_coefficients_out(site, residual, post, comb, next_pre_mix, side_stream=0):
    def checks(s):
        t, n, c = check.streams("coefficients", residual)
        _bound_weights("coefficients", s, residual, n, c)
        check.coefficient_outputs("coefficients", post, comb, next_pre_mix, t, n, residual.device)

    _with_site("site_coefficients_out", site, checks)


def fake_site_boundary_out(site, sublayer_out, residual, post, comb, pre_mix, residual_next,
                           layer_input, next_post, next_comb, next_pre_mix):
    def checks(s):
        t, n, c = check.post_inputs("boundary", sublayer_out, residual, post, comb)
        check.tensor("boundary", "pre_mix", pre_mix, check.F32, (t, n), residual.device,
                     "[T, n]")
        _bound_norm_weight("boundary", s, residual, c)
        _bound_weights("boundary", s, residual, n, c)
        check.boundary_outputs("boundary", residual, residual_next, layer_input, next_post,
                               next_comb, next_pre_mix)

    _with_site("site_boundary_out", site, checks)
