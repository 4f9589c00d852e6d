"""The kcheck command line. Exit codes (one table for every command, README "Exit codes"):
0 every property holds exhaustively / the trace reproduces / every verdict matches its record;
1 a property is violated / the trace does not reproduce / a verdict differs from its record;
2 bad input; 3 no violation found but the search was bounded (a limit, the memory watch, or a
verdict that a search_bound cut could hide); 4 the broker could not be started (conform);
5 the results were printed but saving them failed; 130 interrupted (Ctrl-C); 143 terminated
(SIGTERM): both after printing what was found."""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from rich.console import Console


def _package_clash() -> str | None:
    """kcheck's two top-level packages have generic names: a user's own module called 'spec'
    found first on the path (python -m run from a folder that holds one) would replace the spec
    language. Named in one line instead of an ImportError traceback."""
    import importlib.util
    own = Path(__file__).resolve().parent.parent / "spec"
    try:
        found = importlib.util.find_spec("spec")
    except (ImportError, ValueError):
        found = None
    origin = Path(found.origin).resolve().parent if found is not None and found.origin else None
    if origin != own:
        return (f"the module 'spec' found first on the path ({found.origin if found else 'none'}) "
                f"is not kcheck's spec language ({own}): rename your own 'spec' module, or run "
                f"the installed 'kcheck' command rather than 'python -m' from that folder")
    return None


if _package_clash():
    sys.stderr.write(f"kcheck: error: {_package_clash()}\n")
    raise SystemExit(2)

from checker import ci_outputs  # noqa: E402
from spec import SHIPPED  # noqa: E402
from spec.lang import SpecError  # noqa: E402

OK, VIOLATED, BAD_INPUT, BOUNDED, INTERRUPTED = 0, 1, 2, 3, 130
SAVE_FAILED, TERMINATED = 5, 143

# Modules that add commands: each has register(subparsers) -> {command name: handler}, where a
# handler is fn(args, console) -> exit code.
EXTENSIONS: list[str] = ["checker.graph_cli", "checker.symbolic_cli", "checker.spark_cli",
                         "checker.bugs_cli", "checker.report", "checker.explorer", "checker.scaffold",
                         "checker.conform_cli", "checker.walk"]


class BadInput(Exception):
    pass


class SaveFailed(Exception):
    """Writing results failed after they were printed (exit SAVE_FAILED, one line)."""


def _on_sigterm(signum, frame):
    # what timeout, CI runners and schedulers send: stop like Ctrl-C, printing what was found
    from checker.bfs import Terminated
    raise Terminated()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("kcheck")
    except PackageNotFoundError:
        return "unknown (not installed)"


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
        k, v = k.strip(), v.strip()
        if k in out and out[k] != v:
            raise BadInput(f"--param {k} is given twice ({k}={out[k]} and {k}={v}); give it once")
        out[k] = v
    return out


def out_dir(args) -> str | None:
    """Where --save writes; --out without --save would be silently ignored, so it is an error."""
    out = getattr(args, "out", None)
    if not getattr(args, "save", False):
        if out is not None:
            raise BadInput(f"--out {out} is given without --save; add --save to write there")
        return None
    return out or "counterexamples"


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
    p.add_argument("--version", action="version", version=f"kcheck {_version()}")
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
    ck.add_argument("--json-lines", action="store_true",
                    help="one JSON object per variant, printed as each finishes (a killed run "
                         "keeps what it finished)")
    ck.add_argument("--save", action="store_true",
                    help="save counterexamples under counterexamples/<spec>/<variant>/")
    ck.add_argument("--out", default=None, help="where --save writes (default counterexamples)")
    ck.add_argument("--checkpoint", metavar="DIR",
                    help="write the search's state to DIR at level ends (at most once a minute) "
                         "and resume from DIR's checkpoint when there is one")
    ck.add_argument("--no-symmetry", action="store_true",
                    help="store every state, not one per orbit of the spec's declared symmetry")
    ci_outputs.add_options(ck)

    rp = sub.add_parser("replay", help="re-execute a saved trace or a scenario")
    rp.add_argument("file")
    rp.add_argument("--spec", metavar="PATH",
                    help="the spec to replay against, instead of the one the trace names")
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
    from checker.bfs import CheckpointError, Terminated
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:   # not the main thread (an embedding program): leave SIGTERM alone
        previous = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handlers = {"list": cmd_list, "check": cmd_check, "replay": cmd_replay, **parser.handlers}
        if args.command is None:
            raise BadInput(f"no command given; commands: {', '.join(handlers)} (see 'kcheck --help')")
        code = handlers[args.command](args, console)
        ci_outputs.write(args)   # --junit / --sarif of check, progress, prove
        return code
    except (BadInput, SpecError, CheckpointError) as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return BAD_INPUT
    except SaveFailed as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return SAVE_FAILED
    except KeyboardInterrupt:
        err.print("kcheck: interrupted")
        return INTERRUPTED
    except Terminated:
        err.print("kcheck: terminated (SIGTERM)")
        return TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


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


