"""The conformance driver: replays a spec's traces on a real Kafka through the spec's Adapter and
compares, step by step, what Kafka shows with what the spec predicts.

The spec is the oracle. For each trace the driver computes the spec's prediction (every step's
outcome and the state after it) in the trace's variant and in every other variant of the spec,
then lets the adapter drive Kafka through the trace's actions. The adapter never sees a
prediction while it drives: it turns an action into requests from its own client-side state
(what Kafka's responses told it), and returns what Kafka showed in the adapter's observation
vocabulary (``observe``); ``view`` maps a predicted step into the same vocabulary. A key that
both give and that differs is a divergence.

Outcomes of one trace: conforms; diverges at step k (spec said X, Kafka said Y); diverges as the
record expects (the release runs another variant's rule, which predicts exactly what Kafka
said); not drivable (why); or broken (a request failed outright: the reason).
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
from kcheck.trace import Executor, TraceError, load
from kcheck.spec.lang import SpecError

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
    lost_responses adds previous_epoch); None when the state does not fit it."""
    if not doc.get("state"):
        return model_initial_words(model)[0]
    try:
        return tuple(layout_of(model).pack(doc["state"]))
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
    # divergences the variants cannot predict (a trace of a pre-fix variant whose step the fixed
    # release answers as another action would): (trace path suffix, first release, last release
    # or None, step, why)
    expected_divergences: list[tuple[str, str, str | None, int, str]] = []
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
# Outcomes

CONFORMS, DIVERGES, EXPECTED, NOT_DRIVABLE, BROKEN, TIMING = (
    "conforms", "diverges", "diverges as expected", "not drivable", "broken", "timing divergence")


@dataclass
class Outcome:
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

    @property
    def unexpected(self) -> bool:
        return self.kind in (DIVERGES, BROKEN)

    def text(self) -> str:
        if self.kind == CONFORMS:
            return f"conforms{': ' + self.detail if self.detail else ''}"
        if self.kind in (DIVERGES, EXPECTED):
            return f"{self.kind} at step {self.step}: {self.detail}"
        where = f" at step {self.step}" if self.step else ""
        return f"{self.kind}{where}: {self.detail}"


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_fmt, v)) + "]"
    return str(v)


def compare(expected: dict, observed: dict) -> list[tuple[str, Any, Any]]:
    """(key, spec said, Kafka said) for every key both give that differs."""
    return [(k, expected[k], observed[k]) for k in observed if k in expected and expected[k] != observed[k]]


def _first_mismatch(adapter, run, prediction: list[SpecStep], observations: list[dict]):
    """(step index, mismatches) of the first step whose observations differ from the prediction;
    (None, []) if none differs; (k, None) if the prediction ends (not enabled) at step k."""
    for k, obs in enumerate(observations):
        if k >= len(prediction):
            return k + 1, None
        diff = compare(adapter.view(run, prediction[k]), obs)
        if diff:
            return k + 1, diff
    return None, []


def said(diff) -> str:
    return "; ".join(f"{key}: spec said {_fmt(a)}, Kafka said {_fmt(b)}" for key, a, b in diff)


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


