"""The state-graph commands: ``kcheck graph`` (export) and ``kcheck progress`` (progress
properties under weak fairness, and deadlocks, on the reachable graph). Exit codes as in
checker/cli.py."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rich.table import Table
from rich.text import Text

from kcheck import ci_outputs
from kcheck.layout import layout_of
from kcheck.bfs import Terminated
from kcheck.options import (BOUNDED, INTERRUPTED, OK, TERMINATED, VIOLATED, BadInput, path_value,
                            SaveFailed, json_option, make_console, model_options, out_dir, params,
                            positive,
                            property_option, save_options, symmetry_option)
from kcheck.verdict import (VALIDATE_ENV, cell, check_output, differs_from_record, exit_code,
                            print_json, search_differences, unrecorded_bounded)
from kcheck.spec import SHIPPED


def register(sub) -> dict:
    g = sub.add_parser("graph", help="export the reachable state graph (dot, graphml, json)",
                       parents=model_options())
    g.add_argument("--format", choices=("dot", "graphml", "json"), default="dot",
                   help="the graph's file format (default dot)")
    g.add_argument("--max-nodes", type=positive("--max-nodes"), default=100_000,
                   help="refuse graphs with more states than this (default 100,000)")
    g.add_argument("-o", "--output", metavar="FILE", type=path_value("-o"), help="write here instead of standard output")

    p = sub.add_parser("progress", help="check progress properties under weak fairness, and "
                                        "deadlocks, on the reachable state graph",
                       parents=[*model_options(all_variants=True), property_option(), json_option(),
                                save_options("lassos and deadlocks under counterexamples/<spec>/<variant>/"),
                                symmetry_option()])
    p.add_argument("--max-nodes", type=positive("--max-nodes"), default=2_000_000,
                   help="refuse graphs with more states than this (default 2,000,000)")
    p.add_argument("--disturbances", type=_disturbances, default=None, metavar="E|unbounded",
                   help="decide the verdicts for every behaviour whose environment makes at most E "
                        "disturbances (default: the spec's declared bound; 'unbounded': no bound)")
    p.add_argument("--deadlock", action="store_true",
                   help="report states with no successor even if the spec declares no terminal states")
    p.add_argument("--explain", action="store_true",
                   help="list every warning (verdicts bounded by a search bound, with the reason) "
                        "instead of their counts; docs/warnings.md says what each means")
    ci_outputs.add_options(p)
    return {"graph": cmd_graph, "progress": cmd_progress}


def _disturbances(text: str):
    import argparse
    from kcheck.run import UNBOUNDED
    if text == UNBOUNDED:
        return UNBOUNDED
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' is not a count (0 or more) or 'unbounded'")
    return int(text)


def cmd_graph(args, console) -> int:
    from kcheck.graph import build_graph, to_dot, to_graphml, to_json
    from kcheck.loader import load_spec
    model = load_spec(args.spec).instantiate(args.variant, params(args.param))
    sg = build_graph(model, args.max_nodes)
    if args.format == "json" and not args.output:
        print_json(to_json(sg), "graph", indent=1)
        return OK
    if args.format == "json" and os.environ.get(VALIDATE_ENV):
        check_output(to_json(sg), "graph")
    text = {"dot": to_dot, "graphml": to_graphml,
            "json": lambda g: json.dumps(to_json(g), indent=1) + "\n"}[args.format](sg)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as e:
            raise BadInput(f"cannot write {args.output}: {e.strerror}") from None
        console.print(f"{model.spec.name}/{model.variant}: {sg.states:,} states, "
                      f"{sg.edges:,} edges written to {args.output} ({args.format})",
                      markup=False)
    else:
        sys.stdout.write(text)
    return OK


# ---------------------------------------------------------------------------------------------
# progress

def run_progress(spec, variant, params_, args):
    """Build one variant's graph (the quotient under the spec's symmetry unless --no-symmetry)
    and check its progress properties and deadlocks. -> (graph.ProgressResult, {name: trace})"""
    from kcheck.run import Options, progress_of
    return progress_of(spec, variant, params_, Options(
        progress_properties=args.property, max_nodes=args.max_nodes, deadlock=args.deadlock,
        graph_symmetry=not args.no_symmetry, disturbances=args.disturbances))


def _graph_line(res) -> str:
    from kcheck.environment import COUNTER
    from kcheck.render import reduction_clause as clause
    sg = res.graph
    bounds = sorted({f.base for f in layout_of(sg.model).fields
                     if f.type.search_bound and f.base != COUNTER})
    budget = getattr(sg.model, "budget", None)
    cut = (f"; {sg.cut_by_bounds:,} transitions cut by search bounds ({', '.join(bounds)}"
           f"{'' if budget is None else f'; at most {budget} disturbances'}), counted as enabled "
           f"for fairness" if sg.cut_by_bounds else "")
    if budget is not None and sg.cut_by_bounds:
        cut += f"; {sg.cut_within_budget:,} of them within the disturbance bound"
    if res.cap_raised is not None:
        cut += _raised(res)
    return (f"state graph: {sg.states:,} states, {sg.edges:,} edges "
            f"({sg.transitions:,} transitions), depth {sg.max_depth}, built in {sg.elapsed_s:.2f}s"
            f"{cut}{clause(res)}")


def _raised(res) -> str:
    name, asked, used = res.cap_raised
    return (f"; {name} raised from {asked} to {used}, where it cuts no step within the disturbance "
            f"bound" if res.graph.cut_within_budget == 0 else
            f"; {name} raised from {asked} to {used}, the end of its range, where it still cuts "
            f"steps within the disturbance bound")


def _verdict_cell(res, name: str, tr) -> str:
    """A verdict with what it assumes: 'holds (≤ E disturbances)', and a lasso's driver."""
    text = cell(res.status(name), len(tr) if tr is not None else None,
                lasso=res.kind(name) != "deadlock")
    if res.assumes.get(name):
        budget = res.graph.model.budget
        text += f" (≤ {budget} disturbance{'' if budget == 1 else 's'})"
    if res.drivers.get(name):
        text = text[:-1] + f", {res.drivers[name]})" if text.endswith(")") else text
    return text


