#!/usr/bin/env python3
"""The cost of the batch-invariant mode: two `mhc bench kernels --json` reports of one GPU (the
default, and --kernel-config '{"batch_invariant": true}'), joined per (item, M) into one JSON
with the ratio, and a table on stdout with the issue's targets (1-16 tokens: within 15%,
4096-8192: within 10%) marked met or missed per item.

usage: batch_invariance_cost.py DEFAULT.json INVARIANT.json OUT.json
"""
import json
import sys

TARGETS = [((1, 16), 1.15), ((4096, 8192), 1.10)]


def target_for(tokens):
    for (low, high), limit in TARGETS:
        if low <= tokens <= high:
            return limit
    return None


def main(default_path, invariant_path, out_path):
    with open(default_path) as f:
        default = json.load(f)
    with open(invariant_path) as f:
        invariant = json.load(f)
    if default.get("batch_invariant") or not invariant.get("batch_invariant"):
        raise SystemExit("expected a default report, then a batch_invariant one")
    base = {(r["kernel"], r["tokens"]): r for r in default["results"]}
    rows = []
    for r in invariant["results"]:
        key = (r["kernel"], r["tokens"])
        if key not in base or r["kernel"].startswith("empty kernel") or not r["splits"]:
            continue  # items that do not depend on the mode are not compared
        d = base[key]
        ratio = r["median_us"] / d["median_us"]
        limit = target_for(r["tokens"])
        rows.append({
            "kernel": r["kernel"],
            "tokens": r["tokens"],
            "default_us": d["median_us"],
            "invariant_us": r["median_us"],
            "ratio": ratio,
            "default_tuning": {"splits": d["splits"], "rows_per_tile": d["rows_per_tile"]},
            "invariant_tuning": {"splits": r["splits"], "rows_per_tile": r["rows_per_tile"]},
            "target_ratio": limit,
            "target_met": None if limit is None else ratio <= limit,
        })
    keep = ("gpu", "compute_capability", "sm_count", "driver_version", "runtime_version",
            "commit", "preset", "params", "projection", "method")
    report = {k: invariant.get(k) for k in keep}
    report.update({
        "tool": "bench/batch_invariance_cost.py over two `mhc bench kernels` reports",
        "date_default": default.get("date"),
        "date_invariant": invariant.get("date"),
        "targets": "ratio <= 1.15 at 1-16 tokens, <= 1.10 at 4096-8192 (issue 16)",
        "comparison": rows,
        "default_report": default,
        "invariant_report": invariant,
    })
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"{'item':<36} {'M':>6} {'default':>9} {'invariant':>9} {'ratio':>6}  target")
    for row in rows:
        met = "" if row["target_met"] is None else ("met" if row["target_met"] else "MISSED")
        print(f"{row['kernel']:<36} {row['tokens']:>6} {row['default_us']:>9.2f} "
              f"{row['invariant_us']:>9.2f} {row['ratio']:>6.3f}  {met}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
