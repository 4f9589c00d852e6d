"""The producer spec's conformance adapter (checker/conform/producer.py): its mapping without a
broker, then (marked `kafka`) every scenario and saved counterexample replayed on a real broker of
each release in conftest_kafka.RELEASES, a check that a rule Kafka does not run is reported as a
divergence, and short seeded walks."""
import io
import json
from pathlib import Path

import pytest

from kcheck.conform import driver
from kcheck.conform.producer import (CLIENT_SIDE, NOT_DRIVABLE, PREPARE, REQUESTS, TIMERS,
                                     Client, ProducerAdapter, complete_batch,
                                     describe_transactions_response, hold_needed,
                                     old_marker_while_held, prepares_to_hold, read_batches,
                                     record_batch, spec_outcome_of_produce)
from kcheck.layout import initial_words, layout_of
from kcheck.trace import Executor
from conftest_kafka import broker_for, cluster_for, kafka_broker, spec_walk  # noqa: F401  (the session's broker per release)
from kcheck.spec.producer import spec

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
    # producer-id expiry (Kafka's timer, scheduled for the step): with transaction version 1 and
    # no verification, the fenced producer's late batch opens a transaction no marker closes
    "producer/pre-kip890/every-transaction-ends.json",
    "producer/pre-kip890/fenced-stays-fenced.json",
    "producer/pre-kip890/no-hanging-transaction.json",
    "producer/pre-kip890/open-transaction-is-unfinished.json",
    # DeleteRecords of an empty partition
    "producer/kafka-7190/no-log-start-movement.json",
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
    kinds = [set(REQUESTS), set(TIMERS), set(CLIENT_SIDE), set(NOT_DRIVABLE),
             set(ProducerAdapter.replica_actions)]
    names = {a.name for a in spec.actions}
    for name in names:
        assert sum(name in k for k in kinds) == 1, name
    assert set().union(*kinds) == names


