"""The explicit-state core (checker/explore.py): the parent rule "least (action instance, parent)"
does not depend on how a level is cut into blocks, so the single process, the state graph,
Spark's slices and Spark's owners report the same traces, byte for byte, at sizes where every
level spans many blocks; the stopping rule, the deduplication and the action coverage."""
import json

import numpy as np
import pytest

from kcheck import bfs, explore, graph, native, spark, spark_owner
from kcheck.compile import Compiled, fingerprint
from kcheck.layout import initial_words, layout_of
from kcheck.loader import load_spec
from kcheck.trace import build
from kcheck.verdict import Counterexample
from spark_support import MASTER, sc  # noqa: F401 (sc is a fixture)

GRID = '''
"""A walk on a grid: every state (x, y) is reached by an IncX step and an IncY step."""
from kcheck.spec.lang import Int, Spec

spec = Spec("grid", __doc__)
spec.param("n", 6, lo=1, hi=30, doc="the grid's last row and column")


@spec.state
def state(p):
    return {"x": Int(0, p.n), "y": Int(0, p.n)}


@spec.init
def init(p):
    yield {"x": 0, "y": 0}


@spec.action()
def IncX(s, p):
    s.require(s.x < p.n)
    s.x = s.x + 1


@spec.action()
def IncY(s, p):
    s.require(s.y < p.n)
    s.y = s.y + 1


@spec.terminal
def never(s, p):
    return s.x > p.n


@spec.invariant("not-in-the-corner")
def not_in_the_corner(s, p):
    """The walk never reaches the far corner."""
    return (s.x < p.n) | (s.y < p.n)


@spec.transition_property("no-step-into-the-corner")
def no_step_into_the_corner(pre, post, action, args, outcome, p):
    """No step ends in the far corner."""
    return (post.x < p.n) | (post.y < p.n)


spec.variant("default", "as written", default=True,
             violates=["not-in-the-corner", "no-step-into-the-corner", "deadlock"])
'''


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    path = tmp_path_factory.mktemp("grid") / "grid.py"
    path.write_text(GRID)
    return load_spec(str(path)).instantiate(None, {"n": 12})


def producer():
    # 3,632 states in 19 levels: with blocks of 16 states every level past the first few spans
    # many blocks, and a state is reached from several (the old rule, "the earliest block
    # first", reported other traces for in-order and window-ends-at-the-batch here)
    return load_spec("producer").instantiate("pre-kip360-in-flight")


# producer's searches, each done once for the tests that compare against it (at blocks of 16
# states a search costs a few seconds of CPU; smaller blocks, which the grid covers, cost more)
SMALL_BLOCK = 16


@pytest.fixture(scope="module")
def producer_searches():
    """-> (model, the search in one block a level, the search in blocks of SMALL_BLOCK)."""
    model = producer()
    return model, bfs.search(model), bfs.search(model, block=SMALL_BLOCK)


def rendered(model, found) -> dict[str, str]:
    """Each counterexample as the JSON trace a user gets (the bytes compared between engines)."""
    return {p: json.dumps(build(model, p, f.kind, f.initial, f.steps).to_json(), sort_keys=True)
            for p, f in sorted(found.items())}


def summary(r):
    return (r.distinct_states, r.transitions, r.depth, r.exhaustive, r.stop_reason, list(r.fired),
            r.cut_by_bounds, r.cut_only_states)


def test_the_parent_is_the_least_action_instance_whatever_the_blocks(grid):
    """Every state (x, y) with x > 0 is reached by IncX (instance 0) and, with y > 0, by IncY
    (instance 1) from a state elsewhere in the level: the path kept is IncY up to the row, then
    IncX, at every block size (one state a block included)."""
    n = 12
    want = [1] * n + [0] * n
    for block in (1, 2, 5, 1 << 15):
        r = bfs.search(grid, block=block)
        assert r.found["not-in-the-corner"].steps == want, block
        assert r.found[bfs.DEADLOCK].steps == want, block
        assert len(r.found["no-step-into-the-corner"].steps) == 2 * n


