"""KIP-848 consumer groups with KIP-1251 assignment-epoch offset-commit fencing (Kafka 4.3).

The group coordinator keeps a group epoch, a target assignment with its epoch, and per member a
member epoch, a reconciliation state (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS) and
the partitions it holds, assigned or pending revocation, each with the epoch at which it was
assigned (KIP-1251). Reconciliation follows CurrentAssignmentBuilder on trunk (KAFKA-16249,
KAFKA-19449, KAFKA-19974, KAFKA-20066). Clients learn their epoch and partitions only from a
heartbeat response, so a commit may carry a stale epoch; commits travel separately and may be
delayed. The offset-commit decision is the named rule "offset-commit"; the variants replace it
(or one other rule) and are compared by verdict.

Behaviours off at the default parameters (issue 15): lost heartbeat responses and the
previous-epoch rule, group epoch bumps from subscription and topic metadata changes, and the
partition epoch map as state of its own. The pre-fix variants named after a JIRA (kafka-16147,
kafka-19449, kafka-19233, kafka-20442) each undo one fix; `spec.known_bug` records them.

Properties:
- no-zombie-commit, no-spurious-fencing (on the coordinator's handling of a commit);
- join-accepted, unreleased-waits-for-another-member (on heartbeats);
- single-owner, epoch-order, empty-group-at-target-epoch, unrevoked-has-pending, client-owns-held
  (invariants);
- lemmas for `kcheck prove` (auxiliary invariants, checked by the search too).
See spec/consumer_group_notes.md for what is modelled, what is not, and the findings.
"""
from itertools import combinations, product

from kcheck import (FALSE, TRUE, And, Array, Bool, Case, Enum, Exists, Forall, If, Int, Not,
                   Or, Record, Spec)

spec = Spec("consumer_group", __doc__)
spec.param("members", 2, lo=1, hi=3, doc="member slots (a slot is one consumer; it may leave and rejoin)")
spec.param("partitions", 2, lo=1, hi=3, doc="partitions of the one subscribed topic")
spec.param("static_members", 1, lo=0, hi=3, doc="the first N slots are static members (group.instance.id)")
spec.param("max_epoch", 4, lo=1, hi=100, doc="epoch cap of the explicit search (group, member and member-id epochs)")
spec.param("commits_in_flight", 1, lo=0, hi=3, doc="offset commits that may be in flight at once")
# New behaviours, off at the defaults so that the shipped verdicts and state counts stay as they were
spec.param("lost_responses", 0, lo=0, hi=1, doc="1: a heartbeat response may be lost; the client "
           "retries with its old epoch (GroupMetadataManager's previous-epoch rule applies)")
spec.param("subscription_changes", 0, lo=0, hi=1, doc="1: a member's heartbeat may carry a changed "
           "subscription, which bumps the group epoch")
spec.param("partition_epochs", 0, lo=0, hi=1, doc="1: the coordinator's partition epoch map "
           "(ConsumerGroup.currentPartitionEpoch) is state of its own, as the pre-KAFKA-16147 "
           "bookkeeping needs; 0: it is read off the members' holds, which is what the fixed "
           "bookkeeping keeps it equal to")
spec.param("unsubscribes", 0, lo=0, hi=1, doc="1: each partition stands for a topic of its own, "
           "and a member may change its regex once per membership while the new one is not "
           "resolved yet: one that names every other topic drops one, one subscribed by the "
           "regex alone drops every topic at once; the resolution later bumps the group epoch")
spec.param("metadata_changes", 0, lo=0, hi=1, doc="1: the subscribed topic's metadata may change "
           "(partitions added), which bumps the group epoch")
spec.param("consumer_commits", 0, lo=0, hi=1, doc="1: a client may also commit with OffsetCommit v9 "
           "(the consumer's own commit), not only with its producer's TxnOffsetCommit")

Error = spec.outcomes(Enum("Error", "NONE STALE_MEMBER_EPOCH ILLEGAL_GENERATION UNKNOWN_MEMBER_ID "
                                    "FENCED_MEMBER_EPOCH UNSUPPORTED_VERSION UNRELEASED_INSTANCE_ID"))
MemberState = Enum("MemberState", "STABLE UNREVOKED_PARTITIONS UNRELEASED_PARTITIONS")
# what the coordinator records for one (member, partition)
Hold = Enum("Hold", "NONE ASSIGNED PENDING_REVOCATION")
# the request a commit slot carries: OffsetCommit v9+ or v8 (older than KIP-848's), TxnOffsetCommit
# v0-5 or v6+ (KIP-1319)
Request = Enum("Request", "NONE OFFSET_COMMIT OFFSET_COMMIT_V8 TXN_OFFSET_COMMIT TXN_OFFSET_COMMIT_V6")

LEFT = -1          # member epoch of a slot with no member record (never joined, left, fenced)
STATIC_LEFT = -2   # member epoch of a static member that left with epoch -2


def _members(p):
    return range(p.members)


def _partitions(p):
    return range(p.partitions)


def _is_static(p, m):
    return m < p.static_members


def _targets(p):
    """Assignor outputs, as a string of owners per partition ("01": p0 -> member 0, p1 -> member 1);
    '-' when the heartbeat finds the target current and computes nothing."""
    return ["-"] + ["".join(map(str, t)) for t in product(range(p.members), repeat=p.partitions)]


# ---------------------------------------------------------------------------------------------
# State

@spec.state
def state(p):
    E = p.max_epoch
    c = max(1, p.commits_in_flight)

    def per_partition(t):
        """One value per (member, partition): read s.holds[m][q]."""
        return Array(Array(t, p.partitions), p.members)
    return {
        # coordinator: group
        "group_epoch": Int(0, E, search_bound=True),
        "target_epoch": Int(0, E, search_bound=True),        # the target assignment's epoch
        "target_owner": Array(Int(-1, p.members - 1), p.partitions),
        # coordinator: members
        "member_id": Array(Int(0, E, search_bound=True), p.members),   # bumped by a static rejoin
        "member_epoch": Array(Int(-2, E, search_bound=True), p.members),
        "member_state": Array(MemberState, p.members),
        "classic": Array(Bool, p.members),                   # speaks the classic protocol
        "holds": per_partition(Hold),
        "assignment_epoch": per_partition(Int(0, E, search_bound=True)),
        "revocation_epoch": Array(Int(-1, E, search_bound=True), p.members),  # revocation-epoch only
        # clients
        "client_epoch": Array(Int(-1, E, search_bound=True), p.members),   # -1: not in the group
        "client_owns": per_partition(Bool),
        # a heartbeat response in flight; it carries the member's epoch and assigned partitions
        # as the coordinator recorded them, which only the member's own heartbeats change
        "response_in_flight": Array(Bool, p.members),
        "response_error": Array(Bool, p.members),      # UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH
        # offset commits in flight: the request, its sender's slot and member id, the epoch it
        # carries and its partition (a free slot: request NONE, the rest 0)
        "commit": Array(Record(request=Request, member=Int(0, p.members - 1),
                               member_id=Int(0, E, search_bound=True),
                               epoch=Int(-1, E, search_bound=True),
                               partition=Int(0, p.partitions - 1)), c),
        # ghosts, for the properties only (no action reads them)
        # (the commit slots' ghosts are arrays of their own, not members of the commit record:
        # they come after the per-partition ghosts, so the state keeps its field order and bit
        # layout, hence its fingerprints and the traces the search reports; notes, "Arrays")
        "held_since": per_partition(Int(0, E, search_bound=True)),  # member epoch the current hold began
        "lost": per_partition(Bool),       # client owns it but it went to another member since
        "commit_zombie": Array(Bool, c),   # the partition went to another member since it was owned
        "commit_owner": Array(Bool, c),    # the sender has held it without interruption since the epoch
        # ConsumerGroupMember.previousMemberEpoch: read only when a response can be lost, so it is
        # state only then (at the defaults the state space is the shipped one)
        **({"previous_epoch": Array(Int(-1, E, search_bound=True), p.members)} if p.lost_responses else {}),
        # partitions whose entry in the partition epoch map was dropped while a member holds them
        **({"partition_epoch_lost": Array(Bool, p.partitions)} if p.partition_epochs else {}),
        # subscriptions, when a member may drop a topic (each partition is a topic here), and the
        # ghosts of one-owner-per-epoch: the last member that held each partition and the highest
        # member epoch at which it held it
        **({"subscribed": per_partition(Bool), "resolution_pending": Bool,
            "epoch_owner": Array(Int(-1, p.members - 1), p.partitions),
            "epoch_high": Array(Int(0, E, search_bound=True), p.partitions)} if p.unsubscribes else {}),
    }


# Dynamic members are alike: the coordinator tells them apart only by member id, and the assignor
# output is any owner per partition. Static slots are not (only they rejoin under an instance id),
# nor is slot 0 (a free commit slot's commit[c].member is 0, and a hold's ghost commit_zombie is
# set on a free slot when a member other than 0 gains its partition 0; see the notes' Scale).
spec.symmetry("member", count=lambda p: p.members,
              slots=lambda p: range(max(1, p.static_members), p.members),
              arrays={**{f: "slot" for f in ("member_id", "member_epoch", "member_state", "classic",
                                             "revocation_epoch", "client_epoch", "response_in_flight",
                                             "response_error", "previous_epoch")},
                      **{f: "slot,_" for f in ("holds", "assignment_epoch", "client_owns",
                                               "held_since", "lost", "subscribed")}},
              values=("target_owner", "commit.member", "epoch_owner"),
              why="GroupMetadataManager and CurrentAssignmentBuilder treat dynamic members alike")
# Partitions are alike too, but for partition 0: a free commit slot's commit[c].partition is 0, and
# the ghosts of a free slot follow partition 0 (as for member slot 0 above).
spec.symmetry("partition", count=lambda p: p.partitions, slots=lambda p: range(1, p.partitions),
              arrays={**{f: "slot" for f in ("target_owner", "partition_epoch_lost", "epoch_owner",
                                             "epoch_high")},
                      **{f: "_,slot" for f in ("holds", "assignment_epoch", "client_owns",
                                               "held_since", "lost", "subscribed")}},
              values=("commit.partition",),
              why="the assignor may give any partition to any member")


# a free commit slot
_NO_COMMIT = {"request": Request.NONE, "member": 0, "member_id": 0, "epoch": 0, "partition": 0}


def _group(p, owners, epoch, classic, present):
    """A quiescent group at `epoch`: every present member STABLE at it, holding its target
    partitions assigned at it, clients in sync, nothing in flight; absent slots never joined."""
    c = max(1, p.commits_in_flight)
    held = [[owners[q] == m for q in _partitions(p)] for m in _members(p)]

    def per_partition(if_held, otherwise):
        return [[if_held if h else otherwise for h in row] for row in held]
    group = {
        "group_epoch": epoch, "target_epoch": epoch, "target_owner": list(owners),
        "member_id": [0] * p.members,
        "member_epoch": [epoch if m in present else LEFT for m in _members(p)],
        "member_state": [MemberState.STABLE] * p.members,
        "classic": [classic and m in present for m in _members(p)],
        "holds": per_partition(Hold.ASSIGNED, Hold.NONE), "assignment_epoch": per_partition(epoch, 0),
        "revocation_epoch": [-1] * p.members,
        "client_epoch": [epoch if m in present else LEFT for m in _members(p)],
        "client_owns": per_partition(True, False),
        "response_in_flight": [False] * p.members, "response_error": [False] * p.members,
        "commit": [dict(_NO_COMMIT) for _ in range(c)],
        "held_since": per_partition(epoch, 0), "lost": per_partition(False, False),
        "commit_zombie": [False] * c, "commit_owner": [False] * c,
    }
    if p.lost_responses:
        # a member that joined (epoch 0) and reconciled once: updateMemberEpoch left 0 behind
        group["previous_epoch"] = [0 if m in present else -1 for m in _members(p)]
    if p.partition_epochs:
        group["partition_epoch_lost"] = [False] * p.partitions
    if p.unsubscribes:
        group.update(subscribed=per_partition(True, True), resolution_pending=False,
                     epoch_owner=list(owners), epoch_high=[epoch] * p.partitions)
    return group


