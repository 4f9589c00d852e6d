"""The conformance driver: replays a spec's traces on a real Kafka through the spec's Adapter and
compares, step by step, what Kafka shows with what the spec predicts.

The spec is the oracle. For each trace the driver computes the spec's prediction (every step's
outcome and the state after it) in the trace's variant and in every other variant of the spec,
then lets the adapter drive Kafka through the trace's actions. The adapter never sees a
prediction while it drives: it turns an action into requests from its own client-side state
(what Kafka's responses told it), and returns what Kafka showed in the adapter's observation
vocabulary (``observe``); ``view`` maps a predicted step into the same vocabulary.

The comparison is strict (issue 34): the view is the step's declaration of the keys it compares,
and every key either side gives is compared. A key one side does not give is a divergence
("Kafka gave no member_epoch[0]"), never a skip: an observation lost on the Kafka side cannot
weaken a comparison unnoticed. A key that one side cannot give at a step says so explicitly,
as ``Absent(why)``: not compared there, and counted.

Outcomes of one trace: conforms; diverges at step k (spec said X, Kafka said Y); diverges as
expected (the release runs another variant's rule, which predicts exactly what Kafka said, or
a recorded divergence: the key and both values); not drivable (why); broken (a request failed
outright: the reason); spec regression (a saved trace that no longer replays in its spec).
"""
from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# initial_words is also this module's name for a trace's initial state in a model
from kcheck.layout import initial_words as model_initial_words, layout_of
from kcheck.trace import Executor, TraceError, initial_state, load
from kcheck.spec.lang import SpecError
from kcheck.verdict import (BROKEN, CONFORMS, DIVERGES, EXPECTED, NOT_DRIVABLE, SPEC_REGRESSION,
                            TIMING, Outcome)

# the one exit-code table (options.py): a divergence is 1, a broker that cannot start 4
from kcheck.options import (BAD_INPUT, BROKER_FAILED as BROKER_UNAVAILABLE, OK,  # noqa: F401
                            VIOLATED as DIVERGED)


class NotDrivable(Exception):
    """The adapter cannot drive this trace (an action without a request, an initial state that
    requests cannot reach); the message says why."""


class TimerFired(Exception):
    """Kafka ran a timer the trace did not ask for (a session or rebalance timeout fenced a
    member during the replay): a timing divergence, not a verdict on the spec."""


# ---------------------------------------------------------------------------------------------
# The spec's prediction

@dataclass
class SpecStep:
    """One step of a trace as the spec predicts it: the action, its arguments, the outcome and
    the state before and after (flat field names: 'member_epoch[1]' -> shown value)."""
    index: int                  # 1-based
    label: str
    action: str
    args: dict
    outcome: Any
    pre: dict
    post: dict


def field_values(model, words) -> dict:
    """A packed state as each field's shown value, by flat field name (holds[0][1])."""
    lay = layout_of(model)
    return {f.name: f.type.show(v) for f, v in zip(lay.fields, lay.unpack_flat(words))}


_MODELS: dict = {}


def model_of(spec, variant: str | None, params: dict):
    """The spec at a variant and parameters, with its compiled executor, built once per run
    (compiling a model costs far more than replaying a trace through it)."""
    key = (id(spec), variant, json.dumps(params, sort_keys=True))
    if key not in _MODELS:
        model = spec.instantiate(variant, params)
        _MODELS[key] = (model, Executor(model))
    return _MODELS[key][0]


def executor_of(model) -> Executor:
    """The compiled executor of a model that model_of built (compiled once), else a new one."""
    for m, ex in _MODELS.values():
        if m is model:
            return ex
    return Executor(model)


