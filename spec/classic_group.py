"""The classic consumer group protocol: generations, EAGER and COOPERATIVE rebalancing, KIP-792
(generation in the subscription) and KIP-726 (the default assignor list and protocol selection).

One group coordinator in its classic code path and a few Java consumers (ClassicKafkaConsumer with
ConsumerCoordinator) subscribed to one topic. What is modelled, step by step as Kafka runs it
(docs: spec/classic_group_notes.md, which also gives the sources read):

- JoinGroup: onJoinPrepare first (EAGER revokes everything; a member without a generation or a
  member id declares everything lost; COOPERATIVE keeps what it owns), then the request carries
  the member's assignor list and, in each subscription, its ownedPartitions and the generation
  of its last successful JoinGroup (ConsumerProtocolSubscription v2, KIP-792 as shipped).
  The coordinator: UNKNOWN_MEMBER_ID for a member it removed, INCONSISTENT_GROUP_PROTOCOL when
  no assignor is common to every member, a rebalance (PreparingRebalance) when a member is new,
  is the leader, or sent different metadata, an immediate answer otherwise.
- CompleteJoin: once every member rejoined, generation + 1, the protocol is voted, responses go
  out. A member processes its JoinGroup response later (it may be slow).
- SyncGroup: the leader's carries the assignment, computed from the subscriptions the coordinator
  stored; followers' wait for it. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION (both reset the
  generation; the first also the member id), REBALANCE_IN_PROGRESS (no reset: the member rejoins
  with the generation and the ownedPartitions it had: the KAFKA-13419 path).
- The leader's assignment may throw (AssignmentFails: the assignor's IllegalStateException, or
  ConsumerCoordinator.validateCooperativeAssignment's): no SyncGroup is sent, the exception leaves
  poll(), and the leader rejoins with its generation and partitions; with unchanged subscription
  bytes the coordinator answers it at once with the same members, and it throws again.
- onJoinComplete: COOPERATIVE members revoke what they lost and rejoin (the follow-up rebalance).
- Heartbeat and OffsetCommit with the generation; the coordinator may time a member out (it falls
  out of the group and learns so from its next request).
- The assignors: range (EAGER, ignores ownedPartitions) and cooperative-sticky, at the level of
  which claim on a partition survives (the named rule "claim-resolution"), which partitions a
  member keeps, and which are withheld for the follow-up rebalance; not its balancing arithmetic.
- A rolling upgrade: a member restarts (LeaveGroup, revoking everything) with its next assignor list.

Properties:
- single-owner: no partition is owned by two consumers at once.
- revoke-before-assign: under COOPERATIVE, no partition is revoked from one member and assigned to
  another in the same round.
- revoked-before-reassigned (the owner's view of the same rule): a partition is never handed to a
  new owner while the consumer that holds it has not revoked it.
- cooperative-keeps-owned: a COOPERATIVE consumer still in the group keeps its partitions when it
  rejoins (KIP-429).
- stale-claim-never-wins: a partition two members claim never goes to the older claim (KIP-792).
- no-double-commit: no two members commit offsets for the same partition while both own it.
- generation-monotonic: a member never acts on a generation older than one it already completed.
Progress (checked by the progress engine): rebalance-completes.

Known bugs (spec.known_bug, after the variants): kafka-12983 (onJoinPrepare once per rebalance,
the client whose member left out of a generation still claims and processes its old partitions),
kafka-14639 (claims below the top generation dropped), kafka-14016 (SyncGroup
REBALANCE_IN_PROGRESS resets the generation), kafka-12984 (the assignor throws on a partition two
members keep) and kafka-13406 (the cooperative validation run on the built-in assignor), the last
two stuck rebalances that rebalance-completes refutes. Each of those two undoes its fix on the
variant of the bug that fed it (kafka-12984 on pre-kip792-kafka-12983, kafka-13406 on
kafka-14639): with today's client and claim rule the assignor never throws and the validation
never fires. KAFKA-14196 is recorded as not expressible, with the reason. pre-kip792-kafka-12983
shows KIP-792's motivating problem, which needs that old client.

KAFKA-13419: a delayed SyncGroup answered REBALANCE_IN_PROGRESS leaves the member's
ownedPartitions out of date (the missed assignment moved a partition away) and its rejoin still
claims it. Today the claim is true (the member never applied the assignment that took the
partition) and harmless: kip792 with three members and three partitions shows it (scenario
tests/scenarios/classic_group/kafka_13419_missed_sync.json). In the client of its time it failed
the leader's cooperative validation: the kafka-13406 lasso runs exactly this interleaving, so the
known bug points there. The change PR #11451 made under its name (ILLEGAL_GENERATION keeps the
member id) is in SyncGroup below; see spec/classic_group_notes.md.
"""
from kcheck import (TRUE, And, Array, Bool, Count, Enum, Exists, Forall, If, Implies,
                   Int, Max, Not, Or, Spec)

spec = Spec("classic_group", __doc__)
spec.param("members", 3, lo=1, hi=3, doc="consumers that may join the group")
spec.param("partitions", 2, lo=1, hi=3, doc="partitions of the one subscribed topic")
spec.param("max_generation", 4, lo=1, hi=12,
           doc="generation cap of the search without the quotient (--no-quotient)")
spec.param("timeouts", 0, lo=0, hi=1,
           doc="1: the coordinator may time a member out (session, rebalance or pending-sync "
               "timeout); the member learns it from its next request")
spec.param("generation_from_assignment", 0, lo=0, hi=1,
           doc="the generation a subscription carries: 0, the member's generation at JoinGroup "
               "(ConsumerProtocolSubscription v2, Kafka 3.4 on); 1, the generation of the last "
               "assignment it received, as CooperativeStickyAssignor's userData carried it before")

# Generations are only compared, incremented and copied: an order-only domain, so the explicit
# search stores each state with its generations renumbered by rank and its verdicts hold for
# every generation (docs/design.md, "Exact quotients over order-only domains").
# NO_GENERATION is AbstractCoordinator.Generation.NO_GENERATION's id (-1,
# JoinGroupRequest.UNKNOWN_GENERATION_ID); NO_CLAIM is this spec's own marker, below every
# generation, for a member that claims nothing (highest_generation_claim). The group's generation
# starts at 0 (GroupMetadata.generationId) and is a real generation, not a sentinel.
NO_GENERATION, NO_CLAIM = -1, -2
Generation = spec.epoch("generation", sentinels=(NO_CLAIM, NO_GENERATION), cap="max_generation",
                        doc="group generations (GroupMetadata.generationId and the clients' copies)")

GroupState = Enum("GroupState", "Empty PreparingRebalance CompletingRebalance Stable")
MemberState = Enum("MemberState", "UNJOINED PREPARING_REBALANCE COMPLETING_REBALANCE STABLE")
Assignor = Enum("Assignor", ["none", "range", "cooperative-sticky"])
RebalanceProtocol = Enum("RebalanceProtocol", "EAGER COOPERATIVE")
# partition.assignment.strategy, in preference order
# "[]": the consumer process has not started yet (see StartConsumer)
AssignorList = Enum("AssignorList", ["[]", "[range]", "[cooperative-sticky, range]",
                                     "[cooperative-sticky]", "[range, cooperative-sticky]"])
Error = spec.outcomes(Enum("Error", "NONE REBALANCE_IN_PROGRESS ILLEGAL_GENERATION "
                                    "UNKNOWN_MEMBER_ID INCONSISTENT_GROUP_PROTOCOL"))

RANGE, COOPERATIVE_STICKY = Assignor["range"], Assignor["cooperative-sticky"]
L_NONE, L_RANGE, L_COOP_RANGE, L_COOP, L_RANGE_COOP = AssignorList.values

# The assignors of each list, in preference order. RangeAssignor supports EAGER only;
# CooperativeStickyAssignor supports COOPERATIVE and EAGER.
LIST_ASSIGNORS = {L_NONE: [], L_RANGE: [RANGE], L_COOP_RANGE: [COOPERATIVE_STICKY, RANGE],
                  L_COOP: [COOPERATIVE_STICKY], L_RANGE_COOP: [RANGE, COOPERATIVE_STICKY]}


def fixed_protocol(lst):
    """The rebalance protocol chosen at start-up: the highest one every configured assignor
    supports (ConsumerCoordinator's constructor)."""
    return RebalanceProtocol.COOPERATIVE if lst == L_COOP else RebalanceProtocol.EAGER


# Each variant's starting assignor list and rolling-upgrade path (list -> next list). The
# known-bug variants (named after their JIRA) are the default, kip792, with one fix undone.
START = {"kip792": L_COOP, "pre-kip792": L_COOP, "double-bounce": L_RANGE,
         "single-bounce": L_RANGE, "kip726-dynamic": L_RANGE, "shipped-default": L_RANGE_COOP,
         "kip726-downgrade": L_COOP_RANGE, "pre-kip792-kafka-12983": L_COOP,
         "kafka-12983": L_COOP, "kafka-14639": L_COOP, "kafka-14016": L_COOP,
         "kafka-12984": L_COOP, "kafka-13406": L_COOP}
