"""Idempotent and transactional producers with KIP-360 epoch bumps (seed 003) and KIP-890's
epoch bump at the end of every transaction (transaction version 2).

One transactional id, one partition (`partitions`, up to 2) with two in-sync replicas, one
transaction coordinator. The producer instance (called "the producer") initialises, runs
transactions, sends one record per batch with one batch in flight per partition by default
(max.in.flight.requests.per.connection=1, `max_in_flight` up to 5), retries after a
lost response, and times a request out while it is still on the wire (the request may arrive
later: a zombie request). A second instance with the same transactional id may initialise at
any time and so fence the first. Brokers: per replica the producer state entry (epoch, the
retained sequence window, open transaction, coordinator epoch, last data offset), the log
start offset (a follower learns the leader's by fetching), DeleteRecords, producer-id expiry,
leader failover. The coordinator: InitProducerId with and without the current epoch, the last
epoch kept for retries, EndTxn, transaction markers, coordinator failover (a retry reaches the
new coordinator; a marker of the old one may still be on the wire).

With `transactional=0` the producer is the idempotent-only producer (no transactional id): no
transaction and no coordinator; after a failed or timed-out batch it bumps its own epoch once
nothing is in flight and restarts its sequences at 0 (KIP-360's client, KAFKA-8805).
With `unknown_producer_id=1` (variant unknown-producer-id) the partition leader is one from before
KAFKA-7190: it drops a producer's state with its segments and answers UNKNOWN_PRODUCER_ID, and
today's client takes its recovery path (TransactionManager.canRetry): the transactional producer
restarts its sequences at the same epoch when its last acknowledged offset is below the log
start, else aborts (and bumps); the idempotent producer bumps its epoch, renumbers its batches
in flight and retries.
Variant kip360-as-proposed is unknown-producer-id with the client as KIP-360's text proposed it
(no sequence is ever re-assigned: UNKNOWN_PRODUCER_ID fails the batch and the bump that follows
restarts the sequences). With `not_leader=1` a produce request may be answered
NOT_LEADER_OR_FOLLOWER by a broker not leading the partition yet, so a later batch can overtake
an earlier one (KAFKA-15591: since Kafka 4.5 a leader with no state on a partition never written
takes only sequence 0), and the client keeps its last acknowledged sequence.
With `max_in_flight` > 1 up to that many batches of a partition await their response and as many
requests queue on the connection to its leader: the Sender drains in sequence order and re-sends
a batch only once it is the first in flight; the leader keeps the last five batches' metadata.
With `partitions=2` each partition has its own sequences, batches, leader and replicas' producer
state; a transaction adds each partition it touches, and the coordinator writes one marker per
partition and completes once all are written.

Decisions are named rules: `produce-append` (the leader's check of a produce request),
`init-producer-id` (the coordinator's InitProducerId decision), `end-txn` (EndTxn),
`marker-append` (the leader's check of a transaction marker). spec/producer_notes.md says
which Kafka code each rule follows and what the model leaves out.

Properties:
- no-duplicate: no record is appended twice.
- in-order: a producer's appended records keep their send order within a partition.
- fenced-stays-fenced: once a newer instance initialised, the older one never appends again.
- no-hanging-transaction: no transactional record is appended for a transaction the
  coordinator does not consider ongoing at that partition.
- marker-epoch-monotonic: the coordinator epoch on a partition's markers never decreases.
- acknowledged-is-appended: a record the leader acknowledges is in the log (seed problem 2).
- new-records-in-order: a record not yet in the log is never appended after a later one
  (KAFKA-8483).
- out-of-order-only-after-a-gap: OUT_OF_ORDER_SEQUENCE_NUMBER only when an earlier record of the
  partition is missing from the log (KAFKA-12152).
- fenced-only-when-overtaken: EndTxn is answered PRODUCER_FENCED only once a newer instance or
  the coordinator moved the epoch past the producer's (KAFKA-18464).
- aborted-commit-is-fenced: a commit the coordinator's own abort overtook is answered
  PRODUCER_FENCED, not the fatal INVALID_TXN_STATE (KAFKA-20785).
Progress: every-transaction-ends (a transaction open at the partition is closed by a marker) and
every-prepared-transaction-completes (a transaction the coordinator prepares completes).

Known bugs (spec.known_bug, at the end): each is kip360 with one fix undone and named after its
JIRA, or recorded as not expressible with what the spec would need.
"""
import functools

from kcheck import FALSE, TRUE, Array, Bool, Case, Count, Enum, Int, Spec, If, And, Or, Min, Max

spec = Spec("producer", __doc__)
spec.param("records", 2, lo=1, hi=6, doc="records the producer sends, one per batch")
spec.param("max_epoch", 3, lo=1, hi=12, doc="producer epoch cap of the explicit search")
spec.param("coordinator_failovers", 1, lo=0, hi=2, doc="transaction coordinator failovers")
spec.param("leader_failovers", 1, lo=0, hi=3, doc="partition leader failovers")
spec.param("deletions", 1, lo=0, hi=3, doc="DeleteRecords calls (or retention passes)")
spec.param("max_in_flight", 1, lo=1, hi=5, doc="max.in.flight.requests.per.connection: batches of "
           "the partition awaiting their response, and requests on the wire")
spec.param("transactional", 1, lo=0, hi=1, doc="1: a transactional producer (transactional.id set); "
           "0: the idempotent-only producer, which bumps its own epoch (KIP-360)")
spec.param("unknown_producer_id", 0, lo=0, hi=1, doc="1: the partition leader is one from before "
           "KAFKA-7190 (Kafka 2.3 and older): it drops a producer's state with its segments and answers "
           "UNKNOWN_PRODUCER_ID to a sequence other than 0 from a producer it has no state for, so "
           "the client's KIP-360 recovery (TransactionManager.canRetry) is reached")
spec.param("partitions", 1, lo=1, hi=2, doc="partitions the producer writes to, each with its own "
           "sequences, leader and replicas' producer state; a transaction spans those it touches")
spec.param("not_leader", 0, lo=0, hi=1, doc="1: a produce request may reach a broker that does not "
           "lead the partition (yet: a topic just created whose metadata it has not applied) and be "
           "answered NOT_LEADER_OR_FOLLOWER with nothing appended, which the Sender retries, so a "
           "later request of the partition can be appended first (KAFKA-15591); the client then "
           "tracks its last acknowledged sequence (TransactionManager.isNextSequence)")

Error = spec.outcomes(Enum("Error", """NONE DUPLICATE_SEQUENCE_NUMBER OUT_OF_ORDER_SEQUENCE_NUMBER
    UNKNOWN_PRODUCER_ID INVALID_PRODUCER_EPOCH PRODUCER_FENCED INVALID_TXN_STATE
    CONCURRENT_TRANSACTIONS TRANSACTION_COORDINATOR_FENCED REQUEST_TIMED_OUT NOT_LEADER_OR_FOLLOWER"""))
ClientState = Enum("ClientState", """UNINITIALIZED INITIALIZING READY IN_TRANSACTION
    COMMITTING_TRANSACTION ABORTING_TRANSACTION ABORTABLE_ERROR FATAL_ERROR""")
EndTxnRequest = Enum("EndTxnRequest", "NO_REQUEST COMMIT ABORT")
SecondInstance = Enum("SecondInstance", "NOT_STARTED INITIALIZING READY")
TxnState = Enum("TxnState", "Empty Ongoing PrepareCommit PrepareAbort CompleteCommit CompleteAbort")

REPLICAS = 2
BATCHES_RETAINED = 5    # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_EPOCH = -1
# the variants that are Kafka 2.3 as a whole (pre-kip360, and the same at two batches in flight)
KAFKA_2_3 = ("pre-kip360", "pre-kip360-in-flight", "kafka-8483")


def tv2(s):
    """Transaction version 2 (KIP-890): partition verification on produce and an epoch bump at
    every EndTxn. The 2.x world of pre-kip360 predates both; pre-kip890 removes them."""
    return s.variant not in KAFKA_2_3 + ("pre-kip890",)


def kip360_client(s):
    return s.variant not in KAFKA_2_3


def slots(p):
    """Slots for the batches in flight before the newest one, and for the requests queued behind
    the one at the head of the connection: max.in.flight - 1 each (one, always empty, at 1)."""
    return max(1, p.max_in_flight - 1)


def truncate_head_drops_state(s, p):
    """Before KAFKA-7190 (Kafka 2.4) ProducerStateManager.truncateHead removed a producer whose
    last data offset fell below the new log start offset; since then the state stays until the
    producer id expires."""
    return s.variant in KAFKA_2_3 + ("kafka-7190",) or answers_unknown_producer_id(s, p)


def as_proposed(s):
    """The client as KIP-360's text proposed it (variant kip360-as-proposed): "Assignment of the
    epoch/sequence number to a record batch is permanent", so UNKNOWN_PRODUCER_ID never restarts
    a batch's sequence; the transactional producer aborts (and the abort bumps the epoch), the
    idempotent one bumps its epoch once nothing is in flight. Kafka's client kept the reset
    (TransactionManager.canRetry: startSequencesAtBeginning for the transactional producer,
    requestEpochBumpForPartition and a retry of the renumbered batch for the idempotent one)."""
    return s.variant == "kip360-as-proposed"


def answers_unknown_producer_id(s, p):
    """The partition leader answers UNKNOWN_PRODUCER_ID (Kafka 2.3's ProducerAppendInfo.
    checkSequence): the 2.3 world, or any variant with `unknown_producer_id=1`."""
    return s.variant in KAFKA_2_3 or bool(p.unknown_producer_id)


@spec.state
def state(p):
    E = lambda: Int(NO_EPOCH, p.max_epoch, search_bound=True)
    F, P, W = p.coordinator_failovers, p.partitions, slots(p)
    return {
        # the producer (TransactionManager + Sender)
        "client": ClientState,
        "epoch": E(),
        "epoch_bump_required": Bool,            # TV1 + KIP-360: bump the epoch at the next abort
        "epoch_bump": Bool,                     # InitProducerId with its epoch is in progress
        "end_txn": EndTxnRequest,               # the EndTxn it is waiting for
        "sent": Int(0, p.records),              # records handed to the producer so far
        "record_partition": Array(Int(0, p.partitions - 1), p.records),  # where each one went
        # per partition (TransactionManager.TxnPartitionMap's entry, the Sender's batches):
        "partition_in_txn": Array(Bool, P),     # the partition is part of the current transaction
        "batch": Array(Bool, P),                # its newest batch awaits its produce response
        "batch_record": Array(Int(0, p.records - 1), P),  # the newest batch's record
        "batch_seq": Array(Int(0, p.records), P),
        "next_seq": Array(Int(0, p.records), P),
        # the idempotent producer's partitionsToRewriteSequences: a failed batch asked for the bump
        "epoch_bump_partition": Array(Bool, P),
        # the produce request at the head of the partition leader's connection (it outlives a
        # client-side timeout)
        "request": Array(Bool, P),
        "request_record": Array(Int(0, p.records - 1), P),
        "request_seq": Array(Int(0, p.records), P),
        "request_epoch": Array(E(), P),
        # with max_in_flight > 1: the earlier batches still awaiting their response, oldest
        # first with no gaps (records earlier_record[i], all sent before `batch`), whether
        # `batch` and each earlier batch but the oldest was ever sent (a retry waits until it is
        # the first in flight), and the requests queued on the connection behind `request`, in
        # the order the broker takes them; max_in_flight - 1 slots each
        # (every per-partition array below holds partition t's slots at t * slots .. )
        "earlier_batch": Array(Bool, P * W),
        "earlier_record": Array(Int(0, p.records - 1), P * W),
        "earlier_seq": Array(Int(0, p.records), P * W),
        "earlier_sent": Array(Bool, P * W),
        "batch_sent": Array(Bool, P),
        # before KAFKA-8483 only: the records of the batches in flight in the order of the
        # client's PriorityQueue array (-1: free); empty in every other variant
        "in_flight_heap": Array(Int(-1, p.records - 1), P * p.max_in_flight),
        "next_request": Array(Bool, P * W),
        "next_request_record": Array(Int(0, p.records - 1), P * W),
        "next_request_seq": Array(Int(0, p.records), P * W),
        "next_request_epoch": Array(E(), P * W),
        # the second instance with the same transactional id
        "second_instance": SecondInstance,
        # the transaction coordinator (its state is in the transaction log)
        "txn_epoch": E(),
        "txn_last_epoch": E(),
        "txn_state": TxnState,
        "txn_partition": Array(Bool, P),        # the partition is in the coordinator's transaction
        "coordinator_epoch": Int(0, F),
        # marker for partition t sent by coordinator epoch c, on the wire (at c * partitions + t)
        "marker": Array(Bool, (F + 1) * P),
        "marker_epoch": Array(E(), (F + 1) * P),
        "marker_commit": Array(Bool, (F + 1) * P),
        # each partition: two in-sync replicas, per replica the producer state entry (replica r
        # of partition t at t * 2 + r)
        "leader": Array(Int(0, REPLICAS - 1), P),
        "leader_failovers": Int(0, p.leader_failovers),
        "deletions": Int(0, p.deletions),
        # offsets, as the comparisons Kafka makes with a replica's log start offset
        "log_start_behind": Array(Bool, P * REPLICAS),   # has not yet seen the leader's log start
        "acked_below_log_start": Array(Bool, P * REPLICAS),  # the producer's last acked offset is
        "data_below_log_start": Array(Bool, P * REPLICAS),   # its last data offset is
        "producer_epoch": Array(E(), P * REPLICAS),                  # -1: no entry
        "first_seq": Array(Int(-1, p.records), P * REPLICAS),        # retained window first..last
        "last_seq": Array(Int(-1, p.records), P * REPLICAS),
        "txn_open": Array(Bool, P * REPLICAS),
        "entry_coordinator_epoch": Array(Int(-1, F), P * REPLICAS),
        # history, for the properties
        "appended": Array(Int(0, 2), p.records),  # times each record is in the log (capped at 2)
        "max_appended": Array(Int(-1, p.records - 1), P),     # per partition
        "last_marker_coordinator_epoch": Array(Int(-1, F), P),
        "fenced": Bool,                         # the second instance initialised after the first
    } | last_acked_field(p, Array(Int(-1, p.records), P))


def last_acked_field(p, value):
    """With `not_leader=1` the client's lastAckedSequence per partition (TxnPartitionEntry):
    responses can then come back out of sequence order, so "the batch is the first in flight"
    no longer tells whether it is the next sequence after the last acknowledged one
    (TransactionManager.isNextSequence). Without it the field is not there, and every count,
    trace and conformance key stays as it was."""
    return {"last_acked_seq": value} if p.not_leader else {}


@spec.init
def init(p):
    F, P, W, R = p.coordinator_failovers, p.partitions, slots(p), replica_entries(p)
    yield {
        "client": ClientState.UNINITIALIZED, "epoch": NO_EPOCH,
        "epoch_bump_required": False, "epoch_bump": False,
        "end_txn": EndTxnRequest.NO_REQUEST,
        "sent": 0, "record_partition": [0] * p.records,
        "partition_in_txn": [False] * P, "batch": [False] * P, "batch_record": [0] * P,
        "batch_seq": [0] * P, "next_seq": [0] * P, "epoch_bump_partition": [False] * P,
        "request": [False] * P, "request_record": [0] * P, "request_seq": [0] * P,
        "request_epoch": [NO_EPOCH] * P,
        "earlier_batch": [False] * (P * W), "earlier_record": [0] * (P * W),
        "earlier_seq": [0] * (P * W), "earlier_sent": [False] * (P * W), "batch_sent": [False] * P,
        "in_flight_heap": [-1] * (P * p.max_in_flight),
        "next_request": [False] * (P * W), "next_request_record": [0] * (P * W),
        "next_request_seq": [0] * (P * W), "next_request_epoch": [NO_EPOCH] * (P * W),
        "second_instance": SecondInstance.NOT_STARTED,
        "txn_epoch": NO_EPOCH, "txn_last_epoch": NO_EPOCH, "txn_state": TxnState.Empty,
        "txn_partition": [False] * P, "coordinator_epoch": 0,
        "marker": [False] * ((F + 1) * P), "marker_epoch": [NO_EPOCH] * ((F + 1) * P),
        "marker_commit": [False] * ((F + 1) * P),
        "leader": [0] * P, "leader_failovers": 0, "deletions": 0, "log_start_behind": [False] * R,
        "acked_below_log_start": [False] * R, "data_below_log_start": [False] * R,
        "producer_epoch": [NO_EPOCH] * R, "first_seq": [-1] * R,
        "last_seq": [-1] * R, "txn_open": [False] * R,
        "entry_coordinator_epoch": [-1] * R,
        "appended": [0] * p.records, "max_appended": [-1] * P,
        "last_marker_coordinator_epoch": [-1] * P, "fenced": False,
    } | last_acked_field(p, [-1] * P)