def initial_words(model, doc: dict) -> tuple | None:
    """The trace's initial state in this model's layout (variants may add fields, as
    lost_responses adds previous_epoch); None when the state does not fit it. A partial state
    (docs/writing-specs.md) is completed from the initial state in the trace's own variant only:
    in another variant (--which-variant) a field the trace lacks is one that variant adds, not
    one the trace left out, so the state must fit as it is given."""
    if not doc.get("state"):
        return model_initial_words(model)[0]
    own = (doc.get("variant") or model.spec.default_variant) == model.variant
    try:
        return tuple(layout_of(model).pack(initial_state(model, doc["state"]) if own
                                           else doc["state"]))
    except SpecError:
        return None


def predict(model, initial_words: tuple | None, steps: list[dict]) -> list[SpecStep]:
    """The spec's steps for these actions from this state; stops at the first step the model
    does not enable (another variant may not allow a trace's step)."""
    if initial_words is None:
        return []
    ex = executor_of(model)
    words, out = initial_words, []
    for i, st in enumerate(steps, start=1):
        try:
            inst = model.instance(st["action"], dict(st.get("args", {})))
        except SpecError:
            if i == 1 and not any(a.name == st["action"] for a in model.spec.actions):
                raise
            break     # an instance this variant never enables (JoinFenced after KAFKA-19233)
        if not ex.enabled(words, inst.index):
            break
        nxt, o, _ = ex.apply(words, inst.index)
        out.append(SpecStep(i, inst.label, inst.action.name, dict(st.get("args", {})),
                            model.show_outcome(o), field_values(model, words), field_values(model, nxt)))
        words = nxt
    return out


# ---------------------------------------------------------------------------------------------
# Adapters

@dataclass
class TraceRun:
    """What one trace's replay owns on the broker: unique names (group, topic, transactional
    ids derive from ``name``), the wire log, and the adapter's own client-side state."""
    broker: Any
    name: str
    params: Any
    wire_log: list = field(default_factory=list)
    state: dict = field(default_factory=dict)
    connections: list = field(default_factory=list)
    # the spec in the trace's variant: an adapter whose client runs a rule of the spec (the
    # classic group leader's assignor) or sends per variant (the producer's transaction
    # version) reads it here
    model: Any = None
    # the trace's actions (its script, not the spec's prediction) and the step being driven
    # (1-based): an adapter that must prepare Kafka for a later step looks ahead here (the
    # producer holds its coordinator's markers when a request comes before they arrive)
    actions: list = field(default_factory=list)
    step: int = 0

    @property
    def variant(self) -> str | None:
        return self.model.variant if self.model is not None else None

    def connect(self, host_port=None):
        """A new connection (logged to this trace's wire log); closed at the trace's end."""
        from kcheck.conform.wire import Connection
        host, port = host_port or self.broker.host_port
        c = Connection(host, port, client_id=f"kcheck-{self.name}", log=self.wire_log)
        self.connections.append(c)
        return c

    def close(self):
        for c in self.connections:
            c.close()
        self.connections.clear()


