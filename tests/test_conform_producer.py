"""The producer spec's conformance adapter (checker/conform/producer.py): its mapping without a
broker, then (marked `kafka`) every scenario and saved counterexample replayed on a real broker of
each release in conftest_kafka.RELEASES, a check that a rule Kafka does not run is reported as a
divergence, and short seeded walks."""
import io
import json
from pathlib import Path

import pytest

from checker.conform import driver
from checker.conform.producer import (CLIENT_SIDE, NOT_DRIVABLE, REQUESTS, Client,
                                      ProducerAdapter, complete_batch,
                                      describe_transactions_response, hold_needed,
                                      prepares_to_hold, read_batches, record_batch,
                                      spec_outcome_of_produce)
from checker.layout import initial_words, layout_of
from checker.trace import Executor
from conftest_kafka import cluster_for, kafka_broker, spec_walk  # noqa: F401  (the session's broker per release)
from spec.producer import spec

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "tests" / "scenarios" / "producer").glob("*.json")) + \
    sorted((ROOT / "counterexamples" / "producer").glob("*/*.json"))
# every trace that a single 4.x broker can drive; it must conform on every release tested
CONFORMING = {
    "scenarios/producer/idempotent-timeout-bump-keeps-order.json",
    "scenarios/producer/init-fences-ongoing-transaction.json",
    "scenarios/producer/kafka-12671-kip360.json",
    "scenarios/producer/kafka-12671.json",
    "scenarios/producer/kafka-7190-retention-keeps-state.json",
    "scenarios/producer/late-produce-fenced-by-marker-epoch.json",
    "scenarios/producer/pre-kip890-bump-retry.json",
    "scenarios/producer/seed-problem-1-kip360.json",
    "producer/pre-kip890/prepared-data-is-older.json",
    # several batches in flight, their requests held on the connection and sent late
    "scenarios/producer/two-in-flight-retry-is-duplicate.json",
    "scenarios/producer/five-in-flight-retry-is-duplicate.json",
    # two partitions: a transaction over both, and the idempotent producer's bump
    "scenarios/producer/transaction-spans-two-partitions.json",
    "scenarios/producer/kafka-12152-kip360.json",
    # the driver plays the 2.5-2.7 client's bump (KAFKA-12152's fix is client-side): today's
    # brokers still refuse the non-zero sequence at the new epoch
    "producer/kafka-12152/out-of-order-only-after-a-gap.json",
}


def short(path: Path) -> str:
    return "/".join(path.parts[-3:])


def spec_step(model, action, args, words):
    """The spec's SpecStep for one action from packed state `words`."""
    ex = Executor(model)
    inst = model.instance(action, args)
    nxt, out, _ = ex.apply(words, inst.index)
    return driver.SpecStep(1, inst.label, action, args, model.show_outcome(out),
                           driver.field_values(model, words), driver.field_values(model, nxt)), nxt


# ---------------------------------------------------------------------------------------------
# The mapping, without a broker

def test_every_action_is_mapped_once():
    """Each spec action is a request, the client's own state, or not drivable (with a reason)."""
    kinds = [set(REQUESTS), set(CLIENT_SIDE), set(NOT_DRIVABLE), set(ProducerAdapter.replica_actions)]
    names = {a.name for a in spec.actions}
    for name in names:
        assert sum(name in k for k in kinds) == 1, name
    assert set().union(*kinds) == names


def test_action_reasons():
    a = ProducerAdapter()
    assert "second broker" in a.action_reason("LeaderFailover", {})
    assert "KAFKA-7190" in a.action_reason("DeleteRecords", {"r": 0})
    assert "timer" in a.action_reason("ExpireProducer", {"r": 0})
    assert "replica 1" in a.action_reason("Produce", {"r": 1, "lost": False})
    # a coordinator failover is driven on the cluster (the trace needs it), so are its markers
    assert a.action_reason("CoordinatorFailover", {}) is None
    assert a.needs_cluster({"steps": [{"action": "CoordinatorFailover"}]})
    assert not a.needs_cluster({"steps": [{"action": "EndTxn"}]})
    assert a.action_reason("WriteTxnMarker", {"c": 1, "t": 0}) is None
    assert a.action_reason("Produce", {"r": 0, "lost": True}) is None
    assert a.action_reason("TxnMarkerArrives", {"c": 0, "r": 0}) is None
    assert a.action_reason("Send", {}) is None


