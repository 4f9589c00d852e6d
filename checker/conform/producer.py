"""The producer spec's adapter: each coordinator- or leader-side action of spec/producer.py becomes
one real request (InitProducerId, AddPartitionsToTxn, Produce with a v2 record batch, EndTxn), the
producer's own steps (BeginTransaction, Send, ProduceRequest, DeliveryTimeout, Commit/Abort) are
the driver's client state, and what Kafka shows after each step (the response's error and epoch,
DescribeTransactions, DescribeProducers) is compared with the spec's state.

The driver plays the producer (TransactionManager and Sender as the spec models them) from
Kafka's answers only, never from the spec's prediction: its epoch is the one InitProducerId or a
version-2 EndTxn handed out, its sequences restart at 0 with each new epoch, a produce request it
puts on the wire carries the epoch and sequence of that moment. Kafka's producer id is the one
the first InitProducerId returns (the spec has one transactional id and so one producer id).

A coordinator failover runs on the cluster of three (replica_actions): the transactional id's
__transaction_state partition gets a new leader, and the adapter's requests follow
FindCoordinator to it; requests go to the data partition's leader and the coordinator by address.

The spec's two replicas of a partition are two of the data topic's three replicas on the
cluster (REPLICAS): replica 0 its first leader, replica 1 a follower picked at the trace's start.
LeaderFailover elects the other one (Cluster.move_leader: a reassignment that puts it first and
a preferred election), a step at replica r goes to r's node, and DescribeProducers is asked at
both nodes after every step (any replica answers from its own log), so each replica's producer
state is compared, the follower's under `follower.` keys, along with which replica leads.
Expiry at replica r is Kafka's timer on r's node alone (a per-broker producer.id.expiration.ms).

Kafka's coordinator sends its markers by itself as soon as it has written the prepare
(TransactionMarkerChannelManager), so a trace that sends a request (or moves the coordinator)
while the spec's markers are still on their way needs the coordinator held in
PrepareCommit/PrepareAbort: that is the hold (see HOLD). On the cluster of three, the data topic
has three replicas and `min.insync.replicas=3`; before the request that starts the prepare, one
follower of the data partition (neither its leader, the coordinator nor a replica the spec
models: the topic's third replica) is stopped, so the
markers' append (acks=-1) is refused NOT_ENOUGH_REPLICAS and the coordinator retries it, still in
PrepareX; the spec's TxnMarkerArrives starts the follower again and the retried marker is written.

DeleteRecords is the real request (the log start moves; since KAFKA-7190 the producer state
stays, which the pre-fix variant kafka-7190 does not say: an expected divergence). Producer-id
expiry is Kafka's own timer, scheduled for the step (see EXPIRY): producer.id.expiration.ms is
set for it on the replica's node and deleted after, and the check runs every
producer.id.expiration.check.interval.ms (a static setting of the brokers kcheck starts).

What cannot be driven (said per trace, see NOT_DRIVABLE): FollowerFetch (a 4.x DeleteRecords
answers only once every live replica has the new log start, and a follower takes it at each fetch
by itself: FOLLOWER_FETCH), the second replica on a single broker, a marker of a coordinator that
moved away
(Kafka's old coordinator cancels it; the driver sends it late only if it saw it while held, and
not while the new coordinator's marker is held: see OLD_MARKER_WHILE_HELD), a produce to a held
partition (the hold itself refuses it), a hold on the single broker, and expiry on a broker
kcheck did not start (its check interval is the user's, ten minutes by default).
"""
from __future__ import annotations

import datetime
import io
import time
from dataclasses import dataclass, field

from kcheck.conform.driver import (NOT_GIVEN, Absent, Adapter, NotDrivable, RecordedDivergence,
                                   SpecStep, TimerFired, TraceRun,
                                   register_adapter)

# ---------------------------------------------------------------------------------------------
# The mapping, readable without a broker

# API versions per transaction version: Kafka decides transaction version 2 per request
# (EndTxnRequest.LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 = 4, so EndTxn v5 bumps the epoch at
# every end; ProduceRequest v12 is the first to let the leader add the partition implicitly,
# KIP-890 part 2). Version 1 clients add partitions with AddPartitionsToTxn v3, the last client
# version of that API (v4 batches transactional ids for brokers).
TV2_VERSIONS = {"Produce": 12, "EndTxn": 5, "InitProducerId": 5}
TV1_VERSIONS = {"Produce": 11, "EndTxn": 4, "InitProducerId": 5, "AddPartitionsToTxn": 3}

# spec action -> what it is on Kafka
REQUESTS = {
    "InitProducerId": "InitProducerId(transactional_id, producer_id=-1, epoch=-1) from the producer "
                      "(transactional_id null for the idempotent-only producer)",
    "SecondInstanceInitProducerId": "InitProducerId(transactional_id, producer_id=-1, epoch=-1) "
                                    "on a second connection (the second instance)",
    "AddPartitionsToTxn": "AddPartitionsToTxn v3 (transaction version 1 only)",
    "Produce": "Produce with one v2 record batch (producer id, the request's epoch and base "
               "sequence, transactional), acks=-1",
    "EndTxn": "EndTxn(committed = the producer's pending end), at the producer's epoch",
    "EpochBump": "InitProducerId(transactional_id, producer_id, the producer's epoch) (KIP-360)",
    "AbortTimedOutTransaction": "InitProducerId from a third, hidden instance, whose answer is "
                                "dropped: TransactionCoordinator.handleInitProducerId on an "
                                "Ongoing transaction runs prepareFenceProducerEpoch and the "
                                "coordinator-side abort, the same path as "
                                "abortTimedOutTransactions; the timer itself is not exercised",
    "DeleteRecords": "DeleteRecords v2 to the partition's leader at offset -1 (its high watermark, "
                     "the log end once every append is replicated): UnifiedLog."
                     "maybeIncrementLogStartOffset moves the log start, and ProducerStateManager."
                     "onLogStartOffsetIncremented keeps every producer (KAFKA-7190's fix); the log "
                     "is read back from the new log start, the deleted records counted as appended",
    "TxnMarkerArrives": "wait until DescribeTransactions shows the transaction completed (the "
                        "coordinator writes its markers by itself); a held prepare (HOLD) is "
                        "released first: the stopped follower is started again. A marker of a "
                        "coordinator that moved away is the WriteTxnMarkers request that "
                        "coordinator sent (seen while held), sent late to the leader",
}
CLIENT_SIDE = {
    "BeginTransaction": "the producer's state (no request: beginTransaction is client-side)",
    "Send": "the producer's state: the record takes the partition's next sequence",
    "ProduceRequest": "the driver builds the batch with the lowest sequence not on the wire and "
                      "holds it behind the requests it already holds; each is sent when the spec's "
                      "Produce step says it arrives, oldest first (so a timed-out request really "
                      "arrives late, and up to max.in.flight wait on the connection)",
    "DeliveryTimeout": "the producer's state: the oldest batch in flight fails, its held request "
                       "stays on the wire",
    "CommitTransaction": "the producer's state (EndTxn is the next request)",
    "AbortTransaction": "the producer's state (EndTxn is the next request)",
    "WriteTxnMarker": "nothing to send: Kafka's coordinator sends the marker itself (while "
                      "held, and retries it)",
    "IdempotentEpochBump": "the idempotent producer's own epoch bump (TransactionManager."
                           "bumpIdempotentEpochAndResetIdIfNeeded): epoch + 1, sequences from 0",
}
# Kafka's own timers, scheduled by the driver for the step that names them
TIMERS = {
    "ExpireProducer": "producer.id.expiration.ms lowered for the step on the node of replica r "
                      "only, a per-broker dynamic config (1 ms when the driver has nothing in "
                      "flight, on the wire or on its way to the partition; else 5 minutes, see "
                      "EXPIRY) until DescribeProducers at that node no longer shows the producer "
                      "or four checks passed, then deleted (UnifiedLog's "
                      "PeriodicProducerExpirationCheck, run by every replica's log, leader or "
                      "follower -> ProducerStateManager.removeExpiredProducers, which spares an "
                      "open transaction)",
}
# the steps after which Kafka is asked what it shows (_observe; a held CoordinatorFailover too)
OBSERVED = frozenset(REQUESTS) | frozenset(TIMERS) | {"LeaderFailover"}
# the requests whose answer carries the producer's epoch (InitProducerIdResponse.ProducerEpoch;
# EndTxn's too from transaction version 2, EndTxnResponse v5)
EPOCH_ANSWERS = ("InitProducerId", "SecondInstanceInitProducerId", "EpochBump")
# The spec's two replicas of a partition on the cluster of three (REPLICAS): replica 0 is the
# partition's first leader, replica 1 the follower the adapter picks at the trace's start (the
# coordinator's node when it is a follower, so that the third node, which the spec does not
# model, stays free for the hold). A step at replica r goes to r's node; DescribeProducers is
# asked at each replica's node: Partition.activeProducerState reads the local log of any replica,
# leader or follower (ReplicaManager.activeProducerState -> getPartitionOrError, no leader check),
# and a follower applies every batch and marker it fetches to its own producer state
# (UnifiedLog.appendAsFollower -> ProducerStateManager.update), all of it before the leader
# answers an acks=-1 append (Partition.checkEnoughReplicasReachOffset) or the coordinator
# completes (its markers are acks=-1 appends).
REPLICAS = ("replica 0 is the data partition's first leader, replica 1 a follower picked at the "
            "trace's start (the coordinator's node when it follows the partition); the topic's "
            "third replica is not the spec's and is the one the hold stops")
# Why FollowerFetch is not driven. The spec's step moves a follower out of a state that a 4.x
# DeleteRecords never leaves it in: the leader answers DeleteRecords only once the low watermark,
# the smallest log start offset of the live replicas (Partition.lowWatermarkIfLeader), reached
# the offset (ReplicaManager.deleteRecords -> DelayedDeleteRecords.tryComplete), and a follower
# moves its log start at each fetch by itself (ReplicaFetcherThread.processPartitionData ->
# UnifiedLog.maybeIncrementLogStartOffset with LeaderOffsetIncremented): so when the spec's
# follower is still behind, Kafka's has already fetched. Only retention (UnifiedLog.
# deleteOldSegments, which no request waits for) leaves a follower behind, and when its next
# fetch comes is the fetcher's, not the driver's. The step is enabled only after a DeleteRecords
# of the variants before KAFKA-7190 (kafka-7190 and Kafka 2.3's), which no shipped trace follows
# with it.
FOLLOWER_FETCH = ("a 4.x DeleteRecords is answered only once every live replica's log start "
                  "reached the offset (ReplicaManager.deleteRecords -> DelayedDeleteRecords, "
                  "Partition.lowWatermarkIfLeader), and a follower takes the leader's log start "
                  "at each fetch by itself (ReplicaFetcherThread.processPartitionData -> "
                  "UnifiedLog.maybeIncrementLogStartOffset): no request leaves Kafka's follower "
                  "behind for the step to move it, and only retention, which the driver cannot "
                  "time, does")