class Adapter:
    """How one spec's actions become requests. Subclasses set ``spec_name`` and implement
    ``begin`` (the setup prefix for a trace's initial state), ``drive`` (one action -> requests
    -> observations), ``view`` (a predicted step -> the same observation keys). See
    docs/conformance.md, "How to add an adapter"."""
    spec_name = ""
    # broker settings this adapter needs beyond broker.BASE_SETTINGS
    broker_settings: dict[str, str] = {}
    # which variant's rules each Kafka release runs: (first release, last release or None,
    # variant, why); the expected-divergence record is derived from it (see expected_variants)
    releases: list[tuple[str, str | None, str, str]] = []
    # divergences the release record cannot predict (a trace of a pre-fix variant whose step the
    # fixed release answers otherwise), each with the keys and both values (RecordedDivergence)
    expected_divergences: list["RecordedDivergence"] = []
    # spec actions that need replicas (a leader change, a coordinator move): a trace that takes
    # one runs on a cluster of three (broker.Cluster), the others on the single broker;
    # action -> what it is on the cluster
    replica_actions: dict[str, str] = {}

    def needs_cluster(self, doc: dict) -> bool:
        """Whether this trace takes an action that needs replicas (runs on a broker.Cluster)."""
        return any(st["action"] in self.replica_actions for st in doc.get("steps", ()))

    def initial_reason(self, params, state: dict) -> str | None:
        """Why requests cannot reach this initial state (shown values, declared names), or None."""
        return None

    def action_reason(self, action: str, args: dict) -> str | None:
        """Why this action instance cannot be driven, or None."""
        return None

    def begin(self, run: TraceRun, initial: dict) -> None:
        raise NotImplementedError

    def drive(self, run: TraceRun, action: str, args: dict) -> dict[str, Any]:
        raise NotImplementedError

    def view(self, run: TraceRun, step: SpecStep) -> dict[str, Any]:
        raise NotImplementedError

    def end(self, run: TraceRun) -> None:
        pass

    def expected_variants(self, version: str) -> list[tuple[str, str]]:
        """[(variant, why)] whose changes this release runs, from ``releases`` (a release may run
        several: one rule of one variant, another rule of another)."""
        v = version_key(version)
        if v is None:
            return []
        return [(variant, why) for lo, hi, variant, why in self.releases
                if version_key(lo) <= v and (hi is None or v <= version_key(hi))]


def version_key(version: str):
    """(4, 3, 1) for "4.3.1"; None for a version that is not a release number."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", version or "")
    return tuple(int(x) for x in m.groups()) if m else None


_ADAPTERS = {"consumer_group": "kcheck.conform.consumer_group:ConsumerGroupAdapter"}
NEVER_SHIPPED = {
    "shared_consumption": "shared_consumption models a draft KIP that Kafka never shipped: there "
                          "is no broker to run it against",
    "two_phase": "two_phase is the TLA+ calibration example, not a Kafka protocol",
}


def register_adapter(spec_name: str, target: str) -> None:
    """Name the adapter class of a spec ("module:Class"); adapter modules call this on import
    or are listed in _ADAPTERS."""
    _ADAPTERS[spec_name] = target


def adapter_for(spec_name: str) -> Adapter:
    import importlib
    if spec_name in NEVER_SHIPPED:
        raise SpecError(NEVER_SHIPPED[spec_name])
    if spec_name not in _ADAPTERS and re.match(r"^[a-z_][a-z0-9_]*$", spec_name):
        try:   # an adapter module named after its spec registers itself on import
            importlib.import_module(f"kcheck.conform.{spec_name}")
        except ModuleNotFoundError as e:
            if e.name != f"kcheck.conform.{spec_name}":
                raise
    if spec_name not in _ADAPTERS:
        raise SpecError(f"no conformance adapter for spec {spec_name}; adapters: "
                        f"{', '.join(sorted(_ADAPTERS))}")
    module, cls = _ADAPTERS[spec_name].split(":")
    return getattr(importlib.import_module(module), cls)()


# ---------------------------------------------------------------------------------------------
# Outcomes (the kinds and ``Outcome`` are the result model's, checker/verdict.py)

@dataclass(frozen=True)
class Absent:
    """A key a step compares that one side cannot give at this step, and why (records of a
    release before the field existed, a follower on a single broker, a marker Kafka may have
    written already): said explicitly by the adapter, never by leaving the key out. Not compared
    at that step; counted in ``verdict.Outcome.absent``."""
    why: str


class _NotGiven:
    """The value of a key one side did not give (a divergence, see ``compare``)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = _NotGiven()


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_fmt, v)) + "]"
    return str(v)


def compare(expected: dict, observed: dict) -> list[tuple[str, Any, Any]]:
    """(key, spec said, Kafka said) for every key either side gives that differs, NOT_GIVEN for
    the side that does not give it. The spec's view declares what a step compares; a key only
    Kafka gives is compared too, so neither side can drop an observation unnoticed. A key either
    side gives as ``Absent(why)`` is not compared."""
    out = []
    for k in list(expected) + [k for k in observed if k not in expected]:
        a, b = expected.get(k, NOT_GIVEN), observed.get(k, NOT_GIVEN)
        if isinstance(a, Absent) or isinstance(b, Absent):
            continue
        if a is NOT_GIVEN or b is NOT_GIVEN or a != b:
            out.append((k, a, b))
    return out


