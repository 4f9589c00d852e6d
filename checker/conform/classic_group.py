"""The classic_group spec's adapter: the classic protocol's JoinGroup / SyncGroup / Heartbeat /
OffsetCommit / LeaveGroup on a real group coordinator, each consumer of the spec played by the
driver (ConsumerCoordinator and AbstractCoordinator as spec/classic_group.py models them), and
what Kafka shows after each step (the responses, DescribeGroups) compared with the spec.

How the spec's steps become requests:

- JoinGroup(m): onJoinPrepare in the driver's client (owned partitions kept, revoked or lost as
  the member's protocol and generation say), then JoinGroup v9 with the member's assignor list,
  each protocol's metadata the ConsumerProtocol subscription (its version prefix, then the
  struct: topics, ownedPartitions and, with KIP-792, the generation). A member without an id
  first gets MEMBER_ID_REQUIRED and joins again with the id (KIP-394): one spec step, two
  requests. The request is sent on the member's own connection and, when the coordinator parks
  it until the join phase ends, its answer is awaited later: the spec's CompleteJoin.
- CompleteJoin: nothing is sent. The coordinator ends the join phase by itself once every member
  has rejoined (GroupMetadataManager.maybeCompleteJoinPhase; for a new group after
  group.initial.rebalance.delay.ms, which the adapter sets so that every first member of a trace
  joins before it fires); the driver waits for the parked answers.
- JoinGroupResponse(m): the member takes the answer it received (generation, protocol, leader).
- SyncGroup(m): SyncGroup v5; the leader's carries the assignment its assignor computes from the
  subscriptions in its JoinGroup answer. The assignor is client-side, out of a broker's reach: the
  driver runs the spec's own assignor (the trace variant's claim rule) on what Kafka told the
  leader, so Kafka is asked to store and hand out exactly the spec's assignment.
- Heartbeat(m), CommitOffsets(m): Heartbeat v4, OffsetCommit v9 with the member's generation.
- SessionTimeout(m): LeaveGroup v5 for the member on the admin connection: the coordinator removes
  a member the same way for a leave and for an expired session (removeMemberAndUpdateClassicGroup),
  and the member learns it only from its next request, as in the spec; the timer itself is not
  exercised.
- Bounce(m, to): the consumer closes (LeaveGroup from its own id) and restarts with the new list.
- StartConsumer, EnforceRebalance, AssignmentFails: the driver's client only (a failed leader
  sends no SyncGroup; its rejoin is the next JoinGroup).

Compared after each request: the response's error (the spec's outcome), the generation, the chosen
protocol and the leader from the join answers, the subscriptions the coordinator stored as the
leader's answer hands them over, the partitions a SyncGroup answer assigns, and DescribeGroups'
group state and members (the spec's group_state and in_group). Not visible: a member's
awaiting-join flag (a ghost of the coordinator's records).
"""
from __future__ import annotations

import concurrent.futures
import io
import socket
import time

from kcheck.conform.driver import (Absent, Adapter, NotDrivable, SpecStep, TimerFired, TraceRun,
                                   register_adapter)
from kcheck.conform.broker import generous
from kcheck.conform.wire import error_name, ms
from kcheck.layout import initial_words, layout_of

SESSION_TIMEOUT_MS = 60_000      # no session expires during a trace unasked
REBALANCE_TIMEOUT_MS = 60_000    # nor a rebalance
INITIAL_DELAY_MS = 1_500         # group.initial.rebalance.delay.ms: every first member joins first
ANSWERED_AT_ONCE_S = 0.5         # a JoinGroup the coordinator answers at once does so within this
JOIN_WAIT_S = 20.0               # bound on waiting for the join phase to end (broker.generous)
PENDING_SESSION_TIMEOUT_MS = 300_000   # the pending member that holds join phases open outlives a trace
PROTOCOL_TYPE = "consumer"

REQUESTS = {
    "JoinGroup": "onJoinPrepare, then JoinGroup v9 (MEMBER_ID_REQUIRED and again for a new member)",
    "SyncGroup": "SyncGroup v5 (the leader's with the spec assignor's assignment)",
    "Heartbeat": "Heartbeat v4 with the member's generation",
    "CommitOffsets": "OffsetCommit v9 of the member's owned partitions with its generation",
    "SessionTimeout": "LeaveGroup v5 for the member from the admin connection (same removal path)",
    "Bounce": "LeaveGroup v5 from the member's id, then a new consumer with the next assignor list",
    "CompleteJoin": "nothing sent: the driver awaits the parked JoinGroup answers",
}
CLIENT_SIDE = {
    "StartConsumer": "the consumer starts with the variant's assignor list",
    "JoinGroupResponse": "the member takes the JoinGroup answer it already received",
    "EnforceRebalance": "the member asks to rejoin (client state)",
    # the leader's assignor or cooperative validation throws in the client: nothing is sent, and
    # what a broker shows of it is the next step, the leader's JoinGroup answered at once in
    # CompletingRebalance with the same generation and members (compared as any JoinGroup)
    "AssignmentFails": "the leader's assignment throws: no SyncGroup is sent, it asks to rejoin",
}
# KIP-726's dynamic rebalance-protocol selection never shipped in a Kafka client, but the driver
# plays the clients: it runs the variant's client rule (spec/classic_group.py JoinGroupResponse,
# DYNAMIC), so the coordinator's answers along these traces are checked like any other's. The
# properties those traces break are client-side (a consumer keeping partitions it cannot trust),
# which the broker neither causes nor sees.
UNREACHABLE_VARIANTS: dict[str, str] = {}


