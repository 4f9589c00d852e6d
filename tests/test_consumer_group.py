"""The consumer_group spec (KIP-848 with KIP-1251 commit fencing): verdicts of every variant at the
default bounds, state counts at a small bound, the shape of the findings' traces (every saved
counterexample and every scenario taken from Kafka's unit tests replays in test_saved_traces)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.bfs import search
from kcheck.layout import layout_of
from kcheck.loader import load_spec
from kcheck.trace import TraceError, build, load, replay

ROOT = Path(__file__).resolve().parent.parent
SAVED = ROOT / "counterexamples" / "consumer_group"
SCENARIOS = ROOT / "tests" / "scenarios" / "consumer_group"
SPEC = load_spec("consumer_group")
VARIANTS = list(SPEC.variants)


def test_names_are_the_issues():
    assert SPEC.default_variant == "kip1251"
    assert {"kip1251", "strict", "revocation-epoch", "no-lower-bound",
            "static-keeps-epochs"} <= set(VARIANTS)
    assert {"no-zombie-commit", "no-spurious-fencing", "single-owner", "epoch-order"} <= set(SPEC.properties)
    assert {"members", "partitions", "static_members", "max_epoch", "commits_in_flight",
            "lost_responses", "subscription_changes", "partition_epochs", "metadata_changes",
            "unsubscribes", "consumer_commits"} == set(SPEC.params)
    # the new behaviours are off at the defaults: the shipped state space is unchanged
    assert all(SPEC.params[k].default == 0 for k in
               ("lost_responses", "subscription_changes", "partition_epochs", "metadata_changes",
                "unsubscribes", "consumer_commits"))
    assert SPEC.params["max_epoch"] and any(
        f.type.search_bound for f in layout_of(SPEC.instantiate()).fields if f.base == "group_epoch")
    # the commit decision is a named rule with a replacement per commit-rule variant
    assert set(SPEC.rules["offset-commit"]) == {None, "strict", "no-lower-bound", "revocation-epoch"}
    for name in ("no-zombie-commit", "no-spurious-fencing"):
        assert SPEC.properties[name].kind == "transition"
        assert SPEC.properties[name].actions == ("HandleCommit",)
    prog = SPEC.progress["eventually-converges"]
    assert not {"Join", "Leave", "FenceMember"} & set(prog.fair)
    assert {"Heartbeat", "HeartbeatResponse"} <= set(prog.fair)


# the scenarios (sometimes properties); a witness is not a violation
SOMETIMES = {n for n, p in SPEC.properties.items() if p.kind == "sometimes"}
# shortest witnesses other than three steps, as measured
SCENARIO_STEPS = {("subscription-changes", "owner-commit-behind-member-epoch"): 2}


@pytest.fixture(scope="module")
def default_results():
    """One exhaustive search per variant at the default parameters, as check --all-variants runs."""
    return {v: search(SPEC.instantiate(v)) for v in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_verdicts(default_results, variant):
    r = default_results[variant]
    assert r.exhaustive
    # the search decides the safety properties; progress ones are the state graph's (test_graph)
    safety = SPEC.variants[variant].expected_violations & (set(SPEC.properties) | {"deadlock"})
    assert set(r.found) - SOMETIMES == safety
    for prop in set(SPEC.properties) - SOMETIMES:
        assert r.status(prop) == ("violated" if prop in SPEC.variants[variant].expected_violations
                                  else "holds")
    # the commits the two commit properties judge are sent in every variant: a zombie commit in
    # flight, and an owner's commit behind its member epoch (KAFKA-20066's), within three steps
    for prop in SOMETIMES:
        assert r.status(prop) == "reached"
        assert len(r.found[prop].steps) == SCENARIO_STEPS.get((variant, prop), 3)
    # every recorded violation is explained
    assert set(SPEC.variants[variant].findings) == SPEC.variants[variant].expected_violations


def test_kip1251_fixes_the_race_but_not_the_19974_zombie(default_results):
    strict, kip = default_results["strict"], default_results["kip1251"]
    assert "no-spurious-fencing" in strict.found and "no-spurious-fencing" not in kip.found
    assert len(strict.found["no-spurious-fencing"].steps) == 4
    f = kip.found["no-zombie-commit"]
    m = SPEC.instantiate("kip1251")
    tr = build(m, f.property, f.kind, f.initial, f.steps)
    assert len(tr) == 11
    assert tr.steps[-1].action == "HandleCommit" and tr.steps[-1].outcome == "NONE"
    # the accepted commit carries the member's unchanged epoch while the member stayed in
    # UNREVOKED_PARTITIONS across a second revocation
    states = [s for s in tr.steps if s.action == "Heartbeat"]
    assert any(s.changes.get(f"holds[{m}][{q}]", (None, None)) == ("PENDING_REVOCATION", "NONE")
               for s in states for m in range(2) for q in range(2))
    assert "unrevoked-epoch-bump" in default_results
    assert "no-zombie-commit" not in default_results["unrevoked-epoch-bump"].found


def test_same_state_space_for_commit_rules(default_results):
    # the commit rule decides outcomes, never the state: the rule variants explore the same graph
    n = default_results["kip1251"].distinct_states
    assert default_results["strict"].distinct_states == n
    assert default_results["no-lower-bound"].distinct_states == n


SMALL = {"partitions": 1, "max_epoch": 3}
SMALL_COUNTS = {"kip1251": 22722, "strict": 22722, "revocation-epoch": 27718, "no-lower-bound": 22722,
                "static-keeps-epochs": 24642, "unrevoked-epoch-bump": 22722, "kafka-20442": 22939,
                "kafka-19449": 23012, "kafka-16147": 23062, "kafka-19233": 8680, "lost-responses": 71701,
                "unsubscribes": 11516, "kafka-19974": 11516,   # 11,194 before the regex rule of "What a holds covers"
                "subscription-changes": 37787, "metadata-changes": 42502, "kafka-20641-fixed": 22262}


@pytest.mark.parametrize("variant", VARIANTS)
def test_state_counts_small(variant):
    r = search(SPEC.instantiate(variant, SMALL))
    assert r.exhaustive and r.distinct_states == SMALL_COUNTS[variant]
    # with one partition the KAFKA-19974 zombie needs a second partition: kip1251 has none
    if variant == "kip1251":
        assert "no-zombie-commit" not in r.found
    # KAFKA-20641: the open fix (PR #22473) writes a static member leaving from
    # UNREVOKED_PARTITIONS as STABLE; the default, the shipped code, keeps the state
    if variant in ("kip1251", "kafka-20641-fixed"):
        assert ("unrevoked-has-pending" in r.found) == (variant == "kip1251")


def _saved():
    return sorted(SAVED.glob("*/*.json"))


def test_every_violation_is_saved():
    saved = {(p.parent.name, p.stem) for p in _saved()}
    expected = {(v.name, prop) for v in SPEC.variants.values() for prop in v.expected_violations}
    assert saved == expected


def test_zombie_trace_does_not_break_the_pre_19974_reconciliation():
    doc = load(SAVED / "kip1251" / "no-zombie-commit.json")
    m = SPEC.instantiate("unrevoked-epoch-bump", doc["params"])
    assert not replay(m, doc).ok


def _scenarios():
    return sorted(SCENARIOS.glob("*.json"))


def test_at_least_ten_scenarios():
    assert len(_scenarios()) >= 10


def test_a_wrong_expected_error_code_fails(tmp_path):
    doc = json.loads((SCENARIOS / "heartbeat_race_kip1251.json").read_text())
    doc["steps"][-1]["expect"]["outcome"] = "ILLEGAL_GENERATION"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    m = SPEC.instantiate(doc["variant"], doc["params"])
    r = replay(m, load(p))
    assert not r.ok and r.failed_step == len(doc["steps"])


def test_bad_parameter_is_one_line_error():
    r = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", "consumer_group", "--param",
                        "members=9"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "members=9" in r.stderr


# ---------------------------------------------------------------------------------------------
# Known bugs (issue 15): each pre-fix variant breaks its property, the default does not

KNOWN_TRACE_STEPS = {"KAFKA-20066": 4, "KAFKA-16147": 7, "KAFKA-19449": 5, "KAFKA-19233": 5,
                     "KAFKA-20442": 1, "KAFKA-20641": 4, "KAFKA-19974": 7}


def test_known_bugs_are_declared():
    bugs = {b.jira: b for b in SPEC.known_bugs}
    assert set(KNOWN_TRACE_STEPS) == set(bugs)
    assert all(b.variant is not None for b in bugs.values())
    for b in bugs.values():
        assert b.fix and b.code and b.broke


@pytest.mark.parametrize("jira", sorted(KNOWN_TRACE_STEPS))
def test_known_bug_is_rediscovered(default_results, jira):
    bug = next(b for b in SPEC.known_bugs if b.jira == jira)
    r = default_results[bug.variant]
    assert bug.property in r.found
    assert len(r.found[bug.property].steps) == KNOWN_TRACE_STEPS[jira]
    saved = SAVED / bug.variant / f"{bug.property}.json"
    doc = load(saved)
    assert len(doc["steps"]) == KNOWN_TRACE_STEPS[jira]
    assert replay(SPEC.instantiate(doc["variant"], doc["params"]), doc).ok
    if jira != "KAFKA-20641":   # its fix is not merged: the default is the pre-fix code
        # the fixed code at the same configuration keeps the property
        fixed = "unsubscribes" if jira == "KAFKA-19974" else "kip1251"
        assert bug.property not in default_results[fixed].found
        # the pre-fix trace does not get through the fixed default (a step the fix removed
        # altogether is no action of the default at all)
        try:
            ok = replay(SPEC.instantiate("kip1251", doc["params"]), doc).ok
        except TraceError:
            ok = False
        assert not ok


def test_derived_partition_epochs_are_the_fixed_bookkeeping():
    # with the partition epoch map as state and the fix in, nothing changes: the map equals
    # what the members hold, which is what partition_epochs=0 reads
    a = search(SPEC.instantiate("kip1251", SMALL))
    b = search(SPEC.instantiate("kip1251", {**SMALL, "partition_epochs": 1}))
    assert a.distinct_states == b.distinct_states and set(a.found) == set(b.found)


def test_lost_responses_keep_the_default_verdicts_but_fence_a_static_rejoin(default_results):
    # the default's verdicts stay, and one is added: a static member whose join response is lost
    # is refused its own instance id on the retry (UNRELEASED_INSTANCE_ID, Kafka as shipped)
    r = search(SPEC.instantiate("kip1251", {**SMALL, "lost_responses": 1}))
    assert r.exhaustive and r.distinct_states == 71701
    assert set(r.found) - SOMETIMES == {"unrevoked-has-pending", "static-rejoin-accepted"}
    f = default_results["lost-responses"].found["static-rejoin-accepted"]
    tr = build(SPEC.instantiate("lost-responses"), f.property, f.kind, f.initial, f.steps)
    assert [s.action for s in tr.steps] == ["Join", "LoseHeartbeatResponse", "JoinUnreleasedInstance"]
    assert tr.steps[-1].outcome == "UNRELEASED_INSTANCE_ID"


def test_resubscribe_zombie_needs_no_fence_and_rejoin(default_results):
    """With subscription changes the KAFKA-19974 zombie takes 6 steps at max_epoch 3: the two
    target changes are member 0's own heartbeats, not a fence and a rejoin."""
    r = default_results["subscription-changes"]
    assert r.exhaustive and SPEC.variants["subscription-changes"].params["max_epoch"] == 3
    f = r.found["no-zombie-commit"]
    tr = build(SPEC.instantiate("subscription-changes"), f.property, f.kind, f.initial, f.steps)
    assert len(tr) == 6
    actions = [s.action for s in tr.steps]
    assert "FenceMember" not in actions and "Join" not in actions
    assert actions.count("HeartbeatNewSubscription") == 2
    assert len(default_results["metadata-changes"].found["no-zombie-commit"].steps) == 8
    # at max_epoch 3 without them, no zombie
    assert "no-zombie-commit" not in search(SPEC.instantiate("kip1251", {"max_epoch": 3})).found


