"""Conformance in every state: every transition of a spec's reachable graph, executed once on
Kafka's own coordinator code in-process (``kcheck conform SPEC --exhaustive``).

The graph is the explicit engine's (checker/graph.build_graph: the same expansion, the same
states and edges as `kcheck check` and `kcheck graph`). It is walked depth-first from every
initial state along its BFS tree (a state is entered from its BFS parent only, so the stack is
as deep as the graph, not as long as a depth-first path, and a state's coordinator state is that
of its shortest path), with the adapter driving an in-process coordinator (checker/conform/inprocess.py)
exactly as it drives a broker: the same ``begin`` (the setup prefix, for each initial state),
``drive`` (an action -> requests -> observations) and ``view`` (a spec step -> the same keys).
Each transition is executed once, from its parent's coordinator state:

- a stack frame per state on the DFS path holds a snapshot of the coordinator (the shard's
  SnapshotRegistry, plus what the harness keeps outside timeline structures: the timers, the
  executor's tasks, the assignor's script) and a copy of the adapter's client state
  (``adapter.clone_state`` where the adapter has one);
- before each out-edge but the first, the frame's snapshot is restored (SnapshotRegistry.
  revertToSnapshot): exact for what the consumer group protocol keeps (every ConsumerGroup and
  offset structure is a timeline structure), as tests/test_conform_exhaustive.py checks against
  a fresh replay of the path;
- an adapter whose coordinator state a revert does not restore says so (``revert_is_exact =
  False``: the classic protocol's ClassicGroup keeps plain fields): its frames hold a mark in
  the harness's journal instead, and a state is rebuilt (``Harness.rebuild``: reverted to the
  root's snapshot, taken before the group existed, and the path's requests replayed from there,
  as on a fresh shard; tests/test_conform_classic_exhaustive.py checks it against a fresh
  replay);
- the transition by which the BFS tree reaches a state pushes that state's frame; every other
  one is checked and undone.

A transition is **client-side** when the adapter says its action sends nothing that changes the
coordinator (``Adapter.client_side_actions``): it is driven (the adapter's client state follows
it) and counted apart. One the adapter cannot drive (``action_reason``, or NotDrivable while
driving) is **not mappable**: counted with its reason, and not followed (the state it leads to is
reached by another path or left unchecked, and counted as such).

A divergence is reported as the shortest trace to it: the BFS-tree path to the transition's
parent (StateGraph.trace_to) and the transition, confirmed by replaying it in-process from a
fresh group; when that replay conforms (Kafka's state on the DFS path differs from the one on
the shortest path in something the spec does not model) the DFS path is reported instead, and
the report says so. The trace is in the standard format (checker/trace.py), so
``kcheck conform SPEC TRACE --kafka V`` replays it on a real broker."""
from __future__ import annotations

import time
from array import array

import numpy as np

from kcheck.conform.driver import (Job, NotDrivable, SpecStep, TimerFired, compare, field_values,
                                   model_of, run_trace, said)
from kcheck.conform.inprocess import (Harness, InProcessBroker, InProcessRun, coordinator_settings,
                                      in_process_adapter)
from kcheck.graph import build_graph
from kcheck.layout import layout_of
from kcheck.trace import Executor, build
from kcheck.verdict import DIVERGES, EXPECTED, Divergence, ExhaustiveResult


def _clone(state: dict) -> dict:
    """The adapter's client state, copied one level deep (its lists and dicts are mutated in
    place by `drive`; what they hold is replaced, never mutated)."""
    return {k: (v.copy() if isinstance(v, (list, dict, set)) else v) for k, v in state.items()}


_NONE = -(1 << 63)


class _Frame:
    __slots__ = ("state", "snapshot", "client", "next", "end", "dirty")

    def __init__(self, state, snapshot, client, edges):
        self.state, self.snapshot, self.client = state, snapshot, client
        self.next, self.end = edges          # the state's out-edges: indices next..end-1
        self.dirty = False


def answerable_outcomes(model) -> dict[str, list[str]]:
    """action -> every outcome its response can give, in the outcome enum's order: the constant
    leaves of each instance's respond expression, through every If (an If whose condition is a
    constant keeps the branch taken, as lang.If builds it). Actions that respond nothing are left
    out."""
    out: dict[str, set] = {}

    def leaves(e, into):
        if e.op == "const":
            into.add(int(e.args[0]))
        elif e.op == "ite":
            leaves(e.args[1], into)
            leaves(e.args[2], into)
        else:       # an outcome computed otherwise: every value of its enum
            into.update(range(len(e.enum.values)) if e.enum is not None else ())
    for inst in model.instances:
        if inst.outcome is not None:
            leaves(inst.outcome, out.setdefault(inst.action.name, set()))
    return {a: [model.show_outcome(v) for v in sorted(vals)]
            for a, vals in sorted(out.items(), key=lambda x: [a.name for a in model.spec.actions].index(x[0]))}


