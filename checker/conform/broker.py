"""A real Kafka broker for conformance runs: KRaft in combined mode (one process is broker and
controller) on 127.0.0.1, free ports, storage formatted by Kafka's own tool
(kafka.tools.StorageTool), started once per run and stopped at exit (Ctrl-C included).

The settings make a single broker behave as the specs assume: replication factor 1 for the
internal topics, no initial rebalance delay, short session minimums, and the consumer group's
target assignment computed inside the heartbeat that needs it (no assignment interval, no
offloading to the executor: group.consumer.assignment.interval.ms / assignor.offload.enable,
Kafka 4.3's defaults being 1 s and true). Every run prints them (``Broker.settings``).

``ExternalBroker`` wraps a broker the user started (``--bootstrap``): same interface, no logs, and
the settings are the user's."""
from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from checker.conform import kafka

ASSIGNOR_CLASS = "kcheck.ScriptedAssignor"
ASSIGNOR_NAME = "kcheck-scripted"      # ScriptedAssignor.NAME
_ASSIGNOR_SOURCE = Path(__file__).parent / "assignor" / "ScriptedAssignor.java"
START_TIMEOUT_S = 120.0

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

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT">
    <PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.coordinator.group" level="DEBUG"/>
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


def compile_java(libs: Path, source: Path, out: Path) -> Path:
    """Compile one of kcheck's Java helpers against this Kafka's jars into `out` (cached by
    source digest); returns the classes directory."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = out / digest
    if (classes / "kcheck" / (source.stem + ".class")).exists():
        return classes
    if shutil.which("javac") is None:
        raise BrokerError(f"no 'javac' on PATH: {source.name} is compiled against Kafka's jars "
                          f"(install a JDK 17)")
    classes.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", kafka.classpath(libs),
                        str(source)], capture_output=True, text=True)
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["javac failed"])[0]
        raise BrokerError(f"cannot compile {source.name} against {libs}: {first}")
    return classes


def compile_assignor(libs: Path, out: Path) -> Path:
    """Compile ScriptedAssignor against this Kafka's jars into `out` (cached by source digest)."""
    return compile_java(libs, _ASSIGNOR_SOURCE, out)


class Broker:
    """One KRaft broker+controller. ``with Broker("4.3.1") as b: b.bootstrap`` -> "127.0.0.1:PORT"."""

    def __init__(self, version: str | None = None, jars: str | Path | None = None,
                 extra_settings: dict[str, str] | None = None, heap: str = "768m"):
        if jars is not None:
            self.libs = Path(jars)
            if not self.libs.is_dir():
                raise BrokerError(f"--kafka-jars {jars}: not a directory")
            self.version = kafka.jars_version(self.libs)
        else:
            self.version = kafka.check_version(version or kafka.DEFAULT_VERSION)
            self.libs = None
        self.settings = dict(BASE_SETTINGS)
        self.settings.update(extra_settings or {})
        self.heap = heap
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.log_path: Path | None = None
        self.port = 0
        self.assignor_dir: Path | None = None
        self.started_in_s = 0.0
        self.coordinator_records = None   # records.CoordinatorRecords, started on first use

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def describe(self) -> str:
        """One line for the run's header: release, address and the settings that matter."""
        shown = ", ".join(f"{k}={v}" for k, v in self.settings.items()
                          if k.startswith(("group.", "offsets.topic.replication", "transaction.state.log.replication")))
        return f"Kafka {self.version} (KRaft combined, 1 broker) at {self.bootstrap}; {shown}"

    def start(self) -> "Broker":
        if self.libs is None:
            try:
                self.libs = kafka.fetch(self.version)
            except kafka.KafkaUnavailable as e:
                raise BrokerError(str(e)) from None
        if shutil.which("java") is None:
            raise BrokerError("no 'java' on PATH: Kafka needs Java 17 or newer")
        classes = compile_assignor(self.libs, kafka.cache_root() / self.version / "assignor")
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kcheck-kafka-{self.version}-"))
        self.log_path = self.workdir / "broker.log"
        self.assignor_dir = self.workdir / "assignor"
        self.assignor_dir.mkdir()
        self.port, controller = _free_port(), _free_port()
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            **self.settings,
        }
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j2.xml").write_text(_LOG4J2)
        cp = kafka.classpath(self.libs) + os.pathsep + str(classes)
        jvm = ["java", f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}",
               f"-Dkcheck.assignor.dir={self.assignor_dir}", "-cp", cp]
        with open(self.log_path, "w") as log:
            fmt = subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "-t", _cluster_id(),
                                        "-c", str(config)], stdout=log, stderr=subprocess.STDOUT)
        if fmt.returncode != 0:
            raise BrokerError(f"Kafka's StorageTool could not format the storage (exit "
                              f"{fmt.returncode}); log: {self.log_path}")
        t0 = time.monotonic()
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(jvm + ["kafka.Kafka", str(config)], stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        atexit.register(self.stop)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def _wait_ready(self, t0: float) -> None:
        from checker.conform.wire import Connection, WireError
        while True:
            if self.process.poll() is not None:
                raise BrokerError(f"the broker exited with code {self.process.returncode} while "
                                  f"starting; log: {self.log_path}")
            if time.monotonic() - t0 > START_TIMEOUT_S:
                raise BrokerError(f"the broker did not answer within {START_TIMEOUT_S:.0f}s; "
                                  f"log: {self.log_path}")
            try:
                with Connection(*self.host_port, timeout=5.0) as c:
                    c.api_versions()
                    if c.broker_ready():
                        return
            except (OSError, WireError):
                pass
            time.sleep(0.3)   # polling the broker's readiness, not waiting for an outcome

    def stop(self) -> None:
        records, self.coordinator_records = getattr(self, "coordinator_records", None), None
        if records is not None:
            records.close()
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)

    def __enter__(self) -> "Broker":
        return self.start() if self.process is None else self

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
        self.host, self.port = host, int(port)
        self.version = "external"
        self.settings = {}
        d = os.environ.get("KCHECK_ASSIGNOR_DIR")
        self.assignor_dir = Path(d) if d else None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def host_port(self) -> tuple[str, int]:
        return self.host, self.port

    def describe(self) -> str:
        return f"a broker the user started at {self.bootstrap} (its settings are the user's)"

    def start(self) -> "Broker":
        from checker.conform.wire import Connection, WireError
        try:
            with Connection(*self.host_port, timeout=10.0) as c:
                versions = c.api_versions()
        except (OSError, WireError) as e:
            raise BrokerError(f"cannot reach the broker at {self.bootstrap}: {e}") from None
        self.api_versions = versions
        self.process = None
        return self

    def __enter__(self) -> "Broker":
        return self.start()

    def stop(self) -> None:
        pass

    def script_assignment(self, member_partitions: dict[str, list[int]]) -> None:
        if self.assignor_dir is None:
            raise BrokerError("the scripted assignor needs KCHECK_ASSIGNOR_DIR with --bootstrap")
        super().script_assignment(member_partitions)
