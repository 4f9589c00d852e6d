"""Cooperative consumption of one partition: the draft KIP (seed 004), never implemented.

Several consumers of one group share one partition. Offsets are committed individually: the
coordinator keeps a stable offset (every offset below it is committed) and a set of committed
offset ranges above it ("IC" ranges); ranges merge, the stable offset advances over a contiguous
committed prefix, and the OffsetCommit response carries the last stable offset (LSO) so that a
consumer can drop its local ranges below it. A consumer filters out of what it fetched the
records it knows to be committed, and commits exactly what it processed ("gap amending"); it
commits before it holds more than max.num.ranges.to.commit ranges, and the coordinator refuses a
commit that would leave it holding more than max_ranges ranges (MAX_INDIVIDUAL_COMMIT_REACHED).
When the consumers outnumber the partitions, the key-range assignor splits the partition's key
hash space [0, N] into ranges, one a consumer, and the broker returns to a fetch only the records
whose key hash is in the fetcher's range. A rebalance (a consumer crashing or restarting) moves
ranges: every consumer commits what it processed and drops its fetch buffer before it rejoins
(eager revocation), and starts the new generation from the committed state (OffsetFetch).
Transactional (EOS) commits wait in a purgatory until the stable offset reaches them; the
committing thread is blocked meanwhile (the seed's stream threads A and B).

The log holds `records` records with two keys alternating, A (hash 0) and B (hash N), as in the
seed's cooperative-fetch example, so every consumer's records interleave with the other's.

Properties:
- no-loss: every record below the stable offset was processed.
- key-range-exclusive: no consumer is handed a record outside its key range in its generation.
- key-ranges-cover: the key ranges of the members cover the hash space without overlap.
- stable-offset-sound: the stable offset never passes an offset that was not committed.
- txn-order: a transactional commit is never visible before the stable offset passes it.
- at-least-once: a record processed twice was re-delivered by a crash or a rebalance.
- deadlock (the engine's): every run can go on until every record is committed.
"""
from __future__ import annotations

from kcheck import (And, Array, Bool, Count, Enum, Exists, Forall, If, Int, Max, Min,
                   Not, Or, Spec)

LONG_MAX = 2 ** 63 - 1


# ---------------------------------------------------------------------------------------------
# The assignors of the seed, as plain functions (the spec and the tests use them).
# An assignment maps a consumer to a list of (topic, partition, (low, high)): the key hash range
# it owns in that partition; (0, hash_max) is whole ownership.

def split_key_space(shares: int, hash_max: int = LONG_MAX) -> list[tuple[int, int]]:
    """The seed's splitRangesByAvgSize: `shares` ranges of width hash_max // shares over
    [0, hash_max] (for two shares [0, N/2 - 1] and [N/2, N]); the remainder of the uneven split
    goes to the last range, the highest hashes. When hash_max < shares - 1 the leading ranges are
    empty (low > high), which a 64-bit hash space never meets."""
    if shares < 1:
        raise ValueError("split_key_space needs at least one share")
    width = hash_max // shares
    return [(i * width, hash_max if i == shares - 1 else (i + 1) * width - 1) for i in range(shares)]


def _sharing(partitions: int, consumers: list[str], allow_ic: bool, topic_allows: bool) -> bool:
    return partitions < len(consumers) and allow_ic and topic_allows


def key_range_round_robin(partitions_per_topic: dict[str, int], subscriptions: dict[str, list[str]],
                          hash_max: int = LONG_MAX, allow_key_share: set[str] | None = None,
                          coordinator_allows_ic: bool = True,
                          topic_allows_key_range: dict[str, bool] | None = None) -> dict:
    """KeyRangeBasedRoundRobinAssignor (the seed's pseudo-code). Per topic, when the consumers
    that allow key sharing outnumber its partitions, partitions take those consumers round robin
    (the lowest partitions get the extra consumers) and each partition's hash space is split among
    the consumers it took, in that order; otherwise the topic's partitions go round robin to its
    subscribers, whole. Consumers are taken in member-id order."""
    out: dict[str, list] = {c: [] for c in subscriptions}
    for topic, n in partitions_per_topic.items():
        subs = sorted(c for c, ts in subscriptions.items() if topic in ts)
        sharers = [c for c in subs if allow_key_share is None or c in allow_key_share]
        allowed = (topic_allows_key_range or {}).get(topic, True)
        if _sharing(n, sharers, coordinator_allows_ic, allowed):
            by_partition: dict[int, list[str]] = {p: [] for p in range(n)}
            for i, c in enumerate(sharers):
                by_partition[i % n].append(c)
            for p, cs in by_partition.items():
                for c, rng in zip(cs, split_key_space(len(cs), hash_max)):
                    out[c].append((topic, p, rng))
        elif subs:
            for p in range(n):
                out[subs[p % len(subs)]].append((topic, p, (0, hash_max)))
    return out