def subscription_bytes(topic: str, owned: list[int], generation: int, with_generation: bool) -> bytes:
    """ConsumerProtocol.serializeSubscription: the version (int16), then the struct. KIP-792's
    version 2+ carries the generation; without it (pre-KIP-792) version 1 has ownedPartitions."""
    from kio.serial import entity_writer
    from kio.static.primitive import i32
    if with_generation:
        from kio.schema.consumer_protocol_subscription.v3 import data as d
        sub = d.ConsumerProtocolSubscription(
            topics=(topic,), user_data=None, generation_id=i32(generation), rack_id=None,
            owned_partitions=(d.TopicPartition(topic=topic, partitions=tuple(i32(q) for q in owned)),))
        version = 3
    else:
        from kio.schema.consumer_protocol_subscription.v1 import data as d
        sub = d.ConsumerProtocolSubscription(
            topics=(topic,), user_data=None,
            owned_partitions=(d.TopicPartition(topic=topic, partitions=tuple(i32(q) for q in owned)),))
        version = 1
    buf = io.BytesIO()
    buf.write(version.to_bytes(2, "big"))
    entity_writer(type(sub))(buf, sub)
    return buf.getvalue()


def read_subscription(data: bytes) -> tuple[list[int], int]:
    """(ownedPartitions, generation) of a subscription; generation -1 before version 2."""
    from kio.serial import entity_reader
    version = int.from_bytes(data[:2], "big")
    v = min(version, 3)
    module = __import__(f"kio.schema.consumer_protocol_subscription.v{v}.data", fromlist=["x"])
    sub, _ = entity_reader(module.ConsumerProtocolSubscription)(data, 2)
    owned = sorted(int(q) for tp in sub.owned_partitions for q in tp.partitions) if v >= 1 else []
    return owned, int(getattr(sub, "generation_id", -1))


