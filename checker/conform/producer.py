"""The producer spec's adapter: each coordinator- or leader-side action of spec/producer.py becomes
one real request (InitProducerId, AddPartitionsToTxn, Produce with a v2 record batch, EndTxn), the
producer's own steps (BeginTransaction, Send, ProduceRequest, DeliveryTimeout, Commit/Abort) are
the driver's client state, and what Kafka shows after each step (the response's error and epoch,
DescribeTransactions, DescribeProducers) is compared with the spec's state.

The spec's client is the oracle for what the client sends: a produce request carries the epoch
and sequence the spec's producer put on the wire (`request_epoch`, `request_seq`), EndTxn the
spec's producer epoch, so a divergence shows at the first step where Kafka answers differently,
never later through a drifted client. Kafka's producer id is the one the first InitProducerId
returns (the spec has one transactional id and so one producer id).

What a single broker cannot drive (said per trace, see NOT_DRIVABLE): the second replica
(LeaderFailover, FollowerFetch, a step at replica 1), a coordinator failover, DeleteRecords (only
the pre-KIP-360 world moves producer state with the log start, and Kafka 2.3 cannot run here),
producer-id expiry (a timer of hours), and any step that needs the coordinator held in
PrepareCommit/PrepareAbort: Kafka's coordinator sends its markers by itself as soon as it has
written the prepare (TransactionMarkerChannelManager), so the spec's WriteTxnMarker and
TxnMarkerArrives are what the driver waits for, not what it causes.
"""
from __future__ import annotations

import datetime
import io
import itertools
import time
from dataclasses import dataclass, field

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
    "InitProducerId": "InitProducerId(transactional_id, producer_id=-1, epoch=-1) from the producer",
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
    "ProduceRequest": "the driver builds the batch and holds it; it is sent when the spec's "
                      "Produce step says it arrives (so a timed-out request really arrives late)",
    "DeliveryTimeout": "the producer's state: the batch fails, the held request stays on the wire",
    "CommitTransaction": "the producer's state (EndTxn is the next request)",
    "AbortTransaction": "the producer's state (EndTxn is the next request)",
    "WriteTxnMarker": "nothing to send: Kafka's coordinator sends the marker itself",
}
NOT_DRIVABLE = {
    "CoordinatorFailover": "moving the transaction coordinator (the __transaction_state "
                           "partition's leader) needs a second broker; the conformance broker is one",
    "LeaderFailover": "the partition's second in-sync replica needs a second broker; the "
                      "conformance broker is one",
    "FollowerFetch": "the follower replica needs a second broker; the conformance broker is one",
    "DeleteRecords": "only the pre-KIP-360 world drops producer state with the log start "
                     "(Kafka 2.3, which cannot run here: no KRaft)",
    "ExpireProducer": "producer-id expiry is a timer (producer.id.expiration.ms, checked every "
                      "producer.id.expiration.check.interval.ms) that no request takes the path of",
}
UNREACHABLE_VARIANTS = {
    "pre-kip360": "models Kafka 2.3 (before KIP-360: no epoch bumps, producer state dropped with "
                  "the log start, the 2.3 client's sequence reset), a release before KRaft that "
                  "cannot run here",
}
PREPARE = ("PrepareCommit", "PrepareAbort")


def tv2(variant: str) -> bool:
    """The spec's transaction version (spec/producer.py tv2)."""
    return variant not in ("pre-kip360", "pre-kip890")


