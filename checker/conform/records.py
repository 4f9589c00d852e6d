"""The group coordinator's own records, read from the broker's __consumer_offsets log and decoded
by Kafka's generated classes (assignor/RecordDecoder.java, compiled against the release's jars):
what ConsumerGroupDescribe does not show, a member's reconciliation state, its partitions pending
revocation and the assignment epochs (ConsumerGroupCurrentMemberAssignmentValue).

The log segments are read as files (the broker is ours; an appended batch is visible to a reader
at once), parsed into record batches by kio; control batches (transaction markers) are skipped.
On a cluster they are the leader's: the coordinator appends there first (followers copy later)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kio.records.readers import read_batch

from kcheck.conform import kafka

_SOURCE = Path(__file__).parent / "assignor" / "RecordDecoder.java"
_CONTROL = 0x20        # RecordBatch attributes: a control batch


class CoordinatorRecords:
    """Decodes the records a broker's group coordinator appends; `new()` returns those appended
    since the last call."""

    def __init__(self, broker):
        from kcheck.conform.broker import compile_java
        self.broker = broker
        classes = compile_java(broker.libs, _SOURCE, kafka.cache_root() / broker.version / "decoder")
        self.process = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
             kafka.classpath(broker.libs) + ":" + str(classes), "kcheck.RecordDecoder"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.position: dict[Path, int] = {}
        # the latest value of every (type, key) read so far; None after a tombstone
        self.latest: dict[tuple, dict | None] = {}

    def close(self) -> None:
        p, self.process = self.process, None
        if p is not None:
            p.stdin.close()
            p.wait(timeout=10)

    def _decode(self, key: bytes, value: bytes | None) -> dict:
        self.process.stdin.write(f"{key.hex()} {value.hex() if value is not None else '-'}\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def new(self) -> list[dict]:
        out = []
        log_dir = self.broker.log_dir_of("__consumer_offsets", 0)
        for segment in sorted(log_dir.glob("__consumer_offsets-*/*.log")):
            start = self.position.get(segment, 0)
            with open(segment, "rb") as f:
                f.seek(start)
                data = f.read()
            pos = 0
            while pos + 12 <= len(data):
                size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
                end = pos + 12 + size
                if end > len(data):
                    break           # a batch still being written: read it next time
                batch, _ = read_batch(data, pos)
                if not batch.attributes & _CONTROL:
                    for record in batch.records:
                        if record.key is not None:
                            decoded = self._decode(record.key, record.value)
                            if "error" not in decoded:
                                key = (decoded["type"],) + tuple(sorted(
                                    (k, str(v)) for k, v in decoded["key"].items()))
                                self.latest[key] = decoded["value"]
                            out.append(decoded)
                pos = end
            self.position[segment] = start + pos
        return out

    def member_assignment(self, group: str, member_id: str) -> dict | None:
        """The latest ConsumerGroupCurrentMemberAssignmentValue of a member (None: none, or a
        tombstone)."""
        return self.latest.get(("CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT", ("groupId", group),
                                ("memberId", member_id)))
