"""The producer spec (spec/producer.py): verdicts at the default bounds, state counts at small
bounds, shortest-trace lengths, and replay of every saved counterexample and scenario."""
import json
from pathlib import Path

import pytest

from checker.bfs import search
from checker.trace import TraceError, load, replay
from spec.producer import spec

ROOT = Path(__file__).resolve().parent.parent
COUNTEREXAMPLES = sorted((ROOT / "counterexamples" / "producer").glob("*/*.json"))
SCENARIOS = sorted((ROOT / "tests" / "scenarios" / "producer").glob("*.json"))
PROPERTIES = ["no-duplicate", "in-order", "fenced-stays-fenced", "no-hanging-transaction",
              "marker-epoch-monotonic", "acknowledged-is-appended"]

# the verdicts kcheck finds at the default bounds (spec/producer_notes.md explains each)
EXPECTED = {
    "kip360": set(),
    "pre-kip360": {"no-duplicate", "fenced-stays-fenced", "no-hanging-transaction",
                   "marker-epoch-monotonic", "acknowledged-is-appended"},
    "no-last-epoch": set(),
    "pre-kip890": {"fenced-stays-fenced", "no-hanging-transaction"},
}


def test_names_are_the_issues():
    assert list(spec.variants) == ["kip360", "pre-kip360", "no-last-epoch", "pre-kip890"]
    assert spec.default_variant == "kip360"
    assert list(spec.properties) == PROPERTIES
    assert set(spec.rules) == {"init-producer-id", "end-txn", "produce-append", "marker-append"}
    assert "every-transaction-ends" in spec.progress
    for name, v in spec.variants.items():
        assert v.expected_violations == EXPECTED[name]


@pytest.fixture(scope="module")
def default_results():
    return {v: search(spec.instantiate(v)) for v in spec.variants}


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_default_verdicts(default_results, variant):
    res = default_results[variant]
    # exhaustive, or stopped because every property is violated; never cut by a bound
    assert res.exhaustive or res.stop_reason == "all-violated"
    assert res.cut_by_bounds == 0
    for prop in PROPERTIES:
        want = "violated" if prop in EXPECTED[variant] else "holds"
        assert res.status(prop) == want, (variant, prop)


def test_default_state_counts(default_results):
    counts = {v: r.distinct_states for v, r in default_results.items()}
    assert counts == {"kip360": 26744, "pre-kip360": 1651515, "no-last-epoch": 26744,
                      "pre-kip890": 252794}


def test_shortest_counterexamples(default_results):
    lengths = {(v, p): len(f.steps) for v, r in default_results.items() for p, f in r.found.items()}
    assert lengths == {
        ("pre-kip360", "no-duplicate"): 9,
        ("pre-kip360", "marker-epoch-monotonic"): 10,
        ("pre-kip360", "no-hanging-transaction"): 10,
        ("pre-kip360", "fenced-stays-fenced"): 11,
        ("pre-kip360", "acknowledged-is-appended"): 13,
        ("pre-kip890", "no-hanging-transaction"): 10,
        ("pre-kip890", "fenced-stays-fenced"): 11,
    }


@pytest.mark.parametrize("variant,count,violated", [
    ("kip360", 656, set()),
    ("no-last-epoch", 656, set()),
    ("pre-kip890", 5718, {"no-hanging-transaction", "fenced-stays-fenced"}),
    ("pre-kip360", 28228, {"no-duplicate", "no-hanging-transaction", "fenced-stays-fenced"}),
])
def test_small_bounds(variant, count, violated):
    res = search(spec.instantiate(variant, {"records": 1, "coordinator_failovers": 0}))
    assert res.exhaustive
    assert res.distinct_states == count
    assert set(res.found) == violated


def test_seed_problem_2_needs_a_second_record():
    # one record cannot be acknowledged as the duplicate of another
    res = search(spec.instantiate("pre-kip360", {"records": 1}), ["acknowledged-is-appended"])
    assert res.exhaustive and not res.found


def test_every_violation_is_saved():
    saved = {(p.parent.name, p.stem) for p in COUNTEREXAMPLES}
    assert saved == {(v, prop) for v, props in EXPECTED.items() for prop in props}


@pytest.mark.parametrize("path", COUNTEREXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_counterexample_replays(path):
    doc = load(path)
    r = replay(spec.instantiate(doc["variant"], doc["params"]), doc)
    assert r.ok, r.message
    assert r.message.startswith(f"reproduces: {doc['property']} violated")


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_replays(path):
    doc = load(path)
    r = replay(spec.instantiate(doc["variant"], doc.get("params", {})), doc)
    assert r.ok, r.message


def test_scenarios_cover_the_issue():
    names = {p.stem for p in SCENARIOS}
    assert len(names) >= 8
    assert {"seed-problem-1", "kafka-12671", "kafka-12671-kip360", "pre-kip890-bump-retry"} <= names


def test_seed_problem_1_scenario_fails_under_kip360():
    # the pre-KIP-360 sequence cannot run today: DeleteRecords no longer drops producer state
    doc = json.loads((ROOT / "tests/scenarios/producer/seed-problem-1.json").read_text())
    doc["variant"] = "kip360"
    doc["steps"] = [s for s in doc["steps"] if s["action"] != "AddPartitionsToTxn"]
    with pytest.raises(TraceError, match="DeleteRecords"):
        replay(spec.instantiate("kip360"), doc)


def test_late_produce_is_appended_only_without_kip890():
    doc = load(ROOT / "tests/scenarios/producer/kafka-12671.json")
    r = replay(spec.instantiate("pre-kip890"), doc)
    assert r.ok and r.trace.steps[-1].outcome == "NONE"
    doc = load(ROOT / "tests/scenarios/producer/kafka-12671-kip360.json")
    r = replay(spec.instantiate("kip360"), doc)
    assert r.ok and r.trace.steps[-1].outcome == "INVALID_PRODUCER_EPOCH"