def test_a_member_changes_its_regex_once_per_membership(default_results):
    """CurrentAssignmentBuilder.subscribedTopicIds treats an unresolved regex as matching nothing,
    so a member that changed its regex keeps only the topics it names, and names them still after
    the refresh; dropping a name bumps the group epoch (hasMemberSubscriptionChanged). The path of
    the three traces saved before the rule, a second HeartbeatUnsubscribe by the same member after
    SubscriptionResolved, is no step of the spec; a member subscribed by a regex alone drops every
    topic in one request."""
    doc = load(SAVED / "kafka-19974" / "one-owner-per-epoch.json")
    model = SPEC.instantiate(doc["variant"], doc["params"])
    actions = [(s["action"], s["args"]) for s in doc["steps"]]
    assert actions[0] == ("HeartbeatUnsubscribe", {"m": 1, "q": 1})
    assert actions[2][0] == "SubscriptionResolved" and actions[5] == ("Heartbeat", {"m": 1, "target": "-"})
    assert replay(model, doc).ok
    # the trace saved before: member 1 drops p0's topic at step 6 instead of its plain heartbeat
    before = json.loads(json.dumps(doc))
    before["steps"][5] = {"action": "HeartbeatUnsubscribe", "args": {"m": 1, "q": 0}}
    r = replay(model, before)
    assert not r.ok and r.failed_step == 6 and "not enabled" in r.message
    # a member subscribed by a regex alone: both topics pending revocation at its epoch, at once
    doc = load(SAVED / "unsubscribes" / "released-partition-commit-is-stale.json")
    step = doc["steps"][1]
    assert step["action"] == "HeartbeatUnsubscribeAll" and step["expect"]["outcome"] == "NONE"
    assert {k: v for k, v in step["expect"]["state"].items() if k.startswith("holds")} == \
        {"holds[0][0]": "PENDING_REVOCATION", "holds[0][1]": "PENDING_REVOCATION"}
    assert "member_epoch[0]" not in step["expect"]["state"]
    # the rule moved the state spaces of the two variants (measured: 227,394 and 228,752 before;
    # 194,673 and 194,537 before the regex resolution bumped only for a member still subscribed,
    # spec/consumer_group_notes.md, "What a holds covers")
    assert default_results["unsubscribes"].distinct_states == 197382
    assert default_results["kafka-19974"].distinct_states == 197103