# NOT_LEADER_OR_FOLLOWER for one request and an append for the next on the same connection:
# the race of a topic just created (KAFKA-15591), whose timing is the broker's metadata
# propagation, which the driver does not control
NOT_LEADER = ("the step answers one produce NOT_LEADER_OR_FOLLOWER and lets the request queued "
              "behind it reach the leader: in Kafka that is a broker that has not yet applied the "
              "partition's creation (ReplicaManager.appendRecords -> Partition.appendRecordsToLeader, "
              "KAFKA-15591's race), whose timing is metadata propagation, not a request the driver "
              "can send")
NOT_DRIVABLE = {
    "FollowerFetch": FOLLOWER_FETCH,
    "NotLeaderOrFollower": NOT_LEADER,
}
KAFKA_2_3 = ("models Kafka 2.3 (before KIP-360: no epoch bumps, producer state dropped with the "
             "log start, the 2.3 client's sequence reset), a release before KRaft that cannot run "
             "here")
# the traces of the pre-fix variants kafka-7190 and kafka-9144 on a 4.x broker: where they part
KAFKA_7190_FIXED = ("KAFKA-7190's fix (PR #7388, Kafka 2.4) is in this release: DeleteRecords moves the log "
                    "start and the producer's state stays (UnifiedLog.maybeIncrementLogStartOffset "
                    "-> ProducerStateManager.onLogStartOffsetIncremented removes no producer), "
                    "where variant kafka-7190 drops it (ProducerStateManager.truncateHead before "
                    "the fix)")
KAFKA_9144_FIXED = ("KAFKA-9144's fix (PR #7687, long before 4.0) is in this release: a marker sets the entry's "
                    "timestamp (ProducerAppendInfo.appendEndTxnMarker -> ProducerStateEntry.update), "
                    "so a producer whose marker is seconds old does not expire with "
                    "producer.id.expiration.ms at 5 minutes, where variant kafka-9144 (timestamp -1 "
                    "after the marker) expires it at the next check")
KAFKA_20785_UNFIXED = ("KAFKA-20785's fix (PR #23204) is not in this release: a commit after the "
                       "coordinator's own abort gets INVALID_TXN_STATE (TransactionCoordinator."
                       "handleEndTransaction), as variant kafka-20785 predicts")
# What 4.x shows where those variants have dropped or expired the producer's entry (measured
# on 4.3.1): the entry kept with the transaction open after the first write, or with epoch 1 and
# last sequence -1 after the marker that bumped it (ProducerAppendInfo.appendEndTxnMarker)
KEPT_OPEN = (("producer_epoch", -1, 0), ("txn_open", False, True), ("last_seq", NOT_GIVEN, 0))
KEPT_BUMPED = (("producer_epoch", -1, 1), ("last_seq", NOT_GIVEN, -1))
UNKNOWN_PRODUCER_ID = ("has a partition leader that answers UNKNOWN_PRODUCER_ID (Kafka 2.3's "
                       "ProducerAppendInfo.checkSequence), which no 4.x broker does: since "
                       "KAFKA-7190 checkSequence accepts any sequence from a producer it has no "
                       "state for, or refuses it OUT_OF_ORDER_SEQUENCE_NUMBER after verification")
UNREACHABLE_VARIANTS = {"pre-kip360": KAFKA_2_3, "pre-kip360-in-flight": KAFKA_2_3,
                        "kafka-8483": KAFKA_2_3, "unknown-producer-id": UNKNOWN_PRODUCER_ID,
                        "kip360-as-proposed": UNKNOWN_PRODUCER_ID}
PREPARE = ("PrepareCommit", "PrepareAbort")
# Requests after which Kafka's coordinator may be preparing (an Ongoing transaction with
# partitions ends: EndTxn, or an InitProducerId that fences it, TransactionCoordinator.
# handleInitProducerId -> prepareFenceProducerEpoch and the abort)
PREPARE_STARTERS = ("EndTxn", "InitProducerId", "SecondInstanceInitProducerId", "EpochBump",
                    "AbortTimedOutTransaction")
# How the coordinator is held in PrepareCommit/PrepareAbort. The markers' append is acks=-1
# (KafkaApis.handleWriteTxnMarkersRequest -> ReplicaManager.appendRecords(requiredAcks = -1));
# Partition.appendRecordsToLeader refuses it NOT_ENOUGH_REPLICAS while the ISR is smaller than
# effectiveMinIsr (min.insync.replicas capped at the replication factor, which is why a single
# broker cannot hold: Partition.effectiveMinIsr); TransactionMarkerRequestCompletionHandler
# re-enqueues a marker refused NOT_ENOUGH_REPLICAS (a retriable error) at the same coordinator
# epoch, and only a marker written NONE removes its partition and lets the coordinator write
# CompleteCommit/CompleteAbort (maybeWriteTxnCompletion). A follower stopped (a controlled
# shutdown: the controller takes it out of the ISR at once) therefore holds every marker of the
# topic until it is back in the ISR.
HOLD = ("the data topic has 3 replicas and min.insync.replicas=3; a follower of the data partition "
        "(neither its leader, the coordinator nor one of the spec's replicas) is stopped before "
        "the request that starts the "
        "prepare, so the markers' append (acks=-1) is refused NOT_ENOUGH_REPLICAS and retried "
        "(TransactionMarkerRequestCompletionHandler) until the spec's TxnMarkerArrives starts it again")
# Why the kafka-19999 pair stops at its step 10: the old coordinator's marker must be written
# while the new coordinator's is held. Both are WriteTxnMarkers appends to the same partition,
# both at acks=-1 (KafkaApis.handleWriteTxnMarkersRequest appends every marker with
# requiredAcks = -1, whoever sends it), so the hold's gate, the partition's ISR against
# min.insync.replicas (Partition.appendRecordsToLeader), cannot tell them apart; and the only
# window that lets one through is the release, where the new coordinator's refused marker is
# already re-enqueued (TransactionMarkerRequestCompletionHandler -> TransactionMarkerChannelManager.
# addTxnMarkersToBrokerQueue, resent at the next poll of its InterBrokerSendThread, about 1,600
# times a second measured): the old marker would race it, not come first. A hold on another
# partition cannot help either: the spec's two markers are for its one partition. Nor does the
# second replica: a leader change only sends the new coordinator's retry to the new leader
# (TransactionMarkerRequestCompletionHandler retries NOT_LEADER_OR_FOLLOWER as it retries
# NOT_ENOUGH_REPLICAS), which makes the same ISR check, and stopping the new coordinator's node
# moves the coordinator again, to an epoch the trace does not have.
OLD_MARKER_WHILE_HELD = (
    "the hold is the partition's ISR against min.insync.replicas (Partition.appendRecordsToLeader), "
    "and every marker is appended at acks=-1 whoever sends it (KafkaApis."
    "handleWriteTxnMarkersRequest), so it refuses the old coordinator's marker as it refuses the "
    "new one's; releasing it lets the new coordinator's marker through at its next retry "
    "(TransactionMarkerRequestCompletionHandler re-enqueues it at once), which the old marker "
    "would race instead of coming first")
HOLD_MIN_ISR = "3"
MIN_ISR = "min.insync.replicas"
TOPIC_RESOURCE = 2             # ConfigResource.Type.TOPIC
HOLD_WAIT_S = 60.0             # bound on a follower leaving or rejoining the ISR

# Producer-id expiry (TIMERS). ProducerStateManager.isProducerExpired: no open transaction and
# now - lastTimestamp >= producer.id.expiration.ms, where lastTimestamp is the last data batch's
# max timestamp or the last marker's (ProducerAppendInfo.appendEndTxnMarker ->
# ProducerStateEntry.update, since KAFKA-9144); each log checks every
# producer.id.expiration.check.interval.ms (UnifiedLog's PeriodicProducerExpirationCheck, an
# internal static broker config: TransactionLogConfig). producer.id.expiration.ms is dynamic
# (DynamicProducerStateManagerConfig), per broker or cluster-wide; the driver sets it for the step
# on the node of the spec's replica only (IncrementalAlterConfigs on that broker's resource) and
# deletes it after, so the other replica keeps its entry as the spec's does: the traces run one at
# a time, and the producers of finished traces on that node may expire.
# The spec's ExpireProducer (kip360 and every live variant) comes only once the producer is idle,
# long after its last write; 1 ms stands for that. Only kafka-9144 expires a producer with
# something in flight (its entry's timestamp was -1 after a marker that bumped the epoch), which
# no 4.x broker does: there the driver asks whether a producer whose last write is recent
# expires, with 5 minutes.
EXPIRATION = "producer.id.expiration.ms"
EXPIRATION_CHECK = "producer.id.expiration.check.interval.ms"
EXPIRATION_CHECK_MS = 500
DEFAULT_EXPIRATION_MS = "86400000"   # TransactionLogConfig.PRODUCER_ID_EXPIRATION_MS_DEFAULT
IDLE_EXPIRATION_MS = 1
RECENT_EXPIRATION_MS = 300_000
EXPIRY_CHECKS = 4              # check intervals waited for the entry to go
EXPIRY = (f"{EXPIRATION} lowered for the step ({IDLE_EXPIRATION_MS} ms for an idle producer, "
          f"{RECENT_EXPIRATION_MS // 60_000} minutes for one with a write in flight), the check "
          f"every {EXPIRATION_CHECK_MS} ms ({EXPIRATION_CHECK})")


