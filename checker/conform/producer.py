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

What cannot be driven (said per trace, see NOT_DRIVABLE): the second replica
(LeaderFailover, FollowerFetch, a step at replica 1), markers of a coordinator that moved away, DeleteRecords (only
the pre-KIP-360 world moves producer state with the log start, and Kafka 2.3 cannot run here),
producer-id expiry (a timer of hours), and any step that needs the coordinator held in
PrepareCommit/PrepareAbort (a failover during a prepare among them): Kafka's coordinator sends
its markers by itself as soon as it has written the prepare (TransactionMarkerChannelManager), and
min.insync.replicas above the replication factor does not hold them (see CANNOT_HOLD), so the
spec's WriteTxnMarker and TxnMarkerArrives are what the driver waits for, not what it causes.
"""
from __future__ import annotations

import datetime
import io
import time
from dataclasses import dataclass, field

from checker.conform.driver import Adapter, NotDrivable, SpecStep, TraceRun, register_adapter

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
    "TxnMarkerArrives": "wait until DescribeTransactions shows the transaction completed (the "
                        "coordinator writes its markers by itself)",
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
    "WriteTxnMarker": "nothing to send: Kafka's coordinator sends the marker itself",
    "IdempotentEpochBump": "the idempotent producer's own epoch bump (TransactionManager."
                           "bumpIdempotentEpochAndResetIdIfNeeded): epoch + 1, sequences from 0",
}
NOT_DRIVABLE = {
    "LeaderFailover": "the partition's second in-sync replica needs a second broker; the "
                      "conformance broker is one",
    "FollowerFetch": "the follower replica needs a second broker; the conformance broker is one",
    "DeleteRecords": "DeleteRecords changes producer state only before KAFKA-7190 (Kafka 2.3 "
                     "and earlier, which cannot run here: no KRaft); on 4.x it moves the log "
                     "start offset and nothing the spec compares",
    "ExpireProducer": "producer-id expiry is a timer (producer.id.expiration.ms, checked every "
                      "producer.id.expiration.check.interval.ms) that no request takes the path of",
}
KAFKA_2_3 = ("models Kafka 2.3 (before KIP-360: no epoch bumps, producer state dropped with the "
             "log start, the 2.3 client's sequence reset), a release before KRaft that cannot run "
             "here")
UNREACHABLE_VARIANTS = {"pre-kip360": KAFKA_2_3, "pre-kip360-in-flight": KAFKA_2_3,
                        "kafka-8483": KAFKA_2_3}
PREPARE = ("PrepareCommit", "PrepareAbort")
# Why the coordinator cannot be held in PrepareCommit/PrepareAbort on 4.x. Raising the data
# topic's min.insync.replicas above its replication factor does not hold the markers: the leader
# caps it at the replication factor (Partition.effectiveMinIsr: minInSyncReplicas.min(
# remoteReplicasMap.size + 1)), so the markers' acks=-1 append goes through (measured on 4.2.2,
# 4.3.1 and 4.4.0: with min.insync.replicas=2 on a topic of one replica, a produce with acks=-1
# is never refused NOT_ENOUGH_REPLICAS within 15 s).
CANNOT_HOLD = ("Kafka's coordinator sends its markers by itself as soon as the prepare is written "
               "(TransactionMarkerChannelManager), and min.insync.replicas above the replication "
               "factor does not hold them: the leader caps it at the replication factor "
               "(Partition.effectiveMinIsr)")


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
    from checker.conform.wire import error_name as name
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
    changed_config: bool = False      # partition verification switched off for this trace


class ProducerAdapter(Adapter):
    """spec/producer.py on a 4.x broker: one topic of one partition (replica 0, the leader) and
    one transactional id per trace."""
    spec_name = "producer"
    broker_settings: dict[str, str] = {}
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
    }
    # KAFKA-20785's fix (PR #23204: a commit overtaken by the coordinator's own abort is
    # PRODUCER_FENCED) is in no release tested: 4.2.2, 4.3.1 and 4.4.0 answer INVALID_TXN_STATE,
    # as the kafka-20785 variant says (measured). A release record would also judge the version-1
    # traces by kip360's rules, so the divergence is recorded per trace.
    expected_divergences = [
        ("producer/kafka-20785-kip360.json", "4.0.0", "4.4.99", 10,
         "KAFKA-20785's fix (PR #23204) is not in this release: a commit after the coordinator's "
         "own abort gets INVALID_TXN_STATE (TransactionCoordinator.handleEndTransaction), as "
         "variant kafka-20785 predicts"),
    ]

    def __init__(self, tv1_without_verification: bool = True, settle_timeout: float = 15.0):
        self.tv1_without_verification = tv1_without_verification
        self.settle_timeout = settle_timeout

    # what cannot be driven -------------------------------------------------------------------
    def action_reason(self, action: str, args: dict) -> str | None:
        if action in NOT_DRIVABLE:
            return f"{action}: {NOT_DRIVABLE[action]}"
        if args.get("r", 0) != 0:
            return (f"{action} at replica {args['r']}: the partition's second replica needs a "
                    f"second broker; the conformance broker is one")
        if action not in REQUESTS and action not in self.replica_actions and action not in CLIENT_SIDE:
            return f"{action}: the producer adapter has no mapping for it"
        return None

    def walk_allows(self, pre: dict, action: str) -> bool:
        """A random walk asks Kafka nothing from a state it cannot hold: while the spec's
        coordinator prepares, only the markers and the producer's own steps may come next."""
        return pre["txn_state"] not in PREPARE or action not in REQUESTS or action == "TxnMarkerArrives"

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
        self._describe = describe_transactions_response()
        transactional = bool(getattr(run.params, "transactional", 1))
        run.state["client"] = Client(transaction_version=self._version(run), transactional=transactional,
                                     bump_restarts_every_partition=variant != "kafka-12152")
        admin = self._conn(run, "admin")
        admin.create_topic(run.name, getattr(run.params, "partitions", 1))
        if transactional:
            admin.find_coordinator(run.name, key_type=1)
            self._describe_transaction(run)        # waits while the coordinator loads
        if transactional and run.state["client"].transaction_version == 1 and self.tv1_without_verification:
            set_verification(admin, False)
            run.state["client"].changed_config = True

    def end(self, run: TraceRun) -> None:
        client = run.state.get("client")
        if client is not None and client.changed_config:
            set_verification(self._conn(run, "admin"), True)

    def drive(self, run: TraceRun, action: str, args: dict) -> dict:
        c: Client = run.state["client"]
        lost = args.get("lost", False)
        tp = args.get("t", 0)          # the partition of a partition's step
        obs: dict = {}
        if action in REQUESTS and action != "TxnMarkerArrives" and c.markers_pending:
            raise NotDrivable(f"{action} needs the coordinator held in PrepareCommit/PrepareAbort, "
                              f"but {CANNOT_HOLD}")
        before = self._settled(run) if action in REQUESTS and c.transactional else None
        if action == "CoordinatorFailover":
            if not hasattr(run.broker, "move_coordinator"):
                raise NotDrivable("CoordinatorFailover needs the cluster of three (broker.Cluster)")
            # the spec moves the coordinator only while it prepares (the rest of its state is in
            # the log): a move after Kafka completed the transaction would not be that step
            now = self._describe_transaction(run)
            if now is None or now["state"] not in PREPARE:
                raise NotDrivable(
                    f"CoordinatorFailover while the coordinator prepares, but Kafka's transaction "
                    f"is {now['state'] if now else 'not started'}: {CANNOT_HOLD}")
            run.broker.move_coordinator(run.name, 1)
            run.state["coordinator"] = None           # FindCoordinator names the new leader
            run.state["coordinator_epoch"] = run.state.get("coordinator_epoch", 0) + 1
            return obs
        if action == "TxnMarkerArrives" and args.get("c", 0) < run.state.get("coordinator_epoch", 0):
            raise NotDrivable(
                f"TxnMarkerArrives of coordinator epoch {args['c']} after the coordinator moved: the "
                f"old coordinator drops its pending markers when it unloads the partition "
                f"(TransactionMarkerChannelManager.removeMarkersForTxnTopicPartition), so they never "
                f"arrive")
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
            pass
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
            c.markers_pending = False
        if action in REQUESTS:
            if not c.transactional:
                obs.update(self._observe(run, c, None))
                return obs
            after = self._settled(run) if not c.markers_pending else self._describe_transaction(run)
            # the coordinator began completing a transaction that has partitions: its markers
            # are on their way (the spec's WriteTxnMarker / TxnMarkerArrives follow)
            if before and before["state"] == "Ongoing" and before["partitions"] and after and \
                    after["state"] in PREPARE + ("CompleteCommit", "CompleteAbort"):
                c.markers_pending = True
                after = self._describe_transaction(run)
            obs.update(self._observe(run, c, after))
        return obs

    def view(self, run: TraceRun, step: SpecStep) -> dict:
        """The spec's step in the observation keys. The partition's producer state and the
        coordinator's state name are compared only when the spec has no marker in flight (Kafka
        may have written it already); the response epoch is the coordinator's epoch after the
        step."""
        post, v = step.post, {}
        if step.outcome is not None:
            v["outcome"] = step.outcome
        self._describe = describe_transactions_response()
        transactional = bool(getattr(run.params, "transactional", 1))
        # the idempotent producer's only InitProducerId answer is its epoch; no coordinator keeps it
        v["response_epoch"] = post["txn_epoch"] if transactional else post["epoch"]
        if transactional:
            v["txn_epoch"] = post["txn_epoch"]
        if post["txn_state"] not in PREPARE:
            if transactional:
                v["txn_state"] = post["txn_state"]
            for tp in range(getattr(run.params, "partitions", 1)):
                # the leader's entry: replica 0 of the partition (t * 2 in the spec's arrays)
                at = "" if tp == 0 else f"@{tp}"
                if transactional:
                    v["txn_partition" + at] = post[f"txn_partition[{tp}]"]
                v["producer_epoch" + at] = post[f"producer_epoch[{2 * tp}]"]
                v["txn_open" + at] = post[f"txn_open[{2 * tp}]"]
                if post[f"producer_epoch[{2 * tp}]"] != -1:
                    v["last_seq" + at] = post[f"last_seq[{2 * tp}]"]
            v["appended"] = [post[f"appended[{k}]"] for k in range(run.params.records)]
        return v

    # observations ----------------------------------------------------------------------------
    def _observe(self, run: TraceRun, c: Client, described: dict | None) -> dict:
        obs = {}
        if c.transactional:
            obs = {"txn_epoch": described["epoch"] if described else -1,
                   "txn_state": described["state"] if described else "Empty"}
        counts: dict[int, int] = {}
        for tp in range(getattr(run.params, "partitions", 1)):
            at = "" if tp == 0 else f"@{tp}"
            if c.transactional:
                obs["txn_partition" + at] = bool(described and (run.name, tp) in described["partitions"])
            entry = self._describe_producer(run, c, tp) if c.producer_id != -1 else None
            obs["producer_epoch" + at] = entry["epoch"] if entry else -1
            obs["txn_open" + at] = bool(entry and entry["txn_open"])
            if entry:
                obs["last_seq" + at] = entry["last_sequence"]
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

    def _describe_producer(self, run, c: Client, partition: int = 0) -> dict | None:
        k = _kio()
        m, p, t = k["dprod"], k["prim"], k["types"]
        resp = self._conn(run, "admin", self._leader(run, partition)).send(m.DescribeProducersRequest(topics=(m.TopicRequest(
            name=t.TopicName(run.name), partition_indexes=(p.i32(partition),)),)))
        for e in resp.topics[0].partitions[0].active_producers:
            if int(e.producer_id) == c.producer_id:
                return {"epoch": int(e.producer_epoch), "last_sequence": int(e.last_sequence),
                        "txn_open": int(e.current_txn_start_offset) != -1}
        return None

    def _log_records(self, run, partition: int = 0) -> dict[int, int]:
        """Times each record is in the log: Fetch from offset 0, uncommitted included, data
        batches only (markers are control batches)."""
        k = _kio()
        m, p, t = k["fetch"], k["prim"], k["types"]
        req = m.FetchRequest(max_wait=p.i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
                             min_bytes=p.i32(0), isolation_level=p.i8(0),
                             topics=(m.FetchTopic(topic=t.TopicName(run.name), partitions=(
                                 m.FetchPartition(partition=p.i32(partition), fetch_offset=p.i64(0),
                                                  partition_max_bytes=p.i32(1 << 20)),)),),
                             forgotten_topics_data=())
        data = self._conn(run, "admin", self._leader(run, partition)).send(req).responses[0].partitions[0].records or b""
        counts: dict[int, int] = {}
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
    with the coordinator (KIP-890 part 1) unless it is off. Waits (polling DescribeConfigs)
    until the broker runs the new value: a dynamic config travels through the metadata log."""
    from kio.schema.describe_configs.v4 import request as d
    from kio.schema.incremental_alter_configs.v1 import request as m
    from kio.static.primitive import i8
    value = str(enabled).lower()
    r = admin.send(m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name="", configs=(m.AlterableConfig(
            name=VERIFICATION, config_operation=i8(0), value=value),)),),
        validate_only=False))
    err = error_name(r.responses[0].error_code)
    if err != "NONE":
        raise RuntimeError(f"IncrementalAlterConfigs {VERIFICATION}={value}: {err}")
    node = str(admin.metadata([]).brokers[0].node_id)
    deadline = time.monotonic() + wait_s
    while True:
        res = admin.send(d.DescribeConfigsRequest(resources=(d.DescribeConfigsResource(
            resource_type=i8(BROKER_RESOURCE), resource_name=node, configuration_keys=(VERIFICATION,)),)))
        if any(c.name == VERIFICATION and c.value == value for c in res.results[0].configs):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the broker does not run {VERIFICATION}={value} after {wait_s:.0f}s")
        time.sleep(0.05)   # the metadata log has not reached the broker yet: poll again


VERIFICATION = "transaction.partition.verification.enable"
BROKER_RESOURCE = 4            # ConfigResource.Type.BROKER

register_adapter("producer", "checker.conform.producer:ProducerAdapter")
