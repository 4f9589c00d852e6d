"""CI outputs for `check`, `progress` and `prove`: `--junit FILE` (JUnit XML as Jenkins' xunit
plugin and Maven Surefire write it, tests/schemas/junit-10.xsd) and `--sarif FILE` (SARIF 2.1.0,
tests/schemas/sarif-schema-2.1.0.json).

One test case per spec / variant / property. A test case fails exactly when the command's exit
code counts it against the run: with one variant, a violation fails; with every variant (`--all-
variants`, `all`), a verdict that differs from the spec's record fails and a recorded violation
passes (its trace is still carried, in system-out). A bounded or inconclusive verdict is
skipped, with the reason. The commands hand their results to ``record_*`` as they go; the CLI
writes the files once the command is done (``write``).
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import io
import json
import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from kcheck.verdict import recorded_violations

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass
class Case:
    command: str                # check, progress, prove
    spec: str
    variant: str
    property: str
    kind: str                   # invariant, transition, leads-to, always-eventually, deadlock
    status: str                 # holds, violated, bounded, proved, not-inductive, unknown
    outcome: str                # PASSED, FAILED, SKIPPED
    message: str
    doc: str = ""
    trace_text: str | None = None
    trace_steps: list[tuple[str, str, tuple[str, int] | None]] | None = None  # (label, changes, source)
    elapsed_s: float | None = None           # measured for this property alone (prove)
    run_s: float = 0.0                       # the run that produced the verdict (one search)
    source: tuple[str, int] | None = None    # the property's definition: (file, line)


def _writable(opt):
    def conv(s):
        try:
            parent = Path(s).resolve().parent
            parent.is_dir() and Path(s).is_dir()
        except (OSError, ValueError) as e:     # a name too long, a NUL byte
            raise argparse.ArgumentTypeError(f"{opt} {s[:60]}...: not a file name kcheck can "
                                             f"write ({getattr(e, 'strerror', None) or e})") from None
        if not parent.is_dir():
            # refused before the search runs, not after it
            raise argparse.ArgumentTypeError(f"{opt} {s}: directory {parent} does not exist")
        if Path(s).is_dir():
            raise argparse.ArgumentTypeError(f"{opt} {s}: is a directory; give a file name")
        return s
    return conv


def add_options(parser) -> None:
    parser.add_argument("--junit", metavar="FILE", type=_writable("--junit"),
                        help="also write the verdicts as JUnit XML (one test case per property)")
    parser.add_argument("--sarif", metavar="FILE", type=_writable("--sarif"),
                        help="also write the verdicts as SARIF 2.1.0")


# ---------------------------------------------------------------------------------------------
# From the engines' results

def _source(fn) -> tuple[str, int] | None:
    try:
        return inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return None


def trace_text(tr) -> str:
    """A trace as the terminal shows it (render.trace_table), as plain text."""
    from kcheck.options import make_console

    from kcheck.render import trace_table
    buf = io.StringIO()
    make_console(file=buf, width=160, no_color=True, soft_wrap=False).print(trace_table(tr))
    text = buf.getvalue()
    if tr.loop_index is not None:
        from kcheck.render import loop_sentence
        text += loop_sentence(tr) + "\n"
    return text


def _steps(tr) -> list:
    from kcheck.render import changes_text
    out = []
    for s in tr.steps:
        action = next((a for a in tr.model.spec.actions if a.name == s.action), None)
        out.append((s.label, changes_text(s), _source(action.fn) if action else None))
    return out


def _outcome(status: str, expected: bool, against_record: bool) -> str:
    # a sometimes property: "reached" passes as "holds" does, "not reached" fails as "violated"
    status = {"reached": "holds", "not-reached": "violated"}.get(status, status)
    if not against_record:
        return {"violated": FAILED, "holds": PASSED, "proved": PASSED}.get(status, SKIPPED)
    if status == "violated":
        return PASSED if expected else FAILED
    if expected:
        return FAILED          # the record says violated: holding, or not found, differs from it
    return PASSED if status == "holds" else SKIPPED


def _message(spec, variant, prop, status, trace, expected, against_record, note=None) -> str:
    n = f" in {len(trace)} step{'' if len(trace) == 1 else 's'}" if trace is not None else ""
    lasso = " (lasso)" if trace is not None and trace.loop_index is not None else ""
    text = {"violated": f"{prop} is violated{n}{lasso}",
            "holds": f"{prop} holds in every reachable state",
            "bounded": f"{prop}: no violation within the bounds (the search was not exhaustive)",
            "proved": f"{prop} is proved by k-induction",
            "reached": f"{prop} is reached{n}", "not-reached": f"{prop} is not reached",
            "not-inductive": f"{prop}: not proved (not inductive)",
            "unknown": f"{prop}: not proved (solver gave no answer)"}.get(status, f"{prop}: {status}")
    if note:
        text += f": {note}"
    if against_record:
        if status == "violated":
            text += "; the record expects this violation" if expected else \
                "; the record says it holds (a regression, or a new finding to record)"
        elif expected:
            text += "; the record says it is violated"
    return f"{spec.name}/{variant}: {text}"


def _case(command, spec, variant, prop, kind, status, doc, trace, expected, against_record,
          run_s, elapsed=None, note=None) -> Case:
    fn = spec.properties[prop].fn if prop in spec.properties else \
        (spec.progress[prop].q if prop in spec.progress else None)
    return Case(command, spec.name, variant, prop, kind, status,
                _outcome(status, expected, against_record),
                _message(spec, variant, prop, status, trace, expected, against_record, note), doc,
                trace_text(trace) if trace is not None else None,
                _steps(trace) if trace is not None else None, elapsed, run_s,
                _source(fn) if fn is not None else None)




def record_check(args, res, traces, against_record: bool) -> None:
    """One case per property of a `check` run (kcheck.bfs.SearchResult)."""
    if not (getattr(args, "junit", None) or getattr(args, "sarif", None)):
        return
    spec, v = res.model.spec, res.model.variant
    exp = recorded_violations(spec, v)
    cases = []
    for p in res.properties:
        prop = spec.properties.get(p)
        kind, doc = (prop.kind, prop.doc) if prop else ("deadlock", "no reachable state without a successor")
        cases.append(_case("check", spec, v, p, kind, res.status(p), doc, traces.get(p), p in exp,
                           against_record, res.elapsed_s))
    _cases(args).extend(cases)


def record_progress(args, res, traces, against_record: bool) -> None:
    """One case per progress property (and deadlock) of a `progress` run (graph.ProgressResult)."""
    if not (getattr(args, "junit", None) or getattr(args, "sarif", None)):
        return
    spec, v = res.model.spec, res.model.variant
    exp = recorded_violations(spec, v)
    _cases(args).extend(
        _case("progress", spec, v, name, res.kind(name), res.status(name), res.doc(name),
              traces.get(name), name in exp, against_record, res.elapsed_s, note=res.reason(name))
        for name in res.properties)


def record_prove(args, model, results) -> None:
    """One case per property of a `prove` run (kcheck.symbolic.ProofResult)."""
    if not (getattr(args, "junit", None) or getattr(args, "sarif", None)):
        return
    spec = model.spec
    for r in results:
        prop = spec.properties.get(r.property)
        cx = r.counterexample
        status = r.status(r.property)
        trace = cx.trace if cx is not None and status == "violated" else None
        note = r.reason(r.property)
        if r.lemmas_used:
            note = (note + "; " if note else "") + "lemmas assumed: " + ", ".join(r.lemmas_used)
        if status == "not-inductive" and r.cti_action:
            note = (note + "; " if note else "") + f"counterexample to induction ends with {r.cti_action}"
        _cases(args).append(_case("prove", spec, model.variant, r.property,
                                  prop.kind if prop else "deadlock", status,
                                  prop.doc if prop else "no reachable state without a successor",
                                  trace, False, False, r.elapsed_s, r.elapsed_s, note))


def _cases(args) -> list[Case]:
    if not hasattr(args, "_ci_cases"):
        args._ci_cases = []
    return args._ci_cases


# ---------------------------------------------------------------------------------------------
# Writers

def _time(s: float) -> str:
    return f"{s:.3f}"


def _suite_time(cs: list[Case]) -> float:
    # one search checks every property at once: the suite (one variant) has the measured time,
    # a test case only when it was measured alone (a proof)
    if all(c.elapsed_s is not None for c in cs):
        return sum(c.elapsed_s for c in cs)
    return cs[0].run_s


def junit_xml(cases: list[Case]) -> str:
    suites: dict[str, list[Case]] = {}
    for c in cases:
        suites.setdefault(f"kcheck {c.command} {c.spec}/{c.variant}", []).append(c)
    root = ET.Element("testsuites", name="kcheck", tests=str(len(cases)),
                      failures=str(sum(c.outcome == FAILED for c in cases)), errors="0",
                      time=_time(sum(_suite_time(cs) for cs in suites.values())))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    for name, cs in suites.items():
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(cs)),
                              failures=str(sum(c.outcome == FAILED for c in cs)), errors="0",
                              skipped=str(sum(c.outcome == SKIPPED for c in cs)),
                              time=_time(_suite_time(cs)), timestamp=stamp,
                              hostname=socket.gethostname())
        for c in cs:
            tc = ET.SubElement(suite, "testcase", name=c.property, classname=f"kcheck.{c.spec}.{c.variant}")
            if c.elapsed_s is not None:
                tc.set("time", _time(c.elapsed_s))
            if c.outcome == FAILED:
                f = ET.SubElement(tc, "failure", message=c.message, type=c.status)
                f.text = (c.doc + "\n\n" if c.doc else "") + (c.trace_text or c.message)
            elif c.outcome == SKIPPED:
                ET.SubElement(tc, "skipped", message=c.message)
            elif c.trace_text:
                out = ET.SubElement(tc, "system-out")
                out.text = c.message + "\n\n" + c.trace_text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _uri(path: str) -> str:
    from urllib.parse import quote
    p = Path(path).resolve()
    try:
        return quote(p.relative_to(Path.cwd()).as_posix())
    except ValueError:
        return p.as_uri()


def _location(source, text: str | None = None) -> dict:
    loc: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(source[0])},
                                      "region": {"startLine": source[1]}}}
    if text is not None:
        loc["message"] = {"text": text}
    return loc


def sarif(cases: list[Case]) -> dict:
    from importlib.metadata import PackageNotFoundError, version
    try:
        kcheck_version = version("kcheck")
    except PackageNotFoundError:
        kcheck_version = "0"
    rules, index = [], {}
    results = []
    for c in cases:
        rid = f"{c.spec}/{c.property}"
        if rid not in index:
            index[rid] = len(rules)
            rules.append({"id": rid, "name": c.property,
                          "shortDescription": {"text": c.doc or c.property},
                          "properties": {"kind": c.kind}})
        kind = ("fail" if c.outcome == FAILED else "open" if c.outcome == SKIPPED else
                "informational" if c.status == "violated" else "pass")
        r: dict = {"ruleId": rid, "ruleIndex": index[rid], "kind": kind,
                   "level": "error" if kind == "fail" else "none",
                   "message": {"text": c.message},
                   "properties": {"command": c.command, "variant": c.variant, "status": c.status}}
        if c.source:
            r["locations"] = [_location(c.source)]
        if c.trace_steps:
            r["codeFlows"] = [{"message": {"text": f"counterexample of {len(c.trace_steps)} steps"},
                               "threadFlows": [{"locations": [
                                   {"location": _location(src, f"{i}. {label}: {changes}") if src else
                                    {"message": {"text": f"{i}. {label}: {changes}"}}}
                                   for i, (label, changes, src) in enumerate(c.trace_steps, start=1)]}]}]
        results.append(r)
    commands = sorted({c.command for c in cases})
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "kcheck", "version": kcheck_version,
                                          "rules": rules}},
                      "invocations": [{"executionSuccessful": True,
                                       "commandLine": " ".join(["kcheck", *commands])}],
                      "results": results}]}


def write(args) -> list[str]:
    """Writes --junit and --sarif for whatever the command recorded (nothing recorded: an
    empty suite, which says so). Each one is tried; -> what could not be written, one sentence
    each (the run's results are printed already: a failure here is exit 5, not bad input)."""
    from kcheck.options import write_file
    cases = getattr(args, "_ci_cases", [])
    failures = []
    for opt, text in (("junit", lambda: junit_xml(cases)),
                      ("sarif", lambda: json.dumps(sarif(cases), indent=2) + "\n")):
        path = getattr(args, opt, None)
        if not path:
            continue
        try:
            write_file(path, text())
        except OSError as e:
            failures.append(f"--{opt} {path}: cannot write the file ({e.strerror})")
    return failures