def run_trace(broker, adapter: Adapter, spec, job: Job, version: str | None,
              all_variants: bool = False, progress=None, run_class=None) -> Outcome:
    """Replay one trace on the broker and judge it. ``run_class`` (a TraceRun) decides where
    the adapter's connections go: the broker's address (TraceRun), or the in-process
    coordinator (inprocess.InProcessRun, with an inprocess.InProcessBroker)."""
    t0 = time.monotonic()
    doc = job.doc
    try:
        model = model_of(spec, doc.get("variant"), doc.get("params", {}))
    except SpecError as e:
        raise TraceError(f"{job.name}: {e}") from None
    n = len(doc["steps"])
    try:
        initial = (tuple(layout_of(model).pack(doc["state"])) if doc.get("state")
                   else model_initial_words(model)[0])
        prediction = predict(model, initial, doc["steps"])
    except SpecError as e:
        raise TraceError(f"{job.name}: {e}") from None
    if len(prediction) < n:
        k = len(prediction) + 1
        return Outcome(job.name, model.variant, n, NOT_DRIVABLE, k,
                       f"the trace does not replay in the spec (step {k} is not enabled)")
    for st, pred in zip(doc["steps"], prediction):
        want = st.get("expect", {}).get("outcome")
        if "outcome" in st.get("expect", {}) and pred.outcome != want:
            return Outcome(job.name, model.variant, n, NOT_DRIVABLE, pred.index,
                           f"the trace does not replay in the spec (step {pred.index}: outcome "
                           f"{pred.outcome}, the trace expects {want})")
    initial_state = layout_of(model).show(layout_of(model).unpack_flat(initial))
    why = adapter.initial_reason(model.params, initial_state)
    if why:
        return Outcome(job.name, model.variant, n, NOT_DRIVABLE, None, why)
    for i, st in enumerate(doc["steps"], start=1):
        why = adapter.action_reason(st["action"], st.get("args", {}))
        if why:
            return Outcome(job.name, model.variant, n, NOT_DRIVABLE, i, why)

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
            # after a divergence, keep driving only when every variant's verdict is wanted
            if not all_variants and compare(adapter.view(run, prediction[i - 1]), observations[-1]):
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

    out = Outcome(job.name, model.variant, n, CONFORMS, seconds=time.monotonic() - t0)
    k, diff = _first_mismatch(adapter, run, prediction, observations)
    if all_variants:
        out.matches, out.undecided = _matching_variants(adapter, run, spec, model, initial, doc,
                                                        observations)
    if k is None and stopped is not None:
        out.kind, out.step, out.detail = stopped[2], stopped[0] or None, stopped[1]
        out.seconds = time.monotonic() - t0
        out.wire = run.wire_log
        return out
    if k is not None and diff is None:
        out.kind, out.step, out.detail = BROKEN, k, "the spec does not enable this step"
    elif k is not None:
        out.kind, out.step, out.detail = DIVERGES, k, said(diff)
    expected = _expected_by_record(adapter, run, spec, doc, initial, version, len(observations))
    if expected is not None:
        variant, why, pred = expected
        seen = observations if k is None else observations[:k]
        k2, diff2 = _first_mismatch(adapter, run, pred, seen)
        if k is None and variant != model.variant and k2 is not None:
            out.kind, out.step = DIVERGES, k2
            out.detail = (f"the record expects Kafka {version} to run variant {variant} ({why}), "
                          f"which predicts " + (said(diff2) if diff2 else
                                                "that this step is not enabled")
                          + f", but Kafka followed variant {model.variant}")
        elif k is not None and diff is not None and k2 is None and len(pred) >= k:
            out.kind = EXPECTED
            out.detail += f" (Kafka {version} runs variant {variant}: {why})"
    if out.kind == DIVERGES and version:
        v = version_key(version)
        for suffix, lo, hi, step, why in adapter.expected_divergences:
            if (Path(job.name).as_posix().endswith(suffix) and out.step == step and v is not None
                    and version_key(lo) <= v and (hi is None or v <= version_key(hi))):
                out.kind = EXPECTED
                out.detail += f" (recorded for Kafka {version}: {why})"
    out.seconds = time.monotonic() - t0
    out.wire = run.wire_log
    return out


def _expected_by_record(adapter, run, spec, doc, initial, version, driven: int):
    """What the release record predicts for this trace: (variant, why, prediction), or None when
    the record says nothing about this release or two of its changes bear on the trace (their
    combination is no variant of the spec). A change bears on a trace when its variant's
    prediction differs there from the default's; where none does, the default's rules apply."""
    releases = adapter.expected_variants(version) if version else []
    if not releases:
        return None
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
        return None
    if bearing:
        return bearing[0]
    why = next((w for v, w in releases if v == default), "the default's rules")
    return default, why, base


def _matching_variants(adapter, run, spec, model, initial, doc, observations):
    """(every variant whose prediction Kafka matched at every step it drove, every variant that
    does not enable the trace's steps up to Kafka's first disagreement with it)."""
    names, undecided = [], []
    for v in spec.variants:
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


def exit_code(outcomes: list[Outcome]) -> int:
    return DIVERGED if any(o.unexpected for o in outcomes) else OK


def to_json(outcomes: list[Outcome], version: str) -> str:
    return json.dumps({"kafka": version, "traces": [
        {"trace": o.trace, "variant": o.variant, "steps": o.steps, "outcome": o.kind,
         "step": o.step, "detail": o.detail, "matches": o.matches, "seconds": round(o.seconds, 3),
         "wire_log": o.wire_log} for o in outcomes]}, indent=2)