@pytest.mark.parametrize("block", [1, 3, 16])
def test_the_block_size_changes_no_figure_and_no_trace(grid, block):
    """The grid at every block size (one state a block included); producer, where the old
    rule's traces differed, in blocks of 16 below."""
    whole, cut = bfs.search(grid), bfs.search(grid, block=block)
    assert summary(cut) == summary(whole)
    assert rendered(grid, cut.found) == rendered(grid, whole.found)


def test_the_block_size_changes_no_figure_and_no_trace_of_producer(producer_searches):
    model, whole, cut = producer_searches
    assert summary(cut) == summary(whole)
    assert rendered(model, cut.found) == rendered(model, whole.found)


def test_a_level_sorted_in_parts_keeps_the_least_parent(monkeypatch, producer_searches):
    model, _, once = producer_searches
    monkeypatch.setattr(explore, "COMPACT_AT", 1)
    parts = bfs.search(model, block=SMALL_BLOCK)
    assert summary(parts) == summary(once)
    assert rendered(model, parts.found) == rendered(model, once.found)


def _graph_traces(sg, model, found):
    """The state graph's BFS-tree path to each counterexample's end (the pre-state and the
    instance, for a transition property)."""
    from kcheck.trace import Executor
    ex = Executor(model)
    index = {int(f): i for i, f in enumerate(sg.fps)}
    out = {}
    for p, f in found.items():
        words = tuple(f.initial)
        steps = f.steps[:-1] if f.kind == "transition" else f.steps
        for k in steps:
            words = ex.apply(words, k)[0]
        fp = int(fingerprint(np.array(words, dtype=np.uint64).reshape(-1, 1))[0])
        initial, path = sg.trace_to(index[fp])
        out[p] = type(f)(p, f.kind, initial, path + (f.steps[-1:] if f.kind == "transition" else []))
    return out


@pytest.mark.parametrize("spec,block", [("grid", 3), ("grid", 16), ("producer", SMALL_BLOCK)])
def test_the_state_graph_keeps_the_search_s_parents(grid, producer_searches, spec, block):
    # producer in blocks of 16 only: its levels span many blocks already (blocks of 3 cost twice
    # the CPU and take no other path; the grid takes both)
    model, single = (grid, bfs.search(grid)) if spec == "grid" else producer_searches[:2]
    sg = graph.build_graph(model, block=block)
    assert (sg.states, sg.transitions, sg.max_depth) == \
           (single.distinct_states, single.transitions, single.depth)
    assert rendered(model, _graph_traces(sg, model, single.found)) == rendered(model, single.found)
    if bfs.DEADLOCK in single.found:
        initial, steps = sg.deadlock()
        assert (initial, steps) == (single.found[bfs.DEADLOCK].initial,
                                    single.found[bfs.DEADLOCK].steps)


def _brute_first(fp, runs, actions):
    """The rule spelled out: per fingerprint, the least (action, run), in fingerprint order."""
    run = np.repeat(np.arange(len(runs)), runs)
    order = np.lexsort((run, actions, fp))
    first = np.ones(len(fp), dtype=bool)
    first[1:] = fp[order[1:]] != fp[order[:-1]]
    return order[first]


@pytest.mark.parametrize("top", [0, 58, 63])
def test_first_of_each_keeps_the_least_action_then_the_earliest_run(top):
    """Runs of sorted distinct fingerprints (small ones: the exact sort; large ones: the hash
    path), and fingerprints that share their top bits (the fast sort's order is checked and
    redone where it is wrong): the same choice as the rule written out with lexsort."""
    rng = np.random.default_rng(7)
    universe = rng.choice(1 << 20, size=400, replace=False).astype(np.uint64)
    if top:
        universe |= np.uint64(1) << np.uint64(top)
    runs_fp, runs_act = [], []
    for _ in range(9):
        f = np.sort(rng.choice(universe, size=120, replace=False))
        runs_fp.append(f)
        runs_act.append(rng.integers(0, 5, size=len(f)).astype(np.int16))
    fp, act = np.concatenate(runs_fp), np.concatenate(runs_act)
    runs = [len(f) for f in runs_fp]
    got = explore.first_of_each(fp, None, runs, act, action_bits=3)
    assert got.tolist() == _brute_first(fp, runs, act).tolist()