def assignment_bytes(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocol.serializeAssignment: the version (int16), then the struct."""
    from kio.schema.consumer_protocol_assignment.v3 import data as d
    from kio.serial import entity_writer
    from kio.static.primitive import i32
    a = d.ConsumerProtocolAssignment(assigned_partitions=(d.TopicPartition(
        topic=topic, partitions=tuple(i32(q) for q in partitions)),), user_data=None)
    buf = io.BytesIO()
    buf.write((3).to_bytes(2, "big"))
    entity_writer(type(a))(buf, a)
    return buf.getvalue()


def read_assignment(data: bytes) -> list[int]:
    from kio.schema.consumer_protocol_assignment.v3 import data as d
    from kio.serial import entity_reader
    if not data:
        return []
    a, _ = entity_reader(d.ConsumerProtocolAssignment)(data, 2)
    return sorted(int(q) for tp in a.assigned_partitions for q in tp.partitions)


def spec_assignment(model, leader: int, generation: int, protocol: str,
                    subscriptions: dict[int, tuple[list[int], int]]) -> dict[int, list[int]]:
    """The leader's assignor, run by the spec itself: the assignment the spec's SyncGroup(leader)
    computes from these subscriptions ({member: (ownedPartitions, generation)}) and protocol."""
    from kcheck.conform.driver import executor_of, field_values
    lay, P = layout_of(model), model.params.partitions
    st = lay.show(lay.unpack_flat(initial_words(model)[0]))
    M = model.params.members
    st.update(group_state="CompletingRebalance", generation=generation, protocol_name=protocol,
              leader=leader)
    st["in_group"] = [j in subscriptions for j in range(M)]
    st["subscription_owned"] = [j in subscriptions and q in subscriptions[j][0]
                                for j in range(M) for q in range(P)]
    st["subscription_generation"] = [subscriptions[j][1] if j in subscriptions else -1 for j in range(M)]
    for name, value in (("member_state", "COMPLETING_REBALANCE"), ("has_member_id", True),
                        ("member_generation", generation)):
        st[name] = [value if j == leader else st[name][j] for j in range(M)]
    words = tuple(lay.pack(st))
    ex = executor_of(model)     # compiled once per model (driver.model_of caches it)
    k = model.instance("SyncGroup", {"m": leader}).index
    if not ex.enabled(words, k):
        raise NotDrivable("the spec's assignor does not run on the subscriptions Kafka sent")
    post = field_values(model, ex.apply(words, k)[0])
    return {j: [q for q in range(P) if post[f"assignment[{j * P + q}]"]] for j in subscriptions}


def _bucket(member_id: str, capacity: int = 16) -> int:
    """The bucket of a key in a java.util.HashMap of this capacity: String.hashCode (31-based,
    over UTF-16 code units, 32-bit), spread by HashMap.hash (h ^ h >>> 16)."""
    h = 0
    for unit in member_id.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def _unbuildable(params, s: dict, fresh: dict) -> str | None:
    """Why the setup prefix cannot build this mid-rebalance state, or None (initial_reason)."""
    M, P, G = params.members, params.partitions, s["generation"]
    if s["group_state"] != "CompletingRebalance" or G < 1:
        return f"the group is {s['group_state']} at generation {G}"
    if not (0 <= s["leader"] < M and s["in_group"][s["leader"]]):
        return f"its leader {s['leader']} is not in the group"
    if any(s["assignment"]) or any(s["committed"]) or any(s["awaiting_join"]):
        return "the leader's assignment, a commit or a join is already recorded"
    for m in range(M):
        if not s["in_group"][m]:
            for k, v in fresh.items():
                if isinstance(v, list) and len(v) == M and s[k][m] != v[m]:
                    return f"member {m} is not in the group but has {k}={s[k][m]}"
            if any(s["owned"][m * P:(m + 1) * P]) or any(s["subscription_owned"][m * P:(m + 1) * P]):
                return f"member {m} is not in the group but owns partitions"
            continue
        if not s["has_member_id"][m] or s["rejoin_needed"][m] or s["member_state"][m] != "PREPARING_REBALANCE":
            return f"member {m} is {s['member_state'][m]} (not waiting for its JoinGroup answer)"
        if s["join_response_generation"][m] != G or s["join_response_protocol"][m] != s["protocol_name"]:
            return f"member {m}'s held JoinGroup answer is not of generation {G}"
        if s["completed_generation"][m] != -1:
            return f"member {m} has completed generation {s['completed_generation'][m]}"
    return None


class Member:
    """One consumer as the driver plays it (the spec's client fields, from Kafka's answers)."""

    def __init__(self):
        self.assignors: list[str] = []
        self.cooperative = False
        self.member_id = ""
        self.generation = -1
        self.completed_generation = -1    # of the last SyncGroup that succeeded
        self.owned: list[int] = []
        self.needs_join_prepare = True
        self.joining: concurrent.futures.Future | None = None   # a parked JoinGroup
        self.answer = None                                       # its JoinGroup answer
        self.protocol = None
        self.leader_view = None
        self.conn = None
        self.side_conn = None


class ClassicGroupAdapter(Adapter):
    """spec/classic_group.py on a 4.x group coordinator: one group and one topic per trace."""
    spec_name = "classic_group"
    broker_settings = {"group.initial.rebalance.delay.ms": str(INITIAL_DELAY_MS)}
    releases: list = []

    def action_reason(self, action: str, args: dict) -> str | None:
        if action not in REQUESTS and action not in CLIENT_SIDE:
            return f"{action}: the classic_group adapter has no mapping for it"
        return None

    def walk_allows(self, pre: dict, action: str) -> bool:
        """A random walk takes CompleteJoin as soon as it is due: a new group's first join phase
        is ended by its initial delay, a timer, so a walk does not make requests wait on it
        (later join phases are held open by the pending member until CompleteJoin)."""
        M = sum(1 for k in pre if k.startswith("in_group["))
        in_group = [pre[f"in_group[{j}]"] for j in range(M)]
        due = pre["group_state"] == "PreparingRebalance" and any(in_group) and \
            all(pre[f"awaiting_join[{j}]"] for j in range(M) if in_group[j])
        return not due or action == "CompleteJoin" or action in CLIENT_SIDE

    def initial_reason(self, params, state: dict) -> str | None:
        """Requests reach a new group (an empty group whose consumers have not started) and, by
        the setup prefix of ``_setup_mid_rebalance``, a group whose join phase has just ended:
        CompletingRebalance at generation G >= 1, every member's JoinGroup answer of G waiting
        to be read, the subscriptions of that join phase as the state has them."""
        from kcheck.spec.classic_group import spec
        model = spec.instantiate(None, params.as_dict())
        fresh = layout_of(model).show(layout_of(model).unpack_flat(initial_words(model)[0]))
        diff = [k for k in fresh if state.get(k, fresh[k]) != fresh[k]]
        if not diff:
            return None
        why = _unbuildable(params, state, fresh)
        if why:
            return (f"the trace starts mid-rebalance ({', '.join(diff[:4])}{', ...' if len(diff) > 4 else ''} "
                    f"differ from a new group) and {why}: the setup prefix builds only a group "
                    f"whose join phase has just ended")
        return None

    # -- driving ------------------------------------------------------------------------------
    def begin(self, run: TraceRun, initial: dict) -> None:
        if run.variant in UNREACHABLE_VARIANTS:
            raise NotDrivable(f"variant {run.variant} {UNREACHABLE_VARIANTS[run.variant]}")
        run.state["members"] = [Member() for _ in range(run.params.members)]
        run.state["pool"] = concurrent.futures.ThreadPoolExecutor(max_workers=run.params.members)
        admin = self._admin(run)
        admin.create_topic(run.name, run.params.partitions)
        host_port = admin.find_coordinator(run.name, key_type=0)
        run.state["coordinator"] = host_port
        self._wait_loaded(run)
        if initial["group_state"] != "Empty":
            self._setup_mid_rebalance(run, initial)
        self._hold_join_phase(run)

    def _await_preparing(self, run: TraceRun, member_id: str) -> None:
        """Until DescribeGroups shows the group PreparingRebalance with this member (bounded)."""
        from kio.schema.describe_groups.v5 import request as d
        deadline = time.monotonic() + generous(JOIN_WAIT_S)
        while True:
            g = self._admin(run).send(d.DescribeGroupsRequest(
                groups=(run.name,), include_authorized_operations=False)).groups[0]
            if g.group_state == "PreparingRebalance" and member_id in {x.member_id for x in g.members}:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"setup: the group is {g.group_state}, not PreparingRebalance "
                                   f"with member {member_id}, after the bound on the join phase")
            time.sleep(0.02)   # polling the coordinator for the join it was sent, not an outcome

    def _hold_join_phase(self, run: TraceRun) -> None:
        """A pending member holds every later join phase open until the trace's CompleteJoin.
        Kafka ends a join phase as soon as every member has rejoined and no member is pending
        (ClassicGroup.hasAllMembersJoined: members.size() == numMembersAwaitingJoinResponse &&
        pendingJoinMembers.isEmpty()), inside the last rejoin; the spec's CompleteJoin is a step
        of its own, and a trace may put requests between. A JoinGroup without a member id gets
        MEMBER_ID_REQUIRED and leaves its member pending (KIP-394), invisible to DescribeGroups
        and to the leader's answer; its LeaveGroup at the trace's CompleteJoin removes it
        (removePendingMemberAndUpdateClassicGroup) and the coordinator ends the join phase if
        every member has rejoined, the same maybeCompleteJoinPhase the last rejoin runs.
        Measured on 4.3.1: a rejoin is parked while a member is pending and answered at once
        when it leaves. A new group's first join phase is ended by its initial delay (a timer)
        whatever is pending (the delayed initial join completes without the check)."""
        from kio.schema.join_group.v9 import request as j
        admin = self._admin(run)
        r = admin.send(j.JoinGroupRequest(
            group_id=run.name, session_timeout=ms(PENDING_SESSION_TIMEOUT_MS),
            rebalance_timeout=ms(REBALANCE_TIMEOUT_MS), member_id="", group_instance_id=None,
            protocol_type=PROTOCOL_TYPE, protocols=tuple(
                j.JoinGroupRequestProtocol(name=name, metadata=subscription_bytes(run.name, [], -1, False))
                for name in ("range", "cooperative-sticky")), reason="kcheck: holds the join phase"))
        if error_name(r.error_code) != "MEMBER_ID_REQUIRED":
            raise RuntimeError(f"the pending member's JoinGroup: {error_name(r.error_code)}")
        run.state["pending_member"] = r.member_id

    def _release_if_empty(self, run: TraceRun) -> None:
        """The last member left: without a pending member the coordinator would end the join
        phase at once with nobody in it (Empty, generation + 1), as the spec's removal does; so
        the pending member leaves too."""
        if run.state.get("pending_member") and not any(self._describe(run)["in_group"]):
            self._release_join_phase(run)

    def _release_join_phase(self, run: TraceRun) -> None:
        """The pending member leaves: the coordinator ends the join phase if all have rejoined."""
        pending = run.state.pop("pending_member", None)
        if pending:
            self._leave(run, self._admin(run), pending)

    def _setup_mid_rebalance(self, run: TraceRun, s: dict) -> None:
        """The setup prefix of a trace that starts as a join phase ends (initial_reason says
        which states): the group's members join, the leader first (the coordinator makes the
        first member of a new group its leader and keeps a leader that rejoins), G times; after
        each of the first G-1 join phases they sync (the leader with empty assignments), and in
        the last they send the subscriptions the state names (ownedPartitions and, with
        KIP-792, the generation: the consumer's own claim, which the coordinator stores as
        sent). Their answers of generation G are then held, unread, as the spec's
        join_response_generation says; the clients take the state's generation and partitions."""
        from kio.schema.sync_group.v5 import request as sg
        M, P, G = run.params.members, run.params.partitions, s["generation"]
        members = run.state["members"]
        present = [m for m in range(M) if s["in_group"][m]]
        order = [s["leader"]] + [m for m in present if m != s["leader"]]
        for m in present:
            self._start(members[m], s["assignors"][m], run.variant)
            members[m].cooperative = s["rebalance_protocol"][m] == "COOPERATIVE"
        with_generation = self._with_generation(run)
        for g in range(1, G + 1):
            last = g == G
            for m in order:
                me = members[m]
                owned = [q for q in range(P) if s["subscription_owned"][m * P + q]] if last else []
                claim = s["subscription_generation"][m] if last else me.generation
                metadata = subscription_bytes(run.name, owned, claim, with_generation)
                protocols = [(name, metadata) for name in me.assignors]
                if not me.member_id:
                    err = self._new_member_id(run, m, me, protocols)
                    if err != "MEMBER_ID_REQUIRED":
                        raise RuntimeError(f"setup: member {m}'s first JoinGroup: {err}")
                me.joining = run.state["pool"].submit(self._join_request, run, me, protocols,
                                                      self._conn(run, me))
                if m == order[0]:
                    # the leader's JoinGroup must start the join phase before the others arrive:
                    # a new group's first member becomes its leader, and a follower that rejoins
                    # a Stable group unchanged is answered at once without a rebalance
                    self._await_preparing(run, me.member_id)
            answers = {}
            for m in order:
                me = members[m]
                r = me.joining.result(timeout=generous(JOIN_WAIT_S) + INITIAL_DELAY_MS / 1000)
                me.joining = None
                if error_name(r.error_code) != "NONE":
                    raise RuntimeError(f"setup: member {m}'s JoinGroup of round {g}: {error_name(r.error_code)}")
                answers[m] = self._answer(run, me, r)
                me.generation = answers[m]["generation"]
            leader = answers[order[0]]
            if {a["generation"] for a in answers.values()} != {g} or leader["leader"] != members[s["leader"]].member_id:
                raise RuntimeError(f"setup: join phase {g} ended at generation "
                                   f"{sorted({a['generation'] for a in answers.values()})}, leader "
                                   f"{leader['leader']}")
            if last:
                break
            for m in order:      # the leader first: a follower's SyncGroup waits for its assignment
                me = members[m]
                assignments = tuple(sg.SyncGroupRequestAssignment(
                    member_id=members[k].member_id, assignment=assignment_bytes(run.name, []))
                    for k in order) if m == order[0] else ()
                r = self._conn(run, me).send(sg.SyncGroupRequest(
                    group_id=run.name, generation_id=me.generation, member_id=me.member_id,
                    group_instance_id=None, protocol_type=PROTOCOL_TYPE,
                    protocol_name=answers[m]["protocol"], assignments=assignments))
                if error_name(r.error_code) != "NONE":
                    raise RuntimeError(f"setup: member {m}'s SyncGroup of round {g}: {error_name(r.error_code)}")
        if leader["protocol"] != s["protocol_name"]:
            raise NotDrivable(f"the coordinator chose protocol {leader['protocol']} from the members' "
                              f"assignor lists, the trace's state has {s['protocol_name']}")
        for m in present:
            me = members[m]
            me.answer = answers[m]
            me.generation = s["member_generation"][m]
            me.owned = [q for q in range(P) if s["owned"][m * P + q]]
            me.needs_join_prepare = s["needs_join_prepare"][m]
            me.completed_generation = s["completed_generation"][m]
        run.state["generation"] = G
        seen = self._describe(run)
        if seen["group_state"] != "CompletingRebalance" or seen["in_group"] != list(s["in_group"]):
            raise RuntimeError(f"setup: the group is {seen['group_state']} with members "
                               f"{seen['in_group']}, the trace starts CompletingRebalance with "
                               f"{list(s['in_group'])}")

    def _wait_loaded(self, run: TraceRun) -> None:
        """Waits (bounded, polling) while the coordinator loads the group's __consumer_offsets
        partition: a request before that is answered NOT_COORDINATOR, which no spec step models."""
        from kio.schema.describe_groups.v5 import request as d
        deadline = time.monotonic() + generous(JOIN_WAIT_S)
        while True:
            r = self._admin(run).send(d.DescribeGroupsRequest(groups=(run.name,),
                                                              include_authorized_operations=False))
            err = error_name(r.groups[0].error_code)
            if err not in ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the group coordinator is still loading past the bound on "
                                   f"waiting ({err})")
            time.sleep(0.1)   # polling the coordinator's load, not waiting for an outcome

    def end(self, run: TraceRun) -> None:
        pool = run.state.get("pool")
        for c in run.connections:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)   # wakes a thread blocked on a parked JoinGroup
            except OSError:
                pass
            c.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def drive(self, run: TraceRun, action: str, args: dict) -> dict:
        from kcheck.spec.classic_group import START
        members = run.state["members"]
        m = args.get("m")
        me = members[m] if m is not None else None
        obs: dict = {}
        if action in REQUESTS and action != "CompleteJoin":
            self._check_no_early_completion(run)
        if action == "StartConsumer":
            self._start(me, START[run.variant], run.variant)
        elif action == "JoinGroup":
            if run.state.get("group_state", "Empty") == "Empty":
                run.state["initial_rebalance"] = True   # the initial delay, a timer, ends it
            obs.update(self._join(run, m, me))
        elif action == "CompleteJoin":
            obs.update(self._complete_join(run))
        elif action == "JoinGroupResponse":
            a, me.answer = me.answer, None
            if a is None:
                raise NotDrivable(f"member {m} has no JoinGroup answer to process")
            me.generation, me.protocol = a["generation"], a["protocol"]
            from kcheck.spec.classic_group import DYNAMIC
            if run.variant in DYNAMIC:
                # KIP-726: the protocol follows the chosen assignor; a COOPERATIVE member that
                # sees an EAGER one chosen has kept partitions it can no longer trust
                chosen_cooperative = a["protocol"] == "cooperative-sticky"
                if me.cooperative and not chosen_cooperative:
                    me.owned = []
                me.cooperative = chosen_cooperative
            # the leader computes the assignment from the subscriptions in its answer
            me.leader_view = a if a["leader"] == me.member_id else None
            obs["member_generation"] = a["generation"]
            if me.leader_view is not None:
                # the subscriptions the coordinator stored, as it hands them to the leader
                ids = {x.member_id: j for j, x in enumerate(run.state["members"]) if x.member_id}
                obs["subscriptions"] = sorted(
                    [ids.get(mid, -1), owned] + ([gen] if self._with_generation(run) else [])
                    for mid, (owned, gen) in a["members"].items())
        elif action == "SyncGroup":
            obs.update(self._sync(run, m, me))
        elif action == "EnforceRebalance":
            pass
        elif action == "AssignmentFails":
            me.leader_view = None       # the assignment threw: no SyncGroup carries it
        elif action == "Heartbeat":
            obs.update(self._heartbeat(run, me))
        elif action == "CommitOffsets":
            obs.update(self._commit(run, me))
        elif action == "SessionTimeout":
            self._leave(run, self._admin(run), me.member_id)
            self._release_if_empty(run)
        elif action == "Bounce":
            if me.member_id:
                self._leave(run, self._conn(run, me), me.member_id)
            fresh = Member()
            members[m] = fresh
            self._start(fresh, args["to"], run.variant)
            self._release_if_empty(run)
        if action in REQUESTS:
            obs.update(self._describe(run))
        return obs

    def view(self, run: TraceRun, step: SpecStep) -> dict:
        """The spec's step in the observation keys. The group state is left out where the spec's
        CompleteJoin is due: a new group's first join phase ends by its initial delay, a timer
        the trace does not order (later ones wait for CompleteJoin, see _hold_join_phase)."""
        post, M, P = step.post, run.params.members, run.params.partitions
        v: dict = {}
        if step.outcome is not None:
            v["outcome"] = step.outcome
        in_group = [post[f"in_group[{j}]"] for j in range(M)]
        if step.action in REQUESTS:
            # DescribeGroups after every request (drive); a client-side step asks Kafka nothing
            v["in_group"] = in_group
            join_due = post["group_state"] == "PreparingRebalance" and \
                all(post[f"awaiting_join[{j}]"] for j in range(M) if in_group[j]) and any(in_group)
            v["group_state"] = post["group_state"] if not join_due else Absent(
                "the spec's CompleteJoin is due: in a new group's first join phase Kafka's "
                "initial delay, a timer, may have ended it")
        if step.action == "CompleteJoin":
            v["join_error"] = "none"
            v["generation"] = post["generation"]
            v["protocol_name"] = post["protocol_name"]
            v["leader"] = post["leader"]
        m = step.args.get("m")
        if step.action == "JoinGroupResponse":
            v["member_generation"] = post[f"member_generation[{m}]"]
        # the leader's answer lists the subscriptions of the join phase it ended; the spec's stored
        # ones are those while that generation is still completing (any change starts a new phase).
        # Once the group moved on, the spec no longer knows who led that phase either (a leader
        # that timed out, or a group emptied by timeouts, hands the leadership on), so whether
        # this answer lists subscriptions at all is not the spec's to say
        if step.action != "JoinGroupResponse":
            pass
        elif post["group_state"] != "CompletingRebalance" \
                or post["generation"] != post[f"member_generation[{m}]"]:
            v["subscriptions"] = Absent("a new join phase began since the answer: the spec keeps "
                                        "the subscriptions and the leader of the latest one only")
        elif post["leader"] == m:
            v["subscriptions"] = sorted(
                [j, [q for q in range(P) if post[f"subscription_owned[{j * P + q}]"]]] +
                ([post[f"subscription_generation[{j}]"]] if self._with_generation(run) else [])
                for j in range(M) if in_group[j])
        if step.action == "SyncGroup" and step.outcome == "NONE":
            v["assigned"] = [q for q in range(P) if post[f"owned[{m * P + q}]"]]
        return v

    # -- the client's steps --------------------------------------------------------------------
    def _start(self, me: Member, assignor_list: str, variant: str | None = None) -> None:
        """The consumer starts: its assignors, and its rebalance protocol (fixed by the list at
        start-up, ConsumerCoordinator's constructor; EAGER under KIP-726's dynamic selection)."""
        from kcheck.spec.classic_group import (DYNAMIC, LIST_ASSIGNORS, RebalanceProtocol,
                                               fixed_protocol)
        lst = next(L for L in LIST_ASSIGNORS if L.name == getattr(assignor_list, "name", assignor_list))
        me.assignors = [a.name for a in LIST_ASSIGNORS[lst]]
        me.cooperative = variant not in DYNAMIC and fixed_protocol(lst) == RebalanceProtocol.COOPERATIVE

    def _join(self, run: TraceRun, m: int, me: Member) -> dict:
        """onJoinPrepare, then JoinGroup; -> the outcome if Kafka answers at once."""
        from kcheck.spec.classic_group import ONCE_PER_REBALANCE
        lost = me.generation == -1 or not me.member_id
        keep = not (lost or not me.cooperative)
        if run.variant in ONCE_PER_REBALANCE:
            keep = keep or not me.needs_join_prepare
            me.needs_join_prepare = False
        if not keep:
            me.owned = []
        with_generation = self._with_generation(run)
        metadata = subscription_bytes(run.name, me.owned, self._claimed_generation(run, me),
                                      with_generation)
        protocols = [(name, metadata) for name in me.assignors]
        if not me.member_id:
            err = self._new_member_id(run, m, me, protocols)
            if err != "MEMBER_ID_REQUIRED":
                return {"outcome": err}
        me.joining = run.state["pool"].submit(self._join_request, run, me, protocols, self._conn(run, me))
        try:
            r = me.joining.result(timeout=ANSWERED_AT_ONCE_S)
        except concurrent.futures.TimeoutError:
            return {"outcome": "NONE"}       # parked until the join phase ends
        me.joining = None
        err = error_name(r.error_code)
        if err == "NONE":
            me.answer = self._answer(run, me, r)
            if me.answer["generation"] > run.state.get("generation", 0):
                # this JoinGroup ended the join phase (every member had rejoined): the spec's
                # CompleteJoin must come next
                run.state["join_ended"] = m
        elif err == "UNKNOWN_MEMBER_ID":
            me.member_id, me.generation = "", -1
        return {"outcome": err}

    def _new_member_id(self, run: TraceRun, m: int, me: Member, protocols) -> str:
        """A new member's first JoinGroup: MEMBER_ID_REQUIRED hands it an id (KIP-394), which it
        keeps only if the id puts it in the spec's order. Kafka keeps the members in a HashMap
        (ClassicGroup.members) and, when the leader leaves or has not rejoined, makes the first
        in that map's order the leader (ClassicGroup.remove, maybeElectNewJoinedLeader); the spec
        takes the lowest-numbered member. An id is kept when its bucket in a HashMap of 16
        (String.hashCode, HashMap.hash) lies in member m's share of the buckets, so the map's
        order is the members' order; another id is asked for otherwise, and the one not kept
        leaves at once (a pending member would hold the join phase open). -> the answer's error."""
        M = run.params.members
        for _ in range(64):
            r = self._join_request(run, me, protocols)
            err = error_name(r.error_code)
            if err != "MEMBER_ID_REQUIRED":
                return err
            if M * _bucket(r.member_id) // 16 == m:
                me.member_id = r.member_id
                return err
            self._leave(run, self._admin(run), r.member_id)
        raise RuntimeError(f"no member id for member {m} in its share of the buckets after 64 tries")

    def _join_request(self, run, me: Member, protocols, conn=None):
        from kio.schema.join_group.v9 import request as j
        req = j.JoinGroupRequest(group_id=run.name, session_timeout=ms(SESSION_TIMEOUT_MS),
                                 rebalance_timeout=ms(REBALANCE_TIMEOUT_MS), member_id=me.member_id,
                                 group_instance_id=None, protocol_type=PROTOCOL_TYPE,
                                 protocols=tuple(j.JoinGroupRequestProtocol(name=n, metadata=b)
                                                 for n, b in protocols), reason="kcheck")
        return (conn or self._conn(run, me)).send(req)

    def _claimed_generation(self, run: TraceRun, me: Member) -> int:
        """The generation the subscription claims: ConsumerCoordinator.metadata's
        generation().generationId (KIP-792 as shipped), or, with the spec's
        generation_from_assignment (clients before 3.4: CooperativeStickyAssignor.onAssignment),
        the generation of the last assignment the member applied."""
        if getattr(run.params, "generation_from_assignment", 0):
            return me.completed_generation
        return me.generation

    def _with_generation(self, run: TraceRun) -> bool:
        """KIP-792: the subscription carries the generation (ConsumerProtocolSubscription v2+)."""
        from kcheck.spec.classic_group import NO_GENERATION_IN_SUBSCRIPTION
        return run.variant not in NO_GENERATION_IN_SUBSCRIPTION

    def _answer(self, run, me: Member, r) -> dict:
        """A JoinGroup answer as the member keeps it until it processes it."""
        members = {x.member_id: read_subscription(x.metadata) for x in r.members}
        return {"generation": int(r.generation_id), "protocol": r.protocol_name,
                "leader": r.leader, "members": members}

    def _check_no_early_completion(self, run: TraceRun) -> None:
        """A parked JoinGroup answered before the trace's CompleteJoin: Kafka ended the join phase
        (its initial delay, or every member rejoined) when the spec had not."""
        if run.state.get("join_ended") is not None:
            raise NotDrivable(f"member {run.state['join_ended']}'s JoinGroup ended the join "
                              f"phase (every member had rejoined: GroupMetadataManager."
                              f"maybeCompleteJoinPhase) before the trace's CompleteJoin")
        for j, x in enumerate(run.state["members"]):
            if x.joining is not None and x.joining.done():
                if run.state.get("initial_rebalance"):
                    raise TimerFired(f"the new group's initial delay (group.initial.rebalance."
                                     f"delay.ms) ended the join phase, answering member {j}'s "
                                     f"JoinGroup, before the trace's CompleteJoin")
                raise NotDrivable(f"Kafka answered member {j}'s JoinGroup (ended the join phase: "
                                  f"every member had rejoined) before the trace's CompleteJoin")

    def _complete_join(self, run: TraceRun) -> dict:
        members = run.state["members"]
        if not run.state.get("initial_rebalance"):
            self._release_join_phase(run)
        waiting = [(j, x) for j, x in enumerate(members) if x.joining is not None]
        # the JoinGroup that completed the join phase was answered at once, with the new generation
        answers = {j: x.answer for j, x in enumerate(members) if x.answer is not None}
        if not waiting and not answers:
            raise NotDrivable("CompleteJoin with no JoinGroup parked at the coordinator")
        for j, x in waiting:
            try:
                wait = generous(JOIN_WAIT_S)
                r = x.joining.result(timeout=wait)
            except concurrent.futures.TimeoutError:
                raise NotDrivable(f"timing: the coordinator did not end the join phase within "
                                  f"{wait:.0f}s") from None
            x.joining = None
            if error_name(r.error_code) != "NONE":
                # the spec's CompleteJoin answers every parked JoinGroup with the new generation
                return {"join_error": f"member {j}: {error_name(r.error_code)}"}
            x.answer = answers[j] = self._answer(run, x, r)
        a = max(answers.values(), key=lambda x: x["generation"])
        run.state["generation"] = a["generation"]
        run.state.pop("join_ended", None)
        run.state.pop("initial_rebalance", None)
        if "pending_member" not in run.state:
            self._hold_join_phase(run)        # for the next join phase
        ids = {x.member_id: j for j, x in enumerate(members) if x.member_id}
        return {"join_error": "none", "generation": a["generation"], "protocol_name": a["protocol"],
                "leader": ids.get(a["leader"], -1)}

    def _sync(self, run: TraceRun, m: int, me: Member) -> dict:
        from kio.schema.sync_group.v5 import request as s
        from kcheck.spec.classic_group import ONCE_PER_REBALANCE
        assignments = ()
        if me.leader_view is not None:
            ids = {x.member_id: j for j, x in enumerate(run.state["members"]) if x.member_id}
            subs = {}
            for mid, sub in me.leader_view["members"].items():
                if mid not in ids:
                    raise NotDrivable(f"the leader's JoinGroup answer names member {mid}, "
                                      f"which no consumer of the trace has")
                subs[ids[mid]] = sub
            computed = spec_assignment(run.model, m, me.generation, me.protocol, subs)
            by_id = {x.member_id: j for j, x in enumerate(run.state["members"])}
            assignments = tuple(s.SyncGroupRequestAssignment(
                member_id=mid, assignment=assignment_bytes(run.name, computed[by_id[mid]]))
                for mid in me.leader_view["members"])
        req = s.SyncGroupRequest(group_id=run.name, generation_id=me.generation,
                                 member_id=me.member_id, group_instance_id=None,
                                 protocol_type=PROTOCOL_TYPE, protocol_name=me.protocol,
                                 assignments=assignments)
        r = self._conn(run, me).send(req)
        me.leader_view = None
        err = error_name(r.error_code)
        obs = {"outcome": err}
        if err == "NONE":
            me.owned = read_assignment(r.assignment)
            me.completed_generation = me.generation
            obs["assigned"] = me.owned
            if run.variant in ONCE_PER_REBALANCE:
                me.needs_join_prepare = True
        else:
            reset = err in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION") or \
                (err == "REBALANCE_IN_PROGRESS" and run.variant == "kafka-14016")
            if reset:
                me.generation = -1
            if err == "UNKNOWN_MEMBER_ID":
                me.member_id = ""
        return obs

    def _heartbeat(self, run: TraceRun, me: Member) -> dict:
        from kio.schema.heartbeat.v4 import request as h
        r = self._conn(run, me).send(h.HeartbeatRequest(group_id=run.name, generation_id=me.generation,
                                                        member_id=me.member_id, group_instance_id=None))
        err = error_name(r.error_code)
        self._reset_on(me, err)
        return {"outcome": err}

    def _commit(self, run: TraceRun, me: Member) -> dict:
        from kio.schema.offset_commit.v9 import request as o
        from kio.static.primitive import i32, i64
        req = o.OffsetCommitRequest(
            group_id=run.name, generation_id_or_member_epoch=i32(me.generation), member_id=me.member_id,
            group_instance_id=None, topics=(o.OffsetCommitRequestTopic(name=run.name, partitions=tuple(
                o.OffsetCommitRequestPartition(partition_index=i32(q), committed_offset=i64(0),
                                               committed_leader_epoch=i32(-1), committed_metadata="")
                for q in me.owned)),))
        r = self._conn(run, me).send(req)
        errs = {error_name(p.error_code) for t in r.topics for p in t.partitions}
        err = next(iter(errs)) if len(errs) == 1 else ",".join(sorted(errs))
        self._reset_on(me, err)
        return {"outcome": err}

    def _reset_on(self, me: Member, err: str) -> None:
        """AbstractCoordinator: UNKNOWN_MEMBER_ID resets the member id and generation,
        ILLEGAL_GENERATION the generation."""
        if err in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            me.generation = -1
        if err == "UNKNOWN_MEMBER_ID":
            me.member_id = ""

    def _leave(self, run: TraceRun, conn, member_id: str) -> None:
        from kio.schema.leave_group.v5 import request as lg
        conn.send(lg.LeaveGroupRequest(group_id=run.name, members=(lg.MemberIdentity(
            member_id=member_id, group_instance_id=None, reason="kcheck"),)))

    # -- reads --------------------------------------------------------------------------------
    def _describe(self, run: TraceRun) -> dict:
        from kio.schema.describe_groups.v5 import request as d
        r = self._admin(run).send(d.DescribeGroupsRequest(groups=(run.name,),
                                                          include_authorized_operations=False))
        g = r.groups[0]
        ids = {x.member_id for x in g.members}
        state = {"Dead": "Empty"}.get(g.group_state, g.group_state)
        run.state["group_state"] = state
        return {"group_state": state,
                "in_group": [bool(x.member_id) and x.member_id in ids for x in run.state["members"]]}

    # -- connections --------------------------------------------------------------------------
    def _admin(self, run: TraceRun):
        if "admin" not in run.state:
            run.state["admin"] = run.connect()
        return run.state["admin"]

    def _conn(self, run: TraceRun, me: Member):
        """The member's connection to the coordinator. While its JoinGroup is parked, another
        request goes on a second connection: the broker reads nothing more from a connection
        until it has answered the request in flight (the channel is muted)."""
        if me.joining is not None and not me.joining.done():
            if me.side_conn is None:
                me.side_conn = run.connect(run.state.get("coordinator"))
            return me.side_conn
        if me.conn is None:
            me.conn = run.connect(run.state.get("coordinator"))
            # a parked JoinGroup is answered only when the join phase ends
            me.conn.sock.settimeout(generous(JOIN_WAIT_S) + REBALANCE_TIMEOUT_MS / 1000)
        return me.conn


register_adapter("classic_group", "kcheck.conform.classic_group:ClassicGroupAdapter")