@spec.init
def init(p):
    """A consumer group at epoch 1 (KAFKA-20268: groups start at 1) with any nonempty set of the
    member slots in it and every distribution of the partitions over those members; the other
    slots join later. A group replayed from legacy records (no assignment epochs: they default
    to the member epoch) is, at such a quiescent point, the same state."""
    for n in range(1, p.members + 1):
        for present in combinations(range(p.members), n):
            for owners in product(present, repeat=p.partitions):
                yield _group(p, owners, 1, classic=False, present=set(present))


# ---------------------------------------------------------------------------------------------
# Reconciliation: CurrentAssignmentBuilder

def _reconcile(s, p, m, cur, owned, tgt, T):
    """CurrentAssignmentBuilder.build for member m. `cur` is the member before (epoch, state,
    holds[q], epochs[q]); `owned` what the client reports owning; `tgt`/`T` the target and its
    epoch. Returns the member after, plus which partitions were revoked by this step."""
    P = _partitions(p)
    epoch, mstate, holds, epochs = cur["epoch"], cur["state"], cur["holds"], cur["epochs"]
    still_owns_pending = Exists(P, lambda q: (holds[q] == Hold.PENDING_REVOCATION) & owned[q])
    unchanged = Or(And(mstate == MemberState.STABLE, epoch == T),
                   And(mstate == MemberState.UNREVOKED_PARTITIONS, still_owns_pending))

    mine = [And(tgt[q] == m) for q in P]   # an Expr even when the target is an argument
    if p.unsubscribes:
        # computeNextAssignment: the target of a topic the member no longer subscribes to is empty
        mine = [mine[q] & cur["sub"][q] for q in P]
    assigned = [holds[q] == Hold.ASSIGNED for q in P]
    keep = [assigned[q] & mine[q] for q in P]
    revoke = [assigned[q] & ~mine[q] for q in P]
    wanted = [mine[q] & ~assigned[q] for q in P]
    # held by another member, assigned or pending revocation; the member's own partitions
    # pending revocation do not count (KAFKA-19449)
    # CurrentAssignmentBuilder asks currentPartitionEpoch: -1 means free
    elsewhere = [Exists([k for k in _members(p) if k != m],
                        lambda k, q=q: s.holds[k][q] != Hold.NONE) for q in P]
    if p.partition_epochs:
        elsewhere = [e & ~s.partition_epoch_lost[q] for q, e in zip(P, elsewhere)]
    if s.variant == "kafka-19449":
        # before KAFKA-19449 (PR #20781) the partition epoch map was read as is: a partition
        # pending revocation by this very member counted as held elsewhere
        elsewhere = [e | (holds[q] == Hold.PENDING_REVOCATION) for q, e in zip(P, elsewhere)]
    unreleased = [wanted[q] & elsewhere[q] for q in P]
    fresh = [wanted[q] & ~elsewhere[q] for q in P]
    revoking = Exists(P, lambda q: revoke[q] & owned[q])
    has_unreleased = Exists(P, lambda q: unreleased[q])

    # revoking: UNREVOKED_PARTITIONS at the same epoch (also from UNREVOKED, KAFKA-19974);
    # nothing new is assigned. Otherwise: the target epoch, new partitions at the target epoch.
    new_epoch = If(revoking, epoch, T)
    if s.variant in ("unrevoked-epoch-bump", "kafka-19974"):
        # before KAFKA-19974: UNREVOKED -> UNREVOKED moved to min(epoch + 1, target epoch)
        new_epoch = If(revoking, If(mstate == MemberState.UNREVOKED_PARTITIONS,
                                    If(epoch + 1 < T, epoch + 1, T), epoch), T)
    new_state = If(revoking, MemberState.UNREVOKED_PARTITIONS,
                   If(has_unreleased, MemberState.UNRELEASED_PARTITIONS, MemberState.STABLE))
    new_holds, new_epochs, fresh_here = [], [], []
    for q in P:
        h = If(keep[q], Hold.ASSIGNED,
               If(revoking, If(revoke[q], Hold.PENDING_REVOCATION, Hold.NONE),
                  If(fresh[q], Hold.ASSIGNED, Hold.NONE)))
        a = If(keep[q] | (revoking & revoke[q]), epochs[q], If(~revoking & fresh[q], T, 0))
        new_holds.append(If(unchanged, holds[q], h))
        new_epochs.append(If(unchanged, epochs[q], a))
        fresh_here.append(And(Not(unchanged), Not(revoking), fresh[q]))
    changed = Not(unchanged)
    new_state = If(unchanged, mstate, new_state)
    if p.unsubscribes:
        # updateCurrentAssignment (KAFKA-19431): where build() would keep the member as it is, the
        # assigned partitions of topics it no longer subscribes to are taken away at the same
        # epoch: pending revocation (UNREVOKED_PARTITIONS) if the client still owns one of the
        # partitions pending revocation, otherwise simply dropped
        drop = [unchanged & assigned[q] & ~cur["sub"][q] for q in P]
        enforce = Exists(P, lambda q: drop[q])
        owns_new_pending = Exists(P, lambda q: owned[q] & ((holds[q] == Hold.PENDING_REVOCATION) | drop[q]))
        new_holds = [If(drop[q], If(owns_new_pending, Hold.PENDING_REVOCATION, Hold.NONE), h)
                     for q, h in zip(P, new_holds)]
        new_epochs = [If(drop[q] & ~owns_new_pending, 0, a) for q, a in zip(P, new_epochs)]
        new_state = If(enforce & owns_new_pending, MemberState.UNREVOKED_PARTITIONS, new_state)
        changed = changed | enforce
    return {"epoch": If(unchanged, epoch, new_epoch), "state": new_state,
            "holds": new_holds, "epochs": new_epochs, "fresh": fresh_here,
            "revoked_any": And(Not(unchanged), Exists(P, lambda q: revoke[q])),
            "keep": keep, "changed": changed}


def _apply_member(s, p, m, cur, new, respond_ok, since_on_hold):
    """Write member m's new record, its heartbeat response, and the ghosts that follow it."""
    s.member_epoch[m] = new["epoch"]
    s.member_state[m] = new["state"]
    for q in _partitions(p):
        s.holds[m][q] = new["holds"][q]
        s.assignment_epoch[m][q] = new["epochs"][q]
        # the hold began now for a new partition, continues for a kept one
        s.held_since[m][q] = If(new["fresh"][q], new["epoch"],
                                If(new["holds"][q] == Hold.NONE, 0, since_on_hold[q]))
        # a partition going to m is "lost" for any other client that still owns it, and turns
        # that client's commits in flight for it into zombies
        for k in _members(p):
            if k != m:
                s.lost[k][q] = s.lost[k][q] | (new["fresh"][q] & s.client_owns[k][q])
    for c in _commit_slots(p):
        commit = s.commit[c]
        fresh_q = _pick(commit.partition, new["fresh"])
        released_q = _pick(commit.partition, [h == Hold.NONE for h in new["holds"]])
        s.commit_zombie[c] = s.commit_zombie[c] | ((commit.member != m) & fresh_q)
        # a partition that comes back to m after its client revoked it (KAFKA-19449) is a new
        # hold: the client's ownership was interrupted in between
        s.commit_owner[c] = s.commit_owner[c] & ~((commit.member == m) & (released_q | fresh_q))
    if s.variant == "revocation-epoch":
        s.revocation_epoch[m] = If(new["revoked_any"], cur["epoch"], cur["revocation"])
    if p.partition_epochs:
        # ConsumerGroup.maybeUpdatePartitionEpoch runs when the member record is written: the old
        # assigned and pending partitions are removed from the map, the new ones added. Before
        # KAFKA-16147 (PR #15212) a partition that went from pending revocation back to assigned
        # in one update lost its entry: it was added as assigned, then removed as formerly pending.
        for q in _partitions(p):
            before, after = cur["holds"][q], new["holds"][q]
            dropped = FALSE
            if s.variant == "kafka-16147":
                dropped = (before == Hold.PENDING_REVOCATION) & (after == Hold.ASSIGNED)
            s.partition_epoch_lost[q] = If(~new["changed"], s.partition_epoch_lost[q],
                                           If(after != Hold.NONE, dropped,
                                              If(before != Hold.NONE, FALSE, s.partition_epoch_lost[q])))
    if p.unsubscribes:
        for q in _partitions(p):
            held = new["holds"][q] != Hold.NONE
            same = s.epoch_owner[q] == m
            s.epoch_owner[q] = If(held, m, s.epoch_owner[q])
            s.epoch_high[q] = If(held, If(same & (s.epoch_high[q] > new["epoch"]), s.epoch_high[q],
                                          new["epoch"]), s.epoch_high[q])
    if p.lost_responses:
        # ConsumerGroupMember.Builder.updateMemberEpoch: every step of CurrentAssignmentBuilder
        # that builds a new member (even at the same epoch) moves the old epoch to the previous one
        s.previous_epoch[m] = If(new["changed"], cur["epoch"], s.previous_epoch[m])
    s.response_in_flight[m] = True
    s.response_error[m] = Not(respond_ok)


def _pick(index, exprs):
    """exprs[index] for a state-valued index."""
    out = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        out = If(index == k, exprs[k], out)
    return out


def _commit_slots(p):
    return range(p.commits_in_flight)


def _current(s, p, m):
    return {"epoch": s.member_epoch[m], "state": s.member_state[m],
            "holds": [s.holds[m][q] for q in _partitions(p)],
            "epochs": [s.assignment_epoch[m][q] for q in _partitions(p)],
            "revocation": s.revocation_epoch[m],
            "sub": [s.subscribed[m][q] for q in _partitions(p)] if p.unsubscribes else None}


def _present_after(s, p, m_joining):
    return lambda k: (s.member_epoch[k] != LEFT) | (k == m_joining)


# ---------------------------------------------------------------------------------------------
# Actions, in the order the protocol runs them