def test_the_stopping_rule_replayed_is_the_search_s():
    """replay_stop (Spark's slices explore past the single process's stop) says where the loop
    of Pending stops: a level decides what it found from the next level on."""
    # an invariant at depth 3 and a transition property of 5 steps: all violated at level 5
    decided = {"a": explore.decided_at("invariant", 3), "b": explore.decided_at("transition", 5)}
    assert explore.replay_stop(decided, ["a", "b"], False, 9, None) == ("all-violated", 5)
    # a deadlock found expanding level 4 (4 steps) is decided at level 5
    decided[explore.DEADLOCK] = explore.decided_at("deadlock", 4)
    assert explore.replay_stop(decided, ["a", "b"], True, 9, None) == ("all-violated", 5)
    assert explore.replay_stop(decided, ["a", "b"], True, 9, 2) == ("max-depth", 2)
    assert explore.replay_stop({"a": 3}, ["a", "b"], False, 7, None) == (None, 7)
    # no property asked: the search never stops for being all violated
    assert explore.replay_stop({}, [], False, 4, None) == (None, 4)


def test_action_coverage(grid):
    r = bfs.search(grid, [], deadlock=False)
    n = 12
    assert r.exhaustive and explore.fired_per_action(grid, r.fired) == {"IncX": n * (n + 1),
                                                                        "IncY": n * (n + 1)}
    assert r.never_fired() == [] and r.disabled() == []
    first = bfs.search(grid, [], deadlock=False, max_depth=0)
    assert first.never_fired() == ["IncX", "IncY"]


# ---------------------------------------------------------------------------------------------
# Spark: the same traces, byte for byte, where every level spans many blocks


@pytest.mark.spark
@pytest.mark.slow
def test_spark_slices_report_the_single_process_traces(sc, grid, producer_searches):
    # two slices: the tie-break between slices' traces is exercised (tests/test_spark.py runs
    # 1, 2 and 5)
    model, _, at_16 = producer_searches
    for model, block, single in ((grid, 4, bfs.search(grid, block=4)), (model, SMALL_BLOCK, at_16)):
        dist = spark.check(model, master=MASTER, slices=2, block=block)
        assert not dist.distribution.in_driver
        assert max(dist.distribution.levels) > 2 * block     # levels of several blocks
        assert (dist.distinct_states, dist.depth, dist.stop_reason) == \
               (single.distinct_states, single.depth, single.stop_reason)
        assert rendered(model, dist.found) == rendered(model, single.found)
        assert dist.never_fired() == single.never_fired()
        # steps per action: the slices' sums, duplicated work included
        assert all(d >= s for d, s in zip(dist.fired, single.fired))


@pytest.mark.spark
@pytest.mark.slow
def test_spark_owners_report_the_single_process_traces_and_coverage(sc, grid, producer_searches):
    model, _, at_16 = producer_searches
    for model, block, single in ((grid, 4, bfs.search(grid, block=4)), (model, SMALL_BLOCK, at_16)):
        own = spark_owner.check(model, master=MASTER, owners=2, prefix_depth=2, block=block)
        assert own.distribution.spark_levels >= 3
        assert summary(own) == summary(single)        # each state expanded once: exact counts
        assert rendered(model, own.found) == rendered(model, single.found)


