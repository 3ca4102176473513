"""Bound sites: a site's weights, scalars and options bound once (torch.ops.mhc.bind_site), and
the bound ops that take its handle in their place (docs/sites.md).

torch's price for an op call grows with its schema's arguments; the bound schemas carry 7 to 11
arguments where the unbound `_out` ops carry 19 to 23 (docs/decisions.md, "Bound sites"). An
engine keeps a `Site` per hyper-connection site and calls the ops through their OpOverloads
directly, e.g. torch.ops.mhc.site_pre_out.default(site.handle, residual, pre_mix, layer_input,
post, comb, next_pre_mix), under torch.no_grad() or torch.inference_mode(). The methods here
are the same calls with `out=` made for the caller when it passes none.
"""

import torch

from mhc import ops as _ops  # noqa: F401  (registers torch.ops.mhc.*)

_M = torch.ops.mhc
_BIND, _RELEASE = _M.bind_site.default, _M.release_site.default
_PRE, _COEF = _M.site_pre_out.default, _M.site_coefficients_out.default
_OVERLAP, _BOUNDARY = _M.site_pre_overlap_out.default, _M.site_boundary_out.default


def _pre_outputs(residual):
    t, n, c = residual.shape
    f32 = dict(dtype=torch.float32, device=residual.device)
    return (residual.new_empty((t, c)), torch.empty((t, n), **f32),
            torch.empty((t, n, n), **f32), torch.empty((t, n), **f32))


class Site:
    """One bound site: `handle` (an int) for the torch.ops.mhc.site_* ops. The binding holds the
    site's tensors (references: in-place updates are seen) until `close()`, the end of a `with`
    block or the object's collection; a closed site's handle is refused, never reused."""

    def __init__(self, handle):
        self.handle = int(handle)
        self._open = True

    def close(self):
        """Lets the bound tensors go; later calls with this handle raise."""
        if self._open:
            self._open = False
            _RELEASE(self.handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown: torch may be gone already)
            pass

    def __repr__(self):
        return f"mhc.Site({self.handle}{'' if self._open else ', closed'})"

    def pre(self, residual, pre_mix, out=None):
        """pre_out with this site: residual [T, n, C] bf16, pre_mix [T, n] f32 or None (V4);
        writes and returns out = (layer_input [T, C] bf16, post [T, n], comb [T, n, n],
        next_pre_mix [T, n] f32), made here when None."""
        out = _pre_outputs(residual) if out is None else tuple(out)
        _PRE(self.handle, residual, pre_mix, *out)
        return out

    def coefficients(self, residual, out=None, stream=None):
        """coefficients_out with this site: writes and returns out = (post, comb,
        next_pre_mix); `stream` a torch.cuda.Stream to run on (join before reading)."""
        out = _pre_outputs(residual)[1:] if out is None else tuple(out)
        _COEF(self.handle, residual, *out, 0 if stream is None else stream.cuda_stream)
        return out

    def pre_overlap(self, residual, pre_mix, stream, out=None):
        """pre_overlap_out with this site: the coefficients on `stream` (a torch.cuda.Stream, or
        None: the current stream); writes and returns out as pre's."""
        out = _pre_outputs(residual) if out is None else tuple(out)
        _OVERLAP(self.handle, residual, pre_mix, 0 if stream is None else stream.cuda_stream,
                 *out)
        return out

    def boundary(self, sublayer_out, residual, post, comb, pre_mix, out=None):
        """boundary_out into this site (the next one): writes and returns out = (residual_next
        [T, n, C] bf16, layer_input, next_post, next_comb, next_pre_mix)."""
        out = ((torch.empty_like(residual), *_pre_outputs(residual)) if out is None
               else tuple(out))
        _BOUNDARY(self.handle, sublayer_out, residual, post, comb, pre_mix, *out)
        return out


def bind_site(fn, hc_scale, hc_base, norm_weight, rms_eps, pre_eps, sinkhorn_eps, post_mult,
              sinkhorn_iters, norm_eps, *, workspace=None, projection="tf32",
              batch_invariant=False):
    """Binds a site (torch.ops.mhc.bind_site): fn [n(n+2), n*C] f32, hc_scale [3] f32, hc_base
    [n(n+2)] f32, norm_weight [C] f32 or bf16 or None, and pre's scalars and keywords; workspace
    (uint8, mhc.make_workspace) the coefficient path's for every call, None: mhc.DEFAULT_POOL.
    Checked now (RuntimeError naming the argument); returns an mhc.Site."""
    return Site(_BIND(fn, hc_scale, hc_base, norm_weight, rms_eps, pre_eps, sinkhorn_eps,
                      post_mult, sinkhorn_iters, norm_eps, workspace=workspace,
                      projection=projection, batch_invariant=batch_invariant))