def _save(tr, out_dir: str, doc_hook=None, md_hook=None) -> str:
    """Writes a counterexample as JSON and its Markdown twin; a failure is SaveFailed, one line.
    A user's spec is named relative to the trace file, so the two can move together."""
    from checker.render import markdown
    from checker.trace import relative_spec_ref, to_json
    m = tr.model
    d = Path(out_dir) / m.spec.name / m.variant
    path = d / f"{tr.property}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        doc = to_json(tr)
        doc["spec"] = relative_spec_ref(doc["spec"], d)
        if doc_hook is not None:
            doc_hook(doc)
        path.write_text(json.dumps(doc, indent=2) + "\n")
        md = markdown(tr, doc)
        (d / f"{tr.property}.md").write_text(md_hook(md) if md_hook else md)
    except OSError as e:
        raise SaveFailed(f"cannot save {path}: {e.strerror or e} (the results above are complete; "
                         f"choose a writable --out)") from None
    return str(path)


def save_all(traces: dict, out: str | None, err_console=None) -> tuple[dict, str | None]:
    """Saves every trace after the results were printed: -> (saved paths, the error or None)."""
    saved = {}
    if out is None:
        return saved, None
    for p, tr in traces.items():
        try:
            saved[p] = _save(tr, out)
        except SaveFailed as e:
            return saved, str(e)
    return saved, None


def result_json(res, traces) -> dict:
    from checker.trace import to_json
    m = res.model
    return {"spec": m.spec.name, "variant": m.variant, "parameters": m.params.as_dict(),
            "exhaustive": res.exhaustive, "stop_reason": res.stop_reason,
            "stop_detail": getattr(res, "stop_detail", None),
            "distinct_states": res.distinct_states, "transitions": res.transitions, "depth": res.depth,
            "elapsed_s": round(res.elapsed_s, 3), "cut_by_search_bounds": res.cut_by_bounds,
            "collision_probability": res.collision_probability,
            "never_fired": _never_fired(res),
            "disabled_actions": res.disabled() if hasattr(res, "disabled") else None,
            "properties": {p: _property_json(res, p, traces) for p in res.properties}}


def _property_json(res, p: str, traces: dict) -> dict:
    out = {"status": res.status(p), "trace_length": len(traces[p]) if p in traces else None,
           "trace": None}
    why = res.reason(p) if hasattr(res, "reason") else None
    if why:
        out["reason"] = why     # why 'bounded' (present only then)
    if p in traces:
        from checker.trace import to_json
        out["trace"] = to_json(traces[p])
    return out


def _never_fired(res) -> list[str] | None:
    """Actions that took no step; None when the search did not count (another engine) or
    stopped early (an action may simply not have had its turn)."""
    if not getattr(res, "fired", None) or not res.exhaustive:
        return None
    return res.never_fired()


# Seconds between two plain progress lines when stderr is not a terminal (a CI log)
PROGRESS_EVERY = 10.0


class _Progress:
    """Progress of a search on stderr: a live line naming spec, variant and properties on a
    terminal; one plain line every PROGRESS_EVERY seconds otherwise (KCHECK_PROGRESS_SECONDS),
    so a CI log moves. Standard output keeps only results."""

    def __init__(self, label: str):
        import os
        import time
        self.label, self.time = label, time.monotonic
        self.err = Console(stderr=True, highlight=False)
        self.every = float(os.environ.get("KCHECK_PROGRESS_SECONDS", PROGRESS_EVERY))
        self.last = self.time()
        self.live = None
        if self.err.is_terminal:
            from rich.live import Live
            self.live = Live(console=self.err, transient=True, refresh_per_second=4)

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, depth, distinct, left):
        text = f"{self.label}: depth {depth}, {distinct:,} distinct states, {left:,} left in this level"
        if self.live is not None:
            self.live.update(text)
        elif self.time() - self.last >= self.every:
            self.last = self.time()
            self.err.print(f"kcheck: {text}", markup=False, soft_wrap=True)


def _run_one(spec, variant, params, args, console):
    from checker.bfs import search
    model = spec.instantiate(variant, params)
    props = args.property
    if props:
        for p in props:
            if p not in spec.properties:
                hint = (f" ('{p}' is a progress property: use 'kcheck progress')"
                        if p in spec.progress else "")
                raise BadInput(f"unknown property '{p}' for spec {spec.name}{hint}; properties: "
                               f"{', '.join(spec.properties)}")
    spark = getattr(args, "spark", None) or getattr(args, "slices", None) or getattr(args, "partition", None)
    if spark and getattr(args, "checkpoint", None):
        raise BadInput("--checkpoint is for the single-process search: leave out --spark")
    if spark:
        from checker.spark_cli import check_on_spark
        res = check_on_spark(model, props, args, console)
    else:
        label = f"{spec.name}/{model.variant} ({', '.join(props) if props else 'every property'})"
        with _Progress(label) as update:
            res = search(model, props, args.max_depth, args.max_states, args.deadlock or None, update,
                         checkpoint=getattr(args, "checkpoint", None),
                         symmetry=not getattr(args, "no_symmetry", False))
    return res, _traces(res)