def test_unsubscribing_makes_19974_visible(default_results):
    """KAFKA-19974's harm needs KAFKA-19431's path: the same reconciliation that holds every
    property at the defaults (unrevoked-epoch-bump) gives a partition two owners at one epoch once
    members can drop a topic, while the fixed code (unsubscribes) never does; both accept the
    7-step zombie of a topic dropped at an unchanged epoch."""
    assert "one-owner-per-epoch" not in default_results["unrevoked-epoch-bump"].found
    assert "one-owner-per-epoch" not in default_results["unsubscribes"].found
    assert len(default_results["kafka-19974"].found["one-owner-per-epoch"].steps) == 7
    f = default_results["unsubscribes"].found["no-zombie-commit"]
    tr = build(SPEC.instantiate("unsubscribes"), f.property, f.kind, f.initial, f.steps)
    assert len(tr) == 7 and "HeartbeatUnsubscribe" in [s.action for s in tr.steps]
    assert tr.steps[-1].action == "HandleCommit" and tr.steps[-1].outcome == "NONE"


# ---------------------------------------------------------------------------------------------
# Two-dimensional arrays and a record for a commit (issue 12)

def test_per_partition_fields_are_read_member_then_partition():
    """holds[m][q] and the other (member, partition) fields are stored row by row, and a commit in
    flight is one record stored as the parallel arrays it replaced: the flat spec's order, so the
    bit layout, the fingerprints and the traces the search reports did not change."""
    model = SPEC.instantiate(None, {"members": 3, "partitions": 2, "commits_in_flight": 2,
                                    "unsubscribes": 1})
    fields = model.fields
    for base in ("holds", "assignment_epoch", "client_owns", "held_since", "lost", "subscribed"):
        assert [f.name for f in fields.arrays[base]] == \
            [f"{base}[{m}][{q}]" for m in range(3) for q in range(2)], base
    assert [f.name for f in fields.arrays["commit"]] == [
        f"commit[{c}].{x}" for x in ("request", "member", "member_id", "epoch", "partition")
        for c in range(2)]
    shown = fields.show(model.initial_states[0])
    assert shown["commit"][1] == {"request": "NONE", "member": 0, "member_id": 0, "epoch": 0,
                                  "partition": 0}
    assert [len(row) for row in shown["holds"]] == [2, 2, 2]


