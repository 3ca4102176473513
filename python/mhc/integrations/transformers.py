"""Hugging Face transformers' DeepSeek-V4 (transformers.models.deepseek_v4) on the mhc ops.

HF's V4 uses the V4 (non-delayed) form: each site collapses its streams with its own `pre`, so
the sublayer waits for the coefficients (pre_mix=None in mhc.pre; no overlap). `patch(model)`
turns every DeepseekV4DecoderLayer into a subclass whose forward runs, per site,

    layer_input, post, comb, _ = mhc.pre(residual, hc.fn, hc.scale, hc.base, norm.weight, None,
                                         rms_eps, hc_eps, hc_eps, 2.0, hc_sinkhorn_iters, norm_eps)
    residual = mhc.post(sublayer(layer_input), residual, post, comb)

replacing HF's hyper-connection module, its RMSNorm of the collapsed streams and its bf16 post
mix. Everything else (attention, MoE, the final HyperHead collapse) stays HF's. The mapping:
`rms_eps` = hc.input_norm.eps (config.rms_norm_eps), `pre_eps` = `sinkhorn_eps` = hc.hc_eps,
`post_mult` = 2 (HF's `2 * sigmoid`), `norm_eps` = the layer norm's variance_epsilon.

The residual streams must be bf16 (the model in bfloat16). mhc computes the coefficients and
both mixes in fp32 with one bf16 rounding per output, where HF rounds post, comb and the partial
sums to bf16: the two agree to bf16 rounding noise (docs/python.md, "Tolerance").
"""

import torch

import mhc

_PATCHED = "_mhc_original_class"


def _hc_weights(hc):
    """fp32 views of the hyper-connection's parameters (copies only if the model cast them)."""
    return tuple(p.detach().float().contiguous() for p in (hc.fn, hc.scale, hc.base))


def _site(layer, hc, norm, weights, residual, sublayer, options):
    fn, scale, base = weights
    batch, seq, n, hidden = residual.shape
    flat = residual.reshape(batch * seq, n, hidden)
    layer_input, post, comb, _ = mhc.pre(
        flat, fn, scale, base, norm.weight.detach(), None, hc.input_norm.eps, hc.hc_eps,
        hc.hc_eps, 2.0, hc.hc_sinkhorn_iters, norm.variance_epsilon, **options)
    out = sublayer(layer_input.view(batch, seq, hidden))
    out = out.reshape(batch * seq, hidden)
    if out.dtype != torch.bfloat16:
        raise ValueError(f"mhc patch: the sublayer returned {out.dtype}; the model must run in "
                         "bfloat16 (from_config(..., dtype=torch.bfloat16))")
    return mhc.post(out.contiguous(), flat, post, comb).view(batch, seq, n, hidden)


def _patched_forward(self, hidden_states, input_ids=None, **kwargs):
    def attention(x):
        return self.self_attn(x, **kwargs)[0]

    def mlp(x):
        return self.mlp(x, input_ids=input_ids)

    attn_w, ffn_w = self._mhc_weights
    opts = self._mhc_options
    hidden_states = _site(self, self.attn_hc, self.input_layernorm, attn_w, hidden_states,
                          attention, opts)
    return _site(self, self.ffn_hc, self.post_attention_layernorm, ffn_w, hidden_states, mlp, opts)


def patch(model, projection="tf32", batch_invariant=False):
    """Runs every DeepSeek-V4 decoder layer's hyper-connections on the mhc ops, in place.

    `projection` is the precision of the coefficient projection on CUDA: "tf32" (the kernels'
    default, as DeepGEMM's) or "fp32" (what HF computes: its F.linear runs in fp32).
    `batch_invariant=True` makes a token's outputs bitwise independent of the batch it is in
    (docs/batch_invariance.md), at some cost in speed.

    Returns the number of layers patched. Call again after loading new weights (the fp32 copies
    of the hyper-connection parameters are taken here); `unpatch` restores HF's forward.
    """
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

    count = 0
    for module in model.modules():
        if not isinstance(module, hf.DeepseekV4DecoderLayer):
            continue
        original = getattr(module, _PATCHED, type(module))
        module.__class__ = _patched_class(original)
        setattr(module, _PATCHED, original)
        module._mhc_weights = (_hc_weights(module.attn_hc), _hc_weights(module.ffn_hc))
        module._mhc_options = dict(projection=projection, batch_invariant=batch_invariant)
        count += 1
    if count == 0:
        raise ValueError("mhc patch: no DeepseekV4DecoderLayer in this model")
    return count


def unpatch(model):
    for module in model.modules():
        original = getattr(module, _PATCHED, None)
        if original is not None:
            module.__class__ = original
            del module._mhc_weights, module._mhc_options
            delattr(module, _PATCHED)


_CLASSES = {}


def _patched_class(original):
    cls = _CLASSES.get(original)
    if cls is None:
        cls = type("Mhc" + original.__name__, (original,), {"forward": _patched_forward})
        _CLASSES[original] = cls
    return cls
