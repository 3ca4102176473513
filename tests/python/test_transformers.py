"""Hugging Face transformers' DeepSeek-V4 with its hyper-connections and its final hyper head
on the mhc ops, with whichever transformers release is installed (CI runs these at both ends of
mhc_hf.SUPPORTED_TRANSFORMERS: the pinned 5.17.0 and the newest).

Tolerance: the model is bf16, and HF's own mix rounds post, comb and partial sums to bf16 where
mhc rounds once from fp32, so the patched and unpatched logits differ by bf16 rounding noise.
That noise is measured on the same weights: the float32 twin of the model is the reference, the
unpatched bf16 model's distance to it is the noise level, and the patched model must be no
further from the twin than 1.25x that level and no further from the unpatched model than 2x it
(docs/python.md, "Tolerance").
"""

import pytest
import torch
from conftest import DEVICES, rel_err

pytest.importorskip("transformers.models.deepseek_v4")
from hf_model import small_model, twin  # noqa: E402

from mhc.integrations import transformers as mhc_hf  # noqa: E402


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.double()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_invariant", [False, True])
def test_patched_logits_within_bf16_noise(mhc, device, batch_invariant):
    model = small_model(device)
    reference = twin(model, torch.float32)
    ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(1)).to(device)
    unpatched, fp32 = _logits(model, ids), _logits(reference, ids)
    assert mhc_hf.patch(model, batch_invariant=batch_invariant) == 4
    assert model.model.layers[0]._mhc_options["batch_invariant"] is batch_invariant
    assert type(model.model.hc_head).__name__ == "MhcDeepseekV4HyperHead"
    patched = _logits(model, ids)
    noise = rel_err(unpatched, fp32)[0]
    assert 0 < noise < 0.1, f"the bf16 model is {noise:.3e} from its float32 twin"
    assert rel_err(patched, fp32)[0] <= 1.25 * noise
    assert rel_err(patched, unpatched)[0] <= 2 * noise
    mhc_hf.unpatch(model)
    assert type(model.model.hc_head).__name__ == "DeepseekV4HyperHead"
    assert torch.equal(_logits(model, ids), unpatched)


def test_patch_rejects_other_models(mhc):
    with pytest.raises(ValueError, match="no DeepseekV4DecoderLayer"):
        mhc_hf.patch(torch.nn.Linear(2, 2))


def test_patched_model_compiles_fullgraph(mhc):
    """The patched decoder layers trace with no graph break (the whole layer, HF's attention
    and MoE included, under fullgraph=True)."""
    torch._dynamo.reset()
    model = small_model("cpu", layers=2)
    mhc_hf.patch(model)
    layer = model.model.layers[0]
    hidden = torch.randn(1, 4, 4, 256).bfloat16()
    emb = model.model.rotary_emb
    pos = torch.arange(4)[None]
    kwargs = dict(position_embeddings={"main": emb(hidden[:, :, 0], pos, layer_type="main"),
                                       "compress": emb(hidden[:, :, 0], pos, layer_type="compress")},
                  position_ids=pos, attention_mask=None, input_ids=torch.randint(0, 512, (1, 4)))
    with torch.no_grad():
        eager = layer(hidden, **kwargs)
        compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")(hidden, **kwargs)
    assert torch.equal(compiled, eager)


@pytest.mark.parametrize("device", DEVICES)
def test_patched_hyper_head_matches_hf(mhc, device):
    """The patched head alone against HF's on the same streams: equal to bf16 rounding."""
    model = small_model(device)
    head = model.model.hc_head
    x = torch.randn(2, 5, 4, 256, generator=torch.Generator().manual_seed(3)).bfloat16().to(device)
    with torch.no_grad():
        hf_out = head(x)
        mhc_hf.patch(model)
        ours = head(x)
    assert ours.shape == hf_out.shape and ours.dtype == hf_out.dtype == torch.bfloat16
    assert rel_err(ours, hf_out)[0] < 4e-3


def test_declares_its_transformers_range(mhc):
    import transformers

    assert mhc_hf.SUPPORTED_TRANSFORMERS == ">=5.17.0,<6"
    mhc_hf.check_transformers_version()  # the installed release
    mhc_hf.check_transformers_version(transformers.__version__)
    for ok in ("5.17.0", "5.25.0", "5.31.2", "5.26.0.dev0"):
        mhc_hf.check_transformers_version(ok)
    for old_or_new in ("5.16.2", "4.57.1", "6.0.0", "nightly"):
        with pytest.raises(ValueError, match="transformers>=5.17.0,<6"):
            mhc_hf.check_transformers_version(old_or_new)


def test_reads_the_rms_epsilon_by_what_the_module_holds(mhc):
    """transformers 5.17 calls the hyper-connection norm's epsilon `eps`, 5.25
    `variance_epsilon`."""
    named_eps, named_variance = torch.nn.Module(), torch.nn.Module()
    named_eps.eps = 1e-5
    named_variance.variance_epsilon = 2e-6
    assert mhc_hf._rms_eps(named_eps) == 1e-5
    assert mhc_hf._rms_eps(named_variance) == 2e-6
    with pytest.raises(ValueError, match="has none of variance_epsilon, eps"):
        mhc_hf._rms_eps(torch.nn.Module())


def _unchanged(model):
    return all(not type(m).__name__.startswith("Mhc") for m in model.modules())


def test_patch_refuses_a_float32_model_at_the_call(mhc):
    model = small_model("cpu", dtype=torch.float32, layers=1)
    with pytest.raises(ValueError, match="bfloat16"):
        mhc_hf.patch(model)
    assert _unchanged(model)
    assert not any("_mhc" in name for m in model.modules() for name in vars(m))


def test_patch_refuses_shapes_and_devices_the_ops_cannot_run(mhc):
    odd = small_model("cpu", hidden=252, layers=1)  # C not a multiple of 8
    with pytest.raises(ValueError, match="mhc patch: the ops would refuse this model: .*C=252"):
        mhc_hf.patch(odd)
    assert _unchanged(odd)
    meta = small_model("cpu", layers=1).to("meta")
    with pytest.raises(ValueError, match="is on meta"):
        mhc_hf.patch(meta)
    assert _unchanged(meta)
    with pytest.raises(ValueError, match="projection"):
        mhc_hf.patch(small_model("cpu", layers=1), projection="bf16")
