#!/usr/bin/env python3
"""Regenerates the result tables of README.md and docs/*.md from the committed JSON.

A table lives between two markers that name its kind and its source files:

    <!-- table:tune bench/results/FILE.json -->
    ...generated, never edited by hand...
    <!-- /table -->

Kinds:
  tune          one `mhc tune` tactics file: per size, native and overlap time per layer (median of
                the rounds' medians), the gain's median and range over the rounds, won or not
  overlap       one `mhc bench overlap` JSON: per size, native and overlap per layer, gain, saved;
                with the sublayers-alone arm also the mHC cost per site of each schedule
  log           a committed log, verbatim in a code block; an optional second argument is a
                regular expression (no spaces: use \s) that selects the lines to show
  prenorm       one `mhc tune` tactics file: per measured size, the fastest prenorm kernel and
                split count and the runner-up of another kernel
  invariance    one bench/batch_invariance_cost.py JSON: per size, the coefficient launch and a
                site in a stack graph, default vs batch-invariant, ratio, target met or missed
  kernels       `mhc bench kernels` JSONs of disjoint sizes (one or more): per size, the median
                µs of each kernel and site item, with the fraction of the 4.27 TB/s copy anchor
                where it means something (kernels_site: the boundary layouts' items;
                kernels_now: those, the graph floor and the graph of the model's sites)
  kernels_ab    two `mhc bench kernels` JSONs of one binary under two kernel configs, then the
                items to compare (spaces as \s): per size, each one's median µs and the ratio
  boundary      `mhc bench kernels` JSONs, one per hidden size: the fused boundary against the
                launches it replaces, alone and in the stack's steady state, with the ratios
  boundary_sweep  one `mhc bench kernels --sweep` JSON: the fused boundary per forced split count
                and stage width
  overlap_main_rounds  `mhc bench overlap` JSONs given as file name globs, several arms (commit
                and kernel config) in several rounds: per size each arm's overlap main stream
                µs per site, the range over its rounds
  overlap_files  `mhc bench overlap` JSONs (file name globs) of one binary in set-ups told apart
                by file name (-r<round> joins rounds): per set-up and shared size, the overlap's
                main stream µs per site and the sublayers alone, ranges over the rounds
  targets       issue 17's targets by hidden size: `mhc bench kernels` and `mhc bench overlap`
                JSONs given as file name globs (rounds of each preset); per target and C the
                range over the rounds, the target (C = 5120's scaled by C / 5120 where the issue
                asks for the same fraction of the floor) and met or missed
  targets_headroom  issue 17's large-M targets against the copies that bound them: `mhc bench
                kernels` JSONs (globs) and the streaming micro-benchmarks' JSONs; per target and
                C the target, the measured range, the plain copy of the same bytes, the kernel
                shape's copies, and the target and measured time over the plain copy
  copy_ceiling  the runtime's device-to-device copy of the fused boundary's bytes (the streaming
                micro-benchmark's memcpy variant, rounds as globs) against the fastest plain copy
                kernel, the post + next input launch and the fused site of `mhc bench kernels`
  python_overlap  one bench/python_overlap.py JSON: per size and round, the sublayers alone and
                each arm's mHC cost per site, and whether the arms agreed bitwise
  peers         `mhc bench kernels`, the PyTorch site and DeepGEMM's prenorm JSONs: mhc beside the
                alternatives per size (tables_peers.py; peers_readme: the same, its files named by
                docs/benchmarks.md); peer_post: FlashInfer's post beside mhc's
  peers_side    dev/peers/run.sh's peers.json and torch-compile.json (one call): mhc / the fastest
                peer that passed its check, per comparison and token count
  python_host   bench/python_ops.py's JSON [LIMIT]: host µs per eager call per op and variant
                (tables_ops.py, as the next four); python_graph: its graphs against the C++
                benchmark's items (its JSON of now or of before)
  hf_decode     bench/hf_decode.py's JSONs: per variant and run the Hugging Face decode step in
                one CUDA graph and the logits against the float32 twin
  noop_dispatch  bench/noop_dispatch.py's JSON [MODE]: per op the real op beside no-ops of the same
                schema (as registered, CPU key alone, TORCH_LIBRARY), torch.add and a two-tensor
                no-op; noop_styles: the no-ops per call style and the bound schemas
  fp8           `mhc bench kernels --only FP8` JSON: fused FP8 outputs against bf16 + group quant
  head          `mhc bench kernels --only head` JSON [bench/head_compile.py JSON]: the head
                collapse, its floor fraction, torch.compile beside it

Every table ends with the line saying where its numbers come from (GPU, driver, commit, date).
With --check nothing is written; the exit status is 1 when a table is stale.
Standard library only (a docs generator; the project itself is C++). Issue 17's kinds (boundary,
boundary_sweep, boundary_tiles, tune_boundary, targets, targets_headroom, copy_ceiling) live in
tables_boundary.py, what the kinds share in table_io.py.
"""
import argparse
import json
import pathlib
import re
import sys