# ---------------------------------------------------------------------------------------------
# One partition's part of the state. An action on partition t (Send, Produce, a marker...)
# reads and writes it through part(s, p, t), which names the fields as the one-partition model
# did: `v.batch` is s.batch[t], `v.producer_epoch[r]` is replica r of partition t, `v.marker[c]`
# coordinator epoch c's marker for partition t; the rest of the state passes through.

PER_PARTITION = ("partition_in_txn", "batch", "batch_record", "batch_seq", "next_seq",
                 "epoch_bump_partition", "request", "request_record", "request_seq",
                 "request_epoch", "batch_sent", "txn_partition", "leader", "max_appended",
                 "last_marker_coordinator_epoch", "last_acked_seq")
PER_REPLICA = ("log_start_behind", "acked_below_log_start", "data_below_log_start",
               "producer_epoch", "first_seq", "last_seq", "txn_open", "entry_coordinator_epoch")
PER_SLOT = ("earlier_batch", "earlier_record", "earlier_seq", "earlier_sent", "next_request",
            "next_request_record", "next_request_seq", "next_request_epoch")
PER_COORDINATOR = ("marker", "marker_epoch", "marker_commit")


def replica_entries(p):
    """The producer state entries of every partition's replicas."""
    return p.partitions * REPLICAS


class _Strided:
    """Elements base + stride * i of a flat array, as one partition's array."""

    def __init__(self, arr, base, stride, size):
        object.__setattr__(self, "_a", (arr, base, stride, size))

    def __getitem__(self, i):
        arr, base, stride, _ = self._a
        return arr[base + stride * i]

    def __setitem__(self, i, value):
        arr, base, stride, _ = self._a
        arr[base + stride * i] = value

    def __len__(self):
        return self._a[3]


class Partition:
    """Partition t's view of a state (an action's transition, or a property's pre/post)."""

    def __init__(self, s, p, t):
        object.__setattr__(self, "_v", (s, p, t))

    def __getattr__(self, name):
        s, p, t = self._v
        if name in PER_PARTITION:
            return getattr(s, name)[t]
        if name in PER_REPLICA:
            return _Strided(getattr(s, name), t * REPLICAS, 1, REPLICAS)
        if name in PER_SLOT:
            return _Strided(getattr(s, name), t * slots(p), 1, slots(p))
        if name == "in_flight_heap":
            return _Strided(getattr(s, name), t * p.max_in_flight, 1, p.max_in_flight)
        if name in PER_COORDINATOR:
            return _Strided(getattr(s, name), t, p.partitions, p.coordinator_failovers + 1)
        if name == "post":
            return Partition(s.post, p, t)
        if name == "partition":
            return t
        if name == "whole":
            return s
        return getattr(s, name)

    def __setattr__(self, name, value):
        s, p, t = self._v
        if name in PER_PARTITION:
            getattr(s, name)[t] = value
        elif name in PER_REPLICA + PER_SLOT + PER_COORDINATOR + ("in_flight_heap",):
            raise AttributeError(f"assign {name}[i] of a partition, not the whole array")
        else:
            setattr(s, name, value)


def part(s, p, t):
    return Partition(s, p, t)


def partitions(p):
    return range(p.partitions)


def replicas(p):
    return range(REPLICAS)


def coordinators(p):
    return range(p.coordinator_failovers + 1)


def has_transactions(p):
    """The transactional producer's steps (transactions, EndTxn, the coordinator's markers and
    failover) have no instance for the idempotent-only producer (transactional=0): it has no
    transactional id, so no coordinator ever holds a transaction of it. Static, so those
    variants draw no vacuity warning for steps Kafka cannot take."""
    return p.transactional == 1


def prepare(s):
    return (s.txn_state == TxnState.PrepareCommit) | (s.txn_state == TxnState.PrepareAbort)



def abortable(s):
    """The client's move to ABORTABLE_ERROR after a failed batch (TransactionManager.
    handleFailedBatch). A KIP-360 client on transaction version 1 also asks for an epoch bump
    at the next abort (needToTriggerEpochBumpFromClient); with version 2 EndTxn bumps anyway."""
    s.client = ClientState.ABORTABLE_ERROR
    if kip360_client(s) and not tv2(s):
        s.epoch_bump_required = True


# ---------------------------------------------------------------------------------------------
# The coordinator's decisions (TransactionCoordinator, TransactionMetadata)

@spec.rule("init-producer-id")
def init_producer_id(s, p, expected):
    """InitProducerId (prepareInitProducerIdTransit + prepareIncrementProducerEpoch): a pending
    transaction answers CONCURRENT_TRANSACTIONS (an ongoing one is fenced and aborted first);
    without an epoch, or with the current one, the epoch is bumped; with the last epoch it is a
    retry of a bump that already happened; any other epoch is fenced."""
    busy = prepare(s) | (s.txn_state == TxnState.Ongoing)
    if expected is None:
        return If(busy, Error.CONCURRENT_TRANSACTIONS, Error.NONE)
    valid = (s.txn_epoch == NO_EPOCH) | (expected == s.txn_epoch) | (expected == s.txn_last_epoch)
    return If(busy, Error.CONCURRENT_TRANSACTIONS, If(valid, Error.NONE, Error.PRODUCER_FENCED))


@spec.rule("init-producer-id", variant="no-last-epoch")
def init_producer_id_no_last_epoch(s, p, expected):
    """As Kafka, but with no last epoch: only the current epoch is accepted, so the retry of a
    bump whose response was lost is fenced."""
    busy = prepare(s) | (s.txn_state == TxnState.Ongoing)
    if expected is None:
        return If(busy, Error.CONCURRENT_TRANSACTIONS, Error.NONE)
    valid = (s.txn_epoch == NO_EPOCH) | (expected == s.txn_epoch)
    return If(busy, Error.CONCURRENT_TRANSACTIONS, If(valid, Error.NONE, Error.PRODUCER_FENCED))


def fence_ongoing(s, when):
    """prepareFenceProducerEpoch then an abort from the coordinator: epoch+1, no last epoch,
    PrepareAbort (trunk after KAFKA-19367 aborts at epoch+1 with transaction version 2 too)."""
    s.txn_epoch = If(when, s.txn_epoch + 1, s.txn_epoch)
    s.txn_last_epoch = If(when, NO_EPOCH, s.txn_last_epoch)
    s.txn_state = If(when, TxnState.PrepareAbort, s.txn_state)


def coordinator_init(s, expected, out):
    """The coordinator's transition for InitProducerId answered `out`."""
    fence = s.txn_state == TxnState.Ongoing
    if expected is None:
        bump, last = out == Error.NONE, NO_EPOCH
    else:
        # a retry (expected == last epoch) changes nothing
        bump = (out == Error.NONE) & ((s.txn_epoch == NO_EPOCH) | (expected == s.txn_epoch))
        last = s.txn_epoch if s.variant != "no-last-epoch" else NO_EPOCH
    s.txn_epoch = If(bump | fence, s.txn_epoch + 1, s.txn_epoch)
    s.txn_last_epoch = If(bump, last, If(fence, NO_EPOCH, s.txn_last_epoch))
    s.txn_state = If(bump, TxnState.Empty, If(fence, TxnState.PrepareAbort, s.txn_state))
    for u in range(len(s.txn_partition)):
        s.txn_partition[u] = If(bump, False, s.txn_partition[u])


def end_txn_v2(s, epoch, commit, overtaken_commit_is_fenced, pending_before_epoch):
    """EndTxn with transaction version 2 (TransactionCoordinator.endTransaction): 'retry' is the
    epoch before the current one; Ongoing and Empty need the current epoch, PrepareX a retry,
    CompleteX either; a commit of an empty transaction or a result that differs from the
    completed one is INVALID_TXN_STATE, except (since KAFKA-20785) a commit at the retry epoch
    that finds CompleteAbort: only the coordinator's own abort (timeout or fence) can have
    overtaken it, so it is PRODUCER_FENCED, as with transaction version 1. Since KAFKA-18464 a
    transaction in PrepareX (whose CompleteX is pending while its markers are written) answers
    CONCURRENT_TRANSACTIONS before any epoch check, so a producer that already holds the bumped
    epoch waits for the completion instead of fencing itself."""
    cur, retry, st = epoch == s.txn_epoch, epoch == s.txn_epoch - 1, s.txn_state
    valid = If((st == TxnState.Ongoing) | (st == TxnState.Empty), cur,
               If(prepare(s), retry, retry | cur))
    if commit:
        overtaken = retry if overtaken_commit_is_fenced else FALSE
        decided = If(st == TxnState.Ongoing, Error.NONE,
                     If(st == TxnState.CompleteCommit, If(retry, Error.NONE, Error.INVALID_TXN_STATE),
                        If(st == TxnState.PrepareCommit, Error.CONCURRENT_TRANSACTIONS,
                           If((st == TxnState.CompleteAbort) & overtaken, Error.PRODUCER_FENCED,
                              Error.INVALID_TXN_STATE))))
    else:
        decided = If((st == TxnState.Ongoing) | (st == TxnState.Empty) | (st == TxnState.CompleteAbort),
                     Error.NONE,
                     If(st == TxnState.CompleteCommit, If(retry, Error.INVALID_TXN_STATE, Error.NONE),
                        If(st == TxnState.PrepareAbort, Error.CONCURRENT_TRANSACTIONS,
                           Error.INVALID_TXN_STATE)))
    out = If(valid, decided, Error.PRODUCER_FENCED)
    if pending_before_epoch:
        out = If(prepare(s), Error.CONCURRENT_TRANSACTIONS, out)
    return out


@spec.rule("end-txn")
def end_txn(s, p, epoch, commit):
    """EndTxn with transaction version 2, Kafka today (PR #18467 and PR #23204 included)."""
    return end_txn_v2(s, epoch, commit, overtaken_commit_is_fenced=True, pending_before_epoch=True)


@spec.rule("end-txn", variant="kafka-18464")
def end_txn_before_kafka_18464(s, p, epoch, commit):
    """EndTxn with transaction version 2 before KAFKA-18464: the epoch is checked before the
    pending transition, so in PrepareX only the retry epoch passes; the producer's next abort,
    at the epoch the previous EndTxn returned, is PRODUCER_FENCED."""
    return end_txn_v2(s, epoch, commit, overtaken_commit_is_fenced=True, pending_before_epoch=False)


@spec.rule("end-txn", variant="kafka-20785")
def end_txn_before_kafka_20785(s, p, epoch, commit):
    """EndTxn with transaction version 2 before KAFKA-20785: a commit the coordinator's own abort
    overtook passes the retry-epoch check and fails the state check with INVALID_TXN_STATE."""
    return end_txn_v2(s, epoch, commit, overtaken_commit_is_fenced=False, pending_before_epoch=True)


def end_txn_v1(s, p, epoch, commit):
    """EndTxn with transaction version 1 (endTransactionWithTV1): the epoch must be the current
    one; Ongoing moves to PrepareX; a retry of a completed or preparing result is answered NONE
    or CONCURRENT_TRANSACTIONS; anything else is INVALID_TXN_STATE."""
    st = s.txn_state
    done, doing = (TxnState.CompleteCommit, TxnState.PrepareCommit) if commit else \
        (TxnState.CompleteAbort, TxnState.PrepareAbort)
    return If(epoch != s.txn_epoch, Error.PRODUCER_FENCED,
              If((st == TxnState.Ongoing) | (st == done), Error.NONE,
                 If(st == doing, Error.CONCURRENT_TRANSACTIONS, Error.INVALID_TXN_STATE)))


spec.rule("end-txn", variant="pre-kip890")(end_txn_v1)
spec.rule("end-txn", variant="pre-kip360")(end_txn_v1)
spec.rule("end-txn", variant="pre-kip360-in-flight")(end_txn_v1)
spec.rule("end-txn", variant="kafka-8483")(end_txn_v1)


def coordinator_end_txn(s, epoch, commit, out):
    """The coordinator's transition for EndTxn answered `out`; returns the epoch it replies."""
    st = s.txn_state
    done = TxnState.CompleteCommit if commit else TxnState.CompleteAbort
    doing = TxnState.PrepareCommit if commit else TxnState.PrepareAbort
    # a transaction with no partition completes at once: there is no marker to write
    if tv2(s):
        retry = (epoch == s.txn_epoch - 1) & ((st == TxnState.CompleteCommit) | (st == TxnState.CompleteAbort))
        move = (out == Error.NONE) & ~retry
        # prepareAbortOrCommit with version 2 bumps the epoch; the last epoch is the old one
        s.txn_epoch = If(move, s.txn_epoch + 1, s.txn_epoch)
        s.txn_last_epoch = If(move, s.txn_epoch, s.txn_last_epoch)
    else:
        move = (out == Error.NONE) & (st == TxnState.Ongoing)
    s.txn_state = If(move, If(st == TxnState.Ongoing, doing, done), s.txn_state)


# ---------------------------------------------------------------------------------------------
# The partition leader's decisions (UnifiedLog.analyzeAndValidateProducerState,
# ProducerAppendInfo.checkProducerEpoch / checkSequence / appendEndTxnMarker)

def duplicate(s, r):
    """findDuplicateBatch: same epoch and a sequence in the retained window (one-record
    batches, at most `records` of them: the five-batch window never drops one)."""
    pe, q = s.producer_epoch[r], s.request_seq
    return (pe != NO_EPOCH) & (s.request_epoch == pe) & (s.first_seq[r] != -1) & \
        (s.first_seq[r] <= q) & (q <= s.last_seq[r])