def test_initial_state_reachable_only_when_fresh():
    a = ProducerAdapter()
    model = spec.instantiate("kip360", {})
    fresh = layout_of(model).show(layout_of(model).unpack_flat(initial_words(model)[0]))
    assert a.initial_reason(model.params, fresh) is None
    assert "txn_epoch=2" in a.initial_reason(model.params, dict(fresh, txn_epoch=2))
    assert "producer state" in a.initial_reason(model.params, dict(fresh, producer_epoch=[0, -1]))


def test_several_in_flight_are_driven_and_kafka_2_3_is_not():
    """max.in.flight > 1 is driven (the requests held in order); the 2.3 client's variants,
    kafka-8483 among them, need a Kafka 2.3 broker."""
    a = ProducerAdapter()
    for params in ({"max_in_flight": 2, "transactional": 0},
                   {"max_in_flight": 5, "records": 5, "transactional": 0}):
        model = spec.instantiate("kip360", params)
        fresh = layout_of(model).show(layout_of(model).unpack_flat(initial_words(model)[0]))
        assert a.initial_reason(model.params, fresh) is None
    path = ROOT / "counterexamples" / "producer" / "kafka-8483" / "new-records-in-order.json"
    model = spec.instantiate("kafka-8483")
    run = driver.TraceRun(None, "t", model.params, model=model)
    with pytest.raises(driver.NotDrivable, match="Kafka 2.3"):
        a.begin(run, {})
    assert path.exists()


def test_the_driver_completes_batches_as_the_sender_does():
    """complete_batch: acknowledged or failed leaves, a retriable answer stays; an
    OUT_OF_ORDER_SEQUENCE_NUMBER is retriable only behind a lower sequence still in flight."""
    c = Client(transactional=False, in_flight={0: [[0, 0], [1, 1], [2, 2]], 1: [[3, 0]]})
    complete_batch(c, 0, 1, "OUT_OF_ORDER_SEQUENCE_NUMBER")   # batch 0 is still out: retried
    assert [b[0] for b in c.in_flight[0]] == [0, 1, 2] and not c.bump_partitions
    complete_batch(c, 0, 0, "OUT_OF_ORDER_SEQUENCE_NUMBER")   # the first in flight: it fails
    assert [b[0] for b in c.in_flight[0]] == [1, 2]
    assert c.bump_partitions == {0}                           # requestEpochBumpForPartition
    complete_batch(c, 0, 1, "DUPLICATE_SEQUENCE_NUMBER")
    complete_batch(c, 0, 2, "CONCURRENT_TRANSACTIONS")
    assert [b[0] for b in c.in_flight[0]] == [2]
    complete_batch(c, 0, 7, "NONE")                           # a timed-out batch's late answer
    assert [b[0] for b in c.in_flight[0]] == [2] and c.in_flight[1] == [[3, 0]]


def test_record_batch_is_a_transactional_v2_batch():
    """The batch Produce carries: kio's reader checks its CRC32C and reads back every field."""
    data = record_batch(producer_id=7, epoch=3, sequence=5, value=b"record-1")
    (batch,) = read_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 5)
    assert batch.attributes & 0x10 and not batch.attributes & 0x20    # transactional, not control
    assert [r.value for r in batch.records] == [b"record-1"]
    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(ValueError, match="Checksum"):
        read_batches(bytes(corrupt))


