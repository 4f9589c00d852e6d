"""Conformance that cannot be fooled (issue 34): which keys each step compares, pinned; every
Kafka-side observation an adapter reads, dropped one at a time on a real broker, is caught as a
divergence; an expected divergence matches only its recorded key and values.

The mutations are mechanical: an adapter subclass drops one key (every member's or partition's
instance of it) from what its ``drive`` returns, which is what a reader that lost that key
returns, and the trace must diverge naming it. The set of keys Kafka gave in the unmutated run
is pinned too, so a key the readers stop giving fails the pin before any mutation is needed."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kcheck.conform import driver
from kcheck.conform.driver import Absent, TraceRun
from kcheck.loader import load_spec
from conftest_kafka import broker_for, cluster_for

ROOT = Path(__file__).resolve().parent.parent


def pattern(key: str) -> str:
    """A key with its member, partition or replica index generalised: member_epoch[1] ->
    member_epoch[m], last_seq@1 -> last_seq@t."""
    return re.sub(r"@\d+", "@t", re.sub(r"\[\d+\]", "[m]", key))


def _paths(spec_name: str) -> list[Path]:
    return sorted((ROOT / "tests" / "scenarios" / spec_name).glob("*.json")) + \
        sorted((ROOT / "counterexamples" / spec_name).glob("*/*.json"))


def _compared_by_action(spec_name: str, state: dict) -> dict[str, set[str]]:
    """Per action, the key patterns the spec's view gives a value for (not Absent) over every
    saved trace of the spec: what the steps of that action compare."""
    spec, adapter = load_spec(spec_name), driver.adapter_for(spec_name)
    out: dict[str, set[str]] = {}
    for path in _paths(spec_name):
        model, _, prediction, regression = driver.spec_prediction(spec, driver.load_job(path, spec_name))
        assert regression is None, regression.text()
        run = TraceRun(None, "pin", model.params, model=model, state=dict(state))
        for step in prediction:
            out.setdefault(step.action, set()).update(
                pattern(k) for k, v in adapter.view(run, step).items() if not isinstance(v, Absent))
    return out


# ---------------------------------------------------------------------------------------------
# Which keys each step compares (the spec's view is the declaration)

GROUP = {"group_epoch", "target_epoch", "member_epoch[m]", "described[m]", "target_owner[m]",
         "member_state[m]", "pending[m]", "assignment_epochs[m]"}
RESPONSE = {"outcome", "response.member_epoch", "response.assigned"}
CONSUMER_GROUP = {
    "Join": GROUP | RESPONSE, "Heartbeat": GROUP | RESPONSE,
    "HeartbeatNewSubscription": GROUP | RESPONSE, "HeartbeatUnsubscribe": GROUP | RESPONSE,
    "HeartbeatUnsubscribeAll": GROUP | RESPONSE,
    # a fenced or unreleased rejoin is refused: no epoch, no assignment in the answer
    "JoinFenced": GROUP | {"outcome"}, "JoinUnreleasedInstance": GROUP | {"outcome"},
    "Leave": GROUP | {"outcome", "response.member_epoch"},
    "HandleCommit": GROUP | {"outcome"}, "AdminCommit": GROUP | {"outcome"},
    "FenceMember": GROUP | {"fence.error"},
    "HeartbeatResponse": GROUP | {"client_epoch[m]", "client_owns[m]"},
    "SendCommit": GROUP, "LoseHeartbeatResponse": GROUP, "SubscriptionResolved": GROUP,
    "TopicPartitionsAdded": GROUP,
}
PARTITION = {"producer_epoch", "txn_open", "last_seq"}
REPLICAS = PARTITION | {"follower." + k for k in PARTITION} | {"leader"}
COORDINATOR = {"txn_epoch", "txn_state", "txn_partition", "appended"}
TWO = {k + "@t" for k in REPLICAS | {"txn_partition"}}
PRODUCER = {
    "InitProducerId": COORDINATOR | REPLICAS - {"last_seq", "follower.last_seq"} | TWO
    - {"last_seq@t", "follower.last_seq@t"} | {"outcome", "response_epoch"},
    "SecondInstanceInitProducerId": COORDINATOR | REPLICAS | {"outcome", "response_epoch"},
    "EpochBump": COORDINATOR | REPLICAS | {"outcome", "response_epoch"},
    "EndTxn": COORDINATOR | REPLICAS | {"outcome", "response_epoch", "leader@t"},
    "AddPartitionsToTxn": COORDINATOR | REPLICAS | {"outcome"},
    "Produce": COORDINATOR | REPLICAS | TWO | {"outcome"},
    "TxnMarkerArrives": COORDINATOR | REPLICAS | TWO | {"outcome"},
    "DeleteRecords": COORDINATOR | REPLICAS - {"last_seq"},
    "ExpireProducer": COORDINATOR | REPLICAS,
    "LeaderFailover": COORDINATOR | REPLICAS - {"follower.last_seq"},
    # the coordinator's timer (a hidden instance's InitProducerId, its answer dropped) while the
    # spec's markers are on their way: only the epochs and which replica leads
    "AbortTimedOutTransaction": {"txn_epoch", "leader"},
    # steps that send nothing: Kafka is not asked (a held failover is, see test below)
    **{a: set() for a in ("BeginTransaction", "Send", "ProduceRequest", "DeliveryTimeout",
                          "CommitTransaction", "AbortTransaction", "WriteTxnMarker",
                          "IdempotentEpochBump", "CoordinatorFailover")},
    # not drivable (KAFKA-15591's race): its steps compare nothing
    "NotLeaderOrFollower": set(),
}
DESCRIBED = {"group_state", "in_group"}
CLASSIC_GROUP = {
    "JoinGroup": DESCRIBED | {"outcome"}, "SyncGroup": DESCRIBED | {"outcome", "assigned"},
    "Heartbeat": DESCRIBED | {"outcome"}, "CommitOffsets": DESCRIBED | {"outcome"},
    "CompleteJoin": DESCRIBED | {"join_error", "generation", "protocol_name", "leader"},
    "SessionTimeout": DESCRIBED, "Bounce": DESCRIBED,
    "JoinGroupResponse": {"member_generation", "subscriptions"},
    # client-side: Kafka is not asked (a failed assignment sends no SyncGroup)
    "StartConsumer": set(), "EnforceRebalance": set(), "AssignmentFails": set(),
}


@pytest.mark.parametrize("spec_name,state,pinned", [
    ("consumer_group", {"describes_pending": True}, CONSUMER_GROUP),
    ("producer", {}, PRODUCER),
    ("classic_group", {}, CLASSIC_GROUP),
])
def test_the_keys_each_step_compares_are_pinned(spec_name, state, pinned):
    got = _compared_by_action(spec_name, state)
    assert {a: sorted(k) for a, k in got.items()} == {a: sorted(k) for a, k in pinned.items()}


def test_a_held_coordinator_failover_compares_what_kafka_shows():
    # the spec moves the coordinator only while it prepares; held, Kafka shows the prepare
    spec = load_spec("producer")
    path = next(p for p in _paths("producer")
                if any(s["action"] == "CoordinatorFailover" for s in driver.load_job(p, "producer").doc["steps"]))
    model, _, prediction, _ = driver.spec_prediction(spec, driver.load_job(path, "producer"))
    step = next(s for s in prediction if s.action == "CoordinatorFailover")
    adapter = driver.adapter_for("producer")
    assert adapter.view(TraceRun(None, "pin", model.params, model=model), step) == {}
    held = adapter.view(TraceRun(None, "pin", model.params, model=model,
                                 state={"held_steps": {step.index}}), step)
    assert {"txn_state", "txn_epoch", "producer_epoch", "appended"} <= set(held)
    assert not any(isinstance(v, Absent) for v in held.values())


# ---------------------------------------------------------------------------------------------
# Every Kafka-side read, dropped one at a time, on a real broker

class _Recording:
    """Mixed into an adapter class: keeps every observation its drive returns."""

    def drive(self, run, action, args):
        obs = super().drive(run, action, args)
        self.seen.append(obs)
        return obs


class _Dropping:
    """Mixed into an adapter class: drops every key of pattern ``self.dropped`` from what its
    drive returns, as a reader that lost that key would."""

    def drive(self, run, action, args):
        obs = super().drive(run, action, args)
        return {k: v for k, v in obs.items() if pattern(k) != self.dropped}


def _mutant(mixin, adapter):
    cls = type(f"{mixin.__name__.strip('_')}{type(adapter).__name__}", (mixin, type(adapter)), {})
    out = cls.__new__(cls)
    out.__dict__.update(adapter.__dict__)
    return out


def _jobs(spec_name: str, traces) -> list[driver.Job]:
    return [t if isinstance(t, driver.Job) else driver.load_job(t, spec_name) for t in traces]


def _kafka_keys(broker, spec_name: str, traces) -> set[str]:
    """The key patterns Kafka gave a value for (not Absent) along these traces (paths or Jobs),
    each of which must conform unmutated."""
    spec = load_spec(spec_name)
    keys = set()
    for job in _jobs(spec_name, traces):
        rec = _mutant(_Recording, driver.adapter_for(spec_name))
        rec.seen = []
        o = driver.run_trace(broker, rec, spec, job, broker.version)
        assert o.kind == driver.CONFORMS, (job.name, o.text())
        keys |= {pattern(k) for obs in rec.seen for k, v in obs.items() if not isinstance(v, Absent)}
    return keys


def _every_drop_is_caught(broker, spec_name: str, traces, keys: set[str]) -> None:
    """Each key dropped alone: some trace diverges naming it (Kafka gave no ...)."""
    spec = load_spec(spec_name)
    missed = {}
    for key in sorted(keys):
        named = r"Kafka gave no " + re.escape(key).replace(r"\[m\]", r"\[\d+\]").replace("@t", r"@\d+")
        texts = []
        for job in _jobs(spec_name, traces):
            mutant = _mutant(_Dropping, driver.adapter_for(spec_name))
            mutant.dropped = key
            o = driver.run_trace(broker, mutant, spec, job, broker.version)
            texts.append(o.text())
            if o.kind == driver.DIVERGES and o.unexpected and re.search(named, o.detail):
                break
        else:
            missed[key] = texts
    assert not missed, missed


CG = ROOT / "counterexamples" / "consumer_group" / "kip1251" / "no-zombie-commit.json"
ZOMBIE_NAME = str(CG)
# every key the consumer_group adapter reads from Kafka (ConsumerGroupHeartbeat, OffsetCommit,
# ConsumerGroupDescribe, the coordinator's records of 4.3 and later, the held response)
CONSUMER_GROUP_KAFKA = GROUP | RESPONSE | {"fence.error", "client_epoch[m]", "client_owns[m]"}


@pytest.mark.kafka
def test_every_consumer_group_read_dropped_is_caught():
    broker = broker_for("4.3.1")
    keys = _kafka_keys(broker, "consumer_group", [CG])
    assert keys == CONSUMER_GROUP_KAFKA
    _every_drop_is_caught(broker, "consumer_group", [CG], keys)


PR = ROOT / "tests" / "scenarios" / "producer"
# on one broker: InitProducerId, AddPartitionsToTxn, Produce, a second instance's fence;
# DescribeTransactions, DescribeProducers and a Fetch after each
PRODUCER_ONE_BROKER = [PR / "init-fences-ongoing-transaction.json"]
PRODUCER_KAFKA = COORDINATOR | PARTITION | {"outcome", "response_epoch"}


@pytest.mark.kafka
def test_every_producer_read_dropped_is_caught():
    broker = broker_for("4.3.1")
    keys = _kafka_keys(broker, "producer", PRODUCER_ONE_BROKER)
    assert keys == PRODUCER_KAFKA
    _every_drop_is_caught(broker, "producer", PRODUCER_ONE_BROKER, keys)


@pytest.mark.kafka
def test_every_producer_replica_read_dropped_is_caught():
    """On the cluster of three: which spec replica Kafka's metadata names the leader, and the
    follower's entry (DescribeProducers at its node), along a walk that moves the leader and
    expires the producer at each replica (test_conform_producer.cluster_walk)."""
    from test_conform_producer import CLUSTER_SEED, cluster_walk
    cluster = cluster_for("4.3.1")
    walk = [driver.Job(f"walk-kip360-{CLUSTER_SEED}", cluster_walk(CLUSTER_SEED))]
    keys = _kafka_keys(cluster, "producer", walk)
    assert keys == PRODUCER_KAFKA | {"leader", "follower.producer_epoch", "follower.txn_open",
                                     "follower.last_seq"}
    _every_drop_is_caught(cluster, "producer", walk, {k for k in keys if k.startswith(("leader", "follower."))})


CL = ROOT / "tests" / "scenarios" / "classic_group"
CLASSIC_KAFKA = {k for keys in CLASSIC_GROUP.values() for k in keys}


@pytest.mark.kafka
def test_every_classic_group_read_dropped_is_caught():
    broker = broker_for("4.3.1")
    # two members join, sync, one bounces to another assignor list: every key of the table
    paths = [CL / "single_bounce_inconsistent_protocol.json"]
    keys = _kafka_keys(broker, "classic_group", paths)
    assert keys == CLASSIC_KAFKA
    _every_drop_is_caught(broker, "classic_group", paths, keys)


# ---------------------------------------------------------------------------------------------
# An expected divergence matches only its recorded keys and values

K20785 = PR / "kafka-20785-kip360.json"


class _SpecAsKafka:
    """Mixed into an adapter class: "Kafka" is the spec in ``self.kafka_variant``, seen through
    the adapter's own view (the driver's judging, without a broker)."""

    def begin(self, run, initial):
        spec = load_spec(self.spec_name)
        job = driver.Job("kafka", self.doc)
        model = driver.model_of(spec, self.kafka_variant, self.doc.get("params", {}))
        self.steps = driver.predict(model, driver.initial_words(model, self.doc), self.doc["steps"])

    def drive(self, run, action, args):
        return self.view(run, self.steps[run.step - 1])

    def end(self, run):
        pass


class _NoBroker:
    version = "simulated"
    host_port = ("127.0.0.1", 0)


def _judged(path: Path, kafka_variant: str, version: str = "4.3.1", broker=None,
            unpinned: int | None = None):
    """The trace judged against "Kafka" (the spec in ``kafka_variant``) or a real broker;
    ``unpinned``: that step's saved outcome taken out of the trace (so that a mutated spec
    answer there is judged by the record, not caught first as a spec regression)."""
    adapter = driver.adapter_for("producer")
    job = driver.load_job(path, "producer")
    if unpinned is not None:
        job.doc["steps"][unpinned - 1].get("expect", {}).pop("outcome", None)
    if broker is None:
        adapter = _mutant(_SpecAsKafka, adapter)
        adapter.kafka_variant, adapter.doc = kafka_variant, job.doc
    return driver.run_trace(broker or _NoBroker(), adapter, load_spec("producer"), job,
                            version if broker is None else broker.version)


def _spec_answers(monkeypatch, outcome: str, at: int = 10) -> None:
    """The spec's answer (kip360's prediction) at step ``at`` of the trace changed to
    ``outcome``: a one-point mutation of the spec's rule."""
    real = driver.predict

    def mutated(model, initial, steps):
        out = real(model, initial, steps)
        if model.variant == "kip360" and len(out) >= at and out[at - 1].action == "EndTxn":
            out[at - 1] = driver.SpecStep(**{**out[at - 1].__dict__, "outcome": outcome})
        return out
    monkeypatch.setattr(driver, "predict", mutated)


