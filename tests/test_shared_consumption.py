"""The cooperative-consumption spec (draft KIP, seed 004): its assignors, its verdicts, its state
counts at small bounds, and the replay of every saved counterexample and scenario. Verdicts cover
every safety property, the lemmas (supporting invariants for the proofs) included, and deadlock;
progress verdicts are tests/test_graph.py's (it checks every variant whose record expects one
violated)."""
import json
from pathlib import Path

import pytest

from kcheck.bfs import DEADLOCK, search
from kcheck.cli import compare_record, main
from kcheck.layout import layout_of
from kcheck.trace import load, replay
from kcheck.spec.shared_consumption import (LONG_MAX, key_range_range, key_range_round_robin,
                                            split_key_space, spec)

ROOT = Path(__file__).resolve().parent.parent
COUNTEREXAMPLES = sorted((ROOT / "counterexamples" / "shared_consumption").glob("*/*.json"))
SCENARIOS = sorted((ROOT / "tests" / "scenarios" / "shared_consumption").glob("*.json"))
N = LONG_MAX


# -- the assignors ----------------------------------------------------------------------------

def by_partition(assignment):
    out = {}
    for consumer, items in assignment.items():
        for topic, partition, rng in items:
            out.setdefault((topic, partition), []).append((consumer, rng))
    return out


