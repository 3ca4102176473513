"""What every table kind of dev/scripts/gen-tables.py shares: the repository root, loading a result
file, the provenance line's machine part, medians over rounds, file name globs."""
import json
import pathlib
import statistics

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(path):
    with open(ROOT / path) as f:
        return json.load(f)


def provenance(doc):
    driver = doc.get("driver") or doc.get("cuda_driver_api") or doc.get("driver_version", "unknown")
    arch = doc.get("arch") or doc.get("compute_capability", "?")
    return (f"{doc.get('gpu', 'unknown GPU')} (compute capability {arch}, driver "
            f"{driver}), commit {doc.get('commit', 'unknown')}, {doc.get('date', 'undated')}")


def median_of(rounds, i, key):
    return statistics.median(r[i][key] for r in rounds)


def expand(patterns):
    """Committed result files matching the globs (relative to the root), in order; an error when
    none match, so that a table never silently loses its source."""
    paths = [str(p.relative_to(ROOT)) for pat in patterns for p in sorted(ROOT.glob(pat))]
    if not paths:
        raise SystemExit(f"no files match {' '.join(patterns)}")
    return paths
