#!/usr/bin/env python3
"""The short table the device scripts print last: per `mhc bench kernels` JSON in a folder and
per token count, the fused boundary (and its 32-column stages where measured) beside the two
launches it replaces, and the stack's steady state with and without it (median µs)."""
import glob
import json
import sys

ITEMS = [("fused", "fused boundary (one launch)"),
         ("32 cols", "fused boundary, 32-column stages"),
         ("unfused", "coef + post with next input"),
         ("stack fused", "site in stack, fused boundary (each)"),
         ("stack", "site in stack, 8 per graph (each)")]

for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    times = {}
    for r in json.load(open(path))["results"]:
        times.setdefault(r["tokens"], {})[r["kernel"]] = r["median_us"]
    print(path.rsplit("/", 1)[-1])
    for m in sorted(times):
        cells = [f"{label} {times[m][kernel]:8.2f}" for label, kernel in ITEMS
                 if kernel in times[m]]
        print(f"  M={m:5d} " + "  ".join(cells) + " us")