FLAT = ROOT / "tests" / "traces_flat" / "consumer_group_no_zombie_commit.json"


def test_a_trace_with_flat_field_names_is_converted_to_the_saved_one():
    """A trace saved before the arrays (holds[3], commit_request[0], flat lists in the initial
    state) no longer replays as it is, and kcheck upgrade (kcheck.trace.upgrade) turns it into
    the shipped counterexample: the same steps, field for field, in the current format."""
    from kcheck.trace import FORMAT, rename_former_fields, upgrade
    old = load(FLAT)
    model = SPEC.instantiate(old["variant"], old["params"])
    with pytest.raises(TraceError, match="unknown state field 'commit_request'.*'kcheck upgrade FILE'"):
        replay(model, old)
    new, renamed = rename_former_fields(model, old)
    assert "holds[3] -> holds[1][1]" in renamed and "commit_request[0] -> commit[0].request" in renamed
    up = upgrade(model, old)
    assert up.doc == load(SAVED / "kip1251" / "no-zombie-commit.json")
    assert up.doc["kcheck_trace"] == FORMAT and old["kcheck_trace"] == 1
    assert len(up.doc["steps"]) == len(old["steps"]) == 11
    assert up.replayed.ok
    # a trace already in the current names and format is left as it is
    assert rename_former_fields(model, up.doc) == (up.doc, [])
    assert upgrade(model, up.doc).changes == []


