"""Rendering for people: traces as tables, verdict matrices, search statistics, and the
Markdown twin (table plus Mermaid sequence diagram) of a saved counterexample."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kcheck.layout import layout_of
from kcheck.trace import Trace, relative_spec_ref
from kcheck.verdict import Verdict, cell, differs_from_record

if TYPE_CHECKING:     # a type only: the search imports nothing of this module
    from kcheck.bfs import SearchResult


def show_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):        # an array, a row of a 2-D array
        return "[" + ", ".join(map(show_value, v)) + "]"
    if isinstance(v, dict):        # a record
        return "{" + ", ".join(f"{k}: {show_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def changes_text(step) -> str:
    return ", ".join(f"{k}: {show_value(a)} → {show_value(b)}" for k, (a, b) in step.changes.items()) or "(no change)"


def trace_table(tr: Trace, title: str | None = None) -> Table:
    t = Table(title=title, show_lines=False, title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("action (request)")
    t.add_column("outcome")
    t.add_column("changed fields", max_width=120, overflow="fold")
    t.add_row("0", "initial state", "", Text(_initial_summary(tr)))
    for i, s in enumerate(tr.steps, start=1):
        mark = f"{i}" + (" ↺" if tr.loop_index is not None and i - 1 == tr.loop_index else "")
        t.add_row(mark, Text(s.label), Text(show_value(s.outcome) if s.outcome is not None else ""),
                  Text(changes_text(s)))
    return t


def _initial_summary(tr: Trace) -> str:
    return ", ".join(f"{k}={show_value(v)}"
                     for k, v in tr.initial_state.items())


def stats_line(r: SearchResult) -> str:
    from kcheck.quotient import clause as quotient_clause
    m = r.model
    if r.exhaustive:
        scope = "exhaustive"
    else:
        scope = {"max-depth": "BOUNDED by --max-depth", "max-states": "BOUNDED by --max-states",
                 "interrupted": "INTERRUPTED", "terminated": "TERMINATED (SIGTERM)",
                 "all-violated": "stopped: every property violated",
                 "out-of-memory": "BOUNDED: out of memory (use --max-states)",
                 "checkpoint-failed": f"BOUNDED: {getattr(r, 'stop_detail', '')}",
                 "memory": f"BOUNDED by the memory watch: {getattr(r, 'stop_detail', '')}",
                 }.get(r.stop_reason, r.stop_reason or "")
    cut = ""
    if r.cut_by_bounds:
        bounds = sorted({f.base for f in layout_of(m).fields if f.type.search_bound})
        cut = f"; {r.cut_by_bounds:,} transitions cut by search bounds ({', '.join(bounds)})"
    coll = r.storage if r.storage.startswith("exact") else \
        f"{r.collision_probability:.1e} ({r.storage}; optimistic, as TLC)"
    return (f"{r.distinct_states:,} distinct states, {r.transitions:,} transitions, depth {r.depth}, "
            f"{r.elapsed_s:.2f}s ({r.states_per_s:,.0f} states/s), {scope}{cut}; "
            f"fingerprint collision probability {coll}{reduction_clause(r)}{quotient_clause(r)}")


def verdict_cell(r: SearchResult, prop: str, traces: dict) -> str:
    st = r.status(prop)
    return cell(st, len(traces[prop]) if st in (Verdict.VIOLATED, Verdict.REACHED) else None)


def loop_sentence(tr: Trace) -> str:
    """What a lasso's loop means, in one sentence."""
    if tr.loop_index == len(tr.steps):
        where = f"After step {len(tr.steps)}" if tr.steps else "In the initial state"
        return (f"{where} the behaviour stops for ever: no action the property assumes fair is "
                f"enabled there.")
    return (f"Steps {tr.loop_index + 1}..{len(tr.steps)} repeat for ever (↺): the loop is fair, and "
            f"the property's goal never holds along it.")