def test_the_recorded_kafka_20785_divergence_is_expected():
    o = _judged(K20785, "kafka-20785")
    assert (o.kind, o.step) == (driver.EXPECTED, 10) and not o.unexpected
    assert o.diff == [("outcome", "PRODUCER_FENCED", "INVALID_TXN_STATE")]


def test_a_third_answer_at_the_recorded_step_is_unexpected(monkeypatch):
    # the audit's mutation: the spec says CONCURRENT_TRANSACTIONS where the record has
    # PRODUCER_FENCED (and Kafka INVALID_TXN_STATE); once "diverges as expected", exit 0
    _spec_answers(monkeypatch, "CONCURRENT_TRANSACTIONS")
    # the saved trace pins the spec's answer: the mutated spec no longer replays it
    o = _judged(K20785, "kafka-20785")
    assert (o.kind, o.step) == (driver.SPEC_REGRESSION, 10) and o.unexpected
    # unpinned, the record itself refuses the third answer
    o = _judged(K20785, "kafka-20785", unpinned=10)
    assert (o.kind, o.step) == (driver.DIVERGES, 10) and o.unexpected
    assert "spec said CONCURRENT_TRANSACTIONS, Kafka said INVALID_TXN_STATE" in o.detail
    assert "the record for Kafka 4.3.1 expects outcome: spec said PRODUCER_FENCED" in o.detail
    assert driver.exit_code([o]) == 1


