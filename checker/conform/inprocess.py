"""Kafka's group coordinator in-process: the other backend of `kcheck conform`.

``Harness(version)`` compiles harness/InProcessCoordinator.java with the release's Compat source
(harness/Compat_4_2.java, _4_3, _4_4: the shard's builder, timer and metadata calls differ) and
the scripted assignor against that release's jars (the Maven cache of checker/conform/kafka.py;
compiled once per source digest, as the broker's assignor is: broker.compile_java), and starts
one JVM that holds a GroupCoordinatorShard. It is fed frames over a pipe (harness's header
comment has the protocol); several frames written at once cost one round trip.

The adapter does not know which backend it drives: ``InProcessBroker`` and
``InProcessConnection`` stand where ``broker.Broker`` and ``wire.Connection`` stand. A request is
the same kio object, encoded by the same ``wire.encode``; Kafka's generated classes read it
(``new ConsumerGroupHeartbeatRequestData(readable, version)``) and the response comes back in the
wire format, decoded by ``wire.decode``. The coordinator's records are read from the harness
(``InProcessRecords``, the interface of records.CoordinatorRecords) instead of the log."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import uuid
from pathlib import Path

from kcheck.conform import kafka
from kcheck.conform.driver import TraceRun, version_key
from kcheck.conform.wire import WireError, decode, encode, response_class, schema

_HERE = Path(__file__).parent
_MAIN = _HERE / "harness" / "InProcessCoordinator.java"
_ASSIGNOR = _HERE / "assignor" / "ScriptedAssignor.java"
# the first release each Compat source serves, newest first
_COMPAT = [((4, 4, 0), "Compat_4_4.java"), ((4, 3, 0), "Compat_4_3.java"),
           ((4, 2, 0), "Compat_4_2.java")]


_DESCRIBE = schema("consumer_group_describe", 0)
_DESCRIBE_KEY = 69
_OUTSIDE = (22, 25)     # InitProducerId, AddOffsetsToTxn: answered without the shard
# the classic protocol's JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups: answered
# alone (no ConsumerGroupDescribe read along)
_CLASSIC = (11, 12, 13, 14, 15)
_JOIN_GROUP = 11
# requests that change nothing: not in the journal a rebuild replays
_READS = (_DESCRIBE_KEY, 15, 9)


# adapters whose requests wait differently in-process (a parked classic JoinGroup is a handle,
# not a thread): spec -> "module:Class", a subclass of the broker adapter
_IN_PROCESS_ADAPTERS = {
    "classic_group": "kcheck.conform.classic_inprocess:InProcessClassicGroupAdapter",
}


def in_process_adapter(adapter):
    """The adapter to drive the in-process coordinator with: the spec's own, or its in-process
    subclass (the same mapping and view)."""
    import importlib
    target = _IN_PROCESS_ADAPTERS.get(adapter.spec_name)
    if target is None:
        return adapter
    module, cls = target.split(":")
    klass = getattr(importlib.import_module(module), cls)
    return adapter if isinstance(adapter, klass) else klass()


class HarnessError(Exception):
    """The in-process harness could not be built or started, or it failed (one line)."""


def compat_source(version: str) -> Path:
    v = version_key(version)
    for first, name in _COMPAT:
        if v is not None and v >= first:
            return _HERE / "harness" / name
    raise ValueError(f"no in-process harness for Kafka {version}: the harness serves 4.2 and "
                     f"later ({', '.join(kafka.TESTED_VERSIONS)} are tested)")


def coordinator_settings(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The group coordinator's settings of the broker harness (broker.BASE_SETTINGS, and the
    adapter's broker_settings over them, as broker.Broker merges them): the same assignors,
    session and the target computed within the heartbeat."""
    from kcheck.conform.broker import BASE_SETTINGS
    merged = {**BASE_SETTINGS, **(extra or {})}
    return {k: v for k, v in merged.items() if k.startswith(("group.", "offsets."))}