def key_range_range(partitions_per_topic: dict[str, int], subscriptions: dict[str, list[str]],
                    hash_max: int = LONG_MAX) -> dict:
    """The range-assignor counterpart (the seed's second table): per topic, when its subscribers
    outnumber its partitions, partition p takes a contiguous block of consumers (the first
    `consumers % partitions` partitions take one more) and splits its hash space among them;
    otherwise consumer i takes a contiguous block of whole partitions, as RangeAssignor does."""
    out: dict[str, list] = {c: [] for c in subscriptions}
    for topic, n in partitions_per_topic.items():
        subs = sorted(c for c, ts in subscriptions.items() if topic in ts)
        m = len(subs)
        if not m:
            continue
        if n < m:
            q, r = divmod(m, n)
            start = 0
            for p in range(n):
                block = subs[start:start + q + (1 if p < r else 0)]
                start += len(block)
                for c, rng in zip(block, split_key_space(len(block), hash_max)):
                    out[c].append((topic, p, rng))
        else:
            q, r = divmod(n, m)
            start = 0
            for i, c in enumerate(subs):
                count = q + (1 if i < r else 0)
                for p in range(start, start + count):
                    out[c].append((topic, p, (0, hash_max)))
                start += count
    return out


# ---------------------------------------------------------------------------------------------
# The model

spec = Spec("shared_consumption", __doc__)
spec.param("records", 6, lo=2, hi=12, doc="records in the shared partition (offsets 0..records-1)")
spec.param("consumers", 2, lo=1, hi=3, doc="consumers of the group, all allowing key sharing")
spec.param("hash_max", 3, lo=1, hi=15, doc="the key hash space is [0, hash_max]; key A hashes "
           "to 0, key B to hash_max")
spec.param("fetch_max", 1, lo=1, hi=12, doc="offsets a fetch reads past the fetch position")
spec.param("max_crashes", 2, lo=0, hi=3, doc="consumer crashes in a run (each one a rebalance)")
spec.param("max_ranges", 1, lo=1, hi=4, doc="committed ranges the coordinator holds above the "
           "stable offset before it answers MAX_INDIVIDUAL_COMMIT_REACHED")
spec.param("max_ranges_to_commit", 2, lo=1, hi=4, doc="max.num.ranges.to.commit: ranges a "
           "consumer accumulates before it must commit")

Response = spec.outcomes(Enum("Response", "NONE DELAYED_IN_PURGATORY INDIVIDUAL_COMMIT_TOO_OLD "
                                          "MAX_INDIVIDUAL_COMMIT_REACHED"))
Phase = Enum("Phase", "DEAD STABLE JOINED")


def key_hash(p, o: int) -> int:
    """Key A at even offsets, key B at odd ones (the seed's cooperative-fetch example)."""
    return 0 if o % 2 == 0 else p.hash_max


def offsets(p):
    return range(p.records)


def consumers(p):
    return range(p.consumers)


def assignment_table(p) -> dict[tuple[int, ...], dict[int, tuple[int, int]]]:
    """The round-robin key-range assignor on the one partition, for every set of members."""
    table = {}
    for mask in range(1, 1 << p.consumers):
        members = tuple(c for c in consumers(p) if mask >> c & 1)
        a = key_range_round_robin({"t": 1}, {f"consumer-{c}": ["t"] for c in members}, p.hash_max)
        table[members] = {c: a[f"consumer-{c}"][0][2] for c in members}
    return table


