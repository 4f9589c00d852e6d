"""The KAFKA-19974 zombie commit with Kafka's own server-side assignors, on real brokers (issue 34;
spec/consumer_group_notes.md, finding 12). The scenarios stock_assignor_zombie_commit_{uniform,
range} are driven with ServerAssignor "uniform" / "range" and nothing scripted: Kafka computes
every target itself, and the describe comparison checks that it is the one the trace names.

- 4.2.2, 4.3.1, 4.4.0 (KAFKA-19974's fix is in): the trace conforms, member 0's delayed
  OffsetCommit v9 at its unchanged epoch is accepted, and the group's committed offset for the
  partition goes back from the new owner's offset to the zombie's.
- 4.1.0 (before the fix): member 0 moves to epoch + 1 at step 8, as the release record says
  (variant unrevoked-epoch-bump); the delayed commit is refused with STALE_MEMBER_EPOCH and the
  new owner's offset stays.

Measured on this machine (2 shared cores, `-n 1`, after the rebase on main): the module's eight
tests in 48 s, five brokers started among them (4.1.0 and 4.3.1 at the default timing are this
module's own and stopped after it; 4.2.2, 4.3.1 and 4.4.0 are the session's): 5.6-10.2 s for a
release's first test, its broker's start included, 0.4-0.5 s for a second trace on a running
broker. Under a load of 25-30 the same tests took 5 min 13 s (4.2.2's first test 132 s)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kio.static.primitive import i32

from kcheck.conform import driver
from kcheck.conform.consumer_group import ConsumerGroupAdapter
from kcheck.conform.wire import Connection, error_name, schema
from kcheck.loader import load_spec

from conftest_kafka import broker_for, stop_broker

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "consumer_group"
SPEC = load_spec("consumer_group")

_COMMIT = re.compile(r"OffsetCommitRequest\(group_id=([^,]+), generation_id_or_member_epoch=(-?\d+), "
                     r"member_id=([^,]+), .*partition_index=(\d+), committed_offset=(\d+)")
_ERROR = re.compile(r"error_code=([A-Z_]+)")


def _commits(out) -> list[dict]:
    """The OffsetCommit requests of the trace's group and their answers, from the wire log."""
    found = []
    for request, response in out.wire:
        m = _COMMIT.search(request)
        if m and not m.group(1).endswith("-probe"):
            found.append({"group": m.group(1), "epoch": int(m.group(2)), "member": m.group(3),
                          "partition": int(m.group(4)), "offset": int(m.group(5)),
                          "error": _ERROR.search(response).group(1)})
    return found


def _committed(broker, group: str, topic: str, partition: int) -> int:
    """The group's committed offset of the partition (OffsetFetch v8, read at the coordinator)."""
    conn = Connection(*broker.host_port)
    try:
        host, port = conn.find_coordinator(group)
        coord = conn if (host, port) == broker.host_port else Connection(host, port)
        of = schema("offset_fetch", 8)
        r = coord.send(of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
            group_id=group, topics=(of.OffsetFetchRequestTopics(
                name=topic, partition_indexes=(i32(partition),)),)),), require_stable=False))
        part = r.groups[0].topics[0].partitions[0]
        assert error_name(part.error_code) == "NONE", error_name(part.error_code)
        return int(part.committed_offset)
    finally:
        conn.close()


def _run(version: str, assignor: str):
    job = driver.load_job(SCENARIOS / f"stock_assignor_zombie_commit_{assignor}.json", SPEC.name)
    broker = broker_for(version)
    out = driver.run_trace(broker, ConsumerGroupAdapter(assignor=assignor), SPEC, job, version)
    commits = _commits(out)
    assert len(commits) == 2, out.text()
    owner, zombie = commits
    # the zombie's commit was prepared first (step 1) and carries the older offset
    assert zombie["offset"] < owner["offset"] and zombie["partition"] == owner["partition"] == 2
    assert zombie["epoch"] < owner["epoch"]
    committed = _committed(broker, owner["group"], owner["group"], 2)
    return out, owner, zombie, committed


@pytest.mark.parametrize("version,assignor", [("4.2.2", "uniform"), ("4.3.1", "uniform"),
                                              ("4.4.0", "uniform"), ("4.4.0", "range")])
def test_the_zombie_commit_is_accepted_and_the_offset_goes_back(version, assignor):
    out, owner, zombie, committed = _run(version, assignor)
    assert out.kind == driver.CONFORMS, out.text()
    assert owner["error"] == "NONE" and zombie["error"] == "NONE"
    assert committed == zombie["offset"] < owner["offset"]


@pytest.fixture(scope="module", autouse=True)
def _free_the_4_1_broker():
    """4.1.0's broker is this module's alone: stopped when the module is done."""
    yield
    stop_broker("4.1.0")


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_before_kafka_19974_the_zombie_commit_is_refused(assignor):
    out, owner, zombie, committed = _run("4.1.0", assignor)
    # the release record: 4.1.0 runs unrevoked-epoch-bump's reconciliation (member 0 moves to
    # epoch 2 at step 8); the steps after it are compared with that variant and conform
    assert out.kind == driver.EXPECTED and not out.unexpected, out.text()
    assert out.step == 8 and "unrevoked-epoch-bump" in out.detail, out.text()
    assert "steps 9-14 compared with variant unrevoked-epoch-bump: conform" in out.detail, out.text()
    assert owner["error"] == "NONE" and zombie["error"] == "STALE_MEMBER_EPOCH"
    assert committed == owner["offset"]


def test_at_kafkas_default_assignment_timing_the_zombie_commit_is_accepted_too():
    """Kafka 4.3's defaults (the target deferred by group.consumer.assignment.interval.ms and
    computed on the executor): the joins wait for their target (ConsumerGroupAdapter._settle),
    and the trace conforms step for step, zombie included. This module's own broker."""
    from kcheck.conform.broker import Broker, BrokerError
    try:
        broker = Broker("4.3.1", default_timing=True).start()
    except BrokerError as e:
        pytest.fail(f"the Kafka 4.3.1 broker at default timing could not be started: {e}",
                    pytrace=False)
    try:
        assert "group.consumer.assignment.interval.ms" not in broker.settings
        job = driver.load_job(SCENARIOS / "stock_assignor_zombie_commit_uniform.json", SPEC.name)
        adapter = ConsumerGroupAdapter(assignor="uniform")
        adapter.default_timing = True
        out = driver.run_trace(broker, adapter, SPEC, job, "4.3.1")
        assert out.kind == driver.CONFORMS, out.text()
        owner, zombie = _commits(out)
        assert owner["error"] == zombie["error"] == "NONE"
        assert _committed(broker, owner["group"], owner["group"], 2) == zombie["offset"] < owner["offset"]
    finally:
        broker.stop()