def _first_mismatch(adapter, run, prediction: list[SpecStep], observations: list[dict], start=0):
    """(step index, mismatches) of the first step from ``start`` (0-based) whose observations
    differ from the prediction; (None, []) if none differs; (k, None) if the prediction ends
    (not enabled) at step k."""
    for k in range(start, len(observations)):
        if k >= len(prediction):
            return k + 1, None
        diff = compare(adapter.view(run, prediction[k]), observations[k])
        if diff:
            return k + 1, diff
    return None, []


def said(diff) -> str:
    def one(key, a, b):
        if b is NOT_GIVEN:
            return f"{key}: spec said {_fmt(a)}, Kafka gave no {key}"
        if a is NOT_GIVEN:
            return f"{key}: Kafka said {_fmt(b)}, the spec gives no {key}"
        return f"{key}: spec said {_fmt(a)}, Kafka said {_fmt(b)}"
    return "; ".join(one(*d) for d in diff)


@dataclass(frozen=True)
class RecordedDivergence:
    """A divergence the release record cannot predict, recorded as exactly what it is: the trace
    (a path suffix), the releases (first, last or None), the step, every key that differs there
    with the spec's value and Kafka's (NOT_GIVEN for a side that gives none), and the citation.
    A divergence at that step on another key or with other values is unexpected, and so is no
    divergence there (the record is stale). ``then``: the variant that predicts Kafka past the
    step (the rule the release runs); the rest of the trace is compared with it. None when no
    variant enables the rest (the outcome says it was not compared)."""
    trace: str
    first: str
    last: str | None
    step: int
    diffs: tuple          # ((key, spec said, Kafka said), ...)
    why: str
    then: str | None = None

    def applies(self, name: str, version: str | None) -> bool:
        v = version_key(version or "")
        return (v is not None and Path(name).as_posix().endswith(self.trace)
                and version_key(self.first) <= v
                and (self.last is None or v <= version_key(self.last)))

    def matches(self, diff) -> bool:
        return sorted(map(_canonical, diff)) == sorted(map(_canonical, self.diffs))


def _canonical(d) -> tuple:
    key, a, b = d
    return key, _fmt(a) if a is not NOT_GIVEN else NOT_GIVEN, _fmt(b) if b is not NOT_GIVEN else NOT_GIVEN


# ---------------------------------------------------------------------------------------------
# Running traces

@dataclass
class Job:
    """One trace to replay: its file (None for a generated walk), its document."""
    name: str
    doc: dict
    path: Path | None = None


def load_job(path: str | Path, spec_name: str) -> Job:
    doc = load(path)
    if doc["spec"] != spec_name:
        raise TraceError(f"{path} is a trace of spec {doc['spec']}, not {spec_name}")
    return Job(str(path), doc, Path(path))