def test_duplicate_is_none_with_the_original_offset():
    assert spec_outcome_of_produce("NONE", 4, {0, 4}) == "DUPLICATE_SEQUENCE_NUMBER"
    assert spec_outcome_of_produce("NONE", 6, {0, 4}) == "NONE"
    assert spec_outcome_of_produce("INVALID_PRODUCER_EPOCH", 0, {0}) == "INVALID_PRODUCER_EPOCH"


def test_describe_transactions_reads_a_start_time_of_minus_one():
    """Kafka answers transaction_start_time=-1 for a transaction not started; kio's own class
    refuses it, the adapter's reads it."""
    from kio.schema.describe_transactions.v0 import response as r
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i16, i32Timedelta, i64
    import datetime
    ours = describe_transactions_response()
    state_type = ours.__dataclass_fields__["transaction_states"].type.__args__[0]
    zero = i32Timedelta.parse(datetime.timedelta(0))
    resp = ours(throttle_time=zero, transaction_states=(state_type(
        error_code=r.ErrorCode.none, transactional_id="t", transaction_state="Empty",
        transaction_timeout=zero, transaction_start_time=i64(-1), producer_id=i64(3),
        producer_epoch=i16(0), topics=()),))
    buf = io.BytesIO()
    entity_writer(ours)(buf, resp)
    back, _ = entity_reader(ours)(buf.getvalue(), 0)
    assert back.transaction_states[0].transaction_start_time == -1
    with pytest.raises(Exception, match="negative"):
        entity_reader(r.DescribeTransactionsResponse)(buf.getvalue(), 0)


def test_view_leaves_the_partition_out_while_markers_are_in_flight():
    """While the spec's coordinator prepares, Kafka may already have written its marker: only
    the outcome and the coordinator's epoch are compared."""
    model = spec.instantiate("kip360", {})
    words = initial_words(model)[0]
    run = driver.TraceRun(None, "t", model.params, model=model)
    for action, args in [("InitProducerId", {}), ("BeginTransaction", {}), ("Send", {"t": 0}),
                         ("ProduceRequest", {"t": 0}), ("Produce", {"t": 0, "r": 0, "lost": False}),
                         ("CommitTransaction", {})]:
        step, words = spec_step(model, action, args, words)
    assert ProducerAdapter().view(run, step)["appended"] == [1, 0]
    step, words = spec_step(model, "EndTxn", {"lost": False}, words)
    v = ProducerAdapter().view(run, step)
    assert step.post["txn_state"] == "PrepareCommit"
    assert v == {"outcome": "NONE", "response_epoch": 1, "txn_epoch": 1}


def test_hold_is_needed_when_a_request_comes_before_the_markers():
    """hold_needed looks at the trace's actions after the step that starts a prepare: a request
    or a coordinator move before the next TxnMarkerArrives needs the coordinator held."""
    acts = [(a, {}) for a in ("EndTxn", "EndTxn", "WriteTxnMarker", "TxnMarkerArrives", "EndTxn")]
    assert hold_needed(acts, 1)                       # the retry comes before the markers
    assert not hold_needed(acts, 2)                   # the markers come first
    assert not hold_needed(acts, 5)                   # nothing after
    client_only = [(a, {}) for a in ("EndTxn", "BeginTransaction", "Send", "ProduceRequest")]
    assert not hold_needed(client_only, 1)            # no request at all: Kafka may complete
    failover = [(a, {}) for a in ("SecondInstanceInitProducerId", "WriteTxnMarker", "CoordinatorFailover")]
    assert hold_needed(failover, 1)