def test_a_trace_of_format_version_1_still_replays():
    """Version 2 of the trace format (checker/trace.py FORMAT) marks traces chosen by the least
    (action instance, parent); a version-1 file, whose trace the earliest block chose, still
    reads and replays. Here the same counterexample both ways: the version-1 trace (ProduceRequest
    before LeaderFailover) and the saved version-2 one, equally long."""
    from pathlib import Path

    from kcheck.trace import FORMAT, load, replay
    root = Path(__file__).resolve().parent
    v1 = load(root / "traces_v1" / "out-of-order-only-after-a-gap.json")
    v2 = load(root.parent / "counterexamples" / "producer" / "pre-kip360" /
              "out-of-order-only-after-a-gap.json")
    assert (v1["kcheck_trace"], v2["kcheck_trace"]) == (1, 2) and FORMAT == 2
    model = load_spec("producer").instantiate(v1["variant"], v1["params"])
    for doc in (v1, v2):
        r = replay(model, doc)
        assert r.ok, r.message
    assert len(v1["steps"]) == len(v2["steps"]) and v1["steps"] != v2["steps"]
    # the search reports the version-2 trace
    f = bfs.search(model, ["out-of-order-only-after-a-gap"], deadlock=False).found[
        "out-of-order-only-after-a-gap"]
    assert [model.instances[k].action.name for k in f.steps] == [s["action"] for s in v2["steps"]]


# ---------------------------------------------------------------------------------------------
# The single process's speed-ups (issue 16) keep every figure and trace

def test_steps_that_leave_their_state_unchanged_are_dropped_without_changing_anything():
    """two_phase repeats receipts (a step to the state it leaves): the core drops those steps
    before its sorts unless a hook must see every step; with a hook (which keeps them) and
    without, the same counts, steps per action and counterexamples."""
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    seen = []

    def hook(start, T, parent, action, fp):
        seen.append(int((T[0] == ex.frontier[0, start + parent]).sum()))

    runs = []
    for on_block in (None, hook):
        comp = Compiled(model, list(model.spec.properties), layout=layout_of(model))
        ex = explore.Explorer(model, comp, list(model.spec.properties), True, block=64,
                              counterexample=Counterexample)
        ex.start([tuple(w) for w in initial_words(model)])
        ex.run(on_block=on_block)
        runs.append((ex.visited.n, ex.transitions, ex.depth, ex.fired,
                     {n: (f.kind, f.initial, f.steps) for n, f in ex.found.items()}))
    assert runs[0] == runs[1]
    assert sum(seen) > 0           # there were such steps, and the hook saw them


def test_first_of_each_in_chunks_when_a_state_leaves_few_bits():
    """States of 48 bits that are their own fingerprint, more candidates than 16 free bits can
    number: the first occurrence of each, in order, as np.unique finds it."""
    rng = np.random.default_rng(11)
    n = 300_000
    fp = (rng.integers(0, 1 << 12, n).astype(np.uint64) << np.uint64(36)) | \
        rng.integers(0, 4, n).astype(np.uint64)
    _, first = np.unique(fp, return_index=True)
    assert explore.first_of_each(fp, None).tolist() == first.tolist()


def test_a_level_of_wide_one_word_states_is_merged_in_few_runs():
    """A one-word state of 56 bits leaves 8 bits for (action instance, run): the level merges
    its runs before there are more than the tag can number, and keeps the least (action
    instance, parent) of each state and only the states not seen before."""
    rng = np.random.default_rng(5)
    visited = explore.Visited(0)
    seen = np.sort(rng.choice(1 << 10, 50, replace=False).astype(np.uint64) << np.uint64(46))
    visited.add(seen, None)
    level = explore.Level(visited, False, action_bits=6, one_word=True, state_bits=56)
    assert level.max_runs == 4
    all_fp, all_parent, all_action = [], [], []
    for b in range(13):
        fp = rng.choice(1 << 10, 40).astype(np.uint64) << np.uint64(46)
        action = np.sort(rng.integers(0, 40, 40)).astype(np.int16)   # instance order
        parent = rng.integers(0, 8, 40)
        T = fp[None, :].copy()
        level.add(T, T[0], parent.copy(), action, b * 8)
        assert len(level.fp) <= 4
        all_fp.append(fp), all_parent.append(parent + b * 8), all_action.append(action)
    _assert_the_level_keeps_the_rule(level, seen, all_fp, all_parent, all_action)


