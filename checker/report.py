"""`kcheck report`: one self-contained HTML page per spec, built from the engines' results.

The page carries everything it shows: the verdict matrix (variants x properties, as `check
--all-variants` and `progress --all-variants` compute them, compared with the spec's record),
each violation's counterexample as a step table and a sequence diagram, lassos with their loop
marked, proofs with their lemmas (with --prove), the known-bug table, the saved counterexamples
replayed against the current spec, and the run's statistics.

Decision (issue 17): the sequence diagram is an SVG that kcheck draws, not Mermaid. Mermaid's
renderer is about 3 MB of JavaScript; inlining it would make every page that large, and
linking it would break "one file, no network". The SVG needs no script at all, so the page has
none: its stylesheet ships inside the package (checker/assets/report.css) and is inlined.
"""
from __future__ import annotations

import datetime
import html
import json
from dataclasses import dataclass
from pathlib import Path

from kcheck.render import asset
from kcheck.run import VariantRun
from kcheck.trace import Trace
from kcheck.spec.lang import Spec, SpecError
from kcheck.verdict import Verdict, recorded_violations


# ---------------------------------------------------------------------------------------------
# What the report shows, measured

@dataclass
class SavedTrace:
    path: str
    variant: str | None
    property: str | None
    steps: int
    reproduces: bool
    message: str


@dataclass
class SpecReport:
    spec: Spec
    runs: list[VariantRun]
    saved: list[SavedTrace]
    elapsed_s: float
    conformance: dict | None = None    # `kcheck conform --json` of this spec, when given


def collect(spec: Spec, params: dict | None = None, *, progress: bool = True, prove: bool = False,
            max_states: int | None = None, max_nodes: int = 2_000_000,
            saved_dir: str | Path | None = "counterexamples", on_variant=None) -> SpecReport:
    """Runs the search (and, unless told not to, the progress check) on every variant; reads
    and replays the spec's saved counterexamples."""
    import time

    from kcheck.run import Options, run_variants
    t0 = time.perf_counter()
    runs = run_variants(spec, None, params, Options(max_states=max_states, max_nodes=max_nodes),
                        progress=progress, prove=prove, on_variant=on_variant)
    # the saved traces replay in the runs' own compiled models when their parameters match
    models = {(r.variant, _key(r.model.params.as_dict())): r.model for r in runs}
    saved = replay_saved(spec, saved_dir, models) if saved_dir else []
    return SpecReport(spec, runs, saved, time.perf_counter() - t0)


def _key(params: dict) -> tuple:
    return tuple(sorted(params.items()))


def replay_saved(spec: Spec, saved_dir: str | Path, models: dict | None = None) -> list[SavedTrace]:
    """Every counterexample saved for this spec under saved_dir/<spec>/<variant>/, replayed.
    ``models``: compiled models by (variant, sorted parameters), reused (and added to) rather
    than compiling a variant once per saved trace."""
    from kcheck.trace import TraceError, load, replay
    out = []
    models = {} if models is None else models
    root = Path(saved_dir) / spec.name
    for path in sorted(root.glob("*/*.json")):
        try:
            doc = load(path)
            model = _model_for(spec, doc, models)
            r = replay(model, doc)
            ok, msg = r.ok, r.message
        except (TraceError, SpecError) as e:
            doc = doc if isinstance(locals().get("doc"), dict) else {}
            ok, msg = False, str(e)
        out.append(SavedTrace(str(path), doc.get("variant"), doc.get("property"),
                              len(doc.get("steps", [])), ok, msg))
    return out


def _model_for(spec: Spec, doc: dict, models: dict):
    """The compiled model a saved trace replays in: one already compiled at the parameters it
    resolves to, else compiled once and kept. A trace gives only the parameters it changed, so
    they are resolved as instantiate resolves them before they are compared."""
    variant, given = doc.get("variant"), doc.get("params", {})
    key = (spec.variant_name(variant), _key(spec.variant_params(variant, given).as_dict()))
    if key not in models:
        models[key] = spec.instantiate(variant, given)
    return models[key]


# ---------------------------------------------------------------------------------------------
# HTML

def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v) -> str:
    from kcheck.render import show_value as fmt
    if isinstance(v, list):
        return "[" + ", ".join(map(fmt, v)) + "]"
    return fmt(v)


