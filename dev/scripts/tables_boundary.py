"""gen-tables.py's kinds for issue 17: the fused boundary against the launches it replaces, its
split and tile sweeps, the tuner's crossover, and the issue's targets by hidden size."""
import re

from table_io import expand, load, provenance


def table_boundary(paths):
    """`mhc bench kernels` JSONs of the fused boundary (one per hidden size): per size, the fused
    launch against the two launches it replaces, and the stack's steady state with and without
    it, each with fused / unfused."""
    pairs = [("fused boundary (one launch)", "coef + post with next input"),
             ("site in stack, fused boundary (each)", "site in stack, 8 per graph (each)")]
    lines = ["| C | n | M | fused boundary (one launch) | coef + post with next input | ratio | "
             "site in stack, fused boundary | site in stack, unfused | ratio |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for path in paths:
        doc = load(path)
        hidden = re.search(r"C=(\d+)", doc.get("params", "")).group(1)
        streams = re.search(r"n=(\d+)", doc.get("params", "")).group(1)
        times = {(r["kernel"], r["tokens"]): r["median_us"] for r in doc["results"]}
        for m in sorted({r["tokens"] for r in doc["results"]}):
            cells = []
            for fused, unfused in pairs:
                a, b = times.get((fused, m)), times.get((unfused, m))
                cells += [f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}"] if a and b else ["", "", ""]
            lines.append(f"| {hidden} | {streams} | {m} | " + " | ".join(cells) + " |")
    sources = " and ".join(f"`{p}`" for p in paths)
    lines += ["", f"`mhc bench kernels` (median µs) on {provenance(load(paths[0]))}; sources "
              f"{sources}."]
    return lines


def table_boundary_sweep(paths):
    """One `mhc bench kernels --sweep` JSON: per size and stage width (64 or 32 columns), the
    fused boundary at each forced split count (CTAs per 128-token tile, one cluster) and at the
    plan's rule; the fastest of each row in bold."""
    (path,) = paths
    doc = load(path)
    rule_items = {"fused boundary (one launch)": 64, "fused boundary, 32-column stages": 32}
    sweep, rule = {}, {}
    for r in doc["results"]:
        columns = r.get("boundary_stage_columns") or 64
        if r.get("boundary_rows") == 64:  # 64-token tiles (forced) apart from the 128-row rows
            columns = f"{columns}, 64-row tiles"
        elif columns == 128:  # the wide stages: 32-token tiles
            columns = "128, 32-row tiles"
        if r["kernel"].strip() == "fused boundary sweep":
            sweep[(r["tokens"], columns, r["boundary_splits"])] = r["median_us"]
        elif r["kernel"] in rule_items:
            rule[(r["tokens"], rule_items[r["kernel"]])] = r["median_us"]
    counts = sorted({s for (_, _, s) in sweep})
    lines = ["| M | stage columns | " + " | ".join(f"{s} split{'s' if s > 1 else ''}"
                                                   for s in counts) + " | the rule |",
             "|---:|---:|" + "---:|" * (len(counts) + 1)]
    order = {64: 0, 32: 1}
    for m, columns in sorted({(m, c) for (m, c, _) in sweep},
                             key=lambda k: (k[0], order.get(k[1], 2), str(k[1]))):
        times = [sweep.get((m, columns, s)) for s in counts]
        best = min(t for t in times if t is not None)
        cells = ["" if t is None else (f"**{t:.1f}**" if t == best else f"{t:.1f}")
                 for t in times]
        cells.append(f"{rule[(m, columns)]:.1f}" if (m, columns) in rule else "")
        lines.append(f"| {m} | {columns} | " + " | ".join(cells) + " |")
    lines += ["", f"`mhc bench kernels --sweep` (median µs) on {provenance(doc)}; source "
              f"`{path}`."]
    return lines


def table_boundary_tiles(paths):
    """`mhc bench kernels` JSONs (several hidden sizes, rounds of each) with the fused boundary's
    rows per forced tile height: per C and size, the site in a stack graph with the rule's tile
    (rows x splits), with 128- and 64-row tiles forced, and unfused; ranges over the rounds."""
    items = {"site in stack, fused boundary (each)": "rule",
             "site in stack, fused boundary, 128-row tiles": "128",
             "site in stack, fused boundary, 64-row tiles": "64",
             "site in stack, fused boundary, wide stages": "wide",
             "site in stack, 8 per graph (each)": "unfused"}
    times, tiles = {}, {}
    for path in paths:
        doc = load(path)
        hidden = int(re.search(r"C=(\d+)", doc.get("params", "")).group(1))
        for r in doc["results"]:
            if r["kernel"] in items:
                key = (hidden, r["tokens"], items[r["kernel"]])
                times.setdefault(key, []).append(r["median_us"])
                if items[r["kernel"]] == "rule" and r.get("boundary_tile_rows"):
                    tiles[(hidden, r["tokens"])] = f"{r['boundary_tile_rows']} x " \
                                                   f"{r['boundary_tile_splits']}"
                elif items[r["kernel"]] == "rule":  # a binary that did not report its tile
                    tiles.setdefault((hidden, r["tokens"]), "")

    def span(values):
        lo, hi = min(values), max(values)
        return f"{lo:.1f}" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}-{hi:.1f}"

    # The wide stages' column only where a binary had them (older tables keep their columns).
    wide = any(k == "wide" for (_, _, k) in times)
    kinds = ("rule", "128", "64") + (("wide",) if wide else ()) + ("unfused",)
    lines = ["| C | M | the rule's tile (rows x splits) | fused, the rule | fused, 128-row tiles | "
             "fused, 64-row tiles | " + ("fused, wide stages | " if wide else "") + "unfused |",
             "|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if wide else "")]
    for hidden, m in sorted(tiles):
        cells = [tiles[(hidden, m)]]
        cells += [span(times[(hidden, m, k)]) if (hidden, m, k) in times else ""
                  for k in kinds]
        lines.append(f"| {hidden} | {m} | " + " | ".join(cells) + " |")
    sources = " ".join(f"`{p}`" for p in paths)
    lines += ["", f"`mhc bench kernels`, the site in a stack graph (median µs per site; a range "
              f"over the rounds) on {provenance(load(paths[0]))}; sources {sources}."]
    return lines


def table_tune_boundary(paths):
    """`mhc tune` tactics files with boundary timings (one per hidden size): per size the site in a
    stack graph with the fused boundary and unfused, per C, and each file's chosen threshold."""
    docs = [load(p) for p in paths]
    sizes = sorted({r["tokens"] for d in docs for r in d["boundary_timings"]})
    head = "| tokens |" + "".join(f" C={d['shape']['hidden']} fused | unfused |" for d in docs)
    lines = [head, "|---:|" + "---:|---:|" * len(docs)]
    for m in sizes:
        cells = []
        for d in docs:
            row = {r["tokens"]: r for r in d["boundary_timings"]}.get(m)
            if row is None:
                cells += ["", ""]
                continue
            fused, unfused = f"{row['fused_us']:.2f}", f"{row['unfused_us']:.2f}"
            cells += [f"**{fused}**" if row["fused_us"] < row["unfused_us"] else fused, unfused]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    chosen = ", ".join(f"C={d['shape']['hidden']}: {d['fused_boundary_min_tokens']}" for d in docs)
    sources = " ".join(f"`{p}`" for p in paths)
    lines += ["", f"`mhc tune`, the site in a stack graph (median µs; bold where the fused boundary "
              f"won) on {provenance(docs[0])}; fused_boundary_min_tokens {chosen}; sources "
              f"{sources}."]
    return lines


# Issue 17's targets at C = 5120, n = 4: (what, source, item, tokens, target µs, scales with C).
# The large-M targets are fractions of the bytes floor, which is proportional to C at n = 4, so at
# other hidden sizes they scale by C / 5120 (docs/benchmarks.md, "The fused boundary's bytes
# floor"); the decode and main-stream targets are latencies and stay as they are.
ISSUE17_TARGETS = [
    ("site in a stack graph, 1-16 tokens", "kernels", "site in stack, 8 per graph (each)",
     (1, 2, 4, 8, 12, 16), 6.0, False),
    ("the same, a graph of the model's sites", "kernels",
     "site in stack, model's sites per graph (each)", (1, 2, 4, 8, 12, 16), 6.0, False),
    ("overlap main stream per site, 1-8 tokens", "overlap", None, (1, 2, 4, 8), 3.5, False),
    ("overlap main stream per site, 12-16 tokens", "overlap", None, (12, 16), 3.5, False),
    ("site in a stack graph, 4096 tokens", "kernels", "site in stack, fused boundary (each)",
     (4096,), 120.0, True),
    ("site in a stack graph, 8192 tokens", "kernels", "site in stack, fused boundary (each)",
     (8192,), 235.0, True),
    ("prenorm GEMM + stats, 4096 tokens", "kernels", "coefficients (GEMM+stats)", (4096,), 45.0,
     True),
    ("prenorm GEMM + stats, 8192 tokens", "kernels", "coefficients (GEMM+stats)", (8192,), 84.0,
     True),
]

# Rows that runs before the bench measured them (2886f1b) cannot fill: left out when empty.
ISSUE17_OPTIONAL_TARGETS = {"the same, a graph of the model's sites"}


def table_targets(patterns):
    """Issue 17's targets by hidden size (ISSUE17_TARGETS) from `mhc bench kernels` and `mhc bench
    overlap` runs (file name globs): per target and C, the measured range over every size and
    round it covers, the target, and met (every value at or under it) or missed."""
    paths = expand(patterns)
    values = {}  # (target index, C) -> measured µs
    for path in paths:
        doc = load(path)
        if doc.get("bench") == "overlap":
            hidden = doc["params"]["hidden"]
            rows = {r["tokens"]: r["overlap_main_stream_us_per_site"] for r in doc["rows"]}
            items = {(None, m): v for m, v in rows.items()}
            kind = "overlap"
        else:
            hidden = int(re.search(r"C=(\d+)", doc.get("params", "")).group(1))
            items = {(r["kernel"], r["tokens"]): r["median_us"] for r in doc["results"]}
            kind = "kernels"
        for i, (_, source, item, sizes, _, _) in enumerate(ISSUE17_TARGETS):
            if source != kind:
                continue
            for m in sizes:
                if (item, m) in items:
                    values.setdefault((i, hidden), []).append(items[(item, m)])
    hiddens = sorted({c for _, c in values})
    lines = ["| target |" + "".join(f" C = {c} |" for c in hiddens),
             "|---|" + "---|" * len(hiddens)]
    for i, (what, _, _, _, target, scales) in enumerate(ISSUE17_TARGETS):
        if what in ISSUE17_OPTIONAL_TARGETS and not any((i, c) in values for c in hiddens):
            continue
        cells = []
        for c in hiddens:
            got = values.get((i, c))
            if not got:
                cells.append("")
                continue
            bound = target * c / 5120 if scales else target
            lo, hi = min(got), max(got)
            span = f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"
            verdict = "met" if hi <= bound else ("missed" if lo > bound else "partly met")
            cells.append(f"{span} (<= {bound:.1f}): {verdict}")
        lines.append(f"| {what} |" + "".join(f" {cell} |" for cell in cells))
    first = load(paths[0])
    machine = provenance(first).split(", commit ")[0]
    commits = sorted({load(p).get("commit", "?") for p in paths})
    lines += ["", f"µs (medians; the range over every size and round a row covers), `mhc bench "
              f"kernels` and `mhc bench overlap` on {machine}, commit {', '.join(commits)}, "
              f"{first.get('date', 'undated')}; sources `{' '.join(patterns)}` ({len(paths)} "
              f"files)."]
    return lines


# The copies that bound each of issue 17's large-M targets, by the kernels item it times: the
# micro-benchmark's tool (its JSON's "tool" names it), the plain copy of the same bytes (nothing
# computed, whole rows) and the kernel shape's own copies (its boxes, ring and grid, nothing
# computed).
HEADROOM_COPIES = {
    "site in stack, fused boundary (each)": (
        "boundary_stream_microbench", "plain 16-byte loads: whole rows, 4 x 256 threads per SM",
        "32 tok x 4 x 128 B sw128 (3D box), 1 split, 2 stages (80 KB), no hc_fn"),
    "coefficients (GEMM+stats)": (
        "tma_stream_microbench", "plain ld.global.cs read, 4 x 256 threads per SM",
        "now: 128 tok x 128 B sw128, 2 boxes, 4 stages, +hc_fn"),
}


def microbench_hidden(doc):
    """The hidden size C of a streaming micro-benchmark's JSON ("hidden", or "C=..." in its
    method)."""
    if "hidden" in doc:
        return int(doc["hidden"])
    return int(re.search(r"C=(\d+)", doc.get("method", "")).group(1))


def table_targets_headroom(patterns):
    """Issue 17's large-M targets against the copies that bound them: `mhc bench kernels` runs
    (file name globs, rounds of each preset) and the streaming micro-benchmarks' JSONs
    (bench/boundary_stream_microbench.cu, bench/tma_stream_microbench.cu; told apart by their
    "tool"). Per target and C: the target, the measured range, the plain copy of the same bytes,
    the kernel shape's copies, and the target and the measured time as multiples of the plain
    copy."""
    paths = expand(patterns)
    measured, copies, micro_paths = {}, {}, []  # (item, C, M) -> [µs]; (tool, C) -> {...}
    for path in paths:
        doc = load(path)
        tool = doc.get("tool", "")
        if "microbench" in tool:
            micro_paths.append(path)
            cells = {(r["variant"], r["tokens"]): r["median_us"] for r in doc["results"]}
            copies[(tool.split()[0].removeprefix("mhc_"), microbench_hidden(doc))] = cells
            continue
        hidden = int(re.search(r"C=(\d+)", doc.get("params", "")).group(1))
        for r in doc["results"]:
            if r["kernel"] in HEADROOM_COPIES:
                measured.setdefault((r["kernel"], hidden, r["tokens"]), []).append(r["median_us"])
    lines = ["| target | C | target µs | measured µs | plain copy µs | the kernel shape's copies µs "
             "| target / plain copy | measured / plain copy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for what, _, item, sizes, target, scales in ISSUE17_TARGETS:
        if item not in HEADROOM_COPIES:
            continue
        tool, plain_variant, shape_variant = HEADROOM_COPIES[item]
        (m,) = sizes
        for c in sorted({c for (i, c, mm) in measured if i == item and mm == m}):
            cells = copies.get((tool, c), {})
            plain, shape = cells.get((plain_variant, m)), cells.get((shape_variant, m))
            if plain is None:
                continue
            got = measured[(item, c, m)]
            bound = target * c / 5120 if scales else target
            lo, hi = min(got), max(got)
            span = f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"
            ratio = (f"{lo / plain:.3f}" if f"{lo / plain:.3f}" == f"{hi / plain:.3f}"
                     else f"{lo / plain:.3f}-{hi / plain:.3f}")
            shape_text = f"{shape:.2f}" if shape is not None else ""
            lines.append(f"| {what} | {c} | {bound:.1f} | {span} | {plain:.2f} | {shape_text} "
                         f"| {bound / plain:.3f} | {ratio} |")
    kernels_paths = [p for p in paths if p not in micro_paths]
    machine = provenance(load(kernels_paths[0])).split(", commit ")[0]
    commits = sorted({load(p).get("commit", "?") for p in kernels_paths})
    micro = "; ".join(dict.fromkeys(f"{load(p)['tool'].split()[0]} at {load(p).get('commit', '?')}"
                                    for p in micro_paths))
    lines += ["", f"µs (medians; the measured range over the rounds), `mhc bench kernels` on "
              f"{machine}, commit {', '.join(commits)}; the copies: {micro} (one launch between "
              f"CUDA events, nothing computed; the site's shape without hc_fn's boxes); sources `{' '.join(patterns)}` ({len(paths)} "
              f"files)."]
    return lines


def _span(values, fmt="{:.2f}"):
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def table_copy_ceiling(patterns):
    """The runtime's device-to-device copy of the fused boundary's bytes against the kernels'
    own copies and the kernels: streaming micro-benchmark rounds (bench/boundary_stream_microbench.cu,
    with its `cudaMemcpyAsync` variant) and `mhc bench kernels` runs of the same machine. Per C
    and M: the memcpy, the fastest plain copy kernel of each round, the post + next input launch
    (the same bytes but hc_fn, the norm from whole rows) and the fused site, the last two as
    multiples of the fastest memcpy."""
    paths = expand(patterns)
    memcpy, plain, kernels, micro_docs, kernel_docs = {}, {}, {}, [], []
    for path in paths:
        doc = load(path)
        if "microbench" in doc.get("tool", ""):
            micro_docs.append(doc)
            c = microbench_hidden(doc)
            best = {}
            for r in doc["results"]:
                key = (c, r["tokens"])
                if r["variant"].startswith("cudaMemcpyAsync"):
                    memcpy.setdefault(key, []).append(r["median_us"])
                elif r["variant"].startswith("plain"):
                    best[key] = min(best.get(key, float("inf")), r["median_us"])
            for key, us in best.items():
                plain.setdefault(key, []).append(us)
            continue
        kernel_docs.append(doc)
        c = int(re.search(r"C=(\d+)", doc.get("params", "")).group(1))
        for r in doc["results"]:
            kernels.setdefault((r["kernel"], c, r["tokens"]), []).append(r["median_us"])
    post, site = "post + next input path", "site in stack, fused boundary (each)"
    lines = ["| C | M | cudaMemcpyAsync µs | fastest plain copy µs | post + next input µs "
             "| fused site µs | post / memcpy | site / memcpy |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (c, m) in sorted(memcpy):
        ref = min(memcpy[(c, m)])
        p, s = kernels.get((post, c, m)), kernels.get((site, c, m))
        cells = [_span(memcpy[(c, m)]), _span(plain.get((c, m), [float("nan")])),
                 _span(p) if p else "", _span(s) if s else "",
                 _span([v / ref for v in p], "{:.3f}") if p else "",
                 _span([v / ref for v in s], "{:.3f}") if s else ""]
        lines.append(f"| {c} | {m} | " + " | ".join(cells) + " |")
    machine = provenance(micro_docs[0]).split(", commit ")[0]
    micro_commits = ", ".join(sorted({d.get("commit", "?") for d in micro_docs}))
    kernel_commits = ", ".join(sorted({d.get("commit", "?") for d in kernel_docs}))
    lines += ["", f"µs (medians; a range over the rounds) on {machine}: the copies by "
              f"mhc_boundary_stream_microbench at {micro_commits} (one launch, or the two "
              f"memcpys, between CUDA events; {len(micro_docs)} files), the kernels by `mhc bench "
              f"kernels` at {kernel_commits} (CUDA graphs, inputs rotated past L2); ratios against "
              f"the fastest memcpy; sources `{' '.join(patterns)}`."]
    return lines