@spec.action(m=_members, target=_targets, actors=("member {m}", "coordinator"))
def Join(s, p, m, target):
    """ConsumerGroupHeartbeat with member epoch 0: a new member, a static member rejoining under a
    new member id with the same instance id, or (KAFKA-19233) a known member starting over."""
    s.require(_may_join(s, p, m), ~s.response_in_flight[m])
    record = s.member_epoch[m]
    if _is_static(p, m):
        # a static member's instance still held by a live member gets UNRELEASED_INSTANCE_ID
        # (JoinUnreleasedInstance, reachable only when responses can be lost)
        s.require(record < 0)
    new_member = record == LEFT
    rejoin = record == STATIC_LEFT
    s.require(Not(_join_rejected(s, p, m)))
    # a new member changes the subscriptions (group epoch + 1); a static member rejoining with
    # the same subscription does not (GroupMetadataManagerTest.testStaticMemberGetsBackAssignmentUponRejoin)
    s.group_epoch = If(new_member, s.group_epoch + 1, s.group_epoch)
    bumped = s.post.group_epoch
    if target == "-":
        s.require(bumped == s.target_epoch)
        tgt, T = [s.target_owner[q] for q in _partitions(p)], s.target_epoch
    else:
        s.require(bumped > s.target_epoch)
        tgt, T = [int(ch) for ch in target], bumped
        present = _present_after(s, p, m)
        for k in set(tgt):
            s.require(present(k))
        _require_subscribed(s, p, tgt)
        for q in _partitions(p):
            s.target_owner[q] = tgt[q]
        s.target_epoch = T
    cur = _current(s, p, m)
    # the rejoining copy: member epoch 0, same state and assigned partitions (pending revocations
    # were cleared at the leave); a new member: STABLE with nothing
    cur["epoch"] = If(new_member, 0, If(rejoin, 0, cur["epoch"]))
    cur["state"] = If(new_member, MemberState.STABLE, cur["state"])
    if _is_static(p, m):
        s.member_id[m] = If(rejoin, s.member_id[m] + 1, s.member_id[m])
    nothing = [FALSE for _ in _partitions(p)]
    new = _reconcile(s, p, m, cur, nothing, tgt, T)
    # a rejoined static member holds its partitions "from the beginning" (KIP-1251)
    since = [If(rejoin, 0, s.held_since[m][q]) for q in _partitions(p)]
    _apply_member(s, p, m, cur, new, True, since)
    s.classic[m] = False       # ConsumerGroupHeartbeat: the consumer protocol from now on
    s.revocation_epoch[m] = If(new_member, -1, s.post.revocation_epoch[m])
    s.client_epoch[m] = 0      # joining; the epoch arrives with the response
    s.respond(Error.NONE)


def _may_join(s, p, m):
    """The client sends a join: it is out of the group, or (when a response can be lost) it is
    retrying a join whose response never came."""
    if p.lost_responses:
        return Or(s.client_epoch[m] == LEFT, s.client_epoch[m] == 0)
    return s.client_epoch[m] == LEFT


def _join_rejected(s, p, m):
    """Before KAFKA-19233 (PR #21305) throwIfConsumerGroupMemberEpochIsInvalid had no early return
    for epoch 0: a known member rejoining with 0 below its member epoch was fenced unless 0 was its
    previous epoch (with no partitions owned, the subset test passes)."""
    if s.variant != "kafka-19233":
        return FALSE
    behind = s.member_epoch[m] > 0
    if p.lost_responses:
        behind = behind & (s.previous_epoch[m] != 0)
    return behind


def _rejoiners(p):
    return range(p.members) if p.lost_responses else []


@spec.action(m=_rejoiners, actors=("member {m}", "coordinator"))
def JoinFenced(s, p, m):
    """ConsumerGroupHeartbeat with member epoch 0 from a member the coordinator still knows, when
    the coordinator rejects it with FENCED_MEMBER_EPOCH (only before KAFKA-19233; the fixed
    coordinator takes it as Join does). Nothing changes on the coordinator; the client reads the
    error and starts over."""
    s.require(_may_join(s, p, m), ~s.response_in_flight[m], _join_rejected(s, p, m))
    s.client_epoch[m] = 0
    s.response_in_flight[m] = True
    s.response_error[m] = True
    s.respond(Error.FENCED_MEMBER_EPOCH)


def _static_rejoiners(p):
    return [m for m in range(p.members) if _is_static(p, m)] if p.lost_responses else []


@spec.action(m=_static_rejoiners, actors=("member {m}", "coordinator"))
def JoinUnreleasedInstance(s, p, m):
    """ConsumerGroupHeartbeat with member epoch 0 from a static member whose record is still live
    under the same member id (its join response was lost, or its heartbeat was fenced, and the
    client keeps its member id): GroupMetadataManager treats the join as a new process claiming the
    instance id and answers UNRELEASED_INSTANCE_ID, which the Java client treats as fatal (the open
    PR #23542 describes it). Nothing changes on the coordinator."""
    s.require(_may_join(s, p, m), ~s.response_in_flight[m], s.member_epoch[m] >= 0)
    s.client_epoch[m] = 0
    s.response_in_flight[m] = True
    s.response_error[m] = True
    s.respond(Error.UNRELEASED_INSTANCE_ID)


@spec.action(m=_members, target=_targets, actors=("member {m}", "coordinator"))
def Heartbeat(s, p, m, target):
    """ConsumerGroupHeartbeat with the client's epoch and owned partitions: validation, target
    assignment if the group epoch moved, reconciliation; the response travels back."""
    _heartbeat(s, p, m, target, resubscribe=False)


def _require_subscribed(s, p, tgt):
    """The assignor gives a partition only to a member subscribed to its topic."""
    if p.unsubscribes:
        for q, k in enumerate(tgt):
            s.require(s.subscribed[k][q])


def _heartbeat(s, p, m, target, resubscribe, unsubscribe=()):
    """GroupMetadataManager.consumerGroupHeartbeat for a member that is in the group (epoch > 0).
    With `resubscribe` the request carries a changed subscription: the group epoch is bumped
    before the target assignment is looked at, in the same request. `unsubscribe` names the
    topics a new, unresolved regex takes away (HeartbeatUnsubscribe, HeartbeatUnsubscribeAll)."""
    s.require(s.client_epoch[m] > 0, ~s.response_in_flight[m])
    e = s.client_epoch[m]
    known = s.member_epoch[m] != LEFT
    owned = [s.client_owns[m][q] for q in _partitions(p)]
    # GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its
    # previous epoch with owned partitions that are a subset of its assigned ones (the response
    # carrying the new epoch was lost); otherwise FENCED_MEMBER_EPOCH
    valid = known & (e == s.member_epoch[m])
    if p.lost_responses:
        subset = Forall(_partitions(p), lambda q: Or(
            ~owned[q], s.holds[m][q] == Hold.ASSIGNED))
        valid = known & Or(e == s.member_epoch[m], And(e == s.previous_epoch[m], subset))
    if resubscribe:
        # hasMemberSubscriptionChanged -> bumpGroupEpoch (a rejected request changes nothing)
        s.require(valid)
        s.group_epoch = s.group_epoch + 1
    if unsubscribe:
        # the new regex is not resolved yet: no group epoch bump and no new target in this
        # request; the member still has the regex it joined with (after a change every topic it
        # keeps is one it names: _regex_unchanged); another member keeps each topic, so the
        # assignor can always place it
        s.require(valid, s.group_epoch == s.target_epoch, _regex_unchanged(s, p, m))
        for q in unsubscribe:
            s.require(Exists([k for k in _members(p) if k != m],
                             lambda k, q=q: (s.member_epoch[k] != LEFT) & s.subscribed[k][q]))
            s.subscribed[m][q] = False
        s.resolution_pending = True
    ge = s.post.group_epoch if resubscribe else s.group_epoch
    if target == "-":
        s.require(Or(ge == s.target_epoch, ~valid))
        tgt, T = [s.target_owner[q] for q in _partitions(p)], s.target_epoch
    else:
        # a rejected heartbeat is answered before any target is computed
        s.require(valid, ge > s.target_epoch)
        tgt, T = [int(ch) for ch in target], ge
        for k in set(tgt):
            s.require(s.member_epoch[k] != LEFT)
        _require_subscribed(s, p, tgt)
        for q in _partitions(p):
            s.target_owner[q] = tgt[q]
        s.target_epoch = T
    cur = _current(s, p, m)
    for q in unsubscribe:
        cur["sub"][q] = FALSE
    new = _reconcile(s, p, m, cur, owned, tgt, T)
    # a rejected heartbeat changes nothing on the coordinator
    new = {"epoch": If(valid, new["epoch"], cur["epoch"]),
           "state": If(valid, new["state"], cur["state"]),
           "holds": [If(valid, x, y) for x, y in zip(new["holds"], cur["holds"])],
           "epochs": [If(valid, x, y) for x, y in zip(new["epochs"], cur["epochs"])],
           "fresh": [And(valid, x) for x in new["fresh"]],
           "revoked_any": And(valid, new["revoked_any"]),
           "changed": And(valid, new["changed"])}
    since = [s.held_since[m][q] for q in _partitions(p)]
    _apply_member(s, p, m, cur, new, valid, since)
    s.respond(Case((~known, Error.UNKNOWN_MEMBER_ID),
                   (valid, Error.NONE),
                   default=Error.FENCED_MEMBER_EPOCH))


def _resubscribers(p):
    return range(p.members) if p.subscription_changes else []


@spec.action(m=_resubscribers, target=_targets, actors=("member {m}", "coordinator"))
def HeartbeatNewSubscription(s, p, m, target):
    """ConsumerGroupHeartbeat whose SubscribedTopicNames (or regex) changed: consumerGroupHeartbeat
    finds hasMemberSubscriptionChanged, bumps the group epoch and computes a new target in the same
    request. The modelled topic stays subscribed; what changed is a topic the model does not track
    (so the assignor's output over the modelled partitions is again any distribution)."""
    _heartbeat(s, p, m, target, resubscribe=True)


def _unsubscribers(p):
    return range(p.members) if p.unsubscribes else []


def _regex_unchanged(s, p, m):
    """Member m still has the regex it joined with, which the spec reads off its subscription:
    every topic is still in it (only a regex change takes one out, and a removal puts them back).
    A member changes its regex at an unchanged group epoch at most once per membership: until the
    coordinator's refresh resolves the new regex, CurrentAssignmentBuilder.subscribedTopicIds
    treats it as matching no topic, so every topic the member keeps is one it names; after the
    refresh it still names them (the spec's SubscribedTopicNames never change). Dropping a name
    bumps the group epoch in the same request (GroupMetadataManager.hasMemberSubscriptionChanged
    compares SubscribedTopicNames), and so does moving to a regex the group has already resolved
    (GroupMetadataManager.maybeUpdateRegularExpressions): neither is an unsubscribe here."""
    return Forall(_partitions(p), lambda q: s.subscribed[m][q])


@spec.action(m=_unsubscribers, q=_partitions, actors=("member {m}", "coordinator"))
def HeartbeatUnsubscribe(s, p, m, q):
    """ConsumerGroupHeartbeat from a member that names every topic but q in SubscribedTopicNames
    and has q by its SubscribedTopicRegex (each partition is a topic here), with a new regex that
    matches no modelled topic. GroupMetadataManager.maybeUpdateRegularExpressions bumps nothing
    for a regex no member has (it schedules the coordinator's refresh, at most one per
    REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, 10 s) and hasMemberSubscriptionChanged finds the names
    unchanged, so the request computes no new target; CurrentAssignmentBuilder.subscribedTopicIds
    treats the unresolved regex as matching nothing, and updateCurrentAssignment (KAFKA-19431)
    takes q's partitions away at the member's current epoch. Once per membership
    (_regex_unchanged)."""
    _heartbeat(s, p, m, "-", resubscribe=False, unsubscribe=(q,))


@spec.action(m=_unsubscribers, actors=("member {m}", "coordinator"))
def HeartbeatUnsubscribeAll(s, p, m):
    """ConsumerGroupHeartbeat from a member subscribed by a regex alone (the Java consumer's
    subscribe(SubscriptionPattern), AsyncKafkaConsumer.subscribeToRegex: its heartbeats carry the
    RE2/J pattern and no topic names) with a new regex that matches no modelled topic: as
    HeartbeatUnsubscribe, but CurrentAssignmentBuilder.subscribedTopicIds is empty until the
    refresh, so updateCurrentAssignment takes the partitions of every topic away at once, at the
    member's current epoch (with nothing pending revocation it moves everything assigned to
    pending revocation). Once per membership (_regex_unchanged)."""
    _heartbeat(s, p, m, "-", resubscribe=False, unsubscribe=tuple(_partitions(p)))


