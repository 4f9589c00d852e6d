"""kcheck conform: the driver's judging and the consumer_group adapter's mapping without a broker
(a simulated Kafka that follows a chosen variant of the spec), then, marked `kafka`, the shipped
traces, a seeded walk and deliberately broken adapters on real brokers (one per release per
test session: 4.3.1, 4.2.2 before KIP-1251, and 4.4.0, the newest)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.conform import driver
from kcheck.conform.consumer_group import ConsumerGroupAdapter
from kcheck.conform.driver import (CONFORMS, DIVERGES, EXPECTED, NOT_DRIVABLE, NOT_GIVEN,
                                   SPEC_REGRESSION, Absent, Job, TraceRun, compare, predict,
                                   run_trace, said)
from kcheck.conform.kafka import check_version
from kcheck.layout import layout_of
from kcheck.loader import load_spec
from kcheck.trace import load, replay
from kcheck.trace import random_walk
from conftest_kafka import broker_for, cluster_for

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "consumer_group"
ZOMBIE = ROOT / "counterexamples" / "consumer_group" / "kip1251" / "no-zombie-commit.json"
SPEC = load_spec("consumer_group")


def _job(path: Path) -> Job:
    return driver.load_job(path, "consumer_group")


def _kcheck(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kcheck.cli import run; run()", *args],
                          cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------------------------------------
# Without a broker: a simulated Kafka that runs one variant of the spec

class SimulatedKafka(ConsumerGroupAdapter):
    """The consumer_group adapter's view of the spec, with Kafka replaced by the spec itself in
    `kafka_variant`: what this "Kafka" shows at each step is that variant's prediction, seen
    through the real adapter's `view`. Tests the driver's judging and the record logic."""

    def __init__(self, kafka_variant: str, doc: dict):
        self.kafka_variant, self.doc = kafka_variant, doc

    def begin(self, run, initial):
        run.state["delta"] = 0
        model = SPEC.instantiate(self.kafka_variant, self.doc.get("params", {}))
        words = tuple(layout_of(model).pack(self.doc["state"]))
        self.steps = predict(model, words, self.doc["steps"])
        self.k = 0

    def drive(self, run, action, args):
        step = self.steps[self.k]
        assert (step.action, step.args) == (action, args)
        self.k += 1
        return self.view(run, step)

    def end(self, run):
        pass


class _NoBroker:
    version = "simulated"
    host_port = ("127.0.0.1", 0)


def _simulate(path: Path, kafka_variant: str, version: str, adapter_cls=SimulatedKafka):
    job = _job(path)
    return run_trace(_NoBroker(), adapter_cls(kafka_variant, job.doc), SPEC, job, version)


def test_conforms_when_kafka_runs_the_traces_variant():
    o = _simulate(SCENARIOS / "heartbeat_race_kip1251.json", "kip1251", "4.3.1")
    assert (o.kind, o.step) == (CONFORMS, None)


def test_a_release_running_another_variant_diverges_as_the_record_expects():
    # 4.2.2 runs the strict check: the KIP-1251 trace's last commit is rejected there
    o = _simulate(SCENARIOS / "heartbeat_race_kip1251.json", "strict", "4.2.2")
    assert (o.kind, o.step) == (EXPECTED, 3)
    assert "outcome: spec said NONE, Kafka said ILLEGAL_GENERATION" in o.detail
    assert not o.unexpected


def test_a_divergence_the_record_does_not_expect_is_reported():
    # the same answers from a release the record says runs KIP-1251's rule
    o = _simulate(SCENARIOS / "heartbeat_race_kip1251.json", "strict", "4.3.1")
    assert (o.kind, o.step) == (DIVERGES, 3) and o.unexpected


def test_a_wrong_release_record_is_reported_as_a_divergence():
    # Kafka follows the trace's variant although the record says the release runs another
    # whose prediction differs: the record is wrong, and that is a failure too
    o = _simulate(SCENARIOS / "heartbeat_race_kip1251.json", "kip1251", "4.2.2")
    assert o.kind == DIVERGES and o.step == 3 and "the record expects Kafka 4.2.2" in o.detail


def test_the_zombie_commit_trace_is_the_same_in_kip1251_and_strict():
    # the spec's own record: the strict check accepts the KAFKA-19974 zombie commit too, so the
    # trace does not tell the two releases apart
    for v in ("kip1251", "strict"):
        assert _simulate(ZOMBIE, v, "4.3.1").kind == CONFORMS
    before_19974 = _simulate(ZOMBIE, "unrevoked-epoch-bump", "4.3.1")
    assert before_19974.kind == DIVERGES and before_19974.step == 9


def test_compare_a_key_one_side_does_not_give_is_a_divergence():
    assert compare({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == [("b", 2, 3), ("c", NOT_GIVEN, 4)]
    assert compare({"a": [0, 1], "e": 5}, {"a": [0, 1]}) == [("e", 5, NOT_GIVEN)]
    assert said([("e", 5, NOT_GIVEN)]) == "e: spec said 5, Kafka gave no e"
    assert said([("c", NOT_GIVEN, 4)]) == "c: Kafka said 4, the spec gives no c"
    # a key a side cannot give at this step says why, and is not compared there
    assert compare({"a": 1, "b": Absent("why")}, {"a": 1}) == []
    assert compare({"a": 1}, {"a": 1, "b": Absent("why")}) == []


def test_a_kafka_side_key_dropped_is_caught_not_skipped():
    """The audit's miss: the Kafka-side member_epoch read dropped from ConsumerGroupDescribe
    was compared nowhere. Dropped here from what the simulated Kafka shows, one member at a
    time, the trace diverges at its first step, naming the key."""
    for m in (0, 1):
        class Dropping(SimulatedKafka):
            def drive(self, run, action, args, m=m):
                obs = super().drive(run, action, args)
                obs.pop(f"member_epoch[{m}]", None)
                return obs
        o = _simulate(ZOMBIE, "kip1251", "4.3.1", Dropping)
        assert (o.kind, o.step) == (DIVERGES, 1) and o.unexpected
        assert f"Kafka gave no member_epoch[{m}]" in o.detail


def _regressed(tmp_path, how: str) -> Path:
    """The zombie trace, made a regression of the spec: a step's saved outcome changed, or a
    step that the spec does not enable (member 1 joins twice)."""
    doc = json.loads(ZOMBIE.read_text())
    if how == "outcome":
        doc["steps"][0]["expect"]["outcome"] = "FENCED_MEMBER_EPOCH"
    else:
        doc["steps"].insert(1, {"action": "Join", "args": {"m": 1, "target": "01"}})
    path = tmp_path / f"regressed-{how}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("how,step", [("outcome", 1), ("not enabled", 2)])
def test_a_saved_trace_that_no_longer_replays_is_a_spec_regression(tmp_path, how, step):
    o = run_trace(_NoBroker(), SimulatedKafka("kip1251", {}), SPEC, _job(_regressed(tmp_path, how)),
                  "4.3.1")
    assert (o.kind, o.step) == (SPEC_REGRESSION, step) and o.unexpected
    assert "no longer replays in the spec" in o.detail
    assert driver.exit_code([o]) == 1


def test_a_spec_regression_exits_1_before_any_broker_starts(tmp_path):
    # the bootstrap address has no broker: reaching for it would exit 4 ("cannot reach")
    r = _kcheck("conform", "consumer_group", str(ZOMBIE), str(_regressed(tmp_path, "outcome")),
                "--bootstrap", "127.0.0.1:1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "spec regression at step 1" in r.stdout and "cannot reach" not in r.stderr
    assert "Traceback" not in r.stderr
    # the JSON a script reads (scripts/conformance_table.py asks --which-variant --json)
    r = _kcheck("conform", "consumer_group", str(_regressed(tmp_path, "not enabled")),
                "--bootstrap", "127.0.0.1:1", "--which-variant", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert [t["outcome"] for t in doc["traces"]] == ["spec regression"] and doc["variants"]


def test_the_adapters_view_of_the_zombie_trace():
    doc = load(ZOMBIE)
    model = SPEC.instantiate(doc["variant"], doc["params"])
    steps = predict(model, tuple(layout_of(model).pack(doc["state"])), doc["steps"])
    run = TraceRun(_NoBroker(), "t", model.params, state={"describes_pending": True})
    ad = ConsumerGroupAdapter()
    join = ad.view(run, steps[0])          # Join(m=1, target=01)
    assert join["outcome"] == "NONE" and join["response.member_epoch"] == 2
    assert join["response.assigned"] == []         # p1 is still held by member 0
    assert join["target_owner[1]"] == 1 and join["member_epoch[1]"] == 2
    hb = ad.view(run, steps[1])            # Heartbeat(m=0): p1 pending revocation
    assert hb["response.assigned"] == [0] and hb["described[0]"] == [0, 1]
    run.state["describes_pending"] = False         # before 4.3 describe shows assigned only
    assert ad.view(run, steps[1])["described[0]"] == [0]
    fence = ad.view(run, steps[2])         # FenceMember(m=1): no outcome, the member is gone
    assert "outcome" not in fence and fence["member_epoch[1]"] == -1 and fence["fence.error"] == "NONE"
    last = ad.view(run, steps[-1])
    assert last["outcome"] == "NONE"               # the zombie commit is accepted


def test_the_adapter_reads_the_spec_state_by_member_and_partition():
    """The spec's (member, partition) fields are two-dimensional and a commit in flight is a
    record: the adapter's prediction after a HeartbeatResponse, a rebuilt state, and a commit."""
    from kcheck.conform.consumer_group import _declared
    doc = load(ZOMBIE)
    model = SPEC.instantiate(doc["variant"], doc["params"])
    steps = predict(model, tuple(layout_of(model).pack(doc["state"])), doc["steps"])
    run = TraceRun(_NoBroker(), "t", model.params, state={"describes_pending": True})
    ad = ConsumerGroupAdapter()
    revoked = ad.view(run, steps[7])       # HeartbeatResponse(m=0): p1 revoked by the client
    assert revoked["client_owns[0]"] == [0] and revoked["client_epoch[0]"] == 1
    zombie = ad.view(run, steps[9])        # Heartbeat(m=1): member 1 takes p1 at epoch 4
    assert zombie["response.assigned"] == [1] and zombie["assignment_epochs[1]"] == [0, 4]
    assert zombie["pending[0]"] == [0] and zombie["described[1]"] == [1]
    state = _declared(model.params, steps[3].post)     # after SendCommit(m=0, q=1)
    assert state["holds"] == [["ASSIGNED", "PENDING_REVOCATION"], ["NONE", "NONE"]]
    assert state["commit"] == [{"request": "TXN_OFFSET_COMMIT", "member": 0, "member_id": 0,
                                "epoch": 1, "partition": 1}]
    assert state["member_epoch"] == [1, -1]


