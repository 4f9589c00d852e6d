"""Traces: counterexamples and scenarios share one JSON format (README, "Trace files").

A trace is re-executed step by step through the current spec: each step names an action and
its arguments; the step must be enabled, and, when the file says so, produce the expected
outcome and field values. Counterexamples also name the property they break; replaying one
checks that the last state (or step) still breaks it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kcheck.compile import Compiled, fingerprint
from kcheck.layout import initial_words, layout_of
from kcheck.spec.lang import EnumValue, FieldInfo, Model, SpecError
from kcheck.verdict import ReplayResult

# 2: traces chosen by the explicit-state core's parent rule, the least (action instance,
# parent) whatever the blocks (docs/design.md, "The core's parent rule"); the fields are those
# of version 1, whose files (chosen by the earliest block) still replay as they are
FORMAT = 2


class TraceError(SpecError):
    """A malformed or foreign trace file (exit 2)."""


@dataclass
class Step:
    label: str
    action: str
    args: dict
    outcome: Any
    changes: dict[str, tuple[Any, Any]]   # flat field name -> (before, after), shown values
    words: tuple                          # packed state after the step


@dataclass
class Trace:
    model: Model
    property: str | None
    kind: str | None
    initial: tuple
    steps: list[Step] = field(default_factory=list)
    loop_index: int | None = None

    def __len__(self):
        return len(self.steps)

    @property
    def initial_state(self) -> dict:
        return layout_of(self.model).show(layout_of(self.model).unpack_flat(self.initial))

    def to_json(self) -> dict:
        """The trace in the trace format (checker/trace_schema.json): a method, so that the
        result model (checker/verdict.py), which this module builds on, writes a trace without
        importing it."""
        m = self.model
        steps = []
        for s in self.steps:
            expect: dict[str, Any] = {}
            if s.outcome is not None:
                expect["outcome"] = s.outcome
            if s.changes:
                expect["state"] = {k: v[1] for k, v in s.changes.items()}
            args = {k: _arg_json(v) for k, v in s.args.items()}
            steps.append({"action": s.action, "args": args, "expect": expect})
        doc = {"kcheck_trace": FORMAT, "spec": _spec_ref(m.spec), "variant": m.variant,
               "params": m.params.as_dict(), "state": self.initial_state, "steps": steps}
        if self.property is not None:
            doc["property"] = self.property
            doc["kind"] = self.kind
            doc_text = property_doc(m.spec, self.property)
            if doc_text is not None:
                doc["property_doc"] = doc_text
        if self.loop_index is not None:
            doc["loop_index"] = self.loop_index
        return doc


def shown_values(model: Model, flat: list[int]) -> list:
    return [f.type.show(v) for f, v in zip(layout_of(model).fields, flat)]


def _arg_json(v):
    return v.name if isinstance(v, EnumValue) else v


class Executor:
    """Applies action instances to single packed states with the compiled code."""

    def __init__(self, model: Model, compiled: Compiled | None = None):
        self.model = model
        self.comp = compiled or Compiled(model, layout=layout_of(model))

    def enabled(self, words: tuple, k: int) -> bool:
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        g = self.comp.guards(S)[k]
        return bool(g if isinstance(g, bool) else g[0])

    def apply(self, words: tuple, k: int):
        """-> (next words, outcome value or None, within search bounds)."""
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        T, out, ok = self.comp.effects[k](S)
        o = None if out is None else int(np.broadcast_to(out, (1,))[0])
        return tuple(int(x) for x in T[:, 0]), o, bool(ok[0]) if ok is not None else True

    def invariant_holds(self, name: str, words: tuple) -> bool:
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        r = self.comp.invariants[name](S)
        return bool(np.broadcast_to(r, (1,))[0])

    def step_holds(self, name: str, pre: tuple, k: int) -> bool:
        S = np.array(pre, dtype=np.uint64).reshape(-1, 1)
        T, out, _ = self.comp.effects[k](S)
        for pname, fn in self.comp.tprops_by_instance.get(k, ()):
            if pname == name:
                return bool(np.broadcast_to(fn(S, T, out), (1,))[0])
        return True

    def deadlocked(self, words: tuple) -> bool:
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        if any(bool(np.broadcast_to(g, (1,))[0]) for g in self.comp.guards(S)):
            return False
        if self.comp.terminal is not None and bool(np.broadcast_to(self.comp.terminal(S), (1,))[0]):
            return False
        return True


def build(model: Model, prop: str | None, kind: str | None, initial: tuple, steps: list[int],
          executor: Executor | None = None, loop_index: int | None = None) -> Trace:
    """Replays instance indices from ``initial`` to produce a readable trace."""
    ex = executor or Executor(model)
    lay = layout_of(model)
    tr = Trace(model, prop, kind, tuple(initial), loop_index=loop_index)
    words = tuple(initial)
    before = shown_values(model, lay.unpack_flat(words))
    for k in steps:
        inst = model.instances[k]
        if not ex.enabled(words, k):
            raise SpecError(f"internal: step {inst.label} is not enabled while rebuilding a trace")
        words, out, _ = ex.apply(words, k)
        after = shown_values(model, lay.unpack_flat(words))
        changes = {f.name: (b, a) for f, b, a in zip(lay.fields, before, after) if a != b}
        tr.steps.append(Step(inst.label, inst.action.name, dict(inst.args),
                             model.show_outcome(out), changes, words))
        before = after
    return tr


# ---------------------------------------------------------------------------------------------
# JSON

def _spec_ref(spec) -> str:
    """How a trace names its spec: the shipped name, or the path of a user's spec module, so
    that `kcheck replay` finds it again."""
    from kcheck.spec import SHIPPED
    if spec.name in SHIPPED:
        return spec.name
    return str(Path(spec.source_file).resolve())


def relative_spec_ref(ref: str, trace_dir: str | Path) -> str:
    """A user's spec path as a trace saved in ``trace_dir`` names it: relative to the trace file
    when the two share a root, so moving the folder that holds both keeps the trace working."""
    from kcheck.spec import SHIPPED
    import os
    if ref in SHIPPED:
        return ref
    spec, here = Path(ref).resolve(), Path(trace_dir).resolve()
    try:
        # only when they share more than the root: a trace under /tmp naming a spec under /home
        # by '../../..' would break as soon as the trace alone moved
        if Path(os.path.commonpath([spec, here])) == Path(spec.anchor):
            return str(spec)
        return os.path.relpath(spec, here)
    except ValueError:   # another drive (Windows): keep the absolute path
        return str(spec)


def spec_path(ref: str, trace_file: str | Path) -> str:
    """The spec a trace names, as load_spec takes it: a shipped name, an absolute path, or a
    path relative to the trace file's folder."""
    from kcheck.spec import SHIPPED
    if ref in SHIPPED or Path(ref).is_absolute():
        return ref
    beside = Path(trace_file).parent / ref
    return str(beside) if beside.exists() or ref.endswith(".py") else ref


