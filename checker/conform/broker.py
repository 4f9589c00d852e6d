"""A real Kafka for conformance runs, started once per run and stopped at exit (Ctrl-C included):
``Broker``, one KRaft node in combined mode (broker and controller in one process), or
``Cluster``, three combined nodes (a controller quorum of three, every node a broker) for the
traces that need replicas: a partition's leader moving to another in-sync replica, the group or
transaction coordinator moving with its partition of __consumer_offsets / __transaction_state.
Both bind to 127.0.0.1 on free ports and format their storage with Kafka's own tool
(kafka.tools.StorageTool); every node's log is kept in the run's directory and named in errors.

The settings make the brokers behave as the specs assume: replication factor 1 for the internal
topics on one broker (3 on the cluster), no initial rebalance delay, short session minimums, and
the consumer group's target assignment computed inside the heartbeat that needs it (no
assignment interval, no offloading to the executor: group.consumer.assignment.interval.ms /
assignor.offload.enable, Kafka 4.3's defaults being 1 s and true). Every run prints them
(``Broker.describe``).

``ExternalBroker`` wraps a broker the user started (``--bootstrap``): same interface, no logs, and
the settings are the user's."""
from __future__ import annotations

import atexit
import base64
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kcheck.conform import kafka

ASSIGNOR_CLASS = "kcheck.ScriptedAssignor"
ASSIGNOR_NAME = "kcheck-scripted"      # ScriptedAssignor.NAME
_ASSIGNOR_SOURCE = Path(__file__).parent / "assignor" / "ScriptedAssignor.java"
START_TIMEOUT_S = 120.0          # one node; a cluster's three share the machine: three times this


def generous(seconds: float) -> float:
    """A bound on waiting for an event (a broker ready, a join phase ended), stretched by how
    loaded the machine is now: the waits poll for the event and end as soon as it happens, but
    at load 10-26 on 2 cores a fixed 20 s bound failed a replay as a 'timing' divergence that
    passed alone. At most ten times the bound."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 1.0
    return seconds * min(10.0, max(1.0, load))
STOP_TIMEOUT_S = 10.0           # then the nodes still running are killed

# What every conformance broker runs with (printed with every run). Adapters may add settings of
# their own (Broker(extra_settings=...)); these are the ones the consumer_group adapter relies on.
BASE_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    # classic groups: allow short sessions
    "group.min.session.timeout.ms": "1000",
    # consumer groups (KIP-848): the session is long enough that no timer fires during a trace's
    # replay unasked; the minimum is low so a trace that needs the timer can ask for less
    "group.consumer.session.timeout.ms": "30000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    # the target assignment is computed within the heartbeat (4.3+; older releases ignore these)
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    "group.consumer.assignors": f"{ASSIGNOR_CLASS},uniform,range",
    # transactions: short timeouts so a transaction timer fires within seconds when asked
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "5000",
    # a light broker: the machine is shared
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "log.flush.interval.messages": "1",
}

# The settings that compute the consumer group's target within the heartbeat (above); a broker
# started with default_timing=True leaves them out and runs Kafka's defaults (4.3+: a target at
# most once per second, computed on the executor), as `kcheck conform --kafka-default-timing`
DEFERRED_ASSIGNMENT_SETTINGS = ("group.consumer.assignment.interval.ms",
                                "group.consumer.min.assignment.interval.ms",
                                "group.consumer.assignor.offload.enable")

# What a cluster of three runs with instead: every internal topic on the three nodes, so that its
# partition's leader (the coordinator) can move to another in-sync replica, and topics created
# without an explicit factor (CreateTopics' replication factor -1, KIP-464) on all three.
CLUSTER_SETTINGS = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    # no leadership moves unasked: a node started again (the producer's hold stops one) would
    # take back the partitions it prefers at the next imbalance check, moving a coordinator in
    # the middle of a later trace
    "auto.leader.rebalance.enable": "false",
}

# the settings a run's header line shows (Broker.describe): those a trace's outcome depends on
# (the producer's expiry check interval included: its ExpireProducer steps rely on it)
SHOWN_SETTINGS = ("group.", "offsets.topic.replication", "transaction.state.log.replication",
                  "producer.id.")

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT">
    <PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.coordinator.group" level="DEBUG"/>
    <!-- a held marker (the producer adapter's hold) is retried at once, over and over: one INFO line each -->
    <Logger name="kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler" level="WARN"/>
    <Root level="INFO"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


class BrokerError(Exception):
    """The broker could not be started (one line: the reason and, if any, the log's path)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    """A Kafka Uuid in its base64 form (Uuid.toString); Kafka refuses ids starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def compile_java(libs: Path, source, out: Path) -> Path:
    """Compile one of kcheck's Java helpers (one source, or several compiled together, the
    first naming the result) against this Kafka's jars into `out` (cached by the sources'
    digest); returns the classes directory."""
    sources = [Path(source)] if isinstance(source, (str, Path)) else [Path(s) for s in source]
    digest = hashlib.sha256(b"".join(s.name.encode() + b"\0" + s.read_bytes()
                                     for s in sources)).hexdigest()[:16]
    if len(sources) == 1:       # the digest single sources were always cached under
        digest = hashlib.sha256(sources[0].read_bytes()).hexdigest()[:16]
    classes = out / digest
    if (classes / "kcheck" / (sources[0].stem + ".class")).exists():
        return classes
    names = ", ".join(s.name for s in sources)
    if shutil.which("javac") is None:
        raise BrokerError(f"no 'javac' on PATH: {names} is compiled against Kafka's jars "
                          f"(install a JDK 17)")
    classes.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", kafka.classpath(libs),
                        *map(str, sources)], capture_output=True, text=True)
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["javac failed"])[0]
        raise BrokerError(f"cannot compile {names} against {libs}: {first}")
    return classes


