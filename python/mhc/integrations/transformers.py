"""Hugging Face transformers' DeepSeek-V4 (transformers.models.deepseek_v4) on the mhc ops.

Supported: transformers SUPPORTED_TRANSFORMERS (tested at both ends, 5.17.0 and 5.25.0). The
module's attributes are read by what they hold, not by one release's names (the RMS epsilon is
`variance_epsilon` in one release and `eps` in another), and `patch` checks the model when it is
called: a model that the ops cannot run (not bfloat16, on another device than cpu or cuda, shapes
outside the kernels' limits) is refused there, with the reason, before anything changes.

HF's V4 uses the V4 (non-delayed) form: each site collapses its streams with its own `pre`, so
the sublayer waits for the coefficients (pre_mix=None in mhc.pre; no overlap). `patch(model)`
turns every DeepseekV4DecoderLayer into a subclass whose forward runs, per site,

    layer_input, post, comb, _ = mhc.pre(residual, hc.fn, hc.scale, hc.base, norm.weight, None,
                                         rms_eps, hc_eps, hc_eps, 2.0, hc_sinkhorn_iters, norm_eps)
    residual = mhc.post(sublayer(layer_input), residual, post, comb)

replacing HF's hyper-connection module, its RMSNorm of the collapsed streams and its bf16 post
mix, and turns the model's DeepseekV4HyperHead (the collapse after the last layer) into
`mhc.head(residual, hc_fn, hc_scale, hc_base, rms_eps, hc_eps)` (docs/head.md); the final RMSNorm
after it stays HF's. Attention and MoE stay HF's. The mapping: `rms_eps` = the hyper-connection's
input_norm epsilon (config.rms_norm_eps), `pre_eps` = `sinkhorn_eps` = hc_eps, `post_mult` = 2
(HF's `2 * sigmoid`), `norm_eps` = the layer norm's variance_epsilon.

The residual streams must be bf16 (the model in bfloat16). mhc computes the coefficients and
both mixes in fp32 with one bf16 rounding per output, where HF rounds post, comb and the partial
sums to bf16: the two agree to bf16 rounding noise (docs/python.md, "Tolerance").
"""

import re

import torch

import mhc
from mhc import _checks

SUPPORTED_TRANSFORMERS = ">=5.17.0,<6"
_MIN_VERSION = (5, 17, 0)
_MAX_MAJOR = 6

_PATCHED = "_mhc_original_class"


def _version_tuple(text):
    parts = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if parts is None:
        return None
    return tuple(int(p or 0) for p in parts.groups())


def check_transformers_version(version=None):
    """Refuses a transformers outside SUPPORTED_TRANSFORMERS (the installed one by default)."""
    if version is None:
        import transformers

        version = transformers.__version__
    parsed = _version_tuple(version)
    if parsed is None or parsed < _MIN_VERSION or parsed[0] >= _MAX_MAJOR:
        raise ValueError(f"mhc patch: transformers {version} is not supported; mhc.integrations."
                         f"transformers supports transformers{SUPPORTED_TRANSFORMERS}")


# ---- reading the modules by what they hold ----------------------------------------------------

def _attribute(module, names, what):
    """The first of `names` that `module` holds, for the `what` the caller needs."""
    for name in names:
        value = getattr(module, name, None)
        if value is not None:
            return value
    raise ValueError(f"mhc patch: {type(module).__name__} has none of {', '.join(names)} "
                     f"(its {what}); this transformers release is not one mhc knows "
                     f"(supported: transformers{SUPPORTED_TRANSFORMERS})")


def _rms_eps(norm):
    """An RMSNorm's epsilon: variance_epsilon (transformers 5.25's DeepseekV4UnweightedRMSNorm and
    every DeepseekV4RMSNorm) or eps (5.17's DeepseekV4UnweightedRMSNorm)."""
    return float(_attribute(norm, ("variance_epsilon", "eps"), "RMS epsilon"))


def _fp32(*params):
    """fp32 contiguous copies of parameters (views where they already are)."""
    return tuple(p.detach().float().contiguous() for p in params)


