"""Commands for Spark: `kcheck check ... --spark [MASTER] --slices N [--partition slices|ownership]`
and `kcheck sweep`."""
from __future__ import annotations

import itertools
import re

from rich.table import Table

from kcheck.options import (BAD_INPUT, BOUNDED, INTERRUPTED, OK, TERMINATED,  # noqa: F401
                            VIOLATED, BadInput, json_option, make_console, master, positive, spark_progress,
                            property_option, save_options, spec_option, variant_option)
from kcheck.spark import SparkError
from kcheck.verdict import cell, exit_code, print_json

def register(subparsers) -> dict:
    sw = subparsers.add_parser("sweep", help="check a spec over a range of parameters, on Spark "
                                             "with --spark",
                               parents=[spec_option(), variant_option(), property_option(),
                                        json_option(),
                                        save_options("each minimal counterexample under "
                                                     "counterexamples/<spec>/<variant>/",
                                                     default_out="counterexamples")])
    sw.add_argument("--param", action="append", default=[], metavar="NAME=LO..HI",
                    help="a range (members=1..4), a list (members=1,3) or one value")
    sw.add_argument("--max-depth", type=positive("--max-depth"), metavar="N",
                    help="stop each configuration's search after N levels")
    sw.add_argument("--deadlock", action="store_true", help="report states with no successor")
    sw.add_argument("--spark", nargs="?", const="local[*]", metavar="MASTER", type=master,
                    help="every configuration a Spark task: local[*] by default, spark://host:port")
    sw.add_argument("--verbose", action="store_true", help="with --spark: Spark's own log")
    return {"sweep": cmd_sweep}


def _values(name: str, text: str) -> range | list[int]:
    m = re.fullmatch(r"\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*", text)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo > hi:
            raise SparkError(f"--param {name}={text}: the range is empty (write LO..HI with LO <= HI)")
        return range(lo, hi + 1)      # not a list: its ends are checked before it is walked
    try:
        vals = [int(v) for v in text.split(",")]
    except ValueError:
        raise SparkError(f"--param {name}={text}: write a range (1..4), a list (1,3) or one integer") from None
    return sorted(set(vals))


def configurations(spec, pairs: list[str]) -> tuple[list[str], list[dict]]:
    """-> (swept parameter names, every configuration), each checked against the spec."""
    axes: dict[str, list[int]] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SparkError(f"--param {pair!r}: write NAME=LO..HI, e.g. --param members=1..4")
        k, v = (x.strip() for x in pair.split("=", 1))
        if k in axes:
            raise SparkError(f"--param {k} is given twice")
        axes[k] = _values(k, v)
    names = list(axes)
    # each axis's least and greatest value against the parameter's range (exit 2) before any
    # configuration is built: N=1..99999999 is refused at once, not after a list of 10^8
    for k, values in axes.items():
        spec.resolve_params({k: min(values)})
        spec.resolve_params({k: max(values)})
    configs = [dict(zip(names, combo)) for combo in itertools.product(*axes.values())]
    for c in configs:
        full = spec.resolve_params(c)    # unknown names and out-of-range values: exit 2
        c.update({k: v for k, v in full.as_dict().items() if k not in c})
    return [k for k in names if len(axes[k]) > 1] or names, configs


def _length(r, p: str) -> int | None:
    f = r.found.get(p)
    return None if f is None else len(f.steps)


def sweep_exit_code(results) -> int:
    """The sweep's exit code: each configuration's as `check` computes it (verdict.exit_code),
    the gravest first (a signal, a violation, an undecided verdict, success)."""
    codes = [exit_code({p: r.status(p) for p in r.properties}, r.exhaustive, r.stop_reason)
             for r in results]
    return next((c for c in (TERMINATED, INTERRUPTED, VIOLATED, BOUNDED) if c in codes), OK)