def result_json(res, traces) -> dict:
    """A progress check's result as its JSON document (checker/output_schema.json, $defs/run)."""
    return res.report(traces).to_json()


def _print_one(console, res, traces, saved):
    from kcheck.render import heading, loop_sentence, params_str, trace_table
    m = res.model
    console.print(heading(m, params_str(m.params.as_dict())))
    console.print(_graph_line(res), markup=False)
    t = Table(show_header=True)
    for col in ("property", "kind", "fair (weak, per instance)", "verdict", "meaning"):
        t.add_column(col)
    for name in res.properties:
        t.add_row(name, res.kind(name), Text(", ".join(res.fair(name)) or "-"),
                  _verdict_cell(res, name, traces.get(name)), Text(res.doc(name)))
    console.print(t)
    for name in res.properties:
        if res.reason(name):
            console.print(f"{name}: no violation (bounded): {res.reason(name)}", markup=False)
    for name, tr in traces.items():
        if tr.loop_index is None:
            console.print(trace_table(tr, f"Shortest trace to a deadlock ({len(tr)} steps)"))
        else:
            trig = res.found[name].trigger_index
            title = f"Lasso for {name} ({len(tr)} step{'' if len(tr) == 1 else 's'})"
            console.print(trace_table(tr, title))
            if res.kind(name) == "leads-to" and trig is not None:
                console.print(f"P holds and Q does not {'in the initial state' if trig == 0 else f'after step {trig}'}"
                              f"; Q never holds after it.", markup=False)
            console.print(loop_sentence(tr), markup=False)
            if res.drivers.get(name) == "environment-driven":
                console.print("The loop disturbs (an environment action): fairness permits an "
                              "environment that disturbs for ever; this is not a protocol failure.",
                              markup=False)
        if name in saved:
            console.print(f"saved: {saved[name]}", markup=False)