DEADLOCK_DOC = "no reachable state without a successor"


def property_doc(spec, name: str) -> str | None:
    """A property's one-sentence statement: a safety or progress property's docstring, or what
    deadlock freedom means."""
    prop = spec.properties.get(name) or spec.progress.get(name)
    if prop is not None:
        return prop.doc
    return DEADLOCK_DOC if name == "deadlock" else None


def traces_of(res) -> dict:
    """The readable traces of a run's counterexamples (res.found), by property; a lasso keeps
    its loop."""
    model = getattr(res, "trace_model", None) or res.model
    if not res.found:
        return {}
    # one executor for every trace, on the run's own compiled code when it is this model's
    comp = getattr(res, "compiled", None)
    ex = Executor(model, comp if comp is not None and comp.model is model else None)
    return {name: build(model, f.property, f.kind, f.initial, f.steps, executor=ex,
                        loop_index=f.loop_index)
            for name, f in res.found.items()}


# The format's versions that kcheck reads, each with its JSON Schema (checker/trace_schema.json
# is the current one); a file of another version is refused rather than half-read.
SUPPORTED_FORMATS = {1: "trace_schema_v1.json", 2: "trace_schema.json"}
_SCHEMAS: dict[int, Any] = {}


def schema(version: int = FORMAT) -> dict:
    return json.loads((Path(__file__).parent / SUPPORTED_FORMATS[version]).read_text())