def test_action_reasons():
    a = ProducerAdapter()
    # FollowerFetch: a 4.x DeleteRecords waits for every live replica's log start, and the
    # follower takes it at each fetch by itself: no request leaves it behind
    why = a.action_reason("FollowerFetch", {"t": 0, "r": 1})
    assert "DelayedDeleteRecords" in why and "ReplicaFetcherThread.processPartitionData" in why
    # DeleteRecords is the request, expiry Kafka's timer scheduled for the step
    assert a.action_reason("DeleteRecords", {"t": 0, "r": 0}) is None
    assert a.action_reason("ExpireProducer", {"t": 0, "r": 0}) is None
    # the second replica and the leader's move are driven on the cluster of three
    assert a.action_reason("LeaderFailover", {"t": 0}) is None
    assert a.action_reason("ExpireProducer", {"t": 0, "r": 1}) is None
    assert a.action_reason("Produce", {"t": 0, "r": 1, "lost": False}) is None
    assert a.action_reason("TxnMarkerArrives", {"c": 0, "t": 0, "r": 1}) is None
    assert a.needs_cluster({"steps": [{"action": "LeaderFailover", "args": {"t": 0}}]})
    assert a.needs_cluster({"steps": [{"action": "ExpireProducer", "args": {"t": 0, "r": 1}}]})
    assert not a.needs_cluster({"steps": [{"action": "ExpireProducer", "args": {"t": 0, "r": 0}}]})
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
    the outcome, the coordinator's epoch and which replica leads are compared; the rest is
    declared Absent with the reason (never left out, which would be a divergence)."""
    model = spec.instantiate("kip360", {})
    words = initial_words(model)[0]
    run = driver.TraceRun(None, "t", model.params, model=model)
    for action, args in [("InitProducerId", {}), ("BeginTransaction", {}), ("Send", {"t": 0}),
                         ("ProduceRequest", {"t": 0}), ("Produce", {"t": 0, "r": 0, "lost": False}),
                         ("CommitTransaction", {})]:
        step, words = spec_step(model, action, args, words)
        if action == "Produce":
            assert ProducerAdapter().view(run, step)["appended"] == [1, 0]
    # CommitTransaction sends nothing: Kafka is not asked, nothing is compared
    assert ProducerAdapter().view(run, step) == {}
    step, words = spec_step(model, "EndTxn", {"lost": False}, words)
    v = ProducerAdapter().view(run, step)
    assert step.post["txn_state"] == "PrepareCommit"
    compared = {k: x for k, x in v.items() if not isinstance(x, driver.Absent)}
    assert compared == {"outcome": "NONE", "response_epoch": 1, "txn_epoch": 1, "leader": 0}
    absent = {k for k, x in v.items() if isinstance(x, driver.Absent)}
    assert absent == {"txn_state", "txn_partition", "appended"} | {
        who + key for who in ("", "follower.") for key in ("producer_epoch", "txn_open", "last_seq")}
    assert all("markers are on their way" in v[k].why for k in absent)


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


# the shipped traces whose prepare must be held (step), by the spec's replay
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
    from kcheck.conform.producer import UNREACHABLE_VARIANTS
    a, found = ProducerAdapter(), {}
    for path in TRACES:
        doc = json.loads(path.read_text())
        if doc.get("variant") in UNREACHABLE_VARIANTS or doc.get("params", {}).get("unknown_producer_id"):
            continue   # not drivable at their start (a leader no 4.x broker is)
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


def test_the_old_marker_while_held_is_said_before_driving():
    """A marker of the old coordinator that arrives while the new coordinator's is held (the
    kafka-19999 pair, and a pre-kip890 counterexample) is not drivable, said by begin before any
    request with the step; the old marker after the new one's (kafka-9144-kip360) is driven."""
    expected = {"scenarios/producer/kafka-19999-kip360.json": 10,
                "producer/kafka-19999/every-prepared-transaction-completes.json": 10,
                "producer/pre-kip890/out-of-order-only-after-a-gap.json": 11}
    found = {}
    for path in TRACES:
        doc = json.loads(path.read_text())
        late = old_marker_while_held([(st["action"], st.get("args", {})) for st in doc["steps"]])
        if late:
            found[short(path)] = late[0]
    assert found == expected

    class NoBroker:     # begin must refuse before it asks the broker anything
        def __getattr__(self, name):
            raise AssertionError(f"the broker was asked for {name}")
    doc = json.loads((ROOT / "tests" / "scenarios" / "producer" / "kafka-19999-kip360.json").read_text())
    model = spec.instantiate("kip360", {})
    run = driver.TraceRun(NoBroker(), "t", model.params, model=model,
                          actions=[(st["action"], st.get("args", {})) for st in doc["steps"]])
    with pytest.raises(driver.NotDrivable, match="step 10: .*Partition.appendRecordsToLeader"):
        ProducerAdapter().begin(run, {})


def test_not_leader_is_not_drivable():
    """KAFKA-15591's race (variant kafka-15591, parameter not_leader): the step that answers one
    produce NOT_LEADER_OR_FOLLOWER needs a broker that has not applied the partition yet, which
    the driver cannot time; the traces that take it stop there with the reason."""
    why = ProducerAdapter().action_reason("NotLeaderOrFollower", {"t": 0})
    assert "NOT_LEADER_OR_FOLLOWER" in why and "Partition.appendRecordsToLeader" in why
    steps = {short(p): [st["action"] for st in json.loads(p.read_text())["steps"]] for p in TRACES}
    taking = {name for name, actions in steps.items() if "NotLeaderOrFollower" in actions}
    assert taking == {"scenarios/producer/kafka-15591-silent-loss.json",
                      "scenarios/producer/kafka-15591-kip360.json",
                      "producer/kafka-15591/out-of-order-only-after-a-gap.json",
                      "producer/kafka-15591/in-order.json",
                      "producer/kafka-15591/new-records-in-order.json",
                      "producer/kafka-15591/no-duplicate.json",
                      "producer/kafka-15591/appended-retry-is-rejected.json"}
    assert not taking & CONFORMING


