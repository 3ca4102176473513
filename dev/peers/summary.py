"""The summary dev/peers/run.sh prints last: per comparison and token count, mhc's µs, the
fastest correct peer's, and mhc / peer; the peers that failed their checks. Usage:
summary.py PEERS_JSON [TORCH_JSON]; summary.py --merge OUT TORCH_JSON... joins the torch.compile
processes' files (one per hidden size) into OUT."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from tables_peers import SIDE_ROWS, side_by_side  # noqa: E402


def merge(out, paths):
    docs = [json.load(open(p)) for p in paths if os.path.exists(p)]
    if docs:
        with open(out, "w") as f:
            json.dump(dict(docs[0], rows=[r for d in docs for r in d["rows"]]), f, indent=1)


def main():
    if sys.argv[1] == "--merge":
        return merge(sys.argv[2], sys.argv[3:])
    if not os.path.exists(sys.argv[1]):
        print(f"summary: {sys.argv[1]} was not written (see the benchmark's log)")
        return
    doc = json.load(open(sys.argv[1]))
    tdoc = None
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        tdoc = json.load(open(sys.argv[2]))
    cells = side_by_side(doc, tdoc)
    errors = [r for r in doc["rows"] if "error" in r]
    for r in errors:
        print(f"ERROR C={r['C']} M={r['M']}: {r['error']}")
    wrong = set()
    print(f"{doc['gpu']}, driver {doc['driver']}, commit {doc['commit']}; mhc us / best peer us = ratio")
    for (c, group), row in sorted(cells.items()):
        parts = []
        for m, cell in sorted(row.items()):
            for name, verdict in cell["wrong"]:
                wrong.add(f"C={c} M={m} {name}: {verdict}")
            if cell["mhc_check"] != "ok":
                parts.append(f"{m}:mhc-WRONG")
            elif "ratio" in cell:
                parts.append(f"{m}:{cell['mhc_us']:.1f}/{cell['peer_us']:.1f}={cell['ratio']:.2f}")
            else:
                parts.append(f"{m}:-")
        print(f"C={c} {group:13s} " + " ".join(parts))
    for w in sorted(wrong):
        print("WRONG", w)
    if tdoc is None:
        print("torch.compile: no result file")
    for r in (tdoc or {}).get("rows", []):
        if r.get("check") != "ok" or "median_us" not in r:
            print(f"torch.compile C={r['C']} M={r['M']}: {r.get('error') or r.get('check')}"
                  + ("" if "median_us" in r else ", not timed"))


if __name__ == "__main__":
    main()