@spec.state
def state(p):
    L, N = p.records, p.hash_max
    fields = {
        # group coordinator: committed state and group membership
        "stable_offset": Int(0, L),
        "committed_range": Array(Bool, L),       # individually committed, above the stable offset
        "rebalancing": Bool,
        "crashes": Int(0, p.max_crashes),
        # the fate of every record
        "times_processed": Array(Int(0, 2), L),
        "redelivery_allowed": Array(Bool, L),    # uncommitted when a generation started
        "ever_committed": Array(Bool, L),        # named in a commit the coordinator applied
    }
    for c in consumers(p):
        fields.update({
            f"phase_c{c}": Phase,
            f"key_low_c{c}": Int(0, N),
            f"key_high_c{c}": Int(-1, N),        # high < low: no range
            f"position_c{c}": Int(0, L),
            f"fetched_from_c{c}": Int(0, L),     # position at the last commit (no-gap-amending)
            f"known_stable_c{c}": Int(0, L),     # the last LSO this consumer learnt
            f"known_committed_c{c}": Array(Bool, L),   # its local IC ranges
            f"fetched_c{c}": Array(Bool, L),     # in its fetch buffer, not yet processed
            f"processed_c{c}": Array(Bool, L),   # processed, not yet committed
            f"in_purgatory_c{c}": Bool,          # its transactional commit waits (thread blocked)
        })
    return fields


def f(s, name, c):
    return getattr(s, f"{name}_c{c}")


@spec.init
def init(p):
    L = p.records
    members = tuple(consumers(p))
    ranges = assignment_table(p)[members]
    st = {"stable_offset": 0, "committed_range": [False] * L, "rebalancing": False, "crashes": 0,
          "times_processed": [0] * L, "redelivery_allowed": [False] * L,
          "ever_committed": [False] * L}
    for c in members:
        st.update({f"phase_c{c}": Phase.STABLE, f"key_low_c{c}": ranges[c][0],
                   f"key_high_c{c}": ranges[c][1], f"position_c{c}": 0, f"fetched_from_c{c}": 0,
                   f"known_stable_c{c}": 0, f"known_committed_c{c}": [False] * L,
                   f"fetched_c{c}": [False] * L, f"processed_c{c}": [False] * L,
                   f"in_purgatory_c{c}": False})
    yield st


def ranges_in(bits: list) -> object:
    """The number of maximal runs of set bits: what a list of offset ranges would hold."""
    return Count(*[And(b, Not(bits[o - 1])) if o else b for o, b in enumerate(bits)])


# -- the coordinator's handling of an individual commit ------------------------------------------

def committed_now(s, o):
    return (o < s.stable_offset) | s.committed_range[o]


def after_commit(s, p, commit: list):
    """The coordinator state that applying `commit` (one bit an offset) would give: merged ranges,
    the stable offset advanced over the contiguous committed prefix, and the ranges above it."""
    merged = [committed_now(s, o) | commit[o] for o in offsets(p)]
    stable = Count(*[And(*merged[:o + 1]) for o in offsets(p)])
    above = [And(merged[o], stable <= o) for o in offsets(p)]
    return stable, above


@spec.rule("purgatory-wait")
def purgatory_wait(s, p, commit, new_stable):
    """A transactional commit waits until the stable offset would pass all of it."""
    return Exists(offsets(p), lambda o: commit[o] & (new_stable <= o))


@spec.rule("purgatory-wait", variant="purgatory-first-offset")
def purgatory_wait_first(s, p, commit, new_stable):
    """A transactional commit waits until the stable offset reaches its first offset."""
    return Not(Exists(offsets(p), lambda o: commit[o] & (s.stable_offset == o)))


@spec.rule("purgatory-wait", variant="no-purgatory")
def purgatory_never(s, p, commit, new_stable):
    """Transactional commits become visible at once."""
    return False