def test_walks_take_requests_through_a_prepare_of_one_partition():
    """A walk may send any request but a Produce while the spec's coordinator prepares a
    transaction of one partition (Kafka is held); of two partitions only the markers."""
    a = ProducerAdapter()
    one = {"txn_state": "PrepareCommit", "txn_partition[0]": True}
    two = {"txn_state": "PrepareAbort", "txn_partition[0]": True, "txn_partition[1]": True}
    assert a.walk_allows(one, "EndTxn") and a.walk_allows(one, "SecondInstanceInitProducerId")
    assert not a.walk_allows(one, "Produce")
    assert not a.walk_allows(two, "EndTxn") and a.walk_allows(two, "TxnMarkerArrives")
    assert a.walk_allows({"txn_state": "Ongoing"}, "Produce")


def test_expiry_needs_a_broker_kcheck_started():
    """Expiry is Kafka's timer, checked every producer.id.expiration.check.interval.ms, a
    static setting: a broker without it (--bootstrap) cannot expire a producer in a step."""
    class External:
        settings: dict = {}
    model = spec.instantiate("kip360", {})
    run = driver.TraceRun(External(), "t", model.params, model=model)
    with pytest.raises(driver.NotDrivable, match="producer.id.expiration.check.interval.ms"):
        ProducerAdapter()._expire_producer(run, Client(producer_id=1, epoch=0), 0)
    assert ProducerAdapter.broker_settings == {"producer.id.expiration.check.interval.ms": "500"}


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


class FakeCluster:
    """The cluster's answers that the replica mapping reads: partition -> (leader, replicas);
    node k at port 9000 + k. Stopping a node is refused (a unit test must stop nothing)."""
    def __init__(self, leaders, coordinator):
        self.nodes = [type("Node", (), {"node_id": k, "host_port": ("127.0.0.1", 9000 + k)})()
                      for k in (1, 2, 3)]
        self.leaders, self.coordinator = leaders, coordinator

    def move_leader(self, topic, partition, to=None):
        self.leaders[partition] = to

    def partition(self, topic, partition):
        return {"leader": self.leaders[partition], "leader_epoch": 0, "replicas": [1, 2, 3],
                "isr": [1, 2, 3]}

    def node(self, node_id):
        return self.nodes[node_id - 1]

    def node_at(self, host_port):
        return self.nodes[host_port[1] - 9001]

    def stop_node(self, node_id):
        raise AssertionError("nothing may be stopped")


@pytest.mark.parametrize("leaders,coordinator,replicas", [
    ({0: 2}, 3, {0: [2, 3]}),            # the coordinator follows: it is replica 1
    ({0: 2}, 2, {0: [2, 1]}),            # the coordinator leads: node 1 is replica 1
    ({0: 1, 1: 2}, 3, {0: [1, 3], 1: [2, 3]}),
    ({0: 1, 1: 2}, 1, {0: [1, 2], 1: [2, 1]})])   # the third node is left for the hold
def test_the_spec_replicas_are_two_nodes_the_hold_never_stops(leaders, coordinator, replicas):
    """Replica 0 of each partition is its first leader, replica 1 a follower (REPLICAS): the
    coordinator's node where it follows, so that the third node is free for the hold; the hold
    stops none of the spec's replicas, whose producer state is compared at every step."""
    model = spec.instantiate("kip360", {"partitions": len(leaders)})
    cluster = FakeCluster(dict(leaders), coordinator)
    run = driver.TraceRun(cluster, "t", model.params, model=model)
    run.state["coordinator"] = cluster.node(coordinator).host_port
    a = ProducerAdapter()
    a._map_replicas(run, transactional=True)
    assert run.state["replicas"] == replicas
    assert run.state["spec_leader"] == {tp: 0 for tp in leaders}
    # what the hold may stop: none of the spec's replicas, nor the coordinator
    spec_nodes = {x for pair in replicas.values() for x in pair} | {coordinator}
    if len(spec_nodes) == 3:
        run.state["leaders"] = {tp: cluster.node(x).host_port for tp, x in leaders.items()}
        ongoing = {"state": "Ongoing", "epoch": 0, "partitions": [("t", 0)]}
        with pytest.raises(driver.NotDrivable, match="is a replica the spec models"):
            a._hold(run, Client(), "EndTxn", ongoing)


