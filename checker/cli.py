"""The kcheck command line. Exit codes (one table for every command):
0 every property holds exhaustively / the trace reproduces / every verdict matches its record;
1 a property is violated / the trace does not reproduce / a verdict differs from its record;
2 bad input; 3 no violation found but the search was bounded; 130 interrupted."""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from rich.console import Console

from checker import ci_outputs
from spec import SHIPPED
from spec.lang import SpecError

OK, VIOLATED, BAD_INPUT, BOUNDED, INTERRUPTED = 0, 1, 2, 3, 130

# Modules that add commands: each has register(subparsers) -> {command name: handler}, where a
# handler is fn(args, console) -> exit code.
EXTENSIONS: list[str] = ["checker.graph_cli", "checker.symbolic_cli", "checker.spark_cli",
                         "checker.bugs_cli", "checker.report", "checker.explorer", "checker.scaffold",
                         "checker.conform_cli", "checker.walk"]


class BadInput(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(f"{message} (see 'kcheck {self.prog.split()[-1]} --help')"
                       if " " in self.prog else f"{message} (see 'kcheck --help')")


def _params(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise BadInput(f"--param {pair!r}: write NAME=VALUE, e.g. --param members=2")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _positive(name):
    def conv(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {s!r}")
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {s!r}")
        return v
    return conv


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kcheck", description="Model checker with executable specs for Kafka protocols.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    ls = sub.add_parser("list", help="specs, parameters, variants, properties")
    ls.add_argument("--json", action="store_true")

    ck = sub.add_parser("check", help="explore a spec breadth-first and check its properties")
    ck.add_argument("spec", help="a shipped spec name, 'all', or the path of a spec module")
    g = ck.add_mutually_exclusive_group()
    g.add_argument("--variant")
    g.add_argument("--all-variants", action="store_true")
    ck.add_argument("--property", action="append", default=None, metavar="P")
    ck.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    ck.add_argument("--max-depth", type=_positive("--max-depth"))
    ck.add_argument("--max-states", type=_positive("--max-states"))
    ck.add_argument("--deadlock", action="store_true", help="report states with no successor")
    ck.add_argument("--json", action="store_true")
    ck.add_argument("--save", action="store_true",
                    help="save counterexamples under counterexamples/<spec>/<variant>/")
    ck.add_argument("--out", default="counterexamples", help="where --save writes")
    ci_outputs.add_options(ck)

    rp = sub.add_parser("replay", help="re-execute a saved trace or a scenario")
    rp.add_argument("file")
    rp.add_argument("--json", action="store_true")

    import importlib
    p.handlers = {}
    for mod in EXTENSIONS:
        p.handlers.update(importlib.import_module(mod).register(sub))
    return p


def main(argv=None) -> int:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=400)  # a pipe or a file: tables at their natural width
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handlers = {"list": cmd_list, "check": cmd_check, "replay": cmd_replay, **parser.handlers}
        if args.command is None:
            raise BadInput(f"no command given; commands: {', '.join(handlers)} (see 'kcheck --help')")
        code = handlers[args.command](args, console)
        ci_outputs.write(args)   # --junit / --sarif of check, progress, prove
        return code
    except (BadInput, SpecError) as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return BAD_INPUT
    except KeyboardInterrupt:
        err.print("kcheck: interrupted")
        return INTERRUPTED


def cmd_list(args, console) -> int:
    from checker.loader import load_spec
    out = []
    for name in SHIPPED:
        s = load_spec(name)
        out.append({"spec": name, "doc": s.doc.splitlines()[0] if s.doc else "",
                    "parameters": {p.name: {"default": p.default, "min": p.lo, "max": p.hi, "doc": p.doc}
                                   for p in s.params.values()},
                    "variants": {v.name: {"doc": v.doc, "default": v.name == s.default_variant,
                                          "expected_violations": sorted(v.expected_violations)}
                                 for v in s.variants.values()},
                    "properties": {p.name: {"kind": p.kind, "doc": p.doc, "lemma": p.lemma}
                                   for p in s.properties.values()},
                    "progress": {p.name: {"kind": p.kind, "fair": list(p.fair), "doc": p.doc}
                                 for p in s.progress.values()},
                    "rules": sorted(s.rules)})
    if args.json:
        print(json.dumps(out, indent=2))
        return OK
    for s in out:
        console.print(f"[bold]{s['spec']}[/bold]: {s['doc']}")
        console.print("  parameters: " + ", ".join(f"{k}={v['default']} ({v['min']}..{v['max']})"
                                                    for k, v in s["parameters"].items()))
        console.print("  variants:   " + ", ".join(k + (" (default)" if v["default"] else "")
                                                    for k, v in s["variants"].items()))
        console.print("  properties: " + ", ".join(s["properties"]))
        if s["progress"]:
            console.print("  progress:   " + ", ".join(s["progress"]))
    return OK


def _traces(res):
    from checker.trace import build
    return {name: build(res.model, f.property, f.kind, f.initial, f.steps) for name, f in res.found.items()}


def _save(tr, out_dir: str) -> str:
    from checker.render import markdown
    from checker.trace import to_json
    m = tr.model
    d = Path(out_dir) / m.spec.name / m.variant
    d.mkdir(parents=True, exist_ok=True)
    doc = to_json(tr)
    path = d / f"{tr.property}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    (d / f"{tr.property}.md").write_text(markdown(tr, doc))
    return str(path)


def result_json(res, traces) -> dict:
    from checker.trace import to_json
    m = res.model
    return {"spec": m.spec.name, "variant": m.variant, "parameters": m.params.as_dict(),
            "exhaustive": res.exhaustive, "stop_reason": res.stop_reason,
            "distinct_states": res.distinct_states, "transitions": res.transitions, "depth": res.depth,
            "elapsed_s": round(res.elapsed_s, 3), "cut_by_search_bounds": res.cut_by_bounds,
            "collision_probability": res.collision_probability,
            "properties": {p: {"status": res.status(p),
                               "trace_length": len(traces[p]) if p in traces else None,
                               "trace": to_json(traces[p]) if p in traces else None}
                           for p in res.properties}}


def _progress_display(console):
    """A rich status line on a terminal; nothing in a pipe or CI."""
    if not console.is_terminal:
        return None, None
    from rich.live import Live
    live = Live(console=console, transient=True, refresh_per_second=4)

    def update(depth, distinct, left):
        live.update(f"depth {depth}: {distinct:,} distinct states, {left:,} left in this level")
    return live, update


def _run_one(spec, variant, params, args, console):
    from checker.bfs import search
    model = spec.instantiate(variant, params)
    props = args.property
    if props:
        for p in props:
            if p not in spec.properties:
                raise BadInput(f"unknown property '{p}' for spec {spec.name}; properties: "
                               f"{', '.join(spec.properties)}")
    live, update = _progress_display(console) if not args.json else (None, None)
    if getattr(args, "spark", None) or getattr(args, "slices", None) or getattr(args, "partition", None):
        from checker.spark_cli import check_on_spark
        res = check_on_spark(model, props, args, console)
    elif live:
        with live:
            res = search(model, props, args.max_depth, args.max_states, args.deadlock or None, update)
    else:
        res = search(model, props, args.max_depth, args.max_states, args.deadlock or None)
    try:
        traces = _traces(res)
    except SpecError:
        raise
    return res, traces


def _exit_for(res) -> int:
    if res.interrupted:
        return INTERRUPTED
    if res.found:
        return VIOLATED
    return OK if res.exhaustive else BOUNDED


def cmd_check(args, console) -> int:
    from checker.loader import load_spec
    from checker.render import print_check, print_matrix
    params = _params(args.param)
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    all_variants = args.all_variants or args.spec == "all"
    if args.spec == "all" and args.variant:
        raise BadInput("'check all' checks every variant; --variant needs a single spec")
    codes, json_out = [], []
    for name in names:
        spec = load_spec(name)
        if not all_variants:
            res, traces = _run_one(spec, args.variant, params, args, console)
            ci_outputs.record_check(args, res, traces, against_record=False)
            saved = {p: _save(tr, args.out) for p, tr in traces.items()} if args.save else {}
            if args.json:
                print(json.dumps(result_json(res, traces), indent=2))
            else:
                print_check(console, res, traces, saved)
            return _exit_for(res)
        results, all_traces, diffs = [], {}, []
        for v in spec.variants:
            res, traces = _run_one(spec, v, params, args, console)
            ci_outputs.record_check(args, res, traces, against_record=True)
            if args.save:
                for tr in traces.values():
                    _save(tr, args.out)
            results.append(res)
            all_traces[v] = traces
            diffs += _compare_record(spec, res)
            if res.interrupted:
                break
        if args.json:
            json_out.append({"spec": spec.name, "results": [result_json(r, all_traces[r.model.variant])
                                                            for r in results],
                             "record": {"matches": not diffs, "differences": diffs}})
        else:
            print_matrix(console, spec, results, all_traces, diffs)
        if any(r.interrupted for r in results):
            codes.append(INTERRUPTED)
            break
        codes.append(VIOLATED if diffs else
                     BOUNDED if any(not r.exhaustive and r.stop_reason != "all-violated" for r in results)
                     else OK)
    if args.json:
        print(json.dumps(json_out[0] if len(json_out) == 1 else json_out, indent=2))
    for c in (INTERRUPTED, VIOLATED, BOUNDED):
        if c in codes:
            return c
    return OK


def _compare_record(spec, res) -> list[str]:
    """Differences between a variant's verdicts and the spec's record of expected ones."""
    v = spec.variants.get(res.model.variant)
    if v is None:
        return []
    diffs = []
    for p in res.properties:
        st = res.status(p)
        expected = p in v.expected_violations
        if st == "violated" and not expected:
            diffs.append(f"{spec.name}/{v.name}: {p} is violated but the record says it holds "
                         f"(a regression, or a new finding to record)")
        elif st == "holds" and expected:
            diffs.append(f"{spec.name}/{v.name}: {p} holds but the record says it is violated")
        elif st == "bounded" and expected:
            diffs.append(f"{spec.name}/{v.name}: {p} not violated within the bounds but the record "
                         f"says it is violated")
    return diffs


def cmd_replay(args, console) -> int:
    from checker.loader import load_spec
    from checker.render import trace_table
    from checker.trace import TraceError, load, replay
    doc = load(args.file)
    try:
        spec = load_spec(doc["spec"])
        model = spec.instantiate(doc.get("variant"), doc.get("params", {}))
    except SpecError as e:
        raise TraceError(f"{args.file}: {e}") from None
    r = replay(model, doc)
    if args.json:
        print(json.dumps({"file": args.file, "reproduces": r.ok, "message": r.message,
                          "failed_step": r.failed_step, "steps": len(doc["steps"])}, indent=2))
    else:
        if r.trace is not None:
            console.print(trace_table(r.trace, f"{args.file}: {model.spec.name}/{model.variant}"))
        console.print(("REPRODUCES: " if r.ok else "DOES NOT REPRODUCE: ") + r.message, markup=False)
    return OK if r.ok else VIOLATED


def run():
    # a broken pipe (kcheck ... | head) is not an error worth a traceback
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())


if __name__ == "__main__":
    run()