def _anchor(variant: str, prop: str) -> str:
    return "cx-" + "".join(c if c.isalnum() else "-" for c in f"{variant}-{prop}")


def _steps(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


def _cell(status: str, trace: Trace | None, spec, variant: str, prop: str,
          note: str | None = None) -> str:
    from kcheck.verdict import Verdict, cell, differs_from_record, recorded_violations
    expected = prop in recorded_violations(spec, variant)
    differs = differs_from_record(spec, variant, prop, status) is not None
    text = cell(status, len(trace) if trace is not None else None,
                lasso=trace is not None and trace.loop_index is not None)
    # one compact cell: the verdict's word, the whole sentence and its reason on hover
    full = text + (f": {note}" if note else "") + (" (differs from the record)" if differs else "")
    if status == Verdict.BOUNDED:
        text = "bounded"
    if status == Verdict.VIOLATED:
        text = f'<a href="#{_anchor(variant, prop)}">{text}</a>'
    cls = f"verdict {status}" + (" differs" if differs else "")
    rec = ' <span class="record">≠ record</span>' if differs else \
        (' <span class="recorded">recorded</span>' if expected and status == Verdict.VIOLATED else "")
    title = f' title="{_e(full)}"'
    return (f'<td class="{cls}" data-variant="{_e(variant)}" data-property="{_e(prop)}"{title} '
            f'data-status="{_e(status)}" data-matches-record="{str(not differs).lower()}">{text}{rec}</td>')


def _matrix(rep: SpecReport) -> str:
    """The verdicts, variants by properties, in a box of its own that scrolls (its header row and
    variant column stay in view), so the page is never wider than the window; the lemmas, which
    are many and matter to the proofs, in their own table below (issue 37: the lemmas column was
    crushed to one letter a line and the matrix overflowed 1400 px)."""
    spec = rep.spec
    runs = rep.runs
    safety = list(runs[0].search.properties) if runs else []
    lemmas = [p for p in safety if p in spec.properties and spec.properties[p].lemma]
    safety = [p for p in safety if p not in lemmas]
    # the search checks deadlock too when the spec declares terminal states: one column for it
    prog = [p for p in runs[0].progress.properties if p not in safety] if runs and runs[0].progress else []
    head = "".join(f'<th title="{_e(spec.properties[p].doc if p in spec.properties else "")}">{_header(p)}</th>'
                   for p in safety)
    head += "".join(f'<th class="progress" title="{_e(runs[0].progress.doc(p))}">{_header(p)}</th>'
                    for p in prog)
    if lemmas:
        head += f'<th><a href="#lemmas">lemmas ({len(lemmas)})</a></th>'
    rows = []
    for r in runs:
        exp = recorded_violations(spec, r.variant)
        cells = [_cell(r.search.status(p), r.traces.get(p), spec, r.variant, p) for p in safety]
        cells += [_cell(r.progress.status(p), r.progress_traces.get(p), spec, r.variant, p,
                        r.progress.reason(p)) for p in prog]
        if lemmas:
            broken = [p for p in lemmas if r.search.status(p) is Verdict.VIOLATED]
            bad = [p for p in broken if p not in exp]
            # one compact cell: the count, the names on hover and in the lemmas table
            text = ("all hold" if not broken and r.search.exhaustive else
                    "bounded" if not broken else
                    f'<a href="#lemmas">VIOLATED: {len(broken)}</a>')
            cls = "holds" if not broken else "violated"
            cells.append(f'<td class="verdict {cls}{" differs" if bad else ""}" data-variant="{_e(r.variant)}" '
                         f'data-property="lemmas" data-status="{cls}" title="{_e(", ".join(broken))}" '
                         f'data-matches-record="{str(not bad).lower()}">{text}</td>')
        default = " (default)" if r.variant == spec.default_variant else ""
        rows.append(f'<tr><th class="variant" title="{_e(r.doc)}">{_e(r.variant)}{default}</th>'
                    + "".join(cells) + "</tr>")
    diffs = [d for r in runs for d in r.diffs]
    record = ('<p class="record-ok" id="record">Every verdict matches the spec\'s record.</p>' if not diffs else
              '<div class="record-bad" id="record"><p>Verdicts that differ from the spec\'s record:</p><ul>'
              + "".join(f"<li>{_e(d)}</li>" for d in diffs) + "</ul></div>")
    return (f'<div class="matrix-box"><table id="matrix" class="matrix"><thead><tr><th class="variant">variant</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{record}{_lemmas(rep, lemmas)}')


def _header(name: str) -> str:
    """A property's name as a column header that may wrap after its hyphens, not inside a word."""
    return "-<wbr>".join(_e(part) for part in name.split("-"))


def _lemmas(rep: SpecReport, lemmas: list[str]) -> str:
    """One row per lemma: what it says and the variants whose search violates it (each a link to
    its counterexample, with its length)."""
    if not lemmas:
        return ""
    spec = rep.spec
    rows = []
    for p in lemmas:
        where = []
        for r in rep.runs:
            if r.search.status(p) is Verdict.VIOLATED:
                tr = r.traces.get(p)
                steps = f" ({_steps(len(tr))})" if tr is not None else ""
                recorded = p in recorded_violations(spec, r.variant)
                where.append(f'<a href="#{_anchor(r.variant, p)}">{_e(r.variant)}</a>{steps}'
                             + ("" if recorded else ' <span class="record">≠ record</span>'))
        verdict = ('<td class="verdict violated">' + ", ".join(where) + "</td>" if where else
                   '<td class="verdict holds">holds in every variant</td>')
        rows.append(f'<tr data-lemma="{_e(p)}"><td>{_e(p)}</td><td>{_e(spec.properties[p].doc)}</td>{verdict}</tr>')
    return (f'<h3 id="lemmas">Lemmas ({len(lemmas)}): auxiliary invariants for the proofs</h3>'
            '<table class="lemmas"><thead><tr><th>lemma</th><th>meaning</th><th>violated in</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _properties(spec: Spec, runs: list[VariantRun]) -> str:
    rows = [f"<tr><td>{_e(p.name)}</td><td>{_e(p.kind)}{' (lemma)' if p.lemma else ''}</td><td>{_e(p.doc)}</td></tr>"
            for p in spec.properties.values()]
    prog = runs[0].progress if runs else None
    rows += [f"<tr><td>{_e(n)}</td><td>{_e(prog.kind(n))}; fair: {_e(', '.join(prog.fair(n)) or '-')}</td>"
             f"<td>{_e(prog.doc(n))}</td></tr>" for n in (prog.properties if prog else [])]
    return ("<table><thead><tr><th>property</th><th>kind</th><th>meaning</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _variants(spec: Spec) -> str:
    rows = []
    for v in spec.variants.values():
        findings = "".join(f"<li><b>{_e(p)}</b>: {_e(t)}</li>" for p, t in v.findings.items())
        rows.append(f"<tr><td>{_e(v.name)}{' (default)' if v.name == spec.default_variant else ''}</td>"
                    f"<td>{_e(v.doc)}</td><td>{_e(', '.join(sorted(v.expected_violations)) or '-')}</td>"
                    f"<td>{'<ul>' + findings + '</ul>' if findings else ''}</td></tr>")
    return ("<table><thead><tr><th>variant</th><th>what it changes</th><th>recorded violations</th>"
            "<th>findings</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _stats(rep: SpecReport) -> str:
    from kcheck.render import stats_line
    rows = []
    for r in rep.runs:
        s = r.search
        g = r.graph
        graph = (f"{g.states:,} states, {g.edges:,} edges, built in {g.elapsed_s:.2f}s" if g is not None
                 else "not built")
        rows.append(f"<tr><td>{_e(r.variant)}</td><td>{_e(', '.join(f'{k}={v}' for k, v in r.params.items()))}</td>"
                    f"<td>{_e(stats_line(s))}</td><td>{_e(graph)}</td></tr>")
    return ('<table id="stats"><thead><tr><th>variant</th><th>parameters</th><th>breadth-first search</th>'
            '<th>state graph (progress)</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
            f"<p>The whole report took {rep.elapsed_s:.2f}s to compute.</p>")


def step_rows(tr: Trace) -> str:
    """The step table's rows: the initial state, then each step's request, outcome and the
    fields it changed (before → after)."""
    init = ", ".join(f"{k}={_fmt(v)}" for k, v in tr.initial_state.items())
    rows = [f'<tr class="step" data-step="0"><td>0</td><td>initial state</td><td></td>'
            f'<td class="fields">{_e(init)}</td></tr>']
    for i, s in enumerate(tr.steps, start=1):
        in_loop = tr.loop_index is not None and i - 1 >= tr.loop_index
        mark = " ↺" if tr.loop_index is not None and i - 1 == tr.loop_index else ""
        changes = "".join(f'<span class="change"><b>{_e(k)}</b>: {_e(_fmt(a))} → {_e(_fmt(b))}</span>'
                          for k, (a, b) in s.changes.items()) or '<span class="nochange">(no change)</span>'
        out = "" if s.outcome is None else _fmt(s.outcome)
        rows.append(f'<tr class="step{" loop" if in_loop else ""}" data-step="{i}"><td>{i}{mark}</td>'
                    f'<td>{_e(s.label)}</td><td class="outcome">{_e(out)}</td><td class="fields">{changes}</td></tr>')
    return "".join(rows)


# The diagram's text is 12 px DejaVu Sans Mono (report.css; Debian's monospace, and the font
# chromium falls back to for ui-monospace): every character advances 1233/2048 em, 7.22 px. The
# layout measures each label with it, and a little more, so no label crosses a lifeline (a browser
# test measures the drawn boxes; issue 37: labels sized at 6.6 px a character crossed them).
CHAR_PX = 7.3
PAD_PX = 14          # a label's clearance from the lifelines on either side


def text_px(text: str) -> int:
    """The width of ``text`` in the diagram's font, in pixels."""
    return int(len(text) * CHAR_PX + 0.999)


def sequence_svg(tr: Trace) -> str:
    """The counterexample as a sequence diagram: one lifeline per actor (as the spec's actions
    name them), one arrow per step labelled with the request and its outcome; a lasso's loop is
    bracketed on the left.

    Layout: an arrow's label sits in the gap next to its source lifeline, on the arrow's side (a
    note, a step of one actor, to the right of its lifeline), so each gap between two adjacent
    lifelines is made as wide as the widest label placed in it, and no label crosses a lifeline."""
    from kcheck.render import actors as actors_of
    m = tr.model
    arrows, actors = [], []
    for i, s in enumerate(tr.steps, start=1):
        src, dst = actors_of(m.instance(s.action, s.args))
        for a in (src, dst):
            if a not in actors:
                actors.append(a)
        label = f"{i}. {s.label}" + (f" → {_fmt(s.outcome)}" if s.outcome is not None else "")
        arrows.append((src, dst, label))
    if not actors:
        actors = ["system"]
    col = {a: i for i, a in enumerate(actors)}
    boxes = [max(120, text_px(a) + 16) for a in actors]
    # gap[i]: between lifelines i and i+1; the last one is the room right of the last lifeline
    gap = [(boxes[i] + boxes[i + 1]) // 2 + 12 for i in range(len(actors) - 1)] + [boxes[-1] // 2]
    for src, dst, label in arrows:
        i, j = col[src], col[dst]
        slot = i if j >= i else i - 1         # the gap the label is drawn in
        gap[slot] = max(gap[slot], text_px(label) + 2 * PAD_PX)
    top, row, left = 50, 34, 70
    left = max(left, boxes[0] // 2 + 8)
    x = {}
    at = left
    for i, a in enumerate(actors):
        x[a] = at
        at += gap[i]
    width = at + 10
    height = top + row * (len(arrows) + 1) + 10
    parts = [f'<svg class="sequence" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="sequence diagram">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']
    for a, w in zip(actors, boxes):
        parts.append(f'<line class="lifeline" x1="{x[a]}" y1="{top - 8}" x2="{x[a]}" y2="{height - 6}"/>'
                     f'<rect class="actor" x="{x[a] - w // 2}" y="6" width="{w}" height="28" rx="4"/>'
                     f'<text class="actor" x="{x[a]}" y="25" text-anchor="middle">{_e(a)}</text>')
    if tr.loop_index is not None and tr.loop_index < len(arrows):
        y0 = top + row * tr.loop_index + 4
        y1 = top + row * len(arrows) + 12
        parts.append(f'<path class="loop" d="M14,{y0} L8,{y0} L8,{y1} L14,{y1}"/>'
                     f'<text class="loop" x="4" y="{y0 - 4}">↺ loop</text>')
    for i, (src, dst, label) in enumerate(arrows):
        y = top + row * (i + 1)
        w = text_px(label)
        if src == dst:
            parts.append(f'<rect class="note" x="{x[src] + PAD_PX // 2}" y="{y - 16}" width="{w + PAD_PX}" '
                         f'height="22" rx="3"/><text class="step" x="{x[src] + PAD_PX}" y="{y}">{_e(label)}</text>')
        else:
            x0, x1 = x[src], x[dst]
            # beside the source, on the arrow's side: right of it going right, left of it going left
            tx = x0 + PAD_PX if x1 > x0 else x0 - PAD_PX - w
            parts.append(f'<line class="message" x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" marker-end="url(#arrow)"/>'
                         f'<text class="step" x="{tx}" y="{y - 6}">{_e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _spec_arg(spec: Spec) -> str:
    """How a user names this spec on the command line: shipped name, or its module's path."""
    from kcheck.spec import SHIPPED
    if spec.name in SHIPPED:
        return spec.name
    path = Path(spec.source_file).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _counterexample(spec: Spec, variant: str, prop: str, tr: Trace, progress=None) -> str:
    doc = (spec.properties[prop].doc if prop in spec.properties else
           progress.doc(prop) if progress else "no reachable state without a successor")
    from kcheck.verdict import differs_from_record, sometimes_status
    v = spec.variants.get(variant)
    finding = v.findings.get(prop) if v else None
    # a sometimes property's trace is its witness: reached, which the record may expect
    status = sometimes_status(spec, prop, Verdict.VIOLATED)
    recorded = differs_from_record(spec, variant, prop, status) is None
    kind = "lasso" if tr.loop_index is not None else tr.kind or ""
    loop = ""
    if tr.loop_index is not None:
        from kcheck.render import loop_sentence
        loop = f'<p class="loop-note">{_e(loop_sentence(tr))}</p>'
    command = "check" if prop in spec.properties else "progress"
    replay = (f"kcheck {command} {_spec_arg(spec)} --variant {variant} --save, then "
              f"kcheck replay counterexamples/{spec.name}/{variant}/{prop}.json")
    return (f'<section class="counterexample" id="{_anchor(variant, prop)}" data-variant="{_e(variant)}" '
            f'data-property="{_e(prop)}"><h3>{_e(variant)}: {_e(prop)} {_e(status)} in {_steps(len(tr))} '
            f'({_e(kind)}){"" if recorded else " — not in the record"}</h3>'
            f'<p><b>{_e(prop)}</b>: {_e(doc)}</p>'
            + (f'<p class="finding"><b>Finding</b>: {_e(finding)}</p>' if finding else "")
            + loop
            + f'<table class="steps"><thead><tr><th>#</th><th>action (request)</th><th>outcome</th>'
              f'<th>changed fields</th></tr></thead><tbody>{step_rows(tr)}</tbody></table>'
            + (f'<div class="diagram">{sequence_svg(tr)}</div>' if tr.steps else "")
            + f'<p class="replay">Reproduce: <code>{_e(replay)}</code></p></section>')


def _counterexamples(rep: SpecReport) -> str:
    out = []
    for r in rep.runs:
        for p, tr in r.traces.items():
            out.append(_counterexample(rep.spec, r.variant, p, tr))
        for p, tr in r.progress_traces.items():
            out.append(_counterexample(rep.spec, r.variant, p, tr, r.progress))
    return "".join(out) or "<p>No property is violated in any variant.</p>"


def _proofs(rep: SpecReport) -> str:
    rows = []
    for r in rep.runs:
        for pr in r.proofs:      # symbolic.ProofResult: a verdict.RunResult of one property
            from kcheck.verdict import cell
            status = pr.status(pr.property)
            why = pr.reason(pr.property) or ""
            if status == "not-inductive" and pr.cti_action:
                why = (why + "; " if why else "") + f"counterexample to induction ends with {pr.cti_action}"
            rows.append(f'<tr data-variant="{_e(r.variant)}" data-property="{_e(pr.property)}">'
                        f'<td>{_e(r.variant)}</td><td>{_e(pr.property)}</td>'
                        f'<td class="verdict {_e(status)}">{_e(cell(status))}</td><td>{pr.k}</td>'
                        f'<td>{_e(", ".join(pr.lemmas_used) or "-")}</td><td>{_e(why)}</td>'
                        f'<td>{pr.elapsed_s:.2f}s</td></tr>')
    if not rows:
        return "<p>Not run (kcheck report --prove runs k-induction on every property the search did not violate).</p>"
    return ('<table id="proofs"><thead><tr><th>variant</th><th>property</th><th>verdict</th><th>k</th>'
            '<th>lemmas assumed</th><th>note</th><th>time</th></tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>")


def _known_bugs(rep: SpecReport) -> str:
    spec = rep.spec
    if not spec.known_bugs:
        return "<p>The spec records no known Kafka bug.</p>"
    by_variant = {r.variant: r for r in rep.runs}
    rows = []
    for b in spec.known_bugs:
        if b.variant is None:
            seen = f"not expressible: {b.not_expressible}"
        else:
            r = by_variant.get(b.variant)
            st = None
            if r is not None:
                st = (r.progress.status(b.property) if r.progress and b.property in r.progress.properties
                      else r.search.status(b.property))
            seen = {"violated": f"rediscovered: {b.property} is violated in {b.variant}",
                    "holds": f"NOT rediscovered: {b.property} holds in {b.variant}",
                    "bounded": f"not rediscovered within the bounds in {b.variant}"}.get(st, "not checked")
        rows.append(f'<tr><td>{_e(b.jira)}</td><td>{_e(b.broke)}</td><td>{_e(b.code)}</td><td>{_e(b.fix)}</td>'
                    f'<td>{_e(b.variant or "-")}</td><td>{_e(b.property or "-")}</td><td>{_e(seen)}</td></tr>')
    return ('<table id="known-bugs"><thead><tr><th>JIRA</th><th>what went wrong</th><th>code</th><th>fix</th>'
            '<th>pre-fix variant</th><th>property</th><th>in this run</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _saved(rep: SpecReport) -> str:
    if not rep.saved:
        return "<p>No saved counterexample for this spec.</p>"
    rows = [f'<tr><td><code>{_e(s.path)}</code></td><td>{_e(s.variant)}</td><td>{_e(s.property)}</td>'
            f'<td>{s.steps}</td><td class="verdict {"holds" if s.reproduces else "violated"}">'
            f'{"reproduces" if s.reproduces else "DOES NOT REPRODUCE"}</td><td>{_e(s.message)}</td></tr>'
            for s in rep.saved]
    return ('<table id="saved"><thead><tr><th>file</th><th>variant</th><th>property</th><th>steps</th>'
            '<th>replay</th><th>message</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _conformance(rep: SpecReport) -> str:
    c = rep.conformance
    if not c:
        return ("<p>Not given (kcheck conform SPEC --json &gt; FILE replays the spec's traces on a real "
                "broker; kcheck report --conformance FILE shows its results here).</p>")
    rows = [f'<tr><td><code>{_e(t.get("trace"))}</code></td><td>{_e(t.get("variant"))}</td>'
            f'<td>{_e(t.get("steps"))}</td><td class="verdict {"holds" if t.get("outcome") == "conforms" else "violated"}">'
            f'{_e(t.get("outcome"))}</td><td>{_e(t.get("step") or "")}</td><td>{_e(t.get("detail") or "")}</td>'
            f'<td>{_e(", ".join(t.get("matches") or []))}</td></tr>' for t in c["traces"]]
    return (f'<p>Kafka {_e(c.get("kafka"))}: {len(c["traces"])} trace(s) replayed on a broker.</p>'
            '<table id="conformance"><thead><tr><th>trace</th><th>variant</th><th>steps</th><th>outcome</th>'
            '<th>at step</th><th>detail</th><th>variants Kafka matched</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def load_conformance(path: str) -> dict:
    """The JSON that `kcheck conform --json` prints."""
    from kcheck.options import BadInput
    from kcheck.trace import MAX_TRACE_BYTES
    try:
        # capped as a trace is: /dev/zero or /dev/full would be read for ever
        with open(path, "rb") as f:
            raw = f.read(MAX_TRACE_BYTES + 1)
        if len(raw) > MAX_TRACE_BYTES:
            raise BadInput(f"--conformance {path}: larger than {MAX_TRACE_BYTES >> 20} MB; give the "
                           f"output of 'kcheck conform SPEC --json'")
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except OSError as e:
        raise BadInput(f"--conformance {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"--conformance {path}: not JSON (line {e.lineno}: {e.msg}); give the output "
                       f"of 'kcheck conform SPEC --json'") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traces"), list) or \
            not all(isinstance(t, dict) for t in doc["traces"]):
        raise BadInput(f"--conformance {path}: expected the output of 'kcheck conform SPEC --json' "
                       f"(an object with 'kafka' and a list 'traces')")
    return doc


def render_html(rep: SpecReport) -> str:
    spec = rep.spec
    from kcheck.render import params_str
    params = rep.runs[0].params if rep.runs else {}
    intro = spec.doc.split("\n\n")[0] if spec.doc else ""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kcheck report: {_e(spec.name)}</title>
<style>{asset("report.css")}</style></head>
<body>
<header><h1>kcheck report: {_e(spec.name)}</h1>
<p class="intro">{_e(intro)}</p>
<p class="meta">Parameters: {_e(params_str(params) or "none")} (a variant may declare its own; see the statistics).
Generated {when} by <code>kcheck report</code> from the engines' results.</p></header>
<nav><a href="#verdicts">Verdicts</a> <a href="#counterexamples">Counterexamples</a>
<a href="#proofs-section">Proofs</a> <a href="#bugs">Known bugs</a> <a href="#saved-section">Saved traces</a>
<a href="#conformance-section">Conformance</a>
<a href="#statistics">Statistics</a></nav>
<section id="verdicts"><h2>Verdicts by variant</h2>{_matrix(rep)}
<details><summary>Properties</summary>{_properties(spec, rep.runs)}</details>
<details><summary>Variants</summary>{_variants(spec)}</details></section>
<section id="counterexamples"><h2>Counterexamples</h2>{_counterexamples(rep)}</section>
<section id="proofs-section"><h2>Proofs (k-induction)</h2>{_proofs(rep)}</section>
<section id="bugs"><h2>Known Kafka bugs</h2>{_known_bugs(rep)}</section>
<section id="saved-section"><h2>Saved counterexamples, replayed</h2>{_saved(rep)}</section>
<section id="conformance-section"><h2>Conformance with Kafka</h2>{_conformance(rep)}</section>
<section id="statistics"><h2>Statistics</h2>{_stats(rep)}</section>
</body></html>
"""


def render_index(pages: list[tuple[str, str, bool]]) -> str:
    items = "".join(f'<li><a href="{_e(f)}">{_e(n)}</a>: '
                    f'{"every verdict matches the record" if ok else "verdicts DIFFER from the record"}</li>'
                    for n, f, ok in pages)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>kcheck reports</title>'
            f'<style>{asset("report.css")}</style></head><body><h1>kcheck reports</h1><ul>{items}</ul></body></html>\n')


# ---------------------------------------------------------------------------------------------
# The command

def register(sub) -> dict:
    from kcheck.options import param_option, path_value, positive
    r = sub.add_parser("report", help="write a self-contained HTML report per spec (verdict matrix, "
                                      "counterexamples with diagrams, proofs, known bugs, statistics)",
                       parents=[param_option()])
    r.add_argument("spec", nargs="?", default="all",
                   help="a shipped spec name, 'all' (the default), or the path of a spec module")
    r.add_argument("-o", "--output", required=True, metavar="DIR", type=path_value("-o"), help="directory to write the pages to")
    r.add_argument("--max-states", type=positive("--max-states"), metavar="N",
                   help="stop each search after N distinct states (the page then says bounded)")
    r.add_argument("--no-progress", action="store_true", help="skip the progress properties (state graph)")
    r.add_argument("--prove", action="store_true", help="also run k-induction on every property not violated")
    r.add_argument("--conformance", metavar="FILE", type=path_value("--conformance"),
                   help="also show these conformance results (the output of 'kcheck conform SPEC --json')")
    r.add_argument("--saved", default="counterexamples", metavar="DIR", type=path_value("--saved"),
                   help="where saved counterexamples are read from (default counterexamples)")
    return {"report": cmd_report}


def cmd_report(args, console) -> int:
    from kcheck.options import (BOUNDED, OK, VIOLATED, BadInput, SaveFailed, params as parse_params,
                                write_file)
    from kcheck.loader import load_spec
    from kcheck.spec import SHIPPED
    params = parse_params(args.param)
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    out = Path(args.output)
    try:
        if out.exists() and not out.is_dir():
            raise BadInput(f"-o {args.output}: exists and is not a directory; give a directory to "
                           f"write the pages to")
    except OSError as e:      # a name the system refuses (too long)
        raise BadInput(f"-o {args.output[:60]}...: not a directory name kcheck can use "
                       f"({e.strerror})") from None
    specs = [load_spec(n) for n in names]
    conformance = load_conformance(args.conformance) if args.conformance else None
    if conformance is not None and len(specs) > 1:
        raise BadInput("--conformance holds one spec's results: give that spec, not 'all'")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"-o {args.output}: cannot create the directory ({e.strerror})") from None
    pages, codes = [], []
    from kcheck.bfs import Terminated
    from kcheck.options import INTERRUPTED, TERMINATED, make_console
    stopped = None     # Ctrl-C or SIGTERM: the pages written stand, the command says where it stopped
    for spec in specs:
        try:
            rep = collect(spec, params, progress=not args.no_progress, prove=args.prove,
                          max_states=args.max_states, saved_dir=args.saved,
                          on_variant=lambda v, s=spec: console.print(f"{s.name}/{v} ...", markup=False)
                          if console.is_terminal else None)
        except (KeyboardInterrupt, Terminated) as e:     # inside a state graph or a proof
            stopped = TERMINATED if isinstance(e, Terminated) else INTERRUPTED
            break
        # a search stopped by a signal: its page shows the variants finished, then the command stops
        signal_stop = next((r.search.stop_reason for r in rep.runs
                            if r.search.stop_reason in ("interrupted", "terminated")), None)
        if signal_stop is not None:
            stopped = TERMINATED if signal_stop == "terminated" else INTERRUPTED
        rep.conformance = conformance
        page = out / f"{spec.name}.html"
        try:
            write_file(page, render_html(rep))
        except OSError as e:
            raise SaveFailed(f"cannot write {page} ({e.strerror}); give a writable -o") from None
        ok = not any(r.diffs for r in rep.runs)
        undecided = ok and _undecided(rep)
        pages.append((spec.name, page.name, ok))
        codes.append(VIOLATED if not ok else BOUNDED if undecided else OK)
        n_cx = sum(len(r.traces) + len(r.progress_traces) for r in rep.runs)
        said = ("DIFFERS from the record" if not ok else
                f"no difference from the record, but bounded: {undecided}" if undecided else
                "matches the record")
        console.print(f"{page}: {len(rep.runs)} variant(s), {n_cx} counterexample(s), "
                      f"{said} ({rep.elapsed_s:.1f}s)", markup=False)
        if stopped is not None:
            break
    if len(pages) > 1:
        try:
            write_file(out / "index.html", render_index(pages))
        except OSError as e:
            raise SaveFailed(f"cannot write {out / 'index.html'} ({e.strerror})") from None
        console.print(f"{out / 'index.html'}: index of {len(pages)} reports", markup=False)
    if stopped is not None:
        said = "terminated (SIGTERM)" if stopped == TERMINATED else "interrupted"
        make_console(stderr=True, soft_wrap=True).print(
            f"kcheck: report {said}; {len(pages)} of {len(specs)} page(s) written, the last one "
            f"with the variants finished", markup=False)
        return stopped
    return next((c for c in (VIOLATED, BOUNDED) if c in codes), OK)


def _undecided(rep: SpecReport) -> str | None:
    """Why the report's verdicts are not all decided, by check's and progress's rule (a search
    that stopped early, a 'bounded' safety verdict, a 'bounded' progress verdict the record does
    not expect), or None."""
    from kcheck.verdict import unrecorded_bounded
    for r in rep.runs:
        res, where = r.search, f"{rep.spec.name}/{r.variant}"
        if not res.exhaustive and res.stop_reason != "all-violated":
            return f"the search of {where} stopped early ({res.reason(next(iter(res.properties)))})"
        bounded = [p for p in res.properties if res.status(p) is Verdict.BOUNDED]
        if bounded:
            return f"{where}: {bounded[0]} {res.reason(bounded[0])}"
        if r.progress is not None and unrecorded_bounded(rep.spec, r.variant, r.progress.verdicts):
            return f"{where}: a progress verdict is bounded and the record does not say so"
    return None