def test_leader_failover_moves_to_the_other_spec_replica():
    """LeaderFailover elects the partition's other spec replica (Cluster.move_leader with its
    node); a step at replica 1 is then sent to it, and a step at the old replica is refused."""
    model = spec.instantiate("kip360", {})
    cluster = FakeCluster({0: 2}, 3)
    run = driver.TraceRun(cluster, "t", model.params, model=model)
    run.state["coordinator"] = cluster.node(3).host_port
    a = ProducerAdapter()
    a._map_replicas(run, transactional=True)
    a._leader_failover(run, 0)
    assert cluster.leaders[0] == 3 and run.state["spec_leader"] == {0: 1}
    assert run.state["leaders"][0] == ("127.0.0.1", 9003)
    a._at_leader(run, "Produce", 0, 1)
    with pytest.raises(RuntimeError, match="leader of partition 0 is replica 1"):
        a._at_leader(run, "Produce", 0, 0)
    # on a single broker there is no second replica to move to or to step at
    single = driver.TraceRun(object(), "t", model.params, model=model)
    with pytest.raises(driver.NotDrivable, match="needs the cluster of three"):
        a._leader_failover(single, 0)
    with pytest.raises(driver.NotDrivable, match="replica 1: .*cluster of three"):
        a._replica(single, "ExpireProducer", 0, 1)


def test_expiry_is_per_node_and_idle_per_partition(monkeypatch):
    """ExpireProducer sets producer.id.expiration.ms on the node of the step's replica alone and
    deletes it after; the expiration is the idle one (1 ms) when nothing of that partition is in
    flight, whatever is on the wire to the other partition (ExpireProducer's guard is per
    partition), else 5 minutes."""
    import kcheck.conform.producer as prod
    calls = []
    monkeypatch.setattr(prod, "set_node_config",
                        lambda conn, node_id, name, value, **k: calls.append((node_id, value)))
    monkeypatch.setattr(prod, "broker_config", lambda conn, node_id, name: "86400000")

    class NoBroker(ProducerAdapter):
        def _replica(self, run, action, partition, replica):
            return 10 + 2 * partition + replica, ("127.0.0.1", 9000 + partition)

        def _conn(self, run, who, at=None):
            return None

        def _describe_producer(self, run, c, partition=0, at=None):
            return None

    class Broker:
        settings = {"producer.id.expiration.check.interval.ms": "500"}
    model = spec.instantiate("kip360", {"partitions": 2, "transactional": 0})
    run = driver.TraceRun(Broker(), "t", model.params, model=model)
    busy_at_1 = Client(producer_id=1, epoch=0, held={1: [(0, 0, 0)]}, in_flight={1: [[0, 0]]})
    NoBroker()._expire_producer(run, busy_at_1, 0, 1)
    NoBroker()._expire_producer(run, busy_at_1, 1, 0)
    assert calls == [("11", "1"), ("11", None), ("12", "300000"), ("12", None)]