def spec_prediction(spec, job: Job):
    """(model, initial words, prediction, regression): the spec's prediction of every step in
    the trace's variant, and an Outcome of kind SPEC_REGRESSION when the trace no longer replays
    in its spec (a step not enabled, or an outcome other than the one the trace saved): the spec
    changed under its own trace, a failure that needs no broker to find."""
    doc = job.doc
    try:
        model = model_of(spec, doc.get("variant"), doc.get("params", {}))
        n = len(doc["steps"])
        # a scenario's partial state: the fields it leaves out are the spec's initial state's
        initial = (tuple(layout_of(model).pack(initial_state(model, doc["state"])))
                   if doc.get("state") else model_initial_words(model)[0])
        prediction = predict(model, initial, doc["steps"])
    except SpecError as e:
        raise TraceError(f"{job.name}: {e}") from None
    regression = None
    if len(prediction) < n:
        k = len(prediction) + 1
        regression = Outcome(job.name, model.variant, n, SPEC_REGRESSION, k,
                             f"the trace no longer replays in the spec: step {k} "
                             f"({doc['steps'][k - 1]['action']}) is not enabled")
    else:
        for st, pred in zip(doc["steps"], prediction):
            want = st.get("expect", {}).get("outcome")
            if "outcome" in st.get("expect", {}) and pred.outcome != want:
                regression = Outcome(job.name, model.variant, n, SPEC_REGRESSION, pred.index,
                                     f"the trace no longer replays in the spec: step "
                                     f"{pred.index}'s outcome is {pred.outcome}, the trace "
                                     f"saved {want}")
                break
    return model, initial, prediction, regression


def spec_regressions(spec, jobs: list[Job]) -> list[Outcome]:
    """The saved traces among ``jobs`` that no longer replay in the spec (checked before any
    broker starts)."""
    out = []
    for job in jobs:
        regression = spec_prediction(spec, job)[3]
        if regression is not None:
            out.append(regression)
    return out


def run_trace(broker, adapter: Adapter, spec, job: Job, version: str | None,
              all_variants: bool = False, progress=None, run_class=None) -> Outcome:
    """Replay one trace on the broker and judge it. ``run_class`` (a TraceRun) decides where
    the adapter's connections go: the broker's address (TraceRun), or the in-process
    coordinator (inprocess.InProcessRun, with an inprocess.InProcessBroker)."""
    t0 = time.monotonic()
    doc = job.doc
    model, initial, prediction, regression = spec_prediction(spec, job)
    if regression is not None:
        return regression
    n = len(doc["steps"])
    initial_state = layout_of(model).show(layout_of(model).unpack_flat(initial))
    why = adapter.initial_reason(model.params, initial_state)
    if why:
        return Outcome(job.name, model.variant, n, NOT_DRIVABLE, None, why)
    for i, st in enumerate(doc["steps"], start=1):
        why = adapter.action_reason(st["action"], st.get("args", {}))
        if why:
            return Outcome(job.name, model.variant, n, NOT_DRIVABLE, i, why)

    records = [r for r in adapter.expected_divergences if r.applies(job.name, version)]
    # past a divergence the run drives on where an expectation may explain it (the release
    # record or a recorded divergence), so that the steps after it are compared too
    drive_on = all_variants or bool(records) or bool(adapter.expected_variants(version or "")) \
        or (version is not None and getattr(spec, "profile_for", lambda v: None)(version) is not None)
    run = (run_class or TraceRun)(broker, f"{slug(job.name)}-{secrets.token_hex(3)}", model.params,
                                  model=model, actions=[(st["action"], dict(st.get("args", {})))
                                                        for st in doc["steps"]])
    observations: list[dict] = []
    stopped = None                  # (step, reason) where driving stopped early
    try:
        adapter.begin(run, initial_state)
        for i, st in enumerate(doc["steps"], start=1):
            if progress:
                progress(job.name, i, n)
            run.step = i
            try:
                observations.append(adapter.drive(run, st["action"], dict(st.get("args", {}))))
            except NotDrivable as e:
                stopped = (i, str(e), NOT_DRIVABLE)
                break
            except TimerFired as e:
                stopped = (i, str(e), TIMING)
                break
            if not drive_on and compare(adapter.view(run, prediction[i - 1]), observations[-1]):
                break
    except NotDrivable as e:
        stopped = (0, str(e), NOT_DRIVABLE)
    except Exception as e:   # a request failed outright: the broker, the wire, the adapter
        from kcheck.conform.broker import BrokerError
        if isinstance(e, BrokerError):
            raise
        stopped = (len(observations) + 1, f"{type(e).__name__}: {e}", BROKEN)
    finally:
        try:
            adapter.end(run)
        except Exception:
            pass
        run.close()

    out = Outcome(job.name, model.variant, n, CONFORMS)
    out.exercised = [(st["action"], obs.get("outcome") if isinstance(obs.get("outcome"), str) else None)
                     for st, obs in zip(doc["steps"], observations)]
    k, diff = _first_mismatch(adapter, run, prediction, observations)
    _count_keys(out, adapter, run, prediction, observations[:k] if k else observations)
    if all_variants:
        out.matches, out.undecided = _matching_variants(adapter, run, spec, model, initial, doc,
                                                        observations)
    out.wire = run.wire_log
    if k is None and stopped is not None:
        out.kind, out.step, out.detail = stopped[2], stopped[0] or None, stopped[1]
    else:
        _judge(out, adapter, run, spec, doc, model, initial, version, records, observations,
               k, diff, stopped)
    out.seconds = time.monotonic() - t0
    return out


