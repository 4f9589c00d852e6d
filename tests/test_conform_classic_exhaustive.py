"""Conformance in every state for the classic protocol (issue 33): classic_group's reachable graph
on Kafka's GroupCoordinatorShard in-process (checker/conform/classic_inprocess.py), states
rebuilt by replaying the path's requests (ClassicGroup's plain fields are not reverted).

These tests need Java 17 and Kafka's jars in the cache (scripts/setup.sh --test fetches them):
when the harness cannot be built or started they fail with the reason; they never skip."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from kcheck.conform.classic_group import ClassicGroupAdapter
from kcheck.conform.driver import NotDrivable, adapter_for
from kcheck.conform.exhaustive import answerable_outcomes, run_exhaustive
from kcheck.conform.inprocess import Harness, InProcessBroker, in_process_adapter
from kcheck.graph import build_graph
from kcheck.loader import load_spec

from graph_paths import begin_run, random_path

SMALL = {"members": 2, "partitions": 1, "max_generation": 2}
THREE = {"members": 3, "partitions": 1, "max_generation": 2}


@pytest.fixture(scope="module")
def harness():
    h = Harness("4.3.1", settings=ClassicGroupAdapter.broker_settings)   # a HarnessError fails
    yield h
    h.close()


@pytest.fixture(scope="module")
def spec():
    return load_spec("classic_group")


def test_small_graph_conforms_on_431(harness, spec):
    res = run_exhaustive(spec, adapter_for("classic_group"), harness, None, SMALL)
    assert (res.states, res.transitions) == (453, 808)
    assert res.divergences == [] and res.expected_count == 0, res.text()
    assert res.checked == 808 and res.client_side == 327
    assert res.not_mappable == {} and res.unreached == 0 and res.timing == 0


def test_rule_coverage_lists_the_outcomes_the_graph_never_gives(harness, spec):
    """Every error code each action's response can give, against those the checked transitions
    gave: ILLEGAL_GENERATION on SyncGroup, Heartbeat and CommitOffsets is never given without
    timeouts (issue 33), so that rule is never compared with Kafka, and the run says so."""
    model = spec.instantiate(None, SMALL)
    assert answerable_outcomes(model) == {
        "JoinGroup": ["NONE", "UNKNOWN_MEMBER_ID", "INCONSISTENT_GROUP_PROTOCOL"],
        "SyncGroup": ["NONE", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"],
        "Heartbeat": ["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"],
        "CommitOffsets": ["NONE", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]}
    res = run_exhaustive(spec, adapter_for("classic_group"), harness, None, SMALL)
    missing = res.never_answered()
    assert missing["SyncGroup"] == ["ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]
    assert missing["Heartbeat"] == ["ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]
    assert missing["CommitOffsets"] == ["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]
    assert res.answered["SyncGroup"]["NONE"] > 0 and res.answered["Heartbeat"]["REBALANCE_IN_PROGRESS"] > 0
    text = res.text()
    assert "never answered (a rule never compared with Kafka): Heartbeat ILLEGAL_GENERATION" in text


def test_timeouts_reach_the_unknown_member_branches(harness, spec):
    """With the coordinator's timeouts a member removed behind its back is answered
    UNKNOWN_MEMBER_ID, and Kafka agrees in every transition; ILLEGAL_GENERATION stays unreached
    (a removed member is unknown, not of an older generation)."""
    res = run_exhaustive(spec, adapter_for("classic_group"), harness, None,
                         {"members": 2, "partitions": 1, "max_generation": 2, "timeouts": 1})
    assert res.divergences == [], res.text()
    assert res.answered["Heartbeat"]["UNKNOWN_MEMBER_ID"] > 0
    assert res.answered["SyncGroup"]["UNKNOWN_MEMBER_ID"] > 0
    assert "ILLEGAL_GENERATION" in res.never_answered()["Heartbeat"]


def _abstraction(harness, run) -> dict:
    """The coordinator's state as the checks see it, member ids named by the driver's members:
    DescribeGroups (state, protocol, each member's subscription and assignment), the committed
    offsets, and the driver's clients (generation, owned partitions, member id's slot)."""
    from kio.schema.describe_groups.v5 import request as d
    members = run.state["members"]
    slot = {m.member_id: j for j, m in enumerate(members) if m.member_id}
    g = harness.request(d.DescribeGroupsRequest(groups=(run.name,),
                                                include_authorized_operations=False)).groups[0]
    return {"state": g.group_state, "protocol": g.protocol_data,
            "members": sorted((slot.get(m.member_id, m.member_id), bytes(m.member_metadata),
                               bytes(m.member_assignment)) for m in g.members),
            "offsets": harness.offsets(run.name),
            "clients": [(m.generation, m.owned, m.member_id in slot, m.completed_generation)
                        for m in members]}


def test_rebuild_leaves_the_shard_as_a_fresh_replay_of_the_path(harness, spec):
    """Take a path's prefix, mark, detour, rebuild to the mark, take the path's rest: the
    coordinator and the clients equal a fresh replay of the path alone, for 12 random detours
    of the three-member graph. A plain revert does not: in at least one trial it leaves the
    group as the detour changed it (ClassicGroup's fields are not timeline structures). A random
    path the adapter cannot drive (NotDrivable: Kafka ended a join phase the path had not ended)
    is drawn again."""
    model = spec.instantiate(None, THREE)
    sg = build_graph(model)
    adapter = in_process_adapter(adapter_for("classic_group"))
    broker = InProcessBroker(harness)
    rng = random.Random(33)

    def walk(start: int, n: int) -> list[tuple[str, dict, int]]:
        return random_path(model, sg, rng, start, n)

    def begin():
        return begin_run(adapter, broker, model, sg, "rebuild")

    def drive(run, steps):
        for action, args, _ in steps:
            adapter.drive(run, action, args)

    reverts_differ, trial, attempts = 0, 0, 0
    while trial < 12:
        attempts += 1
        assert attempts <= 60, "60 random paths drawn, fewer than 12 drivable"
        base = harness.snapshot()
        run = begin()
        prefix = walk(0, rng.randrange(4, 12))
        detour = walk(prefix[-1][2] if prefix else 0, rng.randrange(2, 8))
        path = walk(prefix[-1][2] if prefix else 0, rng.randrange(1, 8))
        try:            # drivable in both orders?
            drive(run, prefix + detour)
            harness.revert(base)
            run = begin()
            drive(run, prefix + path)
        except NotDrivable:
            harness.revert(base)
            continue
        harness.revert(base)
        run = begin()
        drive(run, prefix)
        at_mark = _abstraction(harness, run)
        snap = harness.snapshot()
        # a plain revert after the detour: the group as the detour left it, not as at the mark
        drive(run, detour)
        harness.revert(snap)
        reverted = _abstraction(harness, run)
        # a rebuild, then the path
        harness.revert(base)
        run = begin()
        drive(run, prefix)
        client = adapter.clone_state(run.state)
        mark = harness.mark()
        drive(run, detour)
        harness.rebuild(base, mark)
        run.state = adapter.clone_state(client)
        drive(run, path)
        rebuilt = _abstraction(harness, run)
        harness.revert(base)
        # the fresh replay
        run = begin()
        drive(run, prefix + path)
        fresh = _abstraction(harness, run)
        harness.revert(base)
        assert rebuilt == fresh, f"trial {trial}: {prefix} / {detour} / {path}"
        reverts_differ += {k: v for k, v in reverted.items() if k != "clients"} != \
            {k: v for k, v in at_mark.items() if k != "clients"}
        trial += 1
    assert reverts_differ >= 1


def _kcheck(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "kcheck.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_exhaustive_classic_reports_counts_and_coverage():
    r = _kcheck("conform", "classic_group", "--exhaustive", "--kafka", "4.3.1",
                "--param", "members=2", "--param", "partitions=1", "--param", "max_generation=2",
                "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["backend"], doc["kafka"], doc["variant"]) == ("in-process", "4.3.1", "kip792")
    assert (doc["transitions"], doc["checked"], doc["client_side"]) == (808, 808, 327)
    assert doc["divergences"] == []
    assert doc["never_answered"]["Heartbeat"] == ["ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]
    assert doc["outcomes"]["JoinGroup"]["NONE"] > 0


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("version", ["4.2.2", "4.3.1", "4.4.0"])
def test_exhaustive_three_members_on_every_release(spec, version):
    """The whole graph at members=3, partitions=1, max_generation=2 (23,488 transitions) on
    each release: every transition conforms. (The defaults' 224,455 transitions per release are
    the README's figure: scripts/conformance_table.py.)"""
    with Harness(version, settings=ClassicGroupAdapter.broker_settings) as h:
        res = run_exhaustive(spec, adapter_for("classic_group"), h, None, THREE)
    assert res.divergences == [] and res.expected_count == 0, res.text()
    assert res.transitions == 23_488 and res.checked == res.transitions


def test_cli_exhaustive_which_variant_names_the_variants_conforming_everywhere(spec):
    """Every variant walked on 4.3.1 conforms in every transition. The two pre-KIP-792 variants
    diverged until their JoinGroup stopped comparing a generation the v1 subscription does not
    carry, and the two timeouts=1 variants until the adapter stopped expecting the spec to know
    the subscriptions of a join phase the group had left (spec/classic_group_notes.md)."""
    r = _kcheck("conform", "classic_group", "--exhaustive", "--which-variant", "--kafka", "4.3.1",
                "--param", "members=2", "--param", "partitions=1", "--param", "max_generation=2",
                "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [v["variant"] for v in doc["variants"] if not v["conforms"]] == []
    assert doc["conforming"] == list(spec.variants)


def test_cli_exhaustive_which_variant_with_a_variant_is_bad_input():
    r = _kcheck("conform", "classic_group", "--exhaustive", "--which-variant", "--variant", "kip792")
    assert r.returncode == 2, r.stderr
    assert "--variant cannot be given with it" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