def test_the_upgrade_command(tmp_path):
    target = tmp_path / "t.json"
    target.write_text(FLAT.read_text())
    cmd = [sys.executable, "-m", "kcheck.cli", "upgrade"]
    r = subprocess.run([*cmd, "--check", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1 and "renamed" in r.stdout and "(not written: --check)" in r.stdout
    assert target.read_text() == FLAT.read_text()
    r = subprocess.run([*cmd, str(target)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(target.read_text()) == load(SAVED / "kip1251" / "no-zombie-commit.json")
    r = subprocess.run([*cmd, str(tmp_path / "missing.json")], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "missing.json" in r.stderr


def test_consumer_commits_adds_offset_commit_to_send_commit_only():
    """consumer_commits=1 lets a client send OffsetCommit v9 in a step (the stock-assignor zombie
    scenarios); at 0 SendCommit sends TxnOffsetCommit only, as the search always did."""
    def sends(**params):
        model = SPEC.instantiate("kip1251", {"members": 1, "partitions": 1, **params})
        return sorted({i.args["request"] for i in model.instances if i.action.name == "SendCommit"})
    assert sends() == ["TXN_OFFSET_COMMIT"]
    assert sends(consumer_commits=1) == ["OFFSET_COMMIT", "TXN_OFFSET_COMMIT"]