UPGRADE = {"double-bounce": {L_RANGE: L_COOP_RANGE, L_COOP_RANGE: L_COOP},
           "single-bounce": {L_RANGE: L_COOP},
           "kip726-dynamic": {L_RANGE: L_COOP_RANGE},
           # a downgrade, or an operator restarting a consumer with only RangeAssignor
           "kip726-downgrade": {L_COOP_RANGE: L_RANGE}}
# KIP-726's dynamic protocol selection (never shipped)
DYNAMIC = {"kip726-dynamic", "kip726-downgrade"}
# the client before KAFKA-12983: onJoinPrepare runs once per rebalance, not again after a reset
ONCE_PER_REBALANCE = {"kafka-12983", "pre-kip792-kafka-12983", "kafka-12984"}
# the subscription before KIP-792 (ConsumerProtocolSubscription v1): ownedPartitions without a
# generation. The spec still keeps the generation of each stored subscription, which only the
# properties read in these variants (stale-claim-never-wins: which claim was the older one)
NO_GENERATION_IN_SUBSCRIPTION = {"pre-kip792", "pre-kip792-kafka-12983", "kafka-12984"}
# the sticky assignor before PR #10985 (KAFKA-12984): CooperativeStickyAssignor's userData held no
# generation, so every claim counted (AbstractStickyAssignor.allSubscriptionsEqual kept the
# ownedPartitions of every member when no generation was present), and a partition two members
# kept broke constrainedAssign's quota arithmetic, which threw IllegalStateException
TRUSTS_EVERY_CLAIM = {"kafka-12984"}
# the client before PR #11439 (KAFKA-13406): ConsumerCoordinator.onLeaderElected ran
# validateCooperativeAssignment on the built-in cooperative-sticky assignment too
VALIDATES_BUILT_IN = {"kafka-13406"}


def start_protocol(variant):
    # KIP-726's dynamic selection starts EAGER and turns COOPERATIVE once the group chose
    # cooperative-sticky; shipped consumers fix the protocol at start-up.
    if variant in DYNAMIC:
        return RebalanceProtocol.EAGER
    return fixed_protocol(START[variant])


def members(p):
    return range(p.members)


def parts(p):
    return range(p.partitions)


def mp(p, m, q):
    """Index of (member, partition) in the flattened per-member partition sets."""
    return m * p.partitions + q


@spec.state
def state(p):
    G, M, MP = p.max_generation, p.members, p.members * p.partitions
    # a consumer's copy of a generation: NO_GENERATION or one the group has had
    member_gen = Int(NO_GENERATION, G, search_bound=True, epoch=Generation)
    return {
        # the group coordinator
        "group_state": GroupState,
        "generation": Int(0, G, search_bound=True, epoch=Generation),
        "protocol_name": Assignor,
        "leader": Int(-1, M - 1),
        "in_group": Array(Bool, M),                 # the coordinator knows the member's id
        "awaiting_join": Array(Bool, M),            # joined the rebalance in progress
        "subscription_owned": Array(Bool, MP),      # ownedPartitions as sent in JoinGroup
        "subscription_generation": Array(member_gen, M),
        "assignment": Array(Bool, MP),              # stored by the leader's SyncGroup
        # the consumers
        "assignors": Array(AssignorList, M),
        "rebalance_protocol": Array(RebalanceProtocol, M),
        "member_state": Array(MemberState, M),
        "member_generation": Array(member_gen, M),
        "has_member_id": Array(Bool, M),
        "rejoin_needed": Array(Bool, M),
        # AbstractCoordinator.needsJoinPrepare: onJoinPrepare is still to run before the next
        # JoinGroup. Only the pre-KAFKA-12983 client ever clears it (in every other variant
        # onJoinPrepare runs at each JoinGroup, see JoinGroup), so elsewhere it stays true.
        "needs_join_prepare": Array(Bool, M),
        "join_response_generation": Array(member_gen, M),  # -1: none pending
        "join_response_protocol": Array(Assignor, M),
        "completed_generation": Array(member_gen, M),
        "owned": Array(Bool, MP),                   # SubscriptionState's assigned partitions
        "committed": Array(Bool, MP),               # committed while owning, since the partition
                                                    # last gained an owner
    }


@spec.init
def init(p):
    M, MP = p.members, p.members * p.partitions
    yield {"group_state": GroupState.Empty, "generation": 0, "protocol_name": Assignor.none,
           "leader": -1, "in_group": [False] * M, "awaiting_join": [False] * M,
           "subscription_owned": [False] * MP, "subscription_generation": [-1] * M,
           "assignment": [False] * MP,
           "assignors": [L_NONE] * M, "rebalance_protocol": [RebalanceProtocol.EAGER] * M,
           "member_state": [MemberState.UNJOINED] * M, "member_generation": [-1] * M,
           "has_member_id": [False] * M, "rejoin_needed": [False] * M,
           "needs_join_prepare": [True] * M,
           "join_response_generation": [-1] * M, "join_response_protocol": [Assignor.none] * M,
           "completed_generation": [-1] * M, "owned": [False] * MP, "committed": [False] * MP}


PR, CR = GroupState.PreparingRebalance, GroupState.CompletingRebalance
UNJOINED, PREPARING = MemberState.UNJOINED, MemberState.PREPARING_REBALANCE
COMPLETING, STABLE = MemberState.COMPLETING_REBALANCE, MemberState.STABLE
EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE


def list_supports(lst, assignor):
    """Whether an assignor list (a state expression) contains the assignor."""
    return Or(*[lst == L for L, names in LIST_ASSIGNORS.items() if assignor in names])


def first_index(conds, default=-1):
    """The lowest index whose condition holds (default when none does)."""
    out = default
    for j in reversed(range(len(conds))):
        out = If(conds[j], j, out)
    return out


# ---------------------------------------------------------------------------------------------
# The assignors, as the leader runs them on the subscriptions the coordinator stored

@spec.rule("claim-resolution")
def highest_generation_claim(s, p, q):
    """KIP-792 as shipped (AbstractStickyAssignor since KAFKA-14639): of the members claiming
    partition q in their ownedPartitions, the one with the highest subscription generation keeps
    it; a tie at the top means nobody keeps it. Returns the member, -1 for no claim, -2 for a tie."""
    claim = [s.in_group[j] & s.subscription_owned[mp(p, j, q)] for j in members(p)]
    gen = [If(claim[j], s.subscription_generation[j], NO_CLAIM) for j in members(p)]
    top = gen[0]
    for g in gen[1:]:
        top = Max(top, g)
    at_top = [claim[j] & (gen[j] == top) for j in members(p)]
    n = Count(*at_top)
    return If(n == 0, -1, If(n == 1, first_index(at_top), -2))


@spec.rule("claim-resolution", variant="pre-kip792")
@spec.rule("claim-resolution", variant="pre-kip792-kafka-12983")
def first_claim(s, p, q):
    """No generation: ownedPartitions are trusted as sent; of two claims on one partition the
    assignor keeps the first it reads (member order) and silently drops the other."""
    return first_index([s.in_group[j] & s.subscription_owned[mp(p, j, q)] for j in members(p)])


@spec.rule("claim-resolution", variant="kafka-14639")
@spec.rule("claim-resolution", variant="kafka-13406")
def top_generation_claims(s, p, q):
    """Before KAFKA-14639 (AbstractStickyAssignor.allSubscriptionsEqual until PR #13550): only
    the members of the highest subscription generation in the group keep their ownedPartitions;
    every claim of an older generation is dropped, even one nobody else makes; two claims at the
    top generation both lose (KAFKA-12984)."""
    gen = [If(s.in_group[j], s.subscription_generation[j], -1) for j in members(p)]
    top = gen[0]
    for g in gen[1:]:
        top = Max(top, g)
    valid = [s.in_group[j] & s.subscription_owned[mp(p, j, q)] & (gen[j] == top)
             for j in members(p)]
    n = Count(*valid)
    return If(n == 0, -1, If(n == 1, first_index(valid), -2))


