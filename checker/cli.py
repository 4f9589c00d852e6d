"""The kcheck command line. Exit codes (one table for every command, README "Exit codes"):
0 every property holds exhaustively / the trace reproduces / every verdict matches its record;
1 a property is violated / the trace does not reproduce / a verdict differs from its record /
`upgrade --check`: a file would change;
2 bad input; 3 no violation found but the search was bounded (a limit, the memory watch, or a
verdict that a search_bound cut could hide); 4 the broker could not be started (conform);
5 the results were printed but saving them failed; 130 interrupted (Ctrl-C); 143 terminated
(SIGTERM): both after printing what was found."""
from __future__ import annotations

import ctypes
import argparse
import json
import signal
import sys
from pathlib import Path

from kcheck import ci_outputs
from kcheck.spec import SHIPPED
from kcheck.spec.lang import SpecError

from kcheck.options import (BAD_INPUT, BOUNDED, BROKER_FAILED, INTERRUPTED, OK, path_value,  # noqa: F401
                            SAVE_FAILED, TERMINATED, VIOLATED, BadInput, Parser, Progress,
                            PartFailed, SaveFailed, add_engine_options, engine, json_option, writable_folder,
                            model_options, out_dir, params, spark_progress,
                            make_console, positive, property_option, quotient_option,
                            save_options, symmetry_option)
from kcheck.trace import traces_of
from kcheck.verdict import Verdict, exit_code, from_search, print_json
from kcheck.verdict import search_differences as compare_record  # noqa: F401

# The one registry of commands: each module has register(subparsers) -> {command: handler},
# where a handler is fn(args, console) -> exit code. This module's own commands come first.
COMMAND_MODULES: list[str] = ["kcheck.cli", "kcheck.graph_cli", "kcheck.symbolic_cli",
                              "kcheck.spark_cli", "kcheck.bugs_cli", "kcheck.report",
                              "kcheck.explorer", "kcheck.scaffold", "kcheck.conform_cli",
                              "kcheck.walk"]


_STOPPING = [False]     # a signal is being handled: printing what was found


def _on_sigterm(signum, frame):
    # what timeout, CI runners and schedulers send: stop like Ctrl-C, printing what was found.
    # A second SIGTERM (a supervisor's repeat) while that is printed is ignored: raised there,
    # it threw the partial results away
    if _STOPPING[0]:
        return
    _STOPPING[0] = True
    from kcheck.bfs import Terminated
    raise Terminated()


def _on_sigint(signum, frame):
    # Ctrl-C, as Python's own handler, but a second one while the first's results are printed
    # is ignored (pressed again out of impatience, it cut the printing short)
    if _STOPPING[0]:
        return
    _STOPPING[0] = True
    raise KeyboardInterrupt


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("kcheck")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    import importlib
    p = Parser(prog="kcheck", description="Model checker with executable specs for Kafka protocols.")
    p.add_argument("--version", action="version", version=f"kcheck {_version()}")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    p.handlers = {}
    for mod in COMMAND_MODULES:
        p.handlers.update(importlib.import_module(mod).register(sub))
    return p


