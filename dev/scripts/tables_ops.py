"""Table kinds of dev/scripts/gen-tables.py for the engine-facing paths: the torch ops' host cost
(python_host) and graph GPU time (python_graph) from bench/python_ops.py's JSON, the Hugging Face
decode step (hf_decode) from bench/hf_decode.py's, the FP8 layer input against bf16 + a group
quantisation (fp8) and the head collapse (head) from `mhc bench kernels` JSONs, the head against
torch.compile (head_compile) from bench/head_compile.py's, and torch's price per op schema
(noop_dispatch, noop_styles) from bench/noop_dispatch.py's JSON."""
import re

from table_io import load, provenance

HOST_OPS = ["post_out", "post_pre_out", "coefficients_out", "pre_out", "pre_overlap_out",
            "boundary_out", "hc_prenorm_gemm", "join", "add_out"]
HOST_COLUMNS = [("stable", "no_grad", "stable, no_grad"),
                ("stable", "inference_mode", "stable, inference_mode"),
                ("stable_twin", "no_grad", "no-grad twin, no_grad (`mhc.*`)"),
                ("stable_site", "no_grad", "bound site, no_grad (`site_*`)"),
                ("stable", "grad", "stable, grad"),
                ("dlpack", "no_grad", "former ops, no_grad"),
                ("bare_C", "no_grad", "bare `mhc._C`")]


def _host_cell(doc, op, variant, mode):
    # The host's own time: on CUDA the rows with the GPU held (queued behind a spin kernel).
    held = doc.get("device") == "cuda"
    if op == "add_out":  # torch.add(out=), the plain torch op, in the stable ops' columns
        variant = "torch_add" if variant == "stable" else None
    for r in doc["host"]:
        if (r["op"], r["variant"], r["mode"]) == (op, variant, mode) and r["gpu_held"] == held:
            return r["us_per_call"]
    return None


def table_python_host(paths):
    """Host µs per eager call at 1 token, per op and variant; a target column marks <= LIMIT."""
    path, *rest = paths
    limit = float(rest[0]) if rest else None
    doc = load(path)
    # The columns the file has (a run may leave out a mode or a variant).
    columns = [c for c in HOST_COLUMNS
               if any(_host_cell(doc, op, c[0], c[1]) is not None for op in HOST_OPS)]
    head = "| op | " + " | ".join(c[2] for c in columns) + " |"
    lines = [head + (f" fastest stable <= {limit:g} µs |" if limit else ""),
             "|---|" + "---:|" * len(columns) + (":---:|" if limit else "")]
    for op in HOST_OPS:
        cells = [_host_cell(doc, op, v, m) for v, m, _ in columns]
        if all(c is None for c in cells):
            continue
        name = "`torch.add(out=)`" if op == "add_out" else f"`{op}`"
        line = f"| {name} | " + " | ".join("" if c is None else f"{c:.1f}" for c in cells) + " |"
        if limit:
            best = min(c for c, col in zip(cells, columns)
                       if c is not None and col[0].startswith("stable"))
            line += " yes |" if op == "add_out" or best <= limit else " no |"
        lines.append(line)
    cuda = doc.get("device") == "cuda"
    timed = [r for r in doc["host"] if r["gpu_held"] == cuda]
    calls, rounds = timed[0]["calls_per_round"], timed[0]["rounds"]
    where = (provenance(doc) if cuda else
             f"the CPU backend on {doc.get('cpu', '?')} ({doc.get('cpu_count', '?')} cores, load "
             f"average {doc['load_average'][0]:.1f}), commit {doc.get('commit', '?')}, "
             f"{doc.get('date', 'undated')}")
    lines += ["", f"µs of host wall time per call, the median of {rounds} rounds of {calls} "
              f"back-to-back calls at 1 token (C = {doc['shape']['hidden']}, n = "
              f"{doc['shape']['n']}){', the GPU held by a spin kernel' if cuda else ''}; "
              f"torch {doc['torch']}, {where}; source `{path}`."]
    return lines


