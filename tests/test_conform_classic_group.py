"""The classic_group spec's conformance adapter (checker/conform/classic_group.py): its mapping and
the ConsumerProtocol bytes without a broker, then (marked `kafka`) every scenario and saved
counterexample replayed on a real broker of each release in conftest_kafka.RELEASES, a check that
a wrong assignment is reported as a divergence, and short seeded walks."""
from pathlib import Path

import pytest

from kcheck.conform import classic_group as adapter_module
from kcheck.conform import driver
from kcheck.conform.classic_group import (CLIENT_SIDE, REQUESTS, ClassicGroupAdapter,
                                          assignment_bytes, read_assignment, read_subscription,
                                          spec_assignment, subscription_bytes)
from conftest_kafka import broker_for, kafka_broker, spec_walk  # noqa: F401  (the session's broker per release)
from kcheck.layout import initial_words, layout_of
from kcheck.spec.classic_group import spec

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "tests" / "scenarios" / "classic_group").glob("*.json")) + \
    sorted((ROOT / "counterexamples" / "classic_group").glob("*/*.json"))
# Every trace is drivable: the driver plays each consumer (KIP-726's dynamic selection too, a
# client rule no Kafka client shipped), a pending member holds each join phase open until the
# trace's CompleteJoin, and a setup prefix builds a join phase that has just ended. Each conforms
# on every release (the three kip726-downgrade traces where the leader leaves diverged at step
# 16 until the spec took ClassicGroup.remove's leader rule: spec/classic_group_notes.md,
# "Conformance", finding 2). Except these, which start where Kafka's test starts them, in the
# middle of a rebalance whose members have completed an earlier generation: the setup prefix
# cannot build that group on a broker, and the run says so (not drivable, with the reason).
MID_REBALANCE = {"kafka_13406_validation_throws.json", "kafka_13406_no_reassignment_fixed.json"}


def short(path: Path) -> str:
    return "/".join(path.parts[-3:])


def job(path: Path) -> driver.Job:
    return driver.load_job(path, "classic_group")


# ---------------------------------------------------------------------------------------------
# The mapping, without a broker

def test_every_action_is_mapped_once():
    names = {a.name for a in spec.actions}
    for name in names:
        assert (name in REQUESTS) + (name in CLIENT_SIDE) == 1, name
    assert set(REQUESTS) | set(CLIENT_SIDE) == names


def test_subscription_bytes_follow_consumer_protocol():
    """Version prefix, then the struct; KIP-792's generation only from version 2 on."""
    data = subscription_bytes("t", [0, 2], 3, with_generation=True)
    assert data[:2] == (3).to_bytes(2, "big")
    assert read_subscription(data) == ([0, 2], 3)
    old = subscription_bytes("t", [1], 3, with_generation=False)
    assert old[:2] == (1).to_bytes(2, "big")
    assert read_subscription(old) == ([1], -1)
    assert read_assignment(assignment_bytes("t", [1, 0])) == [0, 1]
    assert read_assignment(b"") == []


CLAIM_SCENARIOS = ["equal_generation_claims_both_lose", "higher_generation_claim_wins",
                   "pre_kip792_first_claim_kept", "sole_claim_older_generation_kept"]


@pytest.mark.parametrize("name", CLAIM_SCENARIOS)
def test_leader_assignment_is_the_specs_assignor(name):
    """The leader's assignment, computed from the subscriptions in its JoinGroup answer, is the
    one the claim scenarios expect from the leader's SyncGroup."""
    doc = job(ROOT / "tests" / "scenarios" / "classic_group" / f"{name}.json").doc
    model = spec.instantiate(doc["variant"], doc["params"])
    st, P = doc["state"], model.params.partitions
    subs = {j: ([q for q in range(P) if st["subscription_owned"][j * P + q]],
                st["subscription_generation"][j])
            for j in range(model.params.members) if st["in_group"][j]}
    got = spec_assignment(model, st["leader"], st["generation"], st["protocol_name"], subs)
    want = doc["steps"][1]["expect"]["state"]["assignment"]
    assert got == {j: [q for q in range(P) if want[j * P + q]] for j in subs}


def test_initial_state_reachable_only_when_new():
    a = ClassicGroupAdapter()
    model = spec.instantiate("kip792", {})
    fresh = layout_of(model).show(layout_of(model).unpack_flat(initial_words(model)[0]))
    assert a.initial_reason(model.params, fresh) is None
    assert "mid-rebalance" in a.initial_reason(model.params, dict(fresh, generation=2))


