"""Partial-order reduction (checker/por.py): the static independence relation is checked against
the spec's steps, a wrong one is caught, and a reduced search finds what the full search finds
(the same verdicts on the shipped specs at test sizes, with no more states).

The reduced search here is a plain level-by-level search over Python sets driven by the
reduction's successor hook, the way the engine calls it; the full search is the engine's."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kcheck import por
from kcheck.bfs import search
from kcheck.compile import Compiled
from kcheck.layout import initial_words, layout_of
from kcheck.loader import load_spec
from kcheck.trace import build, replay

ROOT = Path(__file__).resolve().parent.parent


def reduced_search(model, props=None, enabled=True):
    """-> (verdicts found {property: depth}, distinct states, reduction or None). Deadlocks are
    reported under "deadlock" when the spec checks them."""
    comp = Compiled(model, props, layout=layout_of(model))
    red = por.Reduction(model, comp) if enabled else None
    words = layout_of(model).words
    level = np.array(initial_words(model), dtype=np.uint64).reshape(-1, words).T.copy()
    seen = {tuple(c) for c in level.T.tolist()}
    found: dict[str, int] = {}
    depth = 0
    while level.shape[1]:
        for name, fn in comp.invariants.items():
            if name not in found and not np.broadcast_to(fn(level), (level.shape[1],)).all():
                found[name] = depth
        older = frozenset(seen)

        def fresh(T):
            return np.array([tuple(c) not in older for c in T.T.tolist()], dtype=bool)
        steps = red.successors(level, fresh) if red is not None else comp.successors(level)
        enabled_any = np.zeros(level.shape[1], dtype=bool)
        nxt = []
        for k, idx, sub, T, out, ok in steps:
            enabled_any[idx] = True
            for name, _i in comp.step_violations(k, sub, T, out, ok):
                found.setdefault(name, depth + 1)
            if ok is not None:
                T = T[:, ok]
            for col in T.T.tolist():
                if tuple(col) not in seen:
                    seen.add(tuple(col))
                    nxt.append(col)
        if model.spec.check_deadlock:
            stuck = ~enabled_any
            if comp.terminal is not None:
                stuck &= ~np.broadcast_to(comp.terminal(level), (level.shape[1],))
            if stuck.any():
                found.setdefault("deadlock", depth)
        level = np.array(nxt, dtype=np.uint64).reshape(-1, words).T.copy()
        depth += 1
    return found, len(seen), red


def _full_verdicts(model, props):
    r = search(model, props, deadlock=model.spec.check_deadlock)
    assert r.exhaustive or r.stop_reason == "all-violated"
    return r


SMALL = [
    ("two_phase", None, {"N": 3}),
    ("two_phase", "commit-without-prepares", {"N": 3}),
    ("producer", None, {}),
    ("classic_group", None, {"members": 2}),
    ("classic_group", "kip726-dynamic", {"members": 2, "max_generation": 3}),
    # four records, not six: 36,373 states instead of 230,817, the same verdicts (every property
    # holds), and the reduction still stores fewer (34,116 for most single properties); one
    # property at a time took 63 s of CPU at six
    ("shared_consumption", None, {"records": 4}),
    ("consumer_group", None, {"max_epoch": 2}),
]
# one property at a time is a search per property: the larger specs' runs are marked slow
QUICK = [c for c in SMALL if c[0] in ("two_phase", "classic_group")]
SLOW = [pytest.param(*c, marks=pytest.mark.slow) for c in SMALL if c not in QUICK]


@pytest.mark.parametrize("name,variant,params", QUICK + SLOW)
def test_every_property_alone_keeps_its_verdict(name, variant, params):
    """One property at a time (each has its own visible steps; the properties that see the same
    steps share one reduced search, the search each would get alone): the reduced search violates
    it exactly when the full search does, never deeper than the full search's states allow, and
    stores at most as many states."""
    model = load_spec(name).instantiate(variant, params)
    # one full search answers for every property: each one's verdict and shortest trace do not
    # depend on the others being checked beside it
    full = search(model)
    # properties that see the same steps get the same reduction, hence the same reduced search:
    # one search per set of visible steps answers for each of its properties as it would alone
    alike: dict[bytes, list[str]] = {}
    for prop in model.spec.properties:
        visible = por.Reduction(model, Compiled(model, [prop], layout=layout_of(model))).visible
        alike.setdefault(visible.tobytes(), []).append(prop)
    for props in alike.values():
        found, states, _red = reduced_search(model, props)
        for prop in props:
            assert (prop in found) == (prop in full.found), (name, variant, prop)
            if full.exhaustive:
                assert states <= full.distinct_states, (name, prop)
            if prop in found:
                # a reduced trace may be longer, never shorter than the shortest
                assert found[prop] >= len(full.found[prop].steps), (name, prop)


@pytest.mark.parametrize("name,variant,params", SMALL)
def test_all_properties_keep_their_verdicts(name, variant, params):
    model = load_spec(name).instantiate(variant, params)
    full = search(model)
    found, states, _red = reduced_search(model)
    assert set(found) - {"deadlock"} == set(full.found) - {"deadlock"}
    assert states <= full.distinct_states


def test_unreduced_hook_is_the_full_search():
    """Without the reduction the scaffold counts what the engine counts (it is a fair judge)."""
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    found, states, _ = reduced_search(model, enabled=False)
    assert states == 288 and not found


def test_reduction_pays_where_steps_are_invisible():
    """classic_group's single-owner reads only `owned`: at two members the rebalance steps that
    leave it alone (CompleteJoin, EnforceRebalance, ...) are expanded one set at a time, and the
    reduced search stores 631 of the 2,118 states (measured), with the same verdict."""
    model = load_spec("classic_group").instantiate(None, {"members": 2})
    full = search(model, ["single-owner"])
    found, states, red = reduced_search(model, ["single-owner"])
    assert red.candidates and red.reduced > 0
    assert (states, full.distinct_states) == (631, 2118)
    assert ("single-owner" in found) == ("single-owner" in full.found)


def test_consumer_group_steps_of_different_members_never_commute():
    """A finding, kept as a test: in consumer_group every step of one member reads or writes a
    field another member's steps write (the commit slots' ghosts `commit_owner`, the shared
    `target_owner`, `group_epoch`), so no pair of steps of different members is independent and
    the reduction has nothing to work with there."""
    model = load_spec("consumer_group").instantiate(None, {"members": 3})
    comp = Compiled(model, [], layout=layout_of(model))
    acc = por.accesses(model, comp)

    def member(i):
        inst = model.instances[i]
        actor = inst.action.actors[0].format(**inst.args) if inst.action.actors else ""
        return actor if actor.startswith("member") else None
    pairs = [(t, u) for t in range(len(acc)) for u in range(t + 1, len(acc))
             if member(t) and member(u) and member(t) != member(u)]
    assert len(pairs) == 1925
    assert not any(por.independent(acc[t], acc[u]) for t, u in pairs)


@pytest.mark.parametrize("name,params,props", [
    ("consumer_group", {"max_epoch": 3}, ["join-accepted"]),
    ("consumer_group", {"members": 3}, ["no-zombie-commit"]),
    ("classic_group", {"members": 2}, ["single-owner"]),
    ("producer", {}, []),
])
def test_independence_is_checked_on_the_spec(name, params, props):
    """The dynamic check passes on the shipped specs: candidate ample steps commute with every
    other enabled step, are invisible, and their dependents are disabled where they are taken."""
    model = load_spec(name).instantiate(None, params)
    comp = Compiled(model, props, layout=layout_of(model))
    red = por.Reduction(model, comp)
    assert red.candidates
    assert por.verify(model, comp, red, sample=400) >= 200   # classic_group m=2: 222 to depth 12


def test_a_wrong_independence_relation_is_caught(monkeypatch):
    """Were every pair of steps declared independent, the check names two that do not commute
    (or one that changes an invariant) instead of letting the search drop states."""
    monkeypatch.setattr(por, "independent", lambda a, b: True)
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    comp = Compiled(model, [], layout=layout_of(model))
    red = por.Reduction(model, comp)
    with pytest.raises(por.PorError, match="do not commute|enables or disables"):
        por.verify(model, comp, red, sample=300)


def test_a_step_counted_invisible_that_is_not_is_caught(monkeypatch):
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    comp = Compiled(model, layout=layout_of(model))
    red = por.Reduction(model, comp)
    assert not red.candidates          # every two_phase step is visible to `consistent`
    red.visible[:] = False
    monkeypatch.setattr(por, "independent", lambda a, b: True)
    red2 = por.Reduction.__new__(por.Reduction)
    red2.__dict__.update(red.__dict__)
    red2.candidates = [(np.array([k]), np.zeros(0, dtype=np.int64)) for k in range(len(model.instances))]
    red2._blocked = lambda S: [True] * len(red2.candidates)
    with pytest.raises(por.PorError):
        por.verify(model, comp, red2, sample=300)


def test_symmetry_and_por_together_are_refused():
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    with pytest.raises(por.SpecError, match="--no-symmetry"):
        por.prepare(model, Compiled(model, layout=layout_of(model)), True, symmetry=object())


# ---------------------------------------------------------------------------------------------
# The engine's hook (checker/bfs.py search(..., por=True), kcheck check --por)

def test_engine_reduces_as_the_reference_search_does():
    model = load_spec("classic_group").instantiate(None, {"members": 2})
    r = search(model, ["single-owner"], por=True)
    assert r.por is not None and r.exhaustive
    assert r.distinct_states == reduced_search(model, ["single-owner"])[1] == 631
    assert r.status("single-owner") == search(model, ["single-owner"]).status("single-owner")


@pytest.mark.parametrize("variant,prop", [("kafka-14016", "cooperative-keeps-owned"),
                                          ("kip726-dynamic", "revoke-before-assign")])
def test_engine_counterexample_replays_unreduced(variant, prop):
    """A violation found with the reduction on is a real trace of the unreduced spec (here as
    long as the shortest; the output only promises it is not shorter)."""
    model = load_spec("classic_group").instantiate(variant, {"members": 2, "max_generation": 3})
    full = search(model, [prop])
    red = search(model, [prop], por=True)
    assert red.por is not None and red.distinct_states <= full.distinct_states
    f = red.found[prop]
    assert len(f.steps) >= len(full.found[prop].steps)
    assert replay(model, build(model, f.property, f.kind, f.initial, f.steps).to_json()).ok


def _kcheck(*args):
    return subprocess.run([sys.executable, "-m", "kcheck.cli", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_cli_por_statistics_and_refusals(tmp_path):
    on = _kcheck("check", "classic_group", "--param", "members=2", "--property", "single-owner",
                 "--por")
    assert on.returncode == 0, on.stderr
    out = " ".join(on.stdout.split())
    assert "631 distinct states" in out
    assert "partial-order reduction: 112 of 631 states expanded with an ample set" in out
    assert "a trace found may be longer than the shortest" in out
    # symmetry first: consumer_group declares one
    both = _kcheck("check", "consumer_group", "--param", "members=3", "--por", "--max-depth", "1")
    assert both.returncode == 2 and "add --no-symmetry" in both.stderr
    assert "Traceback" not in both.stderr
    ck = _kcheck("check", "classic_group", "--param", "members=2", "--por", "--property",
                 "single-owner", "--checkpoint", str(tmp_path / "ck"))
    assert ck.returncode == 2 and "leave out --por" in ck.stderr and "Traceback" not in ck.stderr