def test_kafka_answering_otherwise_at_the_recorded_step_is_unexpected():
    # "Kafka" with KAFKA-20785's fix (kip360 itself) answers as the spec: the record is stale
    o = _judged(K20785, "kip360")
    assert (o.kind, o.step) == (driver.DIVERGES, 10) and "the record is stale" in o.detail


def _rejoin(later: dict | None = None):
    """The static-keeps-epochs trace (Leave, Join) judged for 4.3.1, whose record says it runs
    kip1251's rules, with "Kafka" running kip1251; ``later`` replaces keys of what it shows at
    step 2, after the step the record expects to diverge."""
    from kcheck.conform.consumer_group import ConsumerGroupAdapter
    path = ROOT / "tests" / "scenarios" / "consumer_group" / "static_member_rejoin_keeps_epochs.json"
    job = driver.load_job(path, "consumer_group")

    class Kafka(_SpecAsKafka, ConsumerGroupAdapter):
        def drive(self, run, action, args):
            obs = super().drive(run, action, args)
            return {**obs, **(later or {})} if run.step == 2 else obs
    adapter = Kafka()
    adapter.kafka_variant, adapter.doc = "kip1251", job.doc
    return driver.run_trace(_NoBroker(), adapter, load_spec("consumer_group"), job, "4.3.1")


