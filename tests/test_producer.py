"""The producer spec (spec/producer.py): verdicts at the default bounds, state counts at small
bounds, shortest-trace lengths, and replay of every saved counterexample and scenario. Verdicts
cover every safety property, the lemmas (supporting invariants for the proofs) included; progress
verdicts are tests/test_graph.py's (it checks every variant whose record expects one violated)."""
import json
from pathlib import Path

import pytest

from kcheck import explore
from kcheck.bfs import search
from kcheck.layout import initial_words, layout_of
from kcheck.trace import TraceError, load, replay
from kcheck.spec.producer import spec

ROOT = Path(__file__).resolve().parent.parent
COUNTEREXAMPLES = sorted((ROOT / "counterexamples" / "producer").glob("*/*.json"))
SCENARIOS = sorted((ROOT / "tests" / "scenarios" / "producer").glob("*.json"))
# the issue's properties; the spec's other properties are lemmas
PROPERTIES = ["no-duplicate", "in-order", "fenced-stays-fenced", "no-hanging-transaction",
              "marker-epoch-monotonic", "acknowledged-is-appended", "fenced-only-when-overtaken",
              "aborted-commit-is-fenced", "new-records-in-order", "out-of-order-only-after-a-gap"]

# the safety verdicts kcheck finds at the default bounds (spec/producer_notes.md explains each):
# the issue's properties, then the lemmas that fall with them
EXPECTED = {
    "kip360": set(),
    "pre-kip360": {"no-duplicate", "fenced-stays-fenced", "no-hanging-transaction",
                   "out-of-order-only-after-a-gap",
                   "marker-epoch-monotonic", "acknowledged-is-appended",
                   "appended-retry-is-rejected", "no-log-start-movement",
                   "open-transaction-is-unfinished", "prepared-data-is-older",
                   "request-is-the-batch", "sequences-handed-out-in-order",
                   "stale-markers-are-fenced", "timed-out-request-is-being-aborted",
                   "window-ends-at-the-batch", "window-ends-at-the-request"},
    "no-last-epoch": set(),
    "pre-kip890": {"fenced-stays-fenced", "no-hanging-transaction", "out-of-order-only-after-a-gap",
                   "open-transaction-is-unfinished", "prepared-data-is-older"},
    # known bugs: kip360 with one fix undone
    "kafka-7190": {"no-duplicate", "marker-epoch-monotonic", "appended-retry-is-rejected",
                   "out-of-order-only-after-a-gap",
                   "stale-markers-are-fenced", "no-log-start-movement"},
    "kafka-9144": {"marker-epoch-monotonic", "appended-retry-is-rejected", "stale-markers-are-fenced"},
    # kip360 with a leader that answers UNKNOWN_PRODUCER_ID: seed problems 1 and 2 come back with
    # today's client, problem 3 stays away (verification)
    "unknown-producer-id": {"no-duplicate", "marker-epoch-monotonic", "acknowledged-is-appended",
                            "appended-retry-is-rejected", "stale-markers-are-fenced",
                            "sequences-handed-out-in-order", "window-ends-at-the-batch",
                            "window-ends-at-the-request", "no-log-start-movement"},
    # unknown-producer-id with the client as KIP-360's text proposed it (no same-epoch reset):
    # problem 2 and the reset's lemmas are gone, problem 1 stays (a lost response's retry at 0)
    "kip360-as-proposed": {"no-duplicate", "marker-epoch-monotonic", "appended-retry-is-rejected",
                           "stale-markers-are-fenced", "no-log-start-movement"},
    "kafka-19999": set(),
    "kafka-18464": {"fenced-only-when-overtaken"},
    "kafka-20785": {"aborted-commit-is-fenced"},
    # pre-kip360 at two batches in flight, idempotent producer (the variant's params)
    "pre-kip360-in-flight": {"no-duplicate", "in-order", "acknowledged-is-appended",
                             "out-of-order-only-after-a-gap",
                             "appended-retry-is-rejected", "sequences-handed-out-in-order",
                             "window-ends-at-the-batch", "no-log-start-movement"},
    # pre-kip360-in-flight at four in flight with the PriorityQueue's order (KAFKA-8483)
    "kafka-8483": {"new-records-in-order", "no-duplicate", "in-order", "acknowledged-is-appended",
                   "out-of-order-only-after-a-gap",
                   "appended-retry-is-rejected", "sequences-handed-out-in-order",
                   "window-ends-at-the-batch", "no-log-start-movement"},
    # kip360 at two partitions, idempotent, with KAFKA-12152's fix undone
    "kafka-12152": {"out-of-order-only-after-a-gap"},
    # kip360 at two in flight, idempotent, NOT_LEADER_OR_FOLLOWER possible, KAFKA-15591 undone
    "kafka-15591": {"out-of-order-only-after-a-gap", "in-order", "new-records-in-order",
                    "no-duplicate", "appended-retry-is-rejected"},
}
# the progress verdicts the record holds, for 'kcheck progress'
EXPECTED_PROGRESS = {"kip360": set(), "pre-kip360": {"every-transaction-ends"},
                     "no-last-epoch": set(), "pre-kip890": {"every-transaction-ends"},
                     "kafka-7190": set(), "kafka-9144": set(), "unknown-producer-id": set(),
                     "kip360-as-proposed": set(),
                     "kafka-19999": {"every-prepared-transaction-completes"},
                     "kafka-18464": set(), "kafka-20785": set(), "pre-kip360-in-flight": set(),
                     "kafka-8483": set(), "kafka-12152": set(), "kafka-15591": set()}