def test_view_follows_the_spec_leader_and_compares_the_follower():
    """After LeaderFailover the leader's entry is replica 1's and the follower's replica 0's;
    an expiry at one replica changes only that replica's entry in the view."""
    model = spec.instantiate("kip360", {})
    words = initial_words(model)[0]
    run = driver.TraceRun(None, "t", model.params, model=model)
    for action, args in [("InitProducerId", {}), ("BeginTransaction", {}), ("Send", {"t": 0}),
                         ("ProduceRequest", {"t": 0}), ("Produce", {"t": 0, "r": 0, "lost": False}),
                         ("CommitTransaction", {}), ("EndTxn", {"lost": False}),
                         ("WriteTxnMarker", {"c": 0, "t": 0}),
                         ("TxnMarkerArrives", {"c": 0, "t": 0, "r": 0}), ("LeaderFailover", {"t": 0})]:
        step, words = spec_step(model, action, args, words)
    v = ProducerAdapter().view(run, step)
    assert v["leader"] == 1
    assert v["producer_epoch"] == v["follower.producer_epoch"] == 1
    step, words = spec_step(model, "ExpireProducer", {"t": 0, "r": 0}, words)
    v = ProducerAdapter().view(run, step)
    assert (v["producer_epoch"], v["follower.producer_epoch"]) == (1, -1)
    assert "follower.last_seq" not in v and v["last_seq"] == -1


# ---------------------------------------------------------------------------------------------
# On a real broker

def replay(broker, path, adapter=None, version=None):
    job = driver.load_job(path, "producer")
    return driver.run_trace(broker, adapter or ProducerAdapter(), spec, job,
                            version or broker.version)


# KAFKA-20785's fix is in no release tested, KAFKA-7190's and KAFKA-9144's are in every 4.x
# (ProducerAdapter.expected_divergences): the pre-fix variants' traces part from 4.x where the
# fix shows, the producer's state kept after DeleteRecords or after the expiry timer's check
DIVERGING_AS_RECORDED = {
    "scenarios/producer/kafka-20785-kip360.json": (10, "PR #23204 not released"),
    "producer/kafka-7190/appended-retry-is-rejected.json": (6, "PR #7388"),
    "producer/kafka-7190/no-duplicate.json": (6, "PR #7388"),
    "producer/kafka-7190/out-of-order-only-after-a-gap.json": (6, "PR #7388"),
    "producer/kafka-9144/appended-retry-is-rejected.json": (9, "PR #7687"),
}


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
@pytest.mark.parametrize("name,step,kept", [
    ("kafka-7190/no-duplicate.json", 6, "producer_epoch: spec said -1, Kafka said 0"),
    ("kafka-9144/appended-retry-is-rejected.json", 9, "producer_epoch: spec said -1, Kafka said 1")])
def test_deleted_or_expired_state_kept_is_a_divergence(name, step, kept):
    """DeleteRecords and the expiry timer are driven and compared: without the record of
    KAFKA-7190's and KAFKA-9144's fixes, the pre-fix variants' traces diverge where 4.x keeps
    the producer's state (one release: the request paths are the same on each)."""
    adapter = ProducerAdapter()
    adapter.expected_divergences = []
    out = replay(broker_for("4.3.1"), ROOT / "counterexamples" / "producer" / name, adapter, "4.3.1")
    assert out.kind == driver.DIVERGES and out.step == step, out.text()
    assert kept in out.detail


@pytest.mark.kafka
def test_an_expiry_that_does_not_fire_is_a_divergence():
    """An adapter whose expiry step asks Kafka nothing leaves the producer's entry in place:
    the step that the spec says expires it diverges (the trace conforms with the timer)."""
    class NoExpiry(ProducerAdapter):
        def _expire_producer(self, run, c, partition, replica=0):
            pass
    path = ROOT / "counterexamples" / "producer" / "pre-kip890" / "no-hanging-transaction.json"
    out = replay(broker_for("4.3.1"), path, NoExpiry(), "4.3.1")
    assert out.kind == driver.DIVERGES and out.step == 7, out.text()
    assert "producer_epoch: spec said -1, Kafka said 1" in out.detail


class OneBrokerWalks(ProducerAdapter):
    """The single broker's walks: no request while the spec's coordinator prepares (a hold needs
    the cluster of three) and no expiry (each costs two config changes and a check: broker time
    the cluster walk below spends once)."""
    def walk_allows(self, pre, action):
        if action in TIMERS:
            return False
        return pre["txn_state"] not in PREPARE or action not in REQUESTS or action == "TxnMarkerArrives"


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
    adapter = OneBrokerWalks()
    doc = spec_walk(spec.instantiate(variant, params), adapter, depth=16, seed=seed)
    assert len(doc["steps"]) >= 10
    out = driver.run_trace(kafka_broker, adapter, spec, driver.Job(f"walk-{variant}-{seed}", doc),
                           kafka_broker.version)
    assert out.kind == driver.CONFORMS, out.text()


