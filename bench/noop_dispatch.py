"""What torch charges for a call of mhc's op schemas, measured with no-op ops of the same schemas
(bench/noop_ops/: benchmark only, not part of the package), written as JSON.

In one process, interleaved rounds of back-to-back eager calls at 1 token (C = 64, n = 4 on the
CPU backend), under torch.no_grad and torch.inference_mode, per op (post_out, post_pre_out,
coefficients_out, pre_out, boundary_out):

- real: the op through its OpOverload (torch.ops.mhc.X.default), as the mhc.* functions call it;
- noop: torch.ops.mhc_noop.X.default, the same schema registered as registration.cpp registers
  mhc's ops (Autograd router, no-grad twin, stable ABI kernel of the same C++ signature), empty;
- noop_plain: the same schema and kernel on the CPU key alone (no router);
- noop_legacy: the same schema through TORCH_LIBRARY with an unboxed at::Tensor kernel (not the
  stable ABI), where it built;
- the floors: torch.add(out=) on a [1, 4, C] float tensor and a two-tensor no-op (routed, plain,
  legacy); schemas with a site's weights and scalars bound once (the no-ops bound_*, and mhc's
  bound ops, real_bound: torch.ops.mhc.site_X.default).

Call styles on the no-op (plain_X, and pos_X: the schema without its `*`): the trailing options
left to their defaults (as mhc._api passes them), given as keywords, the scalars as keywords,
every argument as a keyword, everything positional. The arguments are bench/python_ops.py's
(Site, op_calls).

    bench/noop_ops/build.sh PYTHON build-noop/noop
    PYTHONPATH=<mhc package> python bench/noop_dispatch.py --lib-dir build-noop/noop --out OUT.json
        [--calls 3000] [--rounds 9]
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_ops  # noqa: E402  (Site, op_calls, machine, git_commit, host_profile)
from mhc._api import _Overloads  # noqa: E402

OPS = ("post_out", "post_pre_out", "coefficients_out", "pre_out", "boundary_out")
MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


class _Prefixed:
    """The OpOverloads of namespace `ns` under `prefix` + name (plain_X, pos_X)."""

    def __init__(self, ns, prefix):
        self._ns, self._prefix = ns, prefix

    def __getattr__(self, name):
        op = getattr(self._ns, self._prefix + name).default
        setattr(self, name, op)
        return op


def _outputs(s):
    """op -> its output tensors by name, as bench/python_ops.op_calls passes them."""
    o = s.out
    return {"post_out": dict(out=s.next),
            "post_pre_out": dict(residual_next=s.next, next_layer_input=o[0]),
            "coefficients_out": dict(post=o[1], comb=o[2], next_pre_mix=o[3]),
            "pre_out": dict(layer_input=o[0], post=o[1], comb=o[2], next_pre_mix=o[3]),
            "boundary_out": dict(residual_next=s.next, layer_input=o[0], next_post=o[1],
                                 next_comb=o[2], next_pre_mix=o[3])}


def _inputs(s):
    """op -> its positional arguments, Site's builders (those of bench/python_ops.op_calls)."""
    return {"post_out": s.post_args(),
            "post_pre_out": (*s.post_args(), s.pre_mix, s.norm_weight, 1e-6),
            "coefficients_out": s.coef(), "pre_out": s.pre(), "boundary_out": s.boundary()}