def cmd_progress(args, console) -> int:
    from kcheck.loader import load_spec
    from kcheck.render import params_str
    import time
    from kcheck.render import save_all
    from kcheck.notices import Notices
    params_ = params(args.param)
    out = out_dir(args)
    notices = Notices()
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    all_variants = args.all_variants or args.spec == "all"
    if args.spec == "all" and args.variant:
        raise BadInput("'progress all' checks every variant; --variant needs a single spec")
    err = make_console(stderr=True, soft_wrap=True)
    t0 = time.perf_counter()
    codes, json_out, save_errors, compared, differing = [], [], [], 0, 0
    stopped = None
    for spec_name in names:
        if stopped is not None:
            break
        spec = load_spec(spec_name)
        for p in args.property or []:
            if p not in spec.progress:
                hint = (f" ('{p}' is a safety property: use 'kcheck check')"
                        if p in spec.properties else "")
                raise BadInput(f"unknown progress property '{p}' for spec {spec.name}{hint}; progress "
                               f"properties: {', '.join(spec.progress) or 'none'}")
        if not all_variants:
            res, traces = run_progress(spec, args.variant, params_, args)
            ci_outputs.record_progress(args, res, traces, against_record=False)
            # results first: a failed save must not lose them
            if args.json:
                print_json(result_json(res, traces), "run")
            else:
                if not res.properties:
                    console.print(f"spec {spec.name} declares no progress properties and no terminal "
                                  f"states: nothing to check", markup=False)
                _print_one(console, res, traces, {})
            saved, failure = save_all(traces, out)
            if not args.json:
                for path in saved.values():
                    console.print(f"saved: {path}", markup=False)
            if failure:
                raise SaveFailed(failure)
            return exit_code(res.verdicts, True)
        results, diffs = [], []
        for variant in (spec.variants or [None]):
            try:
                res, traces = run_progress(spec, variant, params_, args)
                ci_outputs.record_progress(args, res, traces, against_record=True)
                d = search_differences(spec, res)
                notices.bounded_verdicts(res)
                res.keep_figures_only()
                results.append((res, traces))
                diffs += d
                # report as it goes: a run over every spec takes minutes
                err.print(f"kcheck: progress {spec.name}/{res.model.variant}: "
                          f"{res.graph.states:,} states, "
                          + ", ".join(f"{n} {res.status(n)}" for n in res.properties)
                          + (f"; {len(d)} differ from the record" if d else ""), markup=False)
                _, failure = save_all(traces, out)
                if failure:
                    save_errors.append(failure)
            except (KeyboardInterrupt, Terminated) as e:
                # the variants that finished are printed below, then the command stops
                stopped = TERMINATED if isinstance(e, Terminated) else INTERRUPTED
                said = "terminated (SIGTERM)" if stopped == TERMINATED else "interrupted"
                err.print(f"kcheck: progress {said} in {spec.name}/{variant}; the verdicts of the "
                          f"{len(results)} variant(s) finished before follow", markup=False)
                break
        if not results:
            break
        if args.json:
            json_out.append({"spec": spec.name,
                             "results": [result_json(*r) for r in results],
                             "record": {"matches": not diffs, "differences": diffs}})
        else:
            from kcheck.render import differs_line, print_folded
            props = list(results[0][0].properties) if results else []
            rows = []
            for res, traces in results:
                v = res.model.variant
                cells = []
                for p in props:
                    text = _verdict_cell(res, p, traces.get(p))
                    if differs_from_record(spec, v, p, res.status(p)):
                        text += " (≠ record)"
                    cells.append(text)
                rows.append((v, *cells, f"{res.graph.states:,}"))

            def build(headers):
                t = Table(title=f"{spec.name}: progress verdicts by variant "
                                f"({params_str(spec.instantiate(results[0][0].model.variant, params_).params.as_dict())})",
                          title_justify="left")
                t.add_column("variant")
                for h in headers:
                    t.add_column(h)
                t.add_column("states")
                for row in rows:
                    t.add_row(*row)
                return t
            print_folded(console, build, props)
            for res, _ in results:
                if res.cap_raised is not None:
                    console.print(f"{res.model.variant}: {_raised(res)[2:]}", markup=False)
            # the bounded verdicts' reasons: in the summary of warnings at the end (kcheck.notices)
            for d in diffs:
                console.print(differs_line(d))
        # a bounded verdict that the record expects (spec.bounded) matches it, like a violation
        codes.append(VIOLATED if diffs else
                     BOUNDED if any(unrecorded_bounded(spec, r[0].model.variant, r[0].verdicts)
                                    for r in results) else OK)
        compared += sum(len(r[0].properties) for r in results)
        differing += len(diffs)
    if args.json:
        if json_out:
            print_json(json_out[0] if len(json_out) == 1 else json_out, "variants_or_specs")
    else:
        console.print(f"{compared} verdicts compared with the record: "
                      f"{'all match' if not differing else f'{differing} differ'}; "
                      f"{time.perf_counter() - t0:.1f}s", markup=False)
    notices.print(make_console(stderr=True, soft_wrap=True), args.explain,
                  "progress all" if args.spec == "all" else f"progress {args.spec} --all-variants")
    if save_errors:
        raise SaveFailed(save_errors[0])
    if stopped is not None:
        return stopped
    return VIOLATED if VIOLATED in codes else BOUNDED if BOUNDED in codes else OK
