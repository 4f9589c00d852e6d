"""The result model: one vocabulary for what every engine answers, and the one place where a
result becomes a verdict cell, a comparison with the spec's record, a JSON document, an exit code
or a saved trace (docs/design.md, "The result model").

Every engine's run returns a ``RunResult`` (its own statistics: a search counts states, a solver
counts conflicts), every property gets a ``Verdict``, and every counterexample, whether a path
to a bad state, a path to a deadlock or a lasso, is a ``Counterexample``: an initial state and
the action instances taken from it, with the index where the loop starts for a lasso.
``RunReport`` is what a command prints: the engine, the model, a ``PropertyResult`` (verdict and
trace) per property, and the measured figures. The checks that are not a run of an engine over
properties answer here too: a saved trace's replay (``ReplayResult``), a trace driven against
Kafka (``Outcome``) and conformance in every transition of a state graph (``ExhaustiveResult``).
This module imports no other of kcheck's but options: the engines, traces and conformance build
on it (docs/architecture.md).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


class Verdict(str, Enum):
    """A property's verdict. A str, so that ``status == "violated"`` reads as it always did."""
    HOLDS = "holds"                  # every reachable state (or behaviour) was examined
    VIOLATED = "violated"            # a counterexample was found (and replays)
    BOUNDED = "bounded"              # no violation within the bounds: not a proof
    PROVED = "proved"                # k-induction: every reachable state, epochs unbounded
    NOT_INDUCTIVE = "not-inductive"  # k-induction found a counterexample to induction
    UNKNOWN = "unknown"              # the solver gave up (timeout, interruption)
    CONFORMS = "conforms"            # conformance: every step answered as the model said
    DIVERGES = "diverges"            # conformance: a step answered otherwise
    NOT_DRIVABLE = "not-drivable"    # conformance: a step the adapter cannot send
    REACHED = "reached"              # a sometimes property: a witness was found (and replays)
    NOT_REACHED = "not-reached"      # a sometimes property: no reachable state meets it

    def __str__(self) -> str:
        return self.value

    @property
    def decided(self) -> bool:
        """Whether the verdict is a full answer (as opposed to bounded or unknown)."""
        return self in (Verdict.HOLDS, Verdict.VIOLATED, Verdict.PROVED, Verdict.CONFORMS,
                        Verdict.DIVERGES, Verdict.REACHED, Verdict.NOT_REACHED)


@dataclass
class Counterexample:
    """A counterexample of any engine: the packed initial state and the action instance indices
    taken from it. For a lasso (a progress property), the behaviour repeats steps[loop_index:]
    for ever (loop_index == len(steps): it stops for ever), and trigger_index is the state where
    P holds and Q does not.

    A solver (bmc, prove) finds a path of raw field values (``path``, a symbolic.SolverPath) that
    need not pack into the explicit encoding of the model asked: then ``initial`` is None, and
    ``trace`` (when a bound parameter raised just enough makes it pack) or ``note`` says what
    became of it. Explicit engines leave the last three unset."""
    property: str
    kind: str                          # 'invariant', 'transition', 'deadlock', 'lasso'
    initial: tuple | None
    steps: list[int]
    loop_index: int | None = None
    trigger_index: int | None = None
    path: Any = None                   # the solver's raw path (symbolic.SolverPath)
    trace: Any = None                  # the replayable kcheck.trace.Trace built from it
    note: str | None = None            # e.g. the parameter raised so that the trace replays

    @property
    def is_lasso(self) -> bool:
        return self.loop_index is not None