def register(sub) -> dict:
    """list, check, replay."""
    sub.add_parser("list", help="specs, parameters, variants, properties", parents=[json_option()])

    ck = sub.add_parser("check", help="explore a spec breadth-first and check its properties",
                        parents=[*model_options(all_variants=True), property_option(),
                                 json_option(), symmetry_option(), quotient_option(),
                                 save_options("counterexamples under counterexamples/<spec>/<variant>/")])
    ck.add_argument("--max-depth", type=positive("--max-depth"), metavar="N",
                    help="stop after N levels (the verdicts then say bounded)")
    ck.add_argument("--max-states", type=positive("--max-states"), metavar="N",
                    help="stop after N distinct states (the verdicts then say bounded)")
    ck.add_argument("--deadlock", action="store_true", help="report states with no successor")
    ck.add_argument("--json-lines", action="store_true",
                    help="one JSON object per variant, printed as each finishes (a killed run "
                         "keeps what it finished)")
    ck.add_argument("--checkpoint", metavar="DIR", type=path_value("--checkpoint"),
                    help="write the search's state to DIR at level ends (at most once a minute) "
                         "and resume from DIR's checkpoint when there is one")
    ck.add_argument("--por", action="store_true",
                    help="partial-order reduction: expand ample sets of steps that commute with "
                         "the rest (same verdicts; a trace may be longer than the shortest)")
    ck.add_argument("--prove", action="store_true",
                    help="also prove, with Z3 (k-induction and the spec's lemmas, the search "
                         "bounds lifted), each property the search finds holding: a proved one "
                         "covers every epoch, the others only the search's bounds (the covers "
                         "column says which); one variant only")
    ck.add_argument("--explain", action="store_true",
                    help="list every warning (actions that never took a step, verdicts bounded by "
                         "a search bound) instead of their counts; docs/warnings.md says what "
                         "each means")
    add_engine_options(ck)
    ci_outputs.add_options(ck)

    rp = sub.add_parser("replay", help="re-execute a saved trace or a scenario", parents=[json_option()])
    rp.add_argument("file", help="a saved counterexample or a scenario (a trace file)")
    rp.add_argument("--spec", metavar="PATH",
                    help="the spec to replay against, instead of the one the trace names")
    up = sub.add_parser("upgrade", help="rewrite saved traces and scenarios in the current trace "
                                        "format and the spec's current fields")
    up.add_argument("traces", nargs="+", metavar="TRACE", type=path_value("TRACE"),
                    help="a trace file, or a folder whose *.json files are traces (searched "
                         "recursively)")
    up.add_argument("--check", action="store_true",
                    help="only report what would change, writing nothing (exit 1 if a file would "
                         "change)")
    return {"list": cmd_list, "check": cmd_check, "replay": cmd_replay, "upgrade": cmd_upgrade}


def main(argv=None) -> int:
    console = make_console(soft_wrap=False)
    if not console.is_terminal:
        console = make_console(width=400)  # a pipe or a file: tables at their natural width
    err = make_console(stderr=True, soft_wrap=True)
    from kcheck.bfs import Terminated
    from kcheck.checkpoint import CheckpointError
    _STOPPING[0] = False
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        previous_int = signal.signal(signal.SIGINT, _on_sigint) \
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler else None
    except ValueError:   # not the main thread (an embedding program): leave the signals alone
        previous = previous_int = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handlers = parser.handlers
        if args.command is None:
            raise BadInput(f"no command given; commands: {', '.join(handlers)} (see 'kcheck --help')")
        try:
            code, failures = handlers[args.command](args, console), []
        except SaveFailed as e:     # the results are printed: the other outputs are still due
            code, failures = None, [str(e)]
        failures += ci_outputs.write(args)   # --junit / --sarif of check, progress, prove
        if failures:
            raise SaveFailed("; ".join(failures) + (f" (the run's own exit code: {code})"
                                                    if code is not None else ""))
        return code
    except (BadInput, SpecError, CheckpointError) as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return BAD_INPUT
    except SaveFailed as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return SAVE_FAILED
    except PartFailed as e:
        err.print(f"kcheck: error: {e}", markup=False)
        return BROKER_FAILED
    except KeyboardInterrupt:
        err.print("kcheck: interrupted")
        return INTERRUPTED
    except ctypes.ArgumentError as e:   # Ctrl-C while ctypes converted a Z3 call's arguments
        if "KeyboardInterrupt" not in str(e):
            raise
        err.print("kcheck: interrupted")
        return INTERRUPTED
    except Terminated:
        err.print("kcheck: terminated (SIGTERM)")
        return TERMINATED
    except OSError as e:
        if not _stdout_failed(e):
            raise
        # the results could not be printed (a full disk, /dev/full, a closed pipe's EIO): say so
        # on stderr, in one line, rather than a traceback from deep inside rich or print
        _drop_stdout()
        err.print(f"kcheck: error: cannot write the results to standard output ({e.strerror})",
                  markup=False)
        return SAVE_FAILED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def cmd_list(args, console) -> int:
    from rich.text import Text
    from kcheck.loader import load_spec
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
        print_json(out, "list")
        return OK
    for s in out:
        console.print(Text.assemble((s["spec"], "bold"), f": {s['doc']}"))
        console.print("  parameters: " + ", ".join(f"{k}={v['default']} ({v['min']}..{v['max']})"
                                                    for k, v in s["parameters"].items()))
        console.print("  variants:   " + ", ".join(k + (" (default)" if v["default"] else "")
                                                    for k, v in s["variants"].items()))
        console.print("  properties: " + ", ".join(s["properties"]))
        if s["progress"]:
            console.print("  progress:   " + ", ".join(s["progress"]))
        if s["rules"]:
            # each rule `kcheck compare --rule` can compare, with the variants that replace it
            spec = load_spec(s["spec"])
            console.print("  rules:      " + "; ".join(
                f"{r} (replaced in {', '.join(v for v in spec.rules[r] if v is not None)})"
                if any(v is not None for v in spec.rules[r]) else r for r in s["rules"]),
                markup=False)
    return OK