def handle_commit(s, p, c, commit: list, transactional: bool, may_wait: bool = True):
    """OffsetCommit / TxnOffsetCommit with offset ranges from consumer c; writes the coordinator's
    and the consumer's next state and returns the response."""
    new_stable, above = after_commit(s, p, commit)
    too_old = Exists(offsets(p), lambda o: commit[o] & (o < s.stable_offset))
    wait = s.rule("purgatory-wait", commit=commit, new_stable=new_stable) \
        if transactional and may_wait else False
    too_many = ranges_in(above) > p.max_ranges
    applied = Not(too_old) & Not(wait) & Not(too_many)
    s.stable_offset = If(applied, new_stable, s.stable_offset)
    for o in offsets(p):
        s.committed_range[o] = If(applied, above[o], s.committed_range[o])
        s.ever_committed[o] = s.ever_committed[o] | (applied & commit[o])
    # the response: the LSO lets the consumer drop its ranges below it
    lso = If(applied, new_stable, s.stable_offset)
    learns = applied | too_old
    known_stable = If(learns, lso, f(s, "known_stable", c))
    setattr(s, f"known_stable_c{c}", known_stable)
    for o in offsets(p):
        known = f(s, "known_committed", c)[o] | (applied & commit[o])
        f(s, "known_committed", c)[o] = known & Not(learns & (o < lso))
        # committed, or below the LSO of a too-old answer: nothing left to commit
        f(s, "processed", c)[o] = f(s, "processed", c)[o] & Not(applied) & Not(too_old & (o < lso))
    # INDIVIDUAL_COMMIT_TOO_OLD: "the client adjusts its position to catch up with latest"
    setattr(s, f"position_c{c}", If(too_old, Max(f(s, "position", c), lso), f(s, "position", c)))
    if s.variant == "no-gap-amending":
        after_last = Count(*[Exists(range(o, p.records), lambda q: commit[q]) for o in offsets(p)])
        setattr(s, f"fetched_from_c{c}", If(applied, after_last,
                                            If(too_old, Max(f(s, "fetched_from", c), lso),
                                               f(s, "fetched_from", c))))
    setattr(s, f"in_purgatory_c{c}", Not(too_old) & wait)
    return If(too_old, Response.INDIVIDUAL_COMMIT_TOO_OLD,
              If(wait, Response.DELAYED_IN_PURGATORY,
                 If(too_many, Response.MAX_INDIVIDUAL_COMMIT_REACHED, Response.NONE)))


def commit_set(s, p, c) -> list:
    """What consumer c commits: what it processed (gap amending), or, without gap amending, the
    whole range it went through since its last commit, up to the last record it processed."""
    if s.variant == "no-gap-amending":
        processed = f(s, "processed", c)
        return [(f(s, "fetched_from", c) <= o) & Exists(range(o, p.records), lambda q: processed[q])
                for o in offsets(p)]
    return [f(s, "processed", c)[o] for o in offsets(p)]


def active(s, c):
    return (f(s, "phase", c) == Phase.STABLE) & Not(f(s, "in_purgatory", c))


# -- consumers: fetch, process, commit ---------------------------------------------------------

@spec.action(c=consumers, actors=("consumer {c}", "partition leader"))
def Fetch(s, p, c):
    """Fetch from the position with the consumer's key range; the broker returns the records whose
    key hash is in the range, and the consumer drops those it knows to be committed."""
    pos = f(s, "position", c)
    s.require(active(s, c), pos < p.records,
              Forall(offsets(p), lambda o: Not(f(s, "fetched", c)[o])))
    low, high = f(s, "key_low", c), f(s, "key_high", c)
    for o in offsets(p):
        in_window = (pos <= o) & (o < pos + p.fetch_max)
        in_range = (low <= key_hash(p, o)) & (key_hash(p, o) <= high)
        if s.variant == "no-fetch-filter":
            known = False
        elif s.variant == "lso-drop-only":
            known = f(s, "known_committed", c)[o]
        else:
            known = (o < f(s, "known_stable", c)) | f(s, "known_committed", c)[o]
        f(s, "fetched", c)[o] = in_window & in_range & Not(known)
    setattr(s, f"position_c{c}", Min(pos + p.fetch_max, p.records))


@spec.action(c=consumers, o=offsets, actors=("consumer {c}", "consumer {c}"))
def Process(s, p, c, o):
    """poll() hands the consumer its lowest fetched record and the application processes it; the
    consumer must commit first when that would make more than max.num.ranges.to.commit ranges."""
    fetched, processed = f(s, "fetched", c), f(s, "processed", c)
    s.require(active(s, c), fetched[o], Forall(range(o), lambda q: Not(fetched[q])),
              ranges_in([processed[q] | (q == o) for q in offsets(p)]) <= p.max_ranges_to_commit)
    fetched[o] = False
    processed[o] = True
    s.times_processed[o] = Min(s.times_processed[o] + 1, 2)
    s.redelivery_allowed[o] = False