def cell(status: str, length: int | None = None, lasso: bool = False,
         bounded: str = "no violation (bounded)") -> str:
    """A verdict as a table cell, the same in every matrix and report."""
    status = Verdict(status)
    if status is Verdict.REACHED:
        return "reached" if length is None else f"reached ({length} step{'' if length == 1 else 's'})"
    if status is Verdict.VIOLATED:
        n = "" if length is None else f"{length} step{'' if length == 1 else 's'}"
        what = ", ".join(x for x in ("lasso" if lasso else "", n) if x)
        return f"VIOLATED ({what})" if what else "VIOLATED"
    return {Verdict.HOLDS: "holds", Verdict.BOUNDED: bounded, Verdict.PROVED: "PROVED",
            Verdict.NOT_INDUCTIVE: "NOT INDUCTIVE", Verdict.UNKNOWN: "unknown (solver)",
            Verdict.CONFORMS: "conforms", Verdict.DIVERGES: "DIVERGES",
            Verdict.NOT_DRIVABLE: "not drivable", Verdict.NOT_REACHED: "NOT REACHED"}[status]


def sometimes_status(spec, prop: str, status: str) -> Verdict:
    """A property's verdict from an engine's status. The engines check a ``sometimes`` property
    as the invariant "never P" (spec.lang), so for one their "violated" is "reached" (the
    counterexample is the witness) and their "holds" is "not reached"."""
    status = Verdict(status)
    p = spec.properties.get(prop)
    if p is None or p.kind != "sometimes":
        return status
    return {Verdict.VIOLATED: Verdict.REACHED, Verdict.HOLDS: Verdict.NOT_REACHED}.get(status, status)


# ---------------------------------------------------------------------------------------------
# The spec's record of expected verdicts (Variant.expected_violations / expected_bounded)

def recorded_variant(spec, variant: str | None):
    """The record a variant's verdicts are compared with: the variant's, or a release profile's
    that carries one (violates=), else None (a spec without variants, an unrecorded profile)."""
    v = spec.variants.get(variant) if variant is not None else None
    prof = getattr(spec, "profiles", {}).get(variant) if variant is not None else None
    if v is None and prof is not None and prof.recorded:
        v = prof.variant
    return v


def recorded_violations(spec, variant: str | None) -> set[str]:
    """The properties the spec's record says ``variant`` violates (or, for a sometimes
    property, reaches): empty where there is no record. The one place the record is read."""
    v = recorded_variant(spec, variant)
    return set(v.expected_violations) if v is not None else set()


def differs_from_record(spec, variant: str | None, prop: str, status: str) -> str | None:
    """Why ``status`` of ``prop`` differs from what the spec records for ``variant``, or None.
    A 'bounded' the record does not mention is not a difference (it is not an answer), but a
    'bounded' where the record says violated is one."""
    v = recorded_variant(spec, variant)
    if v is None:
        return None
    where = f"{spec.name}/{v.name}: {prop}"
    expected = prop in v.expected_violations
    status = Verdict(status)
    # a sometimes property is recorded in violates=[...] where it is known not to be reached
    if status is Verdict.NOT_REACHED and not expected:
        return (f"{where} is not reached but the record says it is (a scenario the spec relies "
                f"on no longer happens)")
    if status is Verdict.REACHED and expected:
        return f"{where} is reached but the record says it is not"
    if status is Verdict.VIOLATED and not expected:
        return f"{where} is violated but the record says it holds (a regression, or a new finding to record)"
    if status is Verdict.HOLDS and expected:
        return f"{where} holds but the record says it is violated"
    if status is Verdict.PROVED and expected:
        return f"{where} is proved but the record says it is violated"
    if status is Verdict.BOUNDED and expected:
        return f"{where} not violated within the bounds but the record says it is violated"
    bounded = getattr(v, "expected_bounded", {}) or {}
    if status is Verdict.HOLDS and prop in bounded:
        return f"{where} holds but the record says it is bounded ({bounded[prop]})"
    return None


def record_differences(spec, variant: str | None, statuses: dict[str, str]) -> list[str]:
    """Every difference between a variant's verdicts ({property: status}) and the record."""
    out = []
    for p, st in statuses.items():
        d = differs_from_record(spec, variant, p, st)
        if d:
            out.append(d)
    return out


def search_differences(spec, res) -> list[str]:
    """Differences between a search's verdicts (bfs.SearchResult) and the spec's record."""
    return record_differences(spec, res.model.variant, {p: res.status(p) for p in res.properties})


