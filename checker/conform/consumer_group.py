"""The conformance adapter for spec/consumer_group.py (KIP-848 consumer groups, KIP-1251).

Each coordinator-side action is a real request: Join / Heartbeat / Leave are
ConsumerGroupHeartbeat v1 (epoch 0 / the client's epoch / -1 or -2), HandleCommit is OffsetCommit
v9 (v8 for OFFSET_COMMIT_V8) or TxnOffsetCommit v5, AdminCommit the same without a member.
FenceMember and StaticMemberExpires are timers in Kafka (session or rebalance timeout); they are
driven by a ConsumerGroupHeartbeat at epoch -1 on a separate connection, which Kafka handles by
the same GroupMetadataManager.consumerGroupFenceMember as the timers (the timer itself is not
exercised). Client-side actions (HeartbeatResponse: the client reads the response held since its
heartbeat; SendCommit: a commit prepared and held) are the adapter's own state; a transactional
SendCommit also runs InitProducerId and AddOffsetsToTxn, so HandleCommit is the commit alone.

The scripted assignor (assignor/ScriptedAssignor.java) is given the target a step names
(Join(target=01): p0 to slot 0's member id, p1 to slot 1's) before the request is sent.

What is compared (docs/conformance.md has the table): the error code of every request; a
heartbeat's member epoch and assigned partitions; after every step, ConsumerGroupDescribe's group
epoch, target assignment epoch, each member's epoch and assigned partitions and the target
assignment, and from the coordinator's own records in __consumer_offsets each member's
reconciliation state, partitions pending revocation and assignment epochs; after
HeartbeatResponse the client's epoch and owned partitions. Epochs are mapped by a constant (the
setup prefix's epochs minus the spec's). Not compared: the ghost fields (held_since, lost,
commit_zombie, commit_owner), which Kafka has nothing like.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import re
import time

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from kcheck.conform.driver import (NOT_GIVEN, Absent, Adapter, NotDrivable, RecordedDivergence,
                                   SpecStep, TimerFired, TraceRun, compare, said, version_key,
                                   register_adapter)
from kcheck.conform.broker import generous
from kcheck.conform.wire import WireError, error_name, ms, schema

LEFT, STATIC_LEFT = -1, -2
REBALANCE_TIMEOUT_MS = 60_000        # long: no rebalance timer fires during a replay
TRANSACTION_TIMEOUT_MS = 60_000
MOVE_CATCH_UP_S = 10.0               # bound on a new coordinator committing its first write
CLASSIC_SESSION_TIMEOUT_MS = 45_000  # a classic member's JoinGroup session: no timer fires
# GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: the coordinator refreshes a group's
# regexes at most once in this interval (4.2, 4.3 and 4.4 alike)
REGEX_WINDOW_S = 10.0

HB = schema("consumer_group_heartbeat", 1)
DESCRIBE = schema("consumer_group_describe", 0)


@functools.lru_cache(maxsize=4096)
def _member_id(run_name: str, m: int, incarnation: int) -> str:
    """A client-generated member id (KIP-1082) in Kafka's Uuid text form, unique per trace run,
    slot and incarnation (a static member rejoining under a new id is a new incarnation)."""
    raw = hashlib.sha256(f"{run_name}/{m}/{incarnation}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=").replace("-", "A")


def _java_hash_bucket(text: str) -> int:
    """Where java.util.HashMap puts a String key: String.hashCode, spread (h ^ h >>> 16), in a
    table of 64 buckets (its low six bits; a smaller table takes fewer of the same bits)."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 63


@functools.lru_cache(maxsize=4096)
def _ordered_member_id(run_name: str, m: int, incarnation: int) -> str:
    """A member id for slot m that Kafka's stock assignors see in slot order: UniformAssignor's
    builders walk GroupSpec.memberIds() (a HashMap's keys: bucket order) and give the partitions
    above the minimum quota to the members they meet first (UniformHomogeneousAssignmentBuilder.
    maybeRevokePartitions), RangeAssignor sorts the member ids. So slot m's id starts with the
    m-th letter and falls in bucket m + 1 of every table of 4 to 64 buckets: a trace written for a
    stock assignor gets the same target on every run, whatever the run's name."""
    for n in range(1 << 16):
        raw = hashlib.sha256(f"{run_name}/{m}/{incarnation}/{n}".encode()).digest()[:16]
        text = "ABCDEFGH"[m] + base64.urlsafe_b64encode(raw).decode().rstrip("=").replace("-", "A")[1:]
        if _java_hash_bucket(text) == m + 1:
            return text
    raise RuntimeError(f"no member id for slot {m} in hash bucket {m + 1}")