@spec.action(c=consumers, transactional=(False, True), actors=("consumer {c}", "coordinator"))
def Commit(s, p, c, transactional):
    """OffsetCommit (or TxnOffsetCommit) with the consumer's processed offsets as ranges."""
    s.require(active(s, c), Exists(offsets(p), lambda o: f(s, "processed", c)[o]))
    s.respond(handle_commit(s, p, c, commit_set(s, p, c), transactional))


@spec.action(c=consumers, actors=("coordinator", "consumer {c}"))
def CompleteDelayedCommit(s, p, c):
    """The purgatory completes a waiting transactional commit once the stable offset reaches it."""
    commit = commit_set(s, p, c)
    new_stable, _ = after_commit(s, p, commit)
    s.require(f(s, "in_purgatory", c), f(s, "phase", c) == Phase.STABLE,
              Not(s.rule("purgatory-wait", commit=commit, new_stable=new_stable)))
    s.respond(handle_commit(s, p, c, commit, True, may_wait=False))


# -- membership: crash, restart, rebalance -------------------------------------------------------

def forget(s, p, c, keep_fetched=False):
    for o in offsets(p):
        if not keep_fetched:
            f(s, "fetched", c)[o] = False
        f(s, "processed", c)[o] = False


@spec.action(c=consumers, actors=("consumer {c}", "coordinator"))
def Crash(s, p, c):
    """The consumer dies, losing its buffer, its uncommitted work and any waiting transaction
    (aborted); its session expires and the group rebalances."""
    s.require(f(s, "phase", c) != Phase.DEAD, s.crashes < p.max_crashes)
    s.crashes = s.crashes + 1
    setattr(s, f"phase_c{c}", Phase.DEAD)
    setattr(s, f"in_purgatory_c{c}", False)
    setattr(s, f"key_low_c{c}", 0)
    setattr(s, f"key_high_c{c}", -1)
    forget(s, p, c)
    for o in offsets(p):
        f(s, "known_committed", c)[o] = False
    for name in ("position", "known_stable", "fetched_from"):
        setattr(s, f"{name}_c{c}", 0)
    s.rebalancing = True


@spec.action(c=consumers, actors=("consumer {c}", "coordinator"))
def Restart(s, p, c):
    """A crashed consumer starts again and joins the group (JoinGroup), which rebalances."""
    s.require(f(s, "phase", c) == Phase.DEAD)
    setattr(s, f"phase_c{c}", Phase.JOINED)
    s.rebalancing = True


@spec.action(c=consumers, actors=("consumer {c}", "coordinator"))
def Revoke(s, p, c):
    """onPartitionWithKeyRangesRevoked before rejoining: the consumer commits what it processed,
    drops what it fetched and did not process, and joins (eager revocation)."""
    s.require(s.rebalancing, active(s, c))
    s.respond(handle_commit(s, p, c, commit_set(s, p, c), False))
    forget(s, p, c, keep_fetched=s.variant == "keep-fetched-on-move")
    setattr(s, f"phase_c{c}", Phase.JOINED)


@spec.action(actors=("coordinator", "members"))
def CompleteRebalance(s, p):
    """Once every live member has joined, the leader runs the key-range assignor over them; each
    member takes its range (SyncGroup) and fetches the committed state (OffsetFetch)."""
    s.require(s.rebalancing, Forall(consumers(p), lambda c: f(s, "phase", c) != Phase.STABLE),
              Exists(consumers(p), lambda c: f(s, "phase", c) == Phase.JOINED))
    table = assignment_table(p)
    joined = {c: f(s, "phase", c) == Phase.JOINED for c in consumers(p)}

    def assigned(c, which):
        value = -1 if which else 0
        for members, ranges in table.items():
            if c in members:
                is_this = Forall(consumers(p), lambda d: joined[d] if d in members else Not(joined[d]))
                value = If(is_this, ranges[c][which], value)
        return value

    s.rebalancing = False
    for c in consumers(p):
        j = joined[c]
        setattr(s, f"phase_c{c}", If(j, Phase.STABLE, Phase.DEAD))
        setattr(s, f"key_low_c{c}", If(j, assigned(c, 0), f(s, "key_low", c)))
        setattr(s, f"key_high_c{c}", If(j, assigned(c, 1), f(s, "key_high", c)))
        for name in ("position", "known_stable", "fetched_from"):
            setattr(s, f"{name}_c{c}", If(j, s.stable_offset, f(s, name, c)))
        for o in offsets(p):
            f(s, "known_committed", c)[o] = If(j, s.committed_range[o], f(s, "known_committed", c)[o])
    for o in offsets(p):
        s.redelivery_allowed[o] = s.redelivery_allowed[o] | Not(committed_now(s, o))