def test_past_an_expected_step_the_rest_is_compared_with_the_rule_the_release_runs():
    o = _rejoin()
    assert (o.kind, o.step) == (driver.EXPECTED, 1), o.text()
    assert "step 2 compared with variant kip1251: conform" in o.detail
    # Kafka parting from kip1251's rules after the expected step: once never compared, now caught
    o = _rejoin({"group_epoch": 99})
    assert (o.kind, o.step) == (driver.DIVERGES, 2) and o.unexpected, o.text()
    assert "variant kip1251 predicts group_epoch" in o.detail


@pytest.mark.kafka
def test_the_kafka_20785_mutation_is_caught_on_a_real_broker(monkeypatch):
    broker = broker_for("4.3.1")
    o = _judged(K20785, None, broker=broker)
    assert (o.kind, o.step) == (driver.EXPECTED, 10), o.text()
    _spec_answers(monkeypatch, "CONCURRENT_TRANSACTIONS")
    o = _judged(K20785, None, broker=broker, unpinned=10)
    assert (o.kind, o.step) == (driver.DIVERGES, 10) and o.unexpected, o.text()
    assert "the record for Kafka 4.3.1 expects outcome: spec said PRODUCER_FENCED" in o.detail


# ---------------------------------------------------------------------------------------------
# Walks that cover

