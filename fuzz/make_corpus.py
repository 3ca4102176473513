#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzers (fuzz/corpus/*): small valid files and one malformed
file per check of the readers. The corpus is committed; rerun this only to change it
(python3 fuzz/make_corpus.py). Regression inputs found by fuzzing live next to these as
crash-*/regress-* files and are never overwritten here."""

import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(kind, name, data):
    path = os.path.join(ROOT, kind, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def st_file(header, data=b"", length=None):
    if isinstance(header, bytes):
        raw = header
    else:
        text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
        raw = text.encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def safetensors_corpus():
    w = lambda name, blob: write("safetensors", name, blob)
    w("valid-f32.safetensors", st_file({"x": entry("F32", [2, 3], 0, 24)}, f32(*range(6))))
    multi = {
        "__metadata__": {"format": "pt", "note": "seed"},
        "a": entry("BF16", [4], 0, 8),
        "b": entry("F32", [], 8, 12),
        "c": entry("I64", [0, 5], 12, 12),
        "d": entry("U8", [3], 12, 15),
        "e": entry("F8_E4M3", [1, 1], 16, 17),
    }
    w("valid-multi.safetensors", st_file(multi, bytes(range(17))))
    # One tiny official mHC layer: n=1 (NMIX=3), C=2.
    layer = {}
    data = b""
    for name, shape in [("layers.0.hc_attn_fn", [3, 2]), ("layers.0.hc_attn_base", [3]),
                        ("layers.0.hc_attn_scale", [3]), ("layers.0.attn_norm.weight", [2])]:
        n = 1
        for d in shape:
            n *= d
        layer[name] = entry("F32", shape, len(data), len(data) + 4 * n)
        data += f32(*([0.5] * n))
    w("valid-mhc-layer.safetensors", st_file(layer, data))
    w("empty-header.safetensors", st_file("{}"))
    w("padded-header.safetensors", st_file('{"x":' + json.dumps(entry("U8", [1], 0, 1)) + "}   ",
                                           b"\x01"))
    # Malformed, one per check.
    w("bad-short.safetensors", b"\x05\x00\x00")
    w("bad-length.safetensors", st_file("{}", length=1 << 40))
    w("bad-length-huge.safetensors", st_file("{}", length=(1 << 64) - 1))
    w("bad-json.safetensors", st_file('{"x": {"dtype": "F32",'))
    w("bad-array.safetensors", st_file("[1, 2, 3]"))
    w("bad-offsets.safetensors", st_file({"x": entry("F32", [2], 0, 8)}, b"\x00" * 4))
    w("bad-begin-after-end.safetensors", st_file({"x": entry("U8", [0], 4, 2)}, b"\x00" * 4))
    w("bad-overlap.safetensors", st_file({"x": entry("F32", [1], 0, 4),
                                          "y": entry("F32", [1], 2, 6)}, b"\x00" * 8))
    w("bad-dtype.safetensors", st_file({"x": entry("F31", [1], 0, 4)}, b"\x00" * 4))
    w("bad-size.safetensors", st_file({"x": entry("F32", [3], 0, 8)}, b"\x00" * 8))
    w("bad-dim.safetensors", st_file('{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}',
                                     b"\x00" * 4))
    w("bad-dim-float.safetensors", st_file('{"x":{"dtype":"F32","shape":[1e400],'
                                           '"data_offsets":[0,4]}}', b"\x00" * 4))
    w("bad-overflow.safetensors", st_file({"x": entry("F32", [2**32, 2**32, 2], 0, 0)}))
    w("bad-duplicate.safetensors", st_file('{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                           '"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
                                           b"\x00"))
    w("bad-metadata.safetensors", st_file({"__metadata__": {"k": 1}}))
    w("bad-field.safetensors", st_file({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1],
                                              "extra": 0}}, b"\x00"))
    w("bad-nested.safetensors", st_file('{"x":{"dtype":"U8","shape":[' + "[" * 200 + "]" * 200 +
                                        '],"data_offsets":[0,1]}}', b"\x00"))
    w("bad-utf8.safetensors", st_file(b'{"\xff":{}}'))


def index_corpus():
    w = lambda name, text: write("index", name, text)
    wm = {}
    for i in range(2):
        for s in ["hc_attn_fn", "hc_attn_base", "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base",
                  "hc_ffn_scale", "attn_norm.weight", "ffn_norm.weight"]:
            wm["layers.%d.%s" % (i, s)] = "model-0000%d-of-00002.safetensors" % (i + 1)
    wm["layers.0.ffn.experts.0.w1.weight"] = "model-00001-of-00002.safetensors"
    wm["norm.weight"] = "model-00002-of-00002.safetensors"
    w("valid-official.index.json", json.dumps({"metadata": {"total_size": 123456},
                                               "weight_map": wm}, indent=1))
    hf = {"model.layers.0.attn_hc.fn": "model.safetensors",
          "model.layers.0.ffn_hc.scale": "sub/model.safetensors",
          "model.layers.0.input_layernorm.weight": "model.safetensors",
          "model.layers.0.post_attention_layernorm.weight": "model.safetensors",
          "model.layers.0.mlp.experts.gate_up_proj": "model.safetensors",
          "model.norm.weight": "model.safetensors"}
    w("valid-hf.index.json", json.dumps({"weight_map": hf}))
    gap = {k: v for k, v in wm.items() if not k.startswith("layers.1.")}
    gap.update({k.replace("layers.0.", "layers.2."): v for k, v in wm.items()
                if k.startswith("layers.0.hc")})
    w("bad-layer-gap.index.json", json.dumps({"weight_map": gap}))
    short = {k: v for k, v in wm.items() if k != "layers.1.hc_ffn_fn"}
    w("bad-layer-count.index.json", json.dumps({"weight_map": short}))
    mixed = dict(wm)
    mixed["model.layers.0.attn_hc.fn"] = "x.safetensors"
    w("bad-mixed-naming.index.json", json.dumps({"weight_map": mixed}))
    w("bad-no-mhc.index.json", '{"weight_map": {"layers.0.ffn.experts.0.w1.weight": "x"}}')
    w("valid-config.json", json.dumps({
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "hidden_size": 4096, "num_hidden_layers": 43, "hc_mult": 4, "hc_eps": 1e-6,
        "hc_sinkhorn_iters": 20, "rms_norm_eps": 1e-6,
        "quantization_config": {"fmt": "e4m3", "weight_block_size": [128, 128]}}, indent=2))
    w("valid-config-v41.json", '{"hc_eps": 1e-06, "rms_norm_eps": 1e-20, "hc_sinkhorn_iters": 20}')
    w("bad-json.index.json", '{"weight_map": {"a": ')
    w("bad-duplicate.index.json", '{"weight_map": {"a": "x", "a": "y"}}')
    w("bad-dotdot.index.json", '{"weight_map": {"a": "../../etc/passwd"}}')
    w("bad-absolute.index.json", '{"weight_map": {"a": "/abs.safetensors"}}')
    w("bad-nul.index.json", '{"weight_map": {"a": "x\\u0000.safetensors"}}')
    w("bad-type.index.json", '{"weight_map": {"a": 1}}')
    w("bad-total.index.json", '{"metadata": {"total_size": 1.5}, "weight_map": {}}')
    w("bad-number.index.json", '{"metadata": {"total_size": 1e400}, "weight_map": {}}')
    w("bad-config-type.json", '{"hc_eps": "1e-6", "hc_sinkhorn_iters": 2.5}')
    w("bad-config-range.json", '{"hc_sinkhorn_iters": 100000, "hidden_size": -1}')
    w("bad-config-nested.json", '{"hc_eps": ' + "[" * 300 + "]" * 300 + "}")
    # Finite doubles outside the range the fp32 arithmetic holds (docs/limits.md).
    w("bad-config-eps-fp32.json", '{"rms_norm_eps": 1e308, "hc_eps": 1e39}')
    w("bad-config-eps-zero.json", '{"hc_eps": 0, "rms_norm_eps": 1e-45}')
    w("valid-config-eps-edges.json", '{"hc_eps": 1.1754943508222875e-38, "rms_norm_eps": 1e30}')
    w("bad-utf8.index.json", b'{"weight_map": {"\xc3\x28": "x"}}')


def hostile_corpus(w_st, w_index, w_config, depth, tensors, digits):
    """Deep nesting, many tensors and huge numbers: the classes of issue 15. Small sizes are
    committed; fuzz/run.sh writes large ones (--large) into its build directory."""
    deep = "[" * depth + "]" * depth
    w_st("hostile-deep-shape.safetensors",
         st_file('{"x":{"dtype":"U8","shape":' + deep + ',"data_offsets":[0,1]}}', b"\0"))
    w_st("hostile-deep-metadata.safetensors", st_file('{"__metadata__":{"k":' + deep + '}}'))
    many = {"t%d" % i: entry("U8", [1], i, i + 1) for i in range(tensors)}
    w_st("hostile-many-tensors.safetensors", st_file(many, bytes(tensors)))
    big = "9" * digits
    w_st("hostile-huge-dim.safetensors",
         st_file('{"x":{"dtype":"U8","shape":[' + big + '],"data_offsets":[0,1]}}', b"\0"))
    w_st("hostile-offsets-2p64.safetensors", st_file(
        '{"x":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551600,18446744073709551608]}}',
        bytes(8)))
    w_st("hostile-nul-name.safetensors",
         st_file('{"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"))
    w_index("hostile-deep.index.json", '{"weight_map":' + deep + "}")
    w_index("hostile-many.index.json", json.dumps(
        {"weight_map": {"layers.%d.hc_attn_fn" % i: "s.safetensors" for i in range(tensors)}}))
    w_index("hostile-huge-number.index.json", '{"metadata":{"total_size":' + big + '},"weight_map":{}}')
    w_index("hostile-deep-config.json", '{"hc_eps":' + deep + "}")
    w_config("hostile-deep.json", '{"projection":' + deep + "}")
    w_config("hostile-huge-number.json", '{"overlap_max_tokens":' + big + "}")
    w_config("hostile-many-keys.json", json.dumps({"k%d" % i: i for i in range(tensors)}))


def mtp_corpus():
    """The MTP blocks (docs/mtp.md): official mtp.{k}.* and the Hugging Face layout's layers past
    the trunk, valid and broken, and config.json's num_nextn_predict_layers."""
    w = lambda name, text: write("index", name, text)
    slots = ["hc_attn_fn", "hc_attn_base", "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base",
             "hc_ffn_scale", "attn_norm.weight", "ffn_norm.weight"]
    hf_slots = ["attn_hc.fn", "attn_hc.base", "attn_hc.scale", "ffn_hc.fn", "ffn_hc.base",
                "ffn_hc.scale", "input_layernorm.weight", "post_attention_layernorm.weight"]
    shard = "model.safetensors"
    official = {"layers.0.%s" % s: shard for s in slots}
    for k in range(2):
        official.update({"mtp.%d.%s" % (k, s): shard for s in slots})
        official.update({"mtp.%d.%s" % (k, s): shard for s in
                         ["hc_head_fn", "hc_head_base", "hc_head_scale", "norm.weight",
                          "enorm.weight", "e_proj.weight"]})
    w("valid-official-mtp.index.json", json.dumps({"weight_map": official}, indent=1))
    gap = {k: v for k, v in official.items() if not k.startswith("mtp.0.")}
    w("bad-mtp-gap.index.json", json.dumps({"weight_map": gap}))
    partial = {k: v for k, v in official.items() if k != "mtp.1.hc_ffn_fn"}
    w("bad-mtp-partial.index.json", json.dumps({"weight_map": partial}))
    hf = {"model.layers.%d.%s" % (i, s): shard for i in range(2) for s in hf_slots}
    hf.update({"model.layers.1.%s" % s: shard for s in
               ["hc_head_fn", "hc_head_base", "hc_head_scale", "shared_head.norm.weight"]})
    w("valid-hf-mtp.index.json", json.dumps({"weight_map": hf}, indent=1))
    early = dict(hf)
    early["model.layers.0.enorm.weight"] = shard
    w("bad-hf-mtp-in-trunk.index.json", json.dumps({"weight_map": early}))
    w("valid-config-mtp.json", json.dumps({"num_hidden_layers": 1, "num_nextn_predict_layers": 1,
                                           "hidden_size": 4096, "hc_mult": 4}))
    w("bad-config-mtp.json", '{"num_nextn_predict_layers": -1}')