@pytest.mark.parametrize("name", CLAIM_SCENARIOS)
def test_a_join_phase_just_ended_is_built_by_the_setup_prefix(name):
    """The claim scenarios start CompletingRebalance with every answer unread: reachable by the
    setup prefix; the same state with the leader's assignment stored already is not."""
    doc = job(ROOT / "tests" / "scenarios" / "classic_group" / f"{name}.json").doc
    params = spec.instantiate(doc["variant"], doc["params"]).params
    a = ClassicGroupAdapter()
    assert a.initial_reason(params, doc["state"]) is None
    synced = dict(doc["state"], assignment=[True] + doc["state"]["assignment"][1:])
    assert "assignment" in a.initial_reason(params, synced)
    unread = dict(doc["state"], member_state=["STABLE"] + doc["state"]["member_state"][1:])
    assert "not waiting for its JoinGroup answer" in a.initial_reason(params, unread)


def test_join_phase_is_never_held_open():
    """Where the spec's CompleteJoin is due, a walk takes it (or a client step), and the view
    says the group state is not compared there (Kafka is already CompletingRebalance)."""
    model = spec.instantiate("kip792", {"members": 2, "partitions": 2})
    a = ClassicGroupAdapter()
    words = initial_words(model)[0]
    ex = driver.Executor(model)
    for action, args in [("StartConsumer", {"m": 0}), ("JoinGroup", {"m": 0})]:
        inst = model.instance(action, args)
        pre = driver.field_values(model, words)
        words, out, _ = ex.apply(words, inst.index)
    post = driver.field_values(model, words)
    assert not a.walk_allows(post, "JoinGroup") and a.walk_allows(post, "CompleteJoin")
    step = driver.SpecStep(2, "JoinGroup(m=0)", "JoinGroup", {"m": 0}, "NONE", pre, post)
    run = driver.TraceRun(None, "t", model.params, model=model)
    assert isinstance(a.view(run, step)["group_state"], driver.Absent)   # said, not left out
    assert a.view(run, step)["in_group"] == [True, False]


# ---------------------------------------------------------------------------------------------
# On a real broker

def replay(broker, path):
    return driver.run_trace(broker, ClassicGroupAdapter(), spec, job(path), broker.version)


@pytest.mark.kafka
@pytest.mark.parametrize("version", ["4.3.1", "4.2.2"])
@pytest.mark.parametrize("path", TRACES, ids=short)
def test_trace_on_kafka(version, path):
    """Every scenario and saved counterexample conforms step by step, on 4.3.1 and on 4.2.2,
    before KIP-1251 (4.4.0 runs the walks and the broken-client check below: the suite's time
    goes to the releases the issue names)."""
    out = replay(broker_for(version), path)
    if path.name in MID_REBALANCE:
        assert out.kind == driver.NOT_DRIVABLE and "starts mid-rebalance" in out.text(), out.text()
        return
    assert out.kind == driver.CONFORMS, out.text()


@pytest.mark.kafka
def test_a_wrong_assignment_is_a_divergence(kafka_broker, monkeypatch):
    """A broken client (its leader hands every partition to itself) is caught at that step."""
    def greedy(model, leader, generation, protocol, subs):
        return {j: (list(range(model.params.partitions)) if j == leader else []) for j in subs}
    monkeypatch.setattr(adapter_module, "spec_assignment", greedy)
    path = ROOT / "tests" / "scenarios" / "classic_group" / "cooperative_revoke_then_rejoin.json"
    out = replay(kafka_broker, path)
    assert out.kind == driver.DIVERGES and out.step == 12, out.text()
    assert "assigned: spec said [0], Kafka said [0, 1]" in out.detail


@pytest.mark.kafka
@pytest.mark.parametrize("variant,seed", [("kip792", 1), ("kip792", 2), ("pre-kip792", 3)])
def test_seeded_walk_conforms(kafka_broker, variant, seed):
    """Walks without timeouts or bounces: the leader never leaves, so Kafka's re-election by
    HashMap order (see the notes) cannot enter."""
    adapter = ClassicGroupAdapter()
    doc = spec_walk(spec.instantiate(variant, {}), adapter, depth=20, seed=seed)
    assert len(doc["steps"]) >= 15
    out = driver.run_trace(kafka_broker, adapter, spec, driver.Job(f"walk-{variant}-{seed}", doc),
                           kafka_broker.version)
    assert out.kind == driver.CONFORMS, out.text()


def test_member_id_buckets_are_java_hashmap_buckets():
    """String.hashCode then HashMap.hash, 16 buckets: the order Kafka's ClassicGroup.members
    iterates in ("abc".hashCode() = 96354; a negative hash code wraps as in Java)."""
    from kcheck.conform.classic_group import _bucket
    assert _bucket("abc") == (96354 ^ (96354 >> 16)) & 15 == 3
    h = 0
    for ch in "kcheck-consumer-0-8c1f":          # Java's int arithmetic, by hand
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    assert _bucket("kcheck-consumer-0-8c1f") == (h ^ (h >> 16)) & 15
    assert {_bucket(f"member-{k}") for k in range(200)} == set(range(16))