def _assert_the_level_keeps_the_rule(level, seen, all_fp, all_parent, all_action):
    """The level's states are those not seen before, in order, each with its least (action
    instance, parent), as the rule written out with lexsort gives them (first gathered wins a
    tie); returns the action instances the level kept."""
    fp, parent, action = (np.concatenate(x) for x in (all_fp, all_parent, all_action))
    order = np.lexsort((np.arange(len(fp)), parent, action, fp))
    first = np.ones(len(order), dtype=bool)
    first[1:] = fp[order[1:]] != fp[order[:-1]]
    want = order[first]
    want = want[~np.isin(fp[want], seen)]
    got_fp, words, got_parent, got_action = level.finish()
    assert got_fp.tolist() == fp[want].tolist() and words[0].tolist() == got_fp.tolist()
    assert got_parent.tolist() == parent[want].tolist()
    assert got_action.tolist() == action[want].tolist()
    return got_action


@pytest.mark.parametrize("scratch", [False, True])
@pytest.mark.parametrize("act_dtype", [np.int16, np.int32])
def test_a_level_collapsed_in_one_pass_keeps_the_rule(monkeypatch, act_dtype, scratch):
    """One-word states gathered over many blocks and collapsed every block (the compiled pass
    that keeps each state's least (action instance, run), drops the visited states and merges
    into the level so far): the states not seen before, in order, each with its least (action
    instance, parent), as the rule written out with lexsort gives them; a state reached again
    at the same least action instance from a later block keeps the earlier block's parent. The
    same with the search's kept array for the sort keys (reused by every collapse)."""
    monkeypatch.setattr(explore, "COMPACT_AT", 1)
    rng = np.random.default_rng(17)
    visited = explore.Visited(0)
    seen = np.sort(rng.choice(1 << 12, 300, replace=False).astype(np.uint64) << np.uint64(20))
    visited.add(seen, None)
    kept = native.Scratch() if scratch else None
    level = explore.Level(visited, False, action_bits=4, one_word=True, state_bits=32,
                          scratch=kept)
    all_fp, all_parent, all_action = [], [], []
    for b in range(20):
        fp = rng.choice(1 << 12, 60).astype(np.uint64) << np.uint64(20)
        action = np.sort(rng.integers(0, 3, 60)).astype(act_dtype)    # few instances: ties
        parent = rng.integers(0, 8, 60)
        T = fp[None, :].copy()
        level.add(T, T[0], parent.copy(), action, b * 8)
        all_fp.append(fp), all_parent.append(parent + b * 8), all_action.append(action)
    got_action = _assert_the_level_keeps_the_rule(level, seen, all_fp, all_parent, all_action)
    assert got_action.dtype == act_dtype


def test_the_kept_sort_array_grows_and_is_reused():
    """The search's array for the collapse's keys: a request no larger than it is a view of
    it (no new mapping), a larger one replaces it."""
    kept = native.Scratch()
    a = kept.words(100_000)
    assert len(a) == 100_000 and a.dtype == np.uint64
    assert np.shares_memory(kept.words(70_000), a)
    b = kept.words(300_000)
    assert len(b) == 300_000 and not np.shares_memory(a, b)
    assert np.shares_memory(kept.words(5), b)


def test_every_invariant_at_once_finds_what_each_finds_alone():
    """The invariants compiled together (shared field reads) report, per invariant, the first
    violating state that each one's own function reports."""
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 3})
    comp = Compiled(model, layout=layout_of(model))
    r = bfs.search(model, max_depth=7)
    ex = explore.Explorer(model, comp, list(model.spec.properties), False, counterexample=Counterexample)
    ex.start([tuple(w) for w in initial_words(model)])
    levels = []
    ex.run(max_depth=7, on_level=lambda d, fp: levels.append(ex.frontier))
    S = np.concatenate(levels, axis=1)
    names = list(comp.invariant_names)
    alone = {n: comp.first_violation(n, S, 16) for n in names}
    assert comp.first_violations(names, S, 16) == {n: i for n, i in alone.items() if i is not None}
    assert any(i is not None for i in alone.values()) and r.found


