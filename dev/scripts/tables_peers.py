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