def result_json(res, traces) -> dict:
    """A search's result as its JSON document (checker/output_schema.json, $defs/run)."""
    return from_search(res, traces, getattr(res, "engine", None) or "bfs").to_json()


def _known_properties(spec, props) -> None:
    for p in props or ():
        if p not in spec.properties:
            hint = (f" ('{p}' is a progress property: use 'kcheck progress')"
                    if p in spec.progress else "")
            raise BadInput(f"unknown property '{p}' for spec {spec.name}{hint}; properties: "
                           f"{', '.join(spec.properties)}")


def _run_one(spec, variant, params_, args, console):
    """One variant checked as check's options say (run.run_variant) -> run.VariantRun."""
    from kcheck import run
    _known_properties(spec, args.property)
    chosen = engine(args)
    options = run.Options(properties=args.property, max_depth=args.max_depth,
                          max_states=args.max_states, deadlock=args.deadlock or None,
                          symmetry=not getattr(args, "no_symmetry", False),
                          quotient=not getattr(args, "no_quotient", False),
                          checkpoint=getattr(args, "checkpoint", None),
                          por=getattr(args, "por", False), master=args.spark or "local[*]",
                          slices=args.slices, verbose=args.verbose)
    if chosen == "bfs":
        label = (f"{spec.name}/{spec.variant_name(variant)} "
                 f"({', '.join(args.property) if args.property else 'every property'})")
        with Progress(label) as update:
            return run.run_variant(spec, variant, params_, options, engine=chosen,
                                   search_progress=update, prove=getattr(args, "prove", False))
    live, update = spark_progress(args.verbose, None if chosen == "spark-ownership" else "slices")
    if live is not None:
        with live:
            vr = run.run_variant(spec, variant, params_, options, engine=chosen, search_progress=update,
                                 prove=getattr(args, "prove", False))
    else:
        vr = run.run_variant(spec, variant, params_, options, engine=chosen, search_progress=update,
                             prove=getattr(args, "prove", False))
    # how the work was spread: on stderr beside a JSON document, else with the verdicts
    line = vr.search.distribution.line()
    (make_console(stderr=True, soft_wrap=True) if args.json else console).print(line, markup=False)
    return vr


def _exit_for(res) -> int:
    return exit_code({p: res.status(p) for p in res.properties}, res.exhaustive,
                     res.stop_reason if res.interrupted else None)