def _judge(out: Outcome, adapter, run, spec, doc, model, initial, version, records,
           observations, k, diff, stopped) -> None:
    """The verdict of a trace driven to its end (or to where driving stopped) whose first
    mismatch with its own variant is at step k (None: none): conforms, diverges, or diverges
    as the release record or a recorded divergence expects, the steps after the expected one
    compared with the variant that predicts them."""
    if k is not None and diff is None:
        out.kind, out.step, out.detail = BROKEN, k, "the spec does not enable this step"
        return
    if k is not None:
        out.kind, out.step, out.detail, out.diff = DIVERGES, k, said(diff), list(diff)
    expected = _expected_by_record(adapter, run, spec, doc, initial, version, len(observations))
    if expected is not None:
        variant, why, pred = expected
        k2, diff2 = _first_mismatch(adapter, run, pred, observations)
        if k is None and variant != model.variant and k2 is not None:
            if _profile_explains(adapter, run, spec, doc, version, variant, observations, None):
                return      # the release's profile predicts every step, as the trace's variant does
            out.kind, out.step = DIVERGES, k2
            out.detail = (f"the record expects Kafka {version} to run variant {variant} ({why}), "
                          f"which predicts " + (said(diff2) if diff2 else
                                                "that this step is not enabled")
                          + f", but Kafka followed variant {model.variant}")
            return
        if k is not None and len(pred) >= k and (k2 is None or diff2 is None or k2 > k):
            out.detail += f" (Kafka {version} runs variant {variant}: {why})"
            if k2 is not None and diff2 is not None:
                out.step = k2
                out.detail = (f"past the divergence the release record expects at step {k} "
                              f"({out.detail}), variant {variant} predicts {said(diff2)}")
                return
            out.kind = EXPECTED
            out.detail += _rest(k, len(observations), variant,
                                k2 - 1 if k2 is not None else len(observations), stopped)
            return
    if k is not None:
        explained = _profile_explains(adapter, run, spec, doc, version,
                                      expected[0] if expected else spec.default_variant,
                                      observations, k)
        if explained is not None:
            name, why, k2 = explained
            out.kind = EXPECTED
            out.detail += (f" (Kafka {version} runs profile {name}: {why})"
                           + _rest(k, len(observations), name,
                                   k2 - 1 if k2 is not None else len(observations), stopped))
            return
    record = next((r for r in records if r.step == (k or r.step)), None)
    if record is None:
        return
    if k is None:
        if len(observations) >= record.step:
            out.kind, out.step = DIVERGES, record.step
            out.detail = (f"the record expects a divergence here ({said(record.diffs)}: "
                          f"{record.why}), but Kafka answered as the spec says: the record is "
                          f"stale")
        return
    if not record.matches(diff):
        out.detail += f" (the record for Kafka {version} expects {said(record.diffs)})"
        return
    out.kind = EXPECTED
    out.detail += f" (recorded for Kafka {version}: {record.why})"
    if record.then is None:
        if k < out.steps:
            rest = f"step {out.steps}" if out.steps == k + 1 else f"steps {k + 1}-{out.steps}"
            out.detail += f"; no variant predicts {rest}: not compared"
        return
    then = model_of(spec, record.then, doc.get("params", {}))
    pred = predict(then, initial_words(then, doc), doc["steps"])
    k3, diff3 = _first_mismatch(adapter, run, pred, observations, start=k - 1)
    if k3 is not None and diff3 is not None:
        out.kind, out.step = DIVERGES, k3
        out.detail = (f"past the divergence recorded at step {k} ({record.why}), the release's "
                      f"rule (variant {record.then}) predicts {said(diff3)}")
        return
    out.detail += _rest(k, len(observations), record.then,
                        k3 - 1 if k3 is not None else len(observations), stopped)