# the shipped traces whose prepare must be held (step), by the spec's replay; the last five
# have an action no 4.x broker drives (DeleteRecords, ExpireProducer) as well
PREPARES_HELD = {
    "scenarios/producer/end-txn-retry-after-bump.json": [7],
    "scenarios/producer/kafka-18464-kip360.json": [7],
    "scenarios/producer/kafka-19999-kip360.json": [6],
    "scenarios/producer/kafka-20785-prepare-abort.json": [7],
    "scenarios/producer/kafka-9144-kip360.json": [6],
    "producer/kafka-18464/fenced-only-when-overtaken.json": [7],
    "producer/kafka-19999/every-prepared-transaction-completes.json": [6],
    "producer/kafka-7190/marker-epoch-monotonic.json": [6],
    "producer/kafka-7190/stale-markers-are-fenced.json": [6],
    "producer/kafka-9144/marker-epoch-monotonic.json": [6],
    "producer/kafka-9144/stale-markers-are-fenced.json": [6],
    "producer/pre-kip890/out-of-order-only-after-a-gap.json": [8],
}


def test_the_prepares_to_hold_and_their_cluster():
    """prepares_to_hold over every shipped trace (Kafka 2.3's variants aside): exactly these
    need a hold, and each of them runs on the cluster of three."""
    from checker.conform.producer import UNREACHABLE_VARIANTS
    a, found = ProducerAdapter(), {}
    for path in TRACES:
        doc = json.loads(path.read_text())
        if doc.get("variant") in UNREACHABLE_VARIANTS:
            continue
        steps = prepares_to_hold(driver.model_of(spec, doc.get("variant"), doc.get("params", {})), doc)
        if steps:
            found[short(path)] = steps
            assert a.needs_cluster(doc), short(path)
    assert found == PREPARES_HELD
    assert not a.needs_cluster(json.loads((ROOT / "tests" / "scenarios" / "producer" /
                                           "late-produce-fenced-by-marker-epoch.json").read_text()))


def test_a_hold_needs_the_cluster_and_one_partition():
    """On a single broker (no node to stop) a prepare that must be held is not drivable, with
    the reason; so is a held prepare of two partitions (one stopped node holds both)."""
    model = spec.instantiate("kip360", {})
    run = driver.TraceRun(object(), "t", model.params, model=model)
    ongoing = {"state": "Ongoing", "epoch": 0, "partitions": [("t", 0)]}
    with pytest.raises(driver.NotDrivable, match="only the cluster of three can hold it"):
        ProducerAdapter()._hold(run, Client(), "EndTxn", ongoing)

    class Cluster:
        def stop_node(self, node_id):
            raise AssertionError("nothing may be stopped")
    run = driver.TraceRun(Cluster(), "t", model.params, model=model)
    with pytest.raises(driver.NotDrivable, match="of 2 partitions"):
        ProducerAdapter()._hold(run, Client(), "EndTxn", dict(ongoing, partitions=[("t", 0), ("t", 1)]))


def test_view_compares_the_prepare_when_kafka_is_held():
    """At a step Kafka was held in PrepareX, the coordinator's state and the partition's are
    compared too: the prepare itself is checked, not only the outcome and the epoch."""
    model = spec.instantiate("kip360", {})
    words = initial_words(model)[0]
    run = driver.TraceRun(None, "t", model.params, model=model)
    for action, args in [("InitProducerId", {}), ("BeginTransaction", {}), ("Send", {"t": 0}),
                         ("ProduceRequest", {"t": 0}), ("Produce", {"t": 0, "r": 0, "lost": False}),
                         ("CommitTransaction", {}), ("EndTxn", {"lost": False})]:
        step, words = spec_step(model, action, args, words)
    run.state["held_steps"] = {step.index}
    v = ProducerAdapter().view(run, step)
    assert v["txn_state"] == "PrepareCommit" and v["txn_partition"] is True
    assert v["txn_open"] is True and v["producer_epoch"] == 0 and v["appended"] == [1, 0]


# ---------------------------------------------------------------------------------------------
# On a real broker

def replay(broker, path, adapter=None, version=None):
    job = driver.load_job(path, "producer")
    return driver.run_trace(broker, adapter or ProducerAdapter(), spec, job,
                            version or broker.version)


# KAFKA-20785's fix is in no release tested (ProducerAdapter.expected_divergences)
DIVERGING_AS_RECORDED = {"scenarios/producer/kafka-20785-kip360.json": (10, "PR #23204 not released")}


