"""The consumer_group adapter's mapping of regex subscriptions, classic-protocol members and
previous epochs, without a broker (tests/test_conform_core.py runs them on one, `kafka`-marked,
with the shipped traces)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kcheck.conform.consumer_group import ConsumerGroupAdapter, _kafka_uuid
from kcheck.conform.driver import NotDrivable, TraceRun
from kcheck.loader import load_spec
from kcheck.trace import load

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "consumer_group"
CX = ROOT / "counterexamples" / "consumer_group"
SPEC = load_spec("consumer_group")


class _Admin:
    """Stands for the admin connection: CreateTopics answers a new topic id."""

    def __init__(self):
        self.created = []

    def create_topic(self, name, partitions):
        self.created.append((name, partitions))
        return uuid.UUID(int=len(self.created))


class _Broker:
    version = "4.3.1"

    def __init__(self):
        self.scripts = []

    def script_assignment(self, member_partitions):
        self.scripts.append(member_partitions)


def _run(path: Path) -> tuple[ConsumerGroupAdapter, TraceRun, dict]:
    doc = load(path)
    model = SPEC.instantiate(doc["variant"], doc["params"])
    run = TraceRun(_Broker(), "t", model.params, model=model,
                   actions=[(st["action"], dict(st.get("args", {}))) for st in doc["steps"]])
    run.state.update(topic="kcheck-t", admin=_Admin(), extra_topics=[0] * model.params.members,
                     regex=[None] * model.params.members, kafka_member_id={})
    return ConsumerGroupAdapter(), run, doc


def test_a_topic_per_partition_and_the_dropped_one_by_regex():
    ad, run, doc = _run(CX / "unsubscribes" / "no-zombie-commit.json")
    droppers = ad._droppers(run, doc["state"])
    assert droppers == {0: [1]}          # member 0 drops p1's topic (HeartbeatUnsubscribe)
    ad._create_topics(run, droppers)
    st = run.state
    # one topic of one partition per spec partition, and the extra topic only new regexes match
    assert st["admin"].created == [("kcheck-t-t0", 1), ("kcheck-t-t1", 1), ("kcheck-t-x", 1)]
    assert [w[0] for w in st["where"]] == ["kcheck-t-t0", "kcheck-t-t1"]
    st["regex"][0] = ad._initial_regex(run)
    # member 0 has p1's topic by regex only, so an unresolved new regex takes exactly that one
    assert ad._subscription(run, 0) == (("kcheck-t-t0",), "kcheck-t-t[0-9]+")
    assert ad._subscription(run, 1) == (("kcheck-t-t0", "kcheck-t-t1"), None)


def test_the_scripted_assignor_is_told_topic_and_partition():
    ad, run, doc = _run(CX / "unsubscribes" / "no-zombie-commit.json")
    ad._create_topics(run, ad._droppers(run, doc["state"]))
    ad._script(run, {"m1": [1], "m0": [0, 1]})
    t0, t1 = (_kafka_uuid(w[1]) for w in run.state["where"])
    assert run.broker.scripts[-1] == {"m1": [f"{t1}:0"], "m0": [f"{t0}:0", f"{t1}:0"]}
    # one topic: partition numbers, as before
    ad, run, doc = _run(CX / "kip1251" / "no-zombie-commit.json")
    ad._create_topics(run, {})
    ad._script(run, {"m1": [1]})
    assert run.broker.scripts[-1] == {"m1": [1]}


def test_kafka_partitions_map_back_to_the_spec_and_the_extra_topic_is_left_out():
    ad, run, doc = _run(CX / "unsubscribes" / "no-zombie-commit.json")
    ad._create_topics(run, ad._droppers(run, doc["state"]))
    st = run.state

    class TP:
        def __init__(self, topic_id, partitions):
            self.topic_id, self.partitions = topic_id, partitions
    t0, t1 = (w[1] for w in st["where"])
    got = ad._spec_partitions(run, [TP(t1, [0]), TP(st["extra"][1], [0]), TP(t0, [0])])
    assert got == frozenset({0, 1})
    record = {"topicId": _kafka_uuid(t1), "partitions": [0], "assignmentEpochs": [7]}
    assert list(ad._record_partitions(run, record, record["assignmentEpochs"])) == [(1, 7)]
    assert list(ad._record_partitions(run, {"topicId": _kafka_uuid(st["extra"][1]),
                                            "partitions": [0]})) == []


def test_kafka_writes_a_topic_id_as_url_safe_base64_without_padding():
    assert _kafka_uuid(uuid.UUID(bytes=bytes(range(16)))) == "AAECAwQFBgcICQoLDA0ODw"


def test_a_member_that_drops_two_topics_in_two_requests_is_not_drivable():
    """The spec no longer takes this path (one regex change per membership); the three traces
    saved before it did (e.g. HeartbeatUnsubscribe of p1, SubscriptionResolved, HeartbeatUnsubscribe
    of p0 by the same member) are refused with Kafka's reason."""
    ad, run, doc = _run(CX / "unsubscribes" / "no-zombie-commit.json")
    run.actions[:] = [("HeartbeatUnsubscribe", {"m": 1, "q": 1}), ("HeartbeatResponse", {"m": 1}),
                      ("SubscriptionResolved", {"change": 0}), ("HeartbeatUnsubscribe", {"m": 1, "q": 0})]
    with pytest.raises(NotDrivable, match="drops topics 1 and 0 in 2 requests.*subscribedTopicIds"):
        ad._droppers(run, doc["state"])


