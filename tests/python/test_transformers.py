"""Hugging Face transformers' DeepSeek-V4 with its hyper-connections on the mhc ops.

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
    patched = _logits(model, ids)
    noise = rel_err(unpatched, fp32)[0]
    assert 0 < noise < 0.1, f"the bf16 model is {noise:.3e} from its float32 twin"
    assert rel_err(patched, fp32)[0] <= 1.25 * noise
    assert rel_err(patched, unpatched)[0] <= 2 * noise
    mhc_hf.unpatch(model)
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