# the seed of the cluster walk the replica tests take (test_cluster_walks_take_the_replica_steps
# says what it does)
CLUSTER_SEED = 74


def cluster_walk(seed: int, depth: int = 16) -> dict:
    """A seeded walk of kip360 as `kcheck conform producer --walks` draws it (every action the
    adapter can drive on the cluster of three, LeaderFailover and replica 1 included)."""
    from kcheck.conform_cli import walk_filter
    from kcheck.trace import random_walk
    adapter = ProducerAdapter()
    model = spec.instantiate("kip360", {})
    return random_walk(model, depth, seed, start=lambda s: adapter.initial_reason(model.params, s) is None,
                       allow=walk_filter(adapter))


def steps_of(doc: dict) -> list[str]:
    return [st["action"] + ("@r1" if st.get("args", {}).get("r", 0) else "") for st in doc["steps"]]


def test_cluster_walks_take_the_replica_steps():
    """The cluster walk below, as drawn (an action type first, then an instance): seed 74 moves
    the leader, produces at replica 1, holds the coordinator's own abort (the timed-out
    transaction's, with EndTxns while it prepares), delivers its marker at replica 1, then
    expires the producer at replica 1 (the leader since the failover) and at replica 0 (the
    follower), one at a time."""
    model = spec.instantiate("kip360", {})
    walk = steps_of(cluster_walk(CLUSTER_SEED))
    assert walk[2] == "LeaderFailover" and walk[6] == "Produce@r1"
    assert prepares_to_hold(model, cluster_walk(CLUSTER_SEED)) == [8] and walk[12] == "TxnMarkerArrives@r1"
    assert walk[14:16] == ["ExpireProducer@r1", "ExpireProducer"]
    assert ProducerAdapter().needs_cluster(cluster_walk(CLUSTER_SEED))


@pytest.mark.kafka
def test_walk_with_a_leader_failover_conforms():
    """The seeded walk that takes a LeaderFailover (test_cluster_walks_take_the_replica_steps
    says which steps) conforms at every step on the cluster of three (4.3.1): the leader moved
    by a preferred election, each replica's producer state compared after every step, the expiry
    at one replica leaving the other's entry."""
    out = driver.run_trace(cluster_for("4.3.1"), ProducerAdapter(), spec,
                           driver.Job(f"walk-kip360-{CLUSTER_SEED}", cluster_walk(CLUSTER_SEED)), "4.3.1")
    # every step compared `leader` (Kafka's metadata) and both replicas' entries
    assert out.kind == driver.CONFORMS, out.text()


@pytest.mark.kafka
def test_an_expiry_at_the_wrong_replica_is_a_divergence():
    """Each replica's entry is compared: an adapter that expires the producer at the other
    replica than the step names (the cluster walk's step 15: the spec expires it at replica 1,
    the leader since the failover) diverges there, at the leader's entry and the follower's."""
    class WrongReplica(ProducerAdapter):
        def _expire_producer(self, run, c, partition, replica=0):
            super()._expire_producer(run, c, partition, 1 - replica)
    out = driver.run_trace(cluster_for("4.3.1"), WrongReplica(), spec,
                           driver.Job("walk-kip360-wrong-replica", cluster_walk(CLUSTER_SEED)), "4.3.1")
    assert out.kind == driver.DIVERGES and out.step == 15, out.text()
    assert "follower.producer_epoch: spec said" in out.detail and "Kafka said -1" in out.detail
    assert "producer_epoch: spec said -1, Kafka said" in out.detail.replace("follower.producer_epoch", "")