def _cpp_cell(g):
    """The C++ benchmark's µs and item for one graph row: its item, or (the former files' `pre`)
    the estimate of two launches timed in separate graphs, their sum less one graph floor."""
    if g.get("cpp_median_us") is not None:
        return g["cpp_median_us"], g.get("cpp_item")
    if g.get("cpp_estimate_us") is not None:
        return g["cpp_estimate_us"], g.get("cpp_item") or "input_path + coefficients - floor"
    return None, None


def table_python_graph(paths):
    """The ops' CUDA-graph GPU time from Python against `mhc bench kernels`, per op and size, with
    the C++ item compared. The rows are `graph` (bench/python_ops.py now) or `results` (its files
    of before); Python's graphs are timed by the C++ benchmark's loop where the rows carry the
    former loop's time beside it (`python_loop_held_median_us`), else by the former loop."""
    (path,) = paths
    doc = load(path)
    rows = doc.get("graph") or doc["results"]
    tokens = sorted({g["tokens"] for g in rows})
    ops = list(dict.fromkeys(g["op"] for g in rows))
    lines = ["| op | " + " | ".join(f"{t} token{'s' if t != 1 else ''}" for t in tokens)
             + " | C++ item |", "|---|" + "---:|" * len(tokens) + "---|"]
    cell = {(g["op"], g["tokens"]): g for g in rows}
    ratios = []
    for op in ops:
        parts, item = [], None
        for t in tokens:
            g = cell.get((op, t))
            cpp, name = _cpp_cell(g) if g else (None, None)
            if cpp is None:
                parts.append("")
                continue
            item = item or name
            ratios.append(g["python_graph_median_us"] / cpp)
            parts.append(f"{g['python_graph_median_us']:.2f} / {cpp:.2f}")
        lines.append(f"| `{op}` | " + " | ".join(parts) + f" | {item or ''} |")
    reps = re.search(r"median of (\d+)", doc.get("method", ""))
    median = f"median of {reps.group(1)} replays" if reps else "median of the replays"
    if any("python_loop_held_median_us" in g for g in rows):
        loop = "both timed by the C++ benchmark's loop (a CUDA event between consecutive replays)"
    else:
        loop = ("Python's replays queued from Python behind a spin kernel (the former Python "
                "loop), the C++ ones by the C++ benchmark's loop, a CUDA event between "
                "consecutive replays in both")
    floor = (" `input_path + coefficients - floor`: two launches that the C++ benchmark times in "
             "separate graphs, their sum less one graph launch floor." if any(
                 "- floor" in (_cpp_cell(g)[1] or "") for g in rows) else "")
    lines += ["", f"µs, Python's graph / `mhc bench kernels` of the same build ({median}, input "
              f"sets rotated past L2), {loop}; Python / C++ from {min(ratios):.3f} to "
              f"{max(ratios):.3f}; torch {doc.get('torch', '?')}, {provenance(doc)}; source `{path}`.{floor}"]
    return lines


HF_VARIANTS = [("unpatched", "HF as is"),
               ("patched", "HF + `mhc.integrations.transformers.patch`"),
               ("patched_fp32_projection", "HF + `patch(model, projection=\"fp32\")`"),
               ("compiled_unpatched", "`torch.compile(HF)`"),
               ("compiled_patched_fullgraph", "`torch.compile(HF + patch, fullgraph=True)`"),
               ("eager_unpatched", "HF as is, eager"),
               ("eager_patched", "HF + patch, eager"),
               ("eager_patched_dlpack", "HF + patch through the former DLPack ops, eager")]


def _sci(x):
    return f"{x:.2e}".replace("e-0", "e-").replace("e+00", "")