# each known bug with a variant: the JIRA, its variant and the property it breaks
KNOWN_BUGS = {"KAFKA-7190": ("kafka-7190", "no-duplicate"),
              "KAFKA-9144": ("kafka-9144", "marker-epoch-monotonic"),
              "KAFKA-19999": ("kafka-19999", "every-prepared-transaction-completes"),
              "KAFKA-12671": ("pre-kip890", "no-hanging-transaction"),
              "KAFKA-18464": ("kafka-18464", "fenced-only-when-overtaken"),
              "KAFKA-20785": ("kafka-20785", "aborted-commit-is-fenced"),
              "KAFKA-8483": ("kafka-8483", "new-records-in-order"),
              "KAFKA-12152": ("kafka-12152", "out-of-order-only-after-a-gap"),
              "KAFKA-15591": ("kafka-15591", "out-of-order-only-after-a-gap")}
NOT_EXPRESSIBLE = {"KAFKA-18575", "KAFKA-19367"}


def test_names_are_the_issues():
    assert list(spec.variants) == ["kip360", "pre-kip360", "pre-kip360-in-flight", "no-last-epoch",
                                   "pre-kip890", "kafka-7190", "unknown-producer-id",
                                   "kip360-as-proposed", "kafka-9144",
                                   "kafka-19999",
                                   "kafka-18464", "kafka-20785", "kafka-8483", "kafka-12152",
                                   "kafka-15591"]
    assert spec.default_variant == "kip360"
    assert {"every-transaction-ends", "every-prepared-transaction-completes"} == set(spec.progress)
    assert set(PROPERTIES) <= {n for n, p in spec.properties.items() if not p.lemma}
    assert set(spec.rules) == {"init-producer-id", "end-txn", "produce-append", "marker-append"}
    assert "every-transaction-ends" in spec.progress
    for name, v in spec.variants.items():
        assert {p for p in v.expected_violations if p in spec.properties} == EXPECTED[name]
        assert {p for p in v.expected_violations if p not in spec.properties} == EXPECTED_PROGRESS[name]
        assert EXPECTED_PROGRESS[name] <= set(spec.progress)


@pytest.fixture(scope="module")
def default_results():
    return {v: search(spec.instantiate(v)) for v in spec.variants}


# the scenarios (sometimes properties): reached, not violated; their witnesses are not violations
SOMETIMES = {n for n, p in spec.properties.items() if p.kind == "sometimes"}
# the shortest witness of duplicate-in-flight per variant at its default parameters, as measured
DUPLICATE_IN_FLIGHT_STEPS = {
    "kip360": 6, "pre-kip360": 7, "pre-kip360-in-flight": 5, "no-last-epoch": 6, "pre-kip890": 7,
    "kafka-7190": 6, "unknown-producer-id": 6, "kip360-as-proposed": 6, "kafka-9144": 6, "kafka-19999": 6, "kafka-18464": 6, "kafka-20785": 6,
    "kafka-8483": 5, "kafka-12152": 5, "kafka-15591": 5}


def violations(res) -> set[str]:
    """The properties a search found violated (a sometimes property's witness is not one)."""
    return set(res.found) - SOMETIMES


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_default_verdicts(default_results, variant):
    res = default_results[variant]
    # exhaustive, or stopped because every property is violated; never cut by a bound
    assert res.exhaustive or res.stop_reason == "all-violated"
    assert res.cut_by_bounds == 0
    assert violations(res) == EXPECTED[variant]
    for prop in set(spec.properties) - SOMETIMES:
        want = "violated" if prop in EXPECTED[variant] else "holds"
        assert res.status(prop) == want, (variant, prop)
    # the scenario no-duplicate judges (a retried batch already in the log) happens in every variant
    assert res.status("duplicate-in-flight") == "reached"
    assert len(res.found["duplicate-in-flight"].steps) == DUPLICATE_IN_FLIGHT_STEPS[variant]


def test_default_state_counts(default_results):
    counts = {v: r.distinct_states for v, r in default_results.items()}
    # the transaction-version-2 variants lost states when KAFKA-18464's fix went into the
    # end-txn rule (kip360 was 26,744, now kafka-18464's count: a self-fenced client is FATAL)
    assert counts == {"kip360": 25214, "pre-kip360": 1651515, "no-last-epoch": 25214,
                      "pre-kip890": 252794, "kafka-7190": 253426, "kafka-9144": 41342,
                      "kafka-19999": 26864, "kafka-18464": 26744, "kafka-20785": 25214,
                      "pre-kip360-in-flight": 3632, "kafka-8483": 205292,
                      # the idempotent producer retries OUT_OF_ORDER_SEQUENCE_NUMBER with an epoch
                      # bump (canRetry) since issue 35: 44,472 before
                      "kafka-12152": 45720, "unknown-producer-id": 341040,
                      "kip360-as-proposed": 316704, "kafka-15591": 1468}