@pytest.mark.parametrize("nkeys", [0, 2])
def test_the_visited_set_answers_as_a_search_of_every_state_seen(nkeys):
    """The compiled membership test and merge (checker/native.py) against the rule written out:
    levels of sorted distinct states, fingerprints shared by distinct states (told apart by
    their keys), queries in order and out of order; the set stays sorted and complete."""
    rng = np.random.default_rng(3)
    visited = explore.Visited(nkeys)
    seen: set = set()
    for level in range(12):
        fp = rng.integers(0, 40 if nkeys else 1 << 62, 300, dtype=np.uint64)
        keys = rng.integers(0, 3, (nkeys, 300), dtype=np.uint64) if nkeys else None
        cols = [fp] + ([] if keys is None else list(keys))
        uniq = sorted(set(zip(*(c.tolist() for c in cols))))
        fp = np.array([u[0] for u in uniq], dtype=np.uint64)
        keys = np.array([u[1:] for u in uniq], dtype=np.uint64).T.copy() if nkeys else None
        want = np.array([u not in seen for u in uniq], dtype=bool)
        assert visited.absent(fp, keys).tolist() == want.tolist()
        if level % 3 == 2:    # out of order, as a reduction's block asks
            shuffle = rng.permutation(len(fp))
            got = visited.absent(fp[shuffle], None if keys is None else keys[:, shuffle])
            assert got.tolist() == want[shuffle].tolist()
        visited.add(fp[want], None if keys is None else keys[:, want])
        seen |= {u for u, new in zip(uniq, want) if new}
        stored = visited.sorted_fp
        assert visited.n == len(seen) and (stored[1:] >= stored[:-1]).all()
        got = set(zip(stored.tolist(), *(visited.keys[r, :visited.n].tolist()
                                          for r in range(nkeys))))
        assert got == seen


def test_first_of_each_in_a_block_is_the_first_occurrence():
    """A block of one-word states (the compiled packing and reading of the sorted words): the
    first occurrence of each, in order, as np.unique finds it; and for states too wide for the
    positions' bits, the general sort gives the same."""
    rng = np.random.default_rng(13)
    for top in (20, 44, 62):
        fp = rng.integers(0, 1 << 12, 5000).astype(np.uint64) << np.uint64(top - 12)
        _, first = np.unique(fp, return_index=True)
        assert explore.first_of_each(fp, None).tolist() == first.tolist()


COMPARISONS = '''
"""Fields of integers compared with constants every way round, in range and out of it."""
from kcheck.spec.lang import Array, Bool, Enum, Int, Spec, Forall

spec = Spec("comparisons", __doc__)
Colour = Enum("Colour", "red green blue")


@spec.state
def state(p):
    return {"a": Int(-3, 5), "b": Int(2, 9), "c": Colour, "f": Bool, "cs": Array(Colour, 2)}


@spec.init
def init(p):
    yield {"a": 0, "b": 2, "c": Colour.red, "f": False, "cs": [Colour.red, Colour.red]}


@spec.invariant("mixed")
def mixed(s, p):
    """Comparisons of every kind, joined so that each counts."""
    return ((s.a == -3) | (s.a != 5) & (s.a < 0)) & ((s.a <= -4) | (7 > s.a) & (1 <= s.a)) | \\
        ((s.b < 10) & (s.b == 9) | (4 == s.b) | (s.b >= 3) & (s.b > 8) | (s.a >= 5)) & \\
        ((s.c == Colour.blue) | (Colour.green != s.c) & s.f)


@spec.invariant("no-pair")
def no_pair(s, p):
    """No slot red while another is blue (the pairwise form the compiler folds)."""
    return Forall(range(2), lambda i: Forall(range(2), lambda j: ~((s.cs[i] == Colour.red) &
                                                                   (s.cs[j] == Colour.blue))))
'''