def not_drivable(variant: str, steps: list[dict]) -> str | None:
    """Why a trace of the producer spec cannot be driven on a single 4.x broker, or None.

    ``steps`` are the spec's replayed steps: dicts with 'action', 'args', 'pre' and 'post'
    (the spec's shown state before and after) and 'outcome'."""
    if variant in UNREACHABLE_VARIANTS:
        return f"variant {variant} {UNREACHABLE_VARIANTS[variant]}"
    for i, st in enumerate(steps, start=1):
        a, args, pre = st["action"], st["args"], st["pre"]
        if a in NOT_DRIVABLE:
            return f"step {i} ({a}): {NOT_DRIVABLE[a]}"
        if args.get("r", 0) != 0:
            return (f"step {i} ({a} at replica {args['r']}): the partition's second replica needs "
                    f"a second broker; the conformance broker is one")
        if "c" in args and args["c"] != 0:
            return f"step {i} ({a}): a marker of coordinator epoch {args['c']} needs a coordinator failover"
        if a in REQUESTS and a != "TxnMarkerArrives" and pre["txn_state"] in PREPARE:
            return (f"step {i} ({a}) needs the coordinator held in {pre['txn_state']}, but Kafka's "
                    f"coordinator sends its markers by itself as soon as the prepare is written "
                    f"(TransactionMarkerChannelManager), so the state cannot be held")
    return None


def spec_outcome_of_produce(kafka_error: str, base_offset: int, appended_offsets: set[int]) -> str:
    """Kafka answers a duplicate batch NONE with the offset of the batch it already holds
    (UnifiedLog.append returns the duplicate's LogAppendInfo); the spec names that
    DUPLICATE_SEQUENCE_NUMBER."""
    if kafka_error == "NONE" and base_offset in appended_offsets:
        return "DUPLICATE_SEQUENCE_NUMBER"
    return kafka_error


# ---------------------------------------------------------------------------------------------
# Comparisons: what Kafka shows, field by field, against the spec's state

def compare_transaction(post: dict, described: dict | None) -> list[tuple[str, object, object]]:
    """DescribeTransactions against the coordinator's fields: txn_state, txn_epoch and whether
    the partition is in the transaction. A state in flight (the spec still preparing while Kafka
    may already have completed) is compared at the marker step instead."""
    if described is None:
        # Kafka knows no transactional id before the first InitProducerId
        return [] if post["txn_epoch"] == -1 else [("txn_epoch", post["txn_epoch"], "no transaction")]
    out = []
    if post["txn_state"] not in PREPARE:
        if described["state"] != post["txn_state"]:
            out.append(("txn_state", post["txn_state"], described["state"]))
        if bool(described["partitions"]) != post["txn_partition"]:
            out.append(("txn_partition", post["txn_partition"], bool(described["partitions"])))
    if described["epoch"] != post["txn_epoch"]:
        out.append(("txn_epoch", post["txn_epoch"], described["epoch"]))
    return out


def compare_producer_state(post: dict, entry: dict | None) -> list[tuple[str, object, object]]:
    """DescribeProducers at the leader against replica 0's producer state entry: its epoch
    (-1: no entry), its last sequence and whether it has a transaction open."""
    out = []
    epoch = entry["epoch"] if entry else -1
    if epoch != post["producer_epoch[0]"]:
        out.append(("producer_epoch[0]", post["producer_epoch[0]"], epoch))
    if entry is not None:
        if entry["last_sequence"] != post["last_seq[0]"]:
            out.append(("last_seq[0]", post["last_seq[0]"], entry["last_sequence"]))
        if entry["txn_open"] != post["txn_open[0]"]:
            out.append(("txn_open[0]", post["txn_open[0]"], entry["txn_open"]))
    elif post["txn_open[0]"]:
        out.append(("txn_open[0]", True, False))
    return out


def compare_log(post: dict, appended: list[int]) -> list[tuple[str, object, object]]:
    """The data records in the partition's log (read back by Fetch, uncommitted included) against
    `appended` (times each record is in the log, capped at 2 as the spec caps it)."""
    out = []
    for k, n in enumerate(appended):
        want = post.get(f"appended[{k}]")
        if want is not None and min(n, 2) != want:
            out.append((f"appended[{k}]", want, min(n, 2)))
    return out


# ---------------------------------------------------------------------------------------------
# Requests (kio): built here, sent through the driver's connections