def _resolutions(p):
    return [0] if p.unsubscribes else []


@spec.action(change=_resolutions, actors=("coordinator", "coordinator"))
def SubscriptionResolved(s, p, change):
    """The coordinator finishes resolving the new regex (GroupMetadataManager's asynchronous
    regex refresh): where a member still subscribes by it, the group's subscriptions changed, so
    the group epoch is bumped and the next heartbeat computes a new target.
    GroupMetadataManager.handleRegularExpressionsResult skips a regex no member subscribes to any
    more (numSubscribedMembers(regex) == 0: its member was fenced or left while it was resolved,
    and the removal already recomputed the group's subscriptions), so then nothing is bumped.
    A removed member subscribes anew (_remove), so a member with a dropped topic is one that
    still has its new regex."""
    s.require(s.resolution_pending)
    s.resolution_pending = False
    subscribed = Exists(_members(p), lambda k: Exists(_partitions(p), lambda q: ~s.subscribed[k][q]))
    s.group_epoch = If(subscribed, s.group_epoch + 1, s.group_epoch)


def _metadata_changes(p):
    return [0] if p.metadata_changes else []


@spec.action(change=_metadata_changes, actors=("controller", "coordinator"))
def TopicPartitionsAdded(s, p, change):
    """CreatePartitions on the subscribed topic: the coordinator's metadata image changes, the
    group's subscribed-topic hash no longer matches (GroupMetadataManager.consumerGroupHeartbeat,
    computeTopicHash) and the group epoch is bumped, so the next heartbeat recomputes the target.
    Kafka writes the bump in the next heartbeat; here it is taken when the image arrives, which no
    other action can tell apart (commits read member epochs, not the group epoch). The new
    partitions are not modelled: they would go to some member at the new epoch, and the assignor
    may already move the modelled ones anywhere."""
    s.require(Exists(_members(p), lambda k: s.member_epoch[k] >= 0))
    s.group_epoch = s.group_epoch + 1


@spec.action(m=_members, actors=("coordinator", "member {m}"))
def HeartbeatResponse(s, p, m):
    """The client reads the response: its new epoch and assignment; it revokes what is no longer
    assigned (acknowledged by its next heartbeat). An error makes it drop everything and rejoin."""
    s.require(s.response_in_flight[m])
    # the response is the record as the heartbeat left it; if a timeout fenced the member since,
    # the model answers as the client's next heartbeat would (UNKNOWN_MEMBER_ID) one step early
    ok = ~s.response_error[m] & (s.member_epoch[m] >= 0)
    s.client_epoch[m] = If(ok, s.member_epoch[m], LEFT)
    for q in _partitions(p):
        owns = ok & (s.holds[m][q] == Hold.ASSIGNED)
        s.client_owns[m][q] = owns
        s.lost[m][q] = owns & s.client_owns[m][q] & s.lost[m][q]
    s.response_in_flight[m] = False
    s.response_error[m] = False


def _lossy(p):
    return range(p.members) if p.lost_responses else []


@spec.action(m=_lossy, actors=("coordinator", "member {m}"))
def LoseHeartbeatResponse(s, p, m):
    """A ConsumerGroupHeartbeat response that never arrives (the connection dropped, the request
    timed out): the client keeps its epoch and partitions and its next heartbeat retries with
    them (HeartbeatRequestManager; ConsumerMembershipManager only learns an epoch from a
    response). A lost join response leaves the client at epoch 0: it sends the join again."""
    s.require(s.response_in_flight[m], s.client_epoch[m] >= 0)
    s.response_in_flight[m] = False
    s.response_error[m] = False


# The search sends TxnOffsetCommit, the KIP's motivating case (the producer cannot see the
# consumer's heartbeats); OffsetCommit passes the same rule with another error code, and the
# scenarios send it (and the other versions) from a given state, or, at consumer_commits=1,
# in a step (the stock-assignor zombie, where the new owner's own commit is rolled back).
def _commit_requests(p):
    return ["TXN_OFFSET_COMMIT"] + (["OFFSET_COMMIT"] if p.consumer_commits else [])


@spec.action(m=_members, q=_partitions, request=_commit_requests,
             c=lambda p: _commit_slots(p), actors=("member {m}", "coordinator"))
def SendCommit(s, p, m, q, request, c):
    """The client commits an offset for a partition it owns, with the epoch it believes it has
    (OffsetCommit v9+ from the consumer, or TxnOffsetCommit from its transactional producer)."""
    s.require(s.client_epoch[m] > 0, s.client_owns[m][q], s.commit[c].request == Request.NONE)
    for lower in range(c):      # fill the lowest free slot: slots are interchangeable
        s.require(s.commit[lower].request != Request.NONE)
    e = s.client_epoch[m]
    s.commit[c] = {"request": Request[request], "member": m, "member_id": s.member_id[m],
                   "epoch": e, "partition": q}
    s.commit_zombie[c] = s.lost[m][q]
    s.commit_owner[c] = And(s.member_epoch[m] >= 0, s.holds[m][q] != Hold.NONE, s.held_since[m][q] <= e)


# The offset-commit decision once the member id is known (ConsumerGroup.validateOffsetCommit and
# createAssignmentEpochValidator, per partition): True accepts.

@spec.rule("offset-commit")
def kip1251_commit(s, p, m, q, epoch):
    """assignment epoch <= commit epoch <= member epoch, any partition at the member epoch."""
    return Or(epoch == s.member_epoch[m],
              And(epoch < s.member_epoch[m], s.holds[m][q] != Hold.NONE,
                  s.assignment_epoch[m][q] <= epoch))


@spec.rule("offset-commit", variant="strict")
def strict_commit(s, p, m, q, epoch):
    """Before KIP-1251: commit epoch == member epoch."""
    return epoch == s.member_epoch[m]


@spec.rule("offset-commit", variant="no-lower-bound")
def no_lower_bound_commit(s, p, m, q, epoch):
    """commit epoch <= member epoch, without the assignment epoch."""
    return epoch <= s.member_epoch[m]


@spec.rule("offset-commit", variant="revocation-epoch")
def revocation_epoch_commit(s, p, m, q, epoch):
    """The KIP's rejected alternative: the member epoch, or revocation epoch < epoch <= member epoch."""
    return Or(epoch == s.member_epoch[m],
              And(s.revocation_epoch[m] < epoch, epoch <= s.member_epoch[m]))


@spec.action(c=lambda p: _commit_slots(p), m=_members, q=_partitions, actors=("member {m}", "coordinator"))
def HandleCommit(s, p, c, m, q):
    """The coordinator handles a commit in flight (OffsetMetadataManager.commitOffset /
    commitTransactionalOffset): member id, API version, then the offset-commit rule."""
    commit = s.commit[c]
    s.require(commit.request != Request.NONE, commit.member == m, commit.partition == q)
    req, e = commit.request, commit.epoch
    known = (s.member_epoch[m] != LEFT) & (s.member_id[m] == commit.member_id)
    accepted = s.rule("offset-commit", m=m, q=q, epoch=e)
    # classic members get ILLEGAL_GENERATION; TxnOffsetCommit v0-5 turn STALE_MEMBER_EPOCH into
    # ILLEGAL_GENERATION, v6+ keeps it (KIP-1319)
    fenced = If(s.classic[m] | (req == Request.TXN_OFFSET_COMMIT), Error.ILLEGAL_GENERATION,
                Error.STALE_MEMBER_EPOCH)
    s.respond(Case((~known, Error.UNKNOWN_MEMBER_ID),
                   ((req == Request.OFFSET_COMMIT_V8) & ~s.classic[m], Error.UNSUPPORTED_VERSION),
                   (accepted, Error.NONE),
                   default=fenced))
    s.commit[c] = _NO_COMMIT
    s.commit_zombie[c] = False
    s.commit_owner[c] = False


@spec.action(request=["OFFSET_COMMIT", "TXN_OFFSET_COMMIT"], actors=("admin", "coordinator"))
def AdminCommit(s, p, request):
    """A commit without member id and with epoch -1 (admin client, or a producer given no group
    metadata): accepted if the group has no members, or if it is transactional."""
    empty = Forall(_members(p), lambda k: s.member_epoch[k] == LEFT)
    if request == "TXN_OFFSET_COMMIT":
        s.respond(Error.NONE)
    else:
        s.respond(If(empty, Error.NONE, Error.UNKNOWN_MEMBER_ID))


def _remove_member(s, p, m):
    """GroupMetadataManager.consumerGroupFenceMember: tombstones for the member's assignment,
    target and subscription; the group epoch + 1; the target is recomputed by the next heartbeat.
    KAFKA-20442: when the group becomes empty the target epoch follows the group epoch."""
    s.member_epoch[m] = LEFT
    s.member_state[m] = MemberState.STABLE
    s.classic[m] = False
    s.revocation_epoch[m] = -1
    for q in _partitions(p):
        s.holds[m][q] = Hold.NONE
        s.assignment_epoch[m][q] = 0
        s.held_since[m][q] = 0
        s.target_owner[q] = If(s.target_owner[q] == m, -1, s.target_owner[q])
    s.group_epoch = s.group_epoch + 1
    if p.lost_responses:
        s.previous_epoch[m] = -1
    if p.unsubscribes:
        for q in _partitions(p):
            s.subscribed[m][q] = True   # a member that joins again subscribes anew
    if p.partition_epochs:
        for q in _partitions(p):
            # the tombstones remove the member's entries (those it still has)
            s.partition_epoch_lost[q] = s.partition_epoch_lost[q] & (s.holds[m][q] == Hold.NONE)
    if s.variant != "kafka-20442":
        # the fix (PR #22045) writes a ConsumerGroupTargetAssignmentMetadataRecord at the new group
        # epoch when the fence empties the group
        others_gone = Forall([k for k in _members(p) if k != m], lambda k: s.member_epoch[k] == LEFT)
        s.target_epoch = If(others_gone, s.post.group_epoch, s.target_epoch)
    for c in _commit_slots(p):
        s.commit_owner[c] = s.commit_owner[c] & (s.commit[c].member != m)