def _rest(k: int, driven: int, variant: str, predicted: int, stopped) -> str:
    """What the detail says of the steps after an expected divergence at step k."""
    text = ""
    if predicted > k:
        steps = f"step {predicted}" if predicted == k + 1 else f"steps {k + 1}-{predicted}"
        text += f"; {steps} compared with variant {variant}: conform"
    if predicted < driven:
        text += f"; variant {variant} does not enable step {predicted + 1}: not compared from there"
    if stopped is not None and stopped[0] > k:
        text += f"; driving stopped at step {stopped[0]} ({stopped[2]}: {stopped[1]})"
    return text


def _count_keys(out: Outcome, adapter, run, prediction, observations) -> None:
    """How many keys the driven steps compared, and why the others were not (Absent)."""
    for pred, obs in zip(prediction, observations):
        want = adapter.view(run, pred)
        for key in set(want) | set(obs):
            a, b = want.get(key), obs.get(key)
            gone = a if isinstance(a, Absent) else b if isinstance(b, Absent) else None
            if gone is None:
                out.compared += 1
            else:
                out.absent[gone.why] = out.absent.get(gone.why, 0) + 1


def _expected_by_record(adapter, run, spec, doc, initial, version, driven: int):
    """What the release record predicts for this trace: (variant, why, prediction), or None when
    the record says nothing about this release or two of its changes bear on the trace (their
    combination is no variant of the spec). A change bears on a trace when its variant's
    prediction differs there from the default's; where none does, the default's rules apply."""
    releases = adapter.expected_variants(version) if version else []
    if not releases:
        return _expected_by_profile(spec, doc, version)
    params = doc.get("params", {})
    steps = doc["steps"]
    default = spec.default_variant
    base_model = model_of(spec, default, params)
    base = predict(base_model, initial_words(base_model, doc), steps)
    bearing = []
    for variant, why in releases:
        if variant == default:
            continue
        other = model_of(spec, variant, params)
        pred = predict(other, initial_words(other, doc), steps)
        if len(pred) != len(base) or any(adapter.view(run, a) != adapter.view(run, b)
                                         for a, b in zip(pred[:driven], base[:driven])):
            bearing.append((variant, why, pred))
    if len(bearing) > 1:
        # their combination is what the release runs: its profile, if the spec declares one
        return _expected_by_profile(spec, doc, version)
    if bearing:
        return bearing[0]
    why = next((w for v, w in releases if v == default), "the default's rules")
    return default, why, base


def _expected_by_profile(spec, doc, version):
    """The release's profile (spec.profile: the default with the changes the release runs,
    composed) and its prediction, or None when the spec declares none for this release."""
    prof = spec.profile_for(version) if version and hasattr(spec, "profile_for") else None
    if prof is None:
        return None
    model = model_of(spec, prof.name, doc.get("params", {}))
    why = (f"the default with {', '.join(prof.changes)}" if prof.changes
           else "the default's rules")
    return prof.name, why, predict(model, initial_words(model, doc), doc["steps"])