def max_quota(p, k):
    """ceil(partitions / k) for the number k (an expression) of members in the group."""
    out = p.partitions
    for kk in range(2, p.members + 1):
        out = If(k == kk, -(-p.partitions // kk), out)
    return out


def claimed_partitions_kept_before_10985(s, p, k):
    """constrainedAssign's first step before PR #10985 (read at the version whose comment says
    "maybe assigning the same partition to two owners"): every member's claims count; a member
    keeps all it claims below minQuota, maxQuota while fewer than (partitions mod members)
    members were kept over minQuota, else minQuota; members in member-id order (slot order here),
    claims in partition order."""
    def by_size(f):
        out = f(1)
        for kk in range(2, p.members + 1):
            out = If(k == kk, f(kk), out)
        return out
    min_quota = by_size(lambda kk: p.partitions // kk)
    max_quota = by_size(lambda kk: -(-p.partitions // kk))
    expected_over = by_size(lambda kk: p.partitions % kk)
    over, retained = 0, {}
    for j in members(p):
        claims = [s.in_group[j] & s.subscription_owned[mp(p, j, q)] for q in parts(p)]
        n = Count(*claims)
        keep_max = (n >= max_quota) & (over < expected_over)
        keep = If(n < min_quota, n, If(keep_max, max_quota, min_quota))
        over = over + If(s.in_group[j] & (n >= min_quota) & keep_max, 1, 0)
        seen = 0
        for q in parts(p):
            retained[j, q] = claims[q] & (seen < keep)
            seen = seen + If(claims[q], 1, 0)
    return retained


def cooperative_sticky(s, p):
    """CooperativeStickyAssignor: surviving claims are kept up to the quota; partitions with no
    surviving claim go to the members with the fewest; a partition taken from a claimant (over
    quota, or claimed by two at one generation) is withheld this round, for the follow-up.
    Returns the assignment and the condition under which the assignor throws instead
    (IllegalStateException: a partition kept by two members, which only the assignor before
    PR #10985 lets through; AbstractStickyAssignor.constrainedAssign)."""
    k = Count(*[s.in_group[j] for j in members(p)])
    quota = max_quota(p, k)
    retained, count = {}, {}
    if s.variant in TRUSTS_EVERY_CLAIM:
        retained = claimed_partitions_kept_before_10985(s, p, k)
        transferring = {q: Exists(members(p), lambda j: s.in_group[j] & s.subscription_owned[mp(p, j, q)])
                        for q in parts(p)}
        for j in members(p):
            count[j] = Count(*[retained[j, q] for q in parts(p)])
        throws = Exists(parts(p), lambda q: Count(*[retained[j, q] for j in members(p)]) >= 2)
    else:
        winner = [s.rule("claim-resolution", q=q) for q in parts(p)]
        transferring = {q: winner[q] != -1 for q in parts(p)}
        for j in members(p):
            n = 0
            for q in parts(p):
                r = (winner[q] == j) & (n < quota)
                retained[j, q] = r
                n = n + If(r, 1, 0)
            count[j] = n
        # one winner per partition: no partition is kept twice, so the quota arithmetic holds
        throws = False
    out = {}
    for q in parts(p):
        free = Not(Exists(members(p), lambda j: retained[j, q]))
        below = [s.in_group[j] & (count[j] < quota) for j in members(p)]
        give = [free & below[j] & Forall([i for i in members(p) if i != j], lambda i: Not(
            below[i] & ((count[i] < count[j]) | ((count[i] == count[j]) & (i < j)))))
            for j in members(p)]
        for j in members(p):
            out[j, q] = retained[j, q] | (give[j] & Not(transferring[q]))
            count[j] = count[j] + If(give[j], 1, 0)
    return out, throws


def range_assignor(s, p):
    """RangeAssignor: ownedPartitions ignored; consecutive partitions per member in member order."""
    k = Count(*[s.in_group[j] for j in members(p)])
    out = {}
    for j in members(p):
        pos = Count(*[s.in_group[i] for i in range(j)])
        for q in parts(p):
            cases = []
            for kk in range(1, p.members + 1):
                n, extra = divmod(p.partitions, kk)
                for i in range(kk):
                    start = i * n + min(i, extra)
                    if start <= q < start + n + (1 if i < extra else 0):
                        cases.append((k == kk) & (pos == i))
            out[j, q] = s.in_group[j] & Or(*cases)
    return out


def cooperative_validation_fails(s, p, assignment):
    """ConsumerCoordinator.validateCooperativeAssignment: some partition is both revoked (in a
    member's ownedPartitions, not in its new assignment) and added (in another member's new
    assignment, not in its ownedPartitions); the leader then throws IllegalStateException."""
    return Exists(parts(p), lambda q: Exists(members(p), lambda j: s.in_group[j] & s.subscription_owned[mp(p, j, q)] & Not(assignment[j, q])) &
                  Exists(members(p), lambda k: assignment[k, q] & Not(s.subscription_owned[mp(p, k, q)])))


def leader_assignment(s, p, m):
    """ConsumerCoordinator.onLeaderElected for leader m: the chosen assignor's assignment, and the
    condition under which computing it throws (the assignor, or the cooperative validation)."""
    rng, (coop, coop_throws) = range_assignor(s, p), cooperative_sticky(s, p)
    chosen_range = s.protocol_name == RANGE
    assignment = {key: If(chosen_range, rng[key], coop[key]) for key in rng}
    # the validation runs under COOPERATIVE, skipped for the built-in cooperative-sticky assignor
    # since PR #11439 ("we've considered the generation of ownedPartition inside the assignor");
    # every COOPERATIVE member here runs cooperative-sticky, so it runs only in kafka-13406
    validated = s.rebalance_protocol[m] == COOPERATIVE
    if s.variant not in VALIDATES_BUILT_IN:
        validated = validated & (s.protocol_name != COOPERATIVE_STICKY)
    fails = validated & cooperative_validation_fails(s, p, assignment)
    if coop_throws is not False:
        fails = fails | (Not(chosen_range) & coop_throws)
    return assignment, fails


def select_protocol(s, p):
    """ClassicGroup.selectProtocol: candidates are the assignors every member supports; each
    member votes for its first candidate; most votes wins (a tie, which none of the variants'
    lists produce, goes to cooperative-sticky here)."""
    cand = {a: Forall(members(p), lambda j, a=a: Implies(s.in_group[j], list_supports(s.assignors[j], a)))
            for a in (RANGE, COOPERATIVE_STICKY)}

    def votes_for(j, a):
        ways = []
        for L, names in LIST_ASSIGNORS.items():
            if a in names:
                earlier = names[:names.index(a)]
                ways.append((s.assignors[j] == L) & cand[a] & And(*[Not(cand[b]) for b in earlier]))
        return s.in_group[j] & Or(*ways)
    votes = {a: Count(*[votes_for(j, a) for j in members(p)]) for a in cand}
    return If(cand[COOPERATIVE_STICKY] & (Not(cand[RANGE]) | (votes[COOPERATIVE_STICKY] >= votes[RANGE])),
              COOPERATIVE_STICKY, RANGE)


def remove_member(s, p, m, cond):
    """The coordinator removes member m when cond holds (LeaveGroup or a timeout): a rebalance
    starts; the last member leaving empties the group (generation + 1); a leader leaving hands
    the leadership to a remaining member at once."""
    def put(arr, i, v):
        arr[i] = If(cond, v, arr[i])
    put(s.in_group, m, False)
    put(s.awaiting_join, m, False)
    put(s.subscription_generation, m, -1)
    for q in parts(p):
        put(s.subscription_owned, mp(p, m, q), False)
        put(s.assignment, mp(p, m, q), False)
    anyone_left = Exists([j for j in members(p) if j != m], lambda j: s.in_group[j])
    s.group_state = If(cond, If(anyone_left, PR, GroupState.Empty), s.group_state)
    s.generation = If(cond & Not(anyone_left), s.generation + 1, s.generation)
    s.protocol_name = If(cond & Not(anyone_left), Assignor.none, s.protocol_name)
    # ClassicGroup.remove (GroupMetadata.remove before 4.0, the same rule): when the leader
    # leaves, leaderId becomes the first key of members.keySet().iterator(), the first remaining
    # member in the HashMap's order (member-id order, here the lowest slot), or none when the
    # group empties. Setting -1 instead let the next joiner lead (classic_group_notes.md).
    # Reads see the state before the step, so m itself is left out explicitly.
    successor = first_index([s.in_group[j] if j != m else False for j in members(p)])
    s.leader = If(cond & (s.leader == m), successor, s.leader)


# ---------------------------------------------------------------------------------------------
# Actions, in the order a rebalance runs them

@spec.action(m=members, actors=("consumer {m}", "consumer {m}"))
def StartConsumer(s, p, m):
    """The consumer process starts with the variant's assignor list."""
    s.require(s.assignors[m] == L_NONE)
    s.assignors[m] = START[s.variant]
    s.rebalance_protocol[m] = start_protocol(s.variant)


@spec.action(m=members, actors=("consumer {m}", "coordinator"))
def JoinGroup(s, p, m):
    """onJoinPrepare, then JoinGroup carrying the subscription (ownedPartitions, generation)."""
    # a member rejoins when UNJOINED, when asked to while STABLE, and (AssignmentFails) when its
    # assignment failed while COMPLETING_REBALANCE
    s.require(s.assignors[m] != L_NONE,
              (s.member_state[m] == UNJOINED) | (((s.member_state[m] == STABLE) |
                                                   (s.member_state[m] == COMPLETING)) & s.rejoin_needed[m]))
    # onJoinPrepare: no generation or member id -> onPartitionsLost; EAGER -> revoke all
    lost = (s.member_generation[m] == -1) | Not(s.has_member_id[m])
    keep = Not(lost | (s.rebalance_protocol[m] == EAGER))
    if s.variant in ONCE_PER_REBALANCE:
        # Before KAFKA-12983 (PR #10986) AbstractCoordinator.joinGroupIfNeeded ran onJoinPrepare
        # only when needsJoinPrepare was set, which only a completed rebalance did:
        # resetStateAndRejoin after a JoinGroup or SyncGroup error did not re-arm it. A member
        # that lost its generation or member id during the rebalance rejoins without declaring
        # its partitions lost: it keeps processing them and claims them in its subscription.
        keep = keep | Not(s.needs_join_prepare[m])
        s.needs_join_prepare[m] = False
    owned = {q: s.owned[mp(p, m, q)] & keep for q in parts(p)}
    for q in parts(p):
        s.owned[mp(p, m, q)] = owned[q]
        s.committed[mp(p, m, q)] = s.committed[mp(p, m, q)] & keep
    others = [j for j in members(p) if j != m]
    known = s.has_member_id[m] & s.in_group[m]
    unknown = s.has_member_id[m] & Not(s.in_group[m])
    new = Not(s.has_member_id[m])
    common = Or(*[list_supports(s.assignors[m], a) & Forall(others, lambda j, a=a: Implies(
        s.in_group[j], list_supports(s.assignors[j], a))) for a in (RANGE, COOPERATIVE_STICKY)])
    inconsistent = new & Exists(others, lambda j: s.in_group[j]) & Not(common)
    accepted = new & Not(inconsistent)
    st = s.group_state
    # ConsumerCoordinator.metadata: generation().generationId (KIP-792 as shipped); before 3.4
    # CooperativeStickyAssignor.onAssignment recorded the generation of the assignment it applied
    sent_generation = s.completed_generation[m] if p.generation_from_assignment else s.member_generation[m]
    # GroupMetadataManager.classicGroupJoinExistingMember (read at apache/kafka 0013464) answers a
    # CompletingRebalance member, or a Stable follower, at once when ClassicGroupMember.matches:
    # the protocols' metadata equal byte for byte to the stored ones. Those bytes hold a
    # generation only from subscription v2 on; without one, a follower rejoining with the same
    # ownedPartitions in a later generation sends the same bytes and no rebalance starts (the
    # spec used to start one: found by the in-process conformance check, classic_group_notes.md)
    same_metadata = Forall(parts(p), lambda q: s.subscription_owned[mp(p, m, q)] == owned[q])
    if s.variant not in NO_GENERATION_IN_SUBSCRIPTION:
        same_metadata = same_metadata & (s.subscription_generation[m] == sent_generation)
    # CompletingRebalance, or a Stable follower, with unchanged metadata: answered at once
    answered = known & same_metadata & ((st == CR) | ((st == GroupState.Stable) & (s.leader != m)))
    joins = accepted | (known & Not(answered))
    s.in_group[m] = s.in_group[m] | accepted
    s.has_member_id[m] = s.has_member_id[m] & Not(unknown) | accepted
    s.member_generation[m] = If(unknown, -1, s.member_generation[m])
    s.member_state[m] = If(joins | answered, PREPARING, UNJOINED)
    s.rejoin_needed[m] = False
    s.awaiting_join[m] = s.awaiting_join[m] | joins
    for q in parts(p):
        s.subscription_owned[mp(p, m, q)] = If(joins, owned[q], s.subscription_owned[mp(p, m, q)])
    # an answer at once stores nothing (Kafka keeps the member's protocols as they were), so the
    # stored subscription, and the generation the spec keeps beside it, is that of the last join
    # that started or joined a rebalance
    s.subscription_generation[m] = If(joins, sent_generation, s.subscription_generation[m])
    s.group_state = If(joins, PR, st)
    s.leader = If(accepted & (s.leader == -1), m, s.leader)
    s.join_response_generation[m] = If(answered, s.generation, s.join_response_generation[m])
    s.join_response_protocol[m] = If(answered, s.protocol_name, s.join_response_protocol[m])
    s.respond(If(unknown, Error.UNKNOWN_MEMBER_ID,
                 If(inconsistent, Error.INCONSISTENT_GROUP_PROTOCOL, Error.NONE)))


@spec.action(actors=("coordinator", "consumers"))
def CompleteJoin(s, p):
    """Every member rejoined: generation + 1, the protocol is voted, JoinGroup responses go out."""
    s.require(s.group_state == PR, Exists(members(p), lambda j: s.in_group[j]),
              Forall(members(p), lambda j: Implies(s.in_group[j], s.awaiting_join[j])))
    gen = s.generation + 1
    chosen = select_protocol(s, p)
    s.generation = gen
    s.group_state = CR
    s.protocol_name = chosen
    leader_joined = Exists(members(p), lambda j: (s.leader == j) & s.awaiting_join[j])
    s.leader = If(leader_joined, s.leader, first_index([s.awaiting_join[j] for j in members(p)]))
    for j in members(p):
        s.join_response_generation[j] = If(s.awaiting_join[j], gen, s.join_response_generation[j])
        s.join_response_protocol[j] = If(s.awaiting_join[j], chosen, s.join_response_protocol[j])
        s.awaiting_join[j] = False
        for q in parts(p):
            s.assignment[mp(p, j, q)] = False


@spec.action(m=members, actors=("coordinator", "consumer {m}"))
def JoinGroupResponse(s, p, m):
    """The member processes its JoinGroup response: it takes the generation and sends SyncGroup."""
    # a pending response carries a generation (>= 0): not NO_GENERATION, the field's one other value
    s.require(s.join_response_generation[m] != NO_GENERATION, s.member_state[m] == PREPARING)
    s.join_response_generation[m] = -1
    s.member_state[m] = COMPLETING
    s.member_generation[m] = s.join_response_generation[m]
    if s.variant in DYNAMIC:
        # KIP-726: the protocol follows the chosen assignor; a COOPERATIVE member that sees an
        # EAGER assignor chosen has kept partitions it can no longer trust: onPartitionsLost
        coop_chosen = s.join_response_protocol[m] == COOPERATIVE_STICKY
        lose = (s.rebalance_protocol[m] == COOPERATIVE) & Not(coop_chosen)
        for q in parts(p):
            s.owned[mp(p, m, q)] = s.owned[mp(p, m, q)] & Not(lose)
            s.committed[mp(p, m, q)] = s.committed[mp(p, m, q)] & Not(lose)
        s.rebalance_protocol[m] = If(coop_chosen, COOPERATIVE, EAGER)


@spec.action(m=members, actors=("consumer {m}", "coordinator"))
def SyncGroup(s, p, m):
    """SyncGroup (the leader's carries the assignment); on success, onJoinComplete."""
    s.require(s.member_state[m] == COMPLETING, Not(s.rejoin_needed[m]))
    known = s.has_member_id[m] & s.in_group[m]
    current = known & (s.member_generation[m] == s.generation)
    st = s.group_state
    # a follower's SyncGroup waits at the coordinator for the leader's
    s.require(Not(current & (st == CR) & (s.leader != m)))
    computed, fails = leader_assignment(s, p, m)
    # a leader whose assignment throws sends no SyncGroup (AssignmentFails)
    s.require(Not(current & (st == CR) & fails))
    unknown = Not(known)
    illegal = known & (s.member_generation[m] != s.generation)
    rebalancing = current & (st == PR)
    leader_sync = current & (st == CR)
    ok = current & ((st == CR) | (st == GroupState.Stable))
    for key, v in computed.items():
        s.assignment[mp(p, *key)] = If(leader_sync, v, s.assignment[mp(p, *key)])
    s.group_state = If(leader_sync, GroupState.Stable, st)
    mine = {q: If(leader_sync, computed[m, q], s.assignment[mp(p, m, q)]) for q in parts(p)}
    # onJoinComplete: COOPERATIVE revokes what it lost and rejoins (the follow-up rebalance)
    revoked = Exists(parts(p), lambda q: s.owned[mp(p, m, q)] & Not(mine[q]))
    for q in parts(p):
        s.owned[mp(p, m, q)] = If(ok, mine[q], s.owned[mp(p, m, q)])
        # a commit counts while its member owns the partition, and only since the partition last
        # gained an owner: two commits for one partition both count only if made while both own it
        gained = ok & mine[q] & Not(s.owned[mp(p, m, q)])
        for j in members(p):
            s.committed[mp(p, j, q)] = s.committed[mp(p, j, q)] & Not(gained) & \
                Not((j == m) & ok & Not(mine[q]))
    s.member_state[m] = If(ok, STABLE, UNJOINED)
    s.rejoin_needed[m] = If(ok, (s.rebalance_protocol[m] == COOPERATIVE) & revoked, True)
    s.completed_generation[m] = If(ok, s.member_generation[m], s.completed_generation[m])
    if s.variant in ONCE_PER_REBALANCE:
        s.needs_join_prepare[m] = s.needs_join_prepare[m] | ok   # onJoinComplete re-arms it
    # ILLEGAL_GENERATION keeps the member id (PR #11451, filed under KAFKA-13419, whose stale
    # claim is the REBALANCE_IN_PROGRESS path below); REBALANCE_IN_PROGRESS resets nothing
    # (AbstractCoordinator.SyncGroupResponseHandler since PR #12794 reverted KAFKA-13891's reset;
    # the kafka-14016 variant puts the reset back: the member rejoins without a generation, so
    # onJoinPrepare declares everything it owns lost)
    reset = unknown | illegal
    if s.variant == "kafka-14016":
        reset = reset | rebalancing
    s.member_generation[m] = If(reset, -1, s.member_generation[m])
    s.has_member_id[m] = s.has_member_id[m] & Not(unknown)
    s.respond(If(unknown, Error.UNKNOWN_MEMBER_ID, If(illegal, Error.ILLEGAL_GENERATION,
                 If(rebalancing, Error.REBALANCE_IN_PROGRESS, Error.NONE))))


@spec.action(m=members, actors=("consumer {m}", "consumer {m}"))
def AssignmentFails(s, p, m):
    """The leader's assignment throws IllegalStateException: no SyncGroup is sent, and the
    member asks to rejoin with its generation and partitions as they were."""
    # AbstractCoordinator.onLeaderElected(JoinGroupResponse) turns the exception of
    # ConsumerCoordinator.onLeaderElected (the assignor's, or validateCooperativeAssignment's)
    # into a failed join future; joinGroupIfNeeded then calls requestRejoin and, the exception not
    # being retriable, throws it out of poll(). The generation the JoinGroup response set stays,
    # the state stays COMPLETING_REBALANCE, needsJoinPrepare stays false, and the next poll()
    # sends JoinGroup again (an application that keeps polling; one that dies is a session
    # timeout). The coordinator keeps waiting for the leader's SyncGroup. As for SyncGroup, the
    # assignment is computed here from the subscriptions the coordinator stored, while the round
    # the leader was answered for is still completing.
    s.require(s.member_state[m] == COMPLETING, Not(s.rejoin_needed[m]), s.has_member_id[m],
              s.in_group[m], s.member_generation[m] == s.generation, s.group_state == CR,
              s.leader == m)
    _, fails = leader_assignment(s, p, m)
    s.require(fails)
    s.rejoin_needed[m] = True


@spec.action(m=members, actors=("consumer {m}", "consumer {m}"))
def EnforceRebalance(s, p, m):
    """A stable member asks to rejoin (Consumer.enforceRebalance, or a metadata change)."""
    s.require(s.member_state[m] == STABLE, Not(s.rejoin_needed[m]))
    s.rejoin_needed[m] = True


@spec.action(m=members, actors=("consumer {m}", "coordinator"))
def Heartbeat(s, p, m):
    """A stable member's heartbeat gets an error (a NONE answer changes nothing and is left out)."""
    s.require(s.member_state[m] == STABLE, Not(s.rejoin_needed[m]))
    known = s.has_member_id[m] & s.in_group[m]
    illegal = known & (s.member_generation[m] != s.generation)
    rebalancing = known & Not(illegal) & (s.group_state == PR)
    s.require(Not(known) | illegal | rebalancing)
    reset = Not(known) | illegal
    s.member_generation[m] = If(reset, -1, s.member_generation[m])
    s.has_member_id[m] = known
    s.member_state[m] = If(reset, UNJOINED, STABLE)
    s.rejoin_needed[m] = True
    s.respond(If(Not(known), Error.UNKNOWN_MEMBER_ID,
                 If(illegal, Error.ILLEGAL_GENERATION, Error.REBALANCE_IN_PROGRESS)))


@spec.action(m=members, actors=("consumer {m}", "coordinator"))
def CommitOffsets(s, p, m):
    """A stable member commits its positions with its generation (auto-commit, also the one
    onJoinPrepare sends before an EAGER member revokes)."""
    s.require(s.member_state[m] == STABLE,
              Exists(parts(p), lambda q: s.owned[mp(p, m, q)] & Not(s.committed[mp(p, m, q)])))
    known = s.has_member_id[m] & s.in_group[m]
    illegal = known & (s.member_generation[m] != s.generation)
    current = known & Not(illegal)
    rebalancing = current & (s.group_state == CR)
    accepted = current & Not(rebalancing)
    for q in parts(p):
        s.committed[mp(p, m, q)] = s.committed[mp(p, m, q)] | (accepted & s.owned[mp(p, m, q)])
    reset = Not(known) | illegal
    s.member_generation[m] = If(reset, -1, s.member_generation[m])
    s.has_member_id[m] = known
    s.member_state[m] = If(reset, UNJOINED, STABLE)
    s.rejoin_needed[m] = s.rejoin_needed[m] | Not(accepted)
    s.respond(If(Not(known), Error.UNKNOWN_MEMBER_ID, If(illegal, Error.ILLEGAL_GENERATION,
                 If(rebalancing, Error.REBALANCE_IN_PROGRESS, Error.NONE))))


@spec.action(m=members, actors=("coordinator", "coordinator"))
def SessionTimeout(s, p, m):
    """The coordinator times the member out (session, rebalance or pending-sync timeout); the
    member falls out of the group and learns so only from its next request."""
    s.require(p.timeouts == 1, s.in_group[m], Not(s.awaiting_join[m]))
    remove_member(s, p, m, True)


@spec.action(m=members, to=lambda p: [L for L in AssignorList.values if L != L_NONE],
             actors=("operator", "consumer {m}"))
def Bounce(s, p, m, to):
    """Rolling upgrade: the consumer closes (revokes everything, LeaveGroup) and restarts with
    its next assignor list."""
    edges = UPGRADE.get(s.variant, {})
    sources = [frm for frm, nxt in edges.items() if nxt == to]
    s.require(Or(*[s.assignors[m] == frm for frm in sources]))
    for q in parts(p):
        s.owned[mp(p, m, q)] = False
        s.committed[mp(p, m, q)] = False
    remove_member(s, p, m, s.in_group[m] & s.has_member_id[m])
    s.assignors[m] = to
    s.rebalance_protocol[m] = EAGER if s.variant in DYNAMIC else fixed_protocol(to)
    s.member_state[m] = UNJOINED
    s.member_generation[m] = -1
    s.has_member_id[m] = False
    s.rejoin_needed[m] = False
    s.join_response_generation[m] = -1
    s.completed_generation[m] = -1
    if s.variant in ONCE_PER_REBALANCE:
        s.needs_join_prepare[m] = True                          # a new consumer


# ---------------------------------------------------------------------------------------------
# Variants

# Where a sometimes property is recorded as not reached (violates=[...] of a sometimes means
# "known not reached"), and why: measured by the search at each variant's parameters.
STALE_CLAIM_UNREACHED = (
    "not reached, so stale-claim-never-wins holds vacuously here: with this client a member that "
    "lost its member id or generation gives its partitions up as lost in onJoinPrepare "
    "(ConsumerCoordinator.onJoinPrepare) before it rejoins, so it claims nothing, and a member "
    "whose SyncGroup is answered REBALANCE_IN_PROGRESS keeps its generation (KAFKA-13891), so no "
    "claim is older than another (the likely reason, not traced further). Measured: not reached "
    "at the default parameters, nor at members=2, max_generation=2 with timeouts=1. The round is "
    "reached with the client before KAFKA-12983 (kafka-12983 and pre-kip792-kafka-12983, 17 "
    "steps) and with the older subscription generation (kafka-14639, 36 steps)")
EAGER_REVOKES_FIRST = (
    "not reached: every consumer is EAGER and revokes everything it owns in onJoinPrepare before "
    "it rejoins, so none owns a partition while its generation is behind the group's")

spec.variant("kip792", "every consumer on [cooperative-sticky] (COOPERATIVE); the generation in "
             "the subscription: the higher generation keeps a partition, equal ones both lose it",
             default=True, violates=["stale-claim-at-sync"],
             findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED})
spec.variant("pre-kip792", "no generation: ownedPartitions are trusted as sent (the first claim "
             "read keeps a partition claimed twice)", violates=["stale-claim-at-sync"],
             findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED})
spec.variant("double-bounce", "the KIP-429 upgrade: [range] -> [cooperative-sticky, range] -> "
             "[cooperative-sticky], one rolling bounce each, with the kip792 claim rule",
             violates=["stale-claim-at-sync"], findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED})
spec.variant("single-bounce", "one rolling bounce [range] -> [cooperative-sticky], protocol "
             "fixed at start-up", violates=["stale-claim-at-sync"],
             findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED})
# lemmas of the other variants' proofs that KIP-726's dynamic selection breaks
KIP726_LEMMAS = ["assignment-respects-owners", "joined-subscription-is-owned",
                 "protocol-fixed-by-assignors", "range-round-members-own-nothing"]
spec.variant("kip726-dynamic", "one rolling bounce [range] -> [cooperative-sticky, range] with "
             "KIP-726's dynamic protocol selection (onPartitionsLost when an EAGER assignor is "
             "chosen)", violates=["single-owner", "revoke-before-assign",
                                  "revoked-before-reassigned", "stale-claim-at-sync"] + KIP726_LEMMAS,
             findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED,
                 "protocol-fixed-by-assignors": "KIP-726 by design: a [cooperative-sticky, range] "
                 "consumer turns COOPERATIVE once the group chose cooperative-sticky",
                 "range-round-members-own-nothing": "a COOPERATIVE member keeps its partitions "
                 "into a round in which range is chosen (an old [range] member joined): the "
                 "revoke-before-assign finding, seen from the members",
                 "assignment-respects-owners": "the range round gives a COOPERATIVE member's "
                 "partition to another member while its owner keeps it until it processes its "
                 "JoinGroup response: the lemma form of the single-owner violation",
                 "joined-subscription-is-owned": "a COOPERATIVE member that kept its partitions "
                 "calls onPartitionsLost when it sees range chosen, so during CompletingRebalance "
                 "it owns nothing while its subscription still claims what it kept",
                 "revoke-before-assign": "a COOPERATIVE member that kept its partitions joins a "
                 "round in which range is chosen (an old [range] member joined); range ignores "
                 "ownedPartitions and hands them to another member in that same round, as the "
                 "KIP text says it may",
                 "revoked-before-reassigned": "the range round hands a COOPERATIVE member's "
                 "partition to another member while its owner, which has not processed its "
                 "JoinGroup response yet, still holds it",
                 "single-owner": "with three members a follower processes its JoinGroup response "
                 "(and so calls onPartitionsLost) after another member already applied the range "
                 "assignment that gave it the follower's partition: two owners for a while; "
                 "no-double-commit still holds, because a member that is rebalancing cannot "
                 "commit (generationIfStable), which is KIP-726's own argument"})