# ---------------------------------------------------------------------------------------------
# Variants: the draft, and each with one change

DEADLOCK = ("a consumer whose transactional commit waits in the purgatory is blocked and cannot "
            "rejoin, while the record it waits for belongs to a member that waits for that "
            "rebalance to finish: the purgatory waits for the rebalance and the rebalance for the "
            "purgatory (with no crash at all, two consumers whose batched transactions each wait "
            "for a record of the other deadlock the same way); only expelling the blocked member "
            "(max.poll.interval.ms, transaction.timeout.ms) breaks it, throwing its work away")

# every variant that can deadlock also breaks the progress property every-record-committed:
# the stuck state is a behaviour that stops with records uncommitted (kcheck progress)
# The lemmas (below) that carry the draft's proofs of at-least-once and key-range-exclusive
# fail, with them, in the variants that break those properties: recorded with the variant.
REFETCH = ("after a rebalance the unfiltered fetch puts back into the buffer a record that was "
           "processed and committed in a range above the stable offset before it: the step "
           "before at-least-once breaks")
KEPT = "the buffer kept across the move holds a record of the consumer's old key range"
STUCK = ("the deadlock seen as progress: a behaviour stops in the purgatory deadlock with records "
         "never committed (kcheck progress shared_consumption)")

spec.variant("draft", "the design as the seed writes it", default=True,
             violates=["deadlock", "every-record-committed"],
             findings={"deadlock": DEADLOCK, "every-record-committed": STUCK})
spec.variant("no-gap-amending", "a consumer commits the whole range it fetched, not what it processed",
             violates=["no-loss"],
             findings={"no-loss": "the fetched range holds the other consumers' keys, interleaved "
                                  "with its own, so committing it moves the stable offset over "
                                  "records nobody processed"})
# measured, not argued: a sometimes-property "a consumer waits in the purgatory" is NOT REACHED
# in this variant at its default parameters (a probe spec importing this one, issue 37)
spec.idle(["CompleteDelayedCommit"], "no reachable state has a consumer waiting in the purgatory "
          "(a consumer commits the whole range from its last commit position), so the purgatory "
          "has nothing to complete", variants=["no-gap-amending"])
spec.variant("no-fetch-filter", "fetch does not filter records already committed individually",
             violates=["at-least-once", "deadlock", "every-record-committed",
                       "fetched-is-new-or-redelivered"],
             findings={"fetched-is-new-or-redelivered": REFETCH,
                       "at-least-once": "after a rebalance the consumer fetches from the stable "
                                        "offset and processes again the records committed in "
                                        "ranges above it",
                       "deadlock": DEADLOCK, "every-record-committed": STUCK})
spec.variant("no-purgatory", "transactional individual commits become visible at once",
             violates=["txn-order"],
             findings={"txn-order": "a transactional commit above a gap is visible as a committed "
                                    "range before the stable offset reaches it"})
spec.idle(["CompleteDelayedCommit"], "transactional commits become visible at once: none waits "
          "in the purgatory, so the purgatory has nothing to complete", variants=["no-purgatory"])
spec.variant("purgatory-first-offset", "a transactional commit leaves the purgatory once the "
             "stable offset reaches its first offset (the seed's example cannot tell the two apart)",
             violates=["txn-order", "deadlock", "every-record-committed"],
             findings={"txn-order": "under key sharing a consumer's batch is several ranges "
                                    "interleaved with another consumer's records; releasing it when "
                                    "the stable offset reaches its first range makes the later "
                                    "ranges visible above the stable offset",
                       "deadlock": DEADLOCK, "every-record-committed": STUCK})