def table_hf_decode(paths):
    """bench/hf_decode.py's JSONs (runs of one configuration): per variant and run, the decode
    step's µs in one CUDA graph and the logits' relative distance to the float32 twin, norm-wise
    over the batch and per token where the run reports it."""
    docs = [load(p) for p in paths]
    first = docs[0]
    for p, d in zip(paths, docs):
        if (d["model"], d.get("gpu")) != (first["model"], first.get("gpu")):
            raise SystemExit(f"{p}: another model or GPU than {paths[0]}")
    lines = ["| variant | commit | µs per step | in one CUDA graph | logits vs float32 twin, "
             "norm-wise | per token: median | max | tokens above 5e-2 |",
             "|---|---|---:|:---:|---:|---:|---:|---:|"]
    batch = first["model"]["batch"]
    for key, name in HF_VARIANTS:
        for d in docs:
            r = d["results"].get(key)
            if r is None or "decode_step_us" not in r:  # absent, or the run's error
                continue
            err = d.get("logits_relative_error", {})
            rel = err.get(f"rel_{key}_vs_fp32")
            tok = err.get(f"per_token_{key}_vs_fp32")
            cells = [f"{r['decode_step_us']:.1f}", "yes" if r["captured_in_cuda_graph"] else "no",
                     "" if rel is None else _sci(rel)]
            cells += ([_sci(tok["median"]), _sci(tok["max"]),
                       f"{tok['tokens_above_5e-2']} of {batch}"] if tok else ["", "", ""])
            lines.append(f"| {name} | {d.get('commit', '?')} | " + " | ".join(cells) + " |")
    m = first["model"]
    runs = "; ".join(f"commit {d.get('commit', '?')}, {d.get('date', 'undated')}, source `{p}`"
                     for p, d in zip(paths, docs))
    lines += ["", f"`bench/hf_decode.py`: {m['layers']} layers, hidden {m['hidden']}, hc_mult "
              f"{m['hc_mult']}, {m['dtype']}, {batch} sequences of {m['new_tokens']} new token, "
              f"MoE `{m['experts_implementation']}`; {first.get('method', '')}; torch "
              f"{first.get('torch', '?')}, transformers {first.get('transformers', '?')}, "
              f"{first.get('gpu', '?')} (driver {first.get('driver', '?')}); {runs}."]
    return lines


def _kernel_rows(doc, prefix):
    out = {}
    for r in doc["results"]:
        if r["kernel"].startswith(prefix):
            out[(r["kernel"], r["tokens"])] = r
    return out