@spec.action(m=_members, epoch=lambda p: [-1, -2], actors=("member {m}", "coordinator"))
def Leave(s, p, m, epoch):
    """ConsumerGroupHeartbeat with epoch -1 (leave: fenced out) or, for a static member, -2 (the
    record stays with epoch -2, pending revocations cleared, assignment epochs reset to 0)."""
    if epoch == -2 and not _is_static(p, m):
        s.require(False)
    s.require(s.client_epoch[m] > 0, ~s.response_in_flight[m], s.member_epoch[m] >= 0)
    s.client_epoch[m] = LEFT
    for q in _partitions(p):
        s.client_owns[m][q] = False
        s.lost[m][q] = False
    if epoch == -1:
        _remove_member(s, p, m)
        s.respond(Error.NONE)
        return
    # consumerGroupStaticMemberGroupLeave: state unchanged (KAFKA-20641), no group epoch bump
    s.member_epoch[m] = STATIC_LEFT
    if s.variant == "kafka-20641-fixed":
        # the open PR #22473: a static member leaving from UNREVOKED_PARTITIONS is written STABLE
        # (its pending revocations are cleared below); every other state is kept
        s.member_state[m] = If(s.member_state[m] == MemberState.UNREVOKED_PARTITIONS,
                               MemberState.STABLE, s.member_state[m])
    if p.partition_epochs:
        for q in _partitions(p):
            # the record is rewritten: its partitions' entries are removed and re-added
            s.partition_epoch_lost[q] = s.partition_epoch_lost[q] & (s.holds[m][q] == Hold.NONE)
    for q in _partitions(p):
        assigned = s.holds[m][q] == Hold.ASSIGNED
        s.holds[m][q] = If(assigned, Hold.ASSIGNED, Hold.NONE)
        if s.variant == "static-keeps-epochs":
            s.assignment_epoch[m][q] = If(assigned, s.assignment_epoch[m][q], 0)
        else:
            s.assignment_epoch[m][q] = 0
        s.held_since[m][q] = If(assigned, s.held_since[m][q], 0)
    for c in _commit_slots(p):
        s.commit_owner[c] = s.commit_owner[c] & (s.commit[c].member != m)
    s.respond(Error.NONE)


@spec.action(m=_members, actors=("coordinator", "member {m}"))
def FenceMember(s, p, m):
    """The session timeout (or, in UNREVOKED_PARTITIONS, the rebalance timeout) fences a member
    that is still active; its client does not know yet."""
    s.require(s.member_epoch[m] >= 0)
    _remove_member(s, p, m)


@spec.action(m=_members, actors=("coordinator", "member {m}"))
def StaticMemberExpires(s, p, m):
    """The session timeout of a static member that left with epoch -2 and did not come back."""
    s.require(s.member_epoch[m] == STATIC_LEFT)
    _remove_member(s, p, m)


# ---------------------------------------------------------------------------------------------
# Variants: the default with one named change each

ZOMBIE_19974 = (
    "KAFKA-19974 keeps a member's epoch when it goes from UNREVOKED_PARTITIONS to "
    "UNREVOKED_PARTITIONS, while the partitions it just revoked are released and may go to "
    "another member at a later epoch; a commit the member sent for one of them at its (unchanged) "
    "epoch is then accepted, because a commit at the member epoch is accepted for any partition "
    "(ConsumerGroup.validateOffsetCommit, KIP-1251 as merged)")
STATIC_LEAVE_20641 = (
    "KAFKA-20641: a static member leaving with epoch -2 while in UNREVOKED_PARTITIONS keeps that "
    "state with nothing pending revocation (consumerGroupStaticMemberGroupLeave clears the "
    "pending partitions, not the state; the fix, PR #22473, is open)")

# Two lemmas (below) that prove no-zombie-commit in unrevoked-epoch-bump state what KAFKA-19974
# breaks, so every variant that keeps KAFKA-19974 violates them: recorded, with their traces.
LEMMAS_BROKEN_BY_19974 = {
    "released-partition-commit-is-stale": (
        "KAFKA-19974, 8 steps (the first eight of the no-zombie-commit trace): member 0's heartbeat "
        "releases p1, for which its commit at epoch 1 is in flight, and puts p0 pending revocation "
        "while member 0 stays at epoch 1 (before KAFKA-19974 it moves to epoch 2)"),
    "zombie-commit-is-stale": (
        "KAFKA-19974, 10 steps: p1 goes to member 1 at epoch 4 while member 0, still at epoch 1, has "
        "its commit at epoch 1 for p1 in flight; the next step accepts it (no-zombie-commit)"),
}

FOUND_16147 = (
    "KAFKA-16147, 7 steps: member 1's partitions go pending revocation, member 0 is fenced, and the "
    "next target gives them back to member 1, which takes them from pending revocation to assigned "
    "in one update; the bookkeeping drops their partition epochs, so member 0, rejoining, is given "
    "p0 as free while member 1 holds it")
FOUND_19449 = (
    "KAFKA-19449: a member whose revoked partition comes back to it in the next target waits in "
    "UNRELEASED_PARTITIONS for a partition nobody holds, one heartbeat longer than needed")
FOUND_20442 = (
    "KAFKA-20442, 1 step: fencing the only member leaves the empty group with group epoch 2 and "
    "target assignment epoch 1")
FOUND_19233 = (
    "KAFKA-19233, 5 steps: member 1 joins and is put in UNRELEASED_PARTITIONS at epoch 2 (previous "
    "epoch 0); the response is lost and the retried join is accepted, since 0 is its previous "
    "epoch, but reconciling it again writes the member with updateMemberEpoch(2), which makes 2 "
    "the previous epoch; that response is lost too, and the next join with epoch 0 is fenced")
FOUND_STATIC_REJOIN = (
    "3 steps: static member 0 joins, the response is lost, and its retried join (same member id, "
    "epoch 0) is refused with UNRELEASED_INSTANCE_ID, fatal for the Java client: the coordinator "
    "takes it for another process claiming the instance id (Kafka as shipped; the open PR #23542 "
    "describes and fixes it)")