spec.variant("shipped-default", "every consumer on Kafka's default list [range, "
             "cooperative-sticky], protocol fixed at start-up (so EAGER)",
             violates=["stale-claim-at-sync", "owner-left-behind"],
             findings={"stale-claim-at-sync": STALE_CLAIM_UNREACHED, "owner-left-behind": EAGER_REVOKES_FIRST})
spec.variant("kip726-downgrade", "every consumer on [cooperative-sticky, range] with KIP-726's "
             "dynamic protocol selection; one may restart with [range] alone (a downgrade, or a "
             "consumer started with only RangeAssignor)", params={"max_generation": 3},
             violates=["single-owner", "revoke-before-assign", "revoked-before-reassigned",
                       "stale-claim-at-sync"] + KIP726_LEMMAS,
             findings={
                 "stale-claim-at-sync": STALE_CLAIM_UNREACHED,
                 "single-owner": "the group runs COOPERATIVE under cooperative-sticky; a member "
                 "restarts with [range] alone, range is chosen, and a member still holding the "
                 "partitions it kept has not yet processed its JoinGroup response (and so not yet "
                 "called onPartitionsLost) when another member applies them",
                 "revoke-before-assign": "range, chosen once the downgraded member rejoins, "
                 "ignores the ownedPartitions the COOPERATIVE members kept and hands them out in "
                 "the same round",
                 "revoked-before-reassigned": "the range assignment gives a partition to one "
                 "member while the COOPERATIVE member that kept it still holds it"})