def unrecorded_bounded(spec, variant: str | None, statuses: dict[str, str]) -> bool:
    """A 'bounded' verdict that the record does not expect: the run decided less than it should."""
    v = spec.variants.get(variant) if variant is not None else None
    recorded = (getattr(v, "expected_bounded", {}) or {}) if v is not None else {}
    return any(st == Verdict.BOUNDED and p not in recorded for p, st in statuses.items())


# ---------------------------------------------------------------------------------------------
# One run of one engine on one model

@dataclass
class PropertyResult:
    name: str
    status: Verdict
    kind: str | None = None            # 'invariant', 'transition', 'deadlock', 'leads-to', ...
    trace: Any = None                  # a kcheck.trace.Trace, when there is a counterexample
    reason: str | None = None          # why bounded / unknown, one sentence
    details: dict = field(default_factory=dict)   # engine-specific JSON fields (fair, note, ...)

    def to_json(self) -> dict:
        tr = self.trace
        out: dict[str, Any] = {"status": self.status.value, "kind": self.kind}
        if self.reason:
            out["reason"] = self.reason          # present only when there is one
        out["trace_length"] = len(tr) if tr is not None else None
        out["loop_index"] = tr.loop_index if tr is not None else None
        out["trace"] = tr.to_json() if tr is not None else None
        out.update(self.details)     # an engine may say more (bmc: a path it could not pack)
        return out


class RunResult:
    """What a run of an engine returns, whatever the engine: the ``model``, the ``properties``
    checked (names), a verdict per property (``status(p)``, ``verdicts``), the counterexamples
    found (``found``: property -> Counterexample), why it stopped early (``stop_reason``, None
    when it ran to its end) and the figures it measured (``statistics``, named as the JSON
    output names them). The engines' results are ones: bfs.SearchResult (also from Spark),
    symbolic.BmcResult, symbolic.ProofResult (one property's k-induction) and
    symbolic.CompareResult (a rule's three questions), each adding its own fields. ``report`` pairs it with the traces built
    from its counterexamples: what a command prints. ``statistics`` is built when asked, once at
    the end, so the search loop pays nothing for it."""
    engine: str = "engine"              # 'bfs', 'spark-slices', 'spark-ownership', 'z3-bmc'

    def status(self, prop: str) -> str:
        raise NotImplementedError

    def reason(self, prop: str) -> str | None:
        """Why a verdict is bounded or unknown, in one sentence (None otherwise)."""
        return None

    @property
    def statistics(self) -> dict:
        raise NotImplementedError

    @property
    def verdicts(self) -> dict[str, Verdict]:
        return {p: Verdict(self.status(p)) for p in self.properties}

    def kind(self, prop: str) -> str:
        props = self.model.spec.properties
        return props[prop].kind if prop in props else "deadlock"

    def report(self, traces: dict, details: dict | None = None,
               engine: str | None = None) -> RunReport:
        """The run as printed: each verdict with its trace (``traces``, by property) and the
        engine's extra JSON fields (``details``, by property)."""
        props = {p: PropertyResult(p, v, self.kind(p), traces.get(p), self.reason(p),
                                   (details or {}).get(p, {}))
                 for p, v in self.verdicts.items()}
        return RunReport(engine or self.engine, self.model, props, self.statistics)


@dataclass
class RunReport:
    """What a command prints about one run: the engine, the model, the verdicts with their
    traces, and the figures the engine measured (``statistics``)."""
    engine: str                         # a RunResult's engine, or 'state-graph'
    model: Any                          # spec.lang.Model
    properties: dict[str, PropertyResult]
    statistics: dict = field(default_factory=dict)

    @property
    def statuses(self) -> dict[str, str]:
        return {n: p.status for n, p in self.properties.items()}

    @property
    def traces(self) -> dict:
        return {n: p.trace for n, p in self.properties.items() if p.trace is not None}

    def record_differences(self) -> list[str]:
        return record_differences(self.model.spec, self.model.variant, self.statuses)

    def to_json(self) -> dict:
        m = self.model
        return {"spec": m.spec.name, "variant": m.variant, "parameters": m.params.as_dict(),
                "engine": self.engine, **self.statistics,
                "properties": {n: p.to_json() for n, p in self.properties.items()}}