spec.variant("kip1251", "the check as Kafka 4.3 ships it: assignment epoch <= epoch <= member epoch",
             default=True, violates=["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974, "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("kafka-20641-fixed", "the open fix of KAFKA-20641 (PR #22473, not merged): a static "
             "member leaving with epoch -2 from UNREVOKED_PARTITIONS is written STABLE",
             violates=["no-zombie-commit", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974})
spec.variant("strict", "the check before KIP-1251: commit epoch == member epoch",
             violates=["no-zombie-commit", "no-spurious-fencing", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974 + "; the strict check accepts it too",
                       "no-spurious-fencing": "KAFKA-20066: the coordinator bumps the epoch of a member "
                       "that keeps its partition while the heartbeat response is in flight; the "
                       "client's commit at the old epoch is rejected",
                       "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("revocation-epoch", "the KIP's rejected alternative: one revocation epoch per member "
             "(the member epoch at which a revocation from it last started, -1 for a new member)",
             violates=["no-zombie-commit", "no-spurious-fencing", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": "a member that left and rejoined under the same member id "
                       "(KIP-1082 ids are the client's) starts with no revocation epoch, so a commit "
                       "it sent before leaving, for a partition that went to another member, is "
                       "accepted (with the revocation epoch starting at the join epoch instead, the "
                       "shortest zombie is the KAFKA-19974 one)",
                       "no-spurious-fencing": "as the KIP says: after a revocation of another "
                       "partition, a commit at an epoch <= the revocation epoch is rejected for a "
                       "partition the member kept all along",
                       "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("no-lower-bound", "commit epoch <= member epoch, without the assignment epoch",
             violates=["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": "a commit sent before the member left, for a partition "
                       "that went to another member, is accepted after the member rejoined under "
                       "the same member id at a higher epoch",
                       "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("static-keeps-epochs", "a static member's leave keeps the assignment epochs",
             violates=["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974 + " (the same trace as kip1251: keeping the "
                       "epochs opens no further zombie, since the rejoin's new member id fences the "
                       "old incarnation's commits)",
                       "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("unrevoked-epoch-bump", "before KAFKA-19974: UNREVOKED_PARTITIONS -> UNREVOKED_PARTITIONS "
             "moves the member to min(epoch + 1, target epoch)",
             violates=["unrevoked-has-pending"],
             findings={"unrevoked-has-pending": STATIC_LEAVE_20641})

spec.variant("kafka-20442", "before KAFKA-20442: fencing the last member bumps the group epoch but "
             "leaves the target assignment epoch behind",
             violates=["no-zombie-commit", "unrevoked-has-pending", "empty-group-at-target-epoch",
                       "eventually-converges", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974,
                       "unrevoked-has-pending": STATIC_LEAVE_20641,
                       "empty-group-at-target-epoch": FOUND_20442,
                       "eventually-converges": "the empty group left at group epoch > target epoch "
                       "has no member to heartbeat, so nothing recomputes the target and the "
                       "group never converges (the progress engine's lasso)"})
spec.variant("kafka-19449", "before KAFKA-19449: a partition pending revocation by the member "
             "itself counts as held by another member",
             violates=["no-zombie-commit", "unrevoked-has-pending", "unreleased-waits-for-another-member",
                       *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974,
                       "unrevoked-has-pending": STATIC_LEAVE_20641,
                       "unreleased-waits-for-another-member": FOUND_19449})
spec.variant("kafka-16147", "before KAFKA-16147: a partition that goes from pending revocation "
             "back to assigned loses its entry in the partition epoch map",
             params={"partition_epochs": 1},
             violates=["no-zombie-commit", "unrevoked-has-pending", "single-owner",
                       "lost-only-after-removal", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974,
                       "no-zombie-commit": "10 steps, one fewer than kip1251's: with the partition "
                       "held by two members, the member that keeps it is the sender of a commit "
                       "that the other member's assignment made a zombie",
                       "unrevoked-has-pending": STATIC_LEAVE_20641,
                       "single-owner": FOUND_16147,
                       "lost-only-after-removal": "KAFKA-16147: the client of a member still in "
                       "the group owns a partition that was just given to another member"})
LOST_FOR_EVER = (
    "a fair lasso that loses every heartbeat response for ever (LoseHeartbeatResponse between a "
    "heartbeat and its response, each time): weak fairness of HeartbeatResponse cannot exclude a "
    "network that never delivers; convergence here needs strong fairness of delivery, which the "
    "progress engine does not offer. A limit of the property's fairness, not a Kafka finding")
CONVERGE_AT_CAP = (
    "4 steps at max_epoch 3: member 0 drops p0's topic, the regex resolution bumps the group "
    "epoch, member 1 leaves (epoch 3, the cap), and then no fair step is enabled; not analysed "
    "further this session: the next target would need epoch 4, beyond max_epoch, so this may be "
    "the cap and not the protocol (recorded from the engine's verdict, not confirmed)")
spec.variant("kafka-19233", "before KAFKA-19233: a known member rejoining with epoch 0 is fenced "
             "unless 0 is its previous epoch (checked with lost heartbeat responses and dynamic "
             "members only, which keeps the static member's own finding out of its verdicts)",
             params={"lost_responses": 1, "static_members": 0},
             violates=["no-zombie-commit", "join-accepted", "eventually-converges",
                       *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_19974,
                       "join-accepted": FOUND_19233, "eventually-converges": LOST_FOR_EVER})
UNSUBSCRIBE_LEMMA = (
    "1 step: a member that drops a topic goes to UNREVOKED_PARTITIONS at the target epoch while its "
    "client still owns the partition (updateCurrentAssignment keeps the epoch); the lemma was "
    "written for the spec without unsubscribing")
ZOMBIE_UNSUBSCRIBE = (
    "7 steps, Kafka as shipped: member 0 sends a commit for p1 at epoch 1, drops p1's topic "
    "(updateCurrentAssignment takes p1 away at the same epoch), revokes it and is STABLE at epoch 1 "
    "again; member 1 leaves and rejoins and is given p1 at epoch 3; member 0, still at epoch 1, has "
    "its commit accepted, since a commit at the member epoch is accepted for any partition. Like the "
    "KAFKA-19974 zombie, a partition is released without its member's epoch moving")
# The two lemmas that KAFKA-19974 breaks, broken here by a topic dropped at an unchanged epoch
LEMMAS_BROKEN_BY_UNSUBSCRIBING = {
    "released-partition-commit-is-stale": (
        "4 steps, Kafka as shipped: member 0 sends a commit for p1 at epoch 1, then, subscribed by "
        "a regex alone, changes its regex; updateCurrentAssignment takes p0 and p1 away at epoch 1 "
        "and the next heartbeat releases them with member 0 still at epoch 1 (the single-topic drop "
        "of HeartbeatUnsubscribe releases p1 in the same 4 steps)"),
    "zombie-commit-is-stale": (
        "6 steps: the first six of the no-zombie-commit trace; p1 goes to member 1 at epoch 3 while "
        "member 0, still at epoch 1, has its commit at epoch 1 for p1 in flight"),
}
spec.variant("unsubscribes", "kip1251 with members that drop a topic while its new regex is "
             "resolved (KAFKA-19431's path), at max_epoch 3 with dynamic members",
             params={"unsubscribes": 1, "static_members": 0, "max_epoch": 3},
             violates=["no-zombie-commit", "unrevoked-at-target-owns-no-pending",
                       "eventually-converges", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_UNSUBSCRIBING, "no-zombie-commit": ZOMBIE_UNSUBSCRIBE,
                       "unrevoked-at-target-owns-no-pending": UNSUBSCRIBE_LEMMA,
                       "eventually-converges": CONVERGE_AT_CAP})
spec.variant("kafka-19974", "before KAFKA-19974 (the reconciliation of unrevoked-epoch-bump) where "
             "its harm shows: members that drop a topic while its regex is resolved (KAFKA-19431)",
             params={"unsubscribes": 1, "static_members": 0, "max_epoch": 3},
             violates=["one-owner-per-epoch", "no-zombie-commit", "unrevoked-at-target-owns-no-pending",
                       "eventually-converges", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_UNSUBSCRIBING, "eventually-converges": CONVERGE_AT_CAP,
                       "one-owner-per-epoch": "KAFKA-19974, 7 steps: member 1 drops p1's topic and "
                       "revokes p1 at epoch 1; the resolution bumps the group epoch, and the target "
                       "at epoch 2 gives p0 and p1 to member 0; member 1 goes from "
                       "UNREVOKED_PARTITIONS to UNREVOKED_PARTITIONS and, before the fix, to epoch 2 "
                       "while it still holds p0 pending revocation; its next heartbeat releases p0 "
                       "and member 0 then takes p0 at epoch 2: p0 had two owners at epoch 2, one "
                       "after the other",
                       "no-zombie-commit": ZOMBIE_UNSUBSCRIBE,
                       "unrevoked-at-target-owns-no-pending": UNSUBSCRIBE_LEMMA})
# These variants run with dynamic members only (static_members=0): no member leaves with epoch -2,
# so the static member's session timer has nothing to expire
spec.idle(["StaticMemberExpires"], "static_members=0: no member leaves as a static member (epoch "
          "-2), so no static member's session times out",
          variants=["kafka-19233", "unsubscribes", "kafka-19974"])
spec.variant("lost-responses", "kip1251 with lost heartbeat and join responses, at max_epoch 3",
             params={"lost_responses": 1, "max_epoch": 3},
             violates=["unrevoked-has-pending", "static-rejoin-accepted", "eventually-converges"],
             findings={"unrevoked-has-pending": STATIC_LEAVE_20641,
                       "static-rejoin-accepted": FOUND_STATIC_REJOIN,
                       "eventually-converges": LOST_FOR_EVER})

ZOMBIE_RESUBSCRIBE = (
    "the KAFKA-19974 zombie without a fence and a rejoin: two heartbeats of member 0 with a changed "
    "subscription each bump the group epoch, the first moves p1 to member 1 (member 0 keeps epoch 1 "
    "in UNREVOKED_PARTITIONS), the second moves p0 too, which releases p1 while member 0 stays at "
    "epoch 1; member 1 takes p1 at epoch 3 and member 0's commit for p1 at epoch 1 is accepted "
    "(6 steps at max_epoch 3, where the default needs 11 steps and max_epoch 4)")
spec.variant("subscription-changes", "kip1251 with heartbeats that change the subscription (each bumps "
             "the group epoch), at max_epoch 3",
             params={"subscription_changes": 1, "max_epoch": 3},
             violates=["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": ZOMBIE_RESUBSCRIBE,
                       "unrevoked-has-pending": STATIC_LEAVE_20641})
spec.variant("metadata-changes", "kip1251 with partitions added to the subscribed topic (each bumps "
             "the group epoch), at max_epoch 3",
             params={"metadata_changes": 1, "max_epoch": 3},
             violates=["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974],
             findings={**LEMMAS_BROKEN_BY_19974, "no-zombie-commit": "the KAFKA-19974 zombie with the "
                       "second target change coming from a metadata change instead of a fence and a "
                       "rejoin (8 steps at max_epoch 3)",
                       "unrevoked-has-pending": STATIC_LEAVE_20641})


# ---------------------------------------------------------------------------------------------
# Known bugs: each pre-fix variant is the default with that one fix undone

spec.known_bug("KAFKA-20066", broke="the coordinator bumps the epoch of a member that keeps its "
               "partition while the heartbeat response is in flight, and the client's commit at "
               "the old epoch is fenced (the spurious ILLEGAL_GENERATION that motivated KIP-1251)",
               fix="PR #21692 (KAFKA-20066 [3/N], KIP-1251 assignment epochs)",
               code="ConsumerGroup.validateOffsetCommit", variant="strict", property="no-spurious-fencing")
spec.known_bug("KAFKA-16147", broke="a partition was assigned to two members at once: a member "
               "that got its pending-revocation partitions back lost their partition epochs, so "
               "the partitions looked free to the other members",
               fix="PR #15212", code="ConsumerGroup.maybeUpdatePartitionEpoch",
               variant="kafka-16147", property="single-owner")
spec.known_bug("KAFKA-19449", broke="a partition pending revocation by the member itself counted as "
               "unreleased, so the member waited in UNRELEASED_PARTITIONS for a partition nobody held",
               fix="PR #20781", code="CurrentAssignmentBuilder.computeNextAssignment",
               variant="kafka-19449", property="unreleased-waits-for-another-member")
spec.known_bug("KAFKA-19233", broke="a fenced member rejoining with epoch 0 under its member id was "
               "fenced again while the coordinator still had its record at a higher epoch",
               fix="PR #21305", code="GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid",
               variant="kafka-19233", property="join-accepted")
spec.known_bug("KAFKA-20442", broke="fencing the last member bumped the group epoch but not the target "
               "assignment epoch, leaving an empty group with group epoch > assignment epoch",
               fix="PR #22045", code="GroupMetadataManager.consumerGroupFenceMember",
               variant="kafka-20442", property="empty-group-at-target-epoch")
spec.known_bug("KAFKA-20641", broke="a static member leaving with epoch -2 while in "
               "UNREVOKED_PARTITIONS keeps that state with nothing pending revocation",
               fix="PR #22473, open: not in the shipped code, so the default variant is the pre-fix one; "
               "variant kafka-20641-fixed, with that PR's one change, holds the property",
               code="GroupMetadataManager.consumerGroupStaticMemberGroupLeave",
               variant="kip1251", property="unrevoked-has-pending", open=True)
spec.known_bug("KAFKA-19974", broke="leaving UNREVOKED_PARTITIONS for UNREVOKED_PARTITIONS bumped the "
               "member epoch; with revocations from an unsubscribed topic (KAFKA-19431) a partition "
               "could be owned by two members at the same epoch (not at the same time)",
               fix="PR #21107", code="CurrentAssignmentBuilder.computeNextAssignment",
               variant="kafka-19974", property="one-owner-per-epoch")


# ---------------------------------------------------------------------------------------------
# Release profiles: what each Kafka 4.x release runs, as the default with the rule changes it
# lacks (issue 34). Read in each release's sources jar (kafka-group-coordinator-V-sources.jar from
# Maven Central; 4.3.2 and 4.4.0 publish none: their entries are measured on brokers instead):
# - strict: ConsumerGroup.validateOffsetCommit checks epoch == member epoch up to 4.2.x (no
#   assignment-epoch validator for consumer groups: 4.0.0-4.2.1 read; KIP-1251 is 4.3.0);
# - unrevoked-epoch-bump (KAFKA-19974 not in): CurrentAssignmentBuilder.build's
#   UNREVOKED_PARTITIONS case calls computeNextAssignment(member.memberEpoch() + 1, ...) in 4.0.0,
#   4.0.1, 4.0.2, 4.1.0, 4.1.1, 4.1.2; not in 4.2.0, 4.2.1, 4.3.1;
# - kafka-19449 (not in): computeNextAssignment has no "pending revocation by the current member"
#   exception in 4.0.0, 4.0.1, 4.1.0, 4.1.1; it has in 4.0.2, 4.1.2 and 4.2.0 on (backported);
# - kafka-19233 (not in): GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid has no
#   early return for epoch 0 up to 4.1.2; it has from 4.2.0;
# - kafka-20442 (not in): measured on 4.2.2 and 4.3.1 (docs/conformance.md, "The releases
#   tested"); PR #22045 is of 2026-04, after 4.0-4.2 were cut; 4.4.0 has the fix, and so has
#   4.3.2 (its GroupMetadataManager.consumerGroupFenceMembers calls
#   GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentMetadataRecord, 4.3.1's does not:
#   javap -c of both jars).
# Not a change of this spec: KAFKA-19431 (updateCurrentAssignment, withHasSubscriptionChanged) is
# in 4.2.0 on only; before it a topic dropped while its regex is unresolved is not taken away at
# the same epoch, which only the unsubscribes=1 actions do, so no profile of 4.0-4.1 predicts a
# trace that takes them. KAFKA-16147's fix (PR #15212, 2024) is in every 4.x release.
_BEFORE_4_2 = ["strict", "unrevoked-epoch-bump", "kafka-19233", "kafka-20442"]


def _as_in(change: str, *props: str) -> dict[str, str]:
    """A profile's findings: each property it violates explained by the change that violates it
    alone (its own record), so a profile's record reads as its changes' records combined."""
    return {p: f"as in {change}: {spec.variants[change].findings[p]}" for p in props}


# Each profile's record, from `kcheck check` and `kcheck progress --variant P` at the defaults
# (lengths in steps; a lasso's prefix and loop start). Every property a profile violates, one of
# its changes violates alone: no combination breaks more than its parts.
# - 4.0.x and 4.1.x are checked at kafka-19233's parameters (lost_responses 1, static_members 0;
#   a profile's are its changes'): 250,780 states (272,794 with kafka-19449), no-spurious-fencing
#   4, join-accepted 5, empty-group-at-target-epoch 1, unreleased-waits-for-another-member 5 (with
#   kafka-19449 only), eventually-converges a lasso of 1 (the last member leaves: kafka-20442's).
#   Fewer than the union of the changes' records: no-zombie-commit and the two lemmas of
#   LEMMAS_BROKEN_BY_19974 hold, since the KAFKA-19974 zombie that strict, kafka-19233 and
#   kafka-20442 violate them with needs its fix and unrevoked-epoch-bump undoes it (alone it holds
#   them too); unrevoked-has-pending holds, since KAFKA-20641 needs a static member, which
#   kafka-19233's parameters leave out (so these profiles cannot show that open bug).
_RECORD_BEFORE_4_2 = ["no-spurious-fencing", "join-accepted", "empty-group-at-target-epoch",
                      "eventually-converges"]
_FINDINGS_BEFORE_4_2 = {**_as_in("strict", "no-spurious-fencing"),
                        **_as_in("kafka-19233", "join-accepted"),
                        **_as_in("kafka-20442", "empty-group-at-target-epoch", "eventually-converges")}
spec.profile("kafka-4.0.0", _BEFORE_4_2 + ["kafka-19449"], releases=["4.0.0", "4.0.1"],
             violates=[*_RECORD_BEFORE_4_2, "unreleased-waits-for-another-member"],
             findings={**_FINDINGS_BEFORE_4_2, **_as_in("kafka-19449", "unreleased-waits-for-another-member")})
spec.profile("kafka-4.0.2", _BEFORE_4_2, releases=["4.0.2"],
             violates=_RECORD_BEFORE_4_2, findings=_FINDINGS_BEFORE_4_2)
spec.profile("kafka-4.1.0", _BEFORE_4_2 + ["kafka-19449"], releases=["4.1.0", "4.1.1"],
             violates=[*_RECORD_BEFORE_4_2, "unreleased-waits-for-another-member"],
             findings={**_FINDINGS_BEFORE_4_2, **_as_in("kafka-19449", "unreleased-waits-for-another-member")})
spec.profile("kafka-4.1.2", _BEFORE_4_2, releases=["4.1.2"],
             violates=_RECORD_BEFORE_4_2, findings=_FINDINGS_BEFORE_4_2)
# - 4.2.x: 682,103 states, the union of strict's and kafka-20442's records: no-zombie-commit 11,
#   no-spurious-fencing 4, empty-group-at-target-epoch 1, unrevoked-has-pending 4, the lemmas 8
#   and 10, eventually-converges a lasso of 1.
spec.profile("kafka-4.2", ["strict", "kafka-20442"], releases=["4.2.0", "4.2.1", "4.2.2"],
             violates=["no-zombie-commit", "no-spurious-fencing", "empty-group-at-target-epoch",
                       "unrevoked-has-pending", "eventually-converges", *LEMMAS_BROKEN_BY_19974],
             findings={**_as_in("strict", "no-zombie-commit", "no-spurious-fencing",
                                "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974),
                       **_as_in("kafka-20442", "empty-group-at-target-epoch", "eventually-converges")})
# - 4.3.0/4.3.1: 682,103 states, kafka-20442's record (the same lengths as 4.2's, without
#   no-spurious-fencing).
spec.profile("kafka-4.3", ["kafka-20442"], releases=["4.3.0", "4.3.1"],
             violates=["no-zombie-commit", "empty-group-at-target-epoch", "unrevoked-has-pending",
                       "eventually-converges", *LEMMAS_BROKEN_BY_19974],
             findings=_as_in("kafka-20442", "no-zombie-commit", "empty-group-at-target-epoch",
                             "unrevoked-has-pending", "eventually-converges", *LEMMAS_BROKEN_BY_19974))
# - 4.3.2 and 4.4.0: the default's record (kip1251), 677,362 states: no-zombie-commit 11,
#   unrevoked-has-pending 4, the lemmas 8 and 10; eventually-converges holds.
_RECORD_DEFAULT = ["no-zombie-commit", "unrevoked-has-pending", *LEMMAS_BROKEN_BY_19974]
spec.profile("kafka-4.3.2", [], releases=["4.3.2"],
             violates=_RECORD_DEFAULT, findings=_as_in("kip1251", *_RECORD_DEFAULT))
spec.profile("kafka-4.4.0", [], releases=["4.4.0"],
             violates=_RECORD_DEFAULT, findings=_as_in("kip1251", *_RECORD_DEFAULT))


# ---------------------------------------------------------------------------------------------
# Properties

@spec.transition_property("no-zombie-commit", actions=["HandleCommit"])
def no_zombie_commit(pre, post, action, args, outcome, p):
    """The coordinator never accepts a commit that a member sent for a partition it owned at the epoch it sent when that partition has since been assigned to another member."""
    return Not(And(outcome == Error.NONE, pre.commit_zombie[args["c"]]))


@spec.transition_property("no-spurious-fencing", actions=["HandleCommit"])
def no_spurious_fencing(pre, post, action, args, outcome, p):
    """A commit by a member for a partition it has held without interruption since the epoch it sent is never rejected."""
    return Not(And(outcome != Error.NONE, pre.commit_owner[args["c"]]))


# The scenarios the two commit properties judge (sometimes: a "holds" above is not vacuous)

@spec.sometimes("zombie-commit-in-flight")
def zombie_commit_in_flight(s, p):
    """A member has an offset commit in flight for a partition that has since been assigned to another member (the commit no-zombie-commit judges)."""
    return Exists(_commit_slots(p), lambda c: And(s.commit[c].request != Request.NONE, s.commit_zombie[c]))


@spec.sometimes("owner-commit-behind-member-epoch")
def owner_commit_behind_member_epoch(s, p):
    """A member that has held a partition without interruption has a commit for it in flight at an epoch below its current member epoch (KAFKA-20066's commit, which no-spurious-fencing judges)."""
    return Exists(_commit_slots(p), lambda c: Exists(_members(p), lambda m: And(
        s.commit[c].request != Request.NONE, s.commit_owner[c], s.commit[c].member == m,
        s.commit[c].epoch < s.member_epoch[m])))


@spec.transition_property("join-accepted", actions=["Join", "JoinFenced"])
def join_accepted(pre, post, action, args, outcome, p):
    """A ConsumerGroupHeartbeat with member epoch 0 (a join, KIP-848) is never answered FENCED_MEMBER_EPOCH."""
    return outcome != Error.FENCED_MEMBER_EPOCH


@spec.transition_property("one-owner-per-epoch")
def one_owner_per_epoch(pre, post, action, args, outcome, p):
    """No partition is held by two different members at the same member epoch, even at different times."""
    if not p.unsubscribes:
        return TRUE     # the ghosts exist only where KAFKA-19974's path (unsubscribing) does
    return Forall([(m, q) for m in _members(p) for q in _partitions(p)], lambda mq: Or(
        post.holds[mq[0]][mq[1]] == Hold.NONE, post.member_epoch[mq[0]] < 0,
        pre.epoch_owner[mq[1]] < 0, pre.epoch_owner[mq[1]] == mq[0],
        post.member_epoch[mq[0]] > pre.epoch_high[mq[1]]))


@spec.transition_property("static-rejoin-accepted", actions=["JoinUnreleasedInstance"])
def static_rejoin_accepted(pre, post, action, args, outcome, p):
    """A static member's own client rejoining with member epoch 0 under its member id is never refused with UNRELEASED_INSTANCE_ID."""
    return outcome != Error.UNRELEASED_INSTANCE_ID


@spec.transition_property("unreleased-waits-for-another-member",
                          actions=["Heartbeat", "HeartbeatNewSubscription", "Join"])
def unreleased_waits_for_another_member(pre, post, action, args, outcome, p):
    """A heartbeat leaves its member in UNRELEASED_PARTITIONS only while another member still holds a partition the target gives it."""
    m = args["m"]
    waiting = Exists(_partitions(p), lambda q: And(
        post.target_owner[q] == m, post.holds[m][q] == Hold.NONE,
        Exists([k for k in _members(p) if k != m],
               lambda k: post.holds[k][q] != Hold.NONE)))
    return Or(post.member_state[m] != MemberState.UNRELEASED_PARTITIONS, waiting)


def _in_group(s, m):
    return s.member_epoch[m] != LEFT


@spec.invariant("single-owner")
def single_owner(s, p):
    """No partition is held by two members of the group at once, counting partitions pending revocation and revocations a client has not yet acknowledged."""
    def holds(m, q):
        return _in_group(s, m) & ((s.holds[m][q] != Hold.NONE) | s.client_owns[m][q])
    return Forall(_partitions(p), lambda q: Forall(
        [(a, b) for a in _members(p) for b in _members(p) if a < b],
        lambda ab: ~(holds(ab[0], q) & holds(ab[1], q))))


@spec.invariant("epoch-order")
def epoch_order(s, p):
    """For every member with a member epoch >= 0, assignment epoch <= member epoch <= target assignment epoch <= group epoch."""
    def ok(m):
        e = s.member_epoch[m]
        return Or(e < 0, And(e <= s.target_epoch, Forall(_partitions(p), lambda q: Or(
            s.holds[m][q] == Hold.NONE, s.assignment_epoch[m][q] <= e))))
    return And(s.target_epoch <= s.group_epoch, Forall(_members(p), ok))


@spec.invariant("empty-group-at-target-epoch")
def empty_group_at_target_epoch(s, p):
    """A group without member records has its target assignment epoch equal to its group epoch."""
    return Or(Exists(_members(p), lambda m: _in_group(s, m)), s.target_epoch == s.group_epoch)


@spec.invariant("unrevoked-has-pending")
def unrevoked_has_pending(s, p):
    """A member in UNREVOKED_PARTITIONS has at least one partition pending revocation."""
    return Forall(_members(p), lambda m: Or(
        ~_in_group(s, m), s.member_state[m] != MemberState.UNREVOKED_PARTITIONS,
        Exists(_partitions(p), lambda q: s.holds[m][q] == Hold.PENDING_REVOCATION)))


@spec.invariant("client-owns-held")
def client_owns_held(s, p):
    """A client whose member is in the group owns only partitions the coordinator records it as holding."""
    return Forall(_members(p), lambda m: Or(~(s.member_epoch[m] >= 0), Forall(
        _partitions(p), lambda q: Or(~s.client_owns[m][q], s.holds[m][q] != Hold.NONE))))


# ---------------------------------------------------------------------------------------------
# Lemmas: auxiliary invariants that `kcheck prove` proves first and then assumes, so that the
# properties above are proved for every epoch (the search checks them like any invariant).
# See "Proofs" in spec/consumer_group_notes.md.

def _is_static_expr(p, m):
    return TRUE if _is_static(p, m) else FALSE


def _held(s, p, m, q):
    return s.holds[m][q] != Hold.NONE


@spec.invariant("epochs-start-at-one", lemma=True)
def epochs_start_at_one(s, p):
    """The target assignment epoch is at least 1 and at most the group epoch."""
    return And(s.target_epoch >= 1, s.target_epoch <= s.group_epoch)


@spec.invariant("member-epoch-behind-target", lemma=True)
def member_epoch_behind_target(s, p):
    """A member epoch is -1 (no record), -2 (a static member that left) or between 1 and the target assignment epoch."""
    return Forall(_members(p), lambda m: Or(
        s.member_epoch[m] == LEFT, And(_is_static_expr(p, m), s.member_epoch[m] == STATIC_LEFT),
        And(s.member_epoch[m] >= 1, s.member_epoch[m] <= s.target_epoch)))


@spec.invariant("assigned-no-later-than-member-epoch", lemma=True)
def assigned_no_later_than_member_epoch(s, p):
    """Every partition a member in the group holds was assigned at or before its member epoch."""
    return Forall(_members(p), lambda m: Or(s.member_epoch[m] < 0, Forall(_partitions(p), lambda q: Or(
        ~_held(s, p, m, q), s.assignment_epoch[m][q] <= s.member_epoch[m]))))


@spec.invariant("no-record-holds-nothing", lemma=True)
def no_record_holds_nothing(s, p):
    """A slot without a member record holds no partition, is in no target assignment and keeps no reconciliation state."""
    return Forall(_members(p), lambda m: Or(s.member_epoch[m] != LEFT, And(
        s.member_state[m] == MemberState.STABLE, s.revocation_epoch[m] == -1,
        Forall(_partitions(p), lambda q: And(
            s.holds[m][q] == Hold.NONE, s.assignment_epoch[m][q] == 0,
            s.held_since[m][q] == 0, s.target_owner[q] != m)))))


@spec.invariant("static-leave-keeps-assigned", lemma=True)
def static_leave_keeps_assigned(s, p):
    """A static member that left with epoch -2 keeps only assigned partitions, at assignment epochs no later than the target's, and its client is out of the group with nothing in flight."""
    return Forall(_members(p), lambda m: Or(s.member_epoch[m] != STATIC_LEFT, And(
        s.client_epoch[m] == LEFT, ~s.response_in_flight[m],
        Forall(_partitions(p), lambda q: And(
            s.holds[m][q] != Hold.PENDING_REVOCATION,
            s.assignment_epoch[m][q] <= s.target_epoch)))))


@spec.invariant("client-follows-member", lemma=True)
def client_follows_member(s, p):
    """The client of a member in the group knows its member epoch, or is behind it only while a heartbeat response is in flight."""
    if p.lost_responses:
        # a lost response leaves the client behind with nothing in flight, and its retry at a
        # stale epoch is answered FENCED_MEMBER_EPOCH while the member record stays
        return Forall(_members(p), lambda m: Or(s.member_epoch[m] < 0, s.client_epoch[m] <= s.member_epoch[m]))
    return Forall(_members(p), lambda m: Or(s.member_epoch[m] < 0, And(
        s.client_epoch[m] >= 0, s.client_epoch[m] <= s.member_epoch[m], ~s.response_error[m],
        Or(s.response_in_flight[m], s.client_epoch[m] == s.member_epoch[m]))))


@spec.invariant("client-epoch-behind-target", lemma=True)
def client_epoch_behind_target(s, p):
    """A client's epoch is -1, 0 (joining) or an epoch the target assignment has reached, and a client outside the group owns nothing."""
    return Forall(_members(p), lambda m: And(
        s.client_epoch[m] >= LEFT, s.client_epoch[m] <= s.target_epoch,
        Or(s.client_epoch[m] > 0, Forall(_partitions(p), lambda q: And(
            ~s.client_owns[m][q], ~s.lost[m][q])))))


@spec.invariant("pending-only-while-unrevoked", lemma=True)
def pending_only_while_unrevoked(s, p):
    """A member in the group holds partitions pending revocation only in UNREVOKED_PARTITIONS."""
    return Forall(_members(p), lambda m: Or(
        s.member_epoch[m] < 0, s.member_state[m] == MemberState.UNREVOKED_PARTITIONS,
        Forall(_partitions(p), lambda q: s.holds[m][q] != Hold.PENDING_REVOCATION)))


@spec.invariant("owned-since-client-epoch", lemma=True)
def owned_since_client_epoch(s, p):
    """A partition the client of a member in the group owns is held by the member, assigned at or before the client's epoch."""
    return Forall(_members(p), lambda m: Or(s.member_epoch[m] < 0, Forall(_partitions(p), lambda q: Or(
        ~s.client_owns[m][q], And(_held(s, p, m, q), s.assignment_epoch[m][q] <= s.client_epoch[m])))))


@spec.invariant("in-flight-commits-are-transactional", lemma=True)
def in_flight_commits_are_transactional(s, p):
    """Every commit in flight is a TxnOffsetCommit at an epoch between 1 and the target assignment epoch, and an empty commit slot is no owner's commit."""
    return Forall(_commit_slots(p), lambda c: Or(
        And(s.commit[c].request == Request.NONE, ~s.commit_owner[c]),
        And(s.commit[c].request == Request.TXN_OFFSET_COMMIT, s.commit[c].epoch >= 1,
            s.commit[c].epoch <= s.target_epoch)))


@spec.invariant("owner-commit-within-hold", lemma=True)
def owner_commit_within_hold(s, p):
    """A commit whose sender has held the partition since its epoch names the member's current id, and its epoch lies between the partition's assignment epoch and the member epoch."""
    def fits(c, m, q):
        return Or((s.commit[c].member != m) | (s.commit[c].partition != q), And(
            s.member_epoch[m] >= 1, s.member_id[m] == s.commit[c].member_id, s.holds[m][q] != Hold.NONE,
            s.assignment_epoch[m][q] <= s.commit[c].epoch, s.commit[c].epoch <= s.member_epoch[m]))
    return Forall(_commit_slots(p), lambda c: Or(~s.commit_owner[c], Forall(
        [(m, q) for m in _members(p) for q in _partitions(p)], lambda mq: fits(c, *mq))))


@spec.invariant("lost-only-after-removal", lemma=True)
def lost_only_after_removal(s, p):
    """A client still owns a partition that went to another member only after its own member record was removed."""
    return Forall(_members(p), lambda m: Forall(_partitions(p), lambda q: Or(
        ~s.lost[m][q], And(s.client_owns[m][q], s.member_epoch[m] == LEFT))))


def _commits_by(s, p, pred):
    """pred(c, m, q) for every commit slot c in flight, with its sender m and partition q."""
    return Forall(_commit_slots(p), lambda c: Forall(
        [(m, q) for m in _members(p) for q in _partitions(p)], lambda mq: Or(
            s.commit[c].request == Request.NONE, s.commit[c].member != mq[0],
            s.commit[c].partition != mq[1], pred(c, *mq))))


def _current_sender(s, c, m):
    """The commit's member is in the group under the member id the commit carries."""
    return And(s.member_epoch[m] >= 1, s.member_id[m] == s.commit[c].member_id)


@spec.invariant("commit-member-id-not-ahead", lemma=True)
def commit_member_id_not_ahead(s, p):
    """A commit in flight carries a member id no newer than its member's current one."""
    return _commits_by(s, p, lambda c, m, q: s.commit[c].member_id <= s.member_id[m])


@spec.invariant("commit-epoch-not-ahead", lemma=True)
def commit_epoch_not_ahead(s, p):
    """A commit in flight from a member still in the group under the same member id carries an epoch at most its member epoch."""
    return _commits_by(s, p, lambda c, m, q: Or(
        ~_current_sender(s, c, m), s.commit[c].epoch <= s.member_epoch[m]))


@spec.invariant("reconciled-member-follows-target", lemma=True)
def reconciled_member_follows_target(s, p):
    """A member at the target epoch has every partition it holds as assigned (not pending revocation) assigned to it in the target assignment."""
    return Forall(_members(p), lambda m: Or(
        s.member_epoch[m] != s.target_epoch,
        Forall(_partitions(p), lambda q: Or(s.holds[m][q] != Hold.ASSIGNED,
                                            s.target_owner[q] == m))))


@spec.invariant("unrevoked-at-target-owns-no-pending", lemma=True)
def unrevoked_at_target_owns_no_pending(s, p):
    """A member in UNREVOKED_PARTITIONS at the target epoch has no client owning, at that epoch, a partition pending revocation, and no commit in flight at that epoch for one."""
    def behind(m):
        return Or(s.member_epoch[m] < 1, s.member_epoch[m] < s.target_epoch,
                  s.member_state[m] != MemberState.UNREVOKED_PARTITIONS)
    client = Forall(_members(p), lambda m: Or(behind(m), s.client_epoch[m] != s.member_epoch[m], Forall(
        _partitions(p), lambda q: Or(~s.client_owns[m][q],
                                     s.holds[m][q] != Hold.PENDING_REVOCATION))))
    commits = _commits_by(s, p, lambda c, m, q: Or(
        behind(m), ~_current_sender(s, c, m), s.commit[c].epoch != s.member_epoch[m],
        s.holds[m][q] != Hold.PENDING_REVOCATION))
    return And(client, commits)


# The next two carry the proof of no-zombie-commit in unrevoked-epoch-bump. KAFKA-19974 breaks
# both (a member that revokes more in UNREVOKED_PARTITIONS keeps its epoch while it releases a
# partition it committed for), so the variants that keep KAFKA-19974 record them as violated.

@spec.invariant("released-partition-commit-is-stale", lemma=True)
def released_partition_commit_is_stale(s, p):
    """A commit in flight for a partition its member has since released carries an epoch below the member epoch."""
    return _commits_by(s, p, lambda c, m, q: Or(
        ~_current_sender(s, c, m), s.holds[m][q] != Hold.NONE, s.commit[c].epoch < s.member_epoch[m]))


@spec.invariant("zombie-commit-is-stale", lemma=True)
def zombie_commit_is_stale(s, p):
    """A zombie commit in flight whose member id is still current carries an epoch below the member epoch and, if the member holds the partition again, below its assignment epoch."""
    return _commits_by(s, p, lambda c, m, q: Or(
        ~s.commit_zombie[c], ~_current_sender(s, c, m), And(
            s.commit[c].epoch < s.member_epoch[m],
            Or(s.holds[m][q] == Hold.NONE, s.commit[c].epoch < s.assignment_epoch[m][q]))))


# The environment: what happens to the group rather than what the protocol does about it. A
# member joins or leaves, a live member's session times out (FenceMember), a subscription or the
# topic's metadata changes, a response is lost. Every other step is the protocol's own and is
# never cut for the bound: heartbeats and their responses, reconciliation, commits, the
# coordinator's regex refresh, and StaticMemberExpires, the coordinator's session timer finishing
# what a static member's leave (-2) began (it needs that leave, a disturbance, before it). No fair
# action is a disturbance, so the bound cuts only steps a fair behaviour may skip. A progress
# verdict holds "for every behaviour with at most E disturbances" (checker/environment.py). The
# group epoch rises only by a disturbance (Join of a new member, a removal, a subscription or
# metadata change), by StaticMemberExpires after a leave or by SubscriptionResolved after an
# unsubscribe, and the member id only by a static member's rejoin: from epoch 1, E disturbances
# reach at most epoch 1 + E, so at the default max_epoch=4 the cap cuts no step within E = 3 (the
# statistics line's "0 of them within the disturbance bound", checked on every run; where a
# variant's cap is lower, the graph raises it until it cuts none).
spec.environment_actions(
    ["Join", "Leave", "FenceMember", "HeartbeatNewSubscription", "HeartbeatUnsubscribe",
     "HeartbeatUnsubscribeAll", "TopicPartitionsAdded", "LoseHeartbeatResponse"],
    bound=3, cap="max_epoch",
    why="joins, leaves, session timeouts of live members, subscription and metadata changes and "
        "lost responses are done to the group; heartbeats, responses, reconciliation, commits and "
        "the coordinator's own timers and refreshes are the protocol")


# SubscriptionResolved is the coordinator's own asynchronous regex refresh, which Kafka always
# completes (GroupMetadataManager's scheduled refresh): fair like the heartbeats. It is absent
# unless unsubscribes > 0.
@spec.always_eventually("eventually-converges",
                        fair=["Heartbeat", "HeartbeatResponse", "HandleCommit", "StaticMemberExpires",
                              "SubscriptionResolved"])
def eventually_converges(s, p):
    """Once membership stops changing, every member of the group reaches the target assignment at the target epoch and its client knows it."""
    def reconciled(m):
        return Or(s.member_epoch[m] < 0, And(
            s.member_state[m] == MemberState.STABLE, s.member_epoch[m] == s.target_epoch,
            s.client_epoch[m] == s.member_epoch[m],
            Forall(_partitions(p), lambda q: And(
                (s.holds[m][q] == Hold.ASSIGNED) == (s.target_owner[q] == m),
                s.client_owns[m][q] == (s.target_owner[q] == m)))))
    return And(s.group_epoch == s.target_epoch, Forall(_members(p), reconciled))