# what every variant checked with timeouts=1 records for the member the coordinator timed out
TIMED_OUT_OWNER = {
    "single-owner": "timeouts=1: a member the coordinator timed out keeps its partitions until "
    "its next request fails (every variant, see the notes)",
    "revoked-before-reassigned": "timeouts=1: the timed-out member's partitions are reassigned "
    "while it still holds them (every variant)",
    "assignment-respects-owners": "the lemma form of the timed-out member's double ownership"}

spec.variant("pre-kip792-kafka-12983", "KIP-792's motivating problem: pre-kip792's claim rule "
             "with the client before KAFKA-12983, whose member that fell out of the group "
             "rejoins claiming the partitions it still holds", params={"timeouts": 1, "members": 2},
             violates=["single-owner", "revoked-before-reassigned", "assignment-respects-owners",
                       "no-double-commit", "stale-claim-never-wins"],
             findings={
                 "stale-claim-never-wins": "a member whose JoinGroup is answered "
                 "UNKNOWN_MEMBER_ID rejoins without onJoinPrepare, claiming with no generation the "
                 "partitions the group gave another member; without a generation the assignor "
                 "keeps the first claim it reads, the stale one, and takes the partition from its "
                 "current owner: kafka-12983 (the kip792 rule, same client) holds this property",
                 "no-double-commit": "as in kafka-12983: the stale member commits for partitions "
                 "that another member owned and committed meanwhile",
                 **TIMED_OUT_OWNER})
