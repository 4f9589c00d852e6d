"""The state-graph engine: weak fairness per action instance on hand-built graphs and tiny specs
with known answers, lasso counterexamples and their replay, deadlocks agreeing with the BFS,
graph export, the progress verdicts of the shipped specs against their records."""
import json
from pathlib import Path

import networkx as nx
import pytest

import small_sizes
from kcheck.bfs import search
from kcheck.cli import main
from kcheck.graph import (build_graph, check, check_progress, fair_components, lasso_trace,
                          to_dot, to_graphml, to_json)
from kcheck.loader import load_spec
from kcheck.trace import load, replay
from kcheck.spec import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "specs"


def spec_at(name):
    return load_spec(str(SPECS / f"{name}.py"))


# ---------------------------------------------------------------------------------------------
# Fair components of hand-built graphs. Instances: bit k of a node's 'enabled' mask; an edge
# carries the instances that take it.

def graph(edges, enabled):
    H = nx.DiGraph()
    H.add_nodes_from(enabled)
    for u, v, ks in edges:
        H.add_edge(u, v, actions=tuple(ks))
    return H, lambda n: enabled[n]


def bits(*ks):
    return sum(1 << k for k in ks)


def test_fair_cycle_is_found():
    H, en = graph([("a", "b", [0]), ("b", "a", [1])], {"a": bits(0), "b": bits(1)})
    assert fair_components(H, en, bits(0, 1)) == [{"a", "b"}]


def test_cycle_that_starves_a_continuously_enabled_fair_instance_is_unfair():
    # instance 1 (Finish) is enabled at both states and its edges leave the restricted graph
    H, en = graph([("a", "b", [0]), ("b", "a", [0])], {"a": bits(0, 1), "b": bits(0, 1)})
    assert fair_components(H, en, bits(1)) == []
    assert fair_components(H, en, bits(0)) == [{"a", "b"}]


def test_cycle_with_an_intermittently_enabled_exit_is_fair_under_weak_fairness():
    # the exit (2) is enabled at b only: the cycle disables it at a, so weak fairness allows it
    H, en = graph([("a", "b", [0]), ("b", "a", [1])], {"a": bits(0), "b": bits(1, 2)})
    assert fair_components(H, en, bits(0, 1, 2)) == [{"a", "b"}]
    # enabled at both states of the cycle, the exit must be taken: no fair cycle
    H, en = graph([("a", "b", [0]), ("b", "a", [1])], {"a": bits(0, 2), "b": bits(1, 2)})
    assert fair_components(H, en, bits(0, 1, 2)) == []


def test_a_single_state_counts_when_nothing_fair_is_enabled_there():
    H, en = graph([], {"a": bits(3), "b": 0})
    assert sorted(map(sorted, fair_components(H, en, bits(0)))) == [["a"], ["b"]]
    assert fair_components(H, en, bits(3)) == [{"b"}]


def test_only_some_components_are_fair():
    edges = [("a", "b", [0]), ("b", "a", [0]), ("b", "c", [1]), ("c", "c", [1])]
    H, en = graph(edges, {"a": bits(0, 1), "b": bits(0, 1), "c": bits(1)})
    # {a, b} starves instance 1; {c} loops on it (a self-loop here stands for a taken step)
    assert fair_components(H, en, bits(1)) == [{"c"}]


def partition(scc):
    """A component array (kcheck.graph._strong_components) as a set of frozen sets."""
    out = {}
    for i, c in enumerate(scc.tolist()):
        if c >= 0:
            out.setdefault(c, set()).add(i)
    return {frozenset(C) for C in out.values()}


def test_the_array_rule_of_fairness_is_fair_components_rule():
    """_components decides fairness over arrays (_fair_flags); on the hand-built graph above
    (a self-loop counts as a step taken inside its component) it answers as fair_components."""
    import numpy as np
    from types import SimpleNamespace
    from kcheck.graph import _fair_flags
    en = np.array([[bits(0, 1)], [bits(0, 1)], [bits(1)]], dtype=np.uint8)
    sg = SimpleNamespace(enabled_bits=en, src=np.array([0, 1, 1, 2]), dst=np.array([1, 0, 2, 2]),
                         act=np.array([0, 0, 1, 1]), states=3)
    scc = np.array([0, 0, 1])                       # {a, b}, {c}
    assert _fair_flags(sg, scc, 2, bits(1)).tolist() == [False, True]
    # nothing fair is enabled at c: the behaviour may stop there, a fair component alone
    assert _fair_flags(sg, scc, 2, bits(0)).tolist() == [True, True]
    assert _fair_flags(sg, scc, 2, bits(0, 1)).tolist() == [False, True]
    assert _fair_flags(sg, scc, 2, 0).tolist() == [True, True]
    assert _fair_flags(sg, np.array([0, 0, -1]), 1, bits(1)).tolist() == [False]