def test_initial_states_the_setup_prefix_cannot_reach_are_named():
    ad = ConsumerGroupAdapter()
    doc = load(ZOMBIE)
    p = SPEC.instantiate(doc["variant"], doc["params"]).params
    assert ad.initial_reason(p, doc["state"]) is None
    classic = json.loads(json.dumps(doc["state"]))
    classic["classic"][0] = True
    assert "classic-protocol member" in ad.initial_reason(p, classic)
    moved = json.loads(json.dumps(doc["state"]))
    moved["holds"][0][1], moved["holds"][1][1] = "NONE", "ASSIGNED"   # p1 held off its target
    assert ad.initial_reason(p, moved) == "the initial holds are not the target assignment"
    unrevoked = load(SCENARIOS / "reconcile_unrevoked_to_unrevoked.json")
    why = ad.initial_reason(SPEC.instantiate(None, unrevoked["params"]).params, unrevoked["state"])
    assert "UNREVOKED_PARTITIONS" in why


def test_actions_without_a_request_are_named():
    ad = ConsumerGroupAdapter()
    assert "no request" in ad.action_reason("SomeNewAction", {})
    assert "v6" in ad.action_reason("SendCommit", {"request": "TXN_OFFSET_COMMIT_V6"})
    assert ad.action_reason("Heartbeat", {"m": 0, "target": "-"}) is None