# Known bugs: each variant is kip792 with that one fix undone
spec.variant("kafka-12983", "onJoinPrepare runs once per rebalance: a member that loses its "
             "member id or generation during the rebalance rejoins still holding, and claiming, "
             "its partitions", params={"timeouts": 1, "members": 2},
             violates=["single-owner", "revoked-before-reassigned", "assignment-respects-owners",
                       "no-double-commit"],
             findings={
                 "no-double-commit": "a member timed out while stable; its JoinGroup is answered "
                 "UNKNOWN_MEMBER_ID and it rejoins without onJoinPrepare, still holding and "
                 "claiming its partitions, which the group meanwhile gave another member who "
                 "committed for them; its claim is the only one (the other member timed out in "
                 "turn), so the assignor keeps it and it commits from its stale position: kip792 "
                 "at the same parameters holds this property",
                 **TIMED_OUT_OWNER})
spec.variant("kafka-14639", "the claim rule before PR #13550: only claims at the group's "
             "highest subscription generation count, so a sole claim from a member that missed "
             "a SyncGroup is dropped and its partition handed to another member at once; checked "
             "with the subscription generation of the clients of that time",
             params={"generation_from_assignment": 1},
             violates=["revoke-before-assign", "revoked-before-reassigned", "single-owner",
                       "assignment-respects-owners"],
             findings={
                 "revoke-before-assign": "a member's delayed SyncGroup is answered "
                 "REBALANCE_IN_PROGRESS; it rejoins still holding a partition, with the generation "
                 "of the last assignment it applied, older than the others'; the rule drops its "
                 "claim and cooperative-sticky gives the partition to another member in the same "
                 "round: kip792 at the same parameters holds this property",
                 "revoked-before-reassigned": "the assignment hands the partition to a member while "
                 "the one that missed the SyncGroup still holds it",
                 "single-owner": "the new owner applies the assignment before the old one learns "
                 "it lost the partition",
                 "assignment-respects-owners": "the lemma form of the double ownership"})
spec.variant("kafka-14016", "KAFKA-13891's reset put back: a SyncGroup answered "
             "REBALANCE_IN_PROGRESS resets the generation, so the member declares everything it "
             "owns lost at its next JoinGroup",
             violates=["cooperative-keeps-owned", "owners-have-a-generation", "stale-claim-at-sync"],
             findings={
                 "stale-claim-at-sync": STALE_CLAIM_UNREACHED,
                 "owners-have-a-generation": "the lemma form: the late member still owns its "
                 "partitions after the reset took its generation",
                 "cooperative-keeps-owned": "a member's SyncGroup arrives after the next rebalance "
                 "began; the reset generation makes onJoinPrepare call onPartitionsLost, so a "
                 "COOPERATIVE member still in the group gives up every partition (the revocations "
                 "KAFKA-14016 reported)"})

spec.variant("kafka-12984", "PR #10985 undone in both its places (no generation in "
             "CooperativeStickyAssignor's userData, and a partition claimed by two members kept "
             "by both, so constrainedAssign throws IllegalStateException), on the client whose "
             "double claims KAFKA-12984 was filed for: pre-kip792-kafka-12983 (no generation in "
             "the subscription, onJoinPrepare once per rebalance) with that one fix undone; with "
             "today's client no two claims reach the assignor",
             params={"timeouts": 1, "members": 2},
             violates=["single-owner", "revoked-before-reassigned", "assignment-respects-owners",
                       "no-double-commit", "stale-claim-never-wins", "rebalance-completes"],
             findings={
                 "rebalance-completes": "member 0 is timed out holding both partitions; its "
                 "JoinGroup is answered UNKNOWN_MEMBER_ID and its retry, without onJoinPrepare, "
                 "claims both again while member 1 claims them too; with no generation both "
                 "claims count, both members keep the partitions, and constrainedAssign throws "
                 "IllegalStateException. The leader rejoins with the same subscription bytes, is "
                 "answered at once with the same members, and throws again for ever: the group "
                 "stays CompletingRebalance (pre-kip792-kafka-12983, the same client with the "
                 "fix, holds this property)",
                 "stale-claim-never-wins": "as in pre-kip792-kafka-12983, in the rounds where "
                 "the double claim does not reach the assignor's throw",
                 "no-double-commit": "as in pre-kip792-kafka-12983 (the client before "
                 "KAFKA-12983)",
                 **TIMED_OUT_OWNER})
spec.variant("kafka-13406", "validateCooperativeAssignment run on the built-in cooperative-sticky "
             "assignment too (PR #11439 undone), with the assignor and subscription of its time: "
             "kafka-14639 (claims below the top generation dropped, the generation of the last "
             "assignment in the userData) with that one fix undone; with today's claim rule the "
             "validation never fires (revoke-before-assign holds)",
             params={"generation_from_assignment": 1},
             violates=["stale-claim-at-sync", "rebalance-completes"],
             findings={
                 "rebalance-completes": "KAFKA-13419's interleaving: member 2's SyncGroup is "
                 "answered REBALANCE_IN_PROGRESS; it rejoins still claiming the partition it "
                 "holds, with the generation of the last assignment it applied, older than the "
                 "others'; the rule drops the claim, cooperative-sticky gives the partition to "
                 "another member, and validateCooperativeAssignment finds it revoked and added in "
                 "one round and throws. The leader rejoins with unchanged subscription bytes, is "
                 "answered at once, and throws again for ever (kafka-14639, the same rule without "
                 "the validation, holds this property and hands the partition over instead)",
                 "stale-claim-at-sync": "not reached: the validation throws at the first round "
                 "that would revoke and add a partition, and the rounds that reach two claims of "
                 "different generations in kafka-14639 pass through such a round first"})