def hold_needed(actions: list, step: int) -> bool:
    """Whether the trace, after its step `step` (1-based) starts a prepare, sends a request to
    the coordinator or a leader, or moves the coordinator, before the next TxnMarkerArrives:
    then Kafka's coordinator must be held in PrepareX, or it completes before that request."""
    for action, _ in actions[step:]:
        if action == "TxnMarkerArrives":
            return False
        if action in REQUESTS or action == "CoordinatorFailover":
            return True
    return False


def old_marker_while_held(actions: list) -> tuple[int, int] | None:
    """(step, coordinator epoch) of the first TxnMarkerArrives of a coordinator that moved away
    while the new coordinator's markers are still held: from a CoordinatorFailover (the spec
    moves the coordinator only while it prepares, so the prepare is held and the new coordinator
    loads it and sends its markers at once, held too) until the new coordinator's marker
    arrives. OLD_MARKER_WHILE_HELD says why no hold can let that marker through; None if the
    trace has no such step."""
    epoch, held = 0, False
    for step, (action, args) in enumerate(actions, start=1):
        if action == "CoordinatorFailover":
            epoch, held = epoch + 1, True
        elif action == "TxnMarkerArrives":
            c = args.get("c", 0)
            if c == epoch:
                held = False
            elif held and c < epoch:
                return step, c
    return None


def prepares_to_hold(model, doc: dict) -> list[int]:
    """The steps (1-based) whose prepare the trace needs held, by the spec's own replay: the step
    takes a transaction with partitions into PrepareX and hold_needed. Only says which broker
    the trace needs (a cluster); while driving, the adapter decides from Kafka's answers."""
    from kcheck.conform.driver import initial_words, predict
    actions = [(st["action"], st.get("args", {})) for st in doc.get("steps", ())]
    out = []
    for s in predict(model, initial_words(model, doc), doc.get("steps", [])):
        if (s.action in PREPARE_STARTERS and s.pre["txn_state"] == "Ongoing"
                and s.post["txn_state"] in PREPARE and hold_needed(actions, s.index)):
            out.append(s.index)
    return out


def tv2(variant: str) -> bool:
    """The spec's transaction version (spec/producer.py tv2)."""
    return variant not in ("pre-kip360", "pre-kip890", "pre-kip360-in-flight", "kafka-8483")


def spec_outcome_of_produce(kafka_error: str, base_offset: int, appended_offsets: set[int]) -> str:
    """Kafka answers a duplicate batch NONE with the offset of the batch it already holds
    (UnifiedLog.append returns the duplicate's LogAppendInfo); the spec names that
    DUPLICATE_SEQUENCE_NUMBER."""
    if kafka_error == "NONE" and base_offset in appended_offsets:
        return "DUPLICATE_SEQUENCE_NUMBER"
    return kafka_error


# ---------------------------------------------------------------------------------------------
# Requests (kio): built here, sent through the driver's connections

def _kio():
    """kio's modules, imported on first use so that the mapping above needs no kio."""
    import importlib
    names = {
        "init": f"kio.schema.init_producer_id.v{TV2_VERSIONS['InitProducerId']}.request",
        "end_tv1": f"kio.schema.end_txn.v{TV1_VERSIONS['EndTxn']}.request",
        "end_tv2": f"kio.schema.end_txn.v{TV2_VERSIONS['EndTxn']}.request",
        "add": f"kio.schema.add_partitions_to_txn.v{TV1_VERSIONS['AddPartitionsToTxn']}.request",
        "produce_tv1": f"kio.schema.produce.v{TV1_VERSIONS['Produce']}.request",
        "produce_tv2": f"kio.schema.produce.v{TV2_VERSIONS['Produce']}.request",
        "dtxn": "kio.schema.describe_transactions.v0.request",
        "dprod": "kio.schema.describe_producers.v0.request",
        "fetch": "kio.schema.fetch.v12.request",
        "rschema": "kio.records.schema", "rwrite": "kio.records.writers",
        "rread": "kio.records.readers", "prim": "kio.static.primitive", "types": "kio.schema.types",
    }
    return {k: importlib.import_module(v) for k, v in names.items()}


def complete_batch(c: "Client", partition: int, record: int, outcome: str) -> None:
    """The Sender's handling of a produce response for its batch of `record` (a batch that timed
    out takes none): acknowledged (a duplicate too) or failed, it leaves the batches in flight;
    CONCURRENT_TRANSACTIONS, and OUT_OF_ORDER_SEQUENCE_NUMBER while a lower sequence is still in
    flight (TransactionManager.canRetry), keep it for a retry."""
    batches = c.in_flight.setdefault(partition, [])
    batch = next((b for b in batches if b[0] == record), None)
    if batch is None:
        return
    lower_in_flight = any(b[1] < batch[1] for b in batches)
    if outcome == "CONCURRENT_TRANSACTIONS" or (outcome == "OUT_OF_ORDER_SEQUENCE_NUMBER" and lower_in_flight):
        return
    batches.remove(batch)
    if outcome not in ("NONE", "DUPLICATE_SEQUENCE_NUMBER", "PRODUCER_FENCED") and not c.transactional:
        # TransactionManager.handleFailedBatch: requestEpochBumpForPartition
        c.bump_partitions.add(partition)


def error_name(code) -> str:
    from kcheck.conform.wire import error_name as name
    return name(int(code))


TRANSACTIONAL_BATCH = 0x10     # RecordBatch attributes: bit 4, isTransactional
CONTROL_BATCH = 0x20           # bit 5, isControlBatch (markers)
TXN_TIMEOUT_MS = 60_000        # longer than any trace: the real timer must not fire unasked
COORDINATOR_NOT_READY = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")
LEADER_NOT_READY = ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE")


def describe_transactions_response():
    """kio's DescribeTransactions v0 response with the start time read as a plain int64: Kafka
    sends -1 for a transaction that has not started, which kio's timestamp type refuses."""
    from dataclasses import field as f, fields, make_dataclass
    from kio.schema.describe_transactions.v0 import response as r
    from kio.static.primitive import i64

    def copy(cls, replace):
        spec = [(x.name, replace.get(x.name, (x.type,))[0],
                 f(metadata=replace.get(x.name, (None, x.metadata))[1]))
                for x in fields(cls)]
        names = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
        return make_dataclass(cls.__name__, spec, frozen=True, slots=True, kw_only=True,
                              namespace={n: getattr(cls, n) for n in names})

    state = copy(r.TransactionState, {"transaction_start_time": (i64, {"kafka_type": "int64"})})
    return copy(r.DescribeTransactionsResponse, {"transaction_states": (tuple[state, ...], {})})


def record_batch(producer_id: int, epoch: int, sequence: int, value: bytes,
                 transactional: bool = True) -> bytes:
    """One v2 record batch of one record (transactional, or only idempotent), CRC32C included
    (kio.records)."""
    k = _kio()
    p, rs = k["prim"], k["rschema"]
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    rec = rs.Record(attributes=p.i8(0), timestamp=p.TZAwareMicros.parse(now), offset=p.i64(0),
                    key=None, value=value, headers=())
    batch = rs.NewRecordBatch(producer_id=p.i64(producer_id), producer_epoch=p.i16(epoch),
                              base_sequence=p.i32(sequence), records=(rec,),
                              attributes=p.i16(TRANSACTIONAL_BATCH if transactional else 0))
    buf = io.BytesIO()
    k["rwrite"].write_new_batch(buf, batch)
    return buf.getvalue()


def read_batches(data: bytes) -> list:
    """The record batches of a fetch response's records (kio.records.readers.read_batch)."""
    k = _kio()
    out, off = [], 0
    while off + 12 <= len(data):
        length = int.from_bytes(data[off + 8:off + 12], "big", signed=True)
        if off + 12 + length > len(data):
            break                                  # a partial batch at the end of the fetch
        batch, size = k["rread"].read_batch(data, off)
        out.append(batch)
        off += size
    return out



@dataclass
class Client:
    """The producer's client-side state as the driver keeps it, from Kafka's answers only (the
    spec's TransactionManager and Sender, spec/producer.py): the epoch Kafka handed out, the
    next sequence, the pending end of the transaction, the batches in flight and the requests
    held on the wire."""
    transaction_version: int = 2
    transactional: bool = True        # False: the idempotent-only producer (no transactional id)
    producer_id: int = -1
    epoch: int = -1
    sent: int = 0                     # records handed to the producer
    pending_end: bool | None = None   # True: commit, False: abort
    # per partition (TxnPartitionMap): the next sequence; the batches awaiting their response,
    # oldest first, as [record, sequence]; (record, epoch, sequence) of each request on the wire
    # to its leader, in the order the broker takes them
    next_seq: dict = field(default_factory=dict)
    in_flight: dict = field(default_factory=dict)
    held: dict = field(default_factory=dict)
    # the idempotent producer's partitionsToRewriteSequences; before KAFKA-12152 (the variant
    # kafka-12152, a 2.5-2.7 client) its epoch bump restarts only those
    bump_partitions: set = field(default_factory=set)
    bump_restarts_every_partition: bool = True
    appended_offsets: dict = field(default_factory=dict)   # per partition
    markers_pending: bool = False     # Kafka's coordinator is completing a transaction with markers
    marker_partitions: set = field(default_factory=set)   # ... for these partitions
    held_by: int | None = None        # the follower stopped to hold the markers (HOLD), if held
    changed_config: bool = False      # partition verification switched off for this trace