spec.variant("keep-fetched-on-move", "a consumer keeps its fetched, unprocessed records when its "
             "key range moves (the seed does not say what revocation does to them)",
             violates=["key-range-exclusive", "at-least-once", "deadlock", "every-record-committed",
                       "fetched-in-key-range", "only-stable-members-buffer",
                       "fetched-below-position", "fetched-is-new-or-redelivered",
                       "processed-is-behind-its-owner"],
             findings={"fetched-in-key-range": KEPT,
                       "only-stable-members-buffer": "a consumer that revoked and rejoined still "
                                                     "holds its fetched records",
                       "fetched-below-position": "the new generation restarts the position at the "
                                                 "stable offset, below the records still buffered",
                       "fetched-is-new-or-redelivered": "the kept record, once processed, is "
                                                        "fetched again from the stable offset the "
                                                        "new generation restarted at",
                       "processed-is-behind-its-owner": "a record kept across the rebalance is "
                                                        "processed above the position the new "
                                                        "generation restarted at (the stable "
                                                        "offset), uncommitted and not re-deliverable",
                       "key-range-exclusive": "a record fetched under the old range is handed to "
                                              "the application after the range moved to another "
                                              "consumer",
                       "at-least-once": "the kept record is processed, then fetched again from the "
                                        "stable offset that the new generation starts from",
                       "deadlock": DEADLOCK, "every-record-committed": STUCK})
spec.variant("lso-drop-only", "the LSO in a commit response only drops local ranges below it; "
             "the consumer does not also treat the offsets below it as committed",
             violates=["at-least-once", "deadlock", "every-record-committed",
                       "fetched-is-new-or-redelivered"],
             findings={"fetched-is-new-or-redelivered": "a record committed in a range before "
                                                        "the rebalance is fetched again once the LSO "
                                                        "of a commit response drops that local range "
                                                        "(the LSO itself does not filter the fetch)",
                       "at-least-once": "a consumer whose position is below the LSO forgets the "
                                        "committed ranges there and fetches and processes them "
                                        "again",
                       "deadlock": DEADLOCK, "every-record-committed": STUCK})


# ---------------------------------------------------------------------------------------------
# Properties

@spec.invariant("no-loss")
def no_loss(s, p):
    """Every record below the stable offset was processed."""
    return Forall(offsets(p), lambda o: Or(s.stable_offset <= o, s.times_processed[o] >= 1))


@spec.transition_property("key-range-exclusive", actions=["Process"])
def key_range_exclusive(pre, post, action, args, outcome, p):
    """No consumer is handed a record outside its key range in its generation."""
    c, o = args["c"], args["o"]
    return (f(pre, "key_low", c) <= key_hash(p, o)) & (key_hash(p, o) <= f(pre, "key_high", c))


@spec.invariant("key-ranges-cover")
def key_ranges_cover(s, p):
    """Outside a rebalance the key ranges of the group's members cover the hash space [0, N] without overlap."""
    def owners(h):
        return Count(*[(f(s, "phase", c) == Phase.STABLE) & (f(s, "key_low", c) <= h) &
                       (h <= f(s, "key_high", c)) for c in consumers(p)])
    settled = Not(s.rebalancing) & Exists(consumers(p), lambda c: f(s, "phase", c) == Phase.STABLE)
    return Forall(range(p.hash_max + 1), lambda h: And(owners(h) <= 1,
                                                        Or(Not(settled), owners(h) == 1)))


@spec.invariant("stable-offset-sound")
def stable_offset_sound(s, p):
    """The stable offset never passes an offset that no applied commit named."""
    return Forall(offsets(p), lambda o: Or(s.stable_offset <= o, s.ever_committed[o]))


@spec.transition_property("txn-order", actions=["Commit", "CompleteDelayedCommit"])
def txn_order(pre, post, action, args, outcome, p):
    """A transactional commit never makes an offset visible as committed above the stable offset."""
    if action == "Commit" and not args["transactional"]:
        return True   # plain commits are not judged
    return Forall(offsets(p), lambda o: Not(And(post.committed_range[o], Not(pre.committed_range[o]),
                                                post.stable_offset <= o)))


@spec.transition_property("at-least-once", actions=["Process"])
def at_least_once(pre, post, action, args, outcome, p):
    """A record is processed again only if it was uncommitted when a crash or a rebalance started a new generation."""
    o = args["o"]
    return Or(pre.times_processed[o] == 0, pre.redelivery_allowed[o])


# ---------------------------------------------------------------------------------------------
# Lemmas: auxiliary invariants that `kcheck prove` proves first and then assumes (see the notes'
# "Proofs" section for what each property needs)