def _kio():
    """kio's modules, imported on first use so that the mapping above needs no kio."""
    import importlib
    names = {
        "init": "kio.schema.init_producer_id.v5.request",
        "end_tv1": "kio.schema.end_txn.v4.request", "end_tv2": "kio.schema.end_txn.v5.request",
        "add": "kio.schema.add_partitions_to_txn.v3.request",
        "produce_tv1": "kio.schema.produce.v11.request", "produce_tv2": "kio.schema.produce.v12.request",
        "dtxn": "kio.schema.describe_transactions.v0.request",
        "dprod": "kio.schema.describe_producers.v0.request",
        "fetch": "kio.schema.fetch.v12.request",
        "records": "kio.records", "rschema": "kio.records.schema", "rwrite": "kio.records.writers",
        "rread": "kio.records.readers", "prim": "kio.static.primitive", "types": "kio.schema.types",
        "errors": "kio.schema.errors",
    }
    return {k: importlib.import_module(v) for k, v in names.items()}


def error_name(code) -> str:
    from checker.conform.wire import error_name as name
    return name(int(code))


TRANSACTIONAL_BATCH = 0x10     # RecordBatch attributes: bit 4, isTransactional
CONTROL_BATCH = 0x20           # bit 5, isControlBatch (markers)
TXN_TIMEOUT_MS = 60_000        # longer than any trace: the real timer must not fire unasked
COORDINATOR_NOT_READY = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")


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


def record_batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
    """One transactional v2 record batch of one record, CRC32C included (kio.records)."""
    k = _kio()
    p, rs = k["prim"], k["rschema"]
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    rec = rs.Record(attributes=p.i8(0), timestamp=p.TZAwareMicros.parse(now), offset=p.i64(0),
                    key=None, value=value, headers=())
    batch = rs.NewRecordBatch(producer_id=p.i64(producer_id), producer_epoch=p.i16(epoch),
                              base_sequence=p.i32(sequence), records=(rec,),
                              attributes=p.i16(TRANSACTIONAL_BATCH))
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
class HeldRequest:
    """A produce request the spec's producer put on the wire and the driver holds."""
    record: int
    epoch: int
    sequence: int