SHORTEST = {
    ("pre-kip360", "no-duplicate"): 9,
    ("pre-kip360", "marker-epoch-monotonic"): 10,
    ("pre-kip360", "no-hanging-transaction"): 10,
    ("pre-kip360", "fenced-stays-fenced"): 11,
    ("pre-kip360", "acknowledged-is-appended"): 13,
    ("pre-kip360", "no-log-start-movement"): 1,
    ("pre-kip360", "appended-retry-is-rejected"): 7,
    ("pre-kip360", "prepared-data-is-older"): 8,
    ("pre-kip360", "timed-out-request-is-being-aborted"): 8,
    ("pre-kip360", "stale-markers-are-fenced"): 9,
    ("pre-kip360", "open-transaction-is-unfinished"): 10,
    ("pre-kip360", "window-ends-at-the-batch"): 10,
    ("pre-kip360", "window-ends-at-the-request"): 11,
    ("pre-kip360", "sequences-handed-out-in-order"): 12,
    ("pre-kip360", "request-is-the-batch"): 13,
    ("pre-kip890", "no-hanging-transaction"): 10,
    ("pre-kip890", "fenced-stays-fenced"): 11,
    ("pre-kip890", "open-transaction-is-unfinished"): 10,
    ("pre-kip890", "prepared-data-is-older"): 8,
    ("kafka-7190", "no-duplicate"): 8,
    ("kafka-7190", "marker-epoch-monotonic"): 12,
    ("kafka-7190", "appended-retry-is-rejected"): 6,
    ("kafka-7190", "stale-markers-are-fenced"): 11,
    ("kafka-7190", "no-log-start-movement"): 1,
    ("kafka-9144", "marker-epoch-monotonic"): 12,
    ("kafka-9144", "appended-retry-is-rejected"): 9,
    ("kafka-9144", "stale-markers-are-fenced"): 11,
    ("kafka-18464", "fenced-only-when-overtaken"): 13,
    ("kafka-20785", "aborted-commit-is-fenced"): 10,
    ("pre-kip360-in-flight", "no-duplicate"): 7,
    ("pre-kip360-in-flight", "in-order"): 10,
    ("pre-kip360-in-flight", "acknowledged-is-appended"): 11,
    ("pre-kip360-in-flight", "appended-retry-is-rejected"): 5,
    ("pre-kip360-in-flight", "sequences-handed-out-in-order"): 10,
    ("pre-kip360-in-flight", "window-ends-at-the-batch"): 8,
    ("pre-kip360-in-flight", "no-log-start-movement"): 1,
    ("kafka-8483", "new-records-in-order"): 20,
    ("kafka-8483", "out-of-order-only-after-a-gap"): 13,
    ("pre-kip360", "out-of-order-only-after-a-gap"): 22,
    ("pre-kip360-in-flight", "out-of-order-only-after-a-gap"): 14,
    ("pre-kip890", "out-of-order-only-after-a-gap"): 19,
    ("kafka-7190", "out-of-order-only-after-a-gap"): 9,
    ("kafka-12152", "out-of-order-only-after-a-gap"): 11,
    ("kafka-8483", "no-duplicate"): 7,
    ("kafka-8483", "in-order"): 10,
    ("kafka-8483", "acknowledged-is-appended"): 11,
    ("kafka-8483", "appended-retry-is-rejected"): 5,
    ("kafka-8483", "sequences-handed-out-in-order"): 10,
    ("kafka-8483", "window-ends-at-the-batch"): 8,
    ("kafka-8483", "no-log-start-movement"): 1,
    ("unknown-producer-id", "no-duplicate"): 8,
    ("unknown-producer-id", "marker-epoch-monotonic"): 12,
    ("unknown-producer-id", "acknowledged-is-appended"): 12,
    ("unknown-producer-id", "appended-retry-is-rejected"): 6,
    ("unknown-producer-id", "stale-markers-are-fenced"): 11,
    ("unknown-producer-id", "sequences-handed-out-in-order"): 11,
    ("unknown-producer-id", "window-ends-at-the-batch"): 9,
    ("unknown-producer-id", "window-ends-at-the-request"): 10,
    ("unknown-producer-id", "no-log-start-movement"): 1,
    ("kip360-as-proposed", "no-duplicate"): 8,
    ("kip360-as-proposed", "marker-epoch-monotonic"): 12,
    ("kip360-as-proposed", "appended-retry-is-rejected"): 6,
    ("kip360-as-proposed", "stale-markers-are-fenced"): 11,
    ("kip360-as-proposed", "no-log-start-movement"): 1,
    ("kafka-15591", "out-of-order-only-after-a-gap"): 9,
    ("kafka-15591", "in-order"): 11,
    ("kafka-15591", "new-records-in-order"): 11,
    ("kafka-15591", "no-duplicate"): 13,
    ("kafka-15591", "appended-retry-is-rejected"): 9,
}
# the saved lassos of the progress properties: (steps, index where the loop starts)
LASSOS = {
    ("pre-kip360", "every-transaction-ends"): None,
    ("pre-kip890", "every-transaction-ends"): None,
    ("kafka-19999", "every-prepared-transaction-completes"): (12, 10),
}


def test_shortest_counterexamples(default_results):
    lengths = {(v, p): len(f.steps) for v, r in default_results.items() for p, f in r.found.items()
               if p not in SOMETIMES}
    assert lengths == SHORTEST


@pytest.mark.parametrize("variant,count,violated", [
    ("kip360", 644, set()),
    ("no-last-epoch", 644, set()),
    ("pre-kip890", 5718, {"no-hanging-transaction", "fenced-stays-fenced",
                          "open-transaction-is-unfinished", "prepared-data-is-older"}),
    ("pre-kip360", 28228, {"no-duplicate", "no-hanging-transaction", "fenced-stays-fenced",
                           "appended-retry-is-rejected", "no-log-start-movement",
                           "open-transaction-is-unfinished", "prepared-data-is-older",
                           "timed-out-request-is-being-aborted"}),
])
def test_small_bounds(variant, count, violated):
    res = search(spec.instantiate(variant, {"records": 1, "coordinator_failovers": 0}))
    assert res.exhaustive
    assert res.distinct_states == count
    assert violations(res) == violated