class ConsumerGroupAdapter(Adapter):
    spec_name = "consumer_group"
    # KIP-1251 shipped in 4.3 (OffsetMetadataManager / ConsumerGroup.validateOffsetCommit with
    # the assignment-epoch validator); before it the commit must carry the member epoch.
    # Each entry is one change a release runs; measured by `kcheck conform --which-variant`
    # (docs/conformance.md has the table).
    releases = [
        ("4.0.0", "4.2.99", "strict", "before KIP-1251 the coordinator accepts a commit only at "
                                      "the member epoch (ConsumerGroup.validateOffsetCommit)"),
        ("4.3.0", None, "kip1251", "KIP-1251: assignment epoch <= commit epoch <= member epoch"),
        ("4.0.0", "4.3.1", "kafka-20442", "KAFKA-20442 is not in this release: fencing the last "
                                           "member leaves the target assignment epoch behind"),
        ("4.0.0", "4.1.99", "unrevoked-epoch-bump",
         "KAFKA-19974's fix (PR #21107, merged to trunk and 4.2) is not in this release: "
         "UNREVOKED_PARTITIONS -> UNREVOKED_PARTITIONS moves the member to epoch + 1 "
         "(CurrentAssignmentBuilder.build calls computeNextAssignment(memberEpoch + 1, ...))"),
    ]

    # -- what cannot be driven ---------------------------------------------------------------
    # measured on 4.2.2, 4.3.1 and 4.4.0
    expected_divergences = [
        # measured on 4.2.2, 4.3.1 and 4.4.0: the last step, so nothing is left to compare
        RecordedDivergence(
            "kafka-19233/join-accepted.json", "4.2.2", None, 5,
            (("outcome", "FENCED_MEMBER_EPOCH", "NONE"),
             ("response.member_epoch", NOT_GIVEN, 2), ("response.assigned", NOT_GIVEN, [])),
            "KAFKA-19233's fix (PR #21305) is in this release: a known member rejoining with "
            "epoch 0 is accepted as a join (GroupMetadataManager."
            "throwIfConsumerGroupMemberEpochIsInvalid returns early for epoch 0); the trace's "
            "JoinFenced is the answer of a coordinator without the fix"),
    ]

    # actions that send nothing which changes the coordinator: the client reads a response it
    # holds, prepares a commit, or loses a response (counted apart by the exhaustive check)
    client_side_actions = ("HeartbeatResponse", "SendCommit", "LoseHeartbeatResponse")

    # the server-side assignors Kafka ships (group.consumer.assignors: UniformAssignor.NAME,
    # RangeAssignor.NAME), which a trace may be driven with instead of the scripted one
    STOCK_ASSIGNORS = ("uniform", "range")

    def __init__(self, coordinator_moves: tuple[int, ...] = (), assignor: str | None = None):
        # assignor: None drives the scripted assignor with the target each step names; a stock
        # assignor's name ("uniform", "range") is sent as every member's ServerAssignor and
        # nothing is scripted: Kafka computes the target itself, and the describe comparison
        # says whether it is the one the trace names (a trace written for that assignor)
        if assignor is not None and assignor not in self.STOCK_ASSIGNORS:
            raise ValueError(f"unknown assignor {assignor!r}: give one of "
                             f"{', '.join(self.STOCK_ASSIGNORS)} (or none: the scripted assignor)")
        self.assignor = assignor
        # Kafka's default assignment timing (broker.DEFERRED_ASSIGNMENT_SETTINGS not overridden):
        # a heartbeat that asks for a new target waits for it (_settle)
        self.default_timing = False
        # steps after whose request the group coordinator moves to another node (a cluster of
        # three: Cluster.move_coordinator), before Kafka's view of the step is read. The spec has
        # no failover action: the group's state is in its records (__consumer_offsets), which the
        # new coordinator loads (GroupMetadataManager.replay), so the spec predicts that a move
        # changes nothing a member or a describe can see; these runs check that it does not
        self.coordinator_moves = tuple(coordinator_moves)

    def needs_cluster(self, doc: dict) -> bool:
        return bool(getattr(self, "coordinator_moves", ())) or super().needs_cluster(doc)

    def initial_reason(self, p, s: dict) -> str | None:
        present = [m for m in range(p.members) if s["member_epoch"][m] != LEFT]
        T = s["target_epoch"]
        for m in range(p.members):
            e = s["member_epoch"][m]
            if e == STATIC_LEFT:
                return (f"member {m} starts as a static member that left (epoch -2): reachable by "
                        f"requests, but the setup prefix builds only active members")
            if s["classic"][m] and m < p.static_members:
                return (f"member {m} starts as a static classic-protocol member: the setup "
                        f"prefix joins classic members by JoinGroup without a group instance id")
            if s["response_in_flight"][m] or s["response_error"][m]:
                return f"member {m} starts with a heartbeat response in flight"
            if s["member_id"][m] != 0:
                return f"member {m} starts at member id incarnation {s['member_id'][m]}"
        for m in present:
            if s["member_epoch"][m] != T or s["member_state"][m] != "STABLE":
                return (f"member {m} starts at epoch {s['member_epoch'][m]} in "
                        f"{s['member_state'][m]} while the target is at epoch {T}: the setup "
                        f"prefix reaches only groups whose members are reconciled")
        for m in range(p.members):
            for q in range(p.partitions):
                hold = s["holds"][m][q]
                if (hold == "ASSIGNED") != (s["target_owner"][q] == m) or hold == "PENDING_REVOCATION":
                    return "the initial holds are not the target assignment"
                if hold == "ASSIGNED" and s["assignment_epoch"][m][q] not in (T, T - 1):
                    return (f"partition {q} of member {m} was assigned at epoch "
                            f"{s['assignment_epoch'][m][q]}, before the target's {T}: the setup "
                            f"prefix assigns every partition at the target epoch or the one "
                            f"before it")
        for q in range(p.partitions):
            if s["target_owner"][q] != -1 and s["target_owner"][q] not in present:
                return f"partition {q}'s target owner {s['target_owner'][q]} is not in the group"
        # ConsumerGroupMember.previousMemberEpoch (in the spec when responses can be lost): the
        # setup prefix builds either none, or the epoch before the target's for every member
        previous = {m: s["previous_epoch"][m] for m in present} if "previous_epoch" in s else {}
        staged = any(s["holds"][m][q] == "ASSIGNED" and s["assignment_epoch"][m][q] == T - 1
                     for m in present for q in range(p.partitions))
        if (any(previous.values()) or (staged and previous)) and (
                set(previous.values()) != {T - 1} or any(s["classic"][m] for m in present)):
            return (f"members start with previous epochs {previous}: the setup prefix builds "
                    f"either none or, for every member of the group, the epoch before the "
                    f"target's ({T - 1}), by a last target that moves them all from it")
        if staged and any(s["classic"][m] for m in present):
            return ("a classic-protocol member in a group whose partitions were assigned at two "
                    "epochs: the setup prefix joins a classic member by the JoinGroup that "
                    "computes the initial target")
        if sum(1 for m in present if s["classic"][m]) > 1:
            return ("more than one classic-protocol member: the setup prefix joins one, by the "
                    "JoinGroup that computes the initial target")
        if "subscribed" in s and (s["resolution_pending"] or not all(
                all(row) for m, row in enumerate(s["subscribed"]) if m in present)):
            return ("a member starts with a topic dropped from its subscription: the setup "
                    "prefix subscribes every member to every topic")
        if s["group_epoch"] < T or T < 1:
            return f"group epoch {s['group_epoch']} / target epoch {T}"
        if not present and s["group_epoch"] != T:
            return "an empty group whose target epoch is behind its group epoch"
        return None

    def action_reason(self, action: str, args: dict) -> str | None:
        known = {"Join", "JoinFenced", "JoinUnreleasedInstance", "Heartbeat",
                 "HeartbeatNewSubscription", "HeartbeatResponse", "LoseHeartbeatResponse",
                 "TopicPartitionsAdded", "SendCommit", "HandleCommit", "AdminCommit", "Leave",
                 "FenceMember", "StaticMemberExpires", "HeartbeatUnsubscribe", "HeartbeatUnsubscribeAll",
                 "SubscriptionResolved"}
        if action not in known:
            return (f"action {action} has no request in the consumer_group adapter "
                    f"(checker/conform/consumer_group.py)")
        if args.get("request") == "TXN_OFFSET_COMMIT_V6":
            return ("TxnOffsetCommit v6 (KIP-1319, topic ids): Kafka 4.4.0 serves it (its "
                    "TxnOffsetCommitRequest.json has validVersions 0-6; 4.2 and 4.3 stop at 5), but "
                    "kio 0.6.5, the newest on PyPI, has the schemas up to v5, so the request "
                    "cannot be encoded")
        return None

    # -- the setup prefix --------------------------------------------------------------------
    def begin(self, run: TraceRun, s: dict) -> None:
        p = run.params
        st = run.state
        st.update(group=f"kcheck-{run.name}", topic=f"kcheck-{run.name}", delta=0,
                  incarnation=[0] * p.members, static_left=[False] * p.members,
                  in_group=[False] * p.members, client_epoch=[LEFT] * p.members,
                  owns=[frozenset()] * p.members, held=[None] * p.members,
                  commits={}, producers={}, partitions=p.partitions,
                  extra_topics=[0] * p.members, kafka_member_id={}, regex=[None] * p.members,
                  regex_pending=False, unsubscribes=0,
                  # ConsumerGroupMember.asConsumerGroupDescribeMember shows the assigned partitions
                  # up to 4.2, and the assigned plus those pending revocation from 4.3 on
                  describes_pending=version_key(run.broker.version) is None
                  or version_key(run.broker.version) >= (4, 3, 0))
        present = [m for m in range(p.members) if s["member_epoch"][m] != LEFT]
        classic = [m for m in present if s["classic"][m]]
        droppers = self._droppers(run, s)
        conn = run.connect()
        st["admin"] = conn
        self._create_topics(run, droppers)
        host, port = conn.find_coordinator(st["group"])
        st["coordinator"] = run.connect((host, port)) if (host, port) != run.broker.host_port else conn
        self._wait_loaded(run)
        self._wait_topic_known(run)
        # an empty group that exists: one member joined and left
        ghosts = max(s["group_epoch"] - s["target_epoch"], 0 if present else 1)
        final = {m: [q for q in range(p.partitions) if s["target_owner"][q] == m] for m in present}
        # a consumer-protocol member of the adapter's own, never a spec slot, holding nothing: it
        # keeps a group whose spec members are classic a consumer group (the last
        # consumer-protocol member leaving would convert it back to a classic group,
        # GroupMetadataManager.validateOnlineDowngradeWithFencedMembers). In a regex trace it
        # subscribes by the members' first regex too and keeps it resolved for the whole trace:
        # ConsumerGroup.lastResolvedRegularExpressionRefreshTimeMs is that of a resolved regex,
        # and with none left (the last member subscribed to one drops it) the next heartbeat would
        # start a refresh at once; its heartbeats also start the refresh at SubscriptionResolved
        # without changing anything else
        hidden = bool(classic) or bool(droppers)
        # members that start with a previous epoch (a lost response), or with partitions assigned
        # at the epoch before the target's, reach the target from that epoch: the last join
        # computes a first target of those partitions only, then one more target (a subscription
        # change, which bumps the group epoch in its own heartbeat) moves them all
        first = {m: [q for q in final[m] if s["assignment_epoch"][m][q] == s["target_epoch"] - 1]
                 for m in present}
        two_stage = bool(present) and (any(first.values()) or "previous_epoch" in s and any(
            s["previous_epoch"][m] for m in present))
        st["hidden"] = _member_id(run.name, 96, 0) if hidden else None
        # warm-up: a member joins and leaves until the initial target's epoch is within reach
        # (Kafka's epochs then run ahead of the spec's by delta >= 0, so no epoch maps below 1)
        warm, cycle, epoch = _member_id(run.name, 97, 0), 0, 0
        while epoch + ghosts + len(present) + hidden + two_stage < s["target_epoch"]:
            self._script(run, {warm: []})
            r = self._heartbeat(run, warm, 0, frozenset(), None)
            self._ok(r, "setup: warm-up join")
            if getattr(self, "default_timing", False):   # its epoch is the target's: wait for it
                r = self._settle(run, warm, None, None, None, r, frozenset())
                self._ok(r, "setup: warm-up join at the deferred target")
            self._ok(self._heartbeat(run, warm, LEFT, None, None, leave=True), "setup: warm-up leave")
            epoch = int(r.member_epoch) + 1
            cycle += 1
            if cycle > s["target_epoch"]:
                raise RuntimeError("setup: the group epoch does not grow with joins and leaves")
        # ghosts (members that join with nothing and leave at the end: each leave bumps the group
        # epoch without a new target, as a removal does), then the members; the last join
        # computes the initial target, so every partition is assigned at the same epoch
        ghost_ids = [_member_id(run.name, 99, g) for g in range(ghosts)]
        for g, gid in enumerate(ghost_ids):
            self._script(run, {gid: []})
            r = self._heartbeat(run, gid, 0, frozenset(), None)
            self._ok(r, f"setup: ghost {g} join")
        st["hidden_regex"] = self._initial_regex(run) if droppers else None
        if hidden:
            self._script(run, {st["hidden"]: []})
            before = time.monotonic()
            r = self._heartbeat(run, st["hidden"], 0, frozenset(), None, regex=st["hidden_regex"])
            self._ok(r, "setup: hidden member join")
            st["hidden_epoch"] = int(r.member_epoch)
            if droppers:   # a group's first refresh runs at once (no regex resolved before)
                self._await_resolution(run, before, int(r.member_epoch),
                                       f"setup: the regex {st['hidden_regex']!r}")
        # a classic member joins last: its JoinGroup computes the target (one that joined earlier
        # would need a rejoin to reconcile)
        order = sorted(present, key=lambda m: (m in classic, m))
        joined: list[int] = []
        for n, m in enumerate(order):
            last = n == len(order) - 1
            initial = first if two_stage else final
            script = {self._mid(run, k): (initial[k] if last else []) for k in joined + [m]}
            if m in droppers:
                st["regex"][m] = self._initial_regex(run)
            if m in classic:
                # the member id is Kafka's (MEMBER_ID_REQUIRED): the target is scripted after it
                self._classic_join(run, m, lambda: {self._mid(run, k): (initial[k] if last else [])
                                                    for k in joined + [m]})
            else:
                self._script(run, script)
                r = self._member_heartbeat(run, m, 0, frozenset())
                self._ok(r, f"setup: member {m} join")
                st["client_epoch"][m] = int(r.member_epoch)
                st["owns"][m] = self._assigned(run, r)
            joined.append(m)
            st["in_group"][m] = True
        for m in order[:-1]:
            r = self._member_heartbeat(run, m, st["client_epoch"][m], st["owns"][m])
            self._ok(r, f"setup: member {m} heartbeat")
            st["client_epoch"][m] = int(r.member_epoch)
            st["owns"][m] = self._assigned(run, r)
        if two_stage:
            # GroupMetadataManager.consumerGroupHeartbeat: a changed SubscribedTopicNames bumps
            # the group epoch and computes the target in the same heartbeat; each member then
            # moves to it from the epoch before (ConsumerGroupMember.Builder.updateMemberEpoch)
            st["extra_topics"][order[-1]] += 1
            self._script(run, {self._mid(run, k): final[k] for k in order})
            for m in [order[-1]] + order[:-1]:
                r = self._member_heartbeat(run, m, st["client_epoch"][m], st["owns"][m])
                self._ok(r, f"setup: member {m} heartbeat to the target")
                st["client_epoch"][m] = int(r.member_epoch)
                st["owns"][m] = self._assigned(run, r)
        for gid in ghost_ids:
            self._ok(self._heartbeat(run, gid, LEFT, None, None, leave=True), "setup: ghost leave")
        # Kafka's epochs run ahead of the spec's by a constant (a new group's first epoch, the
        # ghosts): measure it from the target epoch, then check everything else against it
        self._describe_raw(run)
        g = st["described"]
        if not present and int(g.assignment_epoch) != int(g.group_epoch):
            raise NotDrivable(
                f"the initial group is empty at its target epoch, but on Kafka {run.broker.version} "
                f"the target epoch stays behind the group epoch when the last member leaves "
                f"(group epoch {int(g.group_epoch)}, target epoch {int(g.assignment_epoch)}): the "
                f"spec's default has KAFKA-20442's fix, this release runs variant kafka-20442")
        st["delta"] = (int(st["described"].assignment_epoch) - s["target_epoch"] if present
                       else int(st["described"].group_epoch) - s["group_epoch"])
        # the clients: what each believes (its epoch and partitions) is its own state, which a
        # scenario may set apart from its member's (a stale or a forged epoch)
        for m in range(p.members):
            st["client_epoch"][m] = self._to_kafka(run, s["client_epoch"][m])
            st["owns"][m] = frozenset(q for q in range(p.partitions) if s["client_owns"][m][q])
        # commits already in flight: prepared as SendCommit prepares them
        for c, commit in enumerate(s["commit"]):
            req = commit["request"]
            if req == "NONE":
                continue
            if req == "TXN_OFFSET_COMMIT_V6":
                raise NotDrivable(self.action_reason("HandleCommit", {"request": req}))
            m = commit["member"]
            st["commits"][c] = {"request": req, "member_id": self._mid(run, m),
                                "instance_id": self._instance(run, m),
                                "epoch": self._to_kafka(run, commit["epoch"]),
                                "q": commit["partition"], "offset": len(run.wire_log)}
            if req.startswith("TXN"):
                st["commits"][c]["producer"] = self._begin_transaction(run, f"c{c}")
        # the prefix must have reached the trace's initial state, as far as Kafka shows it
        # (compared as a step is, strictly: a key one side lacks is a difference too)
        wrong = compare(self._coordinator_view(run, s), {**self._describe(run), **self._records(run)})
        if wrong:
            raise RuntimeError("the setup prefix did not reach the initial state: " + said(wrong))

    # -- one action ----------------------------------------------------------------------------
    def drive(self, run: TraceRun, action: str, args: dict) -> dict:
        st = run.state
        obs: dict = {}
        m = args.get("m")
        if m is not None and m in st["kafka_member_id"] and action not in (
                "SendCommit", "HandleCommit"):
            raise NotDrivable(f"action {action} of member {m}, a classic-protocol member: the "
                              f"adapter drives a classic member's offset commits only")
        if action in ("Join", "JoinFenced", "JoinUnreleasedInstance"):
            # the same request; which of the three the coordinator answers is its decision
            if self._is_static(run, m) and st["static_left"][m]:
                st["incarnation"][m] += 1      # a static member rejoins under a new member id
                st["static_left"][m] = False
            self._script_target(run, args.get("target", "-"), joining=m)
            r = self._member_heartbeat(run, m, 0, frozenset())
            st["held"][m] = r
            st["client_epoch"][m] = 0
            st["in_group"][m] = st["in_group"][m] or r.error_code == ErrorCode.none
            obs.update(self._response(run, r))
        elif action in ("Heartbeat", "HeartbeatNewSubscription"):
            if action == "HeartbeatNewSubscription":
                # a changed subscription: one more topic the spec does not model (it need not
                # exist; GroupMetadataManager.hasMemberSubscriptionChanged compares the names)
                st["extra_topics"][m] += 1
            self._script_target(run, args["target"])
            r = self._member_heartbeat(run, m, st["client_epoch"][m], st["owns"][m])
            st["held"][m] = r
            obs.update(self._response(run, r))
        elif action in ("HeartbeatUnsubscribe", "HeartbeatUnsubscribeAll"):
            # a new SubscribedTopicRegex, unresolved, in place of the one that matched topic q:
            # GroupMetadataManager.maybeUpdateRegularExpressions schedules no refresh within
            # REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (10 s) of the last one, so the member is
            # subscribed to its topic names only (CurrentAssignmentBuilder.subscribedTopicIds
            # treats an unresolved regex as matching nothing) and updateCurrentAssignment takes
            # q's partition away at the same epoch. The new regex matches the topic the spec does
            # not model only (kcheck-...-x), so its resolution changes the group's subscriptions.
            # HeartbeatUnsubscribeAll: the member has every topic by regex and names none (the
            # setup prefix subscribed it so), so the unresolved regex takes them all
            if "q" in args and args["q"] not in st["droppers"].get(m, ()):
                raise RuntimeError(f"member {m} drops topic {args['q']}, which the setup prefix "
                                   f"did not subscribe by regex")
            st["unsubscribes"] += 1
            st["regex"][m] = f"{st['topic']}-x|{st['topic']}-none-{st['unsubscribes']}"
            st["regex_pending"] = True
            r = self._member_heartbeat(run, m, st["client_epoch"][m], st["owns"][m])
            st["held"][m] = r
            obs.update(self._response(run, r))
        elif action == "SubscriptionResolved":
            self._resolve_regexes(run)
        elif action == "LoseHeartbeatResponse":
            # the client never reads the held response: it keeps its epoch and partitions
            if st["held"][m] is None:
                raise RuntimeError(f"no heartbeat response held for member {m}")
            st["held"][m] = None
        elif action == "TopicPartitionsAdded":
            self._add_partition(run)
        elif action == "HeartbeatResponse":
            r, st["held"][m] = st["held"][m], None
            if r is None:
                raise RuntimeError(f"no heartbeat response held for member {m}")
            # the spec answers a response whose member was fenced since as the next heartbeat
            # would (UNKNOWN_MEMBER_ID) one step early: ask Kafka whether the member is still in
            alive = self._mid(run, m) in self._describe_raw(run)
            if r.error_code != ErrorCode.none or not alive:
                st["client_epoch"][m], st["owns"][m] = LEFT, frozenset()
            else:
                st["client_epoch"][m] = int(r.member_epoch)
                if r.assignment is not None:
                    st["owns"][m] = self._assigned(run, r)
            obs[f"client_epoch[{m}]"] = self._to_spec(run, st["client_epoch"][m])
            obs[f"client_owns[{m}]"] = sorted(st["owns"][m])
        elif action == "SendCommit":
            c = args["c"]
            # the offset is the client's when it sends (a delayed commit carries an old one)
            commit = {"request": args["request"], "member_id": self._mid(run, m),
                      "instance_id": self._instance(run, m),
                      "epoch": st["client_epoch"][m], "q": args["q"],
                      "offset": len(run.wire_log)}
            if args["request"].startswith("TXN"):
                commit["producer"] = self._begin_transaction(run, f"c{c}")
            st["commits"][c] = commit
        elif action == "HandleCommit":
            commit = st["commits"].pop(args["c"], None)
            if commit is None:
                raise RuntimeError(f"no commit held in slot {args['c']}")
            obs["outcome"] = self._commit(run, commit)
        elif action == "AdminCommit":
            commit = {"request": args["request"], "member_id": "", "instance_id": None,
                      "epoch": -1, "q": 0}
            if args["request"].startswith("TXN"):
                commit["producer"] = self._begin_transaction(run, "admin")
            obs["outcome"] = self._commit(run, commit)
        elif action == "Leave":
            e = args["epoch"]
            r = self._heartbeat(run, self._mid(run, m), e, None, self._instance(run, m), leave=True)
            obs.update(self._response(run, r))
            st["client_epoch"][m], st["owns"][m] = LEFT, frozenset()
            st["in_group"][m] = False
            st["static_left"][m] = e == STATIC_LEFT
        elif action in ("FenceMember", "StaticMemberExpires"):
            # the session/rebalance timer's path (consumerGroupFenceMember), taken by request on
            # a connection of its own; the member's client does not see it
            fencer = run.connect((st["coordinator"].host, st["coordinator"].port))
            r = self._heartbeat(run, self._mid(run, m), LEFT, None, self._instance(run, m),
                                leave=True, conn=fencer)
            obs["fence.error"] = error_name(r.error_code)
            st["in_group"][m] = False
            if action == "StaticMemberExpires":
                st["static_left"][m] = False
        else:
            raise NotDrivable(f"action {action} has no request in the consumer_group adapter")
        if run.step in getattr(self, "coordinator_moves", ()):
            self._move_coordinator(run)
        obs.update(self._describe(run))
        obs.update(self._records(run))
        listed = self._listed(run)
        for k in range(run.params.members):
            if st.get("described") is not None and st["in_group"][k] and self._mid(run, k) not in listed:
                raise TimerFired(f"member {k} left the group with no request for it (a session or "
                                 f"rebalance timer fired during the replay)")
        return obs

    # -- the spec's prediction, in the same words ----------------------------------------------
    def view(self, run: TraceRun, step: SpecStep) -> dict:
        p, post, a = run.params, step.post, step.args
        out = {}
        if step.outcome is not None:
            out["outcome"] = step.outcome
        m = a.get("m")
        if step.action in ("Join", "Heartbeat", "HeartbeatNewSubscription", "HeartbeatUnsubscribe",
                           "HeartbeatUnsubscribeAll") and step.outcome == "NONE":
            out["response.member_epoch"] = post[f"member_epoch[{m}]"]
            out["response.assigned"] = [q for q in range(p.partitions)
                                        if post[f"holds[{m}][{q}]"] == "ASSIGNED"]
        if step.action == "Leave":
            out["response.member_epoch"] = a["epoch"]
        if step.action == "HeartbeatResponse":
            out[f"client_epoch[{m}]"] = post[f"client_epoch[{m}]"]
            out[f"client_owns[{m}]"] = [q for q in range(p.partitions) if post[f"client_owns[{m}][{q}]"]]
        if step.action in ("FenceMember", "StaticMemberExpires"):
            out["fence.error"] = "NONE"
        out.update(self._coordinator_view(run, self._shown(p, post)))
        return out

    def _shown(self, p, post: dict) -> dict:
        """_declared(p, post), kept for the last few thousand post states (the exhaustive check
        views every transition into a state with the same dict of that state; the result is
        only read)."""
        cache = self.__dict__.setdefault("_shown_cache", {})
        hit = cache.get(id(post))
        if hit is not None and hit[0] is post:
            return hit[1]
        if len(cache) > 4096:
            cache.clear()
        shaped = _declared(p, post)
        cache[id(post)] = (post, shaped)
        return shaped

    def _coordinator_view(self, run, s: dict) -> dict:
        """What ConsumerGroupDescribe shows of a spec state (declared names, shown values)."""
        p = run.params
        out = {"group_epoch": s["group_epoch"], "target_epoch": s["target_epoch"]}
        for m in range(p.members):
            e = s["member_epoch"][m]
            out[f"member_epoch[{m}]"] = e
            if e != LEFT:
                shown = ("ASSIGNED", "PENDING_REVOCATION") if run.state.get("describes_pending") \
                    else ("ASSIGNED",)
                out[f"described[{m}]"] = [q for q in range(p.partitions) if s["holds"][m][q] in shown]
        for q in range(p.partitions):
            out[f"target_owner[{q}]"] = s["target_owner"][q]
        for m in range(p.members):
            if s["member_epoch"][m] == LEFT:
                continue
            held = s["holds"][m]
            out[f"member_state[{m}]"] = s["member_state"][m]
            out[f"pending[{m}]"] = [q for q, h in enumerate(held) if h == "PENDING_REVOCATION"]
            out[f"assignment_epochs[{m}]"] = [s["assignment_epoch"][m][q] if h != "NONE" else 0
                                              for q, h in enumerate(held)]
        return out

    # -- topics and partitions ---------------------------------------------------------------
    def _droppers(self, run, s: dict) -> dict:
        """{member: [topic q]} of the members that drop topics from their subscription in the
        trace (HeartbeatUnsubscribe: one; HeartbeatUnsubscribeAll: every topic, a member
        subscribed by regex alone), checked against what the setup prefix can subscribe."""
        out: dict = {}
        if not getattr(run.params, "unsubscribes", 0):
            return out
        requests: dict = {}
        for action, args in run.actions:
            if action in ("HeartbeatUnsubscribe", "HeartbeatUnsubscribeAll"):
                m = args["m"]
                requests[m] = requests.get(m, 0) + 1
                dropped = [args["q"]] if "q" in args else list(range(run.params.partitions))
                out.setdefault(m, [])
                out[m] += [q for q in dropped if q not in out[m]]
            if action == "TopicPartitionsAdded":
                raise NotDrivable("TopicPartitionsAdded with unsubscribes: the adapter adds a "
                                  "partition to the one topic of a trace, and a regex trace has "
                                  "a topic per partition")
        for m, topics in out.items():
            if requests[m] > 1:
                # the spec no longer takes this path (consumer_group._regex_unchanged: one regex
                # change per membership); a trace written by hand still may
                raise NotDrivable(
                    f"member {m} drops topics {' and '.join(map(str, topics))} in {requests[m]} "
                    f"requests: Kafka treats a regex that is not resolved yet as matching no topic "
                    f"(CurrentAssignmentBuilder.subscribedTopicIds), so a member keeps, while its "
                    f"new regex is resolved, only the topics it subscribes to by name, and names "
                    f"them still after; a topic dropped from SubscribedTopicNames bumps the group "
                    f"epoch at once (GroupMetadataManager.hasMemberSubscriptionChanged), where the "
                    f"spec's HeartbeatUnsubscribe bumps nothing")
            if s["member_epoch"][m] == LEFT or any(a in ("Join", "JoinFenced", "JoinUnreleasedInstance")
                                                    and x.get("m") == m for a, x in run.actions):
                raise NotDrivable(f"member {m} joins during the trace and drops a topic: its "
                                  f"regex would be resolved by the coordinator's refresh after "
                                  f"its join, a group epoch bump the trace does not take")
        return out

    def _create_topics(self, run, droppers: dict) -> None:
        """The trace's topics, and where each spec partition q is on Kafka (st["where"][q]:
        topic name, topic id, partition). One topic of `partitions` partitions; with
        unsubscribes (each partition a topic of its own, for regex subscriptions) one topic of
        one partition per spec partition, `TOPIC-tQ`, plus `TOPIC-x`, which only the regexes of
        HeartbeatUnsubscribe match: the spec does not model it, and the scripted assignor gives
        it to nobody."""
        st, p = run.state, run.params
        conn = st["admin"]
        st["droppers"] = droppers
        if getattr(p, "unsubscribes", 0):
            names = [f"{st['topic']}-t{q}" for q in range(p.partitions)]
            ids = [conn.create_topic(n, 1) for n in names]
            st["where"] = [(n, i, 0) for n, i in zip(names, ids)]
            st["extra"] = (f"{st['topic']}-x", conn.create_topic(f"{st['topic']}-x", 1))
            st["topics"] = tuple(names)
        else:
            topic_id = conn.create_topic(st["topic"], p.partitions)
            st["where"] = [(st["topic"], topic_id, q) for q in range(p.partitions)]
            st["extra"] = None
            st["topics"] = (st["topic"],)
        st["which"] = {(i, part): q for q, (_, i, part) in enumerate(st["where"])}
        st["which_text"] = {(_kafka_uuid(i), part): q for (i, part), q in st["which"].items()}

    def _spec_partitions(self, run, topic_partitions) -> frozenset:
        """The spec partitions among Kafka's (topic id, partitions) entries; the partitions the
        spec does not model (the regexes' extra topic, a partition CreatePartitions added) are
        left out."""
        which = run.state["which"]
        return frozenset(which[(tp.topic_id, int(x))] for tp in topic_partitions for x in tp.partitions
                         if (tp.topic_id, int(x)) in which)

    def _initial_regex(self, run) -> str:
        """The regex every member that drops a topic subscribes with at first: it matches every
        topic of the trace (TOPIC-tQ), so with the topic names the member subscribes to it is
        subscribed to all of them, as the spec's members are."""
        return f"{run.state['topic']}-t[0-9]+"

    # -- requests ------------------------------------------------------------------------------
    def _subscription(self, run, m) -> tuple:
        """(SubscribedTopicNames, SubscribedTopicRegex) of member m: every topic of the trace by
        name but those it drops (those it has by regex: all of them for HeartbeatUnsubscribeAll,
        a member subscribed by regex alone), and the topics a
        HeartbeatNewSubscription added (which the spec does not model)."""
        st = run.state
        names = st["topics"]
        if st["extra"]:      # a topic per spec partition: the one m drops is its regex's
            names = tuple(n for q, n in enumerate(names) if q not in st["droppers"].get(m, ()))
        return (names + tuple(f"{st['topic']}-unmodelled-{n}"
                              for n in range(1, st["extra_topics"][m] + 1)), st["regex"][m])

    def _member_heartbeat(self, run, m, epoch, owns):
        names, regex = self._subscription(run, m)
        r = self._heartbeat(run, self._mid(run, m), epoch, owns, self._instance(run, m),
                            subscription=names, regex=regex)
        if getattr(self, "default_timing", False) and r.error_code == ErrorCode.none:
            r = self._settle(run, self._mid(run, m), self._instance(run, m), names, regex, r, owns)
        return r

    def _settle(self, run, member_id, instance_id, names, regex, r, owns):
        """At Kafka's default assignment timing (4.3+: the target is computed at most once per
        group.consumer.assignment.interval.ms, 1 s, on the executor when
        group.consumer.assignor.offload.enable): a heartbeat that bumped the group epoch may
        return before the target it asked for exists, and the coordinator computes it only in a
        later heartbeat once the interval has passed (it sets no timer of its own). The spec
        computes it in that heartbeat; here member m keeps heartbeating, as its client does
        every heartbeat interval, with the epoch it was given and the partitions it owns, until
        ConsumerGroupDescribe shows the target at the group epoch (bounded), and the answer to
        the first heartbeat at that target is the step's."""
        deadline = time.monotonic() + generous(15.0)
        while True:
            self._describe_raw(run)
            g = run.state["described"]
            if g is None or int(g.assignment_epoch) >= int(g.group_epoch):
                break
            if time.monotonic() > deadline:
                raise TimerFired(f"the deferred target assignment (group epoch {int(g.group_epoch)}, "
                                 f"target epoch {int(g.assignment_epoch)}) was not computed within "
                                 f"{generous(15.0):.0f} s of heartbeats")
            time.sleep(0.2)   # the client's next heartbeat (its interval is 1 s; the target's too)
            r = self._heartbeat(run, member_id, int(r.member_epoch), owns, instance_id,
                                subscription=names, regex=regex)
            if r.error_code != ErrorCode.none:
                return r
        if g is None or int(r.member_epoch) >= int(g.assignment_epoch):
            return r
        return self._heartbeat(run, member_id, int(r.member_epoch), owns, instance_id,
                               subscription=names, regex=regex)

    def _await_resolution(self, run, sent: float, epoch: int, what: str) -> None:
        """Wait (bounded) until the coordinator's regex refresh, started by a heartbeat sent at
        `sent`, bumps the group epoch past `epoch` (GroupMetadataManager.
        handleRegularExpressionsResult writes the resolution and the bump); keep when it ran."""
        st = run.state
        deadline = time.monotonic() + 30
        while True:
            self._describe_raw(run)
            g = st["described"]
            if g is not None and int(g.group_epoch) > epoch:
                break
            if time.monotonic() > deadline:
                raise WireError(f"{what}: the coordinator did not resolve the regex within 30 s")
            time.sleep(0.05)   # polling the coordinator's asynchronous refresh, not an outcome
        # the refresh started after `sent` and before now: the next one is due no sooner than
        # 10 s after `sent`, and surely 10 s after now
        st["refreshed"] = (sent, time.monotonic())

    def _resolve_regexes(self, run) -> None:
        """SubscriptionResolved: the coordinator's asynchronous regex refresh. Kafka starts one
        from a heartbeat (any member's) that finds an unresolved regex once
        REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (10 s) have passed since the last one
        (GroupMetadataManager.maybeUpdateRegularExpressions); its result bumps the group epoch
        (handleRegularExpressionsResult). The driver waits out the 10 s, sends a heartbeat from
        its hidden member (the same request as its last), which changes nothing else, and waits
        (bounded) for the bump."""
        st = run.state
        if not st["regex_pending"]:
            raise RuntimeError("SubscriptionResolved with no regex pending")
        self._describe_raw(run)
        g = st["described"]
        if int(g.group_epoch) != int(g.assignment_epoch):
            raise NotDrivable("SubscriptionResolved while the group epoch is ahead of the target: "
                              "the heartbeat that starts Kafka's regex refresh would compute a "
                              "new target assignment too")
        epoch = int(g.group_epoch)
        wait = st["refreshed"][1] + REGEX_WINDOW_S + 0.3 - time.monotonic()
        if wait > 0:
            time.sleep(wait)   # the coordinator's refresh interval (a timer), not an outcome
        first = time.monotonic()
        deadline = first + 15
        while True:
            r = self._heartbeat(run, st["hidden"], st["hidden_epoch"], frozenset(), None,
                                regex=st["hidden_regex"], refresh=True)
            if r.error_code == ErrorCode.none:
                st["hidden_epoch"] = int(r.member_epoch)
            poll = time.monotonic() + 1
            while time.monotonic() < poll:
                self._describe_raw(run)
                if int(st["described"].group_epoch) > epoch:
                    st["regex_pending"] = False
                    st["refreshed"] = (first, time.monotonic())
                    return
                time.sleep(0.05)   # polling the coordinator's asynchronous refresh
            if time.monotonic() > deadline:
                raise WireError("the coordinator did not resolve the regex within 15 s of the "
                                "refresh interval's end")

    def _classic_join(self, run, m: int, script) -> None:
        """A classic-protocol consumer joins the consumer group: JoinGroup v9 (protocol type
        consumer, its ConsumerProtocol subscription; MEMBER_ID_REQUIRED first, then again with
        the id) and SyncGroup v5. GroupMetadataManager.classicGroupJoinToConsumerGroup adds it
        as a member of the consumer group, computes the target (the scripted assignor's, given
        `script` once the member id is known) and answers at once with generation = member
        epoch; classicGroupSyncToConsumerGroup hands over its assigned partitions. `script()`
        is the target by member id, asked once the member id is known."""
        from kio.schema.join_group.v9 import request as j
        from kio.schema.sync_group.v5 import request as sg
        from kcheck.conform.classic_group import read_assignment, subscription_bytes
        st = run.state
        sub = subscription_bytes(st["topic"], [], -1, with_generation=True)

        def join(member_id):
            return st["coordinator"].send(j.JoinGroupRequest(
                group_id=st["group"], session_timeout=ms(CLASSIC_SESSION_TIMEOUT_MS),
                rebalance_timeout=ms(REBALANCE_TIMEOUT_MS), member_id=member_id,
                group_instance_id=None, protocol_type="consumer",
                protocols=(j.JoinGroupRequestProtocol(name="range", metadata=sub),), reason="kcheck"))
        r = join("")
        if error_name(r.error_code) != "MEMBER_ID_REQUIRED":
            raise RuntimeError(f"setup: classic member {m}'s first JoinGroup: {error_name(r.error_code)}")
        st["kafka_member_id"][m] = r.member_id
        self._script(run, script())
        r = join(r.member_id)
        self._ok(r, f"setup: classic member {m}'s JoinGroup")
        generation = int(r.generation_id)
        r = st["coordinator"].send(sg.SyncGroupRequest(
            group_id=st["group"], generation_id=i32(generation), member_id=st["kafka_member_id"][m],
            group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=()))
        self._ok(r, f"setup: classic member {m}'s SyncGroup")
        st["client_epoch"][m] = generation
        st["owns"][m] = frozenset(read_assignment(r.assignment))

    def _add_partition(self, run) -> None:
        """CreatePartitions: one more partition of the subscribed topic, which no target of the
        spec names (the scripted assignor gives it to nobody). Kafka bumps the group epoch at the
        next heartbeat, once the coordinator's metadata image has it; the spec takes the bump
        now, so the group epoch is not compared until a heartbeat has run."""
        st = run.state
        cp = schema("create_partitions", 3)
        st["partitions"] += 1
        r = st["admin"].send(cp.CreatePartitionsRequest(
            topics=(cp.CreatePartitionsTopic(name=st["topic"], count=i32(st["partitions"]),
                                             assignments=None),),
            timeout=ms(30_000), validate_only=False))
        if r.results[0].error_code != ErrorCode.none:
            raise WireError(f"CreatePartitions: {error_name(r.results[0].error_code)}")
        deadline = time.monotonic() + 30
        while len(st["admin"].metadata([st["topic"]]).topics[0].partitions) < st["partitions"]:
            if time.monotonic() > deadline:
                raise WireError("the new partition did not appear in the metadata within 30s")
            time.sleep(0.1)   # polling the broker's metadata, not an outcome
        self._wait_topic_known(run, st["partitions"])
        st["group_epoch_pending"] = True

    def _heartbeat(self, run, member_id, epoch, owns, instance_id, leave=False, conn=None,
                   subscription=None, regex=None, refresh=False):
        st = run.state
        if not leave and st.get("regex_pending") and not refresh and \
                time.monotonic() > st["refreshed"][0] + REGEX_WINDOW_S - 0.5:
            # this heartbeat would start the coordinator's regex refresh (its 10 s since the
            # last one have passed or nearly so): a resolution the trace did not ask for
            raise TimerFired("the coordinator's regex refresh interval (10 s, GroupMetadataManager."
                             "REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) ended before the trace's "
                             "SubscriptionResolved: the next heartbeat would resolve the regex")
        if not leave:
            st["group_epoch_pending"] = False
        if leave:
            req = HB.ConsumerGroupHeartbeatRequest(
                group_id=st["group"], member_id=member_id, member_epoch=i32(epoch),
                instance_id=instance_id, topic_partitions=None)
        else:
            req = HB.ConsumerGroupHeartbeatRequest(
                group_id=st["group"], member_id=member_id, member_epoch=i32(epoch),
                instance_id=instance_id, rebalance_timeout=ms(REBALANCE_TIMEOUT_MS),
                subscribed_topic_names=st["topics"] if subscription is None else subscription,
                subscribed_topic_regex=regex,
                server_assignor=self._server_assignor(run),
                topic_partitions=self._owned(run, owns))
        return (conn or st["coordinator"]).send(req)

    def _owned(self, run, owns) -> tuple:
        """ConsumerGroupHeartbeat's TopicPartitions of the spec partitions a client owns."""
        by_topic: dict = {}
        for q in sorted(owns):
            _, topic_id, part = run.state["where"][q]
            by_topic.setdefault(topic_id, []).append(i32(part))
        return tuple(HB.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items())

    def _response(self, run, r) -> dict:
        out = {"outcome": error_name(r.error_code)}
        if r.error_code == ErrorCode.none:
            out["response.member_epoch"] = self._to_spec(run, int(r.member_epoch))
            if r.assignment is not None:
                out["response.assigned"] = sorted(self._assigned(run, r))
        return out

    def _assigned(self, run, r) -> frozenset:
        if r.assignment is None:
            return frozenset()
        return self._spec_partitions(run, r.assignment.topic_partitions)

    def _describe_raw(self, run) -> dict:
        st = run.state
        r = st["coordinator"].send(DESCRIBE.ConsumerGroupDescribeRequest(
            group_ids=(st["group"],), include_authorized_operations=False))
        g = r.groups[0]
        if g.error_code != ErrorCode.none:
            st["described"] = None
            return {}
        st["described"] = g
        return {mb.member_id: mb for mb in g.members}

    def _wait_topic_known(self, run, partitions: int | None = None) -> None:
        """Wait (bounded) until the group coordinator resolves the new topic: a probe member of a
        probe group subscribes to it and is given every partition by the scripted assignor;
        until the coordinator's metadata image has the topic, the subscription resolves to no
        topic and the probe gets nothing. (The broker's Metadata answer comes first.)"""
        st, p = run.state, run.params
        group = st["group"]
        st["group"] = f"{group}-probe"
        try:
            n = partitions or p.partitions
            probe = _member_id(run.name, 98, n)
            names = st["topics"]
            if st["extra"]:     # a topic per partition, and the extra one
                names += (st["extra"][0],)
                n = len(names)
                run.broker.script_assignment({probe: [f"{_kafka_uuid(i)}:0" for i in
                                                      [w[1] for w in st["where"]] + [st["extra"][1]]]})
            else:
                self._script(run, {probe: list(range(n))})
            deadline, epoch = time.monotonic() + 30, 0
            while True:
                r = self._heartbeat(run, probe, epoch, frozenset(), None, subscription=names)
                if r.error_code == ErrorCode.none:
                    epoch = int(r.member_epoch)
                    got = r.assignment.topic_partitions if r.assignment is not None else ()
                    if sum(len(tp.partitions) for tp in got) == n:
                        break
                if time.monotonic() > deadline:
                    raise WireError(f"the group coordinator does not resolve topic {st['topic']} "
                                    f"after 30s ({error_name(r.error_code)})")
                time.sleep(0.1)   # polling the coordinator's metadata image, not an outcome
            self._heartbeat(run, probe, LEFT, None, None, leave=True)
        finally:
            st["group"] = group

    def _move_coordinator(self, run) -> None:
        """The group's __consumer_offsets partition gets a new leader (AlterPartitionReassignments
        and a preferred ElectLeaders), which loads the group from its records; the members'
        requests go to the new coordinator from now on, as a client's would after
        NOT_COORDINATOR and FindCoordinator."""
        st = run.state
        if not hasattr(run.broker, "move_coordinator"):
            raise NotDrivable("moving the group coordinator needs a cluster of three nodes "
                              "(kcheck starts one; a broker given by --bootstrap is one node)")
        after = run.broker.move_coordinator(st["group"], 0)
        st["coordinator"] = run.connect(run.broker.node(after["leader"]).host_port)
        st["coordinator_moves"] = st.get("coordinator_moves", 0) + 1
        self._wait_loaded(run)
        self._wait_committed(run)

    def _wait_committed(self, run) -> None:
        """Until the new coordinator's committed view has reached the end of its log: one write
        of the driver's own (an offset commit of a group no spec member is in, GROUP-barrier),
        answered only once the coordinator has applied a high watermark past it.

        Why a write and not a wait: the coordinator serves reads (ConsumerGroupDescribe,
        OffsetFetch) at its last committed offset (CoordinatorRuntime.scheduleReadOperation).
        While loading it takes that offset from the partition's high watermark as it reads
        (CoordinatorLoaderImpl.processMemoryRecords: updateLastCommittedOffset), and a new
        leader's high watermark lags until the followers fetch from it. Later advances reach it
        only through the HighWatermarkListener, which CoordinatorContext.transitionTo(ACTIVE)
        registers once the load is complete; Partition.maybeAddListener does not tell a new
        listener the current high watermark. An advance between the loader's last read and that
        registration is never delivered: the coordinator shows the group as it was before the
        old coordinator's last answered write until the next write to the partition advances
        the high watermark again (issue 14: step 9 of the zombie trace, a heartbeat that changes
        only member 0's partitions, described as before it; measured in 3 of 200 moves on 4.3.1
        with a core busy, spec/consumer_group_notes.md, Conformance 5). A write's answer comes
        from the listener's event, which applies the new committed offset first
        (updateLastCommittedOffset, then deferredEventQueue.completeUpTo), so every read after it
        sees everything the old coordinator answered."""
        st = run.state
        deadline = time.monotonic() + MOVE_CATCH_UP_S
        barrier = {"request": "OFFSET_COMMIT", "member_id": "", "instance_id": None, "epoch": -1,
                   "q": 0}
        while True:
            error = self._commit(run, barrier, group=f"{st['group']}-barrier")
            if error == "NONE":
                return
            if error not in ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                             "NOT_COORDINATOR", "REQUEST_TIMED_OUT"):
                raise WireError(f"the new group coordinator refused the driver's barrier offset "
                                f"commit: {error}")
            if time.monotonic() > deadline:
                raise WireError(f"the new group coordinator did not commit a write within "
                                f"{MOVE_CATCH_UP_S:.0f}s of the move (last answer {error})")
            time.sleep(0.1)   # the coordinator is still taking over: ask again

    def _wait_loaded(self, run) -> None:
        """Wait (bounded) while the coordinator loads the group's __consumer_offsets partition."""
        st = run.state
        deadline = time.monotonic() + 30
        while True:
            r = st["coordinator"].send(DESCRIBE.ConsumerGroupDescribeRequest(
                group_ids=(st["group"],), include_authorized_operations=False))
            code = r.groups[0].error_code
            if code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                            ErrorCode.not_coordinator):
                return
            if time.monotonic() > deadline:
                raise WireError(f"the group coordinator is still loading after 30s ({error_name(code)})")
            time.sleep(0.2)   # polling the coordinator's load, not waiting for an outcome

    def _records(self, run) -> dict:
        """What the coordinator's own records show (ConsumerGroupCurrentMemberAssignmentValue,
        decoded by Kafka's classes): each member's state, partitions pending revocation and,
        from 4.3 on (KIP-1251), the assignment epochs."""
        broker, p, st = run.broker, run.params, run.state
        if getattr(broker, "workdir", None) is None or not st.get("records", True):
            # a broker the user started (--bootstrap): its log is not ours to read
            gone = Absent("the coordinator's records are read from the log of a broker kcheck "
                          "started")
            return {f"{key}[{m}]": gone for m in range(p.members)
                    for key in ("member_state", "pending", "assignment_epochs")}
        if getattr(broker, "coordinator_records", None) is None:
            from kcheck.conform.records import CoordinatorRecords
            broker.coordinator_records = CoordinatorRecords(broker)
        records = broker.coordinator_records
        records.new()
        out = {}
        release = version_key(getattr(broker, "version", ""))
        before_kip1251 = release is not None and release < (4, 3, 0)
        for m in range(p.members):
            value = records.member_assignment(st["group"], self._mid(run, m))
            if value is None:
                continue
            out[f"member_state[{m}]"] = _STATES.get(value["state"], f"state {value['state']}")
            out[f"pending[{m}]"] = sorted(q for tp in value["partitionsPendingRevocation"]
                                          for q, _ in self._record_partitions(run, tp))
            if all("assignmentEpochs" in tp for tp in value["assignedPartitions"]
                   + value["partitionsPendingRevocation"]):
                epochs = [0] * p.partitions
                for tp in value["assignedPartitions"] + value["partitionsPendingRevocation"]:
                    for q, e in self._record_partitions(run, tp, tp["assignmentEpochs"]):
                        epochs[q] = self._to_spec(run, e)
                out[f"assignment_epochs[{m}]"] = epochs
            elif before_kip1251:
                # ConsumerGroupCurrentMemberAssignmentValue has AssignmentEpochs from 4.3 on
                # (KIP-1251); on a later release a record without them is a divergence
                out[f"assignment_epochs[{m}]"] = Absent("the release's records carry no "
                                                        "assignment epochs (KIP-1251 came in 4.3)")
        return out

    def _record_partitions(self, run, tp: dict, values=None):
        """(spec partition, value) for each partition of a record's topic entry that the spec
        models (by its topic id and partition, as Kafka's JSON names them)."""
        which = run.state["which_text"]
        for k, x in enumerate(tp["partitions"]):
            q = which.get((tp.get("topicId"), x))
            if q is not None:
                yield q, (values[k] if values is not None else None)

    def _listed(self, run) -> set:
        g = run.state.get("described")
        return {mb.member_id for mb in g.members} if g is not None else set()

    def _describe(self, run) -> dict:
        """Kafka's view of the group (ConsumerGroupDescribe), in the spec's units."""
        p, st = run.params, run.state
        members = self._describe_raw(run)
        g = st.get("described")
        out = {}
        if g is None:
            return out
        if st.get("group_epoch_pending"):
            out["group_epoch"] = Absent("partitions were added: Kafka bumps the group epoch at "
                                        "the next heartbeat, the spec at once")
        else:
            out["group_epoch"] = self._to_spec(run, int(g.group_epoch))
        out["target_epoch"] = self._to_spec(run, int(g.assignment_epoch))
        owner = {q: -1 for q in range(p.partitions)}
        for m in range(p.members):
            mb = members.get(self._mid(run, m))
            if mb is None:
                out[f"member_epoch[{m}]"] = LEFT
                continue
            out[f"member_epoch[{m}]"] = self._to_spec(run, int(mb.member_epoch))
            out[f"described[{m}]"] = sorted(self._spec_partitions(run, mb.assignment.topic_partitions))
            for q in self._spec_partitions(run, mb.target_assignment.topic_partitions):
                # a partition in two members' targets is shown as both, so that it differs
                # from any one owner the spec can name
                owner[q] = m if owner[q] == -1 else sorted({*(owner[q] if isinstance(owner[q], list)
                                                              else [owner[q]]), m})
        for q, m in owner.items():
            out[f"target_owner[{q}]"] = m
        return out

    def _begin_transaction(self, run, tag: str) -> dict:
        """InitProducerId and AddOffsetsToTxn for the group: what a transactional producer does
        before TxnOffsetCommit (KafkaProducer.sendOffsetsToTransaction)."""
        st = run.state
        txn_id = f"{st['group']}-{tag}"
        if "txn_conn" not in st:
            host, port = st["admin"].find_coordinator(txn_id, key_type=1)
            st["txn_conn"] = run.connect((host, port))
        conn = st["txn_conn"]
        init = schema("init_producer_id", 4)
        for _ in range(50):
            r = conn.send(init.InitProducerIdRequest(transactional_id=txn_id,
                                                     transaction_timeout=ms(TRANSACTION_TIMEOUT_MS)))
            if r.error_code == ErrorCode.none:
                break
            if r.error_code not in (ErrorCode.coordinator_load_in_progress,
                                    ErrorCode.concurrent_transactions, ErrorCode.not_coordinator,
                                    ErrorCode.coordinator_not_available):
                raise WireError(f"InitProducerId {txn_id}: {error_name(r.error_code)}")
            time.sleep(0.1)   # the transaction coordinator is loading or still ending the last one
        producer = {"txn_id": txn_id, "pid": r.producer_id, "epoch": r.producer_epoch}
        add = schema("add_offsets_to_txn", 3)
        r = conn.send(add.AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=producer["pid"],
                                                 producer_epoch=producer["epoch"], group_id=st["group"]))
        if r.error_code != ErrorCode.none:
            raise WireError(f"AddOffsetsToTxn {txn_id}: {error_name(r.error_code)}")
        return producer

    def _commit(self, run, commit, group: str | None = None) -> str:
        st = run.state
        group = group or st["group"]
        req = commit["request"]
        offset = i64(commit.get("offset", len(run.wire_log)))
        if req in ("OFFSET_COMMIT", "OFFSET_COMMIT_V8"):
            oc = schema("offset_commit", 9 if req == "OFFSET_COMMIT" else 8)
            topic, _, part = st["where"][commit["q"]]
            r = st["coordinator"].send(oc.OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=i32(commit["epoch"]),
                member_id=commit["member_id"], group_instance_id=commit["instance_id"],
                topics=(oc.OffsetCommitRequestTopic(name=topic, partitions=(
                    oc.OffsetCommitRequestPartition(partition_index=i32(part),
                                                    committed_offset=offset,
                                                    committed_metadata=""),)),)))
            return error_name(r.topics[0].partitions[0].error_code)
        tc = schema("txn_offset_commit", 5)
        pr = commit["producer"]
        topic, _, part = st["where"][commit["q"]]
        r = st["coordinator"].send(tc.TxnOffsetCommitRequest(
            transactional_id=pr["txn_id"], group_id=group, producer_id=pr["pid"],
            producer_epoch=pr["epoch"], generation_id=i32(commit["epoch"]),
            member_id=commit["member_id"], group_instance_id=commit["instance_id"],
            topics=(tc.TxnOffsetCommitRequestTopic(name=topic, partitions=(
                tc.TxnOffsetCommitRequestPartition(partition_index=i32(part),
                                                   committed_offset=offset,
                                                   committed_metadata=""),)),)))
        error = error_name(r.topics[0].partitions[0].error_code)
        end = schema("end_txn", 3)
        st["txn_conn"].send(end.EndTxnRequest(transactional_id=pr["txn_id"], producer_id=pr["pid"],
                                              producer_epoch=pr["epoch"], committed=False))
        return error

    def end(self, run) -> None:
        st = run.state
        if "coordinator" not in st:
            return
        from kio.schema.leave_group.v5 import request as lg
        st["regex_pending"] = False
        for m in range(run.params.members):   # leave, so the group's timers stay quiet
            if st["in_group"][m]:
                try:
                    if m in st["kafka_member_id"]:     # a classic member: LeaveGroup
                        st["coordinator"].send(lg.LeaveGroupRequest(group_id=st["group"], members=(
                            lg.MemberIdentity(member_id=self._mid(run, m), group_instance_id=None,
                                              reason="kcheck"),)))
                    else:
                        self._heartbeat(run, self._mid(run, m), LEFT, None, self._instance(run, m),
                                        leave=True)
                except Exception:
                    pass
        if st.get("hidden"):
            try:
                self._heartbeat(run, st["hidden"], LEFT, None, None, leave=True)
            except Exception:
                pass

    # -- helpers ---------------------------------------------------------------------------------
    def _server_assignor(self, run) -> str | None:
        """The ServerAssignor a heartbeat names: the stock assignor in the trace's group, none
        (the broker's first, the scripted one) otherwise (the probe group)."""
        stock = getattr(self, "assignor", None)
        return stock if stock and not run.state["group"].endswith("-probe") else None

    def _mid(self, run, m: int) -> str:
        """Slot m's member id: the adapter's own (KIP-1082), or Kafka's for a classic member.
        With a stock assignor, ids that Kafka's assignors see in slot order (_ordered_member_id)."""
        st = run.state
        if getattr(self, "assignor", None) and m < run.params.members:
            return st["kafka_member_id"].get(m) or _ordered_member_id(run.name, m, st["incarnation"][m])
        return st["kafka_member_id"].get(m) or _member_id(run.name, m, st["incarnation"][m])

    def _is_static(self, run, m: int) -> bool:
        return m < run.params.static_members

    def _instance(self, run, m: int) -> str | None:
        return f"{run.state['group']}-instance-{m}" if self._is_static(run, m) else None

    def _to_kafka(self, run, e: int) -> int:
        if e >= 1 and e + run.state["delta"] < 1:
            raise NotDrivable(f"epoch {e} maps to Kafka epoch {e + run.state['delta']} "
                              f"(the setup prefix's epochs run {run.state['delta']} from the spec's)")
        return e + run.state["delta"] if e >= 1 else e

    def _to_spec(self, run, e: int) -> int:
        return e - run.state["delta"] if e >= 1 else e

    def _script(self, run, member_partitions: dict) -> None:
        """Give the scripted assignor the next target, spec partitions by member id (in the
        assignor's words: a partition number, or TOPICID:P with a topic per spec partition).
        With a stock assignor nothing is scripted in the trace's group (the probe group keeps
        the scripted assignor)."""
        st = run.state
        if self._server_assignor(run):
            return
        if st.get("extra"):
            member_partitions = {mid: [f"{_kafka_uuid(st['where'][q][1])}:{st['where'][q][2]}"
                                       for q in qs] for mid, qs in member_partitions.items()}
        run.broker.script_assignment(member_partitions)

    def _script_target(self, run, target: str, joining: int | None = None) -> None:
        """Give the scripted assignor the target a step names ('-': none is computed)."""
        if target == "-":
            return
        st = run.state
        # a static member that left with epoch -2 is still a member of Kafka's group (until its
        # session expires) and the assignor is asked about it too: it gets what the target
        # names for it (nothing, since the spec's target names only members in the group), not
        # the partitions of the last script its member id was given
        slots = {k for k in range(run.params.members) if st["in_group"][k] or st["static_left"][k]}
        if joining is not None:
            slots.add(joining)
        slots |= {int(ch) for ch in target}
        self._script(run, {self._mid(run, k): [q for q, ch in enumerate(target) if int(ch) == k]
                           for k in sorted(slots)})

    def _ok(self, r, what: str) -> None:
        if r.error_code != ErrorCode.none:
            raise RuntimeError(f"{what}: {error_name(r.error_code)} {r.error_message or ''}".strip())


def _kafka_uuid(u) -> str:
    """A topic id as Kafka writes it (Uuid.toString: URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


# MemberState's ids (org.apache.kafka.coordinator.group.modern.MemberState)
_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 3: "UNKNOWN"}


_PATH = re.compile(r"\[(\d+)\]|\.(\w+)")


def _declared(p, flat: dict) -> dict:
    """Flat shown values ('member_epoch[1]', 'holds[0][1]', 'commit[0].epoch') back to declared
    names with their shapes: lists for arrays (nested for two dimensions), dicts for records."""
    out: dict = {}
    for k, v in flat.items():
        base, _, rest = k.partition("[") if "[" in k else (k, "", "")
        if not rest:
            out[k] = v
            continue
        node, key = out, base
        for index, member in _PATH.findall("[" + rest):
            node = node.setdefault(key, {})
            key = int(index) if index else member
        node[key] = v

    def shaped(x):
        if not isinstance(x, dict):
            return x
        if all(isinstance(k, int) for k in x):
            return [shaped(x[i]) for i in sorted(x)]
        return {k: shaped(y) for k, y in x.items()}
    return {k: shaped(v) for k, v in out.items()}


register_adapter("consumer_group", "kcheck.conform.consumer_group:ConsumerGroupAdapter")