@dataclass
class ProducerDriver:
    """Drives one trace of the producer spec on a broker.

    ``connect`` opens a connection to the broker (an object with ``call(request) -> response``);
    ``name`` is unique per trace: the topic and the transactional id."""
    connect: object
    name: str
    variant: str
    settle_timeout: float = 15.0
    producer_id: int = -1
    held: HeldRequest | None = None
    appended_offsets: dict = field(default_factory=dict)   # base offset -> record
    wire: list = field(default_factory=list)                # (request, response) per step

    def __post_init__(self):
        self.k = _kio()
        self.versions = TV2_VERSIONS if tv2(self.variant) else TV1_VERSIONS
        self.conns = {}
        self.describe_response = describe_transactions_response()

    def conn(self, who: str):
        """One connection per client: the producer, the second instance, a hidden third one,
        and the admin reads."""
        if who not in self.conns:
            self.conns[who] = self.connect()
        return self.conns[who]

    def call(self, who: str, request, response_type=None):
        return self.conn(who).send(request, response_type)

    def coordinator_call(self, who: str, request):
        """A request to the transaction coordinator, retried while the coordinator is loading or
        moving, as the producer's client retries it (the spec does not model the loading)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            response = self.call(who, request)
            if error_name(response.error_code) not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                return response
            time.sleep(0.05)

    def close(self):
        for c in self.conns.values():
            close = getattr(c, "close", None)
            if close:
                close()
        self.conns.clear()

    # setup -----------------------------------------------------------------------------------
    def setup(self):
        """The setup prefix of every trace: its own topic (one partition, one replica: the
        spec's replica 0, the leader) and a loaded transaction coordinator for its id."""
        admin = self.conn("admin")
        admin.create_topic(self.name, 1)
        admin.find_coordinator(self.name, key_type=1)

    # requests --------------------------------------------------------------------------------
    def init_producer_id(self, who: str, producer_id: int = -1, epoch: int = -1):
        m, p, t = self.k["init"], self.k["prim"], self.k["types"]
        req = m.InitProducerIdRequest(
            transactional_id=t.TransactionalId(self.name),
            transaction_timeout=p.i32Timedelta.parse(datetime.timedelta(milliseconds=TXN_TIMEOUT_MS)),
            producer_id=t.ProducerId(producer_id), producer_epoch=p.i16(epoch))
        resp = self.coordinator_call(who, req)
        return error_name(resp.error_code), int(resp.producer_id), int(resp.producer_epoch)

    def add_partitions(self, epoch: int):
        m, p, t = self.k["add"], self.k["prim"], self.k["types"]
        req = m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=t.TransactionalId(self.name),
            v3_and_below_producer_id=t.ProducerId(self.producer_id),
            v3_and_below_producer_epoch=p.i16(epoch),
            v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=t.TopicName(self.name),
                                                           partitions=(p.i32(0),)),))
        resp = self.call("producer", req)
        return error_name(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def produce(self, held: HeldRequest):
        """The held batch arrives; -> (Kafka's error, base offset). NOT_LEADER/UNKNOWN partition
        right after the topic was created is retried until the leader is known."""
        m, p, t = (self.k["produce_tv2"] if tv2(self.variant) else self.k["produce_tv1"],
                   self.k["prim"], self.k["types"])
        batch = record_batch(self.producer_id, held.epoch, held.sequence, f"record-{held.record}".encode())
        req = m.ProduceRequest(transactional_id=t.TransactionalId(self.name), acks=p.i16(-1),
                               timeout=p.i32Timedelta.parse(datetime.timedelta(seconds=30)),
                               topic_data=(m.TopicProduceData(name=t.TopicName(self.name), partition_data=(
                                   m.PartitionProduceData(index=p.i32(0), records=p.Records(batch)),)),))
        deadline = time.monotonic() + self.settle_timeout
        while True:
            resp = self.call("producer", req)
            part = resp.responses[0].partition_responses[0]
            err = error_name(part.error_code)
            if err not in ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE") \
                    or time.monotonic() > deadline:
                return err, int(part.base_offset)
            time.sleep(0.05)

    def end_txn(self, epoch: int, commit: bool):
        m, p, t = (self.k["end_tv2"] if tv2(self.variant) else self.k["end_tv1"],
                   self.k["prim"], self.k["types"])
        req = m.EndTxnRequest(transactional_id=t.TransactionalId(self.name),
                              producer_id=t.ProducerId(self.producer_id), producer_epoch=p.i16(epoch),
                              committed=commit)
        resp = self.coordinator_call("producer", req)
        return error_name(resp.error_code), int(getattr(resp, "producer_epoch", -1))

    # reads -----------------------------------------------------------------------------------
    def describe_transaction(self) -> dict | None:
        m, t = self.k["dtxn"], self.k["types"]
        resp = self.call("admin", m.DescribeTransactionsRequest(
            transactional_ids=(t.TransactionalId(self.name),)), self.describe_response)
        st = resp.transaction_states[0]
        err = error_name(st.error_code)
        if err == "TRANSACTIONAL_ID_NOT_FOUND":
            return None
        if err != "NONE":
            raise RuntimeError(f"DescribeTransactions {self.name}: {err}")
        return {"state": st.transaction_state, "epoch": int(st.producer_epoch),
                "producer_id": int(st.producer_id),
                "partitions": [(tp.topic, int(x)) for tp in st.topics for x in tp.partitions]}

    def describe_producer(self) -> dict | None:
        m, p, t = self.k["dprod"], self.k["prim"], self.k["types"]
        resp = self.call("admin", m.DescribeProducersRequest(topics=(m.TopicRequest(
            name=t.TopicName(self.name), partition_indexes=(p.i32(0),)),)))
        part = resp.topics[0].partitions[0]
        for e in part.active_producers:
            if int(e.producer_id) == self.producer_id:
                return {"epoch": int(e.producer_epoch), "last_sequence": int(e.last_sequence),
                        "txn_open": int(e.current_txn_start_offset) != -1}
        return None

    def log_records(self) -> list[int]:
        """Times each record is in the log: Fetch from offset 0, uncommitted included, data
        batches only (markers are control batches)."""
        m, p, t = self.k["fetch"], self.k["prim"], self.k["types"]
        req = m.FetchRequest(max_wait=p.i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
                             min_bytes=p.i32(0), isolation_level=p.i8(0),
                             topics=(m.FetchTopic(topic=t.TopicName(self.name), partitions=(
                                 m.FetchPartition(partition=p.i32(0), fetch_offset=p.i64(0),
                                                  partition_max_bytes=p.i32(1 << 20)),)),),
                             forgotten_topics_data=())
        resp = self.call("admin", req)
        data = resp.responses[0].partitions[0].records or b""
        counts: dict[int, int] = {}
        for b in read_batches(bytes(data)):
            if b.attributes & CONTROL_BATCH:
                continue
            for r in b.records:
                k = int(r.value.decode().split("-")[1])
                counts[k] = counts.get(k, 0) + 1
        return [counts.get(k, 0) for k in range(max(counts, default=-1) + 1)]

    def settle(self, want_complete: bool):
        """Waits (bounded, polling) until the coordinator is out of PrepareCommit/PrepareAbort:
        its markers are its own business, and a spec state out of Prepare* is compared only once
        Kafka's is too. -> the last description."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            d = self.describe_transaction()
            if d is None or d["state"] not in PREPARE or time.monotonic() > deadline:
                return d
            time.sleep(0.02)

    # one spec step ---------------------------------------------------------------------------
    def step(self, action: str, args: dict, pre: dict, post: dict, outcome) -> list[tuple]:
        """Drives one spec step; -> the mismatches (field, spec said, Kafka said)."""
        out: list[tuple] = []
        said = None                                   # Kafka's outcome, in the spec's names
        if action == "InitProducerId":
            said, pid, epoch = self.init_producer_id("producer")
            if said == "NONE":
                self.producer_id = pid
                if epoch != post["epoch"]:
                    out.append(("epoch", post["epoch"], epoch))
        elif action == "SecondInstanceInitProducerId":
            said, pid, epoch = self.init_producer_id("second")
            if said == "NONE":
                if self.producer_id == -1:
                    self.producer_id = pid
                if epoch != post["txn_epoch"]:
                    out.append(("txn_epoch", post["txn_epoch"], epoch))
        elif action == "EpochBump":
            said, pid, epoch = self.init_producer_id("producer", self.producer_id, pre["epoch"])
            if said == "NONE" and epoch != post["txn_epoch"]:
                out.append(("txn_epoch", post["txn_epoch"], epoch))
        elif action == "AbortTimedOutTransaction":
            self.init_producer_id("hidden")          # its answer is not the spec's to compare
        elif action == "AddPartitionsToTxn":
            said = self.add_partitions(pre["epoch"])
        elif action == "ProduceRequest":
            self.held = HeldRequest(post["request_record"], post["request_epoch"], post["request_seq"])
        elif action == "Produce":
            held, self.held = self.held, None
            err, offset = self.produce(held)
            said = spec_outcome_of_produce(err, offset, set(self.appended_offsets))
            if err == "NONE" and said == "NONE":
                self.appended_offsets[offset] = held.record
        elif action == "EndTxn":
            said, epoch = self.end_txn(pre["epoch"], pre["end_txn"] == "COMMIT")
            if said == "NONE" and tv2(self.variant) and epoch != post["txn_epoch"]:
                out.append(("txn_epoch", post["txn_epoch"], epoch))
        elif action == "TxnMarkerArrives":
            self.settle(True)
        elif action not in CLIENT_SIDE:
            raise ValueError(f"producer adapter: no mapping for action {action}")
        if said is not None and outcome is not None and said != outcome:
            out.insert(0, ("outcome", outcome, said))
        if action in REQUESTS:
            out += self.observe(post)
        return out

    def observe(self, post: dict) -> list[tuple]:
        """Kafka's visible state after a request step, against the spec's. While the spec's
        coordinator prepares, its markers are in flight in the spec but may already be written
        in Kafka: the partition is compared once the spec's marker has arrived."""
        if post["txn_state"] in PREPARE:
            return compare_transaction(post, self.describe_transaction())
        out = compare_transaction(post, self.settle(True))
        if self.producer_id != -1:
            out += compare_producer_state(post, self.describe_producer())
            out += compare_log(post, self.log_records())
        return out