def table_fp8(paths):
    """The FP8 rows of `mhc bench kernels --only FP8`: the fused FP8 output against the bf16 twin
    + a group quantisation (the engine's alternative) and against the bf16 twin alone; the
    boundary's default (staged) form beside its opt-in folded one."""
    (path,) = paths
    doc = load(path)
    rows = _kernel_rows(doc, "FP8 ")
    tokens = sorted({t for _, t in rows})
    # The boundary's row names by the file's age: "FP8 boundary" is the default form and
    # "FP8 boundary folded" the opt-in one; files where the folded form was the default name it
    # "FP8 boundary" and the staged one "FP8 boundary staged"; older files have the staged form
    # alone, as "FP8 boundary".
    names = {name for name, _ in rows}
    if "FP8 boundary staged" in names and "FP8 boundary folded" not in names:
        staged_name, folded_name = "FP8 boundary staged", "FP8 boundary"
    else:
        staged_name, folded_name = "FP8 boundary", "FP8 boundary folded"
    lines = ["| tokens | boundary FP8 | folded | bf16 + quant | bf16 alone | FP8 / (bf16 + quant) "
             "| FP8 - bf16 | input path FP8 | bf16 + quant | bf16 alone | FP8 / (bf16 + quant) "
             "| FP8 - bf16 |", "|---:|" + "---:|" * 11]
    for t in tokens:
        parts = []
        for what in ("FP8 boundary", "FP8 input path"):
            fused = staged_name if what == "FP8 boundary" else what
            us = [rows.get((name, t), {}).get("median_us") for name in
                  (fused, what + " as bf16 + group quant", what + "'s bf16 twin alone")]
            parts.append("" if us[0] is None else f"{us[0]:.2f}")
            if what == "FP8 boundary":  # the folded form beside the default (staged) one
                folded = rows.get((folded_name, t), {}).get("median_us")
                parts.append("" if folded is None else f"{folded:.2f}")
            parts += ["" if u is None else f"{u:.2f}" for u in us[1:]]
            parts.append(f"{us[0] / us[1]:.2f}" if us[0] and us[1] else "")
            parts.append(f"{us[0] - us[2]:+.2f}" if us[0] and us[2] else "")
        lines.append(f"| {t} | " + " | ".join(parts) + " |")
    lines += ["", f"Median µs of CUDA-graph replays, inputs rotated past L2 (`mhc bench kernels "
              f"--only FP8`, preset {doc.get('preset', '?')}, scales column-major); boundary "
              f"FP8: the default, staged form, bitwise the bf16 boundary's layer_input quantised; "
              f"folded: the opt-in form that folds the norm factor into the group scales "
              f"(Fp8Format::fold_norm, docs/fp8.md; empty in files from before that form); "
              f"FP8 / (bf16 + quant) below 1: the fused FP8 output is faster than the engine's "
              f"two launches; FP8 - bf16: what the FP8 output costs over the bf16 twin, µs; "
              f"{provenance(doc)}; source `{path}`."]
    return lines


def table_head(paths):
    """The head collapse with and without the final norm: µs and the fraction of the bytes floor,
    beside torch.compile of the same math where bench/head_compile.py's JSON is given."""
    kernels_path, *rest = paths
    doc = load(kernels_path)
    rows = _kernel_rows(doc, "head collapse")
    compiled = {}
    if rest:
        for r in load(rest[0])["results"]:
            compiled[(r["kernel"], r["tokens"])] = r
    tokens = sorted({t for _, t in rows})
    lines = ["| tokens | head collapse µs | of floor | + final norm µs | of floor "
             "| torch.compile + final norm µs |", "|---:|---:|---:|---:|---:|---:|"]
    for t in tokens:
        parts = []
        for kernel in ("head collapse", "head collapse + final norm"):
            r = rows.get((kernel, t))
            parts += [f"{r['median_us']:.2f}", f"{r['fraction_of_measured_copy']:.0%}"] if r \
                else ["", ""]
        c = compiled.get(("head collapse + final norm", t))
        parts.append(f"{c['torch_compile_median_us']:.2f}" if c else "")
        lines.append(f"| {t} | " + " | ".join(parts) + " |")
    lines += ["", "Median µs of CUDA-graph replays, inputs rotated past L2 (`mhc bench kernels "
              "--only head`); of floor: the bytes floor at the copy bandwidth measured in the same "
              f"run over the median; {provenance(doc)}; source `{kernels_path}`"
              + (f", torch.compile from `{rest[0]}` (same lease)." if rest else ".")]
    return lines


NOOP_OPS = ["post_out", "post_pre_out", "coefficients_out", "pre_out", "boundary_out"]


def _noop_rows(doc, mode):
    return {(r["variant"], r["op"]): r for r in doc["rows"] if r["mode"] == mode}


def _noop_where(doc, path, mode):
    r = doc["rows"][0]
    return (f"µs of host wall time per call under `torch.{mode}()`, the least (the median) of "
            f"{r['rounds']} interleaved rounds of {r['calls_per_round']} back-to-back calls at 1 "
            f"token (C = {doc['shape']['hidden']}, n = {doc['shape']['n']}); torch "
            f"{doc['torch']}, the CPU backend on {doc.get('cpu', '?')} ({doc.get('cpu_count', '?')}"
            f" cores, load average {doc['load_average'][0]:.1f}), commit {doc.get('commit', '?')}"
            f", {doc.get('date', 'undated')}; source `{path}`.")