def params_str(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def print_check(console: Console, r: SearchResult, traces: dict, saved: dict, proofs=()):
    from kcheck.verdict import holds_covers
    m = r.model
    console.print(heading(m, params_str(m.params.as_dict())))
    console.print(stats_line(r), markup=False)
    coverage = r.statistics.get("steps_per_action") if hasattr(r, "statistics") else None
    if coverage:
        # action coverage: an action with few steps is one a "holds" leans on lightly
        console.print("steps per action: " + ", ".join(f"{a} {n:,}" for a, n in coverage.items()),
                      markup=False)
    # what each "holds" covers, in its own column when any is qualified: a search that cut steps
    # at an epoch cap answers up to that cap, unless a proof or a quotient covers every epoch
    covers = {p: holds_covers(r, p, proofs) for p in r.properties}
    qualified = any(covers.values())
    t = Table(show_header=True)
    t.add_column("property")
    t.add_column("verdict")
    if qualified:
        t.add_column("covers")
    t.add_column("meaning")
    for p in r.properties:
        doc = m.spec.properties[p].doc if p in m.spec.properties else "no reachable state without a successor"
        t.add_row(p, verdict_cell(r, p, traces), *([covers[p] or ""] if qualified else []),
                  Text(doc))
    console.print(t)
    if r.exhaustive and hasattr(r, "reason"):
        for p in r.properties:
            why = r.reason(p)
            if why:
                console.print(f"{p}: no violation (bounded): {why}", markup=False)
    for p, tr in traces.items():
        what = "witness" if r.status(p) is Verdict.REACHED else "counterexample"
        console.print(trace_table(tr, f"Shortest {what} for {p} ({len(tr)} steps)"))
        if p in saved:
            console.print(f"saved: {saved[p]}", markup=False)


def print_proofs(console: Console, r: SearchResult, proofs) -> None:
    """check --prove: one line on what the proofs decided, and one per property left at the
    search's bounds, with why (the covers column has the rest)."""
    from kcheck.verdict import Verdict, cell, holds_covers
    proved = [pr for pr in proofs if pr.verdict is Verdict.PROVED]
    seconds = sum(pr.elapsed_s for pr in proofs)
    console.print(f"prove: {len(proved)} of {len(proofs)} properties the search finds holding are "
                  f"proved for every epoch (k-induction, {seconds:.1f}s)", markup=False)
    for pr in proofs:
        if pr.verdict is Verdict.PROVED:
            continue
        why = pr.why or (f"the counterexample to induction steps by {pr.cti_action}"
                         if pr.cti_action else "")
        covers = holds_covers(r, pr.property, proofs) or "every reachable state"
        console.print(f"  {pr.property}: {cell(pr.verdict)}{f' ({why})' if why else ''}; its "
                      f"'holds' covers {covers}", markup=False)


def heading(m, detail: str) -> Text:
    """'SPEC variant VARIANT (detail)' with the names in bold: a Text, not markup, since a user's
    spec and variant names may hold brackets that rich would read as tags."""
    return Text.assemble((m.spec.name, "bold"), " variant ", (m.variant or "", "bold"), f" ({detail})")


def differs_line(d: str) -> Text:
    """A difference from the record, its label in red (the difference quotes user names)."""
    return Text.assemble(("DIFFERS FROM RECORD", "red"), f": {d}")


def print_folded(console: Console, build, names: list[str]):
    """Prints the table ``build(headers)`` makes, with ``names`` as column headers; when it is
    wider than the terminal, the headers become P1, P2, ... with a legend below, so the matrix
    stays readable at 80 columns (a pipe or a file keeps the full names)."""
    t = build(names)
    natural = console.measure(t, options=console.options.update_width(100_000)).maximum
    if not console.is_terminal or natural <= console.width:
        console.print(t)
        return
    short = [f"P{i}" for i in range(1, len(names) + 1)]
    console.print(build(short))
    for a, n in zip(short, names):
        console.print(f"  {a} = {n}", markup=False)


def print_matrix(console: Console, spec, results: list[SearchResult], traces: dict, diffs: list[str]):
    # lemmas (auxiliary invariants for the proofs) share one column: they are checked like any
    # invariant, but the matrix is about the protocol's properties
    all_props = results[0].properties if results else []
    lemmas = [p for p in all_props if p in spec.properties and spec.properties[p].lemma]
    props = [p for p in all_props if p not in lemmas]
    rows = []
    for r in results:
        v = r.model.variant
        cells = []
        for p in props:
            text = verdict_cell(r, p, traces.get(v, {}))
            if differs_from_record(spec, v, p, r.status(p)):
                text += " (≠ record)"
            cells.append(text)
        if lemmas:
            broken = [p for p in lemmas if r.status(p) is Verdict.VIOLATED]
            cells.append("all hold" if not broken and r.exhaustive else
                         "no violation (bounded)" if not broken else
                         "VIOLATED: " + ", ".join(
                             f"{p} ({len(traces.get(v, {})[p])} steps)"
                             + (" (≠ record)" if differs_from_record(spec, v, p, Verdict.VIOLATED) else "")
                             for p in broken))
        note = "" if r.exhaustive else " (stopped: all violated)" if r.stop_reason == "all-violated" \
            else f" ({r.stop_reason})"
        rows.append((v, *cells, f"{r.distinct_states:,}{note}"))

    def build(headers):
        t = Table(title=f"{spec.name}: verdicts by variant ({params_str(results[0].model.params.as_dict())})"
                  if results else spec.name, title_justify="left")
        t.add_column("variant")
        for h in headers:
            t.add_column(h)
        if lemmas:
            t.add_column(f"lemmas ({len(lemmas)})")
        t.add_column("states")
        for row in rows:
            t.add_row(*row)
        return t
    # the bounded verdicts' reasons are in the run's summary of warnings (kcheck.notices)
    print_folded(console, build, props)
    line = covers_line(spec, results)
    if line:
        console.print(line, markup=False)
    for d in diffs:
        console.print(differs_line(d))


def covers_line(spec, results: list[SearchResult]) -> str | None:
    """Under a matrix: what its 'holds' and 'NOT REACHED' cells cover, when something qualifies
    them (verdict.holds_covers): the cap the search cut steps at, or a quotient's domain."""
    from kcheck.verdict import holds_covers
    by: dict[str, list[str]] = {}
    for r in results:
        for c in {holds_covers(r, p) for p in r.properties} - {None}:
            by.setdefault(c, []).append(r.model.variant)
    if not by:
        return None
    parts = [f"{c} in {'every variant' if len(vs) == len(results) else ', '.join(vs)}"
             for c, vs in by.items()]
    hint = (f"; `kcheck check {spec.name} --variant V --prove` proves a variant's for every epoch"
            if any(c.startswith("up to") for c in by) else "")
    return f"{spec.name}: 'holds' and 'NOT REACHED' cover {'; '.join(parts)}{hint}"


def markdown(tr: Trace, doc: dict) -> str:
    m = tr.model
    lines = [f"# {m.spec.name} / {m.variant}: {tr.property} violated in {len(tr)} steps", ""]
    if doc.get("property_doc"):
        lines += [f"**{tr.property}**: {doc['property_doc']}", ""]
    if tr.loop_index is not None:
        lines += [loop_sentence(tr), ""]
    lines += [f"Parameters: {params_str(m.params.as_dict())}. Replay: `kcheck replay <this file's .json>`.", "",
              f"Initial state: {_initial_summary(tr)}", "",
              "| # | action (request) | outcome | changed fields |", "|---|---|---|---|"]
    for i, s in enumerate(tr.steps, start=1):
        loop = " ↺" if tr.loop_index is not None and i - 1 == tr.loop_index else ""
        lines.append(f"| {i}{loop} | {s.label} | {show_value(s.outcome) if s.outcome is not None else ''} | "
                     f"{changes_text(s)} |")
    lines += ["", "```mermaid", "sequenceDiagram"]
    for i, s in enumerate(tr.steps, start=1):
        inst = m.instance(s.action, s.args)
        src, dst = actors(inst)
        note = s.label + (f" → {show_value(s.outcome)}" if s.outcome is not None else "")
        if src == dst:
            lines.append(f"    Note over {src}: {i}. {note}")
        else:
            lines.append(f"    {src}->>{dst}: {i}. {note}")
    lines += ["```", ""]
    return "\n".join(lines)


def actors(inst) -> tuple[str, str]:
    act = inst.action.actors
    if not act:
        return ("system", "system")
    args = {k: (v.name if hasattr(v, "name") else v) for k, v in inst.args.items()}
    return tuple(a.format(**args).replace(" ", "_") for a in act)


# ---------------------------------------------------------------------------------------------
# Saved traces: the JSON file and its Markdown twin

def save(tr: Trace, out_dir: str | Path) -> str:
    """Saves a counterexample as <out_dir>/<spec>/<variant>/<property>.json and its Markdown
    twin (checker/render.py); -> the JSON file's path. A user's spec is named relative to the
    trace file, so the two can move together. A failure is SaveFailed, one line."""
    from kcheck.options import SaveFailed, write_file
    m = tr.model
    d = Path(out_dir) / m.spec.name / m.variant
    path = d / f"{tr.property}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        doc = tr.to_json()
        doc["spec"] = relative_spec_ref(doc["spec"], d)
        write_file(path, json.dumps(doc, indent=2) + "\n")
        write_file(d / f"{tr.property}.md", markdown(tr, doc))
    except OSError as e:
        raise SaveFailed(f"cannot save {path}: {e.strerror or e} (the results above are complete; "
                         f"choose a writable --out)") from None
    return str(path)


def save_all(traces: dict, out: str | Path | None) -> tuple[dict, str | None]:
    """Saves every trace, after the results were printed: -> ({property: path}, the error of
    the first failed save or None), so the caller reports a failure once, as exit 5."""
    from kcheck.options import SaveFailed
    saved: dict = {}
    if out is None:
        return saved, None
    for p, tr in traces.items():
        try:
            saved[p] = save(tr, out)
        except SaveFailed as e:
            return saved, str(e)
    return saved, None


def reduction_clause(r) -> str:
    """The statistics line's part on the reductions: symmetry (empty when the spec declares
    none), then partial-order reduction when it was used."""
    from kcheck.por import clause as por_clause
    from kcheck.symmetry import clause as symmetry_clause
    return symmetry_clause(r) + por_clause(r)


def asset(name: str) -> str:
    """A file shipped in checker/assets (inside the installed package too)."""
    from importlib import resources
    return resources.files("kcheck").joinpath("assets", name).read_text(encoding="utf-8")