class _ScriptedCoordinator:
    """A coordinator connection that answers offset commits with the given error codes in turn
    and records which group each commit named."""

    def __init__(self, *codes):
        self.codes, self.groups = list(codes), []

    def send(self, request):
        from types import SimpleNamespace
        self.groups.append(request.group_id)
        code = self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]
        return SimpleNamespace(topics=[SimpleNamespace(partitions=[SimpleNamespace(error_code=code)])])


def _barrier_run(coordinator):
    run = TraceRun(_NoBroker(), "t", None)
    run.state.update(group="g", coordinator=coordinator, where=[("topic", None, 0)])
    return run


def test_after_a_move_the_driver_waits_for_a_committed_write_of_its_own(monkeypatch):
    """Issue 14: a new coordinator's committed view can stay behind the old one's until the next
    write; the driver's barrier is an offset commit of a group of its own, retried while the
    coordinator takes over, and a refusal or a timeout is an error that says so."""
    from kio.schema.errors import ErrorCode

    from kcheck.conform import consumer_group
    from kcheck.conform.wire import WireError
    c = _ScriptedCoordinator(ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress,
                             ErrorCode.none)
    ConsumerGroupAdapter()._wait_committed(_barrier_run(c))
    assert c.groups == ["g-barrier"] * 3 and c.codes == [ErrorCode.none]
    with pytest.raises(WireError, match="refused the driver's barrier offset commit: "
                                        "GROUP_AUTHORIZATION_FAILED"):
        ConsumerGroupAdapter()._wait_committed(_barrier_run(
            _ScriptedCoordinator(ErrorCode.group_authorization_failed)))
    monkeypatch.setattr(consumer_group, "MOVE_CATCH_UP_S", 0.0)
    with pytest.raises(WireError, match=r"did not commit a write within 0s of the move "
                                        r"\(last answer NOT_COORDINATOR\)"):
        ConsumerGroupAdapter()._wait_committed(_barrier_run(
            _ScriptedCoordinator(ErrorCode.not_coordinator)))