class Parked:
    """A classic JoinGroup the shard answers later (the join phase is still open): a future's
    face (``done``, ``result``) over the harness's parked request. Nothing at the coordinator
    changes between two requests, so ``result`` never waits: the answer is there or it is not
    (concurrent.futures.TimeoutError, as a broker's unanswered request after the wait)."""

    def __init__(self, harness: "Harness", parked_id: int, response_type):
        self.harness, self.id, self.response_type = harness, parked_id, response_type

    def done(self) -> bool:
        return self.harness.parked_answer(self.id, self.response_type) is not None

    def result(self, timeout=None):
        import concurrent.futures
        answer = self.harness.parked_answer(self.id, self.response_type)
        if answer is None:
            raise concurrent.futures.TimeoutError(f"parked request {self.id} is not answered")
        return answer


class Harness:
    """One JVM holding one GroupCoordinatorShard of Kafka VERSION."""

    def __init__(self, version: str, libs: Path | None = None,
                 settings: dict[str, str] | None = None):
        from kcheck.conform.broker import BrokerError, compile_java
        self.version = version
        source = compat_source(version)
        try:
            self.libs = libs or kafka.fetch(version)
            classes = compile_java(self.libs, [_MAIN, source, _ASSIGNOR],
                                   kafka.cache_root() / version / "inprocess")
        except (kafka.KafkaUnavailable, BrokerError) as e:
            raise HarnessError(str(e)) from None
        self.settings = coordinator_settings(settings)
        args = [f"{k}={v}" for k, v in self.settings.items()]
        self.stderr_path = kafka.cache_root() / version / "inprocess" / "harness.log"
        self._stderr = open(self.stderr_path, "w")
        try:
            self.process = subprocess.Popen(
                ["java", "-Xmx2g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                 kafka.classpath(self.libs) + os.pathsep + str(classes),
                 "kcheck.InProcessCoordinator", *args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0)
        except OSError as e:
            raise HarnessError(f"cannot start java: {e}") from None
        self._in, self._out = self.process.stdin, self.process.stdout
        self.calls, self._next_snapshot = 0, 0
        self._outbox: list[bytes] = []
        self._read_cache: dict[bytes, bytes] = {}
        self._records_cache: dict[str, bytes] = {}
        self._last_group: str | None = None
        self._describe_frames: dict[str, bytes] = {}
        # every frame that changes the coordinator since it started, and the journal's length at
        # each snapshot: a revert cuts the journal back, a rebuild replays part of it
        self.journal: list[bytes] = []
        self._journal_at: dict[int, int] = {}
        try:
            self._frame()
        except HarnessError as e:
            self.close()
            raise HarnessError(f"the in-process coordinator of Kafka {version} did not start: "
                               f"{str(e).removeprefix('the in-process coordinator failed: ')} "
                               f"(log: {self.stderr_path})") from None

    # -- the pipe -----------------------------------------------------------------------------
    def _frame(self) -> bytes:
        head = self._out.read(4)
        if len(head) < 4:
            self.process.poll()
            raise HarnessError(f"the in-process coordinator exited (code {self.process.returncode}; "
                               f"log: {self.stderr_path})")
        n = struct.unpack(">i", head)[0]
        data = self._out.read(n)
        while len(data) < n:
            more = self._out.read(n - len(data))
            if not more:
                raise HarnessError("the in-process coordinator closed the pipe mid-frame")
            data += more
        if data[:1] != b"\0":
            raise HarnessError(f"the in-process coordinator failed: {data[1:].decode(errors='replace')}")
        return data[1:]

    def post(self, payload: bytes) -> None:
        """A frame whose reply is read later: it is written with the next batch, no round trip
        of its own."""
        self._outbox.append(payload)

    def batch(self, payloads: list[bytes]) -> list[bytes]:
        """Frames written at once (after the posted ones), their replies read at once: one
        round trip."""
        frames, pending = self._outbox + payloads, len(self._outbox)
        self._outbox = []
        self.calls += len(frames)
        try:
            self._in.write(b"".join(struct.pack(">i", len(p)) + p for p in frames))
        except BrokenPipeError:
            raise HarnessError(f"the in-process coordinator is gone (log: {self.stderr_path})") from None
        replies, failure = [], None
        for _ in range(len(frames)):    # every reply is read, a failed one too: the pipe stays in step
            try:
                replies.append(self._frame())
            except HarnessError as e:
                if self.process is None or self.process.poll() is not None:
                    raise
                failure = failure or e
        if failure is not None:
            raise failure
        return replies[pending:]

    def call(self, payload: bytes) -> bytes:
        return self.batch([payload])[0]

    @staticmethod
    def _str(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">i", len(b)) + b

    # -- operations ---------------------------------------------------------------------------
    # A write is followed, in the same round trip, by the reads the adapter makes after every
    # step (ConsumerGroupDescribe of the group, its member records); their answers are kept
    # until the next write or revert.
    def request(self, request):
        """One kio request through the shard; the kio response."""
        body = encode(request)
        api = request.__api_key__
        frame = b"R" + struct.pack(">hh", api, request.__version__) + body
        if api not in _READS:
            self.journal.append(frame)
        if api in _OUTSIDE or api in _CLASSIC:   # the emulated transaction coordinator's; classic
            self._read_cache.clear()
            self._records_cache.clear()
            reply = self.call(frame)
        elif request.__api_key__ == _DESCRIBE_KEY:
            if frame not in self._read_cache:
                group = request.group_ids[0] if len(request.group_ids) == 1 else None
                self._fetch([frame], group)
            reply = self._read_cache[frame]
        else:
            group = getattr(request, "group_id", None) or self._last_group
            self._last_group = group
            reply = self._fetch([frame], group)[0]
        if reply[:1] == b"\3":
            parked = Parked(self, struct.unpack(">i", reply[1:5])[0], response_class(request))
            if api == _JOIN_GROUP:
                return parked
            raise WireError(f"the coordinator parked the request (API key {api}) to answer it "
                            f"later; only a JoinGroup is expected to wait")
        if reply[:1] != b"\0":
            raise WireError(reply[1:].decode(errors="replace"))
        return decode(response_class(request), reply[1:])

    def parked_answer(self, parked_id: int, response_type):
        """The answer to a parked request, decoded, or None while it is still parked."""
        reply = self.call(b"P" + struct.pack(">i", parked_id))
        return decode(response_type, reply[1:]) if reply[:1] == b"\1" else None

    def fire(self, key: str) -> bool:
        """Fires the coordinator's timer KEY if it is scheduled (its records replayed);
        whether it was."""
        frame = b"F" + self._str(key)
        self.journal.append(frame)
        self._read_cache.clear()
        self._records_cache.clear()
        return self.call(frame) == b"\1"

    def _fetch(self, frames: list[bytes], group: str | None) -> list[bytes]:
        """Frames, then the group's describe and records, in one round trip; the reads cached."""
        self._read_cache.clear()
        self._records_cache.clear()
        if group is None:
            return self.batch(frames)
        describe = self._describe_frames.get(group)
        if describe is None:
            describe = self._describe_frames[group] = (
                b"R" + struct.pack(">hh", _DESCRIBE_KEY, 0)
                + encode(_DESCRIBE.ConsumerGroupDescribeRequest(
                    group_ids=(group,), include_authorized_operations=False)))
        replies = self.batch([f for f in frames if f != describe] + [describe, b"M" + self._str(group)])
        self._read_cache[describe] = replies[-2]
        self._records_cache[group] = replies[-1]
        return replies

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        frame = b"T" + self._str(name) + struct.pack(">i", partitions)
        self.journal.append(frame)
        reply = self.call(frame)
        self._read_cache.clear()
        self._records_cache.clear()
        return uuid.UUID(bytes=reply)

    def script(self, member_texts: dict[str, str]) -> None:
        payload = b"A" + struct.pack(">i", len(member_texts))
        for member, text in member_texts.items():
            payload += self._str(member) + self._str(text)
        self.journal.append(payload)
        self.post(payload)

    def snapshot(self) -> int:
        """A snapshot of the coordinator (no round trip: its id is chosen here)."""
        self._next_snapshot += 1
        self.post(b"S" + struct.pack(">q", self._next_snapshot))
        self._journal_at[self._next_snapshot] = len(self.journal)
        return self._next_snapshot

    def revert(self, snapshot: int) -> None:
        """Back to the snapshot: the timeline structures, and what the harness saved beside
        them. Exact for state held in timeline structures only (see ``rebuild``)."""
        self._read_cache.clear()
        self._records_cache.clear()
        self.post(b"V" + struct.pack(">q", snapshot))
        del self.journal[self._journal_at[snapshot]:]
        for later in [s for s in self._journal_at if s > snapshot]:
            del self._journal_at[later]

    def forget(self, snapshot: int) -> None:
        """Deletes a snapshot no longer needed (a walk's root, done): the registry keeps, for
        the oldest snapshot, every structure changed since it, and a revert to a snapshot that
        has become the oldest starts it afresh (see the harness's revert)."""
        self.post(b"D" + struct.pack(">q", snapshot))
        self._journal_at.pop(snapshot, None)

    def mark(self) -> int:
        """Where the journal is now: ``rebuild`` replays up to here."""
        return len(self.journal)

    def rebuild(self, base: int, mark: int) -> None:
        """The coordinator as it was at MARK, rebuilt: reverted to BASE (a snapshot taken
        before the group existed, so the revert removes it whole) and the journal's frames from
        there to MARK replayed, as a fresh shard would be given them. For state a revert does
        not restore: ClassicGroup's plain fields (its members, generation, state) are changed in
        place. The replies are read with the next batch and dropped."""
        replay = self.journal[self._journal_at[base]:mark]
        self.revert(base)
        for frame in replay:
            self.journal.append(frame)
            self.post(frame)

    def member_records(self, group: str) -> dict:
        if group not in self._records_cache:
            self._fetch([], group)
        return json.loads(self._records_cache[group])

    def offsets(self, group: str) -> str:
        return self.call(b"O" + self._str(group)).decode()

    def close(self) -> None:
        if getattr(self, "_outbox", None) and getattr(self, "process", None) is not None:
            try:
                self.batch([])
            except HarnessError:
                pass
        p, self.process = getattr(self, "process", None), None
        if p is not None:
            try:
                p.stdin.close()
                p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait()
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# What the adapter sees: a broker and connections

IN_PROCESS = ("in-process", 0)


class InProcessRecords:
    """records.CoordinatorRecords' interface, from the harness: the latest
    ConsumerGroupCurrentMemberAssignmentValue of each member (reverted with the shard)."""

    def __init__(self, harness: Harness):
        self.harness = harness
        self.latest: dict = {}

    def new(self) -> list:
        self.latest = {}
        return []

    def member_assignment(self, group: str, member_id: str) -> dict | None:
        if group not in self.latest:
            self.latest[group] = self.harness.member_records(group)
        return self.latest[group].get(member_id)


class InProcessBroker:
    """Where the adapter expects a broker: the version, the scripted assignor, the records."""
    host_port = IN_PROCESS
    workdir = Path("in-process")      # not None: the adapter reads the coordinator's records
    settings: dict = {}

    def __init__(self, harness: Harness):
        self.harness = harness
        self.version = harness.version
        self.coordinator_records = InProcessRecords(harness)

    def script_assignment(self, member_partitions: dict) -> None:
        """As Broker.script_assignment: each member's next target, merged into the script."""
        for member_id in member_partitions:
            if "/" in member_id or member_id.startswith("."):
                raise ValueError(f"member id {member_id!r} cannot name an assignor file")
        self.harness.script({m: ",".join(str(q) for q in sorted(parts))
                             for m, parts in member_partitions.items()})

    def describe(self) -> str:
        return f"Kafka {self.version} in-process (GroupCoordinatorShard)"


class InProcessConnection:
    """Where the adapter expects a wire.Connection: `send` hands the request to the shard."""

    def __init__(self, harness: Harness, log: list | None = None):
        self.harness = harness
        self.host, self.port = IN_PROCESS
        self.log = log

    def send(self, request, response_type=None):
        """The response; a classic JoinGroup the coordinator answers later: inprocess.Parked."""
        return self.harness.request(request)

    def find_coordinator(self, key: str, key_type: int = 0, wait_s: float = 0) -> tuple[str, int]:
        return IN_PROCESS

    def create_topic(self, name: str, partitions: int, wait_s: float = 0,
                     replication_factor: int = -1) -> uuid.UUID:
        return self.harness.create_topic(name, partitions)

    def metadata(self, topics):
        raise WireError("Metadata is not served in-process")

    def close(self) -> None:
        pass


class InProcessRun(TraceRun):
    """A TraceRun whose connections go to the harness."""

    def connect(self, host_port=None):
        return InProcessConnection(self.broker.harness)

    def close(self):
        pass