def test_a_walk_picks_an_action_type_first_then_an_instance():
    """From consumer_group's initial state AdminCommit has several instances (one per request
    kind) and Join one per target: picked by instance they crowded out the rest; picked by type,
    each type enabled there takes its share of 200 seeded first steps."""
    from collections import Counter
    from kcheck.trace import Executor, random_walk
    from kcheck.layout import initial_words, layout_of
    model = load_spec("consumer_group").instantiate(None, {})
    words = initial_words(model)[0]
    ex = Executor(model)
    enabled = [k for k in range(len(model.instances)) if ex.enabled(words, k)]
    types = Counter(model.instances[k].action.name for k in enabled)
    assert max(types.values()) >= 3      # the skew the old pick had: some type has many instances
    lay = layout_of(model)
    shown = lay.show(lay.unpack_flat(words))
    first = Counter(random_walk(model, 1, seed, start=lambda s: s == shown, executor=ex)["steps"][0]["action"]
                    for seed in range(200))
    assert set(first) == set(types)
    # each type near 200 / types; by instance, the largest type alone took its instances' share
    for name in types:
        assert first[name] >= 200 / len(types) / 2, (name, first)
    biggest = max(types, key=types.get)
    assert first[biggest] < 200 * types[biggest] / len(enabled)


def test_coverage_counts_each_action_and_response_code():
    spec = load_spec("producer")
    walks = [driver.Outcome("w1", "kip360", 3, driver.CONFORMS,
                            exercised=[("InitProducerId", "NONE"), ("Send", None),
                                       ("InitProducerId", "CONCURRENT_TRANSACTIONS")]),
             driver.Outcome("w2", "kip360", 1, driver.CONFORMS, exercised=[("InitProducerId", "NONE")])]
    rows = {a: (n, codes) for a, n, codes in driver.coverage(spec, walks)}
    assert rows["InitProducerId"] == (3, {"CONCURRENT_TRANSACTIONS": 1, "NONE": 2})
    assert rows["Send"] == (1, {"-": 1})
    assert rows["EndTxn"] == (0, {})          # never driven: said, not left out
    assert set(rows) == {a.name for a in spec.actions}