FAILOVER_TRACES = [p for p in TRACES if any(st["action"] == "CoordinatorFailover"
                                            for st in json.loads(p.read_text())["steps"])]

# The traces whose prepare is held (HOLD) on the session's cluster of three (4.3.1): what each
# comes to, and the state DescribeTransactions showed while held. The kafka-18464 counterexample
# is the divergence test below.
HELD_OUTCOMES = {
    "scenarios/producer/end-txn-retry-after-bump.json": (driver.CONFORMS, None, "PrepareCommit"),
    # KAFKA-20785's fix is in no release tested (ProducerAdapter.expected_divergences)
    "scenarios/producer/kafka-20785-prepare-abort.json": (driver.EXPECTED, 11, "PrepareAbort"),
    # the old coordinator's marker, sent late after the new one's: TRANSACTION_COORDINATOR_FENCED
    "scenarios/producer/kafka-9144-kip360.json": (driver.CONFORMS, None, "PrepareAbort"),
    # DeleteRecords after the new coordinator's marker: KAFKA-7190's fix keeps the producer
    "producer/kafka-7190/marker-epoch-monotonic.json": (driver.EXPECTED, 11, "PrepareAbort"),
    # the expiry timer while the old coordinator's marker is on its way: KAFKA-9144's fix keeps it
    "producer/kafka-9144/marker-epoch-monotonic.json": (driver.EXPECTED, 11, "PrepareAbort"),
    # the same at replica 1, the follower, alone (producer.id.expiration.ms on its node only):
    # the follower keeps the entry its marker stamped, where the variant expires it
    "producer/kafka-9144/stale-markers-are-fenced.json": (driver.EXPECTED, 11, "PrepareAbort"),
}
# held traces whose steps are those of a trace above up to where it stops, in the same variant
# from the same state: their outcome there is that trace's, and they are not run again
SAME_PREFIX = {"producer/kafka-7190/stale-markers-are-fenced.json":
               "producer/kafka-7190/marker-epoch-monotonic.json"}
# a held trace whose actions, from the same state, are those of the divergence test's trace in
# another variant: that test's one run judges it too (Kafka matched its variant at every step)
SAME_ACTIONS = {"scenarios/producer/kafka-18464-kip360.json":
                "producer/kafka-18464/fenced-only-when-overtaken.json"}
HELD_DIVERGING = ROOT / "counterexamples" / "producer" / "kafka-18464" / "fenced-only-when-overtaken.json"


def trace_path(name: str) -> Path:
    return (ROOT / "tests" / name) if name.startswith("scenarios") else ROOT / "counterexamples" / name


def test_held_traces_are_the_drivable_prepares_to_hold():
    """Every drivable trace with a prepare to hold is run by the cluster tests below, or has
    the steps of one that is, up to where that one stops."""
    a = ProducerAdapter()
    drivable = set()
    for name in PREPARES_HELD:
        steps = [(st["action"], st.get("args", {})) for st in json.loads(trace_path(name).read_text())["steps"]]
        if not any(a.action_reason(action, args) for action, args in steps) and not old_marker_while_held(steps):
            drivable.add(name)
    assert drivable == set(HELD_OUTCOMES) | set(SAME_PREFIX) | set(SAME_ACTIONS) | {short(HELD_DIVERGING)}
    for name, runs in SAME_PREFIX.items():
        doc, ran = (json.loads(trace_path(n).read_text()) for n in (name, runs))
        stop = HELD_OUTCOMES[runs][1]
        assert len(doc["steps"]) >= stop, name
        assert [(st["action"], st.get("args")) for st in doc["steps"][:stop]] == \
            [(st["action"], st.get("args")) for st in ran["steps"][:stop]]
        assert (doc.get("variant"), doc.get("params"), doc.get("state")) == \
            (ran.get("variant"), ran.get("params"), ran.get("state"))
    for name, runs in SAME_ACTIONS.items():
        doc, ran = (json.loads(trace_path(n).read_text()) for n in (name, runs))
        assert [(st["action"], st.get("args")) for st in doc["steps"]] == \
            [(st["action"], st.get("args")) for st in ran["steps"]]
        model = driver.model_of(spec, doc.get("variant"), doc.get("params", {}))
        assert driver.model_of(spec, doc.get("variant"), ran.get("params", {})).params.as_dict() == \
            model.params.as_dict()
        assert driver.initial_words(model, doc) == driver.initial_words(model, ran)