@spec.invariant("fetched-in-key-range", lemma=True)
def fetched_in_key_range(s, p):
    """A consumer's fetch buffer holds only records whose key hash is in its current key range."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        Not(f(s, "fetched", c)[o]),
        And(f(s, "key_low", c) <= key_hash(p, o), key_hash(p, o) <= f(s, "key_high", c)))))


@spec.invariant("only-stable-members-buffer", lemma=True)
def only_stable_members_buffer(s, p):
    """A consumer that is dead or rejoining has an empty fetch buffer."""
    return Forall(consumers(p), lambda c: Or(
        f(s, "phase", c) == Phase.STABLE, Forall(offsets(p), lambda o: Not(f(s, "fetched", c)[o]))))


@spec.invariant("pending-commit-was-processed", lemma=True)
def pending_commit_was_processed(s, p):
    """Every offset a consumer holds as processed-not-committed has been processed at least once."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        Not(f(s, "processed", c)[o]), s.times_processed[o] >= 1)))


@spec.invariant("committed-range-was-processed", lemma=True)
def committed_range_was_processed(s, p):
    """Every offset in a committed range above the stable offset has been processed at least once."""
    return Forall(offsets(p), lambda o: Or(Not(s.committed_range[o]), s.times_processed[o] >= 1))


@spec.invariant("committed-range-was-committed", lemma=True)
def committed_range_was_committed(s, p):
    """Every offset in a committed range above the stable offset was named by an applied commit."""
    return Forall(offsets(p), lambda o: Or(Not(s.committed_range[o]), s.ever_committed[o]))


def in_key_range(s, p, c, o):
    return And(f(s, "key_low", c) <= key_hash(p, o), key_hash(p, o) <= f(s, "key_high", c))


@spec.invariant("stable-key-ranges-disjoint", lemma=True)
def stable_key_ranges_disjoint(s, p):
    """No key hash lies in the ranges of two stable members, even while a rebalance is pending."""
    return Forall(range(p.hash_max + 1), lambda h: Count(*[
        (f(s, "phase", c) == Phase.STABLE) & (f(s, "key_low", c) <= h) & (h <= f(s, "key_high", c))
        for c in consumers(p)]) <= 1)


@spec.invariant("fetched-below-position", lemma=True)
def fetched_below_position(s, p):
    """A consumer's buffered records lie below its fetch position."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        Not(f(s, "fetched", c)[o]), o < f(s, "position", c))))


@spec.invariant("fetched-is-new-or-redelivered", lemma=True)
def fetched_is_new_or_redelivered(s, p):
    """A buffered record has never been processed, or was uncommitted when its generation started."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        Not(f(s, "fetched", c)[o]), s.times_processed[o] == 0, s.redelivery_allowed[o])))


@spec.invariant("processed-is-behind-its-owner", lemma=True)
def processed_is_behind_its_owner(s, p):
    """A record processed in this generation lies, for the stable member whose key range holds it, below its position or among what it knows to be committed."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        f(s, "phase", c) != Phase.STABLE, Not(in_key_range(s, p, c, o)),
        s.times_processed[o] == 0, s.redelivery_allowed[o],
        o < f(s, "position", c), o < f(s, "known_stable", c), f(s, "known_committed", c)[o])))


@spec.invariant("known-stable-offset-not-ahead", lemma=True)
def known_stable_offset_not_ahead(s, p):
    """The last stable offset a consumer learnt is never ahead of the coordinator's."""
    return Forall(consumers(p), lambda c: f(s, "known_stable", c) <= s.stable_offset)


@spec.invariant("known-committed-is-committed", lemma=True)
def known_committed_is_committed(s, p):
    """An offset a consumer holds as committed in its local ranges is committed at the coordinator."""
    return Forall(consumers(p), lambda c: Forall(offsets(p), lambda o: Or(
        Not(f(s, "known_committed", c)[o]), committed_now(s, o))))


@spec.terminal
def all_committed(s, p):
    """A run may stop once every record is committed."""
    return s.stable_offset == p.records


@spec.always_eventually("every-record-committed",
                        fair=["Fetch", "Process", "Commit", "CompleteDelayedCommit", "Restart",
                              "Revoke", "CompleteRebalance"])
def every_record_committed(s, p):
    """Once consumers stop crashing, the stable offset eventually reaches the end of the log."""
    return s.stable_offset == p.records