def holds_covers(res, prop: str, proofs=()) -> str | None:
    """What a search's 'holds' (or 'NOT REACHED') of ``prop`` covers, in a few words, or None
    when nothing qualifies it (a trace is its own evidence; a search that cut no step covers
    every reachable state at its sizes). ``proofs``: symbolic.ProofResults of the same model;
    a property proved, or a lemma a proof assumed (Houdini keeps only lemmas that are inductive
    together), holds for every epoch whatever the search's bounds."""
    if Verdict(res.status(prop)) not in (Verdict.HOLDS, Verdict.NOT_REACHED):
        return None
    proved = {pr.property for pr in proofs if pr.verdict is Verdict.PROVED}
    proved |= {lemma for pr in proofs if pr.verdict is Verdict.PROVED for lemma in pr.lemmas_used}
    if prop in proved:
        return "every epoch (proved)"
    quotient = getattr(res, "quotient", None)
    if not res.cut_by_bounds:
        # a quotient search's cap never cuts a step: the verdict covers every value of the domain
        return None if quotient in (None, "off") else f"every {quotient} (quotient)"
    spec, values = res.model.spec, res.model.params.as_dict()
    caps = [e.cap for e in spec.epochs.values() if e.cap is not None]
    if spec.environment is not None and spec.environment.cap is not None:
        caps.append(spec.environment.cap)
    if caps:
        return "up to " + ", ".join(f"{c}={values[c]}" for c in dict.fromkeys(caps))
    return "up to the search bounds"


def from_search(res, traces: dict, engine: str | None = None) -> RunReport:
    """The report of an explicit-state search (bfs.SearchResult, also from Spark)."""
    return res.report(traces, engine=engine)


def exit_code(statuses: dict[str, str], complete: bool, stop_reason: str | None = None) -> int:
    """One run's exit code (README, "Exit codes"): 143/130 when stopped by a signal, 1 when a
    property is violated, 3 when something is not decided, else 0."""
    from kcheck.options import BOUNDED, INTERRUPTED, OK, TERMINATED, VIOLATED
    if stop_reason == "terminated":
        return TERMINATED
    if stop_reason == "interrupted":
        return INTERRUPTED
    if any(s in (Verdict.VIOLATED, Verdict.NOT_REACHED) for s in statuses.values()):
        return VIOLATED
    return OK if complete and all(Verdict(s).decided for s in statuses.values()) else BOUNDED


# ---------------------------------------------------------------------------------------------
# A saved trace replayed through its spec (kcheck replay, upgrade; checker/trace.py ``replay``)

@dataclass
class ReplayResult:
    """Whether a trace file still reproduces: ``ok``, what it showed or where it stopped
    (``message``), the replayed trace (a kcheck.trace.Trace) and the first step that failed."""
    ok: bool
    message: str
    trace: Any = None                # kcheck.trace.Trace, when the steps replayed
    failed_step: int | None = None   # 1-based


# ---------------------------------------------------------------------------------------------
# Conformance: one trace driven against Kafka (checker/conform/driver.py), and every transition
# of a state graph (checker/conform/exhaustive.py)

# the kinds of an Outcome (not Verdict's values: a divergence may be expected, or a timing one)
CONFORMS, DIVERGES, EXPECTED, NOT_DRIVABLE, BROKEN, TIMING, SPEC_REGRESSION = (
    "conforms", "diverges", "diverges as expected", "not drivable", "broken", "timing divergence",
    "spec regression")