def styled(op, name, s, style):
    """A no-argument call of OpOverload `op` (schema of mhc's `name`) in one call style:
    defaults: the positional arguments positionally, the outputs by keyword, the options left to
    the schema (mhc._api's way); options_kw: the options given too, by keyword; scalars_kw: as
    defaults with the float and int arguments by keyword; all_kw: every argument without a
    default by keyword; pos_defaults / pos_all (a schema without `*`): all positionally, the
    options left out / given."""
    schema = op._schema.arguments
    values = dict(zip([a.name for a in schema if not a.kwarg_only], _inputs(s)[name]))
    values.update(_outputs(s)[name])
    for a in schema:
        if a.has_default_value():
            values[a.name] = a.default_value
    pos, kw = [], {}
    for a in schema:
        v = values[a.name]
        default = a.has_default_value()
        scalar = str(a.type) in ("float", "int")
        if style == "pos_all" or (style == "pos_defaults" and not default):
            pos.append(v)
        elif style in ("pos_defaults", "defaults", "scalars_kw") and default:
            continue
        elif style == "all_kw" or a.kwarg_only or (style == "scalars_kw" and scalar):
            kw[a.name] = v
        else:
            pos.append(v)
    pos = tuple(pos)
    return lambda: op(*pos, **kw)


def schema_text(op):
    """The schema without the namespace and name: what must match mhc's."""
    text = str(op._schema)
    return text[text.index("("):]


