#!/usr/bin/env python3
"""Plots `mhc bench overlap` results: gain of the overlap schedule against tokens, one line per
result file. Usage: bench/plot_overlap.py OUT.png RESULT.json [RESULT.json ...]
Needs matplotlib (Debian: python3-matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out_png, paths):
    fig, (ax_gain, ax_saved) = plt.subplots(1, 2, figsize=(12, 4.5))
    meta = None  # the title describes the first file's run
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        meta = meta or doc
        rows = doc["rows"]
        tokens = [r["tokens"] for r in rows]
        label = f'{doc["preset"]} (C={doc["params"]["hidden"]})'
        if "tensor_parallel" in doc:
            label += f', TP={doc["tensor_parallel"]["tp"]}'
        ax_gain.plot(tokens, [r["gain_percent"] for r in rows], marker="o", label=label)
        ax_saved.plot(tokens, [r["saved_us_per_layer"] for r in rows], marker="o", label=label)
    for ax, ylabel in ((ax_gain, "gain of overlap over native (%)"),
                       (ax_saved, "saved per decoder layer (us)")):
        ax.set_xscale("log", base=2)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("tokens in the batch")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax_gain.axvline(128, color="red", linestyle="--", linewidth=0.8)
    ax_gain.text(128, ax_gain.get_ylim()[1] * 0.9, " Hopper default 128", color="red")
    fig.suptitle(f'mhc bench overlap, {meta.get("gpu", "?")}, driver {meta.get("driver", "?")}, '
                 f'commit {meta.get("commit", "?")}, {meta.get("date", "?")[:10]}: '
                 "stand-in decoder stack in FULL CUDA graphs")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