@dataclass
class Outcome:
    """One trace driven against Kafka: conforms, diverges at a step (as the release record
    expects, or not), not drivable, with the wire log and what was compared."""
    trace: str                      # the file (or walk name)
    variant: str
    steps: int
    kind: str
    step: int | None = None         # 1-based step of a divergence / where driving stopped
    detail: str = ""
    matches: list[str] = field(default_factory=list)   # variants whose every step Kafka matched
    undecided: list[str] = field(default_factory=list)  # variants that do not enable the trace
    seconds: float = 0.0
    wire_log: str | None = None
    wire: list = field(default_factory=list, repr=False)   # (request, response) lines
    compared: int = 0               # key comparisons made against the trace's variant
    absent: dict = field(default_factory=dict)   # why a key was not compared -> how often
    # at a divergence: (key, spec said, Kafka said) of each key that differs at that step, the
    # form an expected-divergence record takes (conform.driver.RecordedDivergence.diffs)
    diff: list = field(default_factory=list, repr=False)
    # (action, Kafka's response code or None) of each step driven: what a walk exercised
    exercised: list = field(default_factory=list, repr=False)

    @property
    def unexpected(self) -> bool:
        return self.kind in (DIVERGES, BROKEN, SPEC_REGRESSION)

    def text(self) -> str:
        if self.kind == CONFORMS:
            return f"conforms{': ' + self.detail if self.detail else ''}"
        if self.kind in (DIVERGES, EXPECTED):
            return f"{self.kind} at step {self.step}: {self.detail}"
        where = f" at step {self.step}" if self.step else ""
        return f"{self.kind}{where}: {self.detail}"


@dataclass
class Divergence:
    step: int                 # 1-based, in `doc`
    detail: str
    doc: dict                 # the trace, standard format
    shortest: bool            # the BFS-shortest path (True) or the DFS path (False)
    expected: bool = False    # the release record predicts it (the release runs another variant)
    # what a real broker of the same release said when the trace was replayed over the wire
    # (kcheck conform --exhaustive does it at once): confirmed, or why not; None if not replayed
    broker: str | None = None


@dataclass
class ExhaustiveResult:
    spec: str
    variant: str
    version: str
    params: dict
    states: int = 0
    transitions: int = 0          # edges of the graph (every action instance's step)
    checked: int = 0              # transitions executed on the coordinator and compared
    client_side: int = 0          # of those, client-side
    not_mappable: dict = field(default_factory=dict)     # reason -> transitions
    timing: int = 0
    initial_not_drivable: dict = field(default_factory=dict)   # reason -> initial states
    unreached: int = 0            # states the walk never reached (only through unmappable steps)
    divergences: list = field(default_factory=list)
    expected: list = field(default_factory=list)     # divergences the release record predicts
    expected_count: int = 0
    # rule coverage: per action, every outcome its response can give (the error-code literals of
    # its respond expression, answerable_outcomes) and how many checked transitions gave each
    answerable: dict = field(default_factory=dict)    # action -> [outcome]
    answered: dict = field(default_factory=dict)      # action -> {outcome: transitions}
    seconds: float = 0.0          # the walk (after the graph)
    graph_seconds: float = 0.0
    harness_calls: int = 0

    @property
    def conforms(self) -> bool:
        return not self.divergences

    def never_answered(self) -> dict:
        """action -> the outcomes its response can give that no checked transition gave: rules
        never compared with Kafka."""
        out = {}
        for action, codes in self.answerable.items():
            seen = self.answered.get(action, {})
            missing = [c for c in codes if not seen.get(c)]
            if missing:
                out[action] = missing
        return out

    def coverage_lines(self) -> list[str]:
        lines = []
        for action, codes in self.answerable.items():
            seen = self.answered.get(action, {})
            lines.append(f"  {action}: " + ", ".join(
                f"{c} {seen.get(c, 0):,}" for c in codes))
        for action, missing in self.never_answered().items():
            lines.append(f"never answered (a rule never compared with Kafka): {action} "
                         f"{', '.join(missing)}")
        return lines

    @property
    def rate(self) -> float:
        return self.checked / self.seconds if self.seconds > 0 else 0.0

    def text(self) -> str:
        head = (f"{self.spec}/{self.variant} on Kafka {self.version} in-process: "
                f"{self.states:,} states, {self.transitions:,} transitions")
        lines = [head]
        if self.conforms:
            lines.append(f"conforms in all {self.checked:,} transitions checked "
                         f"({self.client_side:,} client-side)"
                         + ("" if self.checked == self.transitions else
                            f" of the graph's {self.transitions:,}"))
        else:
            lines.append(f"diverges: {len(self.divergences)} divergence(s) found; "
                         f"{self.checked:,} transitions checked ({self.client_side:,} client-side)")
            for d in self.divergences:
                how = "shortest trace" if d.shortest else "the DFS path (the shortest trace conforms)"
                lines.append(f"  at step {d.step} of {len(d.doc['steps'])} ({how}): {d.detail}")
                if d.broker:
                    lines.append(f"    on a real broker: {d.broker}")
        if self.expected_count:
            lines.append(f"diverges as the release record expects: {self.expected_count:,} "
                         f"transitions (not followed), e.g. {self.expected[0].detail}")
        for why, n in sorted(self.not_mappable.items(), key=lambda x: -x[1]):
            lines.append(f"not mappable: {n:,} transitions: {why}")
        for why, n in self.initial_not_drivable.items():
            lines.append(f"initial states not drivable: {n}: {why}")
        if self.unreached:
            lines.append(f"states not reached on Kafka (only through steps not followed: not "
                         f"mappable, or diverging as expected): {self.unreached:,}")
        if self.timing:
            lines.append(f"timing divergences (a timer the step did not ask for): {self.timing:,}")
        if self.answerable:
            lines.append("outcomes answered in the transitions checked, per action:")
            lines += self.coverage_lines()
        lines.append(f"time: graph {self.graph_seconds:.1f} s, walk {self.seconds:.1f} s, "
                     f"{self.rate:,.0f} transitions/s")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# JSON output: printed through one function, checked against checker/output_schema.json