def cmd_check(args, console) -> int:
    import time
    from kcheck.loader import load_spec
    from kcheck.render import print_check, print_matrix, print_proofs
    from kcheck.verdict import holds_covers
    from kcheck.render import save_all
    from kcheck.notices import Notices
    params_ = params(args.param)
    out = out_dir(args)
    notices = Notices()
    if args.json and args.json_lines:
        raise BadInput("--json and --json-lines are two output formats: give one")
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    all_variants = args.all_variants or args.spec == "all"
    if args.spec == "all" and args.variant:
        raise BadInput("'check all' checks every variant; --variant needs a single spec")
    if args.prove and all_variants:
        raise BadInput("--prove proves one variant's verdicts: give one spec (and --variant), "
                       "not 'all' or --all-variants")
    if getattr(args, "checkpoint", None) and all_variants:
        raise BadInput("--checkpoint DIR holds one search: give a single spec and variant")
    if getattr(args, "checkpoint", None):
        writable_folder("--checkpoint", args.checkpoint, "a checkpoint")
    err = make_console(stderr=True, soft_wrap=True)
    t0 = time.perf_counter()
    codes, json_out, save_errors, compared, differing = [], [], [], 0, 0
    for name in names:
        spec = load_spec(name)
        if not all_variants:
            vr = _run_one(spec, args.variant, params_, args, console)
            res, traces = vr.search, vr.traces
            run = from_search(res, traces, res.engine)
            for p, pr in run.properties.items():
                covers = holds_covers(res, p, vr.proofs)
                if covers:
                    pr.details["covers"] = covers
            ci_outputs.record_check(args, res, traces, against_record=False)
            # results first: a failed save must not lose them
            if args.json or args.json_lines:
                print_json(run.to_json(), "run", indent=2 if args.json else None)
            else:
                print_check(console, res, traces, {}, vr.proofs)
                if args.prove:
                    print_proofs(console, res, vr.proofs)
            notices.idle(run)
            # one variant's warnings are few: each in full (its bounded verdicts' reasons are
            # printed under its table)
            notices.print(err, True, "check")
            saved, failure = save_all(traces, out)
            if not args.json and not args.json_lines:
                for p in saved.values():
                    console.print(f"saved: {p}", markup=False)
            if res.stop_reason == "checkpoint-failed":
                failure = f"{res.stop_detail}; the verdicts above are bounded at depth {res.depth}"
            if failure:
                raise SaveFailed(failure)
            return _exit_for(res)
        results, all_traces, diffs = [], {}, []
        for v in spec.variants:
            vr = _run_one(spec, v, params_, args, console)
            res, traces, d = vr.search, vr.traces, vr.diffs
            run = from_search(res, traces, res.engine)
            ci_outputs.record_check(args, res, traces, against_record=True)
            results.append(res)
            all_traces[v] = traces
            diffs += d
            if args.json_lines:
                print_json({**run.to_json(), "record": {"matches": not d, "differences": d}},
                           "run_with_record", indent=None)
            notices.idle(run)
            notices.bounded_verdicts(res)
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
                                    any(r.status(p) is Verdict.BOUNDED for p in r.properties)
                                    for r in results)
                     else OK)
    if args.json:
        print_json(json_out[0] if len(json_out) == 1 else json_out, "variants_or_specs")
    elif not args.json_lines:
        console.print(f"{compared} verdicts compared with the record: "
                      f"{'all match' if not differing else f'{differing} differ'}; "
                      f"{time.perf_counter() - t0:.1f}s", markup=False)
    # after the results: one short summary of what deserves a look (issue 37)
    notices.print(err, args.explain, "check all" if args.spec == "all" else f"check {args.spec} --all-variants")
    if save_errors:
        raise SaveFailed(save_errors[0] + (f" (and {len(save_errors) - 1} more)" if len(save_errors) > 1 else ""))
    for c in (TERMINATED, INTERRUPTED, VIOLATED, BOUNDED):
        if c in codes:
            return c
    return OK


def cmd_replay(args, console) -> int:
    from kcheck.loader import load_spec
    from kcheck.render import trace_table
    from kcheck.trace import TraceError, load, replay
    from kcheck.trace import spec_path
    doc = load(args.file)
    try:
        spec = load_spec(args.spec or spec_path(doc["spec"], args.file))
        model = spec.instantiate(doc.get("variant"), doc.get("params", {}))
    except SpecError as e:
        raise TraceError(f"{args.file}: {e}"
                         + ("" if args.spec else " (replay --spec PATH names the spec to use)")) from None
    r = replay(model, doc)
    if args.json:
        print_json({"file": args.file, "reproduces": r.ok, "message": r.message,
                    "failed_step": r.failed_step, "steps": len(doc["steps"])}, "replay")
    else:
        if r.trace is not None:
            console.print(trace_table(r.trace, f"{args.file}: {model.spec.name}/{model.variant}"))
        console.print(("REPRODUCES: " if r.ok else "DOES NOT REPRODUCE: ") + r.message, markup=False)
    return OK if r.ok else VIOLATED


def _trace_files(paths: list[str]) -> list[tuple[str, str | None]]:
    """upgrade's arguments as files: (path, None), or (path, why it is not a trace file) for one
    that cannot be (a name that does not exist, a folder without *.json files)."""
    out: list[tuple[str, str | None]] = []
    for a in paths:
        p = Path(a)
        if p.is_dir():
            found = sorted(p.rglob("*.json"))
            out += [(str(f), None) for f in found] or \
                [(a, "a folder without trace files (*.json)")]
        elif p.exists():
            out.append((a, None))
        else:
            out.append((a, "does not exist; give a trace file or a folder of them"))
    return out