def config_corpus():
    """fuzz_config: the input is --kernel-config text and, spliced in, a site file's
    __metadata__ value."""
    w = lambda name, blob: write("config", name, blob)
    w("valid-kernel-config.json", '{"enable_mhc_overlap": true, "overlap_max_tokens": 512, '
                                  '"projection": "fp32"}')
    w("valid-kernel-config-null.json", '{"enable_mhc_overlap": null, "overlap_max_tokens": null}')
    w("valid-site-metadata.json", '{"eps_h": "1e-06", "eps_n": "1e-20", "sinkhorn_iters": "20", '
                                  '"post_mult": "2", "format": "pt"}')
    w("bad-site-iters-huge.json", '{"sinkhorn_iters": "2147483647"}')
    w("bad-site-iters-zero.json", '{"sinkhorn_iters": "0"}')
    w("bad-site-eps.json", '{"eps_h": "-1", "eps_n": "nan"}')
    w("bad-site-key.json", '{"eps-h": "1e-6"}')
    w("bad-site-eps-fp32.json", '{"eps_n": "1e39", "post_mult": "1e31"}')
    w("bad-site-eps-zero.json", '{"eps_h": "0", "eps_n": "1e-50"}')
    w("valid-site-edges.json", '{"eps_h": "1.1754943508222875e-38", "eps_n": "1e30", '
                               '"post_mult": "-1e30", "sinkhorn_iters": "1000"}')
    w("bad-kernel-config-type.json", '{"projection": 3, "enable_mhc_overlap": "yes"}')
    w("bad-kernel-config-range.json", '{"overlap_max_tokens": 1e400}')
    w("bad-kernel-config-dup.json", '{"projection": "tf32", "projection": "fp32"}')


def large_corpus(out):
    """Seeds too large to commit (fuzz/run.sh replays them): 200k-deep nesting, 100k tensors,
    numbers of 100k digits."""
    def writer(kind):
        def w(name, blob):
            path = os.path.join(out, kind, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(blob if isinstance(blob, bytes) else blob.encode())
        return w
    hostile_corpus(writer("safetensors"), writer("index"), writer("config"), 200_000, 100_000,
                   100_000)


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--large":
        large_corpus(sys.argv[2])
        sys.exit(0)
    safetensors_corpus()
    index_corpus()
    mtp_corpus()
    config_corpus()
    hostile_corpus(lambda n, b: write("safetensors", n, b), lambda n, b: write("index", n, b),
                   lambda n, b: write("config", n, b), 2_000, 300, 400)