OUTPUT_SCHEMA = Path(__file__).parent / "output_schema.json"
# Set by the test suite (tests/conftest.py): every JSON document a command prints is validated
# against the schema first, so no test can see an output the schema does not describe.
VALIDATE_ENV = "KCHECK_VALIDATE_OUTPUT"
_validators: dict = {}


def output_validator(kind: str):
    """A validator of the ``kind`` of document (a $defs name of output_schema.json)."""
    if kind not in _validators:
        import jsonschema
        from referencing import Registry, Resource
        doc = json.loads(OUTPUT_SCHEMA.read_text())
        # the output refers to the trace format's schemas by their $id: read as the package's
        # data, so that this module does not import kcheck.trace, which builds on it
        shipped = [json.loads(p.read_text())
                   for p in sorted(OUTPUT_SCHEMA.parent.glob("*schema*.json"))]
        registry = Registry().with_resources(
            [(r["$id"], Resource.from_contents(r)) for r in shipped])
        _validators[kind] = jsonschema.Draft202012Validator(
            {"$ref": f"{doc['$id']}#/$defs/{kind}"}, registry=registry)
    return _validators[kind]


def check_output(doc, kind: str) -> None:
    """Raises OutputSchemaError when ``doc`` is not a valid ``kind`` document."""
    errors = sorted(output_validator(kind).iter_errors(doc), key=lambda e: e.path)
    if errors:
        e = errors[0]
        where = "/".join(map(str, e.absolute_path)) or "the top level"
        raise OutputSchemaError(f"the {kind} JSON output does not follow checker/output_schema.json "
                                f"at {where}: {e.message[:300]}")


class OutputSchemaError(AssertionError):
    """A defect of kcheck (its output and its documented schema disagree), seen by the tests."""


def print_json(doc, kind: str, indent: int | None = 2) -> None:
    """Prints a command's JSON document (validated first when the test suite asks)."""
    if os.environ.get(VALIDATE_ENV):
        check_output(json.loads(json.dumps(doc, default=str)), kind)
    print(json.dumps(doc, indent=indent, default=str), flush=True)