# The leader's assignment throws only where a fix is undone (tests/test_classic_group.py,
# test_assignor_never_fails_today): declared, so a first run counts it as expected, and a step
# it ever takes in these variants is reported as a stale declaration.
spec.idle(["AssignmentFails"], "today's assignor never throws: one claim wins each partition "
          "(AbstractStickyAssignor with the generation in the subscription, PR #10985), and "
          "validateCooperativeAssignment is skipped for the built-in cooperative-sticky assignor "
          "(ConsumerCoordinator.onLeaderElected, PR #11439)",
          variants=[v for v in spec.variants if v not in ("kafka-12984", "kafka-13406")])

spec.known_bug(
    "KAFKA-12983", broke="onJoinPrepare ran once per rebalance, so a member that lost its member "
    "id during the rebalance rejoined still holding and claiming its partitions, which another "
    "member had been given and committed for",
    fix="PR #10986 (needsJoinPrepare re-armed by resetStateAndRejoin)",
    code="AbstractCoordinator.joinGroupIfNeeded / ConsumerCoordinator.onJoinPrepare",
    variant="kafka-12983", property="no-double-commit")
spec.known_bug(
    "KAFKA-14639", broke="the sticky assignors honoured only claims at the highest generation, so "
    "a member that missed a SyncGroup lost its claim and the partition it still held was revoked "
    "and assigned to another member in the same rebalance",
    fix="PR #13550 (highest-generation claim per partition)",
    code="AbstractStickyAssignor.allSubscriptionsEqual",
    variant="kafka-14639", property="revoke-before-assign")
spec.known_bug(
    "KAFKA-14016", broke="KAFKA-13891 reset the generation on a SyncGroup REBALANCE_IN_PROGRESS, "
    "so a late but current COOPERATIVE member revoked all its partitions at its next JoinGroup",
    fix="PR #12794 (reverts c23d60d, KAFKA-13891's PR #12140)",
    code="AbstractCoordinator.SyncGroupResponseHandler.handle",
    variant="kafka-14016", property="cooperative-keeps-owned")
spec.known_bug(
    "KAFKA-12984", broke="CooperativeStickyAssignor trusted two claims on one partition (no "
    "generation in its userData), both claimants kept it, and constrainedAssign threw "
    "IllegalStateException: the leader never sent SyncGroup and the group stayed "
    "CompletingRebalance",
    fix="PR #10985 (generation back in the cooperative userData; same-generation claims "
    "invalidated)",
    code="AbstractStickyAssignor.allSubscriptionsEqual / constrainedAssign; "
    "AbstractCoordinator.joinGroupIfNeeded",
    variant="kafka-12984", property="rebalance-completes")
spec.known_bug(
    "KAFKA-13406", broke="the leader validated the built-in cooperative-sticky assignment too; "
    "an out-of-date claim made the assignment revoke and add one partition in a round, the "
    "validation threw, and the rebalance got stuck",
    fix="PR #11439 (validateCooperativeAssignment skipped for the built-in assignor)",
    code="ConsumerCoordinator.onLeaderElected / validateCooperativeAssignment",
    variant="kafka-13406", property="rebalance-completes")
spec.known_bug(
    "KAFKA-13419", broke="a member whose SyncGroup was answered REBALANCE_IN_PROGRESS rejoined "
    "with out-of-date ownedPartitions (the assignment it missed had moved one away), which failed "
    "the leader's cooperative validation: the root cause of KAFKA-13406's stuck rebalance, "
    "whose lasso in variant kafka-13406 runs this interleaving",
    fix="none of its own: PR #11451 as merged only stopped ILLEGAL_GENERATION from resetting the "
    "member id (a consumer slot here has one member id, so that change is not expressible); the "
    "reset on REBALANCE_IN_PROGRESS it meant came with KAFKA-13891 and was reverted by "
    "KAFKA-14016; the stale claim is still sent today and made harmless by PR #11439 and "
    "PR #13550 (scenario kafka_13419_missed_sync)",
    code="AbstractCoordinator.SyncGroupResponseHandler.handle",
    variant="kafka-13406", property="rebalance-completes")
spec.known_bug(
    "KAFKA-14196", broke="an EAGER member's asynchronous auto-commit in onJoinPrepare could land "
    "after the partition's new owner had fetched the committed offset, so records were consumed "
    "twice",
    fix="PR #12603 (onJoinPrepare waits for the commit and stops fetching revoked partitions)",
    code="ConsumerCoordinator.onJoinPrepare",
    not_expressible="fetch positions and committed offsets as values, and a commit request in "
    "flight across the rebalance; commits here are a flag per member and partition")


# ---------------------------------------------------------------------------------------------
# Properties

@spec.invariant("single-owner")
def single_owner(s, p):
    """No partition is owned by two consumers at once."""
    return Forall(parts(p), lambda q: Count(*[s.owned[mp(p, j, q)] for j in members(p)]) <= 1)


@spec.transition_property("revoke-before-assign", actions=["SyncGroup"])
def revoke_before_assign(pre, post, action, args, outcome, p):
    """Under COOPERATIVE, no partition is revoked from one member and assigned to another in the same round."""
    round_done = (pre.group_state == CR) & (post.group_state == GroupState.Stable)

    def revoked(j, q):
        return pre.in_group[j] & pre.subscription_owned[mp(p, j, q)] & Not(post.assignment[mp(p, j, q)])

    def added(j, q):
        return post.assignment[mp(p, j, q)] & Not(pre.subscription_owned[mp(p, j, q)])
    both = Exists(parts(p), lambda q: Exists(members(p), lambda a: revoked(a, q)) &
                  Exists(members(p), lambda b: added(b, q)))
    return Implies(round_done, Not(both))


@spec.invariant("revoked-before-reassigned")
def revoked_before_reassigned(s, p):
    """A partition is never handed to a new owner while the consumer that holds it has not revoked it."""
    # the owner's view of revoke-before-assign: the stored assignment (what SyncGroup hands out)
    # against what each consumer's SubscriptionState still holds
    return Forall(parts(p), lambda q: Forall(members(p), lambda j: Forall(
        [k for k in members(p) if k != j], lambda k: Not(
            s.assignment[mp(p, j, q)] & s.owned[mp(p, k, q)]))))


@spec.transition_property("cooperative-keeps-owned", actions=["JoinGroup"])
def cooperative_keeps_owned(pre, post, action, args, outcome, p):
    """A COOPERATIVE consumer that is still a member of the group keeps the partitions it owns when it rejoins."""
    # KIP-429's promise: only an assignment that moves a partition away takes it from a member
    # the coordinator still counts; onPartitionsLost is for members that fell out of the group
    m = args["m"]
    member = pre.in_group[m] & (pre.rebalance_protocol[m] == COOPERATIVE)
    return Implies(member, Forall(parts(p), lambda q: Implies(
        pre.owned[mp(p, m, q)], post.owned[mp(p, m, q)])))


@spec.transition_property("stale-claim-never-wins", actions=["SyncGroup"])
def stale_claim_never_wins(pre, post, action, args, outcome, p):
    """A partition two members claim is never assigned to the one whose claim carries the older generation."""
    # KIP-792's purpose: the assignor recognises out-of-date ownedPartitions (a member that fell
    # out of a generation and still claims what it held) and never trusts them over current ones
    round_done = (pre.group_state == CR) & (post.group_state == GroupState.Stable)

    def claims(j, q):
        return pre.in_group[j] & pre.subscription_owned[mp(p, j, q)]
    stale_wins = Exists(parts(p), lambda q: Exists(members(p), lambda j: Exists(
        [k for k in members(p) if k != j], lambda k: claims(j, q) & claims(k, q) &
        (pre.subscription_generation[j] < pre.subscription_generation[k]) &
        post.assignment[mp(p, j, q)])))
    return Implies(round_done, Not(stale_wins))


# The scenarios the ownership properties judge (sometimes: a "holds" above is not vacuous)

@spec.sometimes("stale-claim-at-sync")
def stale_claim_at_sync(s, p):
    """While the leader's assignment is awaited, two members of the group claim one partition and one claim carries an older generation (the round stale-claim-never-wins judges)."""
    return (s.group_state == CR) & Exists(parts(p), lambda q: Exists(members(p), lambda j: Exists(
        [k for k in members(p) if k != j], lambda k:
        s.in_group[j] & s.subscription_owned[mp(p, j, q)] & s.in_group[k] &
        s.subscription_owned[mp(p, k, q)] &
        (s.subscription_generation[j] < s.subscription_generation[k]))))


@spec.sometimes("owner-left-behind")
def owner_left_behind(s, p):
    """A consumer owns a partition while its generation is behind the group's (the window in which single-owner and revoked-before-reassigned can break)."""
    return Exists(members(p), lambda j: (s.member_generation[j] != NO_GENERATION) &
                  (s.member_generation[j] < s.generation) &
                  Exists(parts(p), lambda q: s.owned[mp(p, j, q)]))