def test_a_member_subscribed_by_regex_alone_drops_every_topic_in_one_request():
    ad, run, doc = _run(CX / "unsubscribes" / "released-partition-commit-is-stale.json")
    assert "HeartbeatUnsubscribeAll" in [a for a, _ in run.actions]
    assert ad.action_reason("HeartbeatUnsubscribeAll", {"m": 0}) is None
    droppers = ad._droppers(run, doc["state"])
    assert droppers == {0: [0, 1]}
    ad._create_topics(run, droppers)
    run.state["regex"][0] = ad._initial_regex(run)
    # no topic by name: the Java consumer's subscribe(SubscriptionPattern)
    assert ad._subscription(run, 0) == ((), "kcheck-t-t[0-9]+")
    assert ad._subscription(run, 1) == (("kcheck-t-t0", "kcheck-t-t1"), None)


def test_classic_members_and_previous_epochs_are_reachable_starts():
    ad = ConsumerGroupAdapter()
    for name in ("classic_member_illegal_generation", "classic_upgrade_generation",
                 "heartbeat_previous_epoch_accepted", "heartbeat_previous_epoch_lost_twice",
                 "heartbeat_previous_epoch_not_subset_fenced",
                 "heartbeat_unsubscribe_revokes_at_same_epoch"):   # p0 assigned at 9, p1 at 10
        doc = load(SCENARIOS / f"{name}.json")
        params = SPEC.instantiate(doc["variant"], doc["params"]).params
        assert ad.initial_reason(params, doc["state"]) is None, name
    doc = load(SCENARIOS / "heartbeat_previous_epoch_lost_twice.json")
    params = SPEC.instantiate(doc["variant"], doc["params"]).params
    mixed = json.loads(json.dumps(doc["state"]))
    mixed["previous_epoch"][1] = 0        # one member with a previous epoch, one without
    assert "previous epochs {0: 9, 1: 0}" in ad.initial_reason(params, mixed)
    # the unreconciled classic start stays out of reach, with that reason
    doc = load(SCENARIOS / "offset_commit_v8_classic_member.json")
    params = SPEC.instantiate(doc["variant"], doc["params"]).params
    assert "UNREVOKED_PARTITIONS" in ad.initial_reason(params, doc["state"])


def test_only_a_classic_members_commits_are_driven():
    ad, run, _ = _run(SCENARIOS / "classic_upgrade_generation.json")
    run.state["kafka_member_id"][0] = "kafka-given-id"
    assert ad._mid(run, 0) == "kafka-given-id"
    with pytest.raises(NotDrivable, match="classic-protocol member"):
        ad.drive(run, "Heartbeat", {"m": 0, "target": "-"})


# ---------------------------------------------------------------------------------------------
# On the session's 4.3.1 broker (tests/conftest_kafka.py): the regex counterexamples (the classic
# and previous-epoch scenarios run with the shipped traces in tests/test_conform_core.py)

@pytest.mark.kafka
def test_regex_subscriptions_on_kafka_431():
    from kcheck.conform.driver import CONFORMS, NOT_DRIVABLE, Job, run_trace
    from conftest_kafka import broker_for
    broker = broker_for("4.3.1")
    ad = ConsumerGroupAdapter()
    out = {path.stem: run_trace(broker, ad, SPEC, Job(str(path), load(path), path), "4.3.1")
           for path in sorted((CX / "unsubscribes").glob("*.json"))}
    # the zombie through a topic dropped at an unchanged epoch (7 steps): Kafka accepts the commit
    zombie = out["no-zombie-commit"]
    assert (zombie.kind, zombie.steps) == (CONFORMS, 7), zombie.text()
    # SubscriptionResolved: the coordinator's own refresh, 10 s after the last, bumps the epoch
    assert out["eventually-converges"].kind == CONFORMS, out["eventually-converges"].text()
    assert out["zombie-commit-is-stale"].kind == CONFORMS, out["zombie-commit-is-stale"].text()
    assert out["unrevoked-at-target-owns-no-pending"].kind == CONFORMS
    # a member subscribed by a regex alone changes it: both partitions pending revocation at its
    # epoch in one request (HeartbeatUnsubscribeAll), then released with the epoch unchanged
    stale = out["released-partition-commit-is-stale"]
    assert (stale.kind, stale.steps) == (CONFORMS, 4), stale.text()
    assert not [name for name, r in out.items() if r.kind == NOT_DRIVABLE]
