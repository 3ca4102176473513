"""One decode step of a random-weight Hugging Face DeepSeek-V4 on the GPU, each variant captured
in a CUDA graph: HF as is, HF with mhc's hyper-connections (mhc.integrations.transformers),
HF under torch.compile, and the patched model under torch.compile(fullgraph=True); and eagerly
(not captured: the host's cost counts) HF as is, patched, and patched through the former Python
ops over mhc._C (bench/dlpack_ops.py). Also the logits of the patched against the unpatched and
the float32 twin. Writes JSON.

A decode step here is a forward of B sequences of one new token without a KV cache (HF's cache
grows by concatenation, which a CUDA graph cannot hold); the hyper-connections see exactly the
[B, 1, n, C] streams of a real decode step.
"""

import argparse
import json
import sys
import time
import traceback

import torch

sys.path.insert(0, "tests/python")
from graph_timing import median_replay_us  # noqa: E402  (bench/, the script's own directory)
from hf_model import small_model, twin  # noqa: E402

import mhc._api  # noqa: E402
from mhc.integrations import transformers as mhc_hf  # noqa: E402

sys.path.insert(0, "bench")
import dlpack_ops  # noqa: E402,F401  (torch.ops.mhc_dlpack.*: the former Python ops)


def graph_time(step, ids, reps=200):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            step(ids)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            out = step(ids)
        us = median_replay_us(g, reps, warmups=20)
    return us, out


def eager_time(step, ids, steps=20, rounds=5):
    """Wall time per eager step (µs): `steps` steps back to back, then a synchronisation; the
    median of `rounds` rounds."""
    for _ in range(3):
        step(ids)
    torch.cuda.synchronize()
    rows = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            out = step(ids)
        torch.cuda.synchronize()
        rows.append((time.perf_counter() - t0) / steps * 1e6)
    return sorted(rows)[len(rows) // 2], out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--driver", default="")
    ap.add_argument("--variants", default="unpatched,patched,compiled_unpatched,"
                                          "compiled_patched_fullgraph,eager_unpatched,"
                                          "eager_patched,eager_patched_dlpack")
    a = ap.parse_args()
    model = small_model("cuda", hidden=a.hidden, layers=a.layers)
    model.config._experts_implementation = "batched_mm"  # no host sync: capturable
    ids = torch.randint(0, 512, (a.batch, 1), device="cuda")

    # HF builds its attention mask with a host-to-device copy, which a CUDA graph cannot hold:
    # build it once outside, and pass it the way generate() does (a dict of prebuilt masks).
    from transformers.masking_utils import create_sliding_window_causal_mask

    pos = torch.zeros(a.batch, 1, dtype=torch.long, device="cuda")
    mask = create_sliding_window_causal_mask(
        config=model.config, inputs_embeds=model.model.embed_tokens(ids), attention_mask=None,
        past_key_values=None, position_ids=pos)

    def step(x):
        return model(x, attention_mask={"sliding_attention": mask}, position_ids=pos,
                     use_cache=False).logits

    results, logits = {}, {}
    with torch.no_grad():
        fp32 = twin(model, torch.float32)
        fp32.config._experts_implementation = "batched_mm"
        logits["fp32"] = fp32(ids, use_cache=False).logits.double()
        del fp32
        variants = [("unpatched", step, False), ("patched", step, "tf32"),
                    ("patched_fp32_projection", step, "fp32"),
                    ("compiled_unpatched", torch.compile(step), False),
                    ("compiled_patched_fullgraph", torch.compile(step, fullgraph=True), "tf32"),
                    ("eager_unpatched", step, False), ("eager_patched", step, "tf32"),
                    ("eager_patched_dlpack", step, "tf32")]
        stable_ops = (mhc._api._routed, mhc._api._nograd)
        for name, fn, patched in [v for v in variants if v[0] in a.variants.split(",")]:
            torch._dynamo.reset()
            mhc_hf.unpatch(model)
            if patched:
                mhc_hf.patch(model, projection=patched)
            # The mhc.* functions call these namespaces (the ops, their no-grad twins): the former
            # ops for the _dlpack variant.
            former = mhc._api._Overloads(torch.ops.mhc_dlpack)
            mhc._api._routed, mhc._api._nograd = ((former, former) if name.endswith("_dlpack")
                                                  else stable_ops)
            eager = name.startswith("eager_")
            try:
                us, out = (eager_time if eager else graph_time)(fn, ids)
                results[name] = {"decode_step_us": us, "captured_in_cuda_graph": not eager}
                logits[name] = out.double().clone()
            except Exception as e:  # recorded, not hidden: the JSON says what failed
                results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
                traceback.print_exc()
            print(name, results[name], flush=True)

    def rel(x, y):
        return ((logits[x] - logits[y]).norm() / logits[y].norm()).item()

    def per_token(x, y):  # MoE routing flips show as a few tokens far off, not as a uniform drift
        d = (logits[x] - logits[y]).reshape(a.batch, -1).norm(dim=-1)
        r = (d / logits[y].reshape(a.batch, -1).norm(dim=-1)).sort().values
        return {"median": r[a.batch // 2].item(), "max": r[-1].item(),
                "tokens_above_5e-2": int((r > 5e-2).sum())}

    acc = {}
    for x, y in (("unpatched", "fp32"), ("patched", "fp32"), ("patched", "unpatched"),
                 ("patched_fp32_projection", "fp32"), ("patched_fp32_projection", "unpatched"),
                 ("compiled_unpatched", "fp32"), ("compiled_patched_fullgraph", "fp32"),
                 ("compiled_patched_fullgraph", "compiled_unpatched")):
        if x in logits and y in logits:
            acc[f"rel_{x}_vs_{y}"] = rel(x, y)
            acc[f"per_token_{x}_vs_{y}"] = per_token(x, y)
    print(acc)
    props = torch.cuda.get_device_properties(0)
    json.dump(dict(tool="bench/hf_decode.py", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   commit=a.commit, gpu=props.name, driver=a.driver, torch=torch.__version__,
                   transformers=__import__("transformers").__version__,
                   model=dict(hidden=a.hidden, layers=a.layers, hc_mult=4, dtype="bfloat16",
                              experts_implementation="batched_mm", batch=a.batch, new_tokens=1),
                   method="forward of B one-token sequences, no KV cache, captured with "
                          "torch.cuda.graph after 3 eager warm-ups, median of 200 replays; "
                          "eager_*: not captured, wall time per step over 20 steps and a "
                          "synchronisation, median of 5 rounds",
                   results=results, logits_relative_error=acc), open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