def compile_assignor(libs: Path, out: Path) -> Path:
    """Compile ScriptedAssignor against this Kafka's jars into `out` (cached by source digest)."""
    return compile_java(libs, _ASSIGNOR_SOURCE, out)


def _below(offset: int | None, target: int | None) -> bool:
    """Whether a high watermark (None: not served) is still below the target (None: no target)."""
    return target is not None and (offset is None or offset < target)


def _die_with_parent() -> None:
    """In the child before exec: a broker whose kcheck is gone (killed outright, a crashed test
    run, an exit that cut the stop short) is killed instead of living on (Linux prctl
    PR_SET_PDEATHSIG; elsewhere a no-op). SIGKILL, not SIGTERM: a node of a cluster whose
    quorum is gone hangs in its controlled shutdown, and the data is thrown away anyway."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Node:
    """One Kafka process: its node id, ports, directory (data, config, log) and process."""
    node_id: int
    port: int
    controller_port: int
    home: Path
    process: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.home / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def host_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Broker:
    """One KRaft broker+controller. ``with Broker("4.3.1") as b: b.bootstrap`` -> "127.0.0.1:PORT"."""
    size = 1

    def __init__(self, version: str | None = None, jars: str | Path | None = None,
                 extra_settings: dict[str, str] | None = None, heap: str = "768m",
                 default_timing: bool = False):
        if jars is not None:
            self.libs = Path(jars)
            if not self.libs.is_dir():
                raise BrokerError(f"--kafka-jars {jars}: not a directory")
            self.version = kafka.jars_version(self.libs)
        else:
            self.version = kafka.check_version(version or kafka.DEFAULT_VERSION)
            self.libs = None
        self.settings = dict(BASE_SETTINGS)
        if self.size > 1:
            self.settings.update(CLUSTER_SETTINGS)
        self.settings.update(extra_settings or {})
        if default_timing:
            for key in DEFERRED_ASSIGNMENT_SETTINGS:
                self.settings.pop(key, None)
        self.heap = heap
        self.nodes: list[Node] = []
        self.workdir: Path | None = None
        self.assignor_dir: Path | None = None
        self.started_in_s = 0.0
        self.coordinator_records = None   # records.CoordinatorRecords, started on first use
        self._classes: Path | None = None

    # -- where it runs ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self.nodes[0].port if self.nodes else 0

    @property
    def process(self) -> subprocess.Popen | None:
        return self.nodes[0].process if self.nodes else None

    @property
    def log_path(self) -> Path | None:
        return self.nodes[0].log_path if self.nodes else None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def node_at(self, host_port: tuple[str, int]) -> Node | None:
        return next((n for n in self.nodes if n.host_port == tuple(host_port)), None)

    def log_dir_of(self, topic: str, partition: int) -> Path:
        """The data directory of the node that leads this partition (one broker: its own)."""
        return self.nodes[0].data_dir

    def describe(self) -> str:
        """One line for the run's header: release, address and the settings that matter."""
        shown = ", ".join(f"{k}={v}" for k, v in self.settings.items()
                          if k.startswith(SHOWN_SETTINGS))
        return f"Kafka {self.version} (KRaft combined, 1 broker) at {self.bootstrap}; {shown}"

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "Broker":
        if self.libs is None:
            try:
                self.libs = kafka.fetch(self.version)
            except kafka.KafkaUnavailable as e:
                raise BrokerError(str(e)) from None
        if shutil.which("java") is None:
            raise BrokerError("no 'java' on PATH: Kafka needs Java 17 or newer")
        self._classes = compile_assignor(self.libs, kafka.cache_root() / self.version / "assignor")
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kcheck-kafka-{self.version}-"))
        self.assignor_dir = self.workdir / "assignor"
        self.assignor_dir.mkdir()
        # one broker keeps the layout of earlier runs (data and broker.log in the run's directory)
        homes = [self.workdir] if self.size == 1 else \
            [self.workdir / f"node-{k}" for k in range(1, self.size + 1)]
        self.nodes = [Node(k, _free_port(), _free_port(), home)
                      for k, home in enumerate(homes, start=1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        cluster_id = _cluster_id()
        atexit.register(self.stop)
        t0 = time.monotonic()
        try:
            for n in self.nodes:
                n.home.mkdir(parents=True, exist_ok=True)
                self._format(n, voters, cluster_id)
            for n in self.nodes:
                self._launch(n)
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def _config(self, n: Node, voters: str) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(n.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{n.port},CONTROLLER://127.0.0.1:{n.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{n.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(n.data_dir),
            **self.settings,
        }
        config = n.home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (n.home / "log4j2.xml").write_text(_LOG4J2)
        return config

    def _jvm(self, n: Node) -> list[str]:
        cp = kafka.classpath(self.libs) + os.pathsep + str(self._classes)
        return ["java", f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={n.home / 'log4j2.xml'}",
                f"-Dkcheck.assignor.dir={self.assignor_dir}", "-cp", cp]

    def _format(self, n: Node, voters: str, cluster_id: str) -> None:
        config = self._config(n, voters)
        with open(n.log_path, "w") as log:
            fmt = subprocess.run(self._jvm(n) + ["kafka.tools.StorageTool", "format", "-t", cluster_id,
                                                 "-c", str(config)], stdout=log, stderr=subprocess.STDOUT)
        if fmt.returncode != 0:
            raise BrokerError(f"Kafka's StorageTool could not format node {n.node_id}'s storage "
                              f"(exit {fmt.returncode}); log: {n.log_path}")

    def _launch(self, n: Node) -> None:
        with open(n.log_path, "a") as log:
            n.process = subprocess.Popen(self._jvm(n) + ["kafka.Kafka", str(n.home / "server.properties")],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    def _wait_ready(self, t0: float, nodes: list[Node] | None = None) -> None:
        """Until every node answers and the metadata lists every broker (bounded; the log of a
        node that exits or never answers is named)."""
        from kcheck.conform.wire import Connection, WireError
        limit = generous(START_TIMEOUT_S * self.size)
        for n in nodes or self.nodes:
            while True:
                if n.process.poll() is not None:
                    raise BrokerError(f"the broker exited with code {n.process.returncode} while "
                                      f"starting; log: {n.log_path}")
                if time.monotonic() - t0 > limit:
                    raise BrokerError(f"the broker did not answer within {limit:.0f}s; "
                                      f"log: {n.log_path}")
                try:
                    with Connection(*n.host_port, timeout=5.0) as c:
                        c.api_versions()
                        if len(c.metadata([]).brokers) >= len(self.nodes):
                            break
                except (OSError, WireError):
                    pass
                time.sleep(0.3)   # polling the broker's readiness, not waiting for an outcome

    def stop(self) -> None:
        records, self.coordinator_records = getattr(self, "coordinator_records", None), None
        if records is not None:
            records.close()
        # every node at once: one by one, the last would lose its quorum and hang in its
        # controlled shutdown until killed
        running = [(n, n.process) for n in getattr(self, "nodes", []) if n.running()]
        for n, p in running:
            n.process = None
            p.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for _, p in running:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    @staticmethod
    def _stop_node(n: Node) -> None:
        p, n.process = n.process, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)

    def pids(self) -> list[int]:
        """The process ids of the nodes still running (the tests assert none is left)."""
        return [n.process.pid for n in self.nodes if n.running()]

    def __enter__(self) -> "Broker":
        return self.start() if not self.nodes else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the scripted assignor --------------------------------------------------------------
    def script_assignment(self, member_partitions: dict[str, list[int]]) -> None:
        """The next target assignment computed for these members (by member id)."""
        for member_id, parts in member_partitions.items():
            if "/" in member_id or member_id.startswith("."):
                raise ValueError(f"member id {member_id!r} cannot name an assignor file")
            tmp = self.assignor_dir / f".{member_id}.tmp"
            tmp.write_text(",".join(str(q) for q in sorted(parts)))
            tmp.replace(self.assignor_dir / member_id)   # atomic: the assignor never reads half

    def assignor_calls(self) -> int:
        calls = self.assignor_dir / "calls.log"
        return len(calls.read_text().splitlines()) if calls.exists() else 0


class ExternalBroker(Broker):
    """A broker the user started (--bootstrap HOST:PORT). The scripted assignor is available only
    if the user configured it and passes its directory in KCHECK_ASSIGNOR_DIR."""

    def __init__(self, bootstrap: str):
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--bootstrap {bootstrap!r}: give HOST:PORT")
        super().__init__(version=kafka.DEFAULT_VERSION)
        self.host, self._port = host, int(port)
        self.version = "external"
        self.settings = {}
        d = os.environ.get("KCHECK_ASSIGNOR_DIR")
        self.assignor_dir = Path(d) if d else None

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def host_port(self) -> tuple[str, int]:
        return self.host, self.port

    def describe(self) -> str:
        return f"a broker the user started at {self.bootstrap} (its settings are the user's)"

    def start(self) -> "Broker":
        from kcheck.conform.wire import Connection, WireError
        try:
            with Connection(*self.host_port, timeout=10.0) as c:
                versions = c.api_versions()
        except (OSError, WireError) as e:
            raise BrokerError(f"cannot reach the broker at {self.bootstrap}: {e}") from None
        self.api_versions = versions
        return self

    def __enter__(self) -> "Broker":
        return self.start()

    def stop(self) -> None:
        pass

    def script_assignment(self, member_partitions: dict[str, list[int]]) -> None:
        if self.assignor_dir is None:
            raise BrokerError("the scripted assignor needs KCHECK_ASSIGNOR_DIR with --bootstrap")
        super().script_assignment(member_partitions)


class Cluster(Broker):
    """Three KRaft nodes, each broker and controller (a quorum of three), for the traces that need
    replicas. Internal topics and topics created without a factor have three replicas; the moves
    a spec's failover actions stand for are requests to the cluster, not process restarts:

    - ``move_leader(topic, partition)``: AlterPartitionReassignments puts another in-sync replica
      first (same replica set, so the reassignment completes at once), then ElectLeaders
      (PREFERRED) makes it the leader: the controller's path for a preferred election
      (ReplicationControlManager.electLeaders), the leader epoch + 1;
    - ``move_coordinator(key, key_type)``: the same for the partition of __consumer_offsets (0) or
      __transaction_state (1) that holds the key; the new leader loads the partition and becomes
      its coordinator (coordinator epoch = the partition's leader epoch), the old one unloads it;
    - ``stop_node(id)`` / ``start_node(id)``: a broker shut down (controlled shutdown moves its
      leaderships) and started again.

    ``with Cluster("4.3.1") as c:`` as for ``Broker``; ``c.host_port`` is node 1's address."""
    size = 3

    def __init__(self, version: str | None = None, jars: str | Path | None = None,
                 extra_settings: dict[str, str] | None = None, heap: str = "512m",
                 default_timing: bool = False):
        super().__init__(version, jars, extra_settings, heap, default_timing)

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.settings.items()
                          if k.startswith(SHOWN_SETTINGS + ("default.replication",)))
        nodes = ", ".join(f"node {n.node_id} at 127.0.0.1:{n.port}" for n in self.nodes)
        return f"Kafka {self.version} (KRaft, 3 combined broker+controller nodes: {nodes}); {shown}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) or "127.0.0.1:0"

    # -- reading the cluster ------------------------------------------------------------------
    def _admin(self):
        from kcheck.conform.wire import Connection
        for n in self.nodes:
            if n.running():
                try:
                    return Connection(*n.host_port, client_id="kcheck-cluster")
                except OSError:
                    continue
        raise BrokerError(f"no node of the cluster answers; logs: {self.workdir}/node-*/broker.log")

    def partition(self, topic: str, partition: int) -> dict:
        """{leader, leader_epoch, replicas, isr} of one partition, as the metadata shows it."""
        from kcheck.conform.wire import WireError
        with self._admin() as c:
            t = c.metadata([topic]).topics[0]
        for p in t.partitions:
            if int(p.partition_index) == partition:
                return {"leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
                        "replicas": [int(r) for r in p.replica_nodes],
                        "isr": [int(r) for r in p.isr_nodes]}
        raise WireError(f"{topic}-{partition} is not in the metadata")

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self.node(self.partition(topic, partition)["leader"]).data_dir

    def high_watermark(self, topic: str, partition: int, node_id: int) -> int | None:
        """The partition's high watermark as node ``node_id`` serves it (ListOffsets, latest,
        read_uncommitted); None when that node does not lead it (yet)."""
        from kio.static.primitive import i8, i32, i64

        from kcheck.conform.wire import Connection, schema
        m = schema("list_offsets", 7)
        with Connection(*self.node(node_id).host_port, client_id="kcheck-cluster") as c:
            r = c.send(m.ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=(
                m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                    partition_index=i32(partition), timestamp=i64(-1)),)),)))
        part = r.topics[0].partitions[0]
        return int(part.offset) if part.error_code == 0 else None

    # -- moves ----------------------------------------------------------------------------------
    def move_leader(self, topic: str, partition: int, to: int | None = None,
                    wait_s: float = 60.0, wait_committed: bool = True) -> dict:
        """Make another in-sync replica (``to``, or the next in the ISR after the leader) the
        partition's leader; returns the partition after the move, once the new leader has
        committed what the old one had (``wait_committed=False``: at once)."""
        from kio.static.primitive import i8, i32

        from kcheck.conform.wire import WireError, error_name, ms, schema
        before = self.partition(topic, partition)
        leader = before["leader"]
        if to is None:
            others = [r for r in before["isr"] if r != leader]
            if not others:
                raise WireError(f"{topic}-{partition} has no other in-sync replica "
                                f"(ISR {before['isr']})")
            to = others[0]
        if to not in before["isr"]:
            raise WireError(f"node {to} is not an in-sync replica of {topic}-{partition} "
                            f"(ISR {before['isr']})")
        order = [to] + [r for r in before["replicas"] if r != to]
        # what the old leader has committed: the new one serves reads at its own high watermark,
        # which lags until the followers fetch from it (see the wait at the end)
        committed = self.high_watermark(topic, partition, leader)
        apr = schema("alter_partition_reassignments", 0)
        el = schema("elect_leaders", 2)
        deadline = time.monotonic() + wait_s
        with self._admin() as c:
            r = c.send(apr.AlterPartitionReassignmentsRequest(timeout=ms(int(wait_s * 1000)), topics=(
                apr.ReassignableTopic(name=topic, partitions=(apr.ReassignablePartition(
                    partition_index=i32(partition), replicas=tuple(i32(x) for x in order)),)),)))
            errors = [p.error_code for t in r.responses for p in t.partitions]
            if r.error_code or any(errors):
                code = r.error_code or next(e for e in errors if e)
                raise WireError(f"AlterPartitionReassignments {topic}-{partition} -> {order}: "
                                f"{error_name(code)}")
            while self.partition(topic, partition)["replicas"] != order:
                if time.monotonic() > deadline:
                    raise WireError(f"{topic}-{partition}'s replicas are not {order} within {wait_s:.0f}s")
                time.sleep(0.1)   # polling the metadata for the reassignment, not an outcome
            while True:
                r = c.send(el.ElectLeadersRequest(election_type=i8(0), timeout=ms(int(wait_s * 1000)),
                                                  topic_partitions=(el.TopicPartitions(
                                                      topic=topic, partitions=(i32(partition),)),)))
                codes = [p.error_code for t in r.replica_election_results for p in t.partition_result]
                now = self.partition(topic, partition)
                if now["leader"] == to:
                    break
                # ELECTION_NOT_NEEDED: the controller has elected it already (metadata to follow)
                if r.error_code or any(e and error_name(e) != "ELECTION_NOT_NEEDED" for e in codes):
                    code = r.error_code or next(e for e in codes if e)
                    if error_name(code) not in ("PREFERRED_LEADER_NOT_AVAILABLE", "NOT_CONTROLLER",
                                                "REQUEST_TIMED_OUT"):
                        raise WireError(f"ElectLeaders {topic}-{partition} -> node {to}: "
                                        f"{error_name(code)}")
                if time.monotonic() > deadline:
                    raise WireError(f"node {to} did not become {topic}-{partition}'s leader within "
                                    f"{wait_s:.0f}s (leader {now['leader']})")
                time.sleep(0.1)   # the metadata follows the election: poll
        # A new leader's high watermark is the one it last learned as a follower, and a
        # coordinator serves reads (ConsumerGroupDescribe, OffsetFetch, DescribeTransactions) at
        # its last committed offset: until the followers fetch from the new leader, it shows an
        # older state than the old leader had committed and answered (measured on 4.3.1: a
        # describe right after the move lacked a member whose join had been answered). Wait
        # until the new leader has committed what the old one had.
        while wait_committed and _below(self.high_watermark(topic, partition, to), committed):
            if time.monotonic() > deadline:
                raise WireError(f"{topic}-{partition}'s new leader {to} has not committed offset "
                                f"{committed} within {wait_s:.0f}s")
            time.sleep(0.05)   # the followers fetch from the new leader: poll its high watermark
        return now

    def move_coordinator(self, key: str, key_type: int = 0, wait_s: float = 60.0,
                         wait_committed: bool = True) -> dict:
        """Move the group (key_type 0) or transaction (1) coordinator of ``key`` to another node:
        its internal topic's partition gets a new leader; returns that partition after the move
        once FindCoordinator names the new node and it has loaded the partition."""
        from kcheck.conform.wire import WireError
        topic = "__consumer_offsets" if key_type == 0 else "__transaction_state"
        with self._admin() as c:     # FindCoordinator creates the internal topic if it is new
            c.find_coordinator(key, key_type, wait_s=wait_s)
        # one partition per internal topic (BASE_SETTINGS), so every key lives in partition 0
        after = self.move_leader(topic, 0, wait_s=wait_s, wait_committed=wait_committed)
        leader = self.node(after["leader"])
        deadline = time.monotonic() + wait_s
        with self._admin() as c:
            while True:
                try:
                    if tuple(c.find_coordinator(key, key_type, wait_s=wait_s)) == leader.host_port:
                        return after
                except WireError:
                    pass
                if time.monotonic() > deadline:
                    raise WireError(f"FindCoordinator does not name node {leader.node_id} for "
                                    f"{key!r} within {wait_s:.0f}s")
                time.sleep(0.1)   # the new coordinator is loading: poll

    def stop_node(self, node_id: int) -> None:
        """Shut one node down (SIGTERM: a controlled shutdown, its leaderships move first)."""
        self._stop_node(self.node(node_id))

    def start_node(self, node_id: int) -> None:
        """Start a stopped node again on the same ports and storage; bounded wait until it serves."""
        n = self.node(node_id)
        if n.running():
            return
        self._launch(n)
        self._wait_ready(time.monotonic(), [n])