def _upgraded_text(path: str, up) -> str:
    """The upgraded trace's text: a file whose only change is its version keeps its own layout
    (a hand-written scenario's line breaks), else the layout `check --save` writes."""
    import re
    from kcheck.trace import FORMAT
    if not up.state_changed:
        text = Path(path).read_text(encoding="utf-8")
        new, n = re.subn(r'("kcheck_trace"\s*:\s*)\d+', rf"\g<1>{FORMAT}", text, count=1)
        if n == 1 and json.loads(new) == up.doc:
            return new
    return json.dumps(up.doc, indent=2) + "\n"


def cmd_upgrade(args, console) -> int:
    """Each file in turn: loaded, upgraded (kcheck.trace.upgrade) and replayed, then written
    atomically with its Markdown twin; a file that cannot be upgraded is named with the reason
    and left as it is, and the others are still done. Exit 2 if any failed, else with --check 1
    if any would change, else 0."""
    from kcheck.loader import load_spec
    from kcheck.options import SaveFailed, write_file
    from kcheck.render import markdown
    from kcheck.trace import TraceError, load, spec_path, upgrade
    err = make_console(stderr=True, soft_wrap=True)
    changed, current, failed = [], [], []
    for path, why in _trace_files(args.traces):
        try:
            if why is not None:
                raise TraceError(f"{path} {why}")
            doc = load(path)
            try:
                model = load_spec(spec_path(doc["spec"], path)).instantiate(
                    doc.get("variant"), doc.get("params", {}))
            except SpecError as e:
                raise TraceError(f"{path}: {e}") from None
            try:
                up = upgrade(model, doc)
            except SpecError as e:
                raise TraceError(f"{path}: {e}") from None
        except TraceError as e:
            failed.append(path)
            err.print(f"kcheck: error: {' '.join(str(e).split())}", markup=False)
            continue
        if not up.changes:
            current.append(path)
            continue
        changed.append(path)
        console.print(f"{path}: {'; '.join(up.changes)}"
                      + (" (not written: --check)" if args.check else ""), markup=False)
        if args.check:
            continue
        twin = Path(path).with_suffix(".md")
        try:
            write_file(path, _upgraded_text(path, up))
            # the Markdown twin shows the initial state and the fields each step changes
            if up.state_changed and twin.exists() and up.doc.get("property"):
                write_file(twin, markdown(up.replayed.trace, up.doc))
        except OSError as e:
            raise SaveFailed(f"cannot write {e.filename or path} ({e.strerror}); the files "
                             f"before it are upgraded") from None
    verb = "would be upgraded" if args.check else "upgraded"
    console.print(f"{len(changed)} {verb}, {len(current)} already current, {len(failed)} failed"
                  + (f": {', '.join(failed)}" if failed else ""), markup=False)
    if failed:
        return BAD_INPUT
    return VIOLATED if args.check and changed else OK


def _stdout_failed(e: OSError) -> bool:
    """Whether ``e`` is a write to standard output that failed: an error of writing (a full disk
    or /dev/full, an I/O error, a closed pipe) that names no file. Writes to files kcheck names
    (--save, --junit, the report) fail with the file's name, and say so on their own paths."""
    import errno
    return e.filename is None and e.errno in (errno.ENOSPC, errno.EIO, errno.EPIPE,
                                              errno.EDQUOT, errno.EFBIG)


def _drop_stdout() -> None:
    """Standard output that failed: later writes (the interpreter's flush at exit) go nowhere,
    so nothing else prints a traceback about it."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def run():
    # a broken pipe (kcheck ... | head) is not an error worth a traceback
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    code = main()
    if code in (INTERRUPTED, TERMINATED):
        # a signal that landed inside a Z3 constructor leaves a half-built object whose __del__
        # fails at exit; the interruption was reported, so that is noise, not a traceback to show
        sys.unraisablehook = lambda unraisable: None
    sys.exit(code)


if __name__ == "__main__":
    # `python -m kcheck.cli` runs this file as __main__, a second copy of the module: the command
    # modules raise kcheck.cli.BadInput, which only that copy's main() catches
    from kcheck.cli import run as run_imported
    run_imported()