class _Site:
    """One hyper-connection site: its weights (fp32), its norm and the scalars of mhc.pre."""

    def __init__(self, hc, norm):
        self.fn, self.scale, self.base = _fp32(_attribute(hc, ("fn",), "projection"),
                                               _attribute(hc, ("scale",), "scales"),
                                               _attribute(hc, ("base",), "biases"))
        self.norm_weight = _attribute(norm, ("weight",), "weight").detach()
        self.rms_eps = _rms_eps(_attribute(hc, ("input_norm",), "input RMSNorm"))
        self.hc_eps = float(_attribute(hc, ("hc_eps", "eps"), "epsilon"))
        self.iters = int(_attribute(hc, ("hc_sinkhorn_iters",), "Sinkhorn iterations"))
        self.norm_eps = _rms_eps(norm)

    def run(self, residual, sublayer, options):
        batch, seq, n, hidden = residual.shape
        flat = residual.reshape(batch * seq, n, hidden)
        layer_input, post, comb, _ = mhc.pre(
            flat, self.fn, self.scale, self.base, self.norm_weight, None, self.rms_eps,
            self.hc_eps, self.hc_eps, 2.0, self.iters, self.norm_eps, **options)
        out = sublayer(layer_input.view(batch, seq, hidden)).reshape(batch * seq, hidden)
        if out.dtype != torch.bfloat16:
            raise ValueError(f"mhc patch: the sublayer returned {out.dtype}; the model must run "
                             "in bfloat16 (from_config(..., dtype=torch.bfloat16))")
        return mhc.post(out.contiguous(), flat, post, comb).view(batch, seq, n, hidden)


class _Head:
    """The head collapse's weights (fp32) and epsilons."""

    def __init__(self, head):
        self.fn, self.scale, self.base = _fp32(_attribute(head, ("hc_fn",), "projection"),
                                               _attribute(head, ("hc_scale",), "scale"),
                                               _attribute(head, ("hc_base",), "biases"))
        self.rms_eps = _rms_eps(_attribute(head, ("input_norm",), "input RMSNorm"))
        self.hc_eps = float(_attribute(head, ("eps", "hc_eps"), "epsilon"))


# ---- the patched forwards ---------------------------------------------------------------------

def _layer_forward(self, hidden_states, input_ids=None, **kwargs):
    def attention(x):
        return self.self_attn(x, **kwargs)[0]

    def mlp(x):
        return self.mlp(x, input_ids=input_ids)

    attn, ffn = self._mhc_sites
    hidden_states = attn.run(hidden_states, attention, self._mhc_options)
    return ffn.run(hidden_states, mlp, self._mhc_options)


def _head_forward(self, x):
    h = self._mhc_head
    batch, seq, n, hidden = x.shape
    out = mhc.head(x.reshape(batch * seq, n, hidden), h.fn, h.scale, h.base, h.rms_eps, h.hc_eps)
    return out.view(batch, seq, hidden)


_CLASSES = {}


def _patched_class(original, forward):
    cls = _CLASSES.get(original)
    if cls is None:
        cls = type("Mhc" + original.__name__, (original,), {"forward": forward})
        _CLASSES[original] = cls
    return cls


def _swap(module, forward):
    original = getattr(module, _PATCHED, type(module))
    module.__class__ = _patched_class(original, forward)
    setattr(module, _PATCHED, original)


# ---- the checks at the call -------------------------------------------------------------------

def _check_model(model, layers, heads, projection, batch_invariant):
    """Everything the patched forward would refuse, refused now, naming the problem."""
    if projection not in ("tf32", "fp32"):
        raise ValueError(f"mhc patch: projection must be 'tf32' or 'fp32', got {projection!r}")
    if not isinstance(batch_invariant, bool):
        raise TypeError(f"mhc patch: batch_invariant must be a bool, got "
                        f"{type(batch_invariant).__name__}")
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    weight = getattr(embeddings, "weight", None)
    if weight is not None and weight.dtype != torch.bfloat16:
        raise ValueError(f"mhc patch: the model's residual streams would be {weight.dtype} (its "
                         "embeddings are); mhc's ops take bfloat16 streams: load or make the model "
                         "with dtype=torch.bfloat16")
    devices = {p.device for layer in layers for p in layer.parameters()}
    devices |= {p.device for head in heads for p in head.parameters()}
    if len(devices) > 1:
        raise ValueError(f"mhc patch: the decoder layers are on several devices "
                         f"({', '.join(sorted(str(d) for d in devices))}); mhc runs a call on one")
    device = next(iter(devices))
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"mhc patch: the model is on {device}; mhc runs on cpu and cuda")
    if device.type == "cuda" and not torch.ops.mhc._built_with_cuda():
        raise ValueError("mhc patch: the model is on CUDA, but this mhc was built without the "
                         "CUDA backend (MHC_PYTHON_CUDA=1 scripts/python-env.sh)")
    try:
        for layer in layers:
            for site in layer._mhc_pending:
                _check_site(site, device)
        for head in heads:
            _check_head(head._mhc_pending, device)
    except RuntimeError as e:  # the ops' own checks: the same conditions and words
        raise ValueError(f"mhc patch: the ops would refuse this model: {e}") from e