@pytest.mark.kafka
@pytest.mark.parametrize("path", TRACES, ids=short)
def test_trace_on_kafka(kafka_broker, path):
    """Every scenario and saved counterexample: the drivable ones conform step by step, the
    others are reported not drivable with the reason."""
    out = replay(kafka_broker, path)
    if short(path) in CONFORMING:
        assert out.kind == driver.CONFORMS, out.text()
    elif short(path) in DIVERGING_AS_RECORDED:
        # the release lacks the fix the default models; the adapter's record says so
        step, why = DIVERGING_AS_RECORDED[short(path)]
        assert out.kind == driver.EXPECTED and out.step == step, out.text()
    else:
        # a trace added since this list was written may conform too; none may diverge
        assert out.kind in (driver.NOT_DRIVABLE, driver.CONFORMS), out.text()
        assert out.kind == driver.CONFORMS or out.detail


@pytest.mark.kafka
def test_verification_is_why_kafka_12671_no_longer_hangs(kafka_broker):
    """With Kafka's default (transaction.partition.verification.enable=true) the late produce of
    KAFKA-12671 is refused at step 12 (KIP-890 part 1): the variant without verification no
    longer predicts Kafka, and the driver says so at that step."""
    path = ROOT / "tests" / "scenarios" / "producer" / "kafka-12671.json"
    out = replay(kafka_broker, path, ProducerAdapter(tv1_without_verification=False))
    assert out.kind == driver.DIVERGES and out.step == 12, out.text()
    assert "outcome: spec said NONE, Kafka said INVALID_PRODUCER_EPOCH" in out.detail


@pytest.mark.kafka
@pytest.mark.parametrize("variant,params,seed", [("kip360", {}, 1), ("kip360", {}, 2),
                                                 ("pre-kip890", {}, 3),
                                                 ("kip360", {"transactional": 0}, 5),
                                                 ("kip360", {"transactional": 0, "max_in_flight": 3,
                                                             "records": 3}, 7),
                                                 ("kip360", {"max_in_flight": 2}, 8),
                                                 ("kip360", {"partitions": 2, "transactional": 0,
                                                             "records": 3}, 9),
                                                 ("kip360", {"partitions": 2}, 10)])
def test_seeded_walk_conforms(kafka_broker, variant, params, seed):
    adapter = ProducerAdapter()
    doc = spec_walk(spec.instantiate(variant, params), adapter, depth=16, seed=seed)
    assert len(doc["steps"]) >= 10
    out = driver.run_trace(kafka_broker, adapter, spec, driver.Job(f"walk-{variant}-{seed}", doc),
                           kafka_broker.version)
    assert out.kind == driver.CONFORMS, out.text()


FAILOVER_TRACES = [p for p in TRACES if any(st["action"] == "CoordinatorFailover"
                                            for st in json.loads(p.read_text())["steps"])]

# The traces whose prepare is held (HOLD) on the session's cluster of three (4.3.1): what each
# comes to, and the state DescribeTransactions showed while held. The kafka-18464 counterexample
# is the divergence test below.
HELD_OUTCOMES = {
    "scenarios/producer/end-txn-retry-after-bump.json": (driver.CONFORMS, None, "PrepareCommit"),
    "scenarios/producer/kafka-18464-kip360.json": (driver.CONFORMS, None, "PrepareAbort"),
    # KAFKA-20785's fix is in no release tested (ProducerAdapter.expected_divergences)
    "scenarios/producer/kafka-20785-prepare-abort.json": (driver.EXPECTED, 11, "PrepareAbort"),
    # the old coordinator's marker, sent late after the new one's: TRANSACTION_COORDINATOR_FENCED
    "scenarios/producer/kafka-9144-kip360.json": (driver.CONFORMS, None, "PrepareAbort"),
    # the old coordinator's marker while the new one's is held: the hold refuses both
    "scenarios/producer/kafka-19999-kip360.json": (driver.NOT_DRIVABLE, 10, "PrepareAbort"),
    "producer/kafka-19999/every-prepared-transaction-completes.json": (driver.NOT_DRIVABLE, 10, "PrepareAbort"),
}
HELD_DIVERGING = ROOT / "counterexamples" / "producer" / "kafka-18464" / "fenced-only-when-overtaken.json"