class ProducerAdapter(Adapter):
    """spec/producer.py on a 4.x broker: one topic of `partitions` partitions and one
    transactional id per trace; on a single broker each partition's one replica is the spec's
    replica 0, on the cluster of three the spec's replicas 0 and 1 are two of its three
    (REPLICAS)."""
    spec_name = "producer"
    # the expiry check runs often so that a step's expiry takes a second (EXPIRY); the expiration
    # itself stays Kafka's default (a day) outside that step, so nothing expires unasked
    broker_settings: dict[str, str] = {EXPIRATION_CHECK: str(EXPIRATION_CHECK_MS)}
    # Kafka 4.x runs both of the spec's live client worlds: transaction version 2 (kip360, and
    # no-last-epoch, whose rule only a version-1 client can reach) and version 1 (pre-kip890,
    # run with partition verification off, see VERIFICATION); pre-kip360 is Kafka 2.3. No release
    # is recorded as running another variant than the trace's.
    releases: list = []
    # a trace with a coordinator failover runs on the cluster of three (broker.Cluster)
    replica_actions = {
        "CoordinatorFailover": "the __transaction_state partition of the transactional id gets a "
                               "new leader (Cluster.move_coordinator: AlterPartitionReassignments "
                               "and ElectLeaders); it loads the prepared transaction and sends "
                               "its markers at coordinator epoch + 1 (TransactionStateManager."
                               "loadTransactionsForTxnTopicPartition), the old one unloads it "
                               "and drops its pending markers (TransactionMarkerChannelManager."
                               "removeMarkersForTxnTopicPartition)",
        "LeaderFailover": "the data partition's other spec replica becomes its leader "
                          "(Cluster.move_leader: AlterPartitionReassignments puts it first, "
                          "ElectLeaders PREFERRED elects it: ReplicationControlManager."
                          "electLeaders, leader epoch + 1); it leads with the producer state and "
                          "the log start it built as a follower (Partition.makeLeader keeps the "
                          "local log as it is)",
    }
    # KAFKA-20785's fix (PR #23204: a commit overtaken by the coordinator's own abort is
    # PRODUCER_FENCED) is in no release tested: 4.2.2, 4.3.1 and 4.4.0 answer INVALID_TXN_STATE,
    # as the kafka-20785 variant says (measured). A release record would also judge the version-1
    # traces by kip360's rules, so the divergence is recorded per trace, with the key and both
    # values measured on 4.3.1. ``then`` names the variant of the rule the release runs, which
    # predicts the rest of the trace; the kafka-7190 and kafka-9144 traces have none: kip360
    # does not enable their diverging step (DeleteRecords of a producer kip360 keeps, an expiry
    # of a producer with a write in flight), so their steps after it are not compared.
    expected_divergences = [
        RecordedDivergence(f"producer/{name}.json", "4.0.0", "4.4.99", step,
                           (("outcome", "PRODUCER_FENCED", "INVALID_TXN_STATE"),),
                           KAFKA_20785_UNFIXED, then="kafka-20785")
        # the second: the same commit, sent while the abort is held in PrepareAbort and retried
        # after it completed
        for name, step in (("kafka-20785-kip360", 10), ("kafka-20785-prepare-abort", 11))
    ] + [
        # a trace of the variant before KAFKA-18464's fix: every 4.x release has it
        RecordedDivergence(
            "producer/kafka-18464/fenced-only-when-overtaken.json", "4.0.0", None, 13,
            (("outcome", "PRODUCER_FENCED", "CONCURRENT_TRANSACTIONS"),),
            "KAFKA-18464's fix (PR #18467, Kafka 4.0) is in this release: an EndTxn that finds "
            "the transaction in PrepareAbort with its completion pending is "
            "CONCURRENT_TRANSACTIONS before any epoch check (TransactionCoordinator."
            "endTransaction), where variant kafka-18464 says PRODUCER_FENCED", then="kip360"),
    ] + [RecordedDivergence(f"producer/kafka-7190/{name}.json", "4.0.0", None, step, diffs,
                            KAFKA_7190_FIXED)
         for name, step, diffs in (
             # the producer's entry kept through DeleteRecords: the transaction still open, its
             # last sequence 0 (the spec's variant has no entry, so no last sequence)
             ("appended-retry-is-rejected", 6, KEPT_OPEN),
             ("no-duplicate", 6, KEPT_OPEN),
             ("out-of-order-only-after-a-gap", 6, KEPT_OPEN),
             # kept after the marker that bumped the epoch: sequence -1 (Kafka's entry after a
             # marker), epoch 1
             ("marker-epoch-monotonic", 11, KEPT_BUMPED),
             ("stale-markers-are-fenced", 11, KEPT_BUMPED))] \
      + [RecordedDivergence(f"producer/kafka-9144/{name}.json", "4.0.0", None, step, diffs,
                            KAFKA_9144_FIXED)
         for name, step, diffs in (
             ("appended-retry-is-rejected", 9, KEPT_BUMPED),
             ("marker-epoch-monotonic", 11, KEPT_BUMPED),
             # at replica 1 alone: the follower keeps its entry (REPLICAS)
             ("stale-markers-are-fenced", 11,
              tuple(("follower." + key, a, b) for key, a, b in KEPT_BUMPED)))]

    def __init__(self, tv1_without_verification: bool = True, settle_timeout: float = 15.0):
        self.tv1_without_verification = tv1_without_verification
        self.settle_timeout = settle_timeout

    def needs_cluster(self, doc: dict) -> bool:
        """A coordinator or leader failover, a step at replica 1 (REPLICAS), or a prepare the
        trace needs held (HOLD), runs on the cluster of three."""
        if super().needs_cluster(doc):
            return True
        if any(st.get("args", {}).get("r", 0) != 0 for st in doc.get("steps", ())):
            return True
        if doc.get("variant") in UNREACHABLE_VARIANTS:
            return False
        from kcheck.conform.driver import model_of
        from kcheck.spec.producer import spec
        try:
            return bool(prepares_to_hold(model_of(spec, doc.get("variant"), doc.get("params", {})), doc))
        except Exception:           # a trace the spec cannot replay: run_trace says so
            return False

    # what cannot be driven -------------------------------------------------------------------
    def action_reason(self, action: str, args: dict) -> str | None:
        if action in NOT_DRIVABLE:
            return f"{action}: {NOT_DRIVABLE[action]}"
        if not any(action in kind for kind in (REQUESTS, TIMERS, CLIENT_SIDE, self.replica_actions)):
            return f"{action}: the producer adapter has no mapping for it"
        return None

    def walk_allows(self, pre: dict, action: str) -> bool:
        """A random walk asks Kafka nothing from a state it cannot hold: while the spec's
        coordinator prepares a transaction of one partition, any request but a Produce may come
        (the prepare is held: the walk runs on the cluster of three); of two partitions, only
        the markers and the producer's own steps."""
        if pre["txn_state"] not in PREPARE or action not in REQUESTS or action == "TxnMarkerArrives":
            return True
        touched = sum(bool(v) for k, v in pre.items() if k.startswith("txn_partition["))
        return action != "Produce" and touched <= 1

    def initial_reason(self, params, state: dict) -> str | None:
        """Requests reach only the spec's initial state: a new transactional id, a new topic."""
        fresh = {"client": "UNINITIALIZED", "txn_epoch": -1, "txn_state": "Empty", "sent": 0,
                 "second_instance": "NOT_STARTED", "coordinator_epoch": 0}
        for k, v in fresh.items():
            if state.get(k, v) != v:
                return (f"the trace starts with {k}={state[k]}; requests reach only a new "
                        f"transactional id's state ({k}={v})")
        if any(e != -1 for e in state.get("producer_epoch", [])):
            return "the trace starts with producer state at the partition; a new topic has none"
        if any(x != 0 for x in state.get("leader", [])):
            return (f"the trace starts with leader={state['leader']}; a new topic's partitions are "
                    f"led by replica 0")
        return None

    # driving ---------------------------------------------------------------------------------
    def begin(self, run: TraceRun, initial: dict) -> None:
        variant = getattr(run, "variant", None)
        if variant in UNREACHABLE_VARIANTS:
            raise NotDrivable(f"variant {variant} {UNREACHABLE_VARIANTS[variant]}")
        if getattr(run.params, "unknown_producer_id", 0):
            raise NotDrivable(f"unknown_producer_id=1 {UNKNOWN_PRODUCER_ID}")
        late = old_marker_while_held(run.actions)
        if late is not None:
            # known from the trace's actions alone: said before any request, as a step's reason
            raise NotDrivable(f"step {late[0]}: TxnMarkerArrives of coordinator epoch {late[1]} "
                              f"while the new coordinator's marker is held: {OLD_MARKER_WHILE_HELD}")
        self._describe = describe_transactions_response()
        transactional = bool(getattr(run.params, "transactional", 1))
        run.state["client"] = Client(transaction_version=self._version(run), transactional=transactional,
                                     bump_restarts_every_partition=variant != "kafka-12152")
        admin = self._conn(run, "admin")
        admin.create_topic(run.name, getattr(run.params, "partitions", 1))
        if transactional:
            admin.find_coordinator(run.name, key_type=1)
            self._describe_transaction(run)        # waits while the coordinator loads
        self._map_replicas(run, transactional)
        if transactional and run.state["client"].transaction_version == 1 and self.tv1_without_verification:
            set_verification(admin, False)
            run.state["client"].changed_config = True

    def end(self, run: TraceRun) -> None:
        client = run.state.get("client")
        if client is not None and client.held_by is not None:
            self._release(run, client)     # the trace ends held: the cluster gets its node back
        if client is not None and client.changed_config:
            set_verification(self._conn(run, "admin"), True)

    def drive(self, run: TraceRun, action: str, args: dict) -> dict:
        c: Client = run.state["client"]
        lost = args.get("lost", False)
        tp = args.get("t", 0)          # the partition of a partition's step
        obs: dict = {}
        if action in REQUESTS and action != "TxnMarkerArrives" and c.markers_pending and c.held_by is None:
            raise NotDrivable(f"{action} while the spec's markers are on their way, but Kafka's "
                              f"coordinator was not held (the trace's actions did not say a "
                              f"request comes before the markers arrive)")
        if action == "Produce" and c.held_by is not None:
            raise NotDrivable("Produce while the coordinator is held: the hold itself refuses it "
                              "NOT_ENOUGH_REPLICAS (Partition.appendRecordsToLeader checks the ISR "
                              "before the producer state), which is not the spec's answer")
        held = c.held_by is not None
        before = None
        if action in REQUESTS and c.transactional:
            before = self._describe_transaction(run) if held else self._settled(run)
        if (action in PREPARE_STARTERS and c.transactional and not held and before
                and before["state"] == "Ongoing" and before["partitions"]
                and hold_needed(run.actions, run.step)):
            self._hold(run, c, action, before)
        if action == "CoordinatorFailover":
            if not hasattr(run.broker, "move_coordinator"):
                raise NotDrivable("CoordinatorFailover needs the cluster of three (broker.Cluster)")
            # the spec moves the coordinator only while it prepares (the rest of its state is in
            # the log): a move after Kafka completed the transaction would not be that step
            now = self._describe_transaction(run)
            if now is None or now["state"] not in PREPARE:
                raise NotDrivable(
                    f"CoordinatorFailover while the coordinator prepares, but Kafka's transaction "
                    f"is {now['state'] if now else 'not started'} (the coordinator was not held)")
            run.broker.move_coordinator(run.name, 1)
            run.state["coordinator"] = None           # FindCoordinator names the new leader
            run.state["coordinator_epoch"] = run.state.get("coordinator_epoch", 0) + 1
            if c.held_by is not None:
                # the new coordinator loads the prepared transaction and resends its markers
                # (TransactionStateManager.loadTransactionsForTxnTopicPartition), still held
                run.state.setdefault("held_steps", set()).add(run.step)
                obs.update(self._observe(run, c, self._describe_transaction(run)))
            return obs
        if action == "TxnMarkerArrives" and args.get("c", 0) < run.state.get("coordinator_epoch", 0):
            # Kafka's old coordinator never delivers it: it drops its pending markers when it
            # unloads the partition (TransactionMarkerChannelManager.
            # removeMarkersForTxnTopicPartition) and cancels any that come back for a retry
            # (TransactionMarkerRequestCompletionHandler: no longer the coordinator). The spec's
            # late marker is the request it had on the wire: the driver sends that request.
            marker = run.state.get("markers", {}).get((args["c"], tp))
            if marker is None:
                raise NotDrivable(
                    f"TxnMarkerArrives of coordinator epoch {args['c']} after the coordinator "
                    f"moved: the old coordinator cancels its markers, and its marker was not "
                    f"seen (the prepare was not held when the spec wrote it)")
            if c.held_by is not None:
                raise NotDrivable(
                    f"TxnMarkerArrives of coordinator epoch {args['c']} while the new coordinator's "
                    f"marker is held: {OLD_MARKER_WHILE_HELD}")
            self._at_leader(run, action, tp, args.get("r", 0))
            del run.state["markers"][(args["c"], tp)]     # delivered: nothing of it on its way
            obs["outcome"] = self._write_marker(run, tp, marker)
            obs.update(self._observe(run, c, self._describe_transaction(run)))
            return obs
        if action == "TxnMarkerArrives" and args.get("c", 0) > run.state.get("coordinator_epoch", 0):
            raise NotDrivable(f"TxnMarkerArrives of coordinator epoch {args['c']} before that "
                              f"coordinator exists")
        if action in ("InitProducerId", "SecondInstanceInitProducerId", "EpochBump",
                      "AbortTimedOutTransaction"):
            who = {"InitProducerId": "producer", "SecondInstanceInitProducerId": "second",
                   "EpochBump": "producer", "AbortTimedOutTransaction": "hidden"}[action]
            pid, epoch = (c.producer_id, c.epoch) if action == "EpochBump" else (-1, -1)
            err, got_pid, got_epoch = self._init_producer_id(run, who, pid, epoch)
            if action != "AbortTimedOutTransaction":
                obs["outcome"] = err
                if err == "NONE":
                    obs["response_epoch"] = got_epoch
            if err == "NONE" and (action == "InitProducerId" or (action == "EpochBump" and not lost)):
                c.producer_id, c.epoch, c.next_seq = got_pid, got_epoch, {}
            if c.producer_id == -1 and err == "NONE":
                c.producer_id = got_pid        # the partition's state is read by producer id
        elif action == "AddPartitionsToTxn":
            obs["outcome"] = self._add_partitions(run, c, args.get("t", 0))
        elif action == "DeleteRecords":
            self._at_leader(run, action, tp, args.get("r", 0))
            self._delete_records(run, tp)
        elif action == "ExpireProducer":
            self._expire_producer(run, c, tp, args.get("r", 0))
        elif action == "LeaderFailover":
            self._leader_failover(run, tp)
        elif action == "BeginTransaction":
            c.pending_end = None
        elif action == "Send":
            seq = c.next_seq.get(tp, 0)
            c.in_flight.setdefault(tp, []).append([c.sent, seq])
            c.next_seq[tp], c.sent = seq + 1, c.sent + 1
        elif action == "ProduceRequest":
            # the Sender drains the batch with the lowest sequence that is not on the wire
            held = c.held.setdefault(tp, [])
            on_wire = {h[0] for h in held}
            waiting = [b for b in c.in_flight.get(tp, []) if b[0] not in on_wire]
            if not waiting:
                raise NotDrivable("ProduceRequest with every batch already on the wire")
            record, seq = min(waiting, key=lambda b: b[1])
            held.append((record, c.epoch, seq))
        elif action == "Produce":
            if not c.held.get(tp):
                raise NotDrivable("Produce with no request on the wire")
            self._at_leader(run, action, tp, args.get("r", 0))
            record, epoch, seq = c.held[tp].pop(0)
            err, offset = self._produce(run, c, tp, record, epoch, seq)
            obs["outcome"] = spec_outcome_of_produce(err, offset, c.appended_offsets.setdefault(tp, set()))
            if obs["outcome"] == "NONE":
                c.appended_offsets[tp].add(offset)
            if not lost:
                complete_batch(c, tp, record, obs["outcome"])
        elif action == "DeliveryTimeout":
            batches = c.in_flight.get(tp, [])
            if batches:
                batches.remove(min(batches, key=lambda b: b[1]))
            if not c.transactional:
                c.bump_partitions.add(tp)     # markSequenceUnresolved, then the bump
        elif action == "WriteTxnMarker":
            # what the coordinator sends (TransactionMarkerChannelManager.addTxnMarkersToSend: its
            # coordinator epoch, which is its __transaction_state partition's leader epoch, the
            # transaction's producer id and epoch, the result), kept while held so that the
            # marker of a coordinator that moves away can still arrive late (TxnMarkerArrives)
            if c.held_by is not None and args.get("c", 0) == run.state.get("coordinator_epoch", 0):
                now = self._describe_transaction(run)
                if now and now["state"] in PREPARE:
                    run.state.setdefault("markers", {})[(args.get("c", 0), tp)] = {
                        "coordinator_epoch": run.broker.partition("__transaction_state", 0)["leader_epoch"],
                        "producer_id": c.producer_id, "producer_epoch": now["epoch"],
                        "commit": now["state"] == "PrepareCommit",
                        "transaction_version": c.transaction_version}
        elif action == "IdempotentEpochBump":
            # bumpIdempotentProducerEpoch: sequences restart at 0 on every partition (since
            # KAFKA-12152), or only on those that asked for the bump (a 2.5-2.7 client)
            c.epoch += 1
            for p in list(c.next_seq):
                if c.bump_restarts_every_partition or p in c.bump_partitions:
                    c.next_seq[p] = 0
            c.bump_partitions.clear()
        elif action == "CommitTransaction":
            c.pending_end = True
        elif action == "AbortTransaction":
            c.pending_end = False
        elif action == "EndTxn":
            err, epoch = self._end_txn(run, c)
            obs["outcome"] = err
            if err == "NONE" and c.transaction_version == 2:
                obs["response_epoch"] = epoch
                if not lost:
                    c.epoch, c.next_seq = epoch, {}
        elif action == "TxnMarkerArrives":
            self._at_leader(run, action, tp, args.get("r", 0))
            c.markers_pending = False
            # the current coordinator's marker: Kafka's coordinator delivers it itself, so the
            # request kept for a late arrival (WriteTxnMarker while held) is no longer on its way
            run.state.get("markers", {}).pop((args.get("c", 0), tp), None)
            if c.held_by is not None:
                self._release(run, c)      # the retried marker is written: the spec's arrival
            # the marker is the coordinator's own WriteTxnMarkers: its answer goes to the
            # coordinator (TransactionMarkerRequestCompletionHandler), not to the driver
            obs["outcome"] = Absent("Kafka's coordinator sends this marker itself and reads its "
                                    "answer")
        if action in OBSERVED:
            if not c.transactional:
                obs.update(self._observe(run, c, None))
                return obs
            after = self._describe_transaction(run) if c.markers_pending or c.held_by is not None \
                else self._settled(run)
            # the coordinator began completing a transaction that has partitions: its markers
            # are on their way (the spec's WriteTxnMarker / TxnMarkerArrives follow)
            if before and before["state"] == "Ongoing" and before["partitions"] and after and \
                    after["state"] in PREPARE + ("CompleteCommit", "CompleteAbort"):
                c.markers_pending = True
                c.marker_partitions = {q for topic, q in before["partitions"] if topic == run.name}
                after = self._describe_transaction(run)
            if c.held_by is not None and not c.markers_pending:
                self._release(run, c)      # held for a prepare that did not come: nothing to hold
                after = self._describe_transaction(run)
            if c.held_by is not None:
                # Kafka is held in PrepareX: what it shows is what the spec's prepare holds
                run.state.setdefault("held_steps", set()).add(run.step)
            obs.update(self._observe(run, c, after))
        return obs

    def view(self, run: TraceRun, step: SpecStep) -> dict:
        """The spec's step in the observation keys. A step that sends nothing (CLIENT_SIDE, a
        coordinator failover that was not held) compares nothing: Kafka is not asked. The
        partition's producer state and the coordinator's state name are compared when the spec
        has no marker in flight, or when Kafka was held in PrepareX at this step (HOLD);
        otherwise Kafka may have written its marker already. The response epoch is the
        coordinator's epoch after the step, compared where Kafka's answer carries one."""
        post, v = step.post, {}
        if step.outcome is not None:
            v["outcome"] = step.outcome
        held = step.index in run.state.get("held_steps", ())
        if step.action not in OBSERVED and not (step.action == "CoordinatorFailover" and held):
            if "outcome" in v:
                v["outcome"] = Absent(f"{step.action} is the client's own step: nothing is sent")
            return v
        transactional = bool(getattr(run.params, "transactional", 1))
        if step.outcome == "NONE" and (step.action in EPOCH_ANSWERS or (
                step.action == "EndTxn" and tv2(getattr(run, "variant", None) or "kip360"))):
            # the idempotent producer's only InitProducerId answer is its epoch; no coordinator
            # keeps it
            v["response_epoch"] = post["txn_epoch"] if transactional else post["epoch"]
        partitions = range(getattr(run.params, "partitions", 1))
        for tp in partitions:
            # which spec replica leads (observed on the cluster of three only)
            v["leader" + ("" if tp == 0 else f"@{tp}")] = post[f"leader[{tp}]"]
        if transactional:
            v["txn_epoch"] = post["txn_epoch"]
        settled = post["txn_state"] not in PREPARE or held
        in_flight = Absent("the spec's markers are on their way and Kafka was not held: it may "
                           "have written them already")
        if transactional:
            v["txn_state"] = post["txn_state"] if settled else in_flight
        for tp in partitions:
            at = "" if tp == 0 else f"@{tp}"
            if transactional:
                v["txn_partition" + at] = post[f"txn_partition[{tp}]"] if settled else in_flight
            # the leader's entry and the follower's (replica r of partition t at t * 2 + r in
            # the spec's arrays); the follower's is observed on the cluster of three only
            lead = post[f"leader[{tp}]"]
            for who, x in (("", 2 * tp + lead), ("follower.", 2 * tp + 1 - lead)):
                if not settled:
                    for key in ("producer_epoch", "txn_open", "last_seq"):
                        v[who + key + at] = in_flight
                    continue
                v[who + "producer_epoch" + at] = post[f"producer_epoch[{x}]"]
                v[who + "txn_open" + at] = post[f"txn_open[{x}]"]
                if post[f"producer_epoch[{x}]"] != -1:
                    v[who + "last_seq" + at] = post[f"last_seq[{x}]"]
        v["appended"] = ([post[f"appended[{k}]"] for k in range(run.params.records)] if settled
                         else in_flight)
        return v

    # the spec's replicas (REPLICAS) ------------------------------------------------------------
    def _map_replicas(self, run: TraceRun, transactional: bool) -> None:
        """On the cluster of three: which node is the spec's replica 0 and 1 of each data
        partition (run.state["replicas"][t] = [node, node]) and which of them leads
        (run.state["spec_leader"][t]). Replica 1 is the coordinator's node if it follows the
        partition, else another partition's leader, else node 1 (the bootstrap address): the
        node left over, the topic's third replica, is then neither the coordinator nor a spec
        replica, and the hold can stop it. Nothing on a single broker (its one replica is the
        spec's replica 0)."""
        cluster = run.broker
        if not hasattr(cluster, "move_leader"):
            return
        parts = range(getattr(run.params, "partitions", 1))
        info = {}
        for tp in parts:
            self._wait(lambda: cluster.partition(run.name, tp)["leader"] >= 0,
                       f"a leader for the new partition {run.name}-{tp}")
            info[tp] = cluster.partition(run.name, tp)
        coordinator = cluster.node_at(self._coordinator(run)).node_id if transactional else None
        replicas = {}
        for tp in parts:
            leader = info[tp]["leader"]
            followers = [x for x in info[tp]["replicas"] if x != leader]
            prefer = [coordinator] + [info[u]["leader"] for u in parts if u != tp] + \
                [cluster.nodes[0].node_id] + sorted(followers)
            replicas[tp] = [leader, next(x for x in prefer if x in followers)]
        run.state["replicas"] = replicas
        run.state["spec_leader"] = {tp: 0 for tp in parts}

    def _replica(self, run: TraceRun, action: str, partition: int, replica: int) -> tuple:
        """(node id, address) of the spec's replica `replica` of a data partition; on a single
        broker only replica 0 exists (NotDrivable for replica 1)."""
        replicas = run.state.get("replicas")
        if replicas is None:
            if replica != 0:
                raise NotDrivable(f"{action} at replica {replica}: the partition's second replica "
                                  f"needs the cluster of three (broker.Cluster)")
            at = self._leader(run, partition)
            node = run.broker.node_at(at) if hasattr(run.broker, "node_at") else None
            node_id = node.node_id if node is not None else \
                int(self._conn(run, "admin", at).metadata([]).brokers[0].node_id)
            return node_id, at
        node_id = replicas[partition][replica]
        return node_id, run.broker.node(node_id).host_port

    def _at_leader(self, run: TraceRun, action: str, partition: int, replica: int) -> None:
        """A step the spec takes at its leader replica `replica`: Kafka's leader must be that
        replica's node (the spec enables it only there, and LeaderFailover is the one move)."""
        self._replica(run, action, partition, replica)     # NotDrivable for replica 1 on one broker
        lead = run.state.get("spec_leader", {}).get(partition, 0)
        if replica != lead:
            raise RuntimeError(f"{action} at replica {replica}, but the driver's leader of "
                               f"partition {partition} is replica {lead}")

    def _leader_failover(self, run: TraceRun, partition: int) -> None:
        """LeaderFailover(t): the other spec replica becomes the leader (Cluster.move_leader,
        which returns once the new leader has committed what the old one had)."""
        replicas = run.state.get("replicas")
        if replicas is None or not hasattr(run.broker, "move_leader"):
            raise NotDrivable("LeaderFailover needs the cluster of three (broker.Cluster): the "
                              "partition's other in-sync replica becomes its leader")
        new = 1 - run.state["spec_leader"][partition]
        to = replicas[partition][new]
        run.broker.move_leader(run.name, partition, to=to)
        run.state["spec_leader"][partition] = new
        run.state.setdefault("leaders", {})[partition] = run.broker.node(to).host_port

    # observations ----------------------------------------------------------------------------
    def _observe(self, run: TraceRun, c: Client, described: dict | None) -> dict:
        obs = {}
        if c.transactional:
            obs = {"txn_epoch": described["epoch"] if described else -1,
                   "txn_state": described["state"] if described else "Empty"}
        counts: dict[int, int] = {}
        replicas = run.state.get("replicas")
        for tp in range(getattr(run.params, "partitions", 1)):
            at = "" if tp == 0 else f"@{tp}"
            if c.transactional:
                obs["txn_partition" + at] = bool(described and (run.name, tp) in described["partitions"])
            # DescribeProducers at the leader and, on the cluster, at the spec's other replica
            # (REPLICAS: any replica answers from its own log)
            lead = run.state.get("spec_leader", {}).get(tp, 0)
            places = [("", None)]
            if replicas is not None:
                places.append(("follower.", run.broker.node(replicas[tp][1 - lead]).host_port))
                # the spec replica whose node Kafka's metadata names the leader (-1: neither)
                now = run.broker.partition(run.name, tp)["leader"]
                obs["leader" + at] = replicas[tp].index(now) if now in replicas[tp] else -1
            else:
                one = Absent("a single broker: the partition's one replica is the spec's "
                             "replica 0 and leads throughout")
                obs["leader" + at] = one
                for key in ("producer_epoch", "txn_open", "last_seq"):
                    obs["follower." + key + at] = one
            for who, where in places:
                entry = self._describe_producer(run, c, tp, where) if c.producer_id != -1 else None
                obs[who + "producer_epoch" + at] = entry["epoch"] if entry else -1
                obs[who + "txn_open" + at] = bool(entry and entry["txn_open"])
                if entry:
                    obs[who + "last_seq" + at] = entry["last_sequence"]
            for rec, n in self._log_records(run, tp).items():
                counts[rec] = counts.get(rec, 0) + n
        obs["appended"] = [min(counts.get(k, 0), 2) for k in range(run.params.records)]
        return obs

    # requests --------------------------------------------------------------------------------
    def _version(self, run: TraceRun) -> int:
        return 2 if tv2(getattr(run, "variant", "kip360")) else 1

    def _conn(self, run: TraceRun, who: str, at: tuple | None = None):
        """The connection of `who` to `at` (a node's address; the bootstrap node if None)."""
        conns = run.state.setdefault("connections", {})
        # while the hold has stopped node 1 (the bootstrap address), another node bootstraps
        at = at or run.state.get("bootstrap_at")
        if (who, at) not in conns:
            conns[(who, at)] = run.connect(at)
        return conns[(who, at)]

    def _coordinator(self, run: TraceRun) -> tuple:
        """The transaction coordinator's address (FindCoordinator; again after a move)."""
        if run.state.get("coordinator") is None:
            run.state["coordinator"] = tuple(self._conn(run, "bootstrap").find_coordinator(run.name, key_type=1))
        return run.state["coordinator"]

    def _leader(self, run: TraceRun, partition: int) -> tuple:
        """The address of the data partition's leader (Metadata)."""
        leaders = run.state.setdefault("leaders", {})
        if partition not in leaders:
            md = self._conn(run, "bootstrap").metadata([run.name])
            nodes = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
            for q in md.topics[0].partitions:
                leaders[int(q.partition_index)] = nodes[int(q.leader_id)]
        return leaders[partition]

    def _coordinator_call(self, run: TraceRun, who: str, request):
        """A request to the transaction coordinator, retried while the coordinator is loading or
        moving, as the producer's client retries it (the spec does not model the loading)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            response = self._conn(run, who, self._coordinator(run)).send(request)
            if error_name(response.error_code) not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                return response
            run.state["coordinator"] = None     # moved: ask FindCoordinator again
            time.sleep(0.05)   # the coordinator is loading its partition: poll again

    def _init_producer_id(self, run, who: str, producer_id: int, epoch: int):
        k = _kio()
        m, p, t = k["init"], k["prim"], k["types"]
        c: Client = run.state["client"]
        req = m.InitProducerIdRequest(
            transactional_id=t.TransactionalId(run.name) if c.transactional else None,
            transaction_timeout=p.i32Timedelta.parse(datetime.timedelta(milliseconds=TXN_TIMEOUT_MS)),
            producer_id=t.ProducerId(producer_id), producer_epoch=p.i16(epoch))
        resp = self._coordinator_call(run, who, req)
        return error_name(resp.error_code), int(resp.producer_id), int(resp.producer_epoch)

    def _add_partitions(self, run, c: Client, partition: int) -> str:
        k = _kio()
        m, p, t = k["add"], k["prim"], k["types"]
        req = m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=t.TransactionalId(run.name),
            v3_and_below_producer_id=t.ProducerId(c.producer_id),
            v3_and_below_producer_epoch=p.i16(c.epoch),
            v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=t.TopicName(run.name),
                                                           partitions=(p.i32(partition),)),))
        resp = self._conn(run, "producer", self._coordinator(run)).send(req)
        return error_name(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def _produce(self, run, c: Client, partition: int, record: int, epoch: int, seq: int):
        """The held batch arrives; -> (Kafka's error, base offset)."""
        k = _kio()
        m = k["produce_tv2"] if c.transaction_version == 2 else k["produce_tv1"]
        p, t = k["prim"], k["types"]
        batch = record_batch(c.producer_id, epoch, seq, f"record-{record}".encode(), c.transactional)
        req = m.ProduceRequest(transactional_id=t.TransactionalId(run.name) if c.transactional else None,
                               acks=p.i16(-1),
                               timeout=p.i32Timedelta.parse(datetime.timedelta(seconds=30)),
                               topic_data=(m.TopicProduceData(name=t.TopicName(run.name), partition_data=(
                                   m.PartitionProduceData(index=p.i32(partition), records=p.Records(batch)),)),))
        deadline = time.monotonic() + self.settle_timeout
        while True:
            part = self._conn(run, "producer", self._leader(run, partition)).send(req).responses[0].partition_responses[0]
            err = error_name(part.error_code)
            # a new topic's leader may not serve yet: the client retries, nothing was appended
            if err not in LEADER_NOT_READY or time.monotonic() > deadline:
                return err, int(part.base_offset)
            time.sleep(0.05)   # polling the new partition's leader, not waiting for an outcome

    def _end_txn(self, run, c: Client):
        k = _kio()
        m = k["end_tv2"] if c.transaction_version == 2 else k["end_tv1"]
        p, t = k["prim"], k["types"]
        req = m.EndTxnRequest(transactional_id=t.TransactionalId(run.name),
                              producer_id=t.ProducerId(c.producer_id), producer_epoch=p.i16(c.epoch),
                              committed=bool(c.pending_end))
        resp = self._coordinator_call(run, "producer", req)
        return error_name(resp.error_code), int(getattr(resp, "producer_epoch", -1))

    # reads -----------------------------------------------------------------------------------
    def _describe_transaction(self, run) -> dict | None:
        k = _kio()
        m, t = k["dtxn"], k["types"]
        deadline = time.monotonic() + self.settle_timeout
        while True:
            resp = self._conn(run, "admin", self._coordinator(run)).send(m.DescribeTransactionsRequest(
                transactional_ids=(t.TransactionalId(run.name),)), self._describe)
            st = resp.transaction_states[0]
            err = error_name(st.error_code)
            if err not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                break
            run.state["coordinator"] = None     # moved: ask FindCoordinator again
            time.sleep(0.05)   # the coordinator is loading __transaction_state: poll again
        if err == "TRANSACTIONAL_ID_NOT_FOUND":
            return None
        if err != "NONE":
            raise RuntimeError(f"DescribeTransactions {run.name}: {err}")
        return {"state": st.transaction_state, "epoch": int(st.producer_epoch),
                "partitions": [(tp.topic, int(x)) for tp in st.topics for x in tp.partitions]}

    def _settled(self, run) -> dict | None:
        """The coordinator's transaction once it is out of PrepareCommit/PrepareAbort (bounded
        polling: it completes by itself once its markers are written)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            d = self._describe_transaction(run)
            if d is None or d["state"] not in PREPARE or time.monotonic() > deadline:
                return d
            time.sleep(0.02)   # the coordinator is writing its markers: poll again

    # the hold (HOLD) ---------------------------------------------------------------------------
    def _hold(self, run: TraceRun, c: Client, action: str, before: dict) -> None:
        """Stop a follower of the data partition so that the markers of the prepare `action`
        starts are refused NOT_ENOUGH_REPLICAS and retried until _release."""
        cluster = run.broker
        if not hasattr(cluster, "stop_node"):
            raise NotDrivable(f"{action} starts a prepare that the trace needs held (a request "
                              f"comes before its markers arrive), and only the cluster of three "
                              f"can hold it: {HOLD}")
        if len(before["partitions"]) > 1:
            raise NotDrivable(f"{action} starts a prepare of {len(before['partitions'])} partitions "
                              f"that the trace needs held: one stopped follower holds the markers "
                              f"of every partition of the topic, where the spec's arrive one by one")
        partitions = range(getattr(run.params, "partitions", 1))
        # the spec's replicas stay up: their producer state is compared at every step (REPLICAS)
        busy = {cluster.node_at(self._coordinator(run)).node_id} | \
            {cluster.node_at(self._leader(run, tp)).node_id for tp in partitions} | \
            {x for tp in partitions for x in run.state.get("replicas", {}).get(tp, ())}
        # node 1 last: it is the bootstrap address
        free = sorted((n.node_id for n in cluster.nodes if n.node_id not in busy),
                      key=lambda node_id: (node_id == cluster.nodes[0].node_id, node_id))
        if not free:
            raise NotDrivable(f"{action}: every node leads a data partition, is a replica the "
                              f"spec models or is the coordinator; none can be stopped to hold "
                              f"the markers")
        follower = free[0]
        # the coordinator's own appends (acks=-1, transaction.state.log.min.isr=2) must go on
        # with one node stopped: wait until a node stopped by an earlier hold is back in its ISR
        self._wait(lambda: len(cluster.partition("__transaction_state", 0)["isr"]) == len(cluster.nodes),
                   f"every node in the ISR of __transaction_state-0 before stopping node {follower}")
        self._set_min_isr(run, HOLD_MIN_ISR)
        if follower == cluster.nodes[0].node_id:
            run.state["bootstrap_at"] = cluster.node(busy.pop()).host_port
        cluster.stop_node(follower)
        c.held_by = follower
        for tp in partitions:
            self._wait(lambda: self._probe(run, tp) == "NOT_ENOUGH_REPLICAS",
                       f"the leader of {run.name}-{tp} refusing acks=-1 appends with node "
                       f"{follower} stopped")

    def _release(self, run: TraceRun, c: Client) -> None:
        """Start the stopped follower again; once it is back in the ISR the coordinator's next
        retry writes the marker."""
        run.broker.start_node(c.held_by)
        for tp in range(getattr(run.params, "partitions", 1)):
            self._wait(lambda: self._probe(run, tp) == "CORRUPT_MESSAGE",
                       f"node {c.held_by} back in the ISR of {run.name}-{tp}")
        c.held_by = None

    def _write_marker(self, run: TraceRun, partition: int, marker: dict) -> str:
        """The old coordinator's WriteTxnMarkers request, sent late to the partition's leader
        (v2 with the transaction version where the broker serves it, as 4.x coordinators send
        it); -> the partition's error."""
        k = _kio()
        p, t = k["prim"], k["types"]
        conn = self._conn(run, "old-coordinator", self._leader(run, partition))
        version = min(2, conn.api_versions().get(27, (0, 1))[1])
        from kcheck.conform.wire import schema
        m = schema("write_txn_markers", version)
        extra = {"transaction_version": p.i8(marker["transaction_version"])} if version >= 2 else {}
        r = conn.send(m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
            producer_id=t.ProducerId(marker["producer_id"]), producer_epoch=p.i16(marker["producer_epoch"]),
            transaction_result=marker["commit"], coordinator_epoch=p.i32(marker["coordinator_epoch"]),
            topics=(m.WritableTxnMarkerTopic(name=t.TopicName(run.name),
                                             partition_indexes=(p.i32(partition),)),), **extra),)))
        return error_name(r.markers[0].topics[0].partitions[0].error_code)

    def _probe(self, run: TraceRun, partition: int) -> str:
        """Whether the partition's leader refuses an acks=-1 append for want of in-sync replicas:
        a Produce (acks=-1) of one batch whose CRC does not match, which the log can never append.
        Partition.appendRecordsToLeader checks the ISR first (NOT_ENOUGH_REPLICAS); otherwise the
        batch's validation refuses it (CORRUPT_MESSAGE). Not in the trace's wire log."""
        from kcheck.conform.wire import Connection
        k = _kio()
        m, p, t = k["produce_tv2"], k["prim"], k["types"]
        batch = bytearray(record_batch(-1, -1, -1, b"probe", transactional=False))
        batch[-1] ^= 1
        req = m.ProduceRequest(transactional_id=None, acks=p.i16(-1),
                               timeout=p.i32Timedelta.parse(datetime.timedelta(seconds=5)),
                               topic_data=(m.TopicProduceData(name=t.TopicName(run.name), partition_data=(
                                   m.PartitionProduceData(index=p.i32(partition), records=p.Records(bytes(batch))),)),))
        with Connection(*self._leader(run, partition), client_id=f"kcheck-{run.name}-probe") as conn:
            return error_name(conn.send(req).responses[0].partition_responses[0].error_code)

    # DeleteRecords and producer-id expiry --------------------------------------------------------
    def _delete_records(self, run: TraceRun, partition: int) -> None:
        """DeleteRecords at offset -1 (DeleteRecordsRequest.HIGH_WATERMARK): the log start moves
        to the high watermark (ReplicaManager.deleteRecords -> UnifiedLog.deleteRecordsOnLeader ->
        maybeIncrementLogStartOffset). What was appended so far is counted first, and later
        reads start at the new log start (the low watermark the response names)."""
        from kcheck.conform.wire import ms, schema
        k = _kio()
        p, t = k["prim"], k["types"]
        appended = self._log_records(run, partition)
        m = schema("delete_records", 2)
        r = self._conn(run, "admin", self._leader(run, partition)).send(m.DeleteRecordsRequest(
            topics=(m.DeleteRecordsTopic(name=t.TopicName(run.name), partitions=(
                m.DeleteRecordsPartition(partition_index=p.i32(partition), offset=p.i64(-1)),)),),
            timeout=ms(int(self.settle_timeout * 1000))))
        result = r.topics[0].partitions[0]
        err = error_name(result.error_code)
        if err != "NONE":
            raise RuntimeError(f"DeleteRecords {run.name}-{partition}: {err}")
        run.state.setdefault("deleted", {})[partition] = appended
        run.state.setdefault("log_start", {})[partition] = int(result.low_watermark)

    def _expire_producer(self, run: TraceRun, c: Client, partition: int, replica: int = 0) -> None:
        """Kafka's expiry timer for the producer at the spec's replica `replica` of the
        partition (EXPIRY): the expiration set on that replica's node only (a per-broker
        dynamic config), waited for until DescribeProducers at that node no longer shows the
        producer or EXPIRY_CHECKS checks passed, then deleted. An entry of another partition on
        that node that goes with it is a timer the trace did not ask for."""
        interval = run.broker.settings.get(EXPIRATION_CHECK) if hasattr(run.broker, "settings") else None
        if interval is None:
            raise NotDrivable(f"ExpireProducer needs {EXPIRATION_CHECK} set short at the broker's "
                              f"start (a static setting; Kafka's default checks every ten "
                              f"minutes): only the brokers kcheck starts have it ({EXPIRY})")
        node_id, at = self._replica(run, "ExpireProducer", partition, replica)
        # the spec's expiry of a producer idle at this partition (ExpireProducer's guard is per
        # partition, as Kafka's entry and its timestamp are): no batch of it in flight, no request
        # on the wire to its leader, no marker on its way to it
        idle = (not c.in_flight.get(partition) and not c.held.get(partition)
                and not (c.markers_pending and partition in c.marker_partitions)
                and not any(q == partition for _, q in run.state.get("markers", {})))
        expiration = IDLE_EXPIRATION_MS if idle else RECENT_EXPIRATION_MS
        # the trace's other entries on the same node (the node is the spec's replica of them too)
        parts = range(getattr(run.params, "partitions", 1))
        if "replicas" in run.state:
            others = [(u, x) for u in parts for x in (0, 1) if (u, x) != (partition, replica)
                      and run.state["replicas"][u][x] == node_id]
        else:       # one broker: every partition's one replica is on it
            others = [(u, 0) for u in parts if u != partition]
        def entry(u, x):
            return self._describe_producer(run, c, u, self._replica(run, "ExpireProducer", u, x)[1])
        others = [(u, x) for u, x in others if entry(u, x) is not None]
        conn = self._conn(run, "admin", at)
        saved = broker_config(conn, str(node_id), EXPIRATION)
        set_node_config(conn, str(node_id), EXPIRATION, str(expiration))
        try:
            deadline = time.monotonic() + EXPIRY_CHECKS * int(interval) / 1000
            while self._describe_producer(run, c, partition, at) is not None and time.monotonic() < deadline:
                time.sleep(0.05)   # the next check of the log's expiry timer: poll
        finally:
            set_node_config(conn, str(node_id), EXPIRATION, None, restored=saved)
        gone = [(u, x) for u, x in others if entry(u, x) is None]
        if gone:
            raise TimerFired(f"ExpireProducer at partition {partition} replica {replica} (node "
                             f"{node_id}) expired the producer at (partition, replica) {gone} as "
                             f"well ({EXPIRATION} is per broker, and that node holds them too), "
                             f"which the trace did not ask for")

    def _set_min_isr(self, run: TraceRun, value: str) -> None:
        """min.insync.replicas of the trace's topic (IncrementalAlterConfigs), waited for until
        each data partition's leader serves it (DescribeConfigs at the leader)."""
        from kio.schema.describe_configs.v4 import request as d
        from kio.schema.incremental_alter_configs.v1 import request as m
        from kio.static.primitive import i8
        r = self._conn(run, "admin").send(m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
            resource_type=i8(TOPIC_RESOURCE), resource_name=run.name, configs=(m.AlterableConfig(
                name=MIN_ISR, config_operation=i8(0), value=value),)),), validate_only=False))
        err = error_name(r.responses[0].error_code)
        if err != "NONE":
            raise RuntimeError(f"IncrementalAlterConfigs {run.name} {MIN_ISR}={value}: {err}")
        for tp in range(getattr(run.params, "partitions", 1)):
            leader = self._conn(run, "admin", self._leader(run, tp))

            def served():
                res = leader.send(d.DescribeConfigsRequest(resources=(d.DescribeConfigsResource(
                    resource_type=i8(TOPIC_RESOURCE), resource_name=run.name,
                    configuration_keys=(MIN_ISR,)),)))
                return any(x.name == MIN_ISR and x.value == value for x in res.results[0].configs)
            self._wait(served, f"the leader of {run.name}-{tp} serving {MIN_ISR}={value}")

    @staticmethod
    def _wait(condition, what: str, wait_s: float = HOLD_WAIT_S) -> None:
        deadline = time.monotonic() + wait_s
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError(f"not within {wait_s:.0f}s: {what}")
            time.sleep(0.05)   # the cluster applies a config, a stop or a start: poll

    def _describe_producer(self, run, c: Client, partition: int = 0, at: tuple | None = None) -> dict | None:
        """The producer's entry at the partition's leader, or at the replica on node `at`
        (Partition.activeProducerState: the local log's, whether leader or follower)."""
        k = _kio()
        m, p, t = k["dprod"], k["prim"], k["types"]
        req = m.DescribeProducersRequest(topics=(m.TopicRequest(
            name=t.TopicName(run.name), partition_indexes=(p.i32(partition),)),))
        # a new topic's replica may not host the partition yet
        answer, err = self._served(lambda: self._conn(run, "admin", at or self._leader(run, partition))
                                   .send(req).topics[0].partitions[0])
        if err != "NONE":
            raise RuntimeError(f"DescribeProducers {run.name}-{partition} at {at or 'the leader'}: {err}")
        for e in answer.active_producers:
            if int(e.producer_id) == c.producer_id:
                return {"epoch": int(e.producer_epoch), "last_sequence": int(e.last_sequence),
                        "txn_open": int(e.current_txn_start_offset) != -1}
        return None

    def _served(self, ask):
        """``ask()``'s partition answer and its error name, asked again (bounded by
        settle_timeout) while the partition is not served yet (LEADER_NOT_READY)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            answer = ask()
            err = error_name(answer.error_code)
            if err not in LEADER_NOT_READY or time.monotonic() > deadline:
                return answer, err
            time.sleep(0.05)

    def _log_records(self, run, partition: int = 0) -> dict[int, int]:
        """Times each record was appended: Fetch from the log start (0, or where DeleteRecords
        moved it), uncommitted included, data batches only (markers are control batches), plus
        the records DeleteRecords removed (the spec's `appended` counts appends, not what the
        log still holds)."""
        k = _kio()
        m, p, t = k["fetch"], k["prim"], k["types"]
        start = run.state.get("log_start", {}).get(partition, 0)
        req = m.FetchRequest(max_wait=p.i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
                             min_bytes=p.i32(0), isolation_level=p.i8(0),
                             topics=(m.FetchTopic(topic=t.TopicName(run.name), partitions=(
                                 m.FetchPartition(partition=p.i32(partition), fetch_offset=p.i64(start),
                                                  partition_max_bytes=p.i32(1 << 20)),)),),
                             forgotten_topics_data=())
        # a new topic's leader may not serve yet (it holds nothing then)
        fetched, err = self._served(lambda: self._conn(run, "admin", self._leader(run, partition))
                                    .send(req).responses[0].partitions[0])
        if err != "NONE":
            raise RuntimeError(f"Fetch {run.name}-{partition} from offset {start}: {err}")
        data = fetched.records or b""
        counts: dict[int, int] = dict(run.state.get("deleted", {}).get(partition, {}))
        for b in read_batches(bytes(data)):
            if b.attributes & CONTROL_BATCH:
                continue
            for r in b.records:
                rec = int(r.value.decode().split("-")[1])
                counts[rec] = counts.get(rec, 0) + 1
        return counts


def set_verification(admin, enabled: bool, wait_s: float = 15.0) -> None:
    """transaction.partition.verification.enable, cluster-wide and dynamic
    (IncrementalAlterConfigs on the broker default): a version-1 client's produce is verified
    with the coordinator (KIP-890 part 1) unless it is off."""
    set_broker_default(admin, str(admin.metadata([]).brokers[0].node_id), VERIFICATION,
                       str(enabled).lower(), wait_s)


def broker_config(conn, node_id: str, name: str) -> str:
    """The value of a broker config that node `node_id` runs (DescribeConfigs at `conn`)."""
    from kio.schema.describe_configs.v4 import request as d
    from kio.static.primitive import i8
    res = conn.send(d.DescribeConfigsRequest(resources=(d.DescribeConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name=node_id, configuration_keys=(name,)),)))
    return next((c.value for c in res.results[0].configs if c.name == name), None)


def set_node_config(conn, node_id: str, name: str, value: str | None, wait_s: float = 15.0,
                    restored: str | None = None) -> None:
    """Set (value) or delete (None) a dynamic config of broker `node_id` alone
    (IncrementalAlterConfigs on that broker's resource, sent to the node itself: `conn`) and
    wait (DescribeConfigs) until the node runs it, or, after a delete, runs `restored` again."""
    from kio.schema.incremental_alter_configs.v1 import request as m
    from kio.static.primitive import i8
    r = conn.send(m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name=node_id, configs=(m.AlterableConfig(
            name=name, config_operation=i8(0 if value is not None else 1), value=value),)),),
        validate_only=False))
    err = error_name(r.responses[0].error_code)
    if err != "NONE":
        raise RuntimeError(f"IncrementalAlterConfigs broker {node_id} {name}={value}: {err}")
    want = value if value is not None else restored
    deadline = time.monotonic() + wait_s
    while want is not None and broker_config(conn, node_id, name) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"node {node_id} does not run {name}={want} after {wait_s:.0f}s")
        time.sleep(0.05)   # the metadata log has not reached the broker yet: poll again


def set_broker_default(conn, node_id: str, name: str, value: str, wait_s: float = 15.0) -> None:
    """Set a dynamic broker config cluster-wide (IncrementalAlterConfigs on the broker
    default) and wait (polling DescribeConfigs) until node `node_id`, which `conn` reaches,
    runs it: a dynamic config travels through the metadata log."""
    from kio.schema.incremental_alter_configs.v1 import request as m
    from kio.static.primitive import i8
    r = conn.send(m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name="", configs=(m.AlterableConfig(
            name=name, config_operation=i8(0), value=value),)),),
        validate_only=False))
    err = error_name(r.responses[0].error_code)
    if err != "NONE":
        raise RuntimeError(f"IncrementalAlterConfigs {name}={value}: {err}")
    deadline = time.monotonic() + wait_s
    while broker_config(conn, node_id, name) != value:
        if time.monotonic() > deadline:
            raise RuntimeError(f"node {node_id} does not run {name}={value} after {wait_s:.0f}s")
        time.sleep(0.05)   # the metadata log has not reached the broker yet: poll again


VERIFICATION = "transaction.partition.verification.enable"
BROKER_RESOURCE = 4            # ConfigResource.Type.BROKER

register_adapter("producer", "kcheck.conform.producer:ProducerAdapter")