def test_comparisons_on_a_field_s_bits_are_the_interpreter_s(tmp_path):
    """A field compared with a constant is compiled on its bits where they lie in the word
    (masked, not shifted nor widened), and a conjunction of not(p and q) over every pair as
    not(any p and any q): on every state of the fields' ranges, the compiled invariants say what
    the reference interpreter says."""
    import itertools

    from kcheck.reference import evaluate
    path = tmp_path / "comparisons.py"
    path.write_text(COMPARISONS)
    model = load_spec(str(path)).instantiate(None, {})
    lay = layout_of(model)
    comp = Compiled(model, layout=lay)
    ranges = [range(f.type.lo, f.type.hi + 1) for f in lay.fields]
    flats = list(itertools.product(*ranges))
    S = np.array([lay.pack_flat(v) for v in flats], dtype=np.uint64).T.copy()
    for prop in model.invariants:
        got = np.broadcast_to(comp.invariants[prop.name](S), (S.shape[1],))
        want = [bool(evaluate(model.invariant_expr(prop), list(v))) for v in flats]
        assert got.tolist() == want, prop.name
    body = comp.source.split("def inv_1")[1].split("\ndef ")[0]
    assert body.count("~") == 1     # folded: not four pairwise terms


def test_a_one_word_layout_places_the_fields_steps_change_most_lowest(monkeypatch):
    """A state of one word is its own fingerprint and orders its level: its fields are placed
    by how often a pilot search's steps change them (two_phase: the resource managers' states
    lowest, their prepared messages below the coordinator's record of them); wider states keep
    the declaration order. A layout is a bijection: the same counts, verdicts and trace lengths
    as the declaration order, which a pilot of no states leaves."""
    from kcheck import layout
    spec = load_spec("two_phase")
    model = spec.instantiate("commit-without-prepares", {"N": 5})
    lay = layout.layout_of(model)
    shift = {f.name: lay.shift[f.index] for f in lay.fields}
    assert shift["rm_state[0]"] == 0 and shift["msg_prepared[0]"] < shift["tm_prepared[0]"]
    decl = layout.Layout(model.fields)
    assert [decl.shift[f.index] for f in decl.fields] == sorted(decl.shift)
    assert lay.shift != decl.shift
    monkeypatch.setattr(explore, "PILOT_STATES", 0)
    plain = spec.instantiate("commit-without-prepares", {"N": 5})
    assert plain is not model and layout.layout_of(plain).shift == decl.shift
    a, b = bfs.search(model), bfs.search(plain)
    assert (a.distinct_states, a.transitions, a.depth) == (b.distinct_states, b.transitions, b.depth)
    assert {p: len(f.steps) for p, f in a.found.items()} == \
        {p: len(f.steps) for p, f in b.found.items()}
    assert a.found and all(build(model, p, f.kind, f.initial, f.steps) for p, f in a.found.items())
    group = load_spec("consumer_group")
    wide = group.instantiate(group.default_variant, {})
    assert layout.layout_of(wide).words > 1
    assert layout.layout_of(wide).shift == layout.Layout(wide.fields).shift


def test_a_layout_being_computed_is_not_seen_by_another_thread(monkeypatch):
    """While the pilot search runs (compiled against the declaration order), another thread that
    asks for that model's layout (Spark's owners run as threads) waits for the layout itself:
    it once took the pilot's order, packed its states with it and counted 345 states where
    there are 288."""
    import threading
    from kcheck import layout
    model = load_spec("two_phase").instantiate("lamport", {"N": 4})
    inside, seen = threading.Event(), []
    other = threading.Thread(target=lambda: (inside.wait(), seen.append(layout.layout_of(model))))
    real = explore.flip_counts

    def pilot(m, lay):
        inside.set()
        other.join(timeout=1.0)     # the other thread asks while the pilot runs
        return real(m, lay)
    monkeypatch.setattr(explore, "flip_counts", pilot)
    other.start()
    mine = layout.layout_of(model)
    other.join()
    assert seen == [mine] and seen[0] is mine
    assert mine.shift != layout.Layout(model.fields).shift