def table_noop_dispatch(paths):
    """bench/noop_dispatch.py's JSON [MODE]: per op the real op, the no-op of the same schema
    (registered as mhc's, on the CPU key alone, through TORCH_LIBRARY) and the no-op's share of
    the real op; then torch.add(out=) and the two-tensor no-op."""
    path, *rest = paths
    mode = rest[0] if rest else "no_grad"
    doc = load(path)
    rows = _noop_rows(doc, mode)

    def cell(variant, op):
        r = rows.get((variant, op))
        return "" if r is None else f"{r['min_us']:.2f} ({r['median_us']:.2f})"

    lines = ["| op | real op | no-op, same schema and registration | no-op / real | no-op, CPU key "
             "alone | no-op, `TORCH_LIBRARY` |", "|---|---:|---:|---:|---:|---:|"]
    for op in NOOP_OPS:
        real, noop = rows[("real", op)], rows[("noop", op)]
        share = f"{noop['min_us'] / real['min_us']:.2f}"
        lines.append(f"| `{op}` | {cell('real', op)} | {cell('noop', op)} | {share} "
                     f"| {cell('noop_plain', op)} | {cell('noop_legacy', op)} |")
    lines.append(f"| `torch.add(out=)` | {cell('torch_add', 'add_out')} | | | | |")
    lines.append(f"| two-tensor no-op | | {cell('noop', 'noop2')} | | {cell('noop_plain', 'noop2')}"
                 f" | {cell('noop_legacy', 'noop2')} |")
    # torch's price per argument: the least-squares slope of the CPU-key-alone no-ops' least
    # rounds over their schemas' argument counts (the two-tensor no-op's 2 included).
    points = [(2, rows[("noop_plain", "noop2")]["min_us"])]
    for op in NOOP_OPS:
        inside = doc["schemas"][op].split("->")[0].strip()[1:-1]
        points.append((sum(1 for a in inside.split(", ") if a != "*"),
                       rows[("noop_plain", op)]["min_us"]))
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    slope = (sum((x - mx) * (y - my) for x, y in points) /
             sum((x - mx) ** 2 for x, _ in points))
    counts = ", ".join(f"{x}" for x, _ in points[1:])
    lines += ["", _noop_where(doc, path, mode) + " no-op / real: of the least rounds. The "
              f"schemas have {counts} arguments (in the rows' order); the CPU-key-alone no-ops "
              f"grow by {slope:.2f} µs per argument (least squares over those and the two-tensor "
              "no-op)."]
    return lines


NOOP_STYLES = [("plain_defaults", "options left to defaults"),
               ("plain_options_kw", "options as keywords"),
               ("plain_scalars_kw", "scalars as keywords"),
               ("plain_all_kw", "every argument by keyword"),
               ("plain_pos_defaults", "no `*`: all positional, options left out"),
               ("plain_pos_all", "no `*`: all positional, options given"),
               ("noop_bound", "weights and scalars bound (`int site`)")]


def table_noop_styles(paths):
    """bench/noop_dispatch.py's JSON [MODE]: the no-op of each schema (CPU key alone) called in
    each call style, and the hypothetical bound schemas."""
    path, *rest = paths
    mode = rest[0] if rest else "no_grad"
    doc = load(path)
    rows = _noop_rows(doc, mode)
    lines = ["| op | " + " | ".join(name for _, name in NOOP_STYLES) + " |",
             "|---|" + "---:|" * len(NOOP_STYLES)]
    for op in NOOP_OPS:
        cells = [rows.get((v, op)) for v, _ in NOOP_STYLES]
        lines.append(f"| `{op}` | " + " | ".join("" if r is None else f"{r['min_us']:.2f}"
                                                 for r in cells) + " |")
    lines += ["", _noop_where(doc, path, mode).replace(" (the median)", "")]
    return lines