def test_round_robin_reproduces_the_seeds_first_table():
    subs = {f"M{i}": ["t"] for i in range(1, 6)}
    a = key_range_round_robin({"t": 3}, subs)
    assert a == {"M1": [("t", 0, (0, N // 2 - 1))], "M2": [("t", 1, (0, N // 2 - 1))],
                 "M3": [("t", 2, (0, N))],
                 "M4": [("t", 0, (N // 2, N))], "M5": [("t", 1, (N // 2, N))]}


def test_range_style_reproduces_the_seeds_second_table():
    subs = {f"c{i}": ["t1", "t2"] for i in range(1, 6)}
    parts = by_partition(key_range_range({"t1": 2, "t2": 3}, subs))
    sharers = {tp: [c for c, _ in v] for tp, v in parts.items()}
    assert sharers == {("t1", 0): ["c1", "c2", "c3"], ("t1", 1): ["c4", "c5"],
                       ("t2", 0): ["c1", "c2"], ("t2", 1): ["c3", "c4"], ("t2", 2): ["c5"]}
    assert [r for _, r in parts[("t1", 0)]] == split_key_space(3)


def test_the_remainder_of_an_uneven_split_goes_to_the_last_range():
    assert split_key_space(3, 10) == [(0, 2), (3, 5), (6, 10)]
    assert split_key_space(2, 3) == [(0, 0), (1, 3)]
    # a hash space smaller than the shares leaves the leading ranges empty
    assert split_key_space(3, 1) == [(0, -1), (0, -1), (0, 1)]


def covers_without_overlap(ranges, hash_max):
    live = sorted((lo, hi) for lo, hi in ranges if lo <= hi)
    if not live or live[0][0] != 0 or live[-1][1] != hash_max:
        return False
    return all(b[0] == a[1] + 1 for a, b in zip(live, live[1:]))


@pytest.mark.parametrize("assignor", [key_range_round_robin, key_range_range])
@pytest.mark.parametrize("hash_max", [LONG_MAX, 3, 1])
def test_every_partition_is_covered_without_overlap(assignor, hash_max):
    for consumers in range(1, 7):
        for partitions in range(1, 5):
            subs = {f"c{i}": ["t"] for i in range(consumers)}
            parts = by_partition(assignor({"t": partitions}, subs, hash_max))
            assert set(parts) == {("t", p) for p in range(partitions)}, (consumers, partitions)
            for tp, owners in parts.items():
                assert covers_without_overlap([r for _, r in owners], hash_max), (consumers, partitions, tp)
            # every consumer is used when consumers outnumber partitions, once each
            if consumers > partitions:
                assert sorted(c for owners in parts.values() for c, _ in owners) == sorted(subs)


def test_round_robin_leaves_out_subscribers_that_do_not_allow_key_sharing():
    subs = {"a": ["t"], "b": ["t"], "c": ["t"]}
    a = key_range_round_robin({"t": 1}, subs, allow_key_share={"a", "b"})
    assert a["c"] == [] and len(a["a"]) == len(a["b"]) == 1


def test_round_robin_keeps_whole_partitions_when_consumers_do_not_outnumber_them():
    a = key_range_round_robin({"t": 2}, {"a": ["t"], "b": ["t"]})
    assert a == {"a": [("t", 0, (0, N))], "b": [("t", 1, (0, N))]}


# -- verdicts at the default bounds -------------------------------------------------------------

@pytest.fixture(scope="module")
def default_results():
    return {v: search(spec.instantiate(v)) for v in spec.variants}


def test_every_default_check_is_exhaustive(default_results):
    for v, r in default_results.items():
        assert r.exhaustive and r.cut_by_bounds == 0, v


def safety_record(variant):
    """The record's verdicts that 'kcheck check' judges; the rest are for 'kcheck progress'."""
    return {p for p in spec.variants[variant].expected_violations
            if p in spec.properties or p == DEADLOCK}


@pytest.mark.parametrize("variant", list(spec.variants))
def test_verdicts_at_default_bounds(default_results, variant):
    r = default_results[variant]
    violated = {p for p in r.properties if r.status(p) == "violated"}
    assert violated == safety_record(variant)
    assert spec.variants[variant].expected_violations - safety_record(variant) <= set(spec.progress)
    assert set(r.properties) == set(spec.properties) | {DEADLOCK}
    assert compare_record(spec, r) == []


def test_expected_verdicts_are_explained():
    # findings explain every recorded verdict, safety and progress alike
    for v in spec.variants.values():
        assert set(v.findings) >= safety_record(v.name), v.name
        assert set(v.findings) == v.expected_violations, v.name


def test_draft_holds_every_safety_property(default_results):
    r = default_results["draft"]
    for p in spec.properties:
        assert r.status(p) == "holds", p


def test_default_state_counts(default_results):
    counts = {v: r.distinct_states for v, r in default_results.items()}
    assert counts == {"draft": 230817, "no-gap-amending": 102505, "no-fetch-filter": 294652,
                      "no-purgatory": 172938, "purgatory-first-offset": 220475,
                      "keep-fetched-on-move": 1036791, "lso-drop-only": 271356}


# -- small bounds ---------------------------------------------------------------------------

SMALL = {"records": 4, "fetch_max": 2, "max_crashes": 1}


@pytest.mark.parametrize("variant,states", [
    ("draft", 4102), ("no-gap-amending", 2449), ("no-purgatory", 3148),
    ("keep-fetched-on-move", 15953)])
def test_state_counts_at_small_bounds(variant, states):
    r = search(spec.instantiate(variant, SMALL))
    assert r.exhaustive and r.distinct_states == states


def test_without_crashes_batched_transactions_deadlock_each_other():
    r = search(spec.instantiate("draft", {"records": 4, "max_crashes": 0}))
    f = r.found[DEADLOCK]
    labels = [spec.instantiate("draft", {"records": 4, "max_crashes": 0}).instances[k].action.name
              for k in f.steps]
    assert "Crash" not in labels and labels.count("Commit") == 2
    assert set(r.found) == {DEADLOCK}


def test_one_range_per_transaction_avoids_the_cycle():
    r = search(spec.instantiate("draft", {"records": 4, "max_crashes": 0, "max_ranges_to_commit": 1}))
    assert r.exhaustive and not r.found


def test_lso_drop_only_needs_a_fetch_that_stops_short_of_the_lso():
    r = search(spec.instantiate("lso-drop-only", {"fetch_max": 2}))
    assert r.exhaustive and r.status("at-least-once") == "holds"


# -- replays -----------------------------------------------------------------------------------

def test_every_violated_verdict_has_a_saved_counterexample():
    saved = {(p.parent.name, p.stem) for p in COUNTEREXAMPLES}
    expected = {(v.name, prop) for v in spec.variants.values() for prop in v.expected_violations}
    assert saved == expected


@pytest.mark.parametrize("path", COUNTEREXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_counterexample_replays(path, default_results):
    doc = load(path)
    model = spec.instantiate(doc["variant"], doc["params"])
    r = replay(model, doc)
    assert r.ok, r.message
    if doc["property"] in spec.progress:
        # a lasso from the graph engine: tests/test_graph.py finds and replays it afresh
        assert doc["kind"] == "lasso" and r.message.startswith(f"reproduces: {doc['property']} violated")
    else:
        # saved traces are the shortest the search finds at the default bounds
        assert len(doc["steps"]) == len(default_results[doc["variant"]].found[doc["property"]].steps)


def test_a_scenario_with_a_wrong_expectation_fails(tmp_path):
    doc = json.loads((ROOT / "tests/scenarios/shared_consumption/seed_stream_threads_a_b.json").read_text())
    doc["steps"][3]["expect"]["outcome"] = "NONE"
    r = replay(spec.instantiate("draft"), doc)
    assert not r.ok and r.failed_step == 4


def test_the_cli_replays_a_counterexample(capsys):
    assert main(["replay", str(ROOT / "counterexamples/shared_consumption/no-purgatory/txn-order.json")]) == 0


def test_bad_parameter_is_one_line_and_exit_2(capsys):
    assert main(["check", "shared_consumption", "--param", "consumers=9"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "consumers=9" in err


def test_range_caps_livelock_every_enabled_step_changes_nothing():
    from kcheck.trace import Executor
    doc = load(ROOT / "tests/scenarios/shared_consumption/range_cap_livelock.json")
    model = spec.instantiate("draft", doc["params"])
    r = replay(model, doc)
    assert r.ok, r.message
    ex = Executor(model)
    # every state reachable from the last one: the stable offset never moves again
    seen, todo = {r.trace.steps[-1].words}, [r.trace.steps[-1].words]
    while todo:
        words = todo.pop()
        for i in model.instances:
            if ex.enabled(words, i.index):
                nxt = ex.apply(words, i.index)[0]
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    assert 1 < len(seen) < 10
    assert {layout_of(model).show(layout_of(model).unpack_flat(w))["stable_offset"] for w in seen} == {0}