@spec.rule("produce-append")
def produce_append(s, p, t, r):
    """Kafka today with transaction version 2: a duplicate is answered without appending; an
    older epoch is INVALID_PRODUCER_EPOCH; a batch with no ongoing transaction at the partition
    is verified with the coordinator, which adds the partition (busy: CONCURRENT_TRANSACTIONS,
    another epoch: INVALID_PRODUCER_EPOCH); a new epoch, or no state, must start at sequence 0,
    the same epoch must continue at last+1 (else OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    if not p.transactional:
        return produce_append_idempotent(s, p, t, r)
    s = part(s, p, t)
    e, q, pe = s.request_epoch, s.request_seq, s.producer_epoch[r]
    ongoing = s.txn_open[r] & (pe == e)
    in_order = If(e != pe, q == 0, q == s.last_seq[r] + 1)
    return Case((duplicate(s, r), Error.DUPLICATE_SEQUENCE_NUMBER),
                ((pe != NO_EPOCH) & (e < pe), Error.INVALID_PRODUCER_EPOCH),
                (~ongoing & (s.txn_epoch == e) & prepare(s), Error.CONCURRENT_TRANSACTIONS),
                (~ongoing & (s.txn_epoch != e), Error.INVALID_PRODUCER_EPOCH),
                default=sequence_check(s, p, r, in_order))


@spec.rule("produce-append", variant="pre-kip890")
def produce_append_v1(s, p, t, r):
    """Transaction version 1 without verification: the leader takes a transactional batch on
    its word; with no state any sequence is accepted (checkSequence, epoch -1)."""
    return produce_append_idempotent(s, p, t, r)


def produce_append_idempotent(s, p, t, r, empty_log_needs_zero=True):
    """A batch that no coordinator verifies (ProducerAppendInfo.checkProducerEpoch and
    checkSequence with no VerificationStateEntry): a duplicate first, an older epoch is
    INVALID_PRODUCER_EPOCH, with no state any sequence is accepted, except (since KAFKA-15591,
    PR #23234, Kafka 4.5) on a partition whose log never held a record
    (ProducerStateManager.mapEndOffset() == 0), where the first sequence must be 0; a new epoch
    must start at 0 and the same epoch continue at last+1."""
    s = part(s, p, t)
    e, q, pe = s.request_epoch, s.request_seq, s.producer_epoch[r]
    first = (q == 0) | ~log_never_written(s) if empty_log_needs_zero else TRUE
    in_order = If(pe == NO_EPOCH, first, If(e != pe, q == 0, q == s.last_seq[r] + 1))
    return Case((duplicate(s, r), Error.DUPLICATE_SEQUENCE_NUMBER),
                ((pe != NO_EPOCH) & (e < pe), Error.INVALID_PRODUCER_EPOCH),
                default=sequence_check(s, p, r, in_order))


def log_never_written(s):
    """The partition's log has never held a record, data or marker (mapEndOffset() == 0: it
    moves with every append, and to the log start offset when that moves, so DeleteRecords
    never brings it back to 0 once something was written)."""
    return (s.max_appended == -1) & (s.last_marker_coordinator_epoch == -1)


@spec.rule("produce-append", variant="kafka-15591")
def produce_append_before_kafka_15591(s, p, t, r):
    """Kafka before KAFKA-15591 (up to 4.4): a producer with no state is accepted at any first
    sequence even on a partition that has never held a record, so a later batch that overtook
    an earlier one (answered NOT_LEADER_OR_FOLLOWER) is appended first."""
    if not p.transactional:
        return produce_append_idempotent(s, p, t, r, empty_log_needs_zero=False)
    return produce_append(s, p, t, r)


def sequence_check(s, p, r, in_order):
    """The last step of ProducerAppendInfo.checkSequence: a batch in order is appended, any other
    is OUT_OF_ORDER_SEQUENCE_NUMBER. With `unknown_producer_id=1` the leader is one from before
    KAFKA-7190: a producer it has no state for (or only a marker at the batch's epoch) is
    UNKNOWN_PRODUCER_ID at a sequence other than 0 and taken at 0, as Kafka 2.3's checkSequence
    (the rule of pre-kip360, whose other checks this variant keeps as today's)."""
    if not p.unknown_producer_id:
        return If(in_order, Error.NONE, Error.OUT_OF_ORDER_SEQUENCE_NUMBER)
    e, q, pe = s.request_epoch, s.request_seq, s.producer_epoch[r]
    unknown = (pe == NO_EPOCH) | ((e == pe) & (s.last_seq[r] == -1))
    return If(unknown & (q != 0), Error.UNKNOWN_PRODUCER_ID,
              If(unknown | in_order, Error.NONE, Error.OUT_OF_ORDER_SEQUENCE_NUMBER))


@spec.rule("produce-append", variant="kafka-8483")
@spec.rule("produce-append", variant="pre-kip360-in-flight")
@spec.rule("produce-append", variant="pre-kip360")
def produce_append_pre_kip360(s, p, t, r):
    """Kafka 2.3: an older epoch is PRODUCER_FENCED; with no state (or only a marker left at
    the same epoch) a sequence other than 0 is UNKNOWN_PRODUCER_ID and 0 is accepted."""
    s = part(s, p, t)
    e, q, pe = s.request_epoch, s.request_seq, s.producer_epoch[r]
    unknown = (pe == NO_EPOCH) | ((e == pe) & (s.last_seq[r] == -1))
    in_order = If(e != pe, q == 0, q == s.last_seq[r] + 1)
    return Case((duplicate(s, r), Error.DUPLICATE_SEQUENCE_NUMBER),
                ((pe != NO_EPOCH) & (e < pe), Error.PRODUCER_FENCED),
                (unknown & (q != 0), Error.UNKNOWN_PRODUCER_ID),
                (unknown | in_order, Error.NONE),
                default=Error.OUT_OF_ORDER_SEQUENCE_NUMBER)


@spec.rule("marker-append")
def marker_append(s, p, t, r, c):
    """appendEndTxnMarker with transaction version 2: the marker's epoch must be above the
    entry's, or equal with no open transaction (a retried marker, KAFKA-19999); a marker from
    an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED."""
    s = part(s, p, t)
    me, pe = s.marker_epoch[c], s.producer_epoch[r]
    stale = (me < pe) | ((me == pe) & s.txn_open[r])
    return If(stale, Error.INVALID_PRODUCER_EPOCH,
              If(c < s.entry_coordinator_epoch[r], Error.TRANSACTION_COORDINATOR_FENCED, Error.NONE))


def marker_append_v1(s, p, t, r, c):
    """appendEndTxnMarker with transaction version 1: the marker's epoch must not be older."""
    s = part(s, p, t)
    return If(s.marker_epoch[c] < s.producer_epoch[r], Error.INVALID_PRODUCER_EPOCH,
              If(c < s.entry_coordinator_epoch[r], Error.TRANSACTION_COORDINATOR_FENCED, Error.NONE))


spec.rule("marker-append", variant="pre-kip890")(marker_append_v1)


@spec.rule("marker-append", variant="kafka-19999")
def marker_append_before_kafka_19999(s, p, t, r, c):
    """appendEndTxnMarker with transaction version 2 before KAFKA-19999: the marker's epoch must
    be above the entry's, so the retry of a marker already written (same epoch, no open
    transaction) is INVALID_PRODUCER_EPOCH."""
    s = part(s, p, t)
    return If(s.marker_epoch[c] <= s.producer_epoch[r], Error.INVALID_PRODUCER_EPOCH,
              If(c < s.entry_coordinator_epoch[r], Error.TRANSACTION_COORDINATOR_FENCED, Error.NONE))


@spec.rule("marker-append", variant="kafka-8483")
@spec.rule("marker-append", variant="pre-kip360-in-flight")
@spec.rule("marker-append", variant="pre-kip360")
def marker_append_pre_kip360(s, p, t, r, c):
    """Kafka 2.3: as version 1, but an older epoch is PRODUCER_FENCED (checkProducerEpoch)."""
    s = part(s, p, t)
    return If(s.marker_epoch[c] < s.producer_epoch[r], Error.PRODUCER_FENCED,
              If(c < s.entry_coordinator_epoch[r], Error.TRANSACTION_COORDINATOR_FENCED, Error.NONE))


def remove_entry(s, x, when):
    s.producer_epoch[x] = If(when, NO_EPOCH, s.producer_epoch[x])
    s.first_seq[x] = If(when, -1, s.first_seq[x])
    s.last_seq[x] = If(when, -1, s.last_seq[x])
    s.txn_open[x] = If(when, False, s.txn_open[x])
    s.entry_coordinator_epoch[x] = If(when, -1, s.entry_coordinator_epoch[x])


def on_wire(s, p, k):
    """A request for record k is on the connection (at its head or queued behind it)."""
    return Or(s.request & (s.request_record == k),
              *[s.next_request[j] & (s.next_request_record[j] == k) for j in range(slots(p))])


def in_flight_batches(s, p):
    """(awaiting, record, sequence) of every batch slot: the earlier ones oldest first, then the
    newest."""
    w = slots(p)
    return [(s.earlier_batch[i], s.earlier_record[i], s.earlier_seq[i]) for i in range(w)] + \
        [(s.batch, s.batch_record, s.batch_seq)]


def first_in_flight(queue, c):
    """Batch c of `queue` awaits its response with the lowest sequence of those that do."""
    return queue[c][0] & And(*[~queue[d][0] | (queue[c][2] < queue[d][2])
                              for d in range(len(queue)) if d != c])


def in_flight_anywhere(s, p):
    """Some batch of some partition awaits its response."""
    return Or(*[any_in_flight(part(s, p, t), p) for t in partitions(p)])


def any_in_flight(s, p):
    """Some batch of the partition awaits its response."""
    return Or(s.batch, *[s.earlier_batch[i] for i in range(slots(p))])


def compact(s, arrays, removed, w):
    """Remove the slot where `removed[i]` holds (at most one) from the slot arrays, moving the
    later slots down one; the last slot's flag (arrays[0]) becomes False, its values stay. Reads
    the arrays as assigned so far in the step (a reset may have rewritten the sequences)."""
    gone = FALSE
    for i in range(w):
        gone = gone | removed[i]
        for n, name in enumerate(arrays):
            arr, now = getattr(s, name), getattr(s.post, name)
            if i + 1 < w:
                nxt = now[i + 1]
            else:
                nxt = FALSE if n == 0 else now[i]
            arr[i] = If(gone, nxt, now[i])


# ---------------------------------------------------------------------------------------------
# Actions, in the order the protocol runs them

@spec.action(actors=("producer", "coordinator"))
def InitProducerId(s, p):
    """initTransactions: InitProducerId without an epoch (a new instance). The idempotent-only
    producer sends InitProducerId with no transactional id to any broker, which hands out a
    new producer id at epoch 0 (ProducerIdManager); no coordinator keeps its state."""
    s.require((s.client == ClientState.UNINITIALIZED) | (s.client == ClientState.INITIALIZING))
    if not p.transactional:
        s.respond(Error.NONE)
        s.epoch = 0
        s.client = ClientState.READY
        return
    out = s.rule("init-producer-id", expected=None)
    coordinator_init(s, None, out)
    s.respond(out)
    s.epoch = If(out == Error.NONE, s.post.txn_epoch, s.epoch)
    s.client = If(out == Error.NONE, ClientState.READY, ClientState.INITIALIZING)


@spec.action(actors=("second instance", "coordinator"))
def SecondInstanceInitProducerId(s, p):
    """A second instance with the same transactional id calls initTransactions: once it gets
    its epoch, the first instance (if already initialised) is a zombie."""
    s.require(s.second_instance != SecondInstance.READY, p.transactional == 1)
    out = s.rule("init-producer-id", expected=None)
    coordinator_init(s, None, out)
    s.respond(out)
    s.second_instance = If(out == Error.NONE, SecondInstance.READY, SecondInstance.INITIALIZING)
    s.fenced = s.fenced | ((out == Error.NONE) & (s.epoch != NO_EPOCH))


@spec.action(actors=("producer", "producer"))
def BeginTransaction(s, p):
    s.require(s.client == ClientState.READY, s.sent < p.records, p.transactional == 1)
    s.client = ClientState.IN_TRANSACTION
    for t in partitions(p):
        s.partition_in_txn[t] = False


@spec.action(t=partitions, actors=("producer", "coordinator"))
def AddPartitionsToTxn(s, p, t):
    """Transaction version 1: the producer adds the partition before its first send."""
    s = part(s, p, t)
    s.require(s.client == ClientState.IN_TRANSACTION, ~s.partition_in_txn, s.sent < p.records,
              has_transactions(p))
    if tv2(s):
        s.require(False)
    out = If(s.epoch != s.txn_epoch, Error.PRODUCER_FENCED,
             If(prepare(s), Error.CONCURRENT_TRANSACTIONS, Error.NONE))
    s.respond(out)
    ok = out == Error.NONE
    s.txn_state = If(ok, TxnState.Ongoing, s.txn_state)
    s.txn_partition = s.txn_partition | ok
    s.partition_in_txn = ok
    s.client = If(out == Error.PRODUCER_FENCED, ClientState.FATAL_ERROR, s.client)


@spec.action(t=partitions, actors=("producer", "producer"))
def Send(s, p, t):
    """send(): the record goes into a batch, which takes the partition's next sequence. The
    idempotent producer drains no batch while an epoch bump is pending
    (RecordAccumulator.shouldStopDrainBatchesForPartition)."""
    s = part(s, p, t)
    if not p.transactional:
        s.require(s.client == ClientState.READY, ~s.epoch_bump_required, s.sent < p.records)
    else:
        s.require(s.client == ClientState.IN_TRANSACTION, s.sent < p.records)
        if not tv2(s):
            s.require(s.partition_in_txn)
        s.partition_in_txn = True
    if p.max_in_flight == 1:
        s.require(~s.batch)
    else:
        # up to max.in.flight batches: the one awaiting becomes the newest earlier one
        w = slots(p)
        s.require(~s.batch | ~s.earlier_batch[w - 1])
        for i in range(w):
            push = s.batch & ~s.earlier_batch[i] & (TRUE if i == 0 else s.earlier_batch[i - 1])
            s.earlier_batch[i] = s.earlier_batch[i] | push
            s.earlier_record[i] = If(push, s.batch_record, s.earlier_record[i])
            s.earlier_seq[i] = If(push, s.batch_seq, s.earlier_seq[i])
            if w > 1:
                s.earlier_sent[i] = If(push, s.batch_sent, s.earlier_sent[i])
        s.batch_sent = False
    s.batch = True
    s.batch_record = s.sent
    s.batch_seq = s.next_seq
    s.next_seq = s.next_seq + 1
    if p.partitions > 1:
        s.record_partition[s.sent] = t
    s.sent = s.sent + 1


@spec.action(t=partitions, actors=("producer", "leader"))
def ProduceRequest(s, p, t):
    """The Sender puts the batch on the wire (a first attempt or a retry). With several in flight
    it drains in sequence order (RecordAccumulator.insertInSequenceOrder keeps a retried batch
    in its place), and a batch already sent only once it is the first in flight, the lowest
    sequence (RecordAccumulator.shouldStopDrainBatchesForPartition, TransactionManager.
    firstInFlightSequence); the request queues behind the ones already on the connection."""
    s = part(s, p, t)
    if p.max_in_flight == 1:
        s.require(s.batch, ~s.request)
        s.request = True
        s.request_record = s.batch_record
        s.request_seq = s.batch_seq
        s.request_epoch = s.epoch
        return
    # the batch with the lowest sequence not on the wire is drained, and only if it is the first
    # in flight or was never sent (with one earlier slot, that slot is always the first)
    w = slots(p)
    queue = in_flight_batches(s, p)
    sent_before = [s.earlier_sent[i] for i in range(w)] + [s.batch_sent]
    waiting = [flag & ~on_wire(s, p, k) for flag, k, _ in queue]
    picks = [waiting[c] & And(*[~waiting[d] | (queue[c][2] < queue[d][2])
                                for d in range(len(queue)) if d != c]) for c in range(len(queue))]
    allowed = [first_in_flight(queue, c) | ~sent_before[c] for c in range(len(queue))]
    s.require(Or(*waiting), ~s.request | ~s.next_request[w - 1],
              *[~pick | ok for pick, ok in zip(picks, allowed)])
    rec, seq = queue[-1][1], queue[-1][2]
    for pick, (_, k, q) in reversed(list(zip(picks[:-1], queue[:-1]))):
        rec, seq = If(pick, k, rec), If(pick, q, seq)
    s.batch_sent = s.batch_sent | picks[-1]
    if priority_queue(s):
        # TransactionManager.addInFlightBatch when the batch is first drained: it has the highest
        # sequence of the set, so it stays at the end of the PriorityQueue's array
        heap_add(s, p, rec, Or(*[pick & ~sent for pick, sent in zip(picks, sent_before)]))
    if w > 1:
        for i in range(w):
            s.earlier_sent[i] = s.earlier_sent[i] | picks[i]
    head = ~s.request
    s.request = True
    s.request_record = If(head, rec, s.request_record)
    s.request_seq = If(head, seq, s.request_seq)
    s.request_epoch = If(head, s.epoch, s.request_epoch)
    for j in range(w):
        # the request joins the queue behind the ones already on the connection
        join = ~head & ~s.next_request[j] & (TRUE if j == 0 else s.next_request[j - 1])
        s.next_request[j] = s.next_request[j] | join
        s.next_request_record[j] = If(join, rec, s.next_request_record[j])
        s.next_request_seq[j] = If(join, seq, s.next_request_seq[j])
        s.next_request_epoch[j] = If(join, s.epoch, s.next_request_epoch[j])


def reset_in_flight(s, p, when):
    """TransactionManager.startSequencesAtBeginning (Kafka 2.3's client, max.in.flight > 1):
    every batch in flight restarts from sequence 0, in the order the client iterates them: the
    order of their sequences since KAFKA-8483 (a sorted set), the earlier ones first."""
    w = slots(p)
    if priority_queue(s):
        # before KAFKA-8483: the drained batches in the PriorityQueue's iteration order, which
        # is its array's; a batch not yet drained takes its sequence when it is (nextSequence)
        heap = [s.in_flight_heap[j] for j in range(p.max_in_flight)]
        drained = Count(*[k != -1 for k in heap])
        queue = in_flight_batches(s, p)
        in_heap = [Or(*[k == rec for k in heap]) for _, rec, _ in queue]
        new_seq = []
        for c, (flag, rec, _) in enumerate(queue):
            undrained_before = Count(*[queue[d][0] & ~in_heap[d] for d in range(c)]) if c else 0
            new_seq.append(If(in_heap[c], heap_position(heap, rec), drained + undrained_before))
        for i in range(w):
            s.earlier_seq[i] = If(when & s.earlier_batch[i], new_seq[i], s.earlier_seq[i])
        s.batch_seq = If(when & s.batch, new_seq[-1], s.batch_seq)
        s.next_seq = If(when, Count(*[flag for flag, _, _ in queue]), s.next_seq)
        return
    for i in range(w):
        # slot i holds the i-th oldest batch, so it takes sequence i (the oldest's is set even
        # when the slot is empty: the two-in-flight model did so)
        s.earlier_seq[i] = If(when & (TRUE if i == 0 else s.earlier_batch[i]), i, s.earlier_seq[i])
    earlier = Count(*[s.earlier_batch[i] for i in range(w)])
    s.batch_seq = If(when, If(s.batch, earlier, 0), s.batch_seq)
    s.next_seq = If(when, earlier + If(s.batch, 1, 0), s.next_seq)


# Kafka 2.3's in-flight set before KAFKA-8483: a java.util.PriorityQueue ordered by base
# sequence, whose iterator walks the heap's array (PriorityQueue.offer, removeAt, siftUp,
# siftDown, unrolled for at most five batches)

def priority_queue(s):
    return s.variant == "kafka-8483"


def heap_position(heap, k):
    """The array index of record k in the heap (0 if absent)."""
    out = 0
    for j in reversed(range(len(heap))):
        out = If(heap[j] == k, j, out)
    return out


def heap_add(s, p, k, when):
    """offer: the batch with the highest sequence so far goes to the first free index."""
    n = p.max_in_flight
    for j in range(n):
        free = (s.in_flight_heap[j] == -1) & (TRUE if j == 0 else s.in_flight_heap[j - 1] != -1)
        s.in_flight_heap[j] = If(when & free, k, s.in_flight_heap[j])


def heap_remove(s, p, k, when):
    """remove(batch) = removeAt(i): the last element moves to index i, sifts down, and if it
    stayed there, sifts up; the comparator is the batches' current base sequence."""
    n = p.max_in_flight
    heap = [s.in_flight_heap[j] for j in range(n)]
    queue = in_flight_batches(s, p)

    def key(k):
        out = 0
        for flag, rec, seq in queue:
            out = If(flag & (rec == k), seq, out)
        return out

    def merge(cond, a, b):
        return [x if x is y else If(cond, x, y) for x, y in zip(a, b)]

    def sift_down(h, size, at, x):
        if at >= size // 2:
            h = list(h)
            h[at] = x
            return h
        child, right = 2 * at + 1, 2 * at + 2
        use_right = (key(h[child]) > key(h[right])) if right < size else FALSE

        def via(c):
            stop = list(h)
            stop[at] = x
            go = list(h)
            go[at] = h[c]
            return merge(key(x) <= key(h[c]), stop, sift_down(go, size, c, x))
        left_way = via(child)
        return merge(use_right, via(right), left_way) if right < size else left_way

    def sift_up(h, at, x):
        if at == 0:
            h = list(h)
            h[at] = x
            return h
        parent = (at - 1) // 2
        stop = list(h)
        stop[at] = x
        go = list(h)
        go[at] = h[parent]
        return merge(key(x) >= key(h[parent]), stop, sift_up(go, parent, x))

    result = heap
    for size in range(1, n + 1):
        for at in range(size):
            here = when & (heap[at] == k) & (heap[size - 1] != -1) & \
                (TRUE if size == n else heap[size] == -1)
            h = list(heap)
            last = size - 1
            if at == last:
                h[last] = -1
            else:
                moved = h[last]
                h[last] = -1
                down = sift_down(h, last, at, moved)
                h = merge(down[at] == moved, sift_up(down, at, moved), down)
            result = merge(here, h, result)
    for j in range(n):
        s.in_flight_heap[j] = result[j]


def take_head_request(s, p):
    """The request at the head of the connection is answered; the one queued behind it is next."""
    s.request = False
    if p.max_in_flight > 1:
        nxt = s.next_request[0]
        s.request = nxt
        s.request_record = If(nxt, s.next_request_record[0], s.request_record)
        s.request_seq = If(nxt, s.next_request_seq[0], s.request_seq)
        s.request_epoch = If(nxt, s.next_request_epoch[0], s.request_epoch)
        compact(s, ["next_request", "next_request_record", "next_request_seq",
                    "next_request_epoch"], [TRUE] + [FALSE] * (slots(p) - 1), slots(p))


@spec.action(t=partitions, r=replicas, lost=[False, True], actors=("producer", "leader {r}"))
def Produce(s, p, t, r, lost):
    """The produce request reaches the leader, which appends it or not; lost=True: the
    response is lost (a disconnect) and the producer will retry the same batch."""
    s = part(s, p, t)
    s.require(s.request, s.leader == r)
    out = s.rule("produce-append", t=t, r=r)
    s.respond(out)
    take_head_request(s, p)
    ok = out == Error.NONE
    if tv2(s) and p.transactional:
        # the coordinator added the partition when it verified the batch
        verified = ok & ~(s.txn_open[r] & (s.producer_epoch[r] == s.request_epoch))
        s.txn_state = If(verified, TxnState.Ongoing, s.txn_state)
        s.txn_partition = s.txn_partition | verified
    e, q = s.request_epoch, s.request_seq
    for x in replicas(p):
        # the follower replicates the batch and applies it to its producer state as well
        cont = (s.producer_epoch[x] == e) & (s.last_seq[x] == q - 1) & (s.first_seq[x] != -1)
        # ProducerStateEntry.addBatch keeps the metadata of the last five batches
        # (NUM_BATCHES_TO_RETAIN): a sixth drops the oldest from the window
        kept = If(q - s.first_seq[x] >= BATCHES_RETAINED, s.first_seq[x] + 1, s.first_seq[x])
        s.first_seq[x] = If(ok, If(cont, kept, q), s.first_seq[x])
        s.last_seq[x] = If(ok, q, s.last_seq[x])
        s.entry_coordinator_epoch[x] = If(ok & (s.producer_epoch[x] == NO_EPOCH), -1,
                                          s.entry_coordinator_epoch[x])
        s.producer_epoch[x] = If(ok, e, s.producer_epoch[x])
        if p.transactional:
            s.txn_open[x] = s.txn_open[x] | ok
        if truncate_head_drops_state(s, p):
            # a new batch lies above every replica's log start offset
            s.data_below_log_start[x] = s.data_below_log_start[x] & ~ok
    rec = s.request_record
    for k in range(p.records):
        s.appended[k] = If(ok & (rec == k), Min(s.appended[k] + 1, 2), s.appended[k])
    s.max_appended = If(ok & (rec > s.max_appended), rec, s.max_appended)
    if lost:
        return
    # only the batch the producer still waits for takes the response (a timed-out one does not)
    mine = s.batch & (rec == s.batch_record)
    acked = mine & (ok | (out == Error.DUPLICATE_SEQUENCE_NUMBER))
    retriable = mine & (out == Error.CONCURRENT_TRANSACTIONS)
    unknown = mine & (out == Error.UNKNOWN_PRODUCER_ID)
    fenced = mine & (out == Error.PRODUCER_FENCED)
    oosn = out == Error.OUT_OF_ORDER_SEQUENCE_NUMBER
    # TransactionManager.canRetry on UNKNOWN_PRODUCER_ID (the same branch in Kafka 2.3's client
    # and today's): if the last acknowledged offset is below the response's log start offset,
    # the state loss is taken as retention, not lost data, and the transactional producer
    # restarts the partition's in-flight sequences at 0 with the same epoch and retries
    # (TopicPartitionBookkeeper.startSequencesAtBeginning with the current producerIdAndEpoch);
    # the 2.3 idempotent producer does the same. Otherwise the batch fails: abortable for the
    # transactional producer (handleFailedBatch, maybeTransitionToErrorState), which the abort's
    # epoch bump then resolves (EndTxn with transaction version 2; InitProducerId with the
    # current epoch, EpochBump, with version 1).
    same_epoch_reset = not kip360_client(s) or (p.transactional and answers_unknown_producer_id(s, p)
                                                 and not as_proposed(s))
    reset = unknown & s.acked_below_log_start[r] if same_epoch_reset else FALSE
    # the client as KIP-360 proposed it (variant kip360-as-proposed) never re-assigns a batch's
    # sequence: UNKNOWN_PRODUCER_ID fails the batch, and the epoch bump comes after it
    unknown_retried = FALSE if as_proposed(s) else unknown
    # Today's idempotent producer (canRetry, !isTransactional()) retries every
    # UNKNOWN_PRODUCER_ID and every OUT_OF_ORDER_SEQUENCE_NUMBER, and asks for an epoch bump
    # (requestEpochBumpForPartition) unless the batch's sequence was already reset by an earlier
    # bump (sequenceHasBeenReset: here its request carries an older epoch than the producer's)
    # or, for OUT_OF_ORDER_SEQUENCE_NUMBER, it is not the next sequence (an earlier batch is
    # still out: retried without a bump)
    idempotent_retry = kip360_client(s) and not p.transactional
    if idempotent_retry:
        retriable = retriable | (mine & (unknown_retried | oosn))
        bump = mine & (s.request_epoch == s.epoch) & (unknown_retried | oosn)
    else:
        bump = FALSE
    if answers_unknown_producer_id(s, p):
        # the client's lastAckedOffset: the acknowledged offset lies above every replica's log
        # start offset
        for x in replicas(p):
            s.acked_below_log_start[x] = s.acked_below_log_start[x] & ~acked
    if p.max_in_flight > 1:
        w = slots(p)
        # TransactionManager.canRetry: OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the
        # next after the last acknowledged one (an older batch is still out) is retried
        queue = in_flight_batches(s, p)

        def is_next(c):
            """TransactionManager.isNextSequence: the batch's sequence follows the last
            acknowledged one. While responses come back in sequence order that is the first
            batch in flight; with NOT_LEADER_OR_FOLLOWER (not_leader=1) a later batch can be
            acknowledged first, and the client's lastAckedSequence says it."""
            if p.not_leader:
                return queue[c][2] == s.last_acked_seq + 1
            return first_in_flight(queue, c)
        retriable = retriable | (mine & ~is_next(w) & oosn)
        if idempotent_retry:
            bump = bump & (unknown_retried | is_next(w))
        gone, fenced_e, failed_e, reset_e, acked_e, bump_e = [], [], [], [], [], []
        for i in range(w):
            mine_e = s.earlier_batch[i] & (rec == s.earlier_record[i])
            unknown_e = mine_e & (out == Error.UNKNOWN_PRODUCER_ID)
            unknown_retried_e = FALSE if as_proposed(s) else unknown_e
            acked_e.append(mine_e & (ok | (out == Error.DUPLICATE_SEQUENCE_NUMBER)))
            fenced_e.append(mine_e & (out == Error.PRODUCER_FENCED))
            reset_e.append(unknown_e & s.acked_below_log_start[r] if same_epoch_reset else FALSE)
            retriable_e = (out == Error.CONCURRENT_TRANSACTIONS) | (oosn & ~is_next(i))
            if idempotent_retry:
                retriable_e = retriable_e | unknown_retried_e | oosn
                bump_e.append(mine_e & (s.request_epoch == s.epoch) &
                              (unknown_retried_e | (oosn & is_next(i))))
            failed_e.append(mine_e & ~acked_e[i] & ~retriable_e & ~fenced_e[i] & ~reset_e[i])
            gone.append(acked_e[i] | failed_e[i] | fenced_e[i])
        if answers_unknown_producer_id(s, p):
            for x in replicas(p):
                # (s.x reads the state before the step: the batch's own acknowledgement again)
                s.acked_below_log_start[x] = s.acked_below_log_start[x] & ~acked & ~Or(*acked_e)
        any_reset = reset | Or(*reset_e)
        bump = bump | Or(*bump_e)
        if p.not_leader:
            # maybeUpdateLastAckedSequence on an acknowledgement (only upwards);
            # startSequencesAtBeginning forgets it
            acked_seq = s.last_acked_seq
            for i in range(w):
                acked_seq = If(acked_e[i], Max(s.last_acked_seq, s.earlier_seq[i]), acked_seq)
            acked_seq = If(acked, Max(s.last_acked_seq, s.batch_seq), acked_seq)
            s.last_acked_seq = If(any_reset | bump, -1, acked_seq)
        if idempotent_retry:
            s.epoch = If(bump, s.epoch + 1, s.epoch)
        reset_in_flight(s, p, any_reset | bump)
        compact(s, ["earlier_batch", "earlier_record", "earlier_seq", "earlier_sent"], gone, w)
        if priority_queue(s):
            # TransactionManager.removeInFlightBatch once the batch completes
            heap_remove(s, p, rec, Or(*gone) | (mine & (acked | fenced | (~acked & ~retriable & ~reset))))
        fenced = fenced | Or(*fenced_e)
        failed_any = Or(*failed_e)
    else:
        failed_any = FALSE
    failed = mine & ~acked & ~retriable & ~fenced & ~reset
    s.batch = If(acked | failed | fenced, False, s.batch)
    if p.max_in_flight == 1:
        if idempotent_retry:
            s.epoch = If(bump, s.epoch + 1, s.epoch)
        s.batch_seq = If(reset | bump, 0, s.batch_seq)
        s.next_seq = If(reset | bump, 1, s.next_seq)
        if p.not_leader:
            s.last_acked_seq = If(reset | bump, -1,
                                  If(acked, Max(s.last_acked_seq, s.batch_seq), s.last_acked_seq))
    failed = failed | failed_any
    if idempotent_retry:
        bump_other_partitions(s, p, bump)
    if not p.transactional:
        # TransactionManager.handleFailedBatch: the idempotent producer has no transaction to
        # abort; a failed batch (OUT_OF_ORDER_SEQUENCE_NUMBER or another error) requests an
        # epoch bump for the partition (requestEpochBumpForPartition)
        s.client = If(fenced, ClientState.FATAL_ERROR, s.client)
        s.epoch_bump_required = s.post.epoch_bump_required | failed
        s.epoch_bump_partition = s.post.epoch_bump_partition | failed
        return
    s.client = If(fenced, ClientState.FATAL_ERROR, If(failed, ClientState.ABORTABLE_ERROR, s.client))
    if kip360_client(s) and not tv2(s):
        s.epoch_bump_required = s.epoch_bump_required | failed


def bump_other_partitions(s, p, when):
    """The rest of the idempotent producer's bump that a retried batch asked for. Sender.runOnce
    calls TransactionManager.bumpIdempotentEpochAndResetIdIfNeeded before it drains anything,
    so the bump is taken with the response that asked for it (the model's Send waits for a
    pending bump): bumpIdempotentProducerEpoch sets epoch+1 and renumbers the in-flight batches
    of the partitions that asked (startSequencesAtBeginning, done by the caller for partition
    t); another partition restarts at 0 once nothing of it is in flight
    (maybeUpdateProducerIdAndEpoch; before KAFKA-12152 only a partition that asked did), and one
    with batches still in flight keeps its sequence (Kafka lets them finish at the old epoch,
    which the model's one producer epoch cannot say). A bump a timed-out batch asked for is
    taken with it."""
    whole, t = s.whole, s.partition
    for u in partitions(p):
        if u != t:
            rewrite = TRUE if s.variant != "kafka-12152" else whole.epoch_bump_partition[u]
            idle = ~any_in_flight(part(whole, p, u), p)
            whole.next_seq[u] = If(when & rewrite & idle, 0, whole.next_seq[u])
            if p.not_leader:
                whole.last_acked_seq[u] = If(when & rewrite & idle, -1, whole.last_acked_seq[u])
        whole.epoch_bump_partition[u] = If(when, False, whole.epoch_bump_partition[u])
    whole.epoch_bump_required = If(when, False, whole.epoch_bump_required)


@spec.action(t=partitions, actors=("producer", "broker"))
def NotLeaderOrFollower(s, p, t):
    """With `not_leader=1`: the request at the head of the connection reaches a broker that does
    not lead the partition (yet: a topic just created whose metadata it has not applied, the first
    step of KAFKA-15591) and is answered NOT_LEADER_OR_FOLLOWER (ReplicaManager.appendRecords ->
    Partition.appendRecordsToLeader) with nothing appended; the request behind it on the
    connection is next. The Sender retries the batch (Sender.completeBatch: a retriable error,
    TransactionManager.canRetry), which ProduceRequest re-sends once it is the first in flight."""
    s = part(s, p, t)
    s.require(p.not_leader == 1, s.request)
    s.respond(Error.NOT_LEADER_OR_FOLLOWER)
    take_head_request(s, p)


@spec.action(actors=("producer", "producer"))
def IdempotentEpochBump(s, p):
    """The idempotent-only producer bumps its own epoch once no batch of the partition is in
    flight, and restarts the partition's sequences at 0 (TransactionManager.
    bumpIdempotentEpochAndResetIdIfNeeded, KAFKA-8805). Local to the client: no request."""
    # the Kafka 2.3 client instead asked for a new producer id (resetProducerId): not modelled
    s.require(p.transactional == 0, kip360_client(s), s.epoch_bump_required,
              ~in_flight_anywhere(s, p))
    s.epoch = s.epoch + 1
    for t in partitions(p):
        # since KAFKA-12152 every partition with nothing in flight restarts at 0 (here: all of
        # them); before, only the partitions whose batch asked for the bump
        # (partitionsToRewriteSequences) did, and the others went on at their old sequence
        rewrite = TRUE if s.variant != "kafka-12152" else s.epoch_bump_partition[t]
        s.next_seq[t] = If(rewrite, 0, s.next_seq[t])
        if p.not_leader:
            s.last_acked_seq[t] = If(rewrite, -1, s.last_acked_seq[t])
        s.epoch_bump_partition[t] = False
    s.epoch_bump_required = False


@spec.action(t=partitions, actors=("producer", "producer"))
def DeliveryTimeout(s, p, t):
    """delivery.timeout.ms expires while the request is still on the wire: the batch fails
    (abortable), the request may still arrive later."""
    s = part(s, p, t)
    if p.max_in_flight == 1:
        s.require(s.batch, s.request)
        s.batch = False
    else:
        # the oldest batch expires first; only one whose request is on the wire is ambiguous
        w = slots(p)
        oldest = s.earlier_batch[0]
        s.require(If(oldest, on_wire(s, p, s.earlier_record[0]), s.batch & on_wire(s, p, s.batch_record)))
        s.batch = If(oldest, s.batch, False)
        compact(s, ["earlier_batch", "earlier_record", "earlier_seq", "earlier_sent"],
                [TRUE] + [FALSE] * (w - 1), w)
        if priority_queue(s):
            # Sender.failBatch: the expired batch leaves the in-flight set
            heap_remove(s, p, If(oldest, s.earlier_record[0], s.batch_record), TRUE)
    s.respond(Error.REQUEST_TIMED_OUT)
    if p.transactional:
        abortable(s)
    else:
        # TransactionManager.markSequenceUnresolved, then maybeResolveSequences once nothing is
        # in flight: the batch was never acknowledged, so the idempotent producer bumps its epoch
        s.epoch_bump_required = True
        s.epoch_bump_partition = True


@spec.action(actors=("producer", "coordinator"))
def CommitTransaction(s, p):
    """commitTransaction: EndTxn(COMMIT) once every batch completed (none if nothing was sent)."""
    s.require(s.client == ClientState.IN_TRANSACTION, ~in_flight_anywhere(s, p), has_transactions(p))
    touched = Or(*[s.partition_in_txn[t] for t in partitions(p)])
    s.client = If(touched, ClientState.COMMITTING_TRANSACTION, ClientState.READY)
    s.end_txn = If(touched, EndTxnRequest.COMMIT, EndTxnRequest.NO_REQUEST)


@spec.action(actors=("producer", "coordinator"))
def AbortTransaction(s, p):
    """abortTransaction, by the application or after an abortable error."""
    s.require(has_transactions(p),
              (s.client == ClientState.IN_TRANSACTION) | (s.client == ClientState.ABORTABLE_ERROR),
              ~in_flight_anywhere(s, p))
    touched = Or(*[s.partition_in_txn[t] for t in partitions(p)])
    s.client = If(touched | s.epoch_bump_required, ClientState.ABORTING_TRANSACTION,
                  ClientState.READY)
    s.end_txn = If(touched, EndTxnRequest.ABORT, EndTxnRequest.NO_REQUEST)
    s.epoch_bump = ~touched & s.epoch_bump_required


@spec.action(lost=[False, True], actors=("producer", "coordinator"))
def EndTxn(s, p, lost):
    """EndTxn reaches the coordinator; lost=True: the response is lost and the producer retries."""
    s.require(has_transactions(p), s.end_txn != EndTxnRequest.NO_REQUEST)
    outs = {}
    for commit in (True, False):
        outs[commit] = s.rule("end-txn", epoch=s.epoch, commit=commit)
    is_commit = s.end_txn == EndTxnRequest.COMMIT
    out = If(is_commit, outs[True], outs[False])
    s.respond(out)
    # both results are built; each applies under its own condition
    st, ep, last = s.txn_state, s.txn_epoch, s.txn_last_epoch
    coordinator_end_txn(s, s.epoch, True, outs[True])
    c_state, c_epoch, c_last = s.post.txn_state, s.post.txn_epoch, s.post.txn_last_epoch
    s.txn_state, s.txn_epoch, s.txn_last_epoch = st, ep, last
    coordinator_end_txn(s, s.epoch, False, outs[False])
    a_state, a_epoch, a_last = s.post.txn_state, s.post.txn_epoch, s.post.txn_last_epoch
    s.txn_state = If(is_commit, c_state, a_state)
    s.txn_epoch = If(is_commit, c_epoch, a_epoch)
    s.txn_last_epoch = If(is_commit, c_last, a_last)
    # with no partition there is no marker to write
    prepared = (s.post.txn_state == TxnState.PrepareCommit) | (s.post.txn_state == TxnState.PrepareAbort)
    empty = prepared & ~Or(*[s.txn_partition[t] for t in partitions(p)])
    s.txn_state = If(empty, If(s.post.txn_state == TxnState.PrepareCommit, TxnState.CompleteCommit,
                               TxnState.CompleteAbort), s.post.txn_state)
    if lost:
        return
    ok = out == Error.NONE
    if tv2(s):
        # the response carries the (bumped) epoch; a new epoch starts sequences at 0
        s.epoch = If(ok, s.post.txn_epoch, s.epoch)
        for t in partitions(p):
            s.next_seq[t] = If(ok, 0, s.next_seq[t])
    bump = ok & ~is_commit & s.epoch_bump_required
    fatal = (out == Error.PRODUCER_FENCED) | (out == Error.INVALID_TXN_STATE)
    s.end_txn = If(ok | fatal, EndTxnRequest.NO_REQUEST, s.end_txn)
    s.epoch_bump = bump
    s.client = If(fatal, ClientState.FATAL_ERROR,
                  If(ok & ~bump, ClientState.READY, s.client))


@spec.action(lost=[False, True], actors=("producer", "coordinator"))
def EpochBump(s, p, lost):
    """KIP-360 with transaction version 1: after an abortable error the abort is followed by
    InitProducerId with the current epoch. lost=True: the response is lost and it is retried.
    Only a client on transaction version 1 sends it: TransactionManager.
    needToTriggerEpochBumpFromClient is `coordinatorSupportsBumpingEpoch && !isTransactionV2Enabled`
    (with version 2 EndTxn bumps the epoch), and Kafka 2.3's client had no such request."""
    s.require(p.transactional == 1, kip360_client(s) and not tv2(s), s.epoch_bump)
    out = s.rule("init-producer-id", expected=s.epoch)
    coordinator_init(s, s.epoch, out)
    s.respond(out)
    if lost:
        return
    ok = out == Error.NONE
    s.epoch = If(ok, s.post.txn_epoch, s.epoch)
    for t in partitions(p):
        s.next_seq[t] = If(ok, 0, s.next_seq[t])
    s.epoch_bump = out == Error.CONCURRENT_TRANSACTIONS
    s.epoch_bump_required = If(ok, False, s.epoch_bump_required)
    s.client = If(ok, ClientState.READY,
                  If(out == Error.PRODUCER_FENCED, ClientState.FATAL_ERROR, s.client))


@spec.action(actors=("coordinator", "coordinator"))
def AbortTimedOutTransaction(s, p):
    """transaction.timeout.ms: the coordinator fences the producer's epoch and aborts."""
    s.require(has_transactions(p), s.txn_state == TxnState.Ongoing)
    fence_ongoing(s, True)


@spec.action(c=coordinators, t=partitions, actors=("coordinator", "leader"))
def WriteTxnMarker(s, p, c, t):
    """The coordinator (at coordinator epoch c) sends the partition its marker."""
    s = part(s, p, t)
    s.require(has_transactions(p), s.coordinator_epoch == c, prepare(s), s.txn_partition, ~s.marker[c])
    s.marker[c] = True
    s.marker_epoch[c] = s.txn_epoch
    s.marker_commit[c] = s.txn_state == TxnState.PrepareCommit


@spec.action(c=coordinators, t=partitions, r=replicas, actors=("coordinator", "leader {r}"))
def TxnMarkerArrives(s, p, c, t, r):
    """A marker reaches the leader; the current coordinator completes the transaction."""
    s = part(s, p, t)
    s.require(has_transactions(p), s.marker[c], s.leader == r)
    out = s.rule("marker-append", t=t, r=r, c=c)
    s.respond(out)
    ok = out == Error.NONE
    me = s.marker_epoch[c]
    for x in replicas(p):
        changed = s.producer_epoch[x] != me
        s.first_seq[x] = If(ok & changed, -1, s.first_seq[x])
        s.last_seq[x] = If(ok & changed, -1, s.last_seq[x])
        s.producer_epoch[x] = If(ok, me, s.producer_epoch[x])
        s.txn_open[x] = s.txn_open[x] & ~ok
        s.entry_coordinator_epoch[x] = If(ok, c, s.entry_coordinator_epoch[x])
    s.last_marker_coordinator_epoch = If(ok, c, s.last_marker_coordinator_epoch)
    s.marker[c] = False
    # TransactionMarkerRequestCompletionHandler: INVALID_PRODUCER_EPOCH or
    # TRANSACTION_COORDINATOR_FENCED cancels the markers without completing the transaction
    # (it stays prepared until the coordinator reloads it); only NONE removes the partition, and
    # the transaction completes once no partition is left (TransactionMarkerChannelManager)
    done = (s.coordinator_epoch == c) & prepare(s) & ok
    others_done = And(*[~s.whole.txn_partition[u] for u in partitions(p) if u != t]) \
        if p.partitions > 1 else TRUE
    complete = done & others_done
    s.txn_state = If(complete, If(s.txn_state == TxnState.PrepareCommit, TxnState.CompleteCommit,
                                  TxnState.CompleteAbort), s.txn_state)
    s.txn_partition = s.txn_partition & ~done


@spec.action(actors=("coordinator", "coordinator"))
def CoordinatorFailover(s, p):
    """The transaction log partition moves: the new coordinator loads the transaction from the
    log (coordinator epoch+1); markers of the old one may still be on the wire."""
    # only a failover during PrepareX can matter: the rest of the coordinator's state is in the
    # transaction log, so a failover elsewhere only renames the coordinator epochs
    s.require(has_transactions(p), s.coordinator_epoch < p.coordinator_failovers, prepare(s))
    s.coordinator_epoch = s.coordinator_epoch + 1


@spec.action(t=partitions, r=replicas, actors=("admin", "leader {r}"))
def DeleteRecords(s, p, t, r):
    """DeleteRecords (or retention) moves the leader's log start offset to its log end, past
    every offset of the producer so far; the follower learns it later."""
    s = part(s, p, t)
    # after KAFKA-7190 DeleteRecords touches nothing this model tracks: the producer state
    # stays, and the producer reads the log start offset only from UNKNOWN_PRODUCER_ID, which a
    # current broker never answers to a produce
    s.require(truncate_head_drops_state(s, p), s.leader == r, s.deletions < p.deletions,
              ~s.acked_below_log_start[r] | ~s.data_below_log_start[r])
    s.deletions = s.deletions + 1
    s.acked_below_log_start[r] = True
    s.data_below_log_start[r] = True
    s.log_start_behind[1 - r] = True
    # before KAFKA-7190 (ProducerStateManager.truncateHead) a producer whose last data offset
    # fell below the log start was removed
    remove_entry(s, r, True)


@spec.action(t=partitions, r=replicas, actors=("leader", "follower {r}"))
def FollowerFetch(s, p, t, r):
    """A follower learns the leader's log start offset from a fetch response."""
    s = part(s, p, t)
    # only a leader that drops a producer's state with its segments makes the log start offset
    # matter to this model (DeleteRecords is enabled only then)
    s.require(truncate_head_drops_state(s, p), s.leader != r, s.log_start_behind[r])
    s.log_start_behind[r] = False
    s.acked_below_log_start[r] = s.acked_below_log_start[1 - r]
    s.data_below_log_start[r] = s.data_below_log_start[1 - r]
    remove_entry(s, r, s.data_below_log_start[1 - r])


@spec.action(t=partitions, actors=("controller", "partition"))
def LeaderFailover(s, p, t):
    """The other (in-sync) replica becomes the leader, with the log start offset it has seen."""
    s = part(s, p, t)
    s.require(s.leader_failovers < p.leader_failovers)
    s.leader = 1 - s.leader
    s.leader_failovers = s.leader_failovers + 1


@spec.action(t=partitions, r=replicas, actors=("broker {r}", "broker {r}"))
def ExpireProducer(s, p, t, r):
    """producer.id.expiration.ms: an idle producer with no open transaction is forgotten
    (long after any request or marker of it has been answered)."""
    s = part(s, p, t)
    idle = And(~s.request, ~any_in_flight(s, p), *[~s.marker[c] for c in coordinators(p)])
    if s.variant == "kafka-9144":
        # before KAFKA-9144 (ProducerStateManager.isProducerExpired) the last timestamp came
        # from data batches only; a marker that bumps the epoch clears the batches, so the
        # entry's timestamp is -1 and it expires at the next check, whatever is in flight
        idle = idle | (s.first_seq[r] == -1)
    s.require(s.producer_epoch[r] != NO_EPOCH, ~s.txn_open[r], idle)
    remove_entry(s, r, True)


# ---------------------------------------------------------------------------------------------
# Properties

@spec.invariant("no-duplicate")
def no_duplicate(s, p):
    """No record is appended to the partition twice."""
    return And(*[s.appended[k] <= 1 for k in range(p.records)])


@spec.sometimes("duplicate-in-flight")
def duplicate_in_flight(s, p):
    """A produce request for a record already in the log is in flight (the retried batch whose rejection no-duplicate judges)."""
    return Or(*[s.request[t] & Or(*[(s.request_record[t] == k) & (s.appended[k] >= 1)
                                    for k in range(p.records)]) for t in range(p.partitions)])


@spec.transition_property("in-order", actions=["Produce"])
def in_order(pre, post, action, args, outcome, p):
    """A producer's records are appended to a partition in the order it sent them."""
    pre, post = part(pre, p, args["t"]), part(post, p, args["t"])
    return ~(outcome == Error.NONE) | (pre.request_record >= pre.max_appended)


@spec.transition_property("new-records-in-order", actions=["Produce"])
def new_records_in_order(pre, post, action, args, outcome, p):
    """A record the partition has not held before is never appended after a record the producer sent later."""
    pre, post = part(pre, p, args["t"]), part(post, p, args["t"])
    first_time = pre.appended[pre.request_record] == 0
    return ~(outcome == Error.NONE) | ~first_time | (pre.request_record >= pre.max_appended)


@spec.transition_property("fenced-stays-fenced", actions=["Produce"])
def fenced_stays_fenced(pre, post, action, args, outcome, p):
    """Once a newer instance with the same transactional id has initialised, the older one never appends again."""
    return ~(outcome == Error.NONE) | ~pre.fenced


@spec.transition_property("no-hanging-transaction", actions=["Produce"])
def no_hanging_transaction(pre, post, action, args, outcome, p):
    """A transactional record is appended only while the coordinator's transaction includes the partition and has not completed, so that a marker will close it."""
    pre, post = part(pre, p, args["t"]), part(post, p, args["t"])
    if not p.transactional:
        return TRUE
    unfinished = (post.txn_state == TxnState.Ongoing) | (post.txn_state == TxnState.PrepareCommit) | \
        (post.txn_state == TxnState.PrepareAbort)
    return ~(outcome == Error.NONE) | (unfinished & post.txn_partition)


@spec.transition_property("marker-epoch-monotonic", actions=["TxnMarkerArrives"])
def marker_epoch_monotonic(pre, post, action, args, outcome, p):
    """The coordinator epoch on the markers appended to a partition never decreases."""
    pre, post = part(pre, p, args["t"]), part(post, p, args["t"])
    return ~(outcome == Error.NONE) | (args["c"] >= pre.last_marker_coordinator_epoch)


@spec.transition_property("fenced-only-when-overtaken", actions=["EndTxn"])
def fenced_only_when_overtaken(pre, post, action, args, outcome, p):
    """The producer's EndTxn is answered PRODUCER_FENCED only once a newer instance or the coordinator has moved the epoch past the one it holds."""
    return ~(outcome == Error.PRODUCER_FENCED) | pre.fenced | (pre.epoch < pre.txn_epoch)


@spec.transition_property("aborted-commit-is-fenced", actions=["EndTxn"])
def aborted_commit_is_fenced(pre, post, action, args, outcome, p):
    """A commit that reaches the coordinator after it aborted the transaction on its own is answered PRODUCER_FENCED, never the fatal INVALID_TXN_STATE."""
    overtaken = (pre.end_txn == EndTxnRequest.COMMIT) & (pre.txn_state == TxnState.CompleteAbort)
    return ~overtaken | ~(outcome == Error.INVALID_TXN_STATE)


@spec.transition_property("out-of-order-only-after-a-gap", actions=["Produce"])
def out_of_order_only_after_a_gap(pre, post, action, args, outcome, p):
    """A batch is answered OUT_OF_ORDER_SEQUENCE_NUMBER only when a record the producer sent to that partition before it is missing from the log."""
    t, rec = args["t"], part(pre, p, args["t"]).request_record
    gap = Or(*[(k < rec) & (pre.appended[k] == 0) &
               ((pre.record_partition[k] == t) if p.partitions > 1 else TRUE)
               for k in range(p.records)])
    return ~(outcome == Error.OUT_OF_ORDER_SEQUENCE_NUMBER) | gap


@spec.transition_property("acknowledged-is-appended", actions=["Produce"])
def acknowledged_is_appended(pre, post, action, args, outcome, p):
    """A record the leader acknowledges is in the partition's log."""
    pre = part(pre, p, args["t"])
    return ~(outcome == Error.DUPLICATE_SEQUENCE_NUMBER) | (pre.appended[pre.request_record] >= 1)


# ---------------------------------------------------------------------------------------------
# Lemmas: auxiliary invariants that `kcheck prove` proves first and then assumes (the notes'
# "Proofs" section says which property needs which)

def unfinished(s):
    return (s.txn_state == TxnState.Ongoing) | prepare(s)


def each_partition(lemma):
    """A lemma stated for one partition holds for every partition."""
    @functools.wraps(lemma)
    def every(s, p):
        return And(*[lemma(part(s, p, t), p) for t in partitions(p)])
    return every


@spec.invariant("fenced-by-second-instance", lemma=True)
@each_partition
def fenced_by_second_instance(s, p):
    """The first instance is fenced only once the second one holds an epoch."""
    return ~s.fenced | (s.second_instance == SecondInstance.READY)


@spec.invariant("client-epoch-not-ahead", lemma=True)
@each_partition
def client_epoch_not_ahead(s, p):
    """The producer's epoch is never ahead of the coordinator's."""
    if not p.transactional:
        return TRUE   # the idempotent producer bumps its own epoch, with no transaction
    return s.epoch <= s.txn_epoch


@spec.invariant("request-epoch-not-ahead", lemma=True)
@each_partition
def request_epoch_not_ahead(s, p):
    """A produce request on the wire carries an epoch no newer than the producer's."""
    return ~s.request | (s.request_epoch <= s.epoch)


@spec.invariant("broker-epoch-not-ahead", lemma=True)
@each_partition
def broker_epoch_not_ahead(s, p):
    """No replica's producer state is at an epoch newer than the coordinator's."""
    if not p.transactional:
        return TRUE   # the idempotent producer bumps its own epoch, with no transaction
    return And(*[s.producer_epoch[r] <= s.txn_epoch for r in replicas(p)])


@spec.invariant("open-transaction-is-unfinished", lemma=True)
@each_partition
def open_transaction_is_unfinished(s, p):
    """A transaction open at a replica is one the coordinator holds unfinished, with the partition."""
    return And(*[~s.txn_open[r] | (unfinished(s) & s.txn_partition) for r in replicas(p)])


@spec.invariant("zombie-is-behind", lemma=True)
@each_partition
def zombie_is_behind(s, p):
    """Once fenced, the first instance's epoch is older than the coordinator's, no transaction is in progress and no last epoch is kept for a retry."""
    return ~s.fenced | ((s.epoch != NO_EPOCH) & (s.epoch < s.txn_epoch) &
                        (s.txn_state == TxnState.Empty) & (s.txn_last_epoch == NO_EPOCH))


@spec.invariant("epoch-once-initialised", lemma=True)
@each_partition
def epoch_once_initialised(s, p):
    """The producer has an epoch exactly when it has left initialisation."""
    initialising = (s.client == ClientState.UNINITIALIZED) | (s.client == ClientState.INITIALIZING)
    return initialising == (s.epoch == NO_EPOCH)


@spec.invariant("marker-epoch-not-ahead", lemma=True)
@each_partition
def marker_epoch_not_ahead(s, p):
    """A marker on the wire carries an epoch, no newer than the coordinator's."""
    return And(*[~s.marker[c] | ((s.marker_epoch[c] != NO_EPOCH) & (s.marker_epoch[c] <= s.txn_epoch))
                 for c in coordinators(p)])


@spec.invariant("markers-from-known-coordinators", lemma=True)
@each_partition
def markers_from_known_coordinators(s, p):
    """Only the current coordinator or an earlier one has a marker on the wire."""
    return And(*[~s.marker[c] | (c <= s.coordinator_epoch) for c in coordinators(p)])


@spec.invariant("entry-coordinator-epoch-not-ahead", lemma=True)
@each_partition
def entry_coordinator_epoch_not_ahead(s, p):
    """No replica's producer state names a coordinator epoch newer than the current one."""
    return And(*[s.entry_coordinator_epoch[r] <= s.coordinator_epoch for r in replicas(p)])


@spec.invariant("current-marker-matches-transaction", lemma=True)
@each_partition
def current_marker_matches_transaction(s, p):
    """The current coordinator's marker on the wire is for the transaction it is completing, at its epoch."""
    return And(*[(s.coordinator_epoch != c) | ~s.marker[c] |
                 (prepare(s) & s.txn_partition & (s.marker_epoch[c] == s.txn_epoch))
                 for c in coordinators(p)])


@spec.invariant("prepared-data-is-older", lemma=True)
@each_partition
def prepared_data_is_older(s, p):
    """While the coordinator prepares a transaction, its data open at a replica is at an epoch older than the coordinator's (the bump of transaction version 2)."""
    return ~prepare(s) | And(*[~s.txn_open[r] | (s.producer_epoch[r] < s.txn_epoch)
                               for r in replicas(p)])


@spec.invariant("end-txn-while-ending", lemma=True)
@each_partition
def end_txn_while_ending(s, p):
    """The producer waits for an EndTxn only while committing or aborting, with no batch in flight."""
    return And((s.end_txn == EndTxnRequest.NO_REQUEST) | ~s.batch,
        (s.end_txn != EndTxnRequest.COMMIT) | (s.client == ClientState.COMMITTING_TRANSACTION),
        (s.end_txn != EndTxnRequest.ABORT) | (s.client == ClientState.ABORTING_TRANSACTION))


@spec.invariant("batch-in-transaction", lemma=True)
@each_partition
def batch_in_transaction(s, p):
    """The producer has a batch awaiting its response only inside a transaction that includes the partition."""
    if p.max_in_flight > 1:
        return TRUE   # stated for one batch in flight ("the" batch, "the" request)
    if not p.transactional:
        return TRUE   # the idempotent producer bumps its own epoch, with no transaction
    if p.partitions > 1:
        return TRUE   # stated for one partition: another's failed batch ends IN_TRANSACTION
    return ~s.batch | ((s.client == ClientState.IN_TRANSACTION) & s.partition_in_txn)


@spec.invariant("epoch-bump-while-aborting", lemma=True)
@each_partition
def epoch_bump_while_aborting(s, p):
    """The producer's own epoch bump runs only as the last step of an abort, after its EndTxn."""
    return ~s.epoch_bump | ((s.client == ClientState.ABORTING_TRANSACTION) &
                            (s.end_txn == EndTxnRequest.NO_REQUEST))


def rejects_as_retry(s, r, e, q):
    """Replica r would not append (epoch e, sequence q) again: a newer epoch fences it, or its
    retained window at that epoch holds the sequence (a duplicate)."""
    pe = s.producer_epoch[r]
    return (pe > e) | ((pe == e) & (s.first_seq[r] != -1) & (s.first_seq[r] <= q) & (q <= s.last_seq[r]))


@spec.invariant("appended-retry-is-rejected", lemma=True)
@each_partition
def appended_retry_is_rejected(s, p):
    """Every replica rejects or deduplicates a retry of a batch that is already in the log, whether on the wire or still to be sent."""
    in_log = lambda k: Or(*[(k == i) & (s.appended[i] >= 1) for i in range(p.records)])
    return And(*[And(~s.request | ~in_log(s.request_record) |
                     rejects_as_retry(s, r, s.request_epoch, s.request_seq),
                     ~s.batch | ~in_log(s.batch_record) | rejects_as_retry(s, r, s.epoch, s.batch_seq))
                 for r in replicas(p)])


@spec.invariant("one-batch-in-flight", lemma=True)
@each_partition
def one_batch_in_flight(s, p):
    """With max.in.flight 1 the producer awaits no earlier batch and queues no second request."""
    if p.max_in_flight > 1:
        return TRUE
    return ~s.earlier_batch[0] & ~s.next_request[0]


@spec.invariant("idempotent-producer-has-no-second-instance", lemma=True)
@each_partition
def idempotent_producer_has_no_second_instance(s, p):
    """With no transactional id there is no second instance to fence the producer."""
    if p.transactional:
        return TRUE
    return ~s.fenced & (s.second_instance == SecondInstance.NOT_STARTED)


@spec.invariant("retained-window-is-ordered", lemma=True)
@each_partition
def retained_window_is_ordered(s, p):
    """A replica's retained sequence window, when it has one, starts no later than it ends."""
    return And(*[(s.first_seq[r] == -1) | ((0 <= s.first_seq[r]) & (s.first_seq[r] <= s.last_seq[r]))
                 for r in replicas(p)])


@spec.invariant("request-is-the-batch", lemma=True)
@each_partition
def request_is_the_batch(s, p):
    """A request on the wire for the batch the producer awaits carries the batch's epoch and sequence; a request for an earlier batch carries an older epoch."""
    if p.max_in_flight > 1:
        return TRUE   # stated for one batch in flight ("the" batch, "the" request)
    cur = s.request_record == s.batch_record
    return ~s.request | ~s.batch | If(cur, (s.request_epoch == s.epoch) & (s.request_seq == s.batch_seq),
                                      s.request_epoch < s.epoch)


@spec.invariant("request-was-sent", lemma=True)
@each_partition
def request_was_sent(s, p):
    """A request on the wire is for a record already handed to the producer, and at an epoch."""
    return ~s.request | ((s.request_record < s.sent) & (s.request_epoch != NO_EPOCH))


@spec.invariant("batch-is-a-sent-record", lemma=True)
@each_partition
def batch_is_a_sent_record(s, p):
    """A partition's batch awaiting its response holds a record already handed to the producer: with one partition, the last one."""
    last = (s.batch_record == s.sent - 1) if p.partitions == 1 else TRUE
    return ~s.batch | ((s.batch_record < s.sent) & last)


@spec.invariant("only-sent-records-appended", lemma=True)
@each_partition
def only_sent_records_appended(s, p):
    """Only a record already handed to the producer is in the log."""
    return And(*[(s.appended[k] == 0) | (k < s.sent) for k in range(p.records)])


@spec.invariant("timed-out-request-is-being-aborted", lemma=True)
@each_partition
def timed_out_request_is_being_aborted(s, p):
    """While a request the producer no longer awaits is on the wire at the producer's epoch, the producer is aborting that transaction (whose EndTxn bumps the epoch) or has failed."""
    if p.max_in_flight > 1:
        return TRUE   # stated for one batch in flight ("the" batch, "the" request)
    if not p.transactional:
        return TRUE   # the idempotent producer's own bump follows the timeout instead
    awaited = s.batch & (s.request_record == s.batch_record)
    return ~s.request | awaited | (s.request_epoch < s.epoch) | And(
        s.partition_in_txn | (s.client == ClientState.FATAL_ERROR),
        (s.client == ClientState.ABORTABLE_ERROR) | (s.client == ClientState.FATAL_ERROR) |
        ((s.client == ClientState.ABORTING_TRANSACTION) & ((s.end_txn == EndTxnRequest.ABORT) | s.epoch_bump)))


@spec.invariant("replica-epochs-agree", lemma=True)
@each_partition
def replica_epochs_agree(s, p):
    """The two in-sync replicas hold the producer at the same epoch, unless one has expired it."""
    return (s.producer_epoch[0] == s.producer_epoch[1]) | (s.producer_epoch[0] == NO_EPOCH) | \
        (s.producer_epoch[1] == NO_EPOCH)


@spec.invariant("log-not-ahead-of-producer", lemma=True)
@each_partition
def log_not_ahead_of_producer(s, p):
    """The log holds no record later than the last one sent, nor later than the one on the wire."""
    if p.max_in_flight > 1:
        return TRUE   # stated for one batch in flight ("the" batch, "the" request)
    return (s.max_appended < s.sent) & (~s.request | (s.max_appended <= s.request_record))


@spec.invariant("stale-markers-are-fenced", lemma=True)
@each_partition
def stale_markers_are_fenced(s, p):
    """The last appended marker is from the current coordinator or an earlier one, and a marker still on the wire from an older coordinator finds every replica's producer state at the newer coordinator epoch."""
    return (s.last_marker_coordinator_epoch <= s.coordinator_epoch) & \
        And(*[~s.marker[c] | (c >= s.last_marker_coordinator_epoch) |
                 And(*[(s.producer_epoch[r] != NO_EPOCH) &
                       (s.entry_coordinator_epoch[r] >= s.last_marker_coordinator_epoch)
                       for r in replicas(p)])
                 for c in coordinators(p)])


@spec.invariant("transaction-has-epoch", lemma=True)
@each_partition
def transaction_has_epoch(s, p):
    """The coordinator has a transaction in any state but Empty only once it has handed out an epoch."""
    return (s.txn_state == TxnState.Empty) | (s.txn_epoch != NO_EPOCH)


def in_log(s, p, k):
    return Or(*[(k == i) & (s.appended[i] >= 1) for i in range(p.records)])


@spec.invariant("sequences-handed-out-in-order", lemma=True)
@each_partition
def sequences_handed_out_in_order(s, p):
    """At the producer's epoch, the batch it awaits has the last sequence handed out, and neither a request on the wire nor any replica's retained window goes beyond it (no replica retains sequences at a newer epoch)."""
    return And(~s.batch | (s.batch_seq == s.next_seq - 1),
               ~s.request | (s.request_epoch != s.epoch) | (s.request_seq < s.next_seq),
               And(*[(s.first_seq[r] == -1) | (s.producer_epoch[r] < s.epoch) |
                     ((s.producer_epoch[r] == s.epoch) & (s.last_seq[r] < s.next_seq))
                     for r in replicas(p)]))


@spec.invariant("window-ends-at-the-batch", lemma=True)
@each_partition
def window_ends_at_the_batch(s, p):
    """A replica's retained window at the producer's epoch reaches the awaited batch's sequence only once that batch is in the log."""
    return ~s.batch | And(*[(s.producer_epoch[r] != s.epoch) | (s.first_seq[r] == -1) |
                            (s.last_seq[r] != s.batch_seq) | in_log(s, p, s.batch_record)
                            for r in replicas(p)])


@spec.invariant("window-ends-at-the-request", lemma=True)
@each_partition
def window_ends_at_the_request(s, p):
    """A replica's retained window at a request's epoch ends at or below the request's sequence, and reaches it only once that request's record is in the log."""
    if p.max_in_flight > 1:
        return TRUE   # stated for one batch in flight ("the" batch, "the" request)
    return ~s.request | And(*[(s.producer_epoch[r] != s.request_epoch) | (s.first_seq[r] == -1) |
                              (s.last_seq[r] < s.request_seq) |
                              ((s.last_seq[r] == s.request_seq) & in_log(s, p, s.request_record))
                              for r in replicas(p)])


@spec.invariant("no-log-start-movement", lemma=True)
@each_partition
def no_log_start_movement(s, p):
    """No replica's log start offset passes the producer's offsets (DeleteRecords leaves producer state alone since KAFKA-7190)."""
    return And(*[~s.log_start_behind[r] & ~s.data_below_log_start[r] & ~s.acked_below_log_start[r]
                 for r in replicas(p)])


@spec.leads_to("every-prepared-transaction-completes", fair=["TxnMarkerArrives", "WriteTxnMarker"])
def every_prepared_transaction_completes(s, p):
    """Every transaction the coordinator prepares to commit or abort eventually completes."""
    return prepare(s), ~prepare(s)


def transaction_open(s, p):
    return Or(*[(v.leader == r) & v.txn_open[r] for v in (part(s, p, t) for t in partitions(p))
                for r in replicas(p)])


@spec.leads_to("every-transaction-ends", fair=["TxnMarkerArrives", "WriteTxnMarker", "EndTxn",
                                                "EpochBump", "AbortTimedOutTransaction", "Produce",
                                                "ProduceRequest", "DeliveryTimeout"])
def every_transaction_ends(s, p):
    """Every transaction open at the partition is eventually closed by a marker."""
    return transaction_open(s, p), ~transaction_open(s, p)


# ---------------------------------------------------------------------------------------------
# Variants

SEQUENCE_RESET = ("after UNKNOWN_PRODUCER_ID the 2.3 client restarts the partition's sequences at 0 "
                  "with the same epoch, below sequences a replica that has not seen the new log "
                  "start offset still retains: the step towards seed problem 2.")
TV1_NO_BUMP = ("transaction version 1 bumps no epoch at EndTxn, so a prepared transaction's data is "
               "at the coordinator's current epoch: the lemma states the version-2 bump that the "
               "marker check (equal epoch with an open transaction is stale) relies on.")
spec.variant("kip360", "Kafka today: KIP-360 epoch bumps, producer state kept after DeleteRecords "
             "(KAFKA-7190), transaction version 2 (KIP-890 verification and an epoch bump at every "
             "EndTxn)", default=True,
             findings={
                 "no-hanging-transaction": "holds although an expired producer's state lets any "
                 "epoch start at sequence 0: it is the coordinator's verification (KIP-890 part 1) "
                 "that turns the zombie away, not the broker's state.",
             })
spec.variant("pre-kip360", "Kafka 2.3: on UNKNOWN_PRODUCER_ID with the last acknowledged offset below "
             "the log start, restart sequences at 0 with the same epoch; the broker drops a producer's "
             "state with its segments and answers UNKNOWN_PRODUCER_ID (no epoch bump of any kind)",
             violates=["no-duplicate", "fenced-stays-fenced", "no-hanging-transaction",
                       "out-of-order-only-after-a-gap",
                       "marker-epoch-monotonic", "acknowledged-is-appended", "every-transaction-ends",
                       # lemmas of kip360's proofs that this variant breaks
                       "open-transaction-is-unfinished", "prepared-data-is-older",
                       "appended-retry-is-rejected", "request-is-the-batch",
                       "timed-out-request-is-being-aborted", "stale-markers-are-fenced",
                       "no-log-start-movement", "sequences-handed-out-in-order",
                       "window-ends-at-the-batch", "window-ends-at-the-request"],
             findings={
                 "every-transaction-ends": "seed problem 3 as a progress violation: the "
                 "zombie's write opens a transaction that no marker ever closes (kcheck progress "
                 "producer --variant pre-kip360).",
                 "sequences-handed-out-in-order": SEQUENCE_RESET,
                 "window-ends-at-the-batch": SEQUENCE_RESET,
                 "window-ends-at-the-request": SEQUENCE_RESET,
                 "open-transaction-is-unfinished": "the zombie's sequence-0 write after its state "
                 "was deleted opens a transaction the coordinator does not hold (seed problem 3).",
                 "prepared-data-is-older": TV1_NO_BUMP,
                 "appended-retry-is-rejected": "DeleteRecords drops the producer's state, so the "
                 "retry of a batch already in the log is accepted again (seed problem 1).",
                 "request-is-the-batch": "the abort bumps no epoch, so the timed-out request of "
                 "the aborted transaction is still on the wire at the producer's epoch when the "
                 "next transaction's batch is sent.",
                 "timed-out-request-is-being-aborted": "the abort completes without an epoch "
                 "bump, leaving the timed-out request on the wire at the producer's epoch.",
                 "stale-markers-are-fenced": "truncateHead drops the entry with its coordinator "
                 "epoch, so an old coordinator's marker is no longer fenced (as for "
                 "marker-epoch-monotonic).",
                 "no-log-start-movement": "DeleteRecords moves the log start offset past the "
                 "producer's offsets (the lemma states the world after KAFKA-7190).",

                 "no-duplicate": "seed problem 1: a batch whose response was lost is appended again "
                 "once DeleteRecords dropped the producer's state, either as the same sequence 0 "
                 "or after the client reset the sequence to 0 (scenario seed-problem-1).",
                 "acknowledged-is-appended": "seed problem 2: after the reset, a failover to a "
                 "replica that has not seen the log start offset finds the old state; with "
                 "equal-sized batches the reset batch matches a retained one and is answered as a "
                 "duplicate, so the record is acknowledged and never written (the seed expected "
                 "OUT_OF_ORDER_SEQUENCE_NUMBER, which needs a batch of another size).",
                 "no-hanging-transaction": "seed problem 3: the zombie's sequence-0 write after "
                 "its state was deleted opens a transaction the coordinator never heard of.",
                 "fenced-stays-fenced": "seed problem 3: the same write is an append by an "
                 "instance that a newer one fenced.",
                 "marker-epoch-monotonic": "truncateHead drops the producer's entry with its "
                 "coordinator epoch, so a marker from the coordinator before a failover, still on "
                 "the wire, is appended after the new coordinator's (like KAFKA-9144 with "
                 "expiry).",
                 "out-of-order-only-after-a-gap": "a spurious OUT_OF_ORDER_SEQUENCE_NUMBER (22 "
                 "steps): state lost to DeleteRecords and a marker-only entry left at the "
                 "producer's epoch make the next batch's sequence look like a gap.",
             })
spec.variant("pre-kip360-in-flight", "pre-kip360 (Kafka 2.3) with two batches in flight, for the "
             "idempotent-only producer: the seed's ordering problem",
             params={"max_in_flight": 2, "transactional": 0, "coordinator_failovers": 0},
             violates=["no-duplicate", "in-order", "acknowledged-is-appended",
                       "out-of-order-only-after-a-gap",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected", "sequences-handed-out-in-order",
                       "window-ends-at-the-batch", "no-log-start-movement"],
             findings={
                 "in-order": "the seed's ordering problem (10 steps): batches 0 and 1 are in "
                 "flight, 0 is appended but its response lost, 1 is appended and acknowledged, "
                 "DeleteRecords drops the producer's state, and the retry of 0 (sequence 0, no "
                 "state) is appended after 1. With one batch in flight the retry can only precede "
                 "the next batch; kip360 keeps the order with two in flight (50,266 states "
                 "transactional, 500 idempotent).",
                 "no-duplicate": "seed problem 1 for the idempotent producer (7 steps).",
                 "acknowledged-is-appended": "seed problem 2 for the idempotent producer "
                 "(11 steps).",
                 "appended-retry-is-rejected": "DeleteRecords drops the producer's state (as "
                 "pre-kip360).",
                 "sequences-handed-out-in-order": SEQUENCE_RESET,
                 "window-ends-at-the-batch": SEQUENCE_RESET,
                 "no-log-start-movement": "the lemma states the world after KAFKA-7190.",
                 "out-of-order-only-after-a-gap": "seed problem 2's OUT_OF_ORDER_SEQUENCE_NUMBER "
                 "(14 steps): after the reset to sequence 0 and a failover to the replica that "
                 "has not seen the log start, the retained window makes the reset batch look out "
                 "of order, although nothing is missing.",
             })
spec.variant("no-last-epoch", "InitProducerId bumps with the current epoch but keeps no last epoch "
             "for retries",
             findings={
                 "fenced-stays-fenced": "every verdict equals kip360's: with transaction version 2 "
                 "the client never sends InitProducerId with its epoch (EndTxn bumps it; "
                 "needToTriggerEpochBumpFromClient is false), so the last epoch is never consulted. "
                 "The rule differs (kcheck compare --rule init-producer-id); the scenario "
                 "pre-kip890-bump-retry shows the retry that the last epoch lets through.",
             })
spec.variant("pre-kip890", "transaction version 1: no partition verification, no epoch bump at "
             "EndTxn (KIP-360's client bump after an abortable error remains)",
             violates=["fenced-stays-fenced", "no-hanging-transaction", "every-transaction-ends",
                       "out-of-order-only-after-a-gap",
                       # lemmas of kip360's proofs that this variant breaks
                       "open-transaction-is-unfinished", "prepared-data-is-older"],
             findings={
                 "open-transaction-is-unfinished": "the hanging transaction itself: a produce "
                 "accepted without verification opens a transaction at the partition that the "
                 "coordinator does not hold (the step where no-hanging-transaction breaks).",
                 "prepared-data-is-older": TV1_NO_BUMP,
                 "out-of-order-only-after-a-gap": "a spurious OUT_OF_ORDER_SEQUENCE_NUMBER (19 "
                 "steps): the producer's state expires at the leader, the new coordinator's abort "
                 "marker re-creates the entry at the same epoch with no sequence (transaction "
                 "version 1 bumps no epoch), and the next transaction's batch, at sequence 1, is "
                 "refused although nothing is missing (ProducerAppendInfo.checkSequence: a "
                 "marker-only entry expects 0).",

                 "every-transaction-ends": "the hanging transaction as a progress violation: a "
                 "lasso in which a late produce after the abort's markers leaves a transaction "
                 "that no marker ever closes (kcheck progress producer --variant pre-kip890)",
                 "no-hanging-transaction": "KAFKA-12671: a produce that timed out on the client "
                 "and arrives after the abort's markers, at the same epoch, opens a transaction no "
                 "marker will close (scenario kafka-12671); the shortest trace is a zombie whose "
                 "state expired, accepted at sequence 0 because nothing verifies it.",
                 "fenced-stays-fenced": "a fenced zombie whose producer state expired appends: "
                 "with no state a version-1 leader accepts any epoch at any sequence.",
             })
spec.variant("kafka-7190", "kip360 with KAFKA-7190 undone: DeleteRecords (or retention) removes "
             "a producer whose last data offset falls below the log start offset "
             "(ProducerStateManager.truncateHead before Kafka 2.4)",
             violates=["no-duplicate", "marker-epoch-monotonic", "out-of-order-only-after-a-gap",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected", "stale-markers-are-fenced",
                       "no-log-start-movement"],
             findings={
                 "no-duplicate": "a batch whose response was lost is retried after DeleteRecords "
                 "removed the producer: with no state the leader takes sequence 0 again, and the "
                 "coordinator's verification passes because the transaction is still ongoing "
                 "(8 steps). Today's client does not reset sequences: the retry alone duplicates.",
                 "marker-epoch-monotonic": "truncateHead drops the entry with its coordinator "
                 "epoch while the old coordinator's marker is on the wire (as pre-kip360).",
                 "appended-retry-is-rejected": "the retry of a batch already in the log finds no "
                 "state to reject it (the step before no-duplicate breaks).",
                 "stale-markers-are-fenced": "the entry that fenced the old coordinator's marker "
                 "is gone.",
                 "no-log-start-movement": "the lemma states the world after KAFKA-7190.",
                 "out-of-order-only-after-a-gap": "the batch after DeleteRecords removed the "
                 "producer (9 steps): with no state a verified batch must start at sequence 0, so "
                 "the next sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, the spurious error KAFKA-7190 "
                 "reported, although nothing is missing.",
             })
spec.variant("unknown-producer-id", "kip360 with a partition leader from before KAFKA-7190 "
             "(Kafka 2.3 and older): it drops a producer's state with its segments and answers "
             "UNKNOWN_PRODUCER_ID to a sequence other than 0 from a producer it has no state for, "
             "so today's client takes its KIP-360 recovery path (TransactionManager.canRetry)",
             params={"unknown_producer_id": 1},
             violates=["no-duplicate", "marker-epoch-monotonic", "acknowledged-is-appended",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected", "stale-markers-are-fenced",
                       "sequences-handed-out-in-order", "window-ends-at-the-batch",
                       "window-ends-at-the-request", "no-log-start-movement"],
             findings={
                 "no-duplicate": "seed problem 1 with today's client (8 steps): the first batch is "
                 "appended and its response lost, DeleteRecords drops the producer's state, and "
                 "the retry (sequence 0) is taken again. The client's retry of a later batch goes "
                 "the seed's own way: UNKNOWN_PRODUCER_ID with the last acknowledged offset below "
                 "the log start makes today's transactional producer restart at sequence 0 with "
                 "the same epoch (canRetry -> startSequencesAtBeginning, scenario "
                 "unknown-producer-id-reset-duplicates). KIP-360 proposed to remove that reset; "
                 "the code kept it for the transactional producer, and only the broker's "
                 "retention of the state (KAFKA-7190) makes it unreachable.",
                 "acknowledged-is-appended": "seed problem 2 with today's client (12 steps): the "
                 "same-epoch reset, then a failover to the replica that has not fetched the log "
                 "start offset, whose retained batch at that epoch answers the reset batch as a "
                 "duplicate: acknowledged, never written.",
                 "marker-epoch-monotonic": "the leader drops the entry with its coordinator epoch "
                 "(as kafka-7190 and pre-kip360).",
                 "appended-retry-is-rejected": "the leader drops the producer's state, so a retry "
                 "of a batch already in the log is taken again.",
                 "stale-markers-are-fenced": "the entry that fenced the old coordinator's marker "
                 "is gone.",
                 "sequences-handed-out-in-order": SEQUENCE_RESET,
                 "window-ends-at-the-batch": SEQUENCE_RESET,
                 "window-ends-at-the-request": SEQUENCE_RESET,
                 "no-log-start-movement": "the lemma states the world after KAFKA-7190.",
                 "fenced-stays-fenced": "holds, and so does no-hanging-transaction: seed problem 3 "
                 "(a fenced zombie's sequence-0 write after its state was lost) is turned away by "
                 "the coordinator's verification (KIP-890), not by the producer state.",
             })
spec.variant("kip360-as-proposed", "unknown-producer-id with the client as KIP-360's text proposed "
             "it: a batch's sequence is never re-assigned, so UNKNOWN_PRODUCER_ID fails the batch and "
             "the epoch bump (the abort's, or the idempotent producer's own) restarts the sequences, "
             "where Kafka's client restarts them at the same epoch (TransactionManager.canRetry)",
             params={"unknown_producer_id": 1},
             violates=["no-duplicate", "marker-epoch-monotonic",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected", "stale-markers-are-fenced",
                       "no-log-start-movement"],
             findings={
                 "acknowledged-is-appended": "holds, where unknown-producer-id breaks it (12 "
                 "steps): seed problem 2 is gone by the KIP's own path. The batch that meets "
                 "UNKNOWN_PRODUCER_ID fails, the transaction aborts, EndTxn bumps the epoch and the "
                 "batch is sent again at sequence 0 of the new epoch, which a replica still holding "
                 "the old epoch's batches takes as a new epoch's first write, not as a duplicate "
                 "(ProducerAppendInfo.checkSequence).",
                 "no-duplicate": "seed problem 1 stays (8 steps, the same trace as "
                 "unknown-producer-id's): the retry of a batch whose response was lost keeps its "
                 "sequence 0, and a leader with no state takes it again. No client can tell; the "
                 "KIP leaves it to the broker keeping the state (KAFKA-7190, which kip360 has).",
                 "marker-epoch-monotonic": "the leader drops the entry with its coordinator epoch "
                 "(as unknown-producer-id).",
                 "appended-retry-is-rejected": "as unknown-producer-id: the state is dropped under "
                 "a retry of an appended batch.",
                 "stale-markers-are-fenced": "as unknown-producer-id.",
                 "no-log-start-movement": "the lemma states the world after KAFKA-7190.",
                 "sequences-handed-out-in-order": "holds, with window-ends-at-the-batch and "
                 "window-ends-at-the-request, which unknown-producer-id breaks by its same-epoch "
                 "reset.",
             })
spec.variant("kafka-9144", "kip360 with KAFKA-9144 undone: a producer's last timestamp comes from "
             "data batches only, so an entry whose batches a bumping marker cleared expires at once",
             violates=["marker-epoch-monotonic",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected", "stale-markers-are-fenced"],
             findings={
                 "marker-epoch-monotonic": "KAFKA-9144's own sequence (12 steps): the coordinator "
                 "times the transaction out and aborts at a bumped epoch, fails over with its "
                 "marker still on the wire, the new coordinator's marker is written, the entry "
                 "(no batches left, timestamp -1) expires, and the old coordinator's marker is "
                 "appended with a lower coordinator epoch.",
                 "appended-retry-is-rejected": "the entry expires while a retry of an appended "
                 "batch is still to come; no property breaks with it because the retry carries "
                 "an epoch the coordinator has moved past (verification answers "
                 "INVALID_PRODUCER_EPOCH).",
                 "stale-markers-are-fenced": "the entry that fenced the old coordinator's marker "
                 "expired.",
             })
spec.variant("kafka-19999", "kip360 with KAFKA-19999 undone: a transaction-version-2 marker must "
             "carry an epoch above the entry's, so the retry of a marker already written is "
             "INVALID_PRODUCER_EPOCH and the coordinator cancels its markers",
             violates=["every-prepared-transaction-completes"],
             findings={
                 "every-prepared-transaction-completes": "KAFKA-19999's first case (a lasso of "
                 "12 steps): the coordinator fails over with PrepareAbort, the old coordinator's "
                 "marker is written, the reloaded coordinator's marker carries the same epoch and "
                 "is answered INVALID_PRODUCER_EPOCH, so the transaction never completes (the "
                 "model re-sends the marker where Kafka cancels it until the next reload: either "
                 "way it stays prepared). Every safety property holds.",
             })

spec.variant("kafka-18464", "kip360 with KAFKA-18464 undone: EndTxn checks the epoch before the "
             "pending transition, so a producer whose next abort reaches a transaction still "
             "writing its markers (PrepareX, only the retry epoch valid) is fenced by its own epoch",
             violates=["fenced-only-when-overtaken"],
             findings={
                 "fenced-only-when-overtaken": "KAFKA-18464's self-fencing (13 steps): the "
                 "producer aborts, the EndTxn response carries the bumped epoch 1 while the "
                 "coordinator still writes its markers (PrepareAbort); the next transaction's batch "
                 "times out, and the producer's abort at epoch 1, the current epoch, is checked "
                 "against PrepareAbort's retry epoch 0 and answered PRODUCER_FENCED. Since PR "
                 "#18467 the pending CompleteAbort answers CONCURRENT_TRANSACTIONS first and the "
                 "abort is retried. Its state count, 26,744, is what kip360 counted before the fix "
                 "went into the end-txn rule.",
             })
spec.variant("kafka-20785", "kip360 with KAFKA-20785 undone: a commit that the coordinator's own "
             "abort overtook arrives at the retry epoch and is answered INVALID_TXN_STATE",
             violates=["aborted-commit-is-fenced"],
             findings={
                 "aborted-commit-is-fenced": "KAFKA-20785's race (10 steps): the coordinator times "
                 "the ongoing transaction out (epoch 0 to 1, PrepareAbort) and completes the abort "
                 "with its marker; the producer, which does not know, commits: its EndTxn at "
                 "epoch 0, the retry epoch, passes the epoch check and fails "
                 "the state check: INVALID_TXN_STATE, fatal for the client, although the "
                 "transaction was rolled back and the producer was merely overtaken. Every other "
                 "property holds and the state count equals kip360's (the client fails either "
                 "way; only the error differs).",
             })

spec.variant("kafka-8483", "pre-kip360-in-flight with KAFKA-8483 undone: after a spurious "
             "UNKNOWN_PRODUCER_ID the 2.3 client restarts the sequences of its batches in flight in "
             "the iteration order of a PriorityQueue (its heap array), not in sequence order",
             params={"max_in_flight": 4, "records": 4, "transactional": 0,
                     "coordinator_failovers": 0},
             violates=["new-records-in-order", "out-of-order-only-after-a-gap",
                       # what pre-kip360-in-flight breaks already (seed problems 1 and 2, the
                       # reordered duplicate)
                       "no-duplicate", "in-order", "acknowledged-is-appended",
                       "appended-retry-is-rejected", "sequences-handed-out-in-order",
                       "window-ends-at-the-batch", "no-log-start-movement"],
             findings={
                 "new-records-in-order": "KAFKA-8483's reordering (20 steps): batches 0-3 are "
                 "drained (the PriorityQueue's array [0,1,2,3]); batch 1 is acknowledged, and "
                 "removeAt(1) moves batch 3 into its place ([0,3,2]); DeleteRecords drops the "
                 "producer's state, batch 2's UNKNOWN_PRODUCER_ID restarts the sequences in the "
                 "array's order (batch 3 takes 1, batch 2 takes 2), and the Sender, draining by "
                 "sequence, appends record 3 before record 2, neither of them a duplicate. "
                 "pre-kip360-in-flight at the same configuration (204,459 states) holds it: "
                 "its reordering is always of a record already in the log.",
                 "in-order": "as pre-kip360-in-flight: the retry of an appended batch after "
                 "DeleteRecords (10 steps).",
                 "no-duplicate": "seed problem 1 (as pre-kip360-in-flight).",
                 "acknowledged-is-appended": "seed problem 2 (as pre-kip360-in-flight).",
                 "appended-retry-is-rejected": "as pre-kip360-in-flight.",
                 "sequences-handed-out-in-order": SEQUENCE_RESET,
                 "window-ends-at-the-batch": SEQUENCE_RESET,
                 "no-log-start-movement": "the lemma states the world after KAFKA-7190.",
                 "out-of-order-only-after-a-gap": "as pre-kip360-in-flight (13 steps here).",
             })

spec.variant("kafka-12152", "kip360 with KAFKA-12152 undone: the idempotent producer's epoch bump "
             "restarts the sequences only of the partitions whose batch asked for it "
             "(partitionsToRewriteSequences), so another partition goes on at its old sequence",
             params={"partitions": 2, "records": 3, "transactional": 0, "coordinator_failovers": 0},
             violates=["out-of-order-only-after-a-gap"],
             findings={
                 "out-of-order-only-after-a-gap": "KAFKA-12152's sequence (11 steps): partition "
                 "0's batch times out, which asks for an epoch bump for partition 0; partition 1's "
                 "batch is acknowledged (sequence 0 at epoch 0); the bump to epoch 1 restarts "
                 "partition 0 only, so partition 1's next batch goes out at epoch 1 with sequence "
                 "1 and its leader, which holds the producer at epoch 0, answers "
                 "OUT_OF_ORDER_SEQUENCE_NUMBER (a new epoch must start at 0), although nothing "
                 "of partition 1 is missing. kip360 at the same configuration (36,408 states) "
                 "holds every property.",
             })

spec.variant("kafka-15591", "kip360 with KAFKA-15591 undone: a producer with no state is accepted at "
             "any first sequence even on a partition whose log never held a record, so a batch that "
             "overtook an earlier one answered NOT_LEADER_OR_FOLLOWER is appended first",
             params={"not_leader": 1, "max_in_flight": 2, "transactional": 0,
                     "coordinator_failovers": 0},
             violates=["out-of-order-only-after-a-gap", "in-order", "new-records-in-order",
                       "no-duplicate",
                       # lemmas of kip360's proofs that this variant breaks
                       "appended-retry-is-rejected"],
             findings={
                 "out-of-order-only-after-a-gap": "KAFKA-15591's story (9 steps): batches 0 and 1 "
                 "are on the connection to a partition never written, batch 0 is answered "
                 "NOT_LEADER_OR_FOLLOWER, batch 1 (sequence 1) is appended by a leader with no "
                 "state, and batch 0's retry is OUT_OF_ORDER_SEQUENCE_NUMBER although nothing before "
                 "it is missing. With batch 1 acknowledged the client retries batch 0 without a bump "
                 "(not the next sequence, TransactionManager.canRetry) until it expires: record 0 is "
                 "lost (scenario kafka-15591-silent-loss). kip360 at the same configuration (924 "
                 "states) holds every property: batch 1 is refused and waits for batch 0.",
                 "in-order": "the same race with batch 1's response lost (11 steps): nothing is "
                 "acknowledged, so batch 0's OUT_OF_ORDER_SEQUENCE_NUMBER looks like a real gap, the "
                 "idempotent producer bumps its epoch and renumbers both batches "
                 "(requestIdempotentEpochBumpForPartition), and record 0, sequence 0 of epoch 1, is "
                 "appended after record 1.",
                 "new-records-in-order": "as in-order (11 steps): record 0 was never in the log.",
                 "no-duplicate": "the same bump (13 steps): batch 1's retry, sequence 1 of epoch 1, "
                 "is appended a second time.",
                 "appended-retry-is-rejected": "batch 1 is in the log and its retry, renumbered at "
                 "the new epoch, is not a duplicate of anything the leader retains.",
             })


# ---------------------------------------------------------------------------------------------
# Known bugs: each names the variant that is kip360 with that one fix undone, or says why the
# spec cannot express it

spec.known_bug("KAFKA-7190", broke="DeleteRecords or retention removed a producer's state with its "
               "last batch, so a retried batch was appended again as a new producer's sequence 0",
               fix="commit c49775b (PR #7388), Kafka 2.4", code="ProducerStateManager.truncateHead",
               variant="kafka-7190", property="no-duplicate")
spec.known_bug("KAFKA-9144", broke="a producer's state expired early because markers did not refresh "
               "its timestamp, so a zombie coordinator's marker was appended with an older "
               "coordinator epoch", fix="PR #7687 (2.3 backport: PR #8960)",
               code="ProducerStateManager.isProducerExpired, ProducerAppendInfo.appendEndTxnMarker",
               variant="kafka-9144", property="marker-epoch-monotonic")
spec.known_bug("KAFKA-19999", broke="with transaction version 2 the retry of a marker already written "
               "was rejected as INVALID_PRODUCER_EPOCH and the coordinator left the transaction "
               "prepared for ever", fix="PR #21176",
               code="ProducerAppendInfo.checkProducerEpoch, TransactionMarkerRequestCompletionHandler",
               variant="kafka-19999", property="every-prepared-transaction-completes")
spec.known_bug("KAFKA-12671", broke="a produce delayed past the abort's markers opened a transaction "
               "that no marker would close (hanging transaction)",
               fix="KIP-890: verification PR #13231 (KAFKA-14402), epoch bump per transaction "
               "PR #16719 and PR #17402 (KAFKA-14562)",
               code="UnifiedLog.analyzeAndValidateProducerState, TransactionCoordinator.endTransaction",
               variant="pre-kip890", property="no-hanging-transaction")
spec.known_bug("KAFKA-18464", broke="with transaction version 2 a producer whose previous EndTxn had "
               "returned the bumped epoch, and whose next abort reached the coordinator while it "
               "still wrote the previous transaction's markers, was fenced by its own epoch",
               fix="PR #18467", code="TransactionCoordinator.endTransaction",
               variant="kafka-18464", property="fenced-only-when-overtaken")
spec.known_bug("KAFKA-20785", broke="with transaction version 2 a commit that the coordinator's own "
               "abort (transaction timeout, or a fencing InitProducerId) overtook arrived at the retry "
               "epoch and was answered INVALID_TXN_STATE, fatal for the client, instead of "
               "PRODUCER_FENCED", fix="PR #23204",
               code="TransactionCoordinator.endTransaction",
               variant="kafka-20785", property="aborted-commit-is-fenced")
spec.known_bug("KAFKA-8483", broke="after a spurious UNKNOWN_PRODUCER_ID the 2.3 client re-assigned "
               "the sequences of its in-flight batches in PriorityQueue order, not send order, so "
               "records not yet in the log were appended out of order",
               fix="PR #6883", code="TransactionManager.startSequencesAtBeginning",
               variant="kafka-8483", property="new-records-in-order")
spec.known_bug("KAFKA-12152", broke="the idempotent producer's epoch bump did not reset the sequence "
               "of partitions with no batch in flight, so their next batch at the new epoch was "
               "OUT_OF_ORDER_SEQUENCE_NUMBER", fix="PR #9832",
               code="TransactionManager.bumpIdempotentProducerEpoch",
               variant="kafka-12152", property="out-of-order-only-after-a-gap")
spec.known_bug("KAFKA-15591", broke="an idempotent producer's later batch that overtook an earlier "
               "one answered NOT_LEADER_OR_FOLLOWER (a topic just created) was accepted at any first "
               "sequence by a leader with no state, and the earlier batch's retries were "
               "OUT_OF_ORDER_SEQUENCE_NUMBER until it expired: silent loss (also KAFKA-14312, "
               "KAFKA-19880)", fix="PR #23234 (Kafka 4.5)",
               code="ProducerAppendInfo.checkSequence (ProducerStateManager.mapEndOffset() == 0)",
               variant="kafka-15591", property="out-of-order-only-after-a-gap")
spec.known_bug("KAFKA-18575", broke="with transaction version 2 a transaction completing while the "
               "leader verified the next one's first batch made that batch fail",
               fix="PR #18604", code="UnifiedLog.batchMissingRequiredVerification",
               not_expressible="the leader's verification as an RPC separate from the append (the "
               "model verifies atomically), and a property that a live transaction's batch is not "
               "rejected")
spec.known_bug("KAFKA-19367", broke="InitProducerId on an ongoing transaction with transaction "
               "version 2 bumped the epoch twice, overflowing a short at 32766",
               fix="PR #19910", code="TransactionCoordinator.handleInitProducerId",
               not_expressible="epoch exhaustion and producer-id rotation (epochs are capped by "
               "max_epoch and never wrap)")