def _exit_for(res) -> int:
    if res.stop_reason == "terminated":
        return TERMINATED
    if res.interrupted:
        return INTERRUPTED
    if res.found:
        return VIOLATED
    return OK if res.exhaustive and all(res.status(p) != "bounded" for p in res.properties) \
        else BOUNDED


def _warn_never_fired(res, err: Console):
    never = _never_fired(res)
    if never:
        err.print(f"kcheck: warning: {res.model.spec.name}/{res.model.variant}: action"
                  f"{'s' if len(never) > 1 else ''} {', '.join(never)} never took a step though "
                  f"enabled by the parameters: a property about {'them' if len(never) > 1 else 'it'} "
                  f"holds vacuously", markup=False)


def cmd_check(args, console) -> int:
    import time
    from checker.loader import load_spec
    from checker.render import print_check, print_matrix
    params = _params(args.param)
    out = out_dir(args)
    if args.json and args.json_lines:
        raise BadInput("--json and --json-lines are two output formats: give one")
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    all_variants = args.all_variants or args.spec == "all"
    if args.spec == "all" and args.variant:
        raise BadInput("'check all' checks every variant; --variant needs a single spec")
    if getattr(args, "checkpoint", None) and all_variants:
        raise BadInput("--checkpoint DIR holds one search: give a single spec and variant")
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    t0 = time.perf_counter()
    codes, json_out, save_errors, compared, differing = [], [], [], 0, 0
    for name in names:
        spec = load_spec(name)
        if not all_variants:
            res, traces = _run_one(spec, args.variant, params, args, console)
            ci_outputs.record_check(args, res, traces, against_record=False)
            # results first: a failed save must not lose them
            if args.json:
                print(json.dumps(result_json(res, traces), indent=2), flush=True)
            elif args.json_lines:
                print(json.dumps(result_json(res, traces)), flush=True)
            else:
                print_check(console, res, traces, {})
            _warn_never_fired(res, err)
            saved, failure = save_all(traces, out)
            if not args.json and not args.json_lines:
                for p in saved.values():
                    console.print(f"saved: {p}", markup=False)
            if failure:
                raise SaveFailed(failure)
            return _exit_for(res)
        results, all_traces, diffs = [], {}, []
        for v in spec.variants:
            res, traces = _run_one(spec, v, params, args, console)
            ci_outputs.record_check(args, res, traces, against_record=True)
            results.append(res)
            all_traces[v] = traces
            d = _compare_record(spec, res)
            diffs += d
            if args.json_lines:
                line = result_json(res, traces)
                line["record"] = {"matches": not d, "differences": d}
                print(json.dumps(line), flush=True)
            _warn_never_fired(res, err)
            _, failure = save_all(traces, out)
            if failure:
                save_errors.append(failure)
            if res.interrupted:
                break
        compared += sum(len(r.properties) for r in results)
        differing += len(diffs)
        if args.json:
            json_out.append({"spec": spec.name, "results": [result_json(r, all_traces[r.model.variant])
                                                            for r in results],
                             "record": {"matches": not diffs, "differences": diffs}})
        elif not args.json_lines:
            print_matrix(console, spec, results, all_traces, diffs)
        if any(r.interrupted for r in results):
            codes.append(max(_exit_for(r) for r in results if r.interrupted))
            break
        codes.append(VIOLATED if diffs else
                     BOUNDED if any((not r.exhaustive and r.stop_reason != "all-violated") or
                                    any(r.status(p) == "bounded" for p in r.properties)
                                    for r in results)
                     else OK)
    if args.json:
        print(json.dumps(json_out[0] if len(json_out) == 1 else json_out, indent=2))
    elif not args.json_lines:
        console.print(f"{compared} verdicts compared with the record: "
                      f"{'all match' if not differing else f'{differing} differ'}; "
                      f"{time.perf_counter() - t0:.1f}s", markup=False)
    if save_errors:
        raise SaveFailed(save_errors[0] + (f" (and {len(save_errors) - 1} more)" if len(save_errors) > 1 else ""))
    for c in (TERMINATED, INTERRUPTED, VIOLATED, BOUNDED):
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
    from checker.trace import spec_path
    doc = load(args.file)
    try:
        spec = load_spec(args.spec or spec_path(doc["spec"], args.file))
        model = spec.instantiate(doc.get("variant"), doc.get("params", {}))
    except SpecError as e:
        raise TraceError(f"{args.file}: {e}"
                         + ("" if args.spec else " (replay --spec PATH names the spec to use)")) from None
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
    # `python -m checker.cli` runs this file as __main__, a second copy of the module: the command
    # modules raise checker.cli.BadInput, which only that copy's main() catches
    from checker.cli import run as run_imported
    run_imported()