def _check_shape(op, n, hidden, device):
    # The shape limits of the ops on this device (the same messages as the ops').
    _checks.shape_limits(op, n, hidden, device.type)


def _check_site(site, device):
    nmix, k = site.fn.shape
    n = int(round((nmix + 1) ** 0.5)) - 1
    if n < 1 or n * (n + 2) != nmix or k % n:
        raise ValueError(f"mhc patch: a hyper-connection's fn has shape {list(site.fn.shape)}, "
                         "expected [n(n+2), n*C]")
    hidden = k // n
    _check_shape("pre", n, hidden, device)
    if tuple(site.scale.shape) != (3,) or tuple(site.base.shape) != (nmix,):
        raise ValueError(f"mhc patch: a hyper-connection's scale/base have shapes "
                         f"{list(site.scale.shape)}/{list(site.base.shape)}, expected [3]/[{nmix}]")
    if tuple(site.norm_weight.shape) != (hidden,):
        raise ValueError(f"mhc patch: a layer norm's weight has shape "
                         f"{list(site.norm_weight.shape)}, expected [{hidden}]")
    _checks.scalars("pre", site.rms_eps, site.hc_eps, site.hc_eps, 2.0, site.iters, "tf32")
    _checks.param_range("pre", "norm_eps", site.norm_eps)


def _check_head(head, device):
    n, k = head.fn.shape
    if n < 1 or k % n:
        raise ValueError(f"mhc patch: the hyper head's hc_fn has shape {list(head.fn.shape)}, "
                         "expected [n, n*C]")
    _check_shape("head", n, k // n, device)
    if tuple(head.scale.shape) != (1,) or tuple(head.base.shape) != (n,):
        raise ValueError(f"mhc patch: the hyper head's hc_scale/hc_base have shapes "
                         f"{list(head.scale.shape)}/{list(head.base.shape)}, expected [1]/[{n}]")
    _checks.param_range("head", "rms_eps", head.rms_eps)
    _checks.param_range("head", "pre_eps", head.hc_eps)


# ---- the API ----------------------------------------------------------------------------------

def patch(model, projection="tf32", batch_invariant=False):
    """Runs every DeepSeek-V4 decoder layer's hyper-connections and the final hyper head on the
    mhc ops, in place.

    `projection` is the precision of the coefficient projection on CUDA: "tf32" (the kernels'
    default, as DeepGEMM's) or "fp32" (what HF computes: its F.linear runs in fp32).
    `batch_invariant=True` makes a token's outputs bitwise independent of the batch it is in
    (docs/batch_invariance.md), at some cost in speed.

    The model is checked first (transformers' version, dtype bfloat16, one cpu or cuda device,
    the shapes and epsilons the ops take); a model that fails is refused with ValueError and left
    as it was. Returns the number of decoder layers patched. Call again after loading new weights
    (the fp32 copies of the hyper-connection parameters are taken here); `unpatch` restores HF's
    forwards.
    """
    check_transformers_version()
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

    layers = [m for m in model.modules() if isinstance(m, hf.DeepseekV4DecoderLayer)]
    if not layers:
        raise ValueError("mhc patch: no DeepseekV4DecoderLayer in this model")
    heads = [m for m in model.modules() if isinstance(m, hf.DeepseekV4HyperHead)]
    try:
        for layer in layers:
            layer._mhc_pending = (
                _Site(_attribute(layer, ("attn_hc",), "attention hyper-connection"),
                      _attribute(layer, ("input_layernorm",), "attention norm")),
                _Site(_attribute(layer, ("ffn_hc",), "FFN hyper-connection"),
                      _attribute(layer, ("post_attention_layernorm",), "FFN norm")))
        for head in heads:
            head._mhc_pending = _Head(head)
        _check_model(model, layers, heads, projection, batch_invariant)
    finally:
        pending = [(m, m.__dict__.pop("_mhc_pending", None)) for m in (*layers, *heads)]
    options = dict(projection=projection, batch_invariant=batch_invariant)
    for module, prepared in pending:
        if isinstance(module, hf.DeepseekV4DecoderLayer):
            _swap(module, _layer_forward)
            module._mhc_sites = prepared
            module._mhc_options = options
        else:
            _swap(module, _head_forward)
            module._mhc_head = prepared
    return len(layers)


def unpatch(model):
    """Restores HF's forwards of every module `patch` changed."""
    for module in model.modules():
        original = getattr(module, _PATCHED, None)
        if original is None:
            continue
        module.__class__ = original
        for name in (_PATCHED, "_mhc_sites", "_mhc_options", "_mhc_head"):
            module.__dict__.pop(name, None)