from table_io import ROOT, expand, load, median_of, provenance
from tables_boundary import (table_boundary, table_boundary_sweep, table_boundary_tiles,
                             table_targets, table_targets_headroom, table_tune_boundary,
                             table_copy_ceiling)
from tables_peers import table_peer_post, table_peers, table_peers_readme, table_peers_side
from tables_ops import (table_fp8, table_head, table_hf_decode, table_noop_dispatch,
                        table_noop_styles, table_python_graph, table_python_host)
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"(<!-- table:(\S+) ([^>]*?) -->\n)(.*?)(<!-- /table -->)", re.S)


def table_tune(paths):
    (path,) = paths
    doc = load(path)
    rounds = doc["rounds"]
    shape = doc["shape"]
    lines = [
        f"C={shape['hidden']} n={shape['n']} layers={shape['layers']}, {len(rounds)} rounds; "
        f"threshold **{doc['overlap_max_tokens']} tokens**",
        "",
        "| tokens | native µs/layer | overlap µs/layer | gain % (median) | gain % (min .. max) | won |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for i, size in enumerate(doc["sizes"]):
        lines.append(
            f"| {size['tokens']} | {median_of(rounds, i, 'native_us_per_layer'):.2f} "
            f"| {median_of(rounds, i, 'overlap_us_per_layer'):.2f} "
            f"| {size['gain_percent_median']:+.2f} "
            f"| {size['gain_percent_min']:+.2f} .. {size['gain_percent_max']:+.2f} "
            f"| {'yes' if size['won'] else 'no'} |")
    lines += ["", f"Measured with `mhc tune` on {provenance(doc)}; source `{path}`."]
    return lines


def table_overlap(paths):
    (path,) = paths
    doc = load(path)
    params = doc["params"]
    lines = [
        f"{doc.get('preset', '?')}: C={params['hidden']} n={params['n']} layers={params['layers']}",
        "",
        "| tokens | native µs/layer | overlap µs/layer | gain % | saved µs/layer | saved µs/layer/token |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    # Reports with the sublayers-alone arm also give the mHC cost per site on the critical path.
    per_site = all("overlap_main_stream_us_per_site" in row for row in doc["rows"])
    if per_site:
        lines[2] += " sublayers alone µs/layer | native mHC µs/site | overlap main stream µs/site |"
        lines[3] += "---:|---:|---:|"
    for row in doc["rows"]:
        line = (f"| {row['tokens']} | {row['native_us_per_layer']:.1f} | {row['overlap_us_per_layer']:.1f} "
                f"| {row['gain_percent']:.1f} | {row['saved_us_per_layer']:.1f} "
                f"| {row['saved_us_per_layer_per_token']:.2f} |")
        if per_site:
            line += (f" {row['sublayers_us_per_layer']:.1f} | {row['native_mhc_us_per_site']:.2f} "
                     f"| {row['overlap_main_stream_us_per_site']:.2f} |")
        lines.append(line)
    lines += ["", f"`mhc bench overlap` on {provenance(doc)}; source `{path}`."]
    return lines


def table_prenorm(paths):
    (path,) = paths
    doc = load(path)
    by_size = {}
    for t in doc["prenorm_timings"]:
        by_size.setdefault(t["tokens"], []).append(t)
    lines = [
        "| tokens | fastest (kernel, splits) | µs | best other kernel | µs |",
        "|---:|---|---:|---|---:|",
    ]
    for tokens in sorted(by_size):
        ranked = sorted(by_size[tokens], key=lambda t: t["median_us"])
        best = ranked[0]
        other = next((t for t in ranked if t["kernel"] != best["kernel"]), None)
        other_text = (f"{other['kernel']}, {other['splits']} | {other['median_us']:.2f}"
                      if other else "- | -")
        lines.append(f"| {tokens} | {best['kernel']}, {best['splits']} | {best['median_us']:.2f} "
                     f"| {other_text} |")
    lines += ["", f"`mhc tune` prenorm sweep on {provenance(doc)}; source `{path}`."]
    return lines


def table_invariance(paths):
    (path,) = paths
    doc = load(path)
    items = {"coefficients (GEMM+stats)": "GEMM+stats", "site in stack, 8 per graph (each)": "site in stack"}
    rows = {}
    for r in doc["comparison"]:
        if r["kernel"] in items:
            rows.setdefault(r["tokens"], {})[items[r["kernel"]]] = r
    lines = [
        "| M | splits x tile (default / invariant) | GEMM+stats µs (default / invariant) | ratio "
        "| site in stack µs (default / invariant) | ratio | target |",
        "|---:|---|---|---:|---|---:|---|",
    ]
    for tokens in sorted(rows):
        g, s = rows[tokens].get("GEMM+stats"), rows[tokens].get("site in stack")
        if g is None or s is None:
            continue
        d, i = g["default_tuning"], g["invariant_tuning"]
        limit = g["target_ratio"]
        if limit is None:
            target = ""
        else:
            met = g["ratio"] <= limit and s["ratio"] <= limit
            target = f"<= {limit:.2f}: {'met' if met else 'missed'}"
        lines.append(
            f"| {tokens} | {d['splits']} x {d['rows_per_tile']} / {i['splits']} x {i['rows_per_tile']} "
            f"| {g['default_us']:.2f} / {g['invariant_us']:.2f} | {g['ratio']:.3f} "
            f"| {s['default_us']:.2f} / {s['invariant_us']:.2f} | {s['ratio']:.3f} | {target} |")
    lines += ["", f"`mhc bench kernels` default vs `{{\"batch_invariant\": true}}` on "
              f"{doc.get('gpu', '?')} (CUDA driver API {doc.get('driver_version', '?')}), commit "
              f"{doc.get('commit', '?')}, {doc.get('date_invariant', '?')}; source `{path}`."]
    return lines


KERNEL_COLUMNS = [
    ("empty kernel (graph floor)", "empty kernel", False),
    ("input_path", "input path", True),
    ("coefficients (GEMM+stats)", "GEMM+stats", True),
    ("post", "post", True),
    ("post + next input path", "post + next input", True),
    ("site in stack, 8 per graph (each)", "site in stack, 8 per graph (each)", True),
]


# Issue 17's rows: what a boundary costs by each layout the plan may take.
SITE_COLUMNS = [
    ("coefficients (GEMM+stats)", "GEMM+stats", True),
    ("post + next input path", "post + next input", True),
    ("site in stack, 8 per graph (each)", "site in stack (unfused)", True),
    ("site in stack, post folded (each)", "site in stack, post folded", False),
    ("site in stack, fused boundary (each)", "site in stack, fused boundary", True),
]


# Where main stands: the graph floor, then the boundary layouts, then the site in a graph of the
# model's sites (the decode sizes' closest stand-in for a real stack).
NOW_COLUMNS = [("empty kernel (graph floor)", "empty kernel", False), *SITE_COLUMNS,
               ("site in stack, model's sites per graph (each)", "site in stack, model's sites",
                False)]


def table_kernels_now(paths):
    """`mhc bench kernels` runs of main's binary (decode and large sizes): NOW_COLUMNS by size."""
    return table_kernels(paths, NOW_COLUMNS)


def table_kernels_site(paths):
    """One `mhc bench kernels` run: the boundary layouts' rows (SITE_COLUMNS) by size."""
    return table_kernels(paths, SITE_COLUMNS)


def table_kernels(paths, columns=None):
    """`mhc bench kernels` runs of one binary whose sizes do not overlap (the decode sizes from one
    call, the large ones from another): per size, the median µs of each of `columns`."""
    columns = columns or KERNEL_COLUMNS
    docs = [load(path) for path in paths]
    by_item = {}
    for path, doc in zip(paths, docs):
        for r in doc["results"]:
            key = (r["kernel"], r["tokens"])
            if key in by_item:
                raise SystemExit(f"{path}: {key[0]} at M={key[1]} is in an earlier file too")
            by_item[key] = r
    sizes = sorted({m for (_, m) in by_item})
    lines = ["| M | " + " | ".join(title for _, title, _ in columns) + " |",
             "|---:|" + "---:|" * len(columns)]
    for m in sizes:
        cells = []
        for item, _, bandwidth in columns:
            r = by_item.get((item, m))
            if r is None:
                cells.append("")
                continue
            cell = f"{r['median_us']:.2f}"
            if bandwidth and r["fraction_of_4.27TBps"] >= 0.5:
                cell += f" ({100 * r['fraction_of_4.27TBps']:.0f}%)"
            cells.append(cell)
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    doc = docs[0]
    where = (f"{doc.get('gpu', '?')} (compute capability {doc.get('compute_capability', '?')}, "
             f"CUDA driver API {doc.get('driver_version', '?')})")
    runs = "; ".join(f"commit {d.get('commit', '?')}, {d.get('date', '?')}, source `{path}`"
                     for path, d in zip(paths, docs))
    if len(paths) == 1:
        runs = f"commit {doc.get('commit', '?')}, {doc.get('date', '?')}; source `{paths[0]}`"
    lines += ["", f"`mhc bench kernels` (median µs; in brackets the bytes floor over the time, "
              f"against 4.27 TB/s, where at least 50%) on {where}, {runs}."]
    return lines


def table_kernels_ab(args):
    """Two `mhc bench kernels` runs of one binary under two kernel configs (A, then B): per size
    and item (the items are the arguments after the two files, spaces written as \\s), the
    median µs of each and B / A."""
    path_a, path_b, *items = args
    items = [i.replace("\\s", " ") for i in items]
    docs = [load(path_a), load(path_b)]
    times = [{(r["kernel"], r["tokens"]): r["median_us"] for r in d["results"]} for d in docs]
    # Two binaries (commits differ): labelled by commit; one binary: by its kernel config.
    if docs[0].get("commit") != docs[1].get("commit"):
        labels = [f"commit {d.get('commit', '?')}" for d in docs]
    else:
        keys = [k for k in ("cluster_post", "flagged_partials")
                if docs[0].get(k, "plan") != docs[1].get(k, "plan")]
        configs = [d.get("kernel_config", {}) for d in docs]
        config_keys = sorted(k for k in set(configs[0]) | set(configs[1])
                             if configs[0].get(k) != configs[1].get(k))
        if keys or not config_keys:
            keys = keys or ["cluster_post"]
            labels = [" ".join(f"{k}={json.dumps(d.get(k, 'plan'))}" for k in keys) for d in docs]
        else:  # another kernel-config key told the runs apart
            labels = [" ".join(f"{k}={json.dumps(c.get(k, 'plan'))}" for k in config_keys)
                      for c in configs]
    sizes = sorted({m for (_, m) in times[0]} & {m for (_, m) in times[1]})
    head = "| M |" + "".join(f" {i}, {labels[0]} | {i}, {labels[1]} | ratio |" for i in items)
    lines = [head, "|---:|" + "---:|---:|---:|" * len(items)]
    for m in sizes:
        cells = []
        for item in items:
            a, b = times[0].get((item, m)), times[1].get((item, m))
            cells += [f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}"] if a and b else ["", "", ""]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", f"`mhc bench kernels` (median µs) on {provenance(docs[0])}; sources `{path_a}` "
              f"and `{path_b}`."]
    return lines


def table_kernels_arms(args):
    """One item of several `mhc bench kernels` runs (the item first, spaces written as \\s, then
    the files): per size the median µs of each run, the runs labelled by the kernel-config keys
    whose values differ among them (else by commit, else by file name)."""
    item, *paths = args
    item = item.replace("\\s", " ")
    docs = [load(p) for p in paths]
    configs = [d.get("kernel_config", {}) for d in docs]
    keys = sorted({k for c in configs for k in c if len({json.dumps(x.get(k)) for x in configs}) > 1})
    labels = ([" ".join(f"{k}={json.dumps(c.get(k))}" for k in keys) for c in configs] if keys
              else [f"commit {d.get('commit', '?')}" for d in docs])
    if len(set(labels)) < len(labels):  # one binary and config: the runs by file name
        labels = [pathlib.Path(p).stem for p in paths]
    times = [{r["tokens"]: r["median_us"] for r in d["results"] if r["kernel"] == item} for d in docs]
    sizes = sorted(set.intersection(*(set(t) for t in times)))
    lines = ["| M |" + "".join(f" {l} |" for l in labels), "|---:|" + "---:|" * len(docs)]
    for m in sizes:
        lines.append(f"| {m} | " + " | ".join(f"{t[m]:.2f}" for t in times) + " |")
    sources = " ".join(f"`{p}`" for p in paths)
    lines += ["", f"`mhc bench kernels`, {item} (median µs) on {provenance(docs[0])}; sources "
              f"{sources}."]
    return lines


def arm_label(doc):
    """An overlap report's arm: its commit, and the kernel config's keys beyond the defaults."""
    config = {k: v for k, v in doc.get("kernel_config", {}).items()
              if k not in ("enable_mhc_overlap", "overlap_max_tokens", "projection")}
    extra = " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(config.items()))
    return f"{doc.get('commit', '?')}" + (f" {extra}" if extra else "")


def table_overlap_ab(paths):
    """`mhc bench overlap` runs of several arms (binaries or kernel configs), one file each: per
    size the native schedule's mHC µs per site and the overlap's main stream µs per site."""
    docs = [load(p) for p in paths]
    labels = [arm_label(d) for d in docs]
    rows = [{r["tokens"]: r for r in d["rows"]} for d in docs]
    sizes = sorted(set.intersection(*(set(r) for r in rows)))
    head = "| tokens |" + "".join(f" native mHC µs/site, {l} |" for l in labels)
    head += "".join(f" overlap main µs/site, {l} |" for l in labels)
    lines = [head, "|---:|" + "---:|" * (2 * len(docs))]
    for m in sizes:
        cells = [f"{r[m]['native_mhc_us_per_site']:.2f}" for r in rows]
        cells += [f"{r[m]['overlap_main_stream_us_per_site']:.2f}" for r in rows]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    sources = " and ".join(f"`{p}`" for p in paths)
    machine = provenance(docs[0]).split(", commit ")[0]
    lines += ["", f"`mhc bench overlap` (median of the replays; arms by commit and kernel config) "
              f"on {machine}, {docs[0].get('date', 'undated')}; sources {sources}."]
    return lines


def table_overlap_main_rounds(patterns):
    """`mhc bench overlap` runs of several arms in several rounds (file name globs, expanded in
    order): per size the overlap's main stream µs per site of each arm, as the range over its
    rounds. Arms by commit and kernel config."""
    paths = expand(patterns)
    arms = {}
    for path in paths:
        doc = load(path)
        arms.setdefault(arm_label(doc), []).append({r["tokens"]: r for r in doc["rows"]})
    sizes = sorted(set.intersection(*(set(r) for runs in arms.values() for r in runs)))
    lines = ["| tokens |" + "".join(f" {label} |" for label in arms), "|---:|" + "---:|" * len(arms)]
    for m in sizes:
        cells = []
        for runs in arms.values():
            values = sorted(r[m]["overlap_main_stream_us_per_site"] for r in runs)
            lo, hi = f"{values[0]:.2f}", f"{values[-1]:.2f}"
            cells.append(lo if lo == hi else f"{lo}-{hi}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    first = load(paths[0])
    machine = provenance(first).split(", commit ")[0]
    rounds = max(len(runs) for runs in arms.values())
    lines += ["", f"`mhc bench overlap`, the overlap's main stream in µs per site (median of the "
              f"replays; the range over {rounds} rounds) on {machine}, {first.get('date', 'undated')}; "
              f"sources `{' '.join(patterns)}` ({len(paths)} files)."]
    return lines


def table_overlap_files(patterns):
    """`mhc bench overlap` runs of one binary in several set-ups told apart by file name (file name
    globs; a trailing -r<round> joins a set-up's rounds): per size present in every set-up, the
    overlap's main stream µs per site and the sublayers alone µs per layer, ranges over rounds."""
    paths = expand(patterns)
    arms = {}
    for path in paths:
        arm = re.sub(r"-r\d+$", "", pathlib.Path(path).stem)
        arms.setdefault(arm, []).append({r["tokens"]: r for r in load(path)["rows"]})
    sizes = sorted(set.intersection(*(set(r) for runs in arms.values() for r in runs)))

    def span(runs, m, key, digits):
        values = sorted(r[m][key] for r in runs)
        lo, hi = f"{values[0]:.{digits}f}", f"{values[-1]:.{digits}f}"
        return lo if lo == hi else f"{lo}-{hi}"

    def natural(arm):  # "max8" before "max16"
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", arm)]

    arms = dict(sorted(arms.items(), key=lambda item: natural(item[0])))
    lines = ["| set-up |" + "".join(f" main stream µs/site, M = {m} |" for m in sizes)
             + "".join(f" sublayers alone µs/layer, M = {m} |" for m in sizes),
             "|---|" + "---:|" * (2 * len(sizes))]
    for arm, runs in arms.items():
        cells = [span(runs, m, "overlap_main_stream_us_per_site", 2) for m in sizes]
        cells += [span(runs, m, "sublayers_us_per_layer", 1) for m in sizes]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    first = load(paths[0])
    rounds = max(len(runs) for runs in arms.values())
    lines += ["", f"`mhc bench overlap` (median of the replays; the range over {rounds} rounds) on "
              f"{provenance(first)}; sources `{' '.join(patterns)}` ({len(paths)} files)."]
    return lines


def table_tma_stream(paths):
    """The copy-engine streaming micro-benchmark (bench/tma_stream_microbench.cu): per variant,
    µs and TB/s of x at each token count."""
    (path,) = paths
    doc = load(path)
    sizes = sorted({r["tokens"] for r in doc["results"]})
    variants = list(dict.fromkeys(r["variant"] for r in doc["results"]))
    cell = {(r["variant"], r["tokens"]): r for r in doc["results"]}
    lines = ["| variant | " + " | ".join(f"M={m} µs | TB/s" for m in sizes) + " |",
             "|---|" + "---:|---:|" * len(sizes)]
    for v in variants:
        cells = []
        for m in sizes:
            r = cell.get((v, m))
            cells += [f"{r['median_us']:.2f}", f"{r['tb_per_s']:.2f}"] if r else ["", ""]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += ["", f"{doc.get('tool', '?')} on {provenance(doc)}; {doc.get('method', '')}; source "
              f"`{path}`."]
    return lines


def table_python_overlap(paths):
    (path,) = paths
    doc = load(path)
    params = doc["params"]
    lines = [
        f"C={params['hidden']} n={params['n']} layers={params['layers']} ({params['sites']} sites)",
        "",
        "| tokens | round | sublayers alone µs/site | native mHC µs/site | overlap main stream "
        "µs/site | the same, side launch as before µs/site | bitwise |",
        "|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for row in sorted(doc["results"], key=lambda r: (r["tokens"], r["round"])):
        cost = row["mhc_us_per_site"]
        lines.append(
            f"| {row['tokens']} | {row['round']} | {row['sublayers_us_per_site']:.2f} "
            f"| {cost['native']:.2f} | {cost['overlap']:.2f} | {cost['overlap_plain']:.2f} "
            f"| {'yes' if row['bitwise_equal'] else 'NO'} |")
    lines += ["", f"`bench/python_overlap.py` (torch {doc.get('torch', '?')}) on {provenance(doc)};"
              f" source `{path}`."]
    return lines


def table_log(args):
    path, *pattern = args
    text = (ROOT / path).read_text().splitlines()
    if pattern:
        text = [line for line in text if re.search(pattern[0], line)]
    return ["```", *text, "```", "", f"Source: `{path}`."]


KINDS = {"tune": table_tune, "overlap": table_overlap, "log": table_log,
         "prenorm": table_prenorm, "invariance": table_invariance, "kernels": table_kernels,
         "kernels_ab": table_kernels_ab, "overlap_ab": table_overlap_ab,
         "overlap_main_rounds": table_overlap_main_rounds,
         "kernels_arms": table_kernels_arms, "boundary_tiles": table_boundary_tiles,
         "boundary": table_boundary,
         "boundary_sweep": table_boundary_sweep, "tma_stream": table_tma_stream,
         "python_overlap": table_python_overlap, "kernels_site": table_kernels_site,
         "kernels_now": table_kernels_now,
         "tune_boundary": table_tune_boundary, "targets": table_targets,
         "targets_headroom": table_targets_headroom, "copy_ceiling": table_copy_ceiling,
         "overlap_files": table_overlap_files, "peers": table_peers,
         "peers_readme": table_peers_readme, "peer_post": table_peer_post,
         "peers_side": table_peers_side, "python_host": table_python_host,
         "python_graph": table_python_graph, "hf_decode": table_hf_decode, "fp8": table_fp8,
         "head": table_head,
         "noop_dispatch": table_noop_dispatch, "noop_styles": table_noop_styles}


def render(text):
    def replace(m):
        kind, paths = m.group(2), m.group(3).split()
        if kind not in KINDS:
            raise SystemExit(f"unknown table kind '{kind}' (known: {', '.join(KINDS)})")
        body = "\n".join(KINDS[kind](paths)) + "\n"
        return m.group(1) + body + m.group(5)

    return MARKER.sub(replace, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a table is stale")
    args = parser.parse_args()
    stale = []
    for name in DOCS:
        path = ROOT / name
        text = path.read_text()
        new = render(text)
        if new != text:
            stale.append(name)
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print("stale tables (run dev/scripts/gen-tables.py):", ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print("updated", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