def test_release_record():
    ad = ConsumerGroupAdapter()
    names = lambda v: [n for n, _ in ad.expected_variants(v)]   # noqa: E731
    assert names("4.2.2") == ["strict", "kafka-20442"]
    assert names("4.3.1") == ["kip1251", "kafka-20442"]
    assert "kip1251" in names("4.4.0")
    assert ad.expected_variants("external") == []


def test_a_trace_not_drivable_is_reported_with_its_reason_not_skipped():
    o = _simulate(SCENARIOS / "offset_commit_v8_classic_member.json", "kip1251", "4.3.1")
    assert o.kind == NOT_DRIVABLE and "UNREVOKED_PARTITIONS" in o.detail


def test_walks_are_seeded_and_replay():
    model = SPEC.instantiate(None, {})
    a, b = random_walk(model, 15, seed=7), random_walk(model, 15, seed=7)
    assert a == b and len(a["steps"]) == 15
    assert random_walk(model, 15, seed=8) != a
    assert replay(model, json.loads(json.dumps(a))).ok
    ad = ConsumerGroupAdapter()
    c = random_walk(model, 5, seed=1, start=lambda s: ad.initial_reason(model.params, s) is None)
    assert ad.initial_reason(model.params, c["state"]) is None


def test_walk_command_saves_a_trace_replay_accepts(tmp_path):
    out = tmp_path / "walk.json"
    r = _kcheck("walk", "consumer_group", "--steps", "8", "--seed", "3", "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = _kcheck("replay", str(out))
    assert r.returncode == 0 and "REPRODUCES" in r.stdout


def test_bad_input_exits_2_in_one_line(tmp_path):
    r = _kcheck("conform", "consumer_group", "--kafka", "3.9.0")
    assert r.returncode == 2 and "4.x release" in r.stderr and "Traceback" not in r.stderr
    r = _kcheck("conform", "shared_consumption")
    assert r.returncode == 2 and "never shipped" in r.stderr
    other = ROOT / "counterexamples" / "producer"
    trace = next(other.glob("*/*.json"))
    r = _kcheck("conform", "consumer_group", str(trace))
    assert r.returncode == 2 and "is a trace of spec producer, not consumer_group" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = _kcheck("conform", "consumer_group", "--move-coordinator-after", "0")
    assert r.returncode == 2 and "step numbers from 1" in r.stderr
    r = _kcheck("conform", "producer", "--move-coordinator-after", "2")
    assert r.returncode == 2 and "does not move coordinators" in r.stderr
    with pytest.raises(ValueError):
        check_version("4.3")


def test_a_broker_that_cannot_start_exits_4_with_the_reason(tmp_path):
    r = _kcheck("conform", "consumer_group", str(ZOMBIE), "--kafka-jars", str(tmp_path))
    assert r.returncode == 4, r.stdout + r.stderr
    assert "could not be started" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _kcheck("conform", "consumer_group", str(ZOMBIE), "--bootstrap", "127.0.0.1:1")
    assert r.returncode == 4 and "cannot reach the broker" in r.stderr


# ---------------------------------------------------------------------------------------------
# On real brokers (one per release per session)

# The session's brokers are shared with the other adapters' tests (tests/conftest_kafka.py): one
# per release, started on first use, stopped at exit.

@pytest.fixture(scope="session")
def kafka_431():
    return broker_for("4.3.1")


@pytest.fixture(scope="session")
def kafka_422():
    return broker_for("4.2.2")


@pytest.fixture(scope="session")
def kafka_440():
    return broker_for("4.4.0")


def _run_all(broker, paths, adapter=None):
    adapter = adapter or ConsumerGroupAdapter()
    return {Path(p).name: run_trace(broker, adapter, SPEC, _job(Path(p)), broker.version)
            for p in paths}


def _shipped():
    return sorted(SCENARIOS.glob("*.json")) + sorted(ZOMBIE.parent.glob("*.json"))


@pytest.mark.kafka
def test_shipped_traces_on_kafka_431(kafka_431):
    out = _run_all(kafka_431, _shipped())
    bad = {n: o.text() for n, o in out.items() if o.unexpected}
    assert not bad
    # the headline: Kafka 4.3.1 accepts the zombie commit, all 11 steps as the spec says
    assert out["no-zombie-commit.json"].kind == CONFORMS and out["no-zombie-commit.json"].steps == 11
    assert out["heartbeat_race_kip1251.json"].kind == CONFORMS
    assert (out["heartbeat_race_strict.json"].kind, out["heartbeat_race_strict.json"].step) == (EXPECTED, 3)
    assert out["static_member_rejoin.json"].kind == CONFORMS
    # a classic-protocol member of a consumer group (JoinGroup/SyncGroup, a hidden consumer-protocol
    # member keeping the group a consumer group), and members starting from a previous epoch
    for name in ("classic_member_illegal_generation", "classic_upgrade_generation",
                 "heartbeat_previous_epoch_accepted", "heartbeat_previous_epoch_lost_twice",
                 "heartbeat_previous_epoch_not_subset_fenced",
                 # a topic dropped by a new regex at the same epoch, then the coordinator's refresh
                 "heartbeat_unsubscribe_revokes_at_same_epoch"):
        assert out[f"{name}.json"].kind == CONFORMS, (name, out[f"{name}.json"].text())
    assert sum(o.kind == CONFORMS for o in out.values()) >= 18
    assert all(o.detail for o in out.values() if o.kind == NOT_DRIVABLE)


@pytest.mark.kafka
def test_shipped_traces_on_kafka_422_before_kip1251(kafka_422):
    out = _run_all(kafka_422, _shipped())
    assert not {n: o.text() for n, o in out.items() if o.unexpected}
    race = out["heartbeat_race_kip1251.json"]
    assert (race.kind, race.step) == (EXPECTED, 3) and "Kafka said ILLEGAL_GENERATION" in race.detail
    assert out["heartbeat_race_strict.json"].kind == CONFORMS
    # 4.2.2 accepts the zombie commit too: the strict check takes a commit at the member epoch,
    # and KAFKA-19974 keeps member 0 at that epoch while it releases p1
    assert out["no-zombie-commit.json"].kind == CONFORMS
    # a classic member's commits, the previous-epoch rule and a topic dropped by regex, as on 4.3.1
    for name in ("classic_member_illegal_generation", "classic_upgrade_generation",
                 "heartbeat_previous_epoch_lost_twice", "heartbeat_unsubscribe_revokes_at_same_epoch"):
        assert out[f"{name}.json"].kind == CONFORMS, (name, out[f"{name}.json"].text())


@pytest.mark.kafka
def test_the_new_behaviours_on_kafka_431(kafka_431):
    cx = ZOMBIE.parent.parent
    out = _run_all(kafka_431, [cx / "subscription-changes" / "no-zombie-commit.json",
                               cx / "metadata-changes" / "no-zombie-commit.json",
                               cx / "lost-responses" / "static-rejoin-accepted.json",
                               cx / "kafka-19233" / "join-accepted.json"])
    # the 6-step zombie through subscription changes and the 8-step one through CreatePartitions
    assert out["no-zombie-commit.json"].kind == CONFORMS     # (the metadata one; same name)
    assert out["static-rejoin-accepted.json"].kind == CONFORMS
    join = out["join-accepted.json"]
    assert (join.kind, join.step) == (EXPECTED, 5) and "KAFKA-19233's fix" in join.detail
    six = run_trace(kafka_431, ConsumerGroupAdapter(), SPEC,
                    _job(cx / "subscription-changes" / "no-zombie-commit.json"), "4.3.1")
    assert six.kind == CONFORMS and six.steps == 6


@pytest.mark.kafka
def test_the_zombie_commit_on_the_newest_release(kafka_440):
    out = _run_all(kafka_440, [ZOMBIE, SCENARIOS / "heartbeat_race_kip1251.json"])
    assert out["no-zombie-commit.json"].kind == CONFORMS
    assert out["heartbeat_race_kip1251.json"].kind == CONFORMS


@pytest.mark.kafka
def test_seeded_walks_conform(kafka_431):
    # Kafka 4.3.1 runs KIP-1251's check without KAFKA-20442's fix: variant kafka-20442 is that
    # release exactly, so every step of a walk of it must conform (walks of the default diverge
    # as expected wherever the group empties)
    model = SPEC.instantiate("kafka-20442", {})
    ad = ConsumerGroupAdapter()
    for seed in (1, 2, 3):
        doc = random_walk(model, 10, seed, start=lambda s: ad.initial_reason(model.params, s) is None)
        o = run_trace(kafka_431, ad, SPEC, Job(f"walk-{seed}", doc), kafka_431.version)
        assert o.kind == CONFORMS, o.text()


class Recording(ConsumerGroupAdapter):
    """The real adapter, keeping what Kafka showed at each step."""

    def __init__(self):
        self.seen = []

    def drive(self, run, action, args):
        self.seen.append(super().drive(run, action, args))
        return self.seen[-1]


@pytest.mark.kafka
def test_the_coordinators_records_are_compared(kafka_431):
    ad = Recording()
    o = run_trace(kafka_431, ad, SPEC, _job(ZOMBIE), kafka_431.version)
    assert o.kind == CONFORMS and len(ad.seen) == 11
    # step 2: member 0 keeps its epoch in UNREVOKED_PARTITIONS with p1 pending revocation
    assert ad.seen[1]["member_state[0]"] == "UNREVOKED_PARTITIONS" and ad.seen[1]["pending[0]"] == [1]
    # step 9 (KAFKA-19974): p1 released, p0 pending, both still at assignment epoch 1 or gone
    assert ad.seen[8]["assignment_epochs[0]"] == [1, 0] and ad.seen[8]["pending[0]"] == [0]
    assert ad.seen[8]["member_state[0]"] == "UNREVOKED_PARTITIONS"


class OffByOneClient(ConsumerGroupAdapter):
    """A broken adapter: its client heartbeats one epoch ahead of what Kafka told it."""

    def drive(self, run, action, args):
        if action == "Heartbeat":
            run.state["client_epoch"][args["m"]] += 1
        return super().drive(run, action, args)


class WrongRecord(ConsumerGroupAdapter):
    """A wrong expected-outcome record: it says 4.3.1 runs the strict check."""
    releases = [("4.0.0", None, "strict", "wrong on purpose")]


@pytest.mark.kafka
def test_a_broken_adapter_or_a_wrong_record_is_a_divergence(kafka_431):
    race = SCENARIOS / "heartbeat_race_kip1251.json"
    o = _run_all(kafka_431, [race], OffByOneClient())["heartbeat_race_kip1251.json"]
    assert o.kind == DIVERGES and o.step == 2 and "FENCED_MEMBER_EPOCH" in o.detail
    o = _run_all(kafka_431, [race], WrongRecord())["heartbeat_race_kip1251.json"]
    assert o.kind == DIVERGES and "the record expects Kafka 4.3.1 to run variant strict" in o.detail


@pytest.mark.kafka
def test_conform_command_with_kafka_jars(tmp_path):
    from kcheck.conform.kafka import fetch
    r = _kcheck("conform", "consumer_group", str(ZOMBIE), str(SCENARIOS / "heartbeat_race_strict.json"),
                "--kafka-jars", str(fetch("4.3.1")), "--out", str(tmp_path),
                "--walks", "2", "--depth", "6", "--seed", "5", "--variant", "kafka-20442")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Kafka 4.3.1" in r.stdout and "group.consumer.assignor.offload.enable=false" in r.stdout
    assert "conforms" in r.stdout and "diverges as expected at step 3" in r.stdout
    assert "walk seed=5 (kafka-20442, 6 steps)" in r.stdout and "walk seed=6" in r.stdout
    assert "3 conforms, 1 diverges as expected (4 traces" in r.stdout


@pytest.mark.kafka
def test_conform_command_on_a_broker_the_user_started(kafka_431, tmp_path, monkeypatch):
    monkeypatch.setenv("KCHECK_ASSIGNOR_DIR", str(kafka_431.assignor_dir))
    r = _kcheck("conform", "consumer_group", str(ZOMBIE), str(SCENARIOS / "heartbeat_race_strict.json"),
                "--bootstrap", kafka_431.bootstrap, "--out", str(tmp_path), "--json")
    # no release record for a broker of unknown version: the strict trace's divergence counts
    assert r.returncode == 1, r.stdout + r.stderr
    out = {Path(t["trace"]).name: t for t in json.loads(r.stdout)["traces"]}
    assert out["no-zombie-commit.json"]["outcome"] == CONFORMS
    assert (out["heartbeat_race_strict.json"]["outcome"], out["heartbeat_race_strict.json"]["step"]) == (DIVERGES, 3)
    assert (tmp_path / "heartbeat_race_strict.kafka-external.wire.txt").exists()


# ---------------------------------------------------------------------------------------------
# On a cluster of three nodes (one per release per session, tests/conftest_kafka.py)

def _move_every_step(path: Path) -> ConsumerGroupAdapter:
    return ConsumerGroupAdapter(coordinator_moves=tuple(range(1, len(load(path)["steps"]) + 1)))


@pytest.mark.kafka
@pytest.mark.parametrize("version", ["4.3.1", "4.2.2"])
def test_the_zombie_commit_survives_coordinator_failovers(version):
    """The group coordinator moves to another node after every step of the zombie trace: the new
    coordinator loads the group from its records, and every step conforms as on one broker (the
    spec has no failover action; a move must change nothing Kafka shows)."""
    cluster = cluster_for(version)
    ad = _move_every_step(ZOMBIE)
    leaders = []
    original = ad._move_coordinator

    def move(run):
        original(run)
        leaders.append(cluster.partition("__consumer_offsets", 0)["leader"])
    ad._move_coordinator = move
    o = run_trace(cluster, ad, SPEC, _job(ZOMBIE), version)
    assert o.kind == CONFORMS and o.steps == 11, o.text()
    # eleven moves, each to another node than the one before
    assert len(leaders) == 11 and all(a != b for a, b in zip(leaders, leaders[1:]))
    # the strict trace diverges exactly as the release record says, failovers or not
    race = SCENARIOS / "heartbeat_race_kip1251.json"
    o = run_trace(cluster, _move_every_step(race), SPEC, _job(race), version)
    assert o.kind == (CONFORMS if version == "4.3.1" else EXPECTED), o.text()
    if version != "4.3.1":      # three JVMs: free the machine (4.3.1's is checked and stopped below)
        from conftest_kafka import stop_cluster
        stop_cluster(version)


@pytest.mark.kafka
def test_a_move_on_one_broker_is_not_drivable(kafka_431):
    o = run_trace(kafka_431, ConsumerGroupAdapter(coordinator_moves=(1,)), SPEC, _job(ZOMBIE), "4.3.1")
    assert o.kind == NOT_DRIVABLE and "cluster of three" in o.detail


@pytest.mark.kafka
def test_the_cluster_moves_leaders_and_stops_with_no_process_left():
    """Three nodes, every one a broker; a partition's leader and a coordinator move by request
    (the leader epoch grows by one each time); stopped, no node's process is left."""
    import os
    from kcheck.conform.wire import Connection
    from conftest_kafka import stop_cluster
    cluster = cluster_for("4.3.1")
    assert len(cluster.nodes) == 3 and len(cluster.pids()) == 3
    with Connection(*cluster.host_port) as c:
        assert sorted(int(b.node_id) for b in c.metadata([]).brokers) == [1, 2, 3]
        c.create_topic("kcheck-cluster-test", 1)
        before = cluster.partition("kcheck-cluster-test", 0)
        assert len(before["replicas"]) == 3 and sorted(before["isr"]) == [1, 2, 3]
        after = cluster.move_leader("kcheck-cluster-test", 0)
        assert after["leader"] != before["leader"] and after["leader_epoch"] == before["leader_epoch"] + 1
        txn = cluster.move_coordinator("kcheck-cluster-test", key_type=1)
        assert c.find_coordinator("kcheck-cluster-test", key_type=1) == \
            cluster.node(txn["leader"]).host_port
    pids = cluster.pids()
    stop_cluster("4.3.1")
    assert cluster.pids() == [] and not [p for p in pids if os.path.exists(f"/proc/{p}")]


def test_a_wait_for_an_event_is_bounded_by_the_load_not_a_fixed_clock(monkeypatch):
    """At load 10-26 on 2 cores, a fixed 20 s bound on the join phase failed a replay that
    passed alone; the bound now stretches with the load (at most ten times)."""
    import os
    from kcheck.conform.broker import generous
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for load, bound in ((0.5, 20.0), (2.0, 20.0), (10.0, 100.0), (26.0, 200.0)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert generous(20.0) == bound


@pytest.mark.kafka
def test_a_signal_prints_the_traces_finished_and_exits_143(kafka_431, tmp_path, monkeypatch, capsys):
    """SIGTERM while the second trace is driven (issue 36: conform printed no verdict for the
    traces already replayed): the first trace's verdict is printed, the broker is let go, and
    the exit is 143. The signal is raised where the driver meets it, in the second run_trace."""
    from kcheck import conform_cli
    from kcheck.bfs import Terminated
    from kcheck.cli import main
    monkeypatch.setenv("KCHECK_ASSIGNOR_DIR", str(kafka_431.assignor_dir))
    real, calls = driver.run_trace, []

    def stopped_at_the_second(*a, **k):
        calls.append(a)
        if len(calls) == 2:
            raise Terminated()
        return real(*a, **k)
    monkeypatch.setattr(conform_cli.driver, "run_trace", stopped_at_the_second)
    code = main(["conform", "consumer_group", str(ZOMBIE), str(SCENARIOS / "heartbeat_race_strict.json"),
                 "--bootstrap", kafka_431.bootstrap, "--out", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 143, err
    [only] = json.loads(out)["traces"]
    assert Path(only["trace"]).name == "no-zombie-commit.json" and only["outcome"] == CONFORMS
    assert "conform terminated (SIGTERM) after 1 of 2 traces" in err


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_broker(tmp_path):
    """conform --wire-logs --out on a read-only filesystem: one line, exit 2, before a broker
    starts (it failed after the run with a traceback). A read-only tmpfs where root can mount one,
    else a path under a regular file."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)],
                             capture_output=True).returncode == 0
    target = ro / "logs" if mounted else tmp_path / "a-file" / "logs"
    if not mounted:
        (tmp_path / "a-file").write_text("")
    try:
        r = _kcheck("conform", "consumer_group", str(ZOMBIE), "--wire-logs", "--out", str(target))
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(ro)], capture_output=True)
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"kcheck: error: --out {target}: cannot write files there") and r.stdout == ""