def edge_outcomes(model, sg) -> array:
    """Every edge's outcome value (_NONE: the action answers nothing), computed per action instance over all its edges
    at once (the compiled effect on a block of states), not one state at a time."""
    out = np.full(len(sg.src), _NONE, dtype=np.int64)
    if not len(sg.src):
        return array("q")
    order = np.argsort(sg.act, kind="stable")
    acts = sg.act[order]
    cuts = np.flatnonzero(np.diff(acts)) + 1
    for part in np.split(order, cuts):
        k = int(sg.act[part[0]])
        for chunk in np.array_split(part, max(1, len(part) // 65536)):
            _, o, _ = sg.compiled.effects[k](sg.words[:, sg.src[chunk]])
            if o is not None:
                out[chunk] = np.broadcast_to(o, (len(chunk),))
    return array("q", out.tobytes())


def run_exhaustive(spec, adapter, harness: Harness, variant: str | None = None,
                   params: dict | None = None, max_divergences: int = 1,
                   progress=None, graph=None) -> ExhaustiveResult:
    """Walk the reachable graph of SPEC (VARIANT, PARAMS) on the in-process coordinator."""
    adapter = in_process_adapter(adapter)
    wrong = sorted(k for k, v in coordinator_settings(adapter.broker_settings).items()
                   if harness.settings.get(k) != v)
    if wrong:
        raise ValueError(f"the harness was started without the {spec.name} adapter's settings "
                         f"({', '.join(wrong)}): Harness(version, settings=adapter.broker_settings)")
    exact = getattr(adapter, "revert_is_exact", True)
    clone = getattr(adapter, "clone_state", _clone)
    # driver.model_of: the model the adapter's own rules run in (the classic leader's assignor)
    # is this one, compiled once
    model = model_of(spec, variant, params or {})
    t0 = time.perf_counter()
    sg = graph if graph is not None else build_graph(model)
    res = ExhaustiveResult(spec.name, model.variant, harness.version, model.params.as_dict(),
                           states=sg.states, transitions=len(sg.src),
                           graph_seconds=time.perf_counter() - t0,
                           answerable=answerable_outcomes(model))
    ex = Executor(model, sg.compiled)
    lay = layout_of(model)
    outcomes = edge_outcomes(model, sg)
    acts, dsts = array("i", sg.act.astype(np.int32).tobytes()), array("q", sg.dst.astype(np.int64).tobytes())
    parents = array("q", sg.parent.astype(np.int64).tobytes())
    vias = array("i", sg.via.astype(np.int32).tobytes())
    starts = array("q", np.searchsorted(sg.src, np.arange(sg.states + 1)).astype(np.int64).tobytes())
    client_side = set(getattr(adapter, "client_side_actions", ()))
    # the order a state's out-edges are taken in: as the graph lists them; when states are
    # rebuilt, client-side edges first (they leave the coordinator as it is, so the edges after
    # them need no rebuild)
    if exact or not client_side:
        order = range(len(sg.src))
    else:
        coordinator = np.array([model.instances[k].action.name not in client_side
                                for k in range(len(model.instances))], dtype=bool)[sg.act]
        order = array("q", np.lexsort((coordinator, sg.src)).astype(np.int64).tobytes())
    broker = InProcessBroker(harness)
    visited = bytearray(sg.states)
    calls0 = harness.calls
    t1 = time.perf_counter()
    shown: dict[int, dict] = {}

    def values(i: int) -> dict:
        v = shown.get(i)
        if v is None:
            if len(shown) > 4096:
                shown.clear()
            v = shown[i] = field_values(model, sg.state_words(i))
        return v

    reasons: dict[int, str | None] = {}

    def reason_of(k: int) -> str | None:
        if k not in reasons:
            inst = model.instances[k]
            reasons[k] = adapter.action_reason(inst.action.name, dict(inst.args))
        return reasons[k]

    for root in range(sg.initial_count):
        if visited[root]:
            continue
        initial = lay.show(lay.unpack_flat(sg.state_words(root)))
        why = adapter.initial_reason(model.params, initial)
        if why:
            res.initial_not_drivable[why] = res.initial_not_drivable.get(why, 0) + 1
            continue
        base = harness.snapshot()
        run = InProcessRun(broker, "x", model.params, model=model, actions=[])
        try:
            adapter.begin(run, initial)
        except NotDrivable as e:
            harness.revert(base)
            harness.forget(base)
            res.initial_not_drivable[str(e)] = res.initial_not_drivable.get(str(e), 0) + 1
            continue
        visited[root] = 1

        def save():
            return harness.snapshot() if exact else harness.mark()

        def restore(f):
            if exact:
                harness.revert(f.snapshot)
            elif harness.mark() != f.snapshot:
                # the journal holds every change: unchanged since the frame's mark (the last
                # edge was client-side, or answered nothing new), nothing to rebuild
                harness.rebuild(base, f.snapshot)
        stack = [_Frame(root, save(), clone(run.state), (starts[root], starts[root + 1]))]
        while stack and len(res.divergences) < max_divergences:
            f = stack[-1]
            if f.next == f.end:
                stack.pop()
                continue
            e = order[f.next]
            k, dst = acts[e], dsts[e]
            f.next += 1
            why = reason_of(k)
            if why:
                res.not_mappable[why] = res.not_mappable.get(why, 0) + 1
                continue
            if f.dirty:
                restore(f)
                run.state = clone(f.client)
            f.dirty = True
            inst = model.instances[k]
            args = dict(inst.args)
            out = outcomes[e]
            step = SpecStep(len(stack), inst.label, inst.action.name, args,
                            model.show_outcome(None if out == _NONE else out), values(f.state), values(dst))
            try:
                observed = adapter.drive(run, inst.action.name, args)
            except NotDrivable as e:
                res.not_mappable[str(e)] = res.not_mappable.get(str(e), 0) + 1
                continue
            except TimerFired:
                res.timing += 1
                continue
            except Exception as e:     # a request failed outright: report it as a divergence
                _record(res, _divergence(spec, adapter, harness, model, sg, ex, stack, k,
                                         f"broken: {type(e).__name__}: {e}", order))
                continue
            res.checked += 1
            if inst.action.name in client_side:
                res.client_side += 1
            if step.outcome is not None:
                seen = res.answered.setdefault(inst.action.name, {})
                seen[step.outcome] = seen.get(step.outcome, 0) + 1
            diff = compare(adapter.view(run, step), observed)
            if diff:
                _record(res, _divergence(spec, adapter, harness, model, sg, ex, stack, k,
                                         said(diff), order))
                continue
            # follow the BFS tree: a state is entered once, from its BFS parent by the instance
            # that reached it first (StateGraph.parent / via), so the stack is never deeper than
            # the graph and each state's coordinator state is that of its shortest path
            if not visited[dst] and parents[dst] == f.state and vias[dst] == k:
                visited[dst] = 1
                stack.append(_Frame(dst, save(), clone(run.state),
                                    (starts[dst], starts[dst + 1])))
            if progress is not None and res.checked % 2000 == 0:
                progress(res, time.perf_counter() - t1)
        harness.revert(base)
        harness.forget(base)
        if len(res.divergences) >= max_divergences:
            break
    res.unreached = sg.states - sum(visited) if not res.divergences else 0
    res.seconds = time.perf_counter() - t1
    res.harness_calls = harness.calls - calls0
    return res


def conforming_variants(spec, adapter, harness: Harness, params: dict | None = None,
                        progress=None) -> list[ExhaustiveResult]:
    """``--exhaustive --which-variant``: the walk in every variant of the spec on this release;
    a variant conforms when every transition of its graph does (no divergence, and none that
    the release record explains by another variant's rules)."""
    out = []
    for variant in spec.variants:
        res = run_exhaustive(spec, adapter, harness, variant, params, max_divergences=1)
        out.append(res)
        if progress is not None:
            progress(res)
    return out


def conforms_everywhere(res: ExhaustiveResult) -> bool:
    """Every transition checked conforms: no divergence, none expected by the release record."""
    return not res.divergences and res.expected_count == 0


def _record(res: ExhaustiveResult, d: Divergence) -> None:
    if d.expected:
        res.expected_count += 1
        if len(res.expected) < 5:
            res.expected.append(d)
    else:
        res.divergences.append(d)


def _divergence(spec, adapter, harness, model, sg, ex, stack, k: int, detail: str,
                order) -> Divergence:
    """The divergence at instance k from the top frame's state: the shortest trace to it if an
    in-process replay of that trace diverges too, else the DFS path."""
    initial, steps = sg.trace_to(stack[-1].state)
    doc = build(model, None, None, initial, steps + [k], executor=ex).to_json()
    snap = harness.snapshot()
    try:
        out = run_trace(InProcessBroker(harness), adapter, spec, Job("shortest", doc),
                        harness.version, run_class=InProcessRun)
    finally:
        harness.revert(snap)
    if out.kind in (DIVERGES, EXPECTED):
        return Divergence(out.step, out.detail, doc, True, out.kind == EXPECTED)
    # the DFS path: the root of the stack and the instance of each frame's last edge taken
    path = [int(sg.act[order[f.next - 1]]) for f in stack[:-1]] + [k]
    doc = build(model, None, None, sg.state_words(stack[0].state), path, executor=ex).to_json()
    return Divergence(len(path), detail, doc, False)