@pytest.mark.kafka
@pytest.mark.parametrize("name", sorted(HELD_OUTCOMES))
def test_held_prepare_on_the_cluster(name):
    """The coordinator is held in PrepareCommit/PrepareAbort while the trace's requests come
    (DescribeTransactions shows the prepare, which is compared with the spec's), and completes
    once TxnMarkerArrives starts the stopped follower again."""
    path = trace_path(name)
    kind, step, prepared = HELD_OUTCOMES[name]
    out = replay(cluster_for("4.3.1"), path, ProducerAdapter(), "4.3.1")
    assert (out.kind, out.step) == (kind, step), out.text()
    assert any(f"transaction_state={prepared}" in resp for _, resp in out.wire), out.text()


@pytest.mark.kafka
def test_held_divergence_is_reported():
    """A held step whose spec answer Kafka does not give is a divergence: the trace of variant
    kafka-18464 (before PR #18467) says PRODUCER_FENCED for the abort that finds the coordinator
    held in PrepareAbort; 4.3.1 answers CONCURRENT_TRANSACTIONS. Without its entry in the
    expected-divergence record, that is an unexpected divergence at step 13. The same requests
    are the scenario kafka-18464-kip360's (SAME_ACTIONS): Kafka matched kip360 at every step."""
    adapter = ProducerAdapter()
    adapter.expected_divergences = []
    out = driver.run_trace(cluster_for("4.3.1"), adapter, spec, driver.load_job(HELD_DIVERGING, "producer"),
                           "4.3.1", all_variants=True)
    assert out.kind == driver.DIVERGES and out.step == 13, out.text()
    assert "outcome: spec said PRODUCER_FENCED, Kafka said CONCURRENT_TRANSACTIONS" in out.detail
    assert "kip360" in out.matches and "kafka-18464" not in out.matches, out.matches
    assert any("transaction_state=PrepareAbort" in resp for _, resp in out.wire), out.text()


@pytest.mark.kafka
@pytest.mark.parametrize("path", [p for p in FAILOVER_TRACES
                                  if short(p) not in HELD_OUTCOMES and short(p) not in SAME_PREFIX],
                         ids=short)
def test_coordinator_failover_runs_on_the_cluster(path):
    """The other traces with a CoordinatorFailover, on the session's cluster of three (4.3.1):
    each is not drivable for a reason said at a step after the failover (a step at replica 1,
    the old coordinator's marker while the new one's is held) or for its release (Kafka 2.3)."""
    doc = json.loads(path.read_text())
    adapter = ProducerAdapter()
    assert adapter.needs_cluster(doc)
    out = replay(cluster_for("4.3.1"), path, adapter, "4.3.1")
    assert out.kind == driver.NOT_DRIVABLE and out.detail, out.text()
    assert "needs the cluster" not in out.detail, out.text()
    if doc.get("variant") not in ("pre-kip360", "pre-kip360-in-flight", "kafka-8483",
                                  "unknown-producer-id", "kip360-as-proposed"):
        first = next(i for i, st in enumerate(doc["steps"], 1) if st["action"] == "CoordinatorFailover")
        said = out.step or int(out.detail.split(":")[0].removeprefix("step "))
        assert said > first, out.text()


def test_the_failover_traces_are_ten():
    """The shipped traces with a coordinator failover (the cluster test above runs each): two
    of them unknown-producer-id's and two kip360-as-proposed's, whose leader no 4.x broker is
    (not drivable at its start)."""
    assert len(FAILOVER_TRACES) == 14