def test_seed_problem_2_needs_a_second_record():
    # one record cannot be acknowledged as the duplicate of another
    res = search(spec.instantiate("pre-kip360", {"records": 1}), ["acknowledged-is-appended"])
    assert res.exhaustive and not violations(res)


def test_every_violation_is_saved():
    saved = {(p.parent.name, p.stem) for p in COUNTEREXAMPLES}
    assert saved == {(v, prop) for v in EXPECTED for prop in EXPECTED[v] | EXPECTED_PROGRESS[v]}


@pytest.mark.parametrize("path", COUNTEREXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_counterexample_replays(path):
    doc = load(path)
    r = replay(spec.instantiate(doc["variant"], doc["params"]), doc)
    assert r.ok, r.message
    assert r.message.startswith(f"reproduces: {doc['property']} violated")
    if doc["property"] in spec.properties:
        # saved traces are the shortest the search finds at the default bounds
        assert len(doc["steps"]) == SHORTEST[doc["variant"], doc["property"]]
    else:
        assert doc["property"] in spec.progress and doc["kind"] == "lasso"
        shape = LASSOS[doc["variant"], doc["property"]]
        if shape is not None:
            assert (len(doc["steps"]), doc["loop_index"]) == shape


def test_known_bugs_are_recorded():
    bugs = {b.jira: b for b in spec.known_bugs}
    assert set(bugs) == set(KNOWN_BUGS) | NOT_EXPRESSIBLE
    for jira, (variant, prop) in KNOWN_BUGS.items():
        assert (bugs[jira].variant, bugs[jira].property) == (variant, prop)
        assert prop in EXPECTED[variant] | EXPECTED_PROGRESS[variant]
        assert bugs[jira].fix and bugs[jira].code and bugs[jira].broke
    for jira in NOT_EXPRESSIBLE:
        assert bugs[jira].variant is None and bugs[jira].not_expressible


def test_each_known_bug_is_the_default_with_one_fix_undone(default_results):
    # the rule a bug changes is the only difference: with the fix in place the property holds
    for jira, (variant, prop) in KNOWN_BUGS.items():
        if prop in spec.properties:
            assert default_results[variant].status(prop) == "violated", jira
            assert default_results["kip360"].status(prop) == "holds", jira


def test_kafka_8483_is_pre_kip360_in_flight_with_the_priority_queue():
    # the variant's configuration with the sorted set (the 2.3 client after PR #6883) keeps new
    # records in order, and so does today's producer: only the PriorityQueue's order reorders
    params = spec.variants["kafka-8483"].params
    assert params["max_in_flight"] == 4
    fixed = search(spec.instantiate("pre-kip360-in-flight", params))
    assert fixed.exhaustive and fixed.distinct_states == 204459
    assert fixed.status("new-records-in-order") == "holds"
    assert fixed.status("in-order") == "violated"      # the reordered duplicate, as at two in flight
    today = search(spec.instantiate("kip360", params))
    assert today.exhaustive and not violations(today)
    # three in flight cannot show it: PriorityQueue.removeAt of three batches keeps the order
    three = search(spec.instantiate("kafka-8483", {"max_in_flight": 3}), ["new-records-in-order"])
    assert three.exhaustive and not violations(three)


def test_kafka_12152_needs_the_second_partition_and_the_fix_undone():
    # at the variant's configuration today's producer holds every property; with one partition
    # the undone fix changes nothing (the partition that asked for the bump is the only one)
    params = spec.variants["kafka-12152"].params
    assert params["partitions"] == 2
    fixed = search(spec.instantiate("kip360", params))
    assert fixed.exhaustive and not violations(fixed) and fixed.distinct_states == 36408
    one = search(spec.instantiate("kafka-12152", {"partitions": 1}))
    assert one.exhaustive and not violations(one)
    doc = load(ROOT / "counterexamples" / "producer" / "kafka-12152" / "out-of-order-only-after-a-gap.json")
    steps = [(st["action"], st["args"].get("t"), st["expect"].get("outcome")) for st in doc["steps"]]
    # partition 0's batch times out, partition 1's is acknowledged, the bump, then partition 1's
    # next batch at the new epoch is refused
    assert ("DeliveryTimeout", 0, "REQUEST_TIMED_OUT") in steps and steps[-1] == ("Produce", 1, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert [a for a, _, _ in steps].index("IdempotentEpochBump") < len(steps) - 1


@pytest.mark.parametrize("variant,params,count", [
    ("kip360", {"partitions": 2, "coordinator_failovers": 0}, 63750),
    ("kip360", {"partitions": 2}, 447294),
])
def test_a_transaction_spans_two_partitions(variant, params, count):
    # AddPartitionsToTxn / verification per partition, a marker per partition, the transaction
    # complete once both are written: today's producer holds every property
    res = search(spec.instantiate(variant, params))
    assert res.exhaustive and res.cut_by_bounds == 0 and not violations(res)
    assert res.distinct_states == count


def test_kafka_8483_trace_is_the_heap_story():
    doc = load(ROOT / "counterexamples" / "producer" / "kafka-8483" / "new-records-in-order.json")
    heaps = {}
    state = {f"in_flight_heap[{j}]": v for j, v in enumerate(doc["state"]["in_flight_heap"])}
    for i, st in enumerate(doc["steps"], start=1):
        state.update({k: v for k, v in st["expect"].get("state", {}).items() if k.startswith("in_flight_heap")})
        heaps[i] = [state[f"in_flight_heap[{j}]"] for j in range(4)]
    # four drained, batch 1 acknowledged: removeAt(1) moves the last (batch 3) into its place
    assert [0, 1, 2, 3] in heaps.values() and [0, 3, 2, -1] in heaps.values()
    restart = [st for st in doc["steps"] if st["expect"].get("outcome") == "UNKNOWN_PRODUCER_ID"]
    assert restart, "the sequences restart after UNKNOWN_PRODUCER_ID"


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


# The idempotent-only producer (transactional=0): no coordinator, its own epoch bump after a
# failed or timed-out batch (TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded).
@pytest.mark.parametrize("variant,params,count,violated,lengths", [
    ("kip360", {}, 254, set(), {}),
    ("kip360", {"records": 3, "max_epoch": 6}, 1002, set(), {}),
    ("kafka-7190", {}, 1887, {"no-duplicate", "appended-retry-is-rejected", "no-log-start-movement"},
     {"no-duplicate": 7}),
    ("pre-kip360", {}, 927, {"no-duplicate", "acknowledged-is-appended", "appended-retry-is-rejected",
                             "out-of-order-only-after-a-gap",
                             "sequences-handed-out-in-order", "window-ends-at-the-batch",
                             "window-ends-at-the-request", "no-log-start-movement"},
     {"no-duplicate": 7, "acknowledged-is-appended": 11}),
])
def test_idempotent_producer(variant, params, count, violated, lengths):
    res = search(spec.instantiate(variant, {"transactional": 0, **params}))
    assert res.exhaustive and res.cut_by_bounds == 0
    assert res.distinct_states == count
    assert violations(res) == violated
    for prop, n in lengths.items():
        assert len(res.found[prop].steps) == n


def test_idempotent_producer_takes_no_transactional_step():
    res = search(spec.instantiate("kip360", {"transactional": 0}))
    # actions with instances that never fire, and actions the parameters leave without any
    never = set(res.never_fired()) | set(res.disabled())
    # no transaction, coordinator or second instance; its own epoch bump does fire
    assert {"BeginTransaction", "EndTxn", "WriteTxnMarker", "SecondInstanceInitProducerId",
            "EpochBump"} <= never
    assert not {"IdempotentEpochBump", "Send", "Produce", "DeliveryTimeout"} & never
    # and the transactional producer never takes the idempotent producer's bump
    res = search(spec.instantiate("kip360"))
    assert "IdempotentEpochBump" in set(res.never_fired()) | set(res.disabled())


@pytest.mark.parametrize("variant", ["kip360", "pre-kip360-in-flight", "kafka-12152", "kafka-15591"])
def test_no_vacuity_warning_at_the_defaults(default_results, variant):
    # every action with an instance takes a step; the transactional steps have none for the
    # idempotent-only producer (has_transactions), EpochBump none with transaction version 2
    res = default_results[variant]
    assert res.never_fired() == []
    if variant != "kip360":
        assert {"CommitTransaction", "EndTxn", "WriteTxnMarker", "TxnMarkerArrives",
                "CoordinatorFailover", "AbortTimedOutTransaction"} <= set(res.disabled())


# Several batches in flight (max_in_flight=2 unless given, up to 5): today's producer keeps every
# property, the 2.3 one (pre-kip360) loses the order as well (the variant pre-kip360-in-flight is
# its idempotent case).
@pytest.mark.parametrize("variant,params,count,violated", [
    ("kip360", {}, 48100, set()),
    ("kip360", {"transactional": 0, "max_in_flight": 3, "records": 3}, 3016, set()),
    ("kip360", {"transactional": 0, "max_in_flight": 5, "records": 5, "max_epoch": 6}, 40468, set()),
    ("kip360", {"transactional": 0}, 500, set()),
    ("kip360", {"transactional": 0, "records": 3, "max_epoch": 5}, 3266, set()),
    ("pre-kip360", {"coordinator_failovers": 0}, 464172,
     {"no-duplicate", "in-order", "fenced-stays-fenced", "no-hanging-transaction",
      "acknowledged-is-appended", "open-transaction-is-unfinished", "prepared-data-is-older",
      "appended-retry-is-rejected", "sequences-handed-out-in-order", "window-ends-at-the-batch",
      "no-log-start-movement", "out-of-order-only-after-a-gap"}),
])
def test_batches_in_flight(variant, params, count, violated):
    res = search(spec.instantiate(variant, {"max_in_flight": 2, **params}))
    assert res.exhaustive and res.cut_by_bounds == 0
    assert res.distinct_states == count
    assert violations(res) == violated


def test_the_in_order_violation_needs_two_batches_in_flight():
    one = search(spec.instantiate("pre-kip360-in-flight", {"max_in_flight": 1}), ["in-order"])
    assert one.exhaustive and not violations(one)
    two = search(spec.instantiate("pre-kip360-in-flight"), ["in-order"])
    assert len(two.found["in-order"].steps) == 10


def test_kafka_20785_changes_only_the_error():
    # the client fails on PRODUCER_FENCED and on INVALID_TXN_STATE alike, so undoing the fix moves
    # no state: the two variants differ in the answer to the overtaken commit and nowhere else
    fixed, before = (search(spec.instantiate(v)) for v in ("kip360", "kafka-20785"))
    assert fixed.exhaustive and before.exhaustive
    assert fixed.distinct_states == before.distinct_states
    assert fixed.status("aborted-commit-is-fenced") == "holds"
    steps = before.found["aborted-commit-is-fenced"].steps
    assert len(steps) == 10


def test_commit_overtaken_while_the_abort_is_prepared_waits_then_is_fenced():
    # both fixes in one story (scenario kafka-20785-prepare-abort): a commit that reaches the
    # coordinator while its own abort is still writing markers is CONCURRENT_TRANSACTIONS
    # (KAFKA-18464: the pending transition is checked first); its retry, once the abort
    # completed, is PRODUCER_FENCED (KAFKA-20785)
    doc = load(ROOT / "tests" / "scenarios" / "producer" / "kafka-20785-prepare-abort.json")
    outcomes = [st["expect"].get("outcome") for st in doc["steps"] if st["action"] == "EndTxn"]
    assert outcomes == ["CONCURRENT_TRANSACTIONS", "PRODUCER_FENCED"]
    assert replay(spec.instantiate("kip360", doc.get("params", {})), doc).ok
    for variant, step in (("kafka-18464", 8), ("kafka-20785", 11)):
        r = replay(spec.instantiate(variant, doc.get("params", {})), doc)
        # each fix undone changes its own step's answer to the fatal INVALID_TXN_STATE
        assert not r.ok, variant
        assert f"step {step} " in r.message and "INVALID_TXN_STATE" in r.message, (variant, r.message)


def test_kafka_18464_self_fencing_scenario():
    # the kafka-18464 counterexample under kip360: the abort at the epoch the previous EndTxn
    # returned waits (CONCURRENT_TRANSACTIONS) instead of fencing the producer
    doc = load(ROOT / "tests" / "scenarios" / "producer" / "kafka-18464-kip360.json")
    assert doc["steps"][-1]["expect"]["outcome"] == "CONCURRENT_TRANSACTIONS"
    assert len(doc["steps"]) == SHORTEST["kafka-18464", "fenced-only-when-overtaken"]
    assert replay(spec.instantiate("kip360", doc.get("params", {})), doc).ok


def java_remove_at(heap, i, key):
    """java.util.PriorityQueue.removeAt (siftDown, then siftUp if the moved element stayed), on
    a list, ordered by `key`: the reference the spec's unrolled heap_remove is checked against."""
    heap = list(heap)
    s = len(heap) - 1
    if s == i:
        heap.pop()
        return heap
    moved = heap.pop()
    k, half = i, s // 2
    while k < half:
        child = 2 * k + 1
        if child + 1 < s and key(heap[child]) > key(heap[child + 1]):
            child += 1
        if key(moved) <= key(heap[child]):
            break
        heap[k] = heap[child]
        k = child
    heap[k] = moved
    if heap[i] == moved:
        k = i
        while k > 0:
            parent = (k - 1) // 2
            if key(moved) >= key(heap[parent]):
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = moved
    return heap


def test_kafka_8483_heap_is_javas_priority_queue():
    # random walks of kafka-8483: every step that removes a batch from the spec's PriorityQueue
    # array leaves the array java.util.PriorityQueue.removeAt leaves, and an offer appends
    import random

    import numpy as np
    from kcheck.trace import Executor, shown_values
    # five records: a fifth batch offered after a removal makes the right child the smaller one
    model = spec.instantiate("kafka-8483", {"records": 5})
    ex, lay = Executor(model), layout_of(model)
    names = [f.name for f in lay.fields]

    def shown(words):
        return dict(zip(names, shown_values(model, lay.unpack_flat(words))))

    def heap_of(st):
        return [st[f"in_flight_heap[{j}]"] for j in range(4) if st[f"in_flight_heap[{j}]"] != -1]

    def key_of(st):
        seqs = {st[f"earlier_record[{i}]"]: st[f"earlier_seq[{i}]"] for i in range(3)
                if st[f"earlier_batch[{i}]"]}
        if st["batch[0]"]:
            seqs[st["batch_record[0]"]] = st["batch_seq[0]"]
        return seqs.__getitem__

    def check(k, words):
        nxt, _, _ = ex.apply(words, k)
        pre, post = shown(words), shown(nxt)
        before, after = heap_of(pre), heap_of(post)
        gone = [r for r in before if r not in after]
        added = [r for r in after if r not in before]
        assert len(gone) + len(added) <= 1, (model.instances[k].label, before, after)
        if gone:
            assert after == java_remove_at(before, before.index(gone[0]), key_of(pre)), \
                (model.instances[k].label, before, after)
        elif added:
            assert after == before + added
        else:
            assert after == before
        return nxt, after

    # directed: four drained ([0,1,2,3]), batch 0's response lost, batch 1 acknowledged
    # (removeAt(1): [0,3,2]), batch 0 re-sent, batch 4 drained ([0,3,2,4]), batch 0 expires:
    # removeAt(0) sifts 4 down past the smaller right child, 2 ([2,3,4])
    words = initial_words(model)[0]
    path = [("InitProducerId", {})] + [("Send", {"t": 0}), ("ProduceRequest", {"t": 0})] * 4 + [
        ("Produce", {"t": 0, "r": 0, "lost": True}), ("Produce", {"t": 0, "r": 0, "lost": False}),
        ("Send", {"t": 0}), ("ProduceRequest", {"t": 0}), ("ProduceRequest", {"t": 0}),
        ("DeliveryTimeout", {"t": 0})]
    for action, args in path:
        k = model.instance(action, args).index
        assert ex.enabled(words, k), action
        words, heap = check(k, words)
    assert heap == [2, 3, 4]

    rng, removals = random.Random(8483), 0
    for _ in range(60):
        words = initial_words(model)[0]
        for _ in range(40):
            guards = ex.comp.guards(np.array(words, dtype=np.uint64).reshape(-1, 1))
            enabled = [k for k, g in enumerate(guards) if bool(np.broadcast_to(g, (1,))[0])]
            if not enabled:
                break
            k = rng.choice(enabled)
            before = heap_of(shown(words))
            words, after = check(k, words)
            removals += len(after) < len(before)
    assert removals > 40


# Issue 35: KIP-360's recovery path (TransactionManager.canRetry, handleFailedBatch) against a
# leader that answers UNKNOWN_PRODUCER_ID (unknown_producer_id=1, variant unknown-producer-id)

def test_epoch_bump_is_transaction_version_1_only():
    # needToTriggerEpochBumpFromClient is false with transaction version 2: kip360's client never
    # sends InitProducerId with its epoch, so EpochBump has no instance there (no vacuous warning)
    res = search(spec.instantiate("kip360"))
    assert "EpochBump" in res.disabled() and "FollowerFetch" in res.disabled()
    assert not res.never_fired()
    # with transaction version 1 and a leader that answers UNKNOWN_PRODUCER_ID, the KIP's own
    # path: abortable error, abort, InitProducerId with the current epoch
    res = search(spec.instantiate("pre-kip890", {"unknown_producer_id": 1, "records": 1,
                                                 "coordinator_failovers": 0}))
    assert res.exhaustive and res.distinct_states == 30915
    assert "EpochBump" not in set(res.never_fired()) | set(res.disabled())


def test_seed_problems_before_and_after_kip360(default_results):
    seed = {1: {"no-duplicate"}, 2: {"acknowledged-is-appended"},
            3: {"no-hanging-transaction", "fenced-stays-fenced"}}
    lengths = {1: [9], 2: [13], 3: [10, 11]}
    for n, props in seed.items():
        pre, now = default_results["pre-kip360"], default_results["kip360"]
        assert sorted(len(pre.found[p].steps) for p in props) == lengths[n]
        assert all(now.status(p) == "holds" for p in props)
    # with today's client and coordinator against a leader that still answers
    # UNKNOWN_PRODUCER_ID, problems 1 and 2 return (the same-epoch reset of canRetry), problem 3
    # does not (the coordinator's verification)
    old = default_results["unknown-producer-id"]
    assert len(old.found["no-duplicate"].steps) == 8
    assert len(old.found["acknowledged-is-appended"].steps) == 12
    assert old.status("no-hanging-transaction") == old.status("fenced-stays-fenced") == "holds"
    # the client as the KIP's text proposed it, against the same leader: problem 2 is gone by the
    # KIP's path (the batch fails, the abort bumps the epoch, sequence 0 of the new epoch), problem
    # 1 stays (a lost response's retry keeps its sequence 0: only the broker's retention helps)
    kip = default_results["kip360-as-proposed"]
    assert kip.status("acknowledged-is-appended") == "holds"
    assert len(kip.found["no-duplicate"].steps) == 8
    assert kip.status("no-hanging-transaction") == kip.status("fenced-stays-fenced") == "holds"


def test_today_client_resets_at_the_same_epoch_on_unknown_producer_id():
    doc = load(ROOT / "tests/scenarios/producer/unknown-producer-id-reset-duplicates.json")
    r = replay(spec.instantiate("unknown-producer-id"), doc)
    assert r.ok and len(r.trace.steps) == 13
    outcomes = [st.outcome for st in r.trace.steps]
    assert outcomes[10] == "UNKNOWN_PRODUCER_ID" and outcomes[-1] == "NONE"
    # kip360's leader keeps the state: DeleteRecords cannot even be taken
    doc["variant"], doc["params"] = "kip360", {}
    with pytest.raises(TraceError, match="DeleteRecords"):
        replay(spec.instantiate("kip360"), doc)


def test_idempotent_producer_bumps_and_retries_on_unknown_producer_id():
    # canRetry, idempotent: UNKNOWN_PRODUCER_ID is retried after a bump that renumbers the batch
    res = search(spec.instantiate("unknown-producer-id", {"transactional": 0}))
    assert res.exhaustive and res.distinct_states == 2053
    assert violations(res) == {"no-duplicate", "appended-retry-is-rejected", "no-log-start-movement"}
    assert len(res.found["no-duplicate"].steps) == 7


# Issue 35, second round: Kafka's own tests of the recovery path as scenarios, and the client as
# KIP-360's text proposed it (variant kip360-as-proposed)

def scenario(name):
    return load(ROOT / f"tests/scenarios/producer/{name}.json")


@pytest.mark.parametrize("name,variant,steps,outcome_at", [
    ("transactional-unknown-producer-id-retention-reset", "unknown-producer-id", 11, 9),
    ("idempotent-unknown-producer-id-retention-bump", "unknown-producer-id", 10, 8),
    ("idempotent-unknown-producer-id-not-truncated-bump", "unknown-producer-id", 10, 8),
    ("transactional-unknown-producer-id-abort-bump", "pre-kip890", 27, 16),
    ("kip360-as-proposed-aborts-instead-of-reset", "kip360-as-proposed", 15, 11),
])
def test_recovery_scenarios_from_kafka_tests(name, variant, steps, outcome_at):
    doc = scenario(name)
    assert doc["variant"] == variant and doc["params"]["unknown_producer_id"] == 1
    r = replay(spec.instantiate(variant, doc["params"]), doc)
    assert r.ok, r.message
    assert len(r.trace.steps) == steps
    assert r.trace.steps[outcome_at - 1].outcome == "UNKNOWN_PRODUCER_ID"
    # each ends with every record in the log at most once
    lay = layout_of(r.trace.model)
    assert all(n <= 1 for n in lay.show(lay.unpack_flat(r.trace.steps[-1].words))["appended"])


def test_the_kip_path_needs_transaction_version_1_for_epoch_bump():
    # the transactional abort-and-bump: InitProducerId with the current epoch (EpochBump), first
    # CONCURRENT_TRANSACTIONS while the abort's markers are written, then the bump to epoch 1
    doc = scenario("transactional-unknown-producer-id-abort-bump")
    bumps = [st for st in doc["steps"] if st["action"] == "EpochBump"]
    assert [b["expect"]["outcome"] for b in bumps] == ["CONCURRENT_TRANSACTIONS", "NONE"]
    # with transaction version 2 every EndTxn bumps the epoch: the next transaction's first batch
    # already has sequence 0 of a new epoch, which a leader with no state takes (no
    # UNKNOWN_PRODUCER_ID after an expiry between transactions, and no InitProducerId with it)
    doc["variant"] = "unknown-producer-id"
    doc["steps"] = [st for st in doc["steps"] if st["action"] != "AddPartitionsToTxn"]
    r = replay(spec.instantiate("unknown-producer-id", doc["params"]), doc)
    assert not r.ok and r.message.startswith("step 12 (Send(t=0)): batch_seq[0] is 0"), r.message
    assert "EpochBump" in search(spec.instantiate("unknown-producer-id", {"records": 1,
                                 "coordinator_failovers": 0})).disabled()


def test_kafka_client_resets_where_the_kip_text_aborts():
    # the same ten steps; at the eleventh, UNKNOWN_PRODUCER_ID with the acknowledged offset below
    # the log start: Kafka's client restarts at sequence 0 (same epoch), the KIP's text fails the
    # batch (ABORTABLE_ERROR)
    doc = scenario("kip360-as-proposed-aborts-instead-of-reset")
    doc["variant"] = "unknown-producer-id"
    r = replay(spec.instantiate("unknown-producer-id", doc["params"]), doc)
    assert not r.ok and r.message.startswith("step 11 (Produce(t=0, r=0, lost=False)): client is "
                                             "IN_TRANSACTION, expected ABORTABLE_ERROR"), r.message
    # and unknown-producer-id's seed problem 2 cannot be taken by the KIP's client: its reset
    # step (sequence 0 at the same epoch) does not happen
    doc = load(ROOT / "counterexamples/producer/unknown-producer-id/acknowledged-is-appended.json")
    doc["variant"] = "kip360-as-proposed"
    r = replay(spec.instantiate("kip360-as-proposed"), doc)
    assert not r.ok and r.message.startswith("step 9 ") and "batch_seq[0] is 1, expected 0" in r.message


def test_kip_text_client_idempotent():
    # the idempotent producer of the KIP's text fails the batch and bumps once nothing is in
    # flight (IdempotentEpochBump) instead of renumbering and retrying: problem 1 stays (7 steps)
    res = search(spec.instantiate("kip360-as-proposed", {"transactional": 0}))
    assert res.exhaustive and res.distinct_states == 1794
    assert violations(res) == {"no-duplicate", "appended-retry-is-rejected", "no-log-start-movement"}
    assert len(res.found["no-duplicate"].steps) == 7
    assert explore.fired_per_action(res.model, res.fired)["IdempotentEpochBump"] > 0


# KAFKA-15591 (PR #23234): NOT_LEADER_OR_FOLLOWER lets a later batch overtake an earlier one on a
# partition never written; the fix makes such a leader take only sequence 0

KAFKA_15591_PARAMS = {"not_leader": 1, "max_in_flight": 2, "transactional": 0,
                      "coordinator_failovers": 0}


def test_kafka_15591_needs_the_race_and_the_fix_undone():
    # the fixed leader at the variant's configuration holds every property
    res = search(spec.instantiate("kip360", KAFKA_15591_PARAMS))
    assert res.exhaustive and res.distinct_states == 924 and not violations(res)
    # without NOT_LEADER_OR_FOLLOWER responses come back in order and the old rule is harmless
    res = search(spec.instantiate("kafka-15591", {**KAFKA_15591_PARAMS, "not_leader": 0}))
    assert res.exhaustive and not violations(res)
    assert "NotLeaderOrFollower" in res.disabled()


@pytest.mark.parametrize("name,variant,steps,appended", [
    ("kafka-15591-silent-loss", "kafka-15591", 15, [0, 1]),
    ("kafka-15591-kip360", "kip360", 11, [1, 1]),
])
def test_kafka_15591_scenarios(name, variant, steps, appended):
    doc = scenario(name)
    assert doc["variant"] == variant and doc["params"] == KAFKA_15591_PARAMS
    r = replay(spec.instantiate(variant, doc["params"]), doc)
    assert r.ok, r.message
    assert len(r.trace.steps) == steps
    lay = layout_of(r.trace.model)
    assert lay.show(lay.unpack_flat(r.trace.steps[-1].words))["appended"] == appended
    # the two part at the leader's answer to batch 1 (step 8): appended, or refused
    other = "kip360" if variant == "kafka-15591" else "kafka-15591"
    doc["variant"] = other
    r = replay(spec.instantiate(other, doc["params"]), doc)
    assert not r.ok and r.message.startswith("step 8 "), r.message


def test_the_default_has_no_not_leader_state():
    # the parameter's field and action are absent at the defaults: the default layout, counts
    # and conformance keys are unchanged
    model = spec.instantiate("kip360")
    assert "last_acked_seq" not in {f.name.split("[")[0] for f in layout_of(model).fields}
    assert "NotLeaderOrFollower" in search(spec.instantiate("kip360", {"records": 1,
                                           "coordinator_failovers": 0})).disabled()