@pytest.mark.parametrize("name", [n for n in SHIPPED if load_spec(n).progress])
def test_the_array_rule_agrees_with_fair_components_on_the_shipped_graphs(name):
    """Every progress property of each shipped spec at small sizes: the components that
    _strong_components and _fair_flags call fair are those fair_components finds on the same
    networkx graph."""
    import numpy as np
    from kcheck.graph import _fair_flags, _strong_components, fair_mask
    spec = load_spec(name)
    model = spec.instantiate(None, small_sizes.small_params(spec, None, lambda p: p.lo + 1))
    sg = build_graph(model)
    alive = np.ones(sg.states, dtype=bool)
    e = sg.src != sg.dst
    e[1:] &= (sg.src[1:] != sg.src[:-1]) | (sg.dst[1:] != sg.dst[:-1])
    H = nx.DiGraph()
    H.add_nodes_from(range(sg.states))
    H.add_edges_from(zip(sg.src[e].tolist(), sg.dst[e].tolist()))
    scc, count = _strong_components(sg, alive, e)
    assert count == len(partition(scc))
    assert partition(scc) == {frozenset(C) for C in nx.strongly_connected_components(H)}
    for prop in spec.progress.values():
        fair = fair_mask(model, prop)
        flags = _fair_flags(sg, scc, count, fair)
        mine = {C for C in partition(scc) if flags[scc[next(iter(C))]]}
        assert mine == {frozenset(C) for C in fair_components(H, sg.enabled, fair, sg.out_edges)}


