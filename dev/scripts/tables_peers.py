"""The table kinds that set mhc beside the alternatives (README.md, docs/benchmarks.md): one mHC
site in plain PyTorch (eager and torch.compile) and DeepGEMM's prenorm GEMM, from the measured
JSON under bench/results/peers/, against `mhc bench kernels` on the same GPU model."""
from table_io import load

SITE = "site (input, coef, post)"
STACK = "site in stack, 8 per graph (each)"
FUSED = "site in stack, fused boundary (each)"
COEF = "coefficients (GEMM+stats)"


def _deepgemm_rotated(doc):
    """Per M, DeepGEMM's kernel + split reduction with inputs rotated past L2 (as mhc's inputs are),
    the fastest of the split counts measured at that M."""
    best = {}
    for r in doc["results"]:
        t = r["t_rot_us"]["median"]
        best[r["M"]] = min(t, best.get(r["M"], t))
    return best


def table_peers(paths, cite_files=True):
    """`mhc bench kernels` JSON, the PyTorch site JSON and DeepGEMM's prenorm JSON (in that order):
    per size measured in PyTorch, mhc's site (one graph, and in the steady state of a stack) and
    coefficient path against the alternatives, with PyTorch's compiled time over mhc's site. The
    stack column is the faster of the unfused layout and the fused boundary: the plan's choice,
    whose crossover was measured as exactly that.
    Without cite_files (the README) the last line points to docs/benchmarks.md for the files."""
    kernels_path, torch_path, deepgemm_path = paths
    mhc, torch, deepgemm = load(kernels_path), load(torch_path), load(deepgemm_path)
    ours = {(r["kernel"], r["tokens"]): r["median_us"] for r in mhc["results"]}
    dg = _deepgemm_rotated(deepgemm)
    lines = [
        "| tokens | mhc site | mhc site in a stack | PyTorch eager site | torch.compile site "
        "| torch.compile / mhc | mhc GEMM + stats | DeepGEMM GEMM + split sum, no stats |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in torch["rows"]:
        m = row["M"]
        if (SITE, m) not in ours:
            continue
        site = ours[(SITE, m)]
        stack = min(ours[(STACK, m)], ours.get((FUSED, m), float("inf")))
        dg_cell = f"{dg[m]:.2f}" if m in dg else "-"
        lines.append(
            f"| {m} | {site:.2f} | {stack:.2f} | {row['eager_us']:.1f} "
            f"| {row['compiled_us']:.1f} | {row['compiled_us'] / site:.1f}x "
            f"| {ours[(COEF, m)]:.2f} | {dg_cell} |")
    def source(path):
        return f" (`{path}`)" if cite_files else ""

    lines += [
        "",
        f"Median µs of CUDA-graph replays on one {mhc['gpu']} ({mhc['sm_count']} SMs), "
        f"DeepSeek-V4.1-Flash shapes (C = 5120, n = 4), TF32 projection. mhc: `mhc bench kernels`, "
        f"inputs rotated past L2, {mhc['date'][:10]}{source(kernels_path)}. PyTorch "
        f"{torch['torch'].split('+')[0]}: the same site (identity sublayer), eager and "
        f"`torch.compile` in its default mode{source(torch_path)}. DeepGEMM "
        f"`tf32_hc_prenorm_gemm` plus the sum over its splits, inputs rotated past L2, the "
        f"fastest split count measured{source(deepgemm_path)}."
        + ("" if cite_files else " The files and the method: docs/benchmarks.md."),
    ]
    return lines


def table_peer_post(paths):
    """FlashInfer's mhc_post against mhc's post, measured in one process (one JSON)."""
    (path,) = paths
    doc = load(path)
    lines = ["| tokens | mhc post | FlashInfer mhc_post | FlashInfer / mhc |",
             "|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        lines.append(f"| {r['M']} | {r['mhc_post_us']:.2f} | {r['flashinfer_post_us']:.2f} "
                     f"| {r['ratio_fi_over_mhc']:.2f} |")
    lines += ["", f"Median µs per call on one {doc['gpu']} (torch {doc['torch']}), C = 5120, n = 4; "
              f"{doc['peer']}; {doc['method']}; source `{path}`."]
    return lines


def table_peers_readme(paths):
    """table_peers for the README: the same table, its sources named by docs/benchmarks.md."""
    return table_peers(paths, cite_files=False)


# ---- the peers measured side by side (dev/peers/run.sh: bench_peers + torch_compile.py) ----------

SIDE_ROWS = (  # (group, the row's label)
    ("post", "post (FlashInfer mhc_post)"),
    ("coefficients", "coefficients + collapse (DeepGEMM prenorm + FlashInfer big_fuse)"),
    ("boundary", "boundary: post, next coefficients + collapse (the same peers)"),
    ("torch.compile", "boundary (torch.compile)"),
)


def side_by_side(peers_doc, torch_doc=None):
    """{(C, group): {M: cell}} from bench_peers' JSON and torch_compile.py's: per cell mhc's time,
    the fastest peer that passed its check (name, time), mhc / that peer, and the peers that
    failed their check (name, verdict). The torch.compile group sets the compiled boundary
    against mhc's boundary."""
    cells = {}
    compiled = {(r["C"], r["M"]): r for r in (torch_doc or {}).get("rows", [])}
    for row in peers_doc["rows"]:
        if "items" not in row:
            continue
        c, m = row["C"], row["M"]
        for group, _ in SIDE_ROWS:
            src = "boundary" if group == "torch.compile" else group
            items = [i for i in row["items"] if i["group"] == src]
            ours = next((i for i in items if i["impl"] == "mhc"), None)
            if group == "torch.compile":
                t = compiled.get((c, m))
                peers = [] if t is None else [dict(name="torch.compile", check=t.get("check", t.get("error", "not run")),
                                                   median_us=t.get("median_us"))]
            else:
                peers = [i for i in items if i["impl"] == "peer"]
            ok = [p for p in peers if p["check"] == "ok" and p.get("median_us")]
            best = min(ok, key=lambda p: p["median_us"]) if ok else None
            cell = dict(mhc_us=ours.get("median_us") if ours else None, mhc_check=ours["check"] if ours else "missing",
                        wrong=[(p["name"], p["check"]) for p in peers if p["check"] != "ok"])
            if best is not None:
                cell.update(peer=best["name"], peer_us=best["median_us"])
                if cell["mhc_us"]:
                    cell["ratio"] = cell["mhc_us"] / best["median_us"]
            cells.setdefault((c, group), {})[m] = cell
    return cells


def _cell_text(cell):
    if cell is None:
        return "-"
    if cell["mhc_check"] != "ok":
        return "mhc wrong"
    if "ratio" not in cell:
        return "peer wrong" if cell["wrong"] else "-"
    text = f"{cell['ratio']:.2f}"
    if cell["ratio"] > 1.0:
        text = f"**{text}**"
    return text + ("\\*" if cell["wrong"] else "")


def table_peers_side(paths):
    """mhc / the fastest correct peer, per comparison (rows) and token count (columns), from
    bench_peers' JSON and torch_compile.py's (same call, same GPU). Bold: a peer is faster;
    *: some peer of that cell failed its check and was not timed."""
    peers_path, torch_path = paths
    doc, tdoc = load(peers_path), load(torch_path)
    cells = side_by_side(doc, tdoc)
    tokens = sorted({r["M"] for r in doc["rows"]})
    hidden = sorted({r["C"] for r in doc["rows"]})
    lines = ["| C | mhc / fastest peer: what, against whom | " + " | ".join(str(m) for m in tokens) + " |",
             "|---:|---|" + "---:|" * len(tokens)]
    for c in hidden:
        for group, label in SIDE_ROWS:
            row = cells.get((c, group), {})
            lines.append(f"| {c} | {label} | "
                         + " | ".join(_cell_text(row.get(m)) for m in tokens) + " |")
    peers = doc.get("peers", {})
    lines += ["", f"Tokens across, mhc's median µs over the fastest peer's (below 1: mhc is "
              f"faster; **bold**: the peer is faster; \\*: a peer failed its check against the "
              f"float64 reference and was not timed), one call on one {doc['gpu']} (driver "
              f"{doc['driver']}), commit {doc['commit']}, {doc['date'][:10]}; "
              f"{peers.get('flashinfer', 'FlashInfer')}, {peers.get('deepgemm', 'DeepGEMM')} "
              f"(the fastest of split counts 1-16), torch {tdoc.get('torch', '?').split('+')[0]} "
              f"(default mode, static shapes); {doc['method']}; sources `{peers_path}`, "
              f"`{torch_path}`. DeepGEMM's Mega-mHC (one kernel for the whole boundary) is SM100-only "
              f"and has no Hopper row."]
    return lines