def build_calls(s, libs):
    """(variant, op) -> call, for one mode's site."""
    mhc_ns, noop = _Overloads(torch.ops.mhc), _Overloads(torch.ops.mhc_noop)
    plain = _Prefixed(torch.ops.mhc_noop, "plain_")
    pos = _Prefixed(torch.ops.mhc_noop, "pos_")
    real = python_ops.op_calls(mhc_ns, s)
    same = python_ops.op_calls(noop, s)
    calls = {}
    for name in OPS:
        calls[("real", name)] = real[name]
        calls[("noop", name)] = same[name]
        calls[("noop_plain", name)] = python_ops.op_calls(plain, s)[name]
        if "legacy" in libs:
            legacy = _Prefixed(torch.ops.mhc_noop_legacy, "plain_")
            calls[("noop_legacy", name)] = python_ops.op_calls(legacy, s)[name]
        calls[("noop_options_kw", name)] = styled(getattr(noop, name), name, s, "options_kw")
        for style in ("defaults", "options_kw", "scalars_kw", "all_kw"):
            calls[(f"plain_{style}", name)] = styled(getattr(plain, name), name, s, style)
        for style in ("pos_defaults", "pos_all"):
            calls[(f"plain_{style}", name)] = styled(getattr(pos, name), name, s, style)
    a, b = s.residual.float(), s.residual.float()
    o = s.out
    calls[("torch_add", "add_out")] = lambda: torch.add(a, b, out=a)
    n2, p2 = torch.ops.mhc_noop.noop2.default, torch.ops.mhc_noop.plain_noop2.default
    calls[("noop", "noop2")] = lambda: n2(a, b)
    calls[("noop_plain", "noop2")] = lambda: p2(a, b)
    if "legacy" in libs:
        l2 = torch.ops.mhc_noop_legacy.plain_noop2.default
        calls[("noop_legacy", "noop2")] = lambda: l2(a, b)
    bp, bb = torch.ops.mhc_noop.bound_pre_out.default, torch.ops.mhc_noop.bound_boundary_out.default
    for name, call in python_ops.site_calls(s).items():  # the real bound ops (mhc.bind_site)
        if name in OPS:
            calls[("real_bound", name)] = call
    calls[("noop_bound", "pre_out")] = lambda: bp(
        0, s.residual, s.pre_mix, layer_input=o[0], post=o[1], comb=o[2], next_pre_mix=o[3])
    calls[("noop_bound", "boundary_out")] = lambda: bb(
        0, *s.post_args(), s.pre_mix, residual_next=s.next, layer_input=o[0], next_post=o[1],
        next_comb=o[2], next_pre_mix=o[3])
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", required=True, help="bench/noop_ops/build.sh's output directory")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    a = ap.parse_args()
    libs = ["stable"]
    torch.ops.load_library(os.path.join(a.lib_dir, "noop_ops.so"))
    legacy_path = os.path.join(a.lib_dir, "noop_ops_legacy.so")
    if os.path.exists(legacy_path):
        torch.ops.load_library(legacy_path)
        libs.append("legacy")

    # The no-ops' schemas must be mhc's, character for character (but for pos_X, without `*`).
    schemas = {}
    for name in OPS:
        want = schema_text(getattr(torch.ops.mhc, name).default)
        have = {"noop": schema_text(getattr(torch.ops.mhc_noop, name).default),
                "noop_plain": schema_text(getattr(torch.ops.mhc_noop, "plain_" + name).default)}
        if "legacy" in libs:
            have["noop_legacy"] = schema_text(
                getattr(torch.ops.mhc_noop_legacy, "plain_" + name).default)
        for k, v in have.items():
            if v != want:
                raise SystemExit(f"{k} {name}: schema {v} differs from mhc's {want}")
        schemas[name] = want
    # The keyword-only arguments cannot be passed positionally through these schemas.
    try:
        s0 = python_ops.Site("cpu", 1, a.hidden, seed=7)
        styled(torch.ops.mhc_noop.plain_pre_out.default, "pre_out", s0, "pos_all")()
        positional_refused = None
    except RuntimeError as e:
        positional_refused = str(e).splitlines()[0]

    tables = {}
    for mode, ctx in MODES.items():
        with ctx():
            s = python_ops.Site("cpu", 1, a.hidden, seed=7)  # inference tensors there
            tables[mode] = build_calls(s, libs)
            for fn in tables[mode].values():
                for _ in range(200):
                    fn()
    times = {(mode, *key): [] for mode, t in tables.items() for key in t}
    for r in range(a.rounds):
        for mode, ctx in MODES.items():
            with ctx():
                for key, fn in tables[mode].items():
                    t0 = time.perf_counter()
                    for _ in range(a.calls):
                        fn()
                    times[(mode, *key)].append((time.perf_counter() - t0) / a.calls * 1e6)
        print(f"round {r + 1}/{a.rounds} done, load {os.getloadavg()[0]:.2f}", flush=True)
    rows = [dict(mode=m, variant=v, op=op, calls_per_round=a.calls, rounds=a.rounds,
                 min_us=min(t), median_us=statistics.median(t), rounds_us=t)
            for (m, v, op), t in times.items()]
    profile = []
    python_ops.host_profile("cpu", a.hidden, a.calls, profile)
    report = dict(
        tool="bench/noop_dispatch.py", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        commit=a.commit or python_ops.git_commit(), device="cpu", **python_ops.machine("cpu", ""),
        torch=torch.__version__, python=platform.python_version(),
        shape=dict(hidden=a.hidden, n=4, tokens=1), libraries=libs, schemas=schemas,
        positional_keyword_only=positional_refused,
        method=(f"{a.rounds} interleaved rounds (every variant of both modes once per round) of "
                f"{a.calls} back-to-back eager calls per variant at 1 token, wall time per call "
                "(µs): the least round and the median round. real: torch.ops.mhc.X.default; "
                "noop: torch.ops.mhc_noop.X.default, X's schema registered as registration.cpp "
                "registers mhc's ops, kernel empty; noop_plain: the same on the CPU key alone; "
                "noop_legacy: the same schema through TORCH_LIBRARY (not the stable ABI); "
                "noop_options_kw / plain_*: call styles (bench/noop_dispatch.styled); "
                "noop_bound: hypothetical schemas with a site's weights and scalars bound "
                "(int site); real_bound: mhc's bound ops (torch.ops.mhc.site_X.default, a site "
                "bound by mhc.bind_site); torch_add: torch.add(a, b, out=a) on [1, 4, C] float. "
                "host_profile: mhc's kernel phases of the real ops (bench/python_ops.py), "
                "no_grad."),
        load_average=os.getloadavg(), rows=rows, host_profile=profile)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    for mode in MODES:
        print(f"\n{mode}: min (median) µs per call")
        for r in rows:
            if r["mode"] == mode:
                print(f"  {r['variant']:<20} {r['op']:<17} {r['min_us']:7.2f} "
                      f"({r['median_us']:7.2f})")


if __name__ == "__main__":
    main()