def _kcheck(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", "from kcheck.cli import run; run()", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_walk_parameters_are_checked_in_one_line():
    r = _kcheck("conform", "consumer_group", "--walks", "1", "--param", "nosuch=1",
                "--bootstrap", "127.0.0.1:1")
    assert r.returncode == 2 and "nosuch" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _kcheck("conform", "consumer_group", "--param", "members=2", "--bootstrap", "127.0.0.1:1")
    assert r.returncode == 2 and "--walks" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.kafka
def test_walks_with_parameters_report_what_they_exercised(tmp_path):
    import json
    r = _kcheck("conform", "consumer_group", ZOMBIE_NAME, "--kafka", "4.3.1", "--walks", "2",
                "--depth", "8", "--seed", "5", "--variant", "kafka-20442", "--param", "members=3",
                "--json", "--wire-logs", "--out", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    walks = [t for t in doc["traces"] if t["trace"] != ZOMBIE_NAME and "no-zombie" not in t["trace"]]
    assert len(walks) == 2
    # the walks were drawn with the parameter: their saved traces carry it
    for t in walks:
        assert json.loads(Path(t["trace"]).read_text())["params"]["members"] == 3
    cover = {row["action"]: row for row in doc["walk_coverage"]}
    assert set(cover) == {a.name for a in load_spec("consumer_group").actions}
    driven = sum(row["steps"] for row in cover.values())
    assert sum(t["steps"] for t in walks if t["outcome"] == "conforms") <= driven \
        <= sum(t["steps"] for t in walks)
    assert all(sum(row["outcomes"].values()) == row["steps"] for row in cover.values())