def test_held_traces_are_the_drivable_prepares_to_hold():
    """Every drivable trace with a prepare to hold is run by the cluster tests below."""
    a = ProducerAdapter()
    drivable = {name for name in PREPARES_HELD
                if not any(a.action_reason(st["action"], st.get("args", {}))
                           for st in json.loads((ROOT / "tests" / name if name.startswith("scenarios")
                                                 else ROOT / "counterexamples" / name).read_text())["steps"])}
    assert drivable == set(HELD_OUTCOMES) | {short(HELD_DIVERGING)}


@pytest.mark.kafka
@pytest.mark.parametrize("name", sorted(HELD_OUTCOMES))
def test_held_prepare_on_the_cluster(name):
    """The coordinator is held in PrepareCommit/PrepareAbort while the trace's requests come
    (DescribeTransactions shows the prepare, which is compared with the spec's), and completes
    once TxnMarkerArrives starts the stopped follower again."""
    path = (ROOT / "tests" / name) if name.startswith("scenarios") else ROOT / "counterexamples" / name
    kind, step, prepared = HELD_OUTCOMES[name]
    out = replay(cluster_for("4.3.1"), path, ProducerAdapter(), "4.3.1")
    assert (out.kind, out.step) == (kind, step), out.text()
    assert any(f"transaction_state={prepared}" in resp for _, resp in out.wire), out.text()


@pytest.mark.kafka
def test_held_divergence_is_reported():
    """A held step whose spec answer Kafka does not give is a divergence: the trace of variant
    kafka-18464 (before PR #18467) says PRODUCER_FENCED for the abort that finds the coordinator
    held in PrepareAbort; 4.3.1 answers CONCURRENT_TRANSACTIONS. Without its entry in the
    expected-divergence record, that is an unexpected divergence at step 13."""
    adapter = ProducerAdapter()
    adapter.expected_divergences = []
    out = replay(cluster_for("4.3.1"), HELD_DIVERGING, adapter, "4.3.1")
    assert out.kind == driver.DIVERGES and out.step == 13, out.text()
    assert "outcome: spec said PRODUCER_FENCED, Kafka said CONCURRENT_TRANSACTIONS" in out.detail


@pytest.mark.kafka
@pytest.mark.parametrize("path", [p for p in FAILOVER_TRACES if short(p) not in HELD_OUTCOMES],
                         ids=short)
def test_coordinator_failover_runs_on_the_cluster(path):
    """A trace with a CoordinatorFailover runs on the session's cluster of three (4.3.1): every
    step before the failover is driven and conforms, none diverges, and what stops it is said
    (Kafka completed the transaction before the move: its markers cannot be held; markers of the
    old coordinator after the move; another action a 4.x broker cannot drive)."""
    doc = json.loads(path.read_text())
    adapter = ProducerAdapter()
    assert adapter.needs_cluster(doc)
    out = replay(cluster_for("4.3.1"), path, adapter, "4.3.1")
    assert out.kind in (driver.NOT_DRIVABLE, driver.CONFORMS), out.text()
    assert out.kind == driver.CONFORMS or out.detail
    assert "needs the cluster" not in (out.detail or ""), out.text()
    if doc.get("variant") not in ("pre-kip360", "pre-kip360-in-flight", "kafka-8483"):
        first = next(i for i, st in enumerate(doc["steps"], 1) if st["action"] == "CoordinatorFailover")
        assert out.kind == driver.CONFORMS or out.step >= first, out.text()


def test_the_failover_traces_are_ten():
    """The shipped traces with a coordinator failover (the cluster test above runs each)."""
    assert len(FAILOVER_TRACES) == 10