def _profile_explains(adapter, run, spec, doc, version, record_variant, observations, k):
    """Where the release record's one change (or the default) does not explain what Kafka did:
    (profile, why, first step it mispredicts or None) when the release's profile predicts every
    step up to k and beyond (k None: every step), else None. The record must agree with the
    profile (its variant the default or one of the profile's changes): a record naming a change
    the profile does not compose is a wrong record, and stays a divergence."""
    expected = _expected_by_profile(spec, doc, version)
    if expected is None:
        return None
    name, why, pred = expected
    if record_variant not in (spec.default_variant, name) + spec.profiles[name].changes:
        return None
    k2, diff2 = _first_mismatch(adapter, run, pred, observations)
    if k is None:
        return (name, why, None) if k2 is None else None
    if len(pred) >= k and (k2 is None or (diff2 is not None and k2 > k)):
        return name, why, k2
    return None


def _matching_variants(adapter, run, spec, model, initial, doc, observations):
    """(every variant whose prediction Kafka matched at every step it drove, every variant that
    does not enable the trace's steps up to Kafka's first disagreement with it)."""
    names, undecided = [], []
    for v in list(spec.variants) + list(getattr(spec, "profiles", {})):
        try:
            other = model_of(spec, v, doc.get("params", {}))
            pred = predict(other, initial_words(other, doc), doc["steps"][:len(observations)])
        except SpecError:
            undecided.append(v)
            continue
        k, diff = _first_mismatch(adapter, run, pred, observations)
        if k is None:
            names.append(v)
        elif diff is None:
            undecided.append(v)
    return names, undecided


def slug(name: str) -> str:
    stem = Path(name).stem if name.endswith(".json") else name
    return re.sub(r"[^A-Za-z0-9]+", "-", stem).strip("-")[:40] or "trace"


def write_wire_log(out: Outcome, where: Path, version: str) -> Path:
    """The requests and responses of a divergent trace, beside it (or in `where`)."""
    lines = [f"# {out.trace} on Kafka {version}: {out.text()}"]
    for req, resp in out.wire:
        lines.append(f"> {req}")
        lines.append(f"< {resp}")
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("\n".join(lines) + "\n")
    out.wire_log = str(where)
    return where


def default_jobs(spec_name: str, variant: str | None, spec, root: Path) -> list[Job]:
    """Every scenario under tests/scenarios/SPEC/ and every saved counterexample of the variant
    (the spec's default variant when none is given)."""
    v = variant or spec.default_variant
    paths = sorted((root / "tests" / "scenarios" / spec_name).glob("*.json"))
    paths += sorted((root / "counterexamples" / spec_name / v).glob("*.json"))
    return [load_job(p, spec_name) for p in paths]


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.kind] = counts.get(o.kind, 0) + 1
    return counts


def coverage(spec, outcomes: list[Outcome]) -> list[tuple[str, int, dict[str, int]]]:
    """Per action of the spec: how many steps of these runs drove it, and per response code
    Kafka gave how often ("-" for a step without one); actions never driven count 0."""
    steps = {a.name: 0 for a in spec.actions}
    codes: dict[str, dict[str, int]] = {a.name: {} for a in spec.actions}
    for o in outcomes:
        for action, code in o.exercised:
            steps[action] = steps.get(action, 0) + 1
            by = codes.setdefault(action, {})
            by[code or "-"] = by.get(code or "-", 0) + 1
    return [(a, steps[a], dict(sorted(codes[a].items()))) for a in steps]


def exit_code(outcomes: list[Outcome]) -> int:
    return DIVERGED if any(o.unexpected for o in outcomes) else OK


def to_json(outcomes: list[Outcome], version: str) -> str:
    return json.dumps({"kafka": version, "traces": [
        {"trace": o.trace, "variant": o.variant, "steps": o.steps, "outcome": o.kind,
         "step": o.step, "detail": o.detail, "matches": o.matches, "seconds": round(o.seconds, 3),
         "compared": o.compared, "absent": o.absent,
         "wire_log": o.wire_log} for o in outcomes]}, indent=2)