def test_a_decomposition_is_reused_only_for_the_same_graph():
    import numpy as np
    from kcheck.graph import _strong_components
    model = load_spec("two_phase").instantiate(None, {"N": 2})
    sg = build_graph(model)
    alive = np.ones(sg.states, dtype=bool)
    e = sg.src != sg.dst
    first = _strong_components(sg, alive, e)
    assert _strong_components(sg, alive.copy(), e.copy()) is first
    fewer = alive.copy()
    fewer[sg.states // 2] = False
    ef = e & fewer[sg.src] & fewer[sg.dst]
    other = _strong_components(sg, fewer, ef)
    assert other is not first and other[0][sg.states // 2] == -1
    H = nx.DiGraph()
    H.add_nodes_from(np.flatnonzero(fewer).tolist())
    H.add_edges_from(zip(sg.src[ef].tolist(), sg.dst[ef].tolist()))
    assert partition(other[0]) == {frozenset(C) for C in nx.strongly_connected_components(H)}
    # the cache does not keep a graph's edges alive
    import gc
    import weakref
    edges = weakref.ref(sg.src)
    del sg, H
    gc.collect()
    assert edges() is None


# ---------------------------------------------------------------------------------------------
# Tiny specs with known answers

def progress_of(name, variant=None, params=None):
    spec = spec_at(name)
    model = spec.instantiate(variant, params or {})
    sg = build_graph(model)
    return spec, model, sg, check(sg)


KNOWN = [
    # spec, variant, property, verdict, lasso length, loop_index
    ("ring", None, "reaches-two", "holds", None, None),
    ("ring", None, "reaches-three", "violated", 3, 0),            # the fair cycle itself
    ("ring", None, "zero-leads-to-two-unfair", "violated", 0, 0),  # stops at once
    ("spin", None, "finishes", "holds", None, None),               # unfair cycle
    ("spin", None, "finishes-spin-fair", "violated", 2, 0),
    ("exit_cycle", "intermittent-exit", "exits", "violated", 2, 0),  # cycle with an exit
    ("exit_cycle", "steady-exit", "exits", "holds", None, None),
    ("clients", None, "served", "holds", None, None),              # per-instance fairness
    ("clients", None, "served-unfair", "violated", 1, 1),
    ("stuck", "counts", "reaches-three", "holds", None, None),
    ("stuck", "stuck", "reaches-three", "violated", 2, 2),         # stops in the deadlock
]


@pytest.mark.parametrize("name,variant,prop,verdict,length,loop", KNOWN,
                         ids=[f"{k[0]}-{k[1] or 'default'}-{k[2]}" for k in KNOWN])
def test_known_verdicts(name, variant, prop, verdict, length, loop):
    spec, model, sg, results = progress_of(name, variant)
    r = results
    assert r.status(prop) == verdict
    if verdict == "violated":
        assert len(r.lasso(prop).steps) == length
        assert r.lasso(prop).loop_index == loop
        doc = lasso_trace(sg, prop, r.lasso(prop)).to_json()
        assert doc["kind"] == "lasso" and doc["loop_index"] == loop
        rr = replay(model, json.loads(json.dumps(doc)))
        assert rr.ok, rr.message
    else:
        assert r.lasso(prop) is None
    # the spec's record of expected verdicts says the same
    expected = prop in spec.variants[model.variant].expected_violations
    assert (verdict == "violated") == expected


def test_leads_to_lasso_goes_through_a_state_where_p_holds():
    spec, model, sg, results = progress_of("clients")
    tr = lasso_trace(sg, "served-unfair", results.lasso("served-unfair"))
    assert [s.label for s in tr.steps] == ["Request(c=1)"]
    assert results.lasso("served-unfair").trigger_index == 1


def test_lasso_loop_meets_every_fair_obligation():
    _, model, sg, results = progress_of("exit_cycle", "intermittent-exit")
    tr = lasso_trace(sg, "exits", results.lasso("exits"))
    assert [s.label for s in tr.steps] == ["Forth", "Back"]


# ---------------------------------------------------------------------------------------------
# Replay of lassos: the loop must close, Q must stay false, the loop must be fair

def lasso_doc(name, prop, steps, loop_index, variant=None):
    model = spec_at(name).instantiate(variant, {})
    doc = {"kcheck_trace": 1, "spec": name, "variant": model.variant, "params": {},
           "steps": [{"action": a, "args": {}} for a in steps], "property": prop, "kind": "lasso",
           "loop_index": loop_index}
    return model, doc


def test_replay_rejects_a_loop_that_does_not_close():
    model, doc = lasso_doc("ring", "reaches-three", ["Tick", "Tick"], 0)
    r = replay(model, doc)
    assert not r.ok and "does not close" in r.message


def test_replay_rejects_an_unfair_loop():
    model, doc = lasso_doc("spin", "finishes", ["Spin", "Spin"], 0)
    r = replay(model, doc)
    assert not r.ok and "not fair" in r.message and "Finish" in r.message
    model, doc = lasso_doc("spin", "finishes-spin-fair", ["Spin", "Spin"], 0)
    assert replay(model, doc).ok


def test_replay_rejects_a_loop_where_the_goal_holds():
    model, doc = lasso_doc("ring", "reaches-two", ["Tick", "Tick", "Tick"], 0)
    r = replay(model, doc)
    assert not r.ok and "holds in the loop" in r.message


def test_replay_rejects_stopping_where_a_fair_action_is_enabled():
    model, doc = lasso_doc("ring", "reaches-three", ["Tick"], 1)
    r = replay(model, doc)
    assert not r.ok and "Tick" in r.message


def test_replay_of_a_scenario_with_a_loop_checks_only_that_it_closes():
    model, doc = lasso_doc("ring", "reaches-three", ["Tick", "Tick", "Tick"], 0)
    del doc["property"], doc["kind"]
    assert replay(model, doc).ok
    doc["loop_index"] = 1
    assert not replay(model, doc).ok


# ---------------------------------------------------------------------------------------------
# The graph agrees with the BFS: states, transitions, deadlocks and their shortest traces



def small_models():
    return [(name, v) for name in SHIPPED for v in load_spec(name).variants or [None]]


def assert_agrees(model):
    sg = build_graph(model, deadlock=True)
    res = search(model, deadlock=True)
    assert res.exhaustive
    assert sg.states == res.distinct_states
    assert sg.transitions == res.transitions
    assert sg.cut_by_bounds == res.cut_by_bounds
    d = sg.deadlock()
    f = res.found.get("deadlock")
    assert (d is None) == (f is None)
    if d is not None:
        assert d == (f.initial, f.steps)


def test_deadlock_agrees_with_bfs_on_a_stuck_counter():
    for v in ("counts", "stuck"):
        assert_agrees(spec_at("stuck").instantiate(v, {}))
    sg = build_graph(spec_at("stuck").instantiate("stuck", {}))
    init, steps = sg.deadlock()
    assert len(steps) == 2


@pytest.mark.parametrize("name,variant", small_models())
def test_graph_agrees_with_bfs_on_shipped_specs(name, variant):
    spec = load_spec(name)
    params = small_sizes.small_params(spec, variant, lambda p: p.lo + 1)
    if search(spec.instantiate(variant, params), max_states=200_000).stop_reason == "max-states":
        params = small_sizes.least_params(spec, variant)   # keep the test small
    assert_agrees(spec.instantiate(variant, params))


# ---------------------------------------------------------------------------------------------
# Shipped specs at their default bounds (the record's bounds): the default variant, and every
# variant whose record expects a progress property to be violated; 'kcheck progress all' checks
# every variant. Every lasso found replays through 'kcheck replay'.

def shipped_progress():
    out = []
    for name in SHIPPED:
        spec = load_spec(name)
        if not spec.progress:
            continue
        for v in spec.variants or [None]:
            expected = spec.variants[v].expected_violations if v else set()
            if v == spec.default_variant or v is None or expected & set(spec.progress):
                out.append((name, v))
    return out


@pytest.mark.parametrize("name,variant", shipped_progress())
def test_shipped_progress_verdicts_match_the_record_and_lassos_replay(name, variant, tmp_path):
    spec = load_spec(name)
    model = spec.instantiate(variant, {})
    sg = build_graph(model, max_nodes=2_000_000)
    wrong = []
    for prop in spec.progress.values():
        r = check_progress(sg, prop)
        expected = prop.name in spec.variants[model.variant].expected_violations
        if (r.status(prop.name) == "violated") != expected:
            wrong.append(f"{name}/{model.variant}: {prop.name} {r.status(prop.name)}, the record says "
                         f"{'violated' if expected else 'holds'}")
        if r.lasso(prop.name) is not None:
            doc = lasso_trace(sg, prop.name, r.lasso(prop.name)).to_json()
            path = tmp_path / f"{prop.name}.json"
            path.write_text(json.dumps(doc))
            assert main(["replay", str(path)]) == 0
    assert not wrong


def reference_verdict(sg, prop):
    """The plain reading of the rule on the networkx graph: a fair component of the not-Q part
    (no trimming, no shortcut for stopping states) reachable from a P-and-not-Q state."""
    from kcheck.graph import compile_condition, fair_mask, progress_conditions
    P, Q = progress_conditions(sg.model, prop)
    p_ok = compile_condition(sg.model, P, "P")(sg.words)
    q_ok = compile_condition(sg.model, Q, "Q")(sg.words)
    G = sg.graph
    fps = [int(f) for f in sg.fps.tolist()]
    H = G.subgraph([fps[i] for i in range(sg.states) if not q_ok[i]])
    comps = fair_components(H, lambda f: G.nodes[f]["enabled"], fair_mask(sg.model, prop))
    R = H.reverse(copy=True)
    R.add_edges_from(("fair cycle", f) for C in comps for f in C)
    reach = nx.descendants(R, "fair cycle") if comps else set()
    triggers = {fps[i] for i in range(sg.states) if p_ok[i] and not q_ok[i]}
    return "violated" if triggers & reach else "holds"


@pytest.mark.parametrize("name,variant", [m for m in small_models() if load_spec(m[0]).progress])
def test_progress_agrees_with_the_plain_reading_at_small_bounds(name, variant, tmp_path):
    spec = load_spec(name)
    params = small_sizes.small_params(spec, variant, lambda p: p.lo + 1)
    if search(spec.instantiate(variant, params), max_states=30_000).stop_reason == "max-states":
        params = small_sizes.least_params(spec, variant)   # keep the test small
    model = spec.instantiate(variant, params)
    sg = build_graph(model, max_nodes=30_000)
    for prop in spec.progress.values():
        r = check_progress(sg, prop)
        # 'bounded' is a holds on this graph that rests on a step cut by a search bound (issue 13)
        st = r.status(prop.name)
        assert (st if st != "bounded" else "holds") == reference_verdict(sg, prop), prop.name
        if r.lasso(prop.name) is not None:
            rr = replay(model, lasso_trace(sg, prop.name, r.lasso(prop.name)).to_json())
            assert rr.ok, rr.message


def test_every_lasso_saved_by_the_cli_replays(tmp_path, capsys):
    # tiny specs by path: the saved file names the spec, so point it back at the module
    for name in ("ring", "spin", "exit_cycle", "clients", "stuck"):
        main(["progress", str(SPECS / f"{name}.py"), "--all-variants", "--save", "--out", str(tmp_path)])
    saved = sorted(tmp_path.rglob("*.json"))
    assert len(saved) == 7   # six lassos and one deadlock
    for path in saved:
        doc = load(path)
        assert path.with_suffix(".md").exists()
        assert doc["property"] == path.stem
        model = spec_at(path.parent.parent.name).instantiate(doc["variant"], doc["params"])
        r = replay(model, doc)
        assert r.ok, (path, r.message)


# ---------------------------------------------------------------------------------------------
# Command line

def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_progress_exit_codes(capsys, tmp_path):
    ring = str(SPECS / "ring.py")
    assert run(capsys, "progress", ring)[0] == 1
    assert run(capsys, "progress", ring, "--property", "reaches-two")[0] == 0
    assert run(capsys, "progress", ring, "--all-variants")[0] == 0     # matches the record
    code, _, err = run(capsys, "progress", ring, "--property", "nope")
    assert code == 2 and "unknown progress property 'nope'" in err
    code, _, err = run(capsys, "progress", ring, "--max-nodes", "2")
    assert code == 2 and "more than 2 states" in err
    wrong = tmp_path / "ring_wrong.py"
    wrong.write_text((SPECS / "ring.py").read_text().replace(
        'violates=["reaches-three", "zero-leads-to-two-unfair"]', 'violates=["reaches-two"]'))
    code, out, _ = run(capsys, "progress", str(wrong), "--all-variants")
    assert code == 1
    assert "reaches-two holds but the record says it is violated" in out
    assert "reaches-three is violated but the record says it holds" in out


def test_progress_json(capsys):
    code, out, _ = run(capsys, "progress", str(SPECS / "spin.py"), "--json")
    doc = json.loads(out)
    assert code == 1
    p = doc["properties"]["finishes-spin-fair"]
    assert p["status"] == "violated" and p["loop_index"] == 0 and p["trace_length"] == 2
    assert doc["properties"]["finishes"]["status"] == "holds"
    assert doc["states"] == 4


def test_check_ignores_progress_names_in_the_record(capsys):
    # stuck's 'stuck' variant lists 'reaches-three' (progress) beside 'deadlock'
    assert run(capsys, "check", str(SPECS / "stuck.py"), "--all-variants")[0] == 0


def test_graph_export_formats(capsys, tmp_path):
    model = load_spec("two_phase").instantiate(None, {"N": 2})
    sg = build_graph(model)
    doc = to_json(sg)
    assert len(doc["nodes"]) == sg.states and len(doc["links"]) == sg.graph.number_of_edges()
    assert sum(n["initial"] for n in doc["nodes"]) == 1
    X = nx.parse_graphml(to_graphml(sg))
    assert X.number_of_nodes() == sg.states and X.number_of_edges() == sg.graph.number_of_edges()
    dot = to_dot(sg)
    assert dot.count(" -> ") == sg.graph.number_of_edges()
    out = tmp_path / "g.json"
    code, stdout, _ = run(capsys, "graph", "two_phase", "--param", "N=2", "--format", "json", "-o", str(out))
    assert code == 0 and json.loads(out.read_text())["states"] == sg.states
    code, _, err = run(capsys, "graph", "two_phase", "--format", "svg")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "graph", "two_phase", "--max-nodes", "5")
    assert code == 2 and "more than 5 states" in err