def _validator(version: int):
    if version not in _SCHEMAS:
        import jsonschema
        # JSON Schema counts 1.0 as an integer and Python counts True as one: a trace is exact
        strict = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda _c, v: isinstance(v, int) and not isinstance(v, bool))
        cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=strict)
        _SCHEMAS[version] = cls(schema(version))
    return _SCHEMAS[version]


def _where(path) -> str:
    """A JSON path as a reader says it: ['steps', 2, 'args', 'm'] -> 'step 3: args.m'."""
    items = list(path)
    head = ""
    if len(items) >= 2 and items[0] == "steps" and isinstance(items[1], int):
        head, items = f"step {items[1] + 1}", items[2:]
    dotted = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in items).lstrip(".")
    if head and dotted:
        return f"{head}: {dotted}"
    return head or dotted or "the top level"


def _schema_error(path, err) -> str:
    where = _where(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        return (f"{path}: unknown key {', '.join(repr(k) for k in extra)} at {where}; "
                f"valid keys there: {', '.join(allowed)}")
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return (f"{path}: field {', '.join(repr(k) for k in missing)} is missing at {where}; "
                f"a trace has 'kcheck_trace', 'spec', 'variant', 'params', optional 'state', 'steps'")
    if err.validator == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else \
            " or ".join(err.validator_value)
        return f"{path}: {where} is {json.dumps(err.instance)[:60]}, which is not {want}"
    return f"{path}: {where}: {err.message[:200]}"


def validate(doc: Any, path: str | Path = "<trace>") -> dict:
    """Checks a trace document against the schema of its format version; -> the document.
    Every problem is a TraceError naming the file and the key."""
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: a trace file holds a JSON object with 'kcheck_trace', 'spec' "
                         f"and 'steps'")
    # a hand-written scenario may leave the version out: it is read as the current one, and
    # checked against its schema like any other
    version = doc.get("kcheck_trace", FORMAT)
    if isinstance(version, bool) or not isinstance(version, int) or version not in SUPPORTED_FORMATS:
        raise TraceError(f"{path}: trace format version {json.dumps(version)[:40]} is not one this "
                         f"kcheck reads (reads: {', '.join(map(str, SUPPORTED_FORMATS))})")
    errors = sorted(_validator(version).iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise TraceError(_schema_error(path, errors[0]))
    li = doc.get("loop_index")
    if li is not None and li > len(doc["steps"]):
        raise TraceError(f"{path}: loop_index must be a step index 0..{len(doc['steps'])}")
    return doc


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _DuplicateKey(k)
        seen[k] = v
    return seen


# The largest trace file read: a saved trace of thousands of steps is a few MB; a reader that
# takes whatever it is given grows without end on /dev/zero (and ignores Ctrl-C meanwhile).
MAX_TRACE_BYTES = 64 << 20


def load(path: str | Path) -> dict:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_TRACE_BYTES + 1)
        if len(raw) > MAX_TRACE_BYTES:
            raise TraceError(f"{path} is larger than {MAX_TRACE_BYTES >> 20} MB: not a trace file "
                             f"(kcheck's traces are a few MB at most)")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except IsADirectoryError:
        raise TraceError(f"{path} is a directory, not a trace file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"cannot read trace file {path}: {e}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as e:
        raise TraceError(f"{path}: key '{e}' appears twice in one object; a trace states each "
                         f"key once") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        # (a ValueError that is no JSONDecodeError: a number of more than 4300 digits)
        where = (f"line {e.lineno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else
                 "nested too deep" if isinstance(e, RecursionError) else
                 "a number of more digits than any parameter or field can hold")
        raise TraceError(f"{path} is not JSON ({where}); a trace file is the JSON "
                         f"written by 'kcheck check --save'") from None
    return validate(doc, path)


def _flat_expect(model: Model, expected: dict) -> dict[str, Any]:
    """Expected fields may be flat ('member_epoch[1]', 'owns[1][0]', 'request[0].epoch') or
    declared names with whole arrays (nested for 2-D) or records (some or all members)."""
    lay = model.fields
    names = {f.name for f in lay.fields}
    out = {}
    for k, v in expected.items():
        if k in names:
            out[k] = v
        elif lay.leaves(k, v) is not None:     # a whole array (nested for 2-D) or record
            for f, x in lay.leaves(k, v):
                out[f.name] = x
        else:
            raise TraceError(f"expected field '{k}' is not a field of {model.spec.name}; fields: "
                             f"{', '.join(lay.declared)}")
    return out


def _same(shown, expected) -> bool:
    if isinstance(shown, bool) or isinstance(expected, bool):
        return shown is expected or shown == expected and type(shown) is type(expected)
    return shown == expected


def replay(model: Model, doc: dict) -> ReplayResult:
    lay = layout_of(model)
    ex = Executor(model)
    if doc.get("state"):
        # a partial state: the fields left out are the spec's initial state's (initial_state)
        words = tuple(lay.pack(initial_state(model, doc["state"])))
    else:
        if len(initial_words(model)) != 1:
            raise TraceError(f"spec {model.spec.name} has {len(initial_words(model))} initial states "
                             f"for these parameters: the trace must give 'state'")
        words = initial_words(model)[0]
    initial = words
    ks: list[int] = []
    for i, st in enumerate(doc["steps"], start=1):
        args = dict(st.get("args", {}))
        try:
            k = model.instance(st["action"], args).index
        except SpecError as e:
            raise TraceError(f"step {i}: {e}") from None
        inst = model.instances[k]
        if not ex.enabled(words, k):
            return ReplayResult(False, f"step {i} ({inst.label}) is not enabled", failed_step=i)
        nxt, out, inside = ex.apply(words, k)
        exp = st.get("expect", {})
        if "outcome" in exp and model.show_outcome(out) != exp["outcome"]:
            return ReplayResult(False, f"step {i} ({inst.label}): outcome {model.show_outcome(out)}, "
                                       f"expected {exp['outcome']}", failed_step=i)
        if "state" in exp:
            if not isinstance(exp["state"], dict):
                raise TraceError(f"step {i}: expect.state must be an object of field values")
            shown = dict(zip((f.name for f in lay.fields), shown_values(model, lay.unpack_flat(nxt))))
            for name, v in _flat_expect(model, exp["state"]).items():
                if not _same(shown[name], v):
                    return ReplayResult(False, f"step {i} ({inst.label}): {name} is {shown[name]}, "
                                               f"expected {v}", failed_step=i)
        ks.append(k)
        words = nxt
    prop, kind = doc.get("property"), doc.get("kind")
    known = set(model.spec.properties) | set(model.spec.progress) | {"deadlock"}
    if prop is not None and prop not in known:
        raise TraceError(f"the trace names property '{prop}', which {model.spec.name} does not "
                         f"declare; properties: {', '.join(sorted(known))}")
    if kind is not None and prop is None:
        raise TraceError(f"the trace gives kind '{kind}' but names no property")
    tr = build(model, prop, kind, initial, ks, ex, doc.get("loop_index"))
    if tr.loop_index is not None or kind == "lasso":
        why = check_lasso(model, tr, ex)
        if why:
            return ReplayResult(False, why, tr)
        if kind == "lasso":
            return ReplayResult(True, f"reproduces: {prop} violated along a lasso of {len(ks)} steps "
                                      f"looping back to step {tr.loop_index}", tr)
    if prop is not None and kind in ("invariant", "transition", "deadlock"):
        if kind == "invariant":
            if prop not in ex.comp.invariants:
                raise TraceError(f"property '{prop}' is not an invariant of {model.spec.name}")
            if ex.invariant_holds(prop, words):
                return ReplayResult(False, f"the last state no longer violates {prop}", tr)
        elif kind == "transition":
            if not ks:
                raise TraceError("a transition-property trace needs at least one step")
            pre = tr.steps[-2].words if len(tr.steps) > 1 else initial
            if ex.step_holds(prop, pre, ks[-1]):
                return ReplayResult(False, f"the last step no longer violates {prop}", tr)
        elif not ex.deadlocked(words):
            return ReplayResult(False, "the last state is no longer a deadlock", tr)
        return ReplayResult(True, f"reproduces: {prop} violated after {len(ks)} steps", tr)
    return ReplayResult(True, f"all {len(ks)} steps reproduce with their expectations", tr)


# ---------------------------------------------------------------------------------------------
# A trace's initial state, partial or whole, and a trace upgraded to the current format and spec

def initial_state(model: Model, state: dict) -> dict:
    """The whole initial state a trace's ``state`` stands for: the fields it gives, and each
    declared field it leaves out taken from the spec's initial state (docs/writing-specs.md,
    "Scenarios"). So a scenario states only the fields it cares about, and a trace survives its
    spec gaining a field. A TraceError names what is wrong and what would be valid."""
    lay = layout_of(model)
    missing = [name for name in lay.declared if name not in state]
    unknown = [name for name in state if name not in lay.declared]
    # a trace saved before its spec's fields became arrays or records names them flat
    # (holds[3], commit_request[0], holds as one list): 'kcheck upgrade' rewrites such a file
    hint = ("; the trace names fields as they were before the spec made them arrays or "
            "records: convert it with 'kcheck upgrade FILE'")
    if unknown:
        former = former_names(lay)
        raise TraceError(f"initial state: unknown state field '{unknown[0]}'; fields: "
                         f"{', '.join(lay.declared)}"
                         f"{hint if any(f'{u}[0]' in former for u in unknown) else ''}")
    whole = {**state, **_initial_values(model, state, missing)}
    try:
        lay.pack(whole)
    except SpecError as e:
        # (the shape of a field: a flat list where the spec now has nested lists or records)
        shape = "must be a list of" in str(e) or "must be a dict of" in str(e)
        raise TraceError(f"initial state: {e}{hint if shape and former_names(lay) else ''}") from None
    return {name: whole[name] for name in lay.declared}


def _initial_values(model: Model, given: dict, missing: list[str]) -> dict:
    """The values of the ``missing`` fields in the spec's initial states: those that agree with
    every field ``given`` if there are any, else all; each field must have one value there."""
    if not missing:
        return {}
    lay = layout_of(model)
    initials = [lay.show(lay.unpack_flat(w)) for w in initial_words(model)]
    agreeing = [s for s in initials if all(s[k] == v for k, v in given.items())]
    among = agreeing or initials
    differ = [name for name in missing if any(s[name] != among[0][name] for s in among)]
    if differ:
        raise TraceError(
            f"initial state leaves out {', '.join(repr(d) for d in differ)}, which differ between "
            f"the {len(among)} initial states of {model.spec.name}/{model.variant}"
            f"{' that agree with the fields given' if agreeing else ''}: give "
            f"{'it' if len(differ) == 1 else 'them'} in 'state' (a partial state may leave out "
            f"only fields that every such initial state gives one value)")
    return {name: among[0][name] for name in missing}


def former_names(fields) -> dict[str, FieldInfo]:
    """Each flat field of a two-dimensional array or an array of records, by the name it had
    before the spec used them (issue 12): element [m][q] of a two-dimensional array ``holds``
    was ``holds[k]``, k its row-major position; member ``request`` of element c of an array of
    records ``commit`` was ``commit_request[c]``."""
    out: dict[str, FieldInfo] = {}
    for base, flat in fields.arrays.items():
        for f in flat:
            path = f.path
            if len(path) > 1 and all(isinstance(x, int) for x in path):
                out[f"{base}[{f.element}]"] = f              # holds[m][q] was holds[m*P+q]
            elif len(path) == 2 and isinstance(path[0], int) and isinstance(path[1], str):
                out[f"{base}_{path[1]}[{path[0]}]"] = f       # commit[c].request was commit_request[c]
    return out


_MISSING = object()


def _fill(node, values: dict, partial: bool = False):
    """The nested value of a compound field (lists, dicts) from its flat fields' values, _MISSING
    when one is missing; with ``partial`` a record may leave members out (an expected state may)."""
    if isinstance(node, FieldInfo):
        return values.get(node.index, _MISSING)
    if isinstance(node, list):
        out = [_fill(n, values, partial) for n in node]
        return _MISSING if any(x is _MISSING for x in out) else out
    out = {k: _fill(n, values, partial) for k, n in node.items()}
    if partial:
        out = {k: x for k, x in out.items() if x is not _MISSING}
        return out or _MISSING
    return _MISSING if any(x is _MISSING for x in out.values()) else out


def _current(fields, name: str, value) -> bool:
    """Whether ``name: value`` is already in the spec's current names and shapes."""
    return name in fields.scalars or any(f.name == name for f in fields.fields) or \
        fields.leaves(name, value) is not None


def rename_former_fields(model: Model, doc: dict) -> tuple[dict, list[str]]:
    """A trace naming a spec's fields as they were before the spec used two-dimensional arrays
    and records (former_names) -> (the document in the current names, the renames made). The
    steps, arguments and outcomes stay as they are; the names are derived from the spec as it
    is now and its storage order, so no table of old names is kept."""
    fields = model.fields
    former = former_names(fields)
    if not former:
        return doc, []
    renamed: list[str] = []

    def rename_expected(expected: dict) -> dict:
        """An expected state: a flat name is renamed; a declared name with a whole flat list
        becomes the whole current field (nested lists; records with the members given)."""
        out: dict = {}
        whole: dict[str, dict] = {}          # base -> {flat index: value}, placed at first sight
        for name, value in expected.items():
            if name in former:
                out[former[name].name] = value
                renamed.append(f"{name} -> {former[name].name}")
            elif _current(fields, name, value) or not isinstance(value, list) or f"{name}[0]" not in former:
                out[name] = value
            else:
                base = former[f"{name}[0]"].base
                for i, x in enumerate(value):
                    f = former.get(f"{name}[{i}]")
                    if f is None:
                        raise TraceError(f"{name}[{i}] is not a former field of {model.spec.name}")
                    whole.setdefault(base, {})[f.index] = x
                out.setdefault(base, _MISSING)
                renamed.append(f"{name}[...] -> {base}")
        for base, flat in whole.items():
            value = _fill(fields.compound[base], flat, partial=True)
            if value is _MISSING:
                raise TraceError(f"expected '{base}': the former fields given do not make it whole")
            out[base] = value
        return out

    new = dict(doc)
    state = doc.get("state")
    if isinstance(state, dict) and state:
        kept, flat = {}, {}
        for name, value in state.items():
            if _current(fields, name, value) or not isinstance(value, list) or f"{name}[0]" not in former:
                kept[name] = value
                continue
            for i, x in enumerate(value):
                f = former.get(f"{name}[{i}]")
                if f is None:
                    raise TraceError(f"initial state: {name}[{i}] is not a former field of "
                                     f"{model.spec.name}")
                flat[f.index] = x
            renamed.append(f"state.{name} -> {former[f'{name}[0]'].base}")
        rebuilt = {}
        for base in fields.compound:
            if base in kept or not any(f.index in flat for f in fields.arrays[base]):
                continue
            value = _fill(fields.compound[base], flat)
            if value is _MISSING:
                raise TraceError(f"initial state: the former fields of '{base}' are not all given")
            rebuilt[base] = value
        ordered = {}
        for base in fields.declared:          # the spec's order, as a saved trace has it
            if base in kept:
                ordered[base] = kept.pop(base)
            elif base in rebuilt:
                ordered[base] = rebuilt[base]
        ordered.update(kept)                  # names the spec does not know: replay reports them
        new["state"] = ordered
    steps = []
    for st in doc.get("steps", []):
        exp = st.get("expect")
        if isinstance(exp, dict) and isinstance(exp.get("state"), dict):
            st = {**st, "expect": {**exp, "state": rename_expected(exp["state"])}}
        steps.append(st)
    new["steps"] = steps
    return new, renamed


@dataclass
class Upgrade:
    """A trace brought to the current format and spec (`kcheck upgrade`): the new document, what
    changed (one phrase each, empty when the file is current), its replay through the spec."""
    doc: dict
    changes: list[str]
    replayed: ReplayResult
    state_changed: bool


def upgrade(model: Model, doc: dict) -> Upgrade:
    """``doc`` (a loaded trace of ``model``) in the current format version (FORMAT), with the
    spec's current field names (rename_former_fields) and, for a saved counterexample (a trace
    naming a property, whose state was saved whole), every field its spec has gained since,
    from the spec's initial state (initial_state). A scenario's state stays as it is written:
    a partial state is what a scenario may give. The result must replay, else TraceError."""
    changes: list[str] = []
    new, renamed = rename_former_fields(model, doc)
    if renamed:
        changes.append(f"{len(renamed)} field{'s' if len(renamed) > 1 else ''} renamed "
                       f"({renamed[0]}{', ...' if len(renamed) > 1 else ''})")
    state_changed = bool(renamed)
    state = new.get("state")
    if state and new.get("property") is not None:
        gained = [name for name in layout_of(model).declared if name not in state]
        if gained:
            new["state"] = initial_state(model, state)
            changes.append(f"filled {', '.join(gained)} from the spec's initial state")
            state_changed = True
    # a scenario without a version is read as the current one (validate): it stays without
    version = doc.get("kcheck_trace", FORMAT)
    if version != FORMAT:
        changes.append(f"format version {version} -> {FORMAT}")
        new["kcheck_trace"] = FORMAT
    validate(new, "the upgraded trace")
    r = replay(model, new)
    if not r.ok:
        raise TraceError(f"does not replay after the upgrade ({'; '.join(changes) or 'no change'}): "
                         f"{r.message}")
    return Upgrade(new, changes, r, state_changed)


def fingerprint_of(words: tuple) -> int:
    return int(fingerprint(np.array(words, dtype=np.uint64).reshape(-1, 1))[0])


# ---------------------------------------------------------------------------------------------
# A lasso, replayed: its loop closes, and it still breaks its progress property

def check_lasso(model: Model, tr: Trace, ex: Executor) -> str | None:
    """Why a replayed trace with a loop is not (or no longer) a lasso violating its progress
    property, or None. Checks that the loop closes, that Q never holds from a state where P
    holds through the loop, and that the loop is fair."""
    li = tr.loop_index
    states = [tuple(tr.initial)] + [tuple(s.words) for s in tr.steps]
    if li is None:
        raise TraceError("a lasso trace needs 'loop_index', the step its loop returns to")
    if states[li] != states[-1]:
        return (f"the loop does not close: the state after step {len(tr.steps)} differs from the "
                f"state {'at the start' if li == 0 else f'after step {li}'} (loop_index {li})")
    if tr.kind != "lasso" or tr.property is None:
        return None
    prop = model.spec.progress.get(tr.property)
    if prop is None:
        raise TraceError(f"property '{tr.property}' is not a progress property of {model.spec.name}; "
                         f"progress properties: {', '.join(model.spec.progress) or 'none'}")
    from kcheck.fairness import compile_condition, fair_mask, instances_of, progress_conditions
    P, Q = progress_conditions(model, prop)
    S = np.array(states, dtype=np.uint64).reshape(len(states), -1).T.copy()
    p_ok = compile_condition(model, P, prop.name + ".P")(S)
    q_ok = compile_condition(model, Q, prop.name + ".Q")(S)
    hits = [i for i in range(li, len(states)) if q_ok[i]]
    if hits:
        return f"Q of {prop.name} holds in the loop (after step {hits[0]}): no longer a violation"
    start = li
    while start > 0 and not q_ok[start - 1]:
        start -= 1
    if not p_ok[start:li + 1].any():
        return (f"no state from which Q of {prop.name} never holds again satisfies P: "
                f"no longer a violation")
    fair = fair_mask(model, prop)
    loop = [k for k in (model.instance(s.action, s.args).index for s in tr.steps[li:])]
    taken = 0
    for i, k in zip(range(li, len(states) - 1), loop):
        if states[i + 1] != states[i]:
            taken |= 1 << k
    for k in instances_of(fair & ~taken):
        if all(_can_step(ex, states[i], k) for i in range(li, len(states))):
            return (f"the loop is not fair: {model.instances[k].label} is enabled at every state of "
                    f"the loop and never taken")
    return None


def _can_step(ex: Executor, words: tuple, k: int) -> bool:
    if not ex.enabled(words, k):
        return False
    nxt, _out, inside = ex.apply(words, k)
    return nxt != tuple(words) or not inside


# ---------------------------------------------------------------------------------------------
# Random walks

def random_walk(model, steps: int, seed: int, start=None, executor: Executor | None = None,
                allow=None) -> dict:
    """A seeded random walk (`kcheck walk`, `kcheck conform --walks`): from an initial state,
    each step picks an action type among those with an enabled instance, every type equally
    likely, then one of its enabled instances, every one equally likely. The trace document of
    the walk. `start(state) -> bool` restricts the initial states
    (shown values, declared names), e.g. to those a conformance adapter can reach;
    `allow(state, instance) -> bool` the action instances a step may take (state: shown values,
    flat field names), e.g. to those a conformance adapter can drive from that state.

    Why the type first (issue 34): with every instance equally likely, an action with many
    instances crowds out the others (consumer_group's AdminCommit, one instance per request
    kind, took 40 % of the steps; every producer walk was fenced early by a second instance)."""
    import random
    rng = random.Random(seed)
    ex = executor or Executor(model)
    lay = layout_of(model)
    initials = [w for w in initial_words(model)
                if start is None or start(lay.show(lay.unpack_flat(w)))]
    if not initials:
        raise ValueError(f"no initial state of {model.spec.name}/{model.variant} is allowed")
    words = rng.choice(initials)
    initial, taken = words, []
    for _ in range(steps):
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        enabled = [k for k, g in enumerate(ex.comp.guards(S))
                   if bool(g if isinstance(g, (bool, np.bool_)) else np.broadcast_to(g, (1,))[0])]
        if allow is not None:
            flat = dict(zip((f.name for f in lay.fields),
                            (f.type.show(v) for f, v in zip(lay.fields, lay.unpack_flat(words)))))
            enabled = [k for k in enabled if allow(flat, model.instances[k])]
        by_type: dict[str, list[int]] = {}
        for k in enabled:
            by_type.setdefault(model.instances[k].action.name, []).append(k)
        types = sorted(by_type)
        rng.shuffle(types)
        step = None
        for name in types:
            instances = by_type[name]
            rng.shuffle(instances)
            # the first instance within the explicit search's caps (outside them, disabled)
            step = next(((k, nxt) for k in instances
                         for nxt, _, inside in (ex.apply(words, k),) if inside), None)
            if step is not None:
                break
        if step is None:
            break
        taken.append(step[0])
        words = step[1]
    doc = build(model, None, None, initial, taken, ex).to_json()
    doc["description"] = (f"kcheck walk {model.spec.name} --variant {model.variant} "
                          f"--steps {steps} --seed {seed}")
    return doc