@spec.invariant("no-double-commit")
def no_double_commit(s, p):
    """No two members commit offsets for the same partition while both believe they own it."""
    return Forall(parts(p), lambda q: Count(*[s.committed[mp(p, j, q)] for j in members(p)]) <= 1)


@spec.transition_property("generation-monotonic",
                          actions=["JoinGroup", "SyncGroup", "Heartbeat", "CommitOffsets"])
def generation_monotonic(pre, post, action, args, outcome, p):
    """A member never acts on a generation older than one it already completed."""
    m = args["m"]
    g = pre.member_generation[m]
    return (g == -1) | (g >= pre.completed_generation[m])


# The environment: what is done to the group rather than by the protocol. An application or a
# metadata change asks a member to rejoin (EnforceRebalance), the coordinator times a member out
# (SessionTimeout), an operator restarts a consumer with its next assignor list (Bounce). Every
# other step is the protocol's own and is never cut for the bound: StartConsumer happens once per
# consumer (the state bounds it) and is fair, like the JoinGroup/SyncGroup round it begins.
spec.environment_actions(
    ["EnforceRebalance", "SessionTimeout", "Bounce"],
    bound=2, cap="max_generation",
    why="a rejoin request, a coordinator timeout and a rolling restart are done to the group; "
        "starting, joining, syncing, heartbeats and commits are the protocol")


@spec.leads_to("rebalance-completes",
               fair=["StartConsumer", "JoinGroup", "CompleteJoin", "JoinGroupResponse",
                     "SyncGroup", "AssignmentFails", "Heartbeat"])
def rebalance_completes(s, p):
    """Once a rebalance starts, the group eventually becomes Stable with every member stable and none needing a follow-up rebalance."""
    done = (s.group_state == GroupState.Stable) & Forall(members(p), lambda j: Implies(
        s.in_group[j], (s.member_state[j] == STABLE) & Not(s.rejoin_needed[j])))
    return s.group_state == PR, done


# ---------------------------------------------------------------------------------------------
# Lemmas: auxiliary invariants that `kcheck prove` proves first and then assumes (see the notes'
# "Proofs" section for what each property needs)

@spec.invariant("generations-not-ahead", lemma=True)
def generations_not_ahead(s, p):
    """No member holds, has completed or is about to receive a generation newer than the coordinator's."""
    return Forall(members(p), lambda j: And(
        s.member_generation[j] <= s.generation, s.completed_generation[j] <= s.generation,
        s.join_response_generation[j] <= s.generation))


@spec.invariant("member-generation-not-behind", lemma=True)
def member_generation_not_behind(s, p):
    """A member's generation, and the one its pending JoinGroup response carries, are never older than the last generation it completed."""
    return Forall(members(p), lambda j: And(
        (s.member_generation[j] == -1) | (s.member_generation[j] >= s.completed_generation[j]),
        (s.join_response_generation[j] == -1) |
        (s.join_response_generation[j] >= s.completed_generation[j])))


@spec.invariant("committed-while-owned", lemma=True)
def committed_while_owned(s, p):
    """A member's commit for a partition counts only while it owns the partition."""
    return Forall(members(p), lambda j: Forall(parts(p), lambda q: Implies(
        s.committed[mp(p, j, q)], s.owned[mp(p, j, q)])))


@spec.invariant("joining-member-is-preparing", lemma=True)
def joining_member_is_preparing(s, p):
    """A member the coordinator counts as joining (a known member), or whose JoinGroup response is pending (never both), is preparing a rebalance."""
    return Forall(members(p), lambda j: And(
        Implies(s.awaiting_join[j] | (s.join_response_generation[j] != -1),
                s.member_state[j] == PREPARING),
        Not(s.awaiting_join[j] & (s.join_response_generation[j] != -1)),
        Implies(s.awaiting_join[j], s.in_group[j] & s.has_member_id[j])))



@spec.invariant("members-have-started", lemma=True)
def members_have_started(s, p):
    """Every member the coordinator knows runs a started consumer with an assignor list."""
    return Forall(members(p), lambda j: Implies(s.in_group[j], s.assignors[j] != L_NONE))


@spec.invariant("owners-are-members", lemma=True)
def owners_are_members(s, p):
    """Without coordinator timeouts, a consumer that owns a partition is a member of the group."""
    if p.timeouts:
        return TRUE   # a timed-out member keeps its partitions until it learns it was removed
    return Forall(members(p), lambda j: Forall(parts(p), lambda q: Implies(
        s.owned[mp(p, j, q)], s.in_group[j])))


@spec.invariant("synced-members-are-current", lemma=True)
def synced_members_are_current(s, p):
    """Without coordinator timeouts, a member the coordinator counts holds the coordinator's generation while it is stable or completing a rebalance, and so does its pending JoinGroup response."""
    if p.timeouts:
        return TRUE   # a timed-out member keeps its generation while the group moves on
    return Forall(members(p), lambda j: Implies(
        s.in_group[j] & ((s.member_state[j] == STABLE) | (s.member_state[j] == COMPLETING)),
        s.member_generation[j] == s.generation) & Implies(
        s.in_group[j] & (s.join_response_generation[j] != -1),
        s.join_response_generation[j] == s.generation))


@spec.invariant("owners-have-a-generation", lemma=True)
def owners_have_a_generation(s, p):
    """Without coordinator timeouts, a consumer that owns a partition holds a generation and a member id (so a COOPERATIVE one keeps what it owns when it rejoins)."""
    if p.timeouts:
        return TRUE   # a timed-out member loses its generation at its next request, still owning
    return Forall(members(p), lambda j: Implies(
        Exists(parts(p), lambda q: s.owned[mp(p, j, q)]),
        (s.member_generation[j] != -1) & s.has_member_id[j]))


@spec.invariant("assignment-exclusive", lemma=True)
def assignment_exclusive(s, p):
    """The assignment the leader stored gives each partition to one member at most."""
    return Forall(parts(p), lambda q: Count(*[s.assignment[mp(p, j, q)] for j in members(p)]) <= 1)


@spec.invariant("assignment-respects-owners", lemma=True)
def assignment_respects_owners(s, p):
    """No two consumers own a partition, and the stored assignment never gives a member a partition that another consumer still owns (the lemma form of single-owner that no-double-commit's proof rests on)."""
    return Forall(parts(p), lambda q: Forall(members(p), lambda j: Forall(
        [k for k in members(p) if k != j], lambda k: Not(
            (s.assignment[mp(p, j, q)] | s.owned[mp(p, j, q)]) & s.owned[mp(p, k, q)]))))


@spec.invariant("joined-subscription-is-owned", lemma=True)
def joined_subscription_is_owned(s, p):
    """A member that joined the rebalance in progress, and every member while the group completes a rebalance, claims in its subscription exactly the partitions it owns."""
    return Forall(members(p), lambda j: Implies(
        s.awaiting_join[j] | ((s.group_state == CR) & s.in_group[j]),
        Forall(parts(p), lambda q: s.subscription_owned[mp(p, j, q)] == s.owned[mp(p, j, q)])))


@spec.invariant("member-ids-match-the-group", lemma=True)
def member_ids_match_the_group(s, p):
    """Without coordinator timeouts, a consumer holds a member id exactly while the coordinator counts it in the group."""
    if p.timeouts:
        return TRUE   # a timed-out member keeps its id until its next request is refused
    return Forall(members(p), lambda j: s.has_member_id[j] == s.in_group[j])


@spec.invariant("protocol-fixed-by-assignors", lemma=True)
def protocol_fixed_by_assignors(s, p):
    """A started consumer's rebalance protocol is the one its assignor list fixes at start-up: COOPERATIVE exactly for [cooperative-sticky] alone."""
    return Forall(members(p), lambda j: (s.assignors[j] == L_NONE) |
                  ((s.rebalance_protocol[j] == COOPERATIVE) == (s.assignors[j] == L_COOP)))


@spec.invariant("eager-member-revoked-before-joining", lemma=True)
def eager_member_revoked_before_joining(s, p):
    """An EAGER member owns nothing from its JoinGroup until the round completes (onJoinPrepare revoked everything)."""
    return Forall(members(p), lambda j: Implies(
        (s.rebalance_protocol[j] == EAGER) & (s.awaiting_join[j] | ((s.group_state == CR) & s.in_group[j])),
        Forall(parts(p), lambda q: Not(s.owned[mp(p, j, q)]))))


@spec.invariant("range-round-members-own-nothing", lemma=True)
def range_round_members_own_nothing(s, p):
    """While the group completes a round in which it chose range, no member owns a partition (range ignores ownedPartitions, so this is what makes it safe)."""
    return Implies((s.group_state == CR) & (s.protocol_name == RANGE), Forall(
        members(p), lambda j: Forall(parts(p), lambda q: Not(s.owned[mp(p, j, q)]))))


@spec.invariant("members-share-an-assignor", lemma=True)
def members_share_an_assignor(s, p):
    """Some assignor is supported by every member of the group (a consumer that shares none is refused with INCONSISTENT_GROUP_PROTOCOL)."""
    return Or(*[Forall(members(p), lambda j, a=a: Implies(s.in_group[j], list_supports(s.assignors[j], a)))
                for a in (RANGE, COOPERATIVE_STICKY)])