def cmd_sweep(args, console) -> int:
    from kcheck import spark
    from kcheck.loader import load_spec
    from kcheck.render import params_str, trace_table
    from kcheck.render import save
    from kcheck.trace import build
    spec = load_spec(args.spec)
    variant = args.variant or spec.default_variant or next(iter(spec.variants), "default")
    if spec.variants and variant not in spec.variants:
        raise SparkError(f"unknown variant '{variant}' for spec {spec.name}; variants: "
                         f"{', '.join(spec.variants)}")
    for p in args.property or []:
        if p not in spec.properties:
            raise SparkError(f"unknown property '{p}' for spec {spec.name}; properties: "
                             f"{', '.join(spec.properties)}")
    swept, configs = configurations(spec, args.param)
    live, update = spark_progress(args.verbose, "configurations")
    kw = dict(properties=args.property, max_depth=args.max_depth, deadlock=args.deadlock or None,
              master=args.spark, verbose=args.verbose, progress=update)
    stopped = None
    try:
        if live:
            with live:
                results = spark.sweep(spec, variant, configs, **kw)
        else:
            results = spark.sweep(spec, variant, configs, **kw)
    except spark.SweepStopped as e:
        results, stopped = e.results, e.reason
    if stopped is None and results and results[-1].stop_reason in ("interrupted", "terminated"):
        stopped = results[-1].stop_reason
    if stopped is not None:
        make_console(stderr=True).print(
            f"kcheck: sweep {'terminated (SIGTERM)' if stopped == 'terminated' else 'interrupted'}"
            f" after {len(results)} of {len(configs)} configurations; the verdicts below are "
            f"those found", markup=False)
        if not results:
            return TERMINATED if stopped == "terminated" else INTERRUPTED
    props = results[0].properties
    shortest = spark.minimal_counterexamples(results, swept)
    # a sometimes property's counterexample is its witness (reached), not a violation
    witness = {p for p in shortest if spec.properties.get(p) is not None
               and spec.properties[p].kind == "sometimes"}
    traces, saved = {}, {}
    for p, (params, f) in shortest.items():
        model = spec.instantiate(variant, params)
        traces[p] = build(model, p, f.kind, f.initial, f.steps)
        if args.save:
            saved[p] = save(traces[p], args.out)

    def verdict_json(r, p):
        out = {"status": r.status(p), "trace_length": _length(r, p)}
        if r.reason(p):
            out["reason"] = r.reason(p)
        return out

    def shortest_json(which):
        return {p: {"parameters": params, "trace_length": len(traces[p]),
                    "trace": traces[p].to_json(), "saved": saved.get(p)}
                for p, (params, _) in shortest.items() if (p in witness) == which}

    if args.json:
        print_json({
            "spec": spec.name, "variant": variant, "swept": swept,
            "configurations": [{"parameters": r.model.params.as_dict(),
                                "exhaustive": r.exhaustive, "stop_reason": r.stop_reason,
                                "distinct_states": r.distinct_states, "depth": r.depth,
                                "elapsed_s": round(r.elapsed_s, 3),
                                "properties": {p: verdict_json(r, p) for p in props}}
                               for r in results],
            "minimal_counterexamples": shortest_json(False),
            "shortest_witnesses": shortest_json(True)}, "sweep")
    else:
        t = Table(title=f"{spec.name} / {variant}: verdicts by configuration"
                        + (f" (on Spark, {args.spark})" if args.spark else ""), title_justify="left")
        for k in swept:
            t.add_column(k, justify="right")
        for p in props:
            t.add_column(p)
        t.add_column("states", justify="right")
        t.add_column("time", justify="right")
        for r in results:
            params = r.model.params.as_dict()
            t.add_row(*(str(params[k]) for k in swept),
                      *(cell(r.status(p), _length(r, p)) for p in props),
                      f"{r.distinct_states:,}" + ("" if r.exhaustive else " (not exhaustive)"),
                      f"{r.elapsed_s:.2f}s")
        console.print(t)
        for p, (params, _) in shortest.items():
            shown = {k: params[k] for k in swept}
            what = "Shortest witness" if p in witness else "Minimal counterexample"
            console.print(trace_table(traces[p], f"{what} for {p}: "
                                                 f"{params_str(shown)} ({len(traces[p])} steps)"))
            if p in saved:
                console.print(f"saved: {saved[p]}", markup=False)
    if stopped is not None:
        return TERMINATED if stopped == "terminated" else INTERRUPTED
    return sweep_exit_code(results)
