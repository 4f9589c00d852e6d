"""Kafka's wire protocol through kio (Python types generated from Kafka's own message schemas):
a Connection sends one request at the API version its kio class names and returns the decoded
response; helpers find a coordinator, create a topic and wait for the broker to be ready.

Nothing is hand-packed: the size prefix and the header are the only framing written here, and
the header too is kio's RequestHeader of the version the request's schema names."""
from __future__ import annotations

import datetime
import importlib
import io
import socket
import struct
import time
from dataclasses import fields, is_dataclass
from types import ModuleType

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta

WAIT_S = 30.0      # bound on any wait for the broker (a coordinator loading, a topic appearing)


class WireError(Exception):
    """The connection failed or the broker answered what the protocol does not allow."""


def schema(api: str, version: int, kind: str = "request") -> ModuleType:
    """kio's module for one API at one version, e.g. schema("offset_commit", 9).OffsetCommitRequest."""
    try:
        return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    except ImportError:
        raise WireError(f"kio has no schema for {api} v{version} {kind}") from None


def error_name(code: int) -> str:
    """Kafka's name for an error code (STALE_MEMBER_EPOCH for 113)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def brief(entity) -> str:
    """A one-line rendering of a request or response for wire logs (defaults left out)."""
    if is_dataclass(entity):
        parts = []
        for f in fields(entity):
            v = getattr(entity, f.name)
            if v in (None, (), "") and f.name not in ("error_code",):
                continue
            parts.append(f"{f.name}={brief(v)}")
        return f"{type(entity).__name__}({', '.join(parts)})"
    if isinstance(entity, tuple):
        return "[" + ", ".join(brief(e) for e in entity) + "]"
    if isinstance(entity, ErrorCode):
        return entity.name.upper()
    return str(entity)


def encode(request) -> bytes:
    """A kio request's body as Kafka's wire format has it (at its class's version, no header):
    what the broker reads, and what the in-process harness hands Kafka's generated classes."""
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


_RESPONSES: dict = {}


def response_class(request) -> type:
    """kio's response class for a request (the same API and version)."""
    key = type(request)
    if key not in _RESPONSES:
        module = importlib.import_module(type(request).__module__.rsplit(".", 1)[0] + ".response")
        _RESPONSES[key] = next(v for k, v in vars(module).items()
                               if k.endswith("Response") and isinstance(v, type)
                               and getattr(v, "__api_key__", None) == request.__api_key__
                               and getattr(v, "__type__", None) is not None
                               and v.__type__.name == "response")
    return _RESPONSES[key]


def decode(response_type: type, body: bytes):
    """A response body (no header) as kio's entity of that class."""
    response, _ = entity_reader(response_type)(body, 0)
    return response


class Connection:
    """One TCP connection to one broker. ``send(request)`` is synchronous: the response to each
    request is read before the next is written, so a held (delayed) request is simply one that
    the driver sends later, on its own connection if the trace says so."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "kcheck",
                 log: list | None = None):
        self.host, self.port, self.client_id = host, port, client_id
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0
        self.log = log              # a wire log: (request line, response line) pairs

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise WireError(f"{self.host}:{self.port} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def send(self, request, response_type=None):
        """Send one kio request (its class fixes the API key and version); return the response.
        ``response_type`` replaces kio's response class where kio cannot decode what Kafka sends
        (DescribeTransactions' start time is -1 for a transaction that has not started)."""
        self.correlation += 1
        header_type = request.__header_schema__
        header_fields = {"request_api_key": request.__api_key__,
                         "request_api_version": request.__version__,
                         "correlation_id": i32(self.correlation), "client_id": self.client_id}
        if header_type.__version__ == 0:
            header_fields.pop("client_id")
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(**header_fields))
        payload = buf.getvalue() + encode(request)
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._read(4))[0]
            data = self._read(size)
        except socket.timeout:
            raise WireError(f"no answer from {self.host}:{self.port} to "
                            f"{type(request).__name__} v{request.__version__}") from None
        response_type = response_type or response_class(request)
        header, offset = entity_reader(response_type.__header_schema__)(data, 0)
        if header.correlation_id != self.correlation:
            raise WireError(f"correlation id {header.correlation_id}, expected {self.correlation}")
        response, _ = entity_reader(response_type)(data, offset)
        if self.log is not None:
            self.log.append((f"v{request.__version__} {brief(request)}", brief(response)))
        return response

    # -- helpers every adapter uses -----------------------------------------------------------
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """{api key: (min version, max version)} as the broker advertises them."""
        m = schema("api_versions", 3)
        r = self.send(m.ApiVersionsRequest(client_software_name="kcheck",
                                           client_software_version="1"))
        if r.error_code != ErrorCode.none:
            raise WireError(f"ApiVersions: {error_name(r.error_code)}")
        return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in r.api_keys}

    def metadata(self, topics: list[str] | None):
        m = schema("metadata", 12)
        req = m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(topic_id=None, name=t)
                                                     for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return self.send(req)

    def broker_ready(self) -> bool:
        """The broker has registered with the controller and knows itself as a broker."""
        return len(self.metadata([]).brokers) > 0

    def find_coordinator(self, key: str, key_type: int = 0, wait_s: float = WAIT_S) -> tuple[str, int]:
        """(host, port) of the group (key_type 0) or transaction (1) coordinator of `key`,
        waiting while its partition of __consumer_offsets / __transaction_state loads."""
        m = schema("find_coordinator", 4)
        deadline, last = time.monotonic() + wait_s, "no answer"
        while time.monotonic() < deadline:
            r = self.send(m.FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,)))
            c = r.coordinators[0]
            if c.error_code == ErrorCode.none:
                return c.host, int(c.port)
            last = error_name(c.error_code)
            time.sleep(0.2)   # the coordinator is loading: poll again
        raise WireError(f"no {'group' if key_type == 0 else 'transaction'} coordinator for "
                        f"{key!r} within {wait_s:.0f}s (last answer {last})")

    def create_topic(self, name: str, partitions: int, wait_s: float = WAIT_S,
                     replication_factor: int = -1):
        """Create a topic and wait until every partition has a leader; returns its topic id
        (uuid.UUID). The replication factor is the broker's default.replication.factor unless
        given (-1, KIP-464): 1 on a single broker, 3 on a cluster of three."""
        m = schema("create_topics", 7)
        r = self.send(m.CreateTopicsRequest(
            topics=(m.CreatableTopic(name=name, num_partitions=i32(partitions),
                                     replication_factor=i16(replication_factor), assignments=(),
                                     configs=()),),
            timeout=ms(int(wait_s * 1000)), validate_only=False))
        t = r.topics[0]
        if t.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise WireError(f"CreateTopics {name}: {error_name(t.error_code)} {t.error_message or ''}")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            md = self.metadata([name])
            topic = md.topics[0]
            if (topic.error_code == ErrorCode.none and len(topic.partitions) == partitions
                    and all(p.leader_id >= 0 for p in topic.partitions)):
                return topic.topic_id
            time.sleep(0.1)   # the broker has not applied the new topic's metadata yet: poll
        raise WireError(f"topic {name} has no leader for every partition within {wait_s:.0f}s")


def ms(value: int) -> i32Timedelta:
    """A duration field (timeout_ms, rebalance_timeout_ms) as kio types it."""
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
