"""The classic group spec: verdicts at default bounds, state counts at small bounds, replay of
every saved counterexample and scenario. Verdicts cover every safety property, the lemmas
(supporting invariants for the proofs) included; progress is left to tests/test_graph.py."""
import json
from pathlib import Path

import pytest

from kcheck.bfs import search
from kcheck.graph import build_graph
from kcheck.layout import layout_of
from kcheck.loader import load_spec
from kcheck.trace import load, replay
from kcheck.spec.lang import SpecError

ROOT = Path(__file__).resolve().parent.parent
spec = load_spec("classic_group")
# the issue's properties; the spec's other properties are lemmas
PROPS = ["single-owner", "revoke-before-assign", "revoked-before-reassigned",
         "cooperative-keeps-owned", "stale-claim-never-wins", "no-double-commit",
         "generation-monotonic"]
VARIANTS = ["kip792", "pre-kip792", "double-bounce", "single-bounce", "kip726-dynamic",
            "shipped-default", "kip726-downgrade", "pre-kip792-kafka-12983", "kafka-12983",
            "kafka-14639", "kafka-14016", "kafka-12984", "kafka-13406"]

# What the search finds at the spec's default parameters (members=3, partitions=2,
# max_generation=4, timeouts=0), as measured; the spec's record (violates=) must agree. In
# kip726-dynamic the race breaks four lemmas as well as the two properties they support.
KIP726_LEMMAS = {"assignment-respects-owners", "joined-subscription-is-owned",
                 "protocol-fixed-by-assignors", "range-round-members-own-nothing"}
# The variants after shipped-default are checked at the configuration they declare (params=).
KIP726 = {"single-owner", "revoke-before-assign", "revoked-before-reassigned"} | KIP726_LEMMAS
# timeouts=1: a member the coordinator timed out keeps its partitions (every variant)
ZOMBIE_DEFAULT = {"single-owner", "revoked-before-reassigned", "assignment-respects-owners"}
DEFAULT_VIOLATED = {
    "kip792": set(), "pre-kip792": set(), "double-bounce": set(), "single-bounce": set(),
    "kip726-dynamic": KIP726, "shipped-default": set(), "kip726-downgrade": KIP726,
    "pre-kip792-kafka-12983": ZOMBIE_DEFAULT | {"no-double-commit", "stale-claim-never-wins"},
    "kafka-12983": ZOMBIE_DEFAULT | {"no-double-commit"},
    "kafka-14639": {"revoke-before-assign", "revoked-before-reassigned", "single-owner",
                    "assignment-respects-owners"},
    "kafka-14016": {"cooperative-keeps-owned", "owners-have-a-generation"},
    # the stuck rebalances are progress verdicts (LASSO below); their safety verdicts are those
    # of the variant they were built on, but for kafka-13406, whose validation throws where
    # kafka-14639 hands the partition over
    "kafka-12984": ZOMBIE_DEFAULT | {"no-double-commit", "stale-claim-never-wins"},
    "kafka-13406": set(),
}
# The scenarios (sometimes properties) and the length of each one's shortest witness, as measured;
# absent: not reached, which the record states (violates= of a sometimes is "known not reached").
# stale-claim-at-sync needs a member that can fall out of a generation (timeouts=1) or the older
# clients' subscription generation (kafka-14639): elsewhere stale-claim-never-wins holds vacuously.
SOMETIMES = {n for n, p in spec.properties.items() if p.kind == "sometimes"}
SCENARIO_STEPS = {
    "kip792": {"owner-left-behind": 8}, "pre-kip792": {"owner-left-behind": 8},
    "double-bounce": {"owner-left-behind": 10}, "single-bounce": {"owner-left-behind": 9},
    "kip726-dynamic": {"owner-left-behind": 9}, "shipped-default": {},
    "kip726-downgrade": {"owner-left-behind": 8},
    "pre-kip792-kafka-12983": {"owner-left-behind": 6, "stale-claim-at-sync": 17},
    "kafka-12983": {"owner-left-behind": 6, "stale-claim-at-sync": 17},
    "kafka-14639": {"owner-left-behind": 8, "stale-claim-at-sync": 36},
    "kafka-14016": {"owner-left-behind": 8},
    "kafka-12984": {"owner-left-behind": 6, "stale-claim-at-sync": 17},
    "kafka-13406": {"owner-left-behind": 8},
}
DEFAULT_TRACE_LENGTH = {("kip726-dynamic", "single-owner"): 20,
                        ("kip726-dynamic", "revoke-before-assign"): 13,
                        ("kip726-dynamic", "revoked-before-reassigned"): 20,
                        ("kip726-dynamic", "assignment-respects-owners"): 20,
                        ("kip726-dynamic", "joined-subscription-is-owned"): 12,
                        ("kip726-dynamic", "protocol-fixed-by-assignors"): 5,
                        ("kip726-dynamic", "range-round-members-own-nothing"): 11,
                        ("kip726-downgrade", "single-owner"): 18,
                        ("kip726-downgrade", "revoke-before-assign"): 13,
                        ("kip726-downgrade", "revoked-before-reassigned"): 18,
                        ("kip726-downgrade", "assignment-respects-owners"): 18,
                        ("kip726-downgrade", "joined-subscription-is-owned"): 12,
                        ("kip726-downgrade", "protocol-fixed-by-assignors"): 4,
                        ("kip726-downgrade", "range-round-members-own-nothing"): 11,
                        ("pre-kip792-kafka-12983", "stale-claim-never-wins"): 19,
                        ("pre-kip792-kafka-12983", "no-double-commit"): 20,
                        ("pre-kip792-kafka-12983", "single-owner"): 11,
                        ("pre-kip792-kafka-12983", "revoked-before-reassigned"): 11,
                        ("pre-kip792-kafka-12983", "assignment-respects-owners"): 11,
                        ("kafka-12983", "no-double-commit"): 20,
                        ("kafka-12983", "single-owner"): 11,
                        ("kafka-12983", "revoked-before-reassigned"): 11,
                        ("kafka-12983", "assignment-respects-owners"): 11,
                        ("kafka-14639", "revoke-before-assign"): 26,
                        ("kafka-14639", "revoked-before-reassigned"): 26,
                        ("kafka-14639", "assignment-respects-owners"): 26,
                        ("kafka-14639", "single-owner"): 28,
                        ("kafka-14016", "cooperative-keeps-owned"): 13,
                        ("kafka-14016", "owners-have-a-generation"): 12,
                        ("kafka-12984", "stale-claim-never-wins"): 22,
                        ("kafka-12984", "no-double-commit"): 20,
                        ("kafka-12984", "single-owner"): 11,
                        ("kafka-12984", "revoked-before-reassigned"): 11,
                        ("kafka-12984", "assignment-respects-owners"): 11,
                        ("kafka-12984", "rebalance-completes"): 22,
                        ("kafka-13406", "rebalance-completes"): 30}
# the stuck rebalances: lassos of rebalance-completes (kcheck progress, the cap raised), saved
LASSO = {"kafka-12984": 22, "kafka-13406": 30}
# distinct states of each variant at its own configuration; the first six are unchanged by the
# known-bug work (the state the pre-KAFKA-12983 client needs stays constant elsewhere). The two
# pre-KIP-792 variants have more than their KIP-792 twins: a follower rejoining with unchanged
# ownedPartitions is answered at once, the group staying Stable (87,146 and 89,064 before)
DEFAULT_STATES = {"kip792": 87146, "pre-kip792": 115092, "double-bounce": 1476461,
                  "single-bounce": 160518, "kip726-dynamic": 532264, "shipped-default": 23876,
                  "kip726-downgrade": 349334, "pre-kip792-kafka-12983": 95500,
                  "kafka-12983": 90431, "kafka-14639": 103312, "kafka-14016": 65015,
                  "kafka-12984": 96391, "kafka-13406": 96966}


def test_names_are_the_issues():
    assert list(spec.variants) == VARIANTS
    issue = [n for n, p in spec.properties.items() if not p.lemma]
    assert set(PROPS) <= set(issue)
    assert KIP726_LEMMAS <= {n for n, p in spec.properties.items() if p.lemma}
    assert spec.default_variant == "kip792"
    assert "rebalance-completes" in spec.progress
    assert set(spec.rules["claim-resolution"]) == {None, "pre-kip792", "pre-kip792-kafka-12983",
                                                   "kafka-14639", "kafka-13406"}


@pytest.fixture(scope="module")
def default_results():
    return {v: search(spec.instantiate(v)) for v in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_verdicts(default_results, variant):
    res = default_results[variant]
    assert res.exhaustive and res.cut_by_bounds > 0
    assert res.distinct_states == DEFAULT_STATES[variant]
    assert set(res.found) - SOMETIMES == DEFAULT_VIOLATED[variant]
    reached = SCENARIO_STEPS[variant]
    for prop in SOMETIMES:
        assert res.status(prop) == ("reached" if prop in reached else "not-reached")
        if prop in reached:
            assert len(res.found[prop].steps) == reached[prop]
    # the record may also name progress properties, which 'kcheck progress' judges
    record = spec.variants[variant].expected_violations
    assert {p for p in record if p in spec.properties} - SOMETIMES == DEFAULT_VIOLATED[variant]
    assert record & SOMETIMES == SOMETIMES - set(reached)
    assert record <= set(spec.properties) | set(spec.progress)
    for prop in set(spec.properties) - SOMETIMES:
        assert res.status(prop) == ("violated" if prop in DEFAULT_VIOLATED[variant] else "holds")
    for (v, prop), n in DEFAULT_TRACE_LENGTH.items():
        if v == variant and prop in spec.properties:      # progress: its own test
            assert len(res.found[prop].steps) == n


# (variant, timeouts) -> distinct states at members=2, partitions=2, max_generation=2
SMALL_COUNTS = {
    ("kip792", 0): 670, ("pre-kip792", 0): 742, ("double-bounce", 0): 5943,
    ("single-bounce", 0): 1454, ("kip726-dynamic", 0): 2838, ("shipped-default", 0): 376,
    ("kip792", 1): 4351, ("pre-kip792", 1): 4661, ("double-bounce", 1): 24838,
    ("single-bounce", 1): 7437, ("kip726-dynamic", 1): 14185, ("shipped-default", 1): 2528,
}


# a member that timed out still owns its partitions: assignment-respects-owners falls with
# single-owner and, where range can be chosen, so does range-round-members-own-nothing (the
# group completes a range round while the timed-out member still owns its partitions)
ZOMBIE = {"single-owner", "revoked-before-reassigned", "assignment-respects-owners"}
SMALL_VIOLATED = {
    ("kip726-dynamic", 0): {"revoke-before-assign", "joined-subscription-is-owned",
                            "protocol-fixed-by-assignors", "range-round-members-own-nothing"},
    ("kip792", 1): ZOMBIE, ("pre-kip792", 1): ZOMBIE,
    ("double-bounce", 1): ZOMBIE | {"range-round-members-own-nothing"},
    ("single-bounce", 1): ZOMBIE | {"range-round-members-own-nothing"},
    ("shipped-default", 1): ZOMBIE | {"range-round-members-own-nothing"},
    ("kip726-dynamic", 1): ZOMBIE | KIP726_LEMMAS | {"revoke-before-assign"},
}


@pytest.mark.parametrize("variant,timeouts", sorted(SMALL_COUNTS))
def test_state_counts_small(variant, timeouts):
    res = search(spec.instantiate(variant, {"members": 2, "max_generation": 2, "timeouts": timeouts}))
    assert res.exhaustive
    assert res.distinct_states == SMALL_COUNTS[variant, timeouts]
    found = set(res.found) - SOMETIMES
    assert found == SMALL_VIOLATED.get((variant, timeouts), set())
    # the fixed client gives up what it holds before a rejoin, so no claim is ever stale (even
    # with a member that can time out): stale-claim-never-wins is judged only by the older clients
    assert res.status("stale-claim-at-sync") == "not-reached"
    # ... and an EAGER group revokes before it rejoins: no owner is left behind without timeouts
    assert res.status("owner-left-behind") == (
        "not-reached" if (variant, timeouts) == ("shipped-default", 0) else "reached")
    # with timeouts a member that fell out keeps its partitions until its next request: two
    # owners in every variant, yet never two committers (its commits are rejected)
    if timeouts:
        assert "single-owner" in found and "no-double-commit" not in found
    else:
        assert "single-owner" not in found
    assert ("revoke-before-assign" in found) == (variant == "kip726-dynamic")
    assert "generation-monotonic" not in found


def test_zombie_trace_is_a_timeout():
    res = search(spec.instantiate("kip792", {"members": 2, "max_generation": 2, "timeouts": 1}),
                 ["single-owner"])
    labels = [res.model.instances[k].action.name for k in res.found["single-owner"].steps]
    assert "SessionTimeout" in labels and len(labels) == 11


def test_two_members_hide_the_kip726_race():
    # the race needs a follower slower than another member; with two the leader is the old member
    res = search(spec.instantiate("kip726-dynamic", {"members": 2}), ["single-owner"])
    assert res.exhaustive and not set(res.found) - SOMETIMES


SAVED = sorted((ROOT / "counterexamples" / "classic_group").rglob("*.json"))


def test_every_violation_is_saved():
    names = {(p.parent.name, p.stem) for p in SAVED}
    assert names == {(v, prop) for v, props in DEFAULT_VIOLATED.items() for prop in props} | \
        {(v, "rebalance-completes") for v in LASSO}
    # a sometimes property in the record is one known not to be reached: it has no witness
    assert names == {(v.name, prop) for v in spec.variants.values() for prop in v.expected_violations
                     if prop not in SOMETIMES}


@pytest.mark.parametrize("path", SAVED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_counterexample_replays(path):
    doc = load(path)
    model = spec.instantiate(doc["variant"], doc["params"])
    r = replay(model, doc)
    assert r.ok, r.message
    assert len(doc["steps"]) == DEFAULT_TRACE_LENGTH[doc["variant"], doc["property"]]


def test_counterexample_fails_under_default_variant():
    # the KIP-726 single-owner trace starts with bounces the default variant does not have
    doc = load(ROOT / "counterexamples/classic_group/kip726-dynamic/single-owner.json")
    doc["variant"] = "kip792"
    r = replay(spec.instantiate("kip792", doc["params"]), doc)
    assert not r.ok


SCENARIOS = sorted((ROOT / "tests" / "scenarios" / "classic_group").glob("*.json"))


def test_at_least_six_scenarios():
    assert len(SCENARIOS) >= 6


def test_claim_rule_decides_the_tie():
    # the same double claim at one generation: kip792 withholds partition 0, pre-kip792 keeps
    # the first claim; swapping the variants must break each scenario's expectation
    for name, other in (("equal_generation_claims_both_lose", "pre-kip792"),
                        ("pre_kip792_first_claim_kept", "kip792")):
        doc = json.loads((ROOT / "tests/scenarios/classic_group" / f"{name}.json").read_text())
        r = replay(spec.instantiate(other, doc["params"]), doc)
        assert not r.ok and r.failed_step == 2


def test_pre_kip792_unchanged_rejoin_is_answered_at_once():
    # the v1 subscription carries no generation, so a Stable follower's JoinGroup with the
    # ownedPartitions it last sent is the same bytes and Kafka answers it without a rebalance
    # (classicGroupJoinExistingMember); KIP-792's subscription differs by its generation
    doc = load(ROOT / "tests/scenarios/classic_group/pre_kip792_unchanged_rejoin_answered.json")
    for variant in ("pre-kip792", "pre-kip792-kafka-12983"):
        assert replay(spec.instantiate(variant, doc["params"]), doc).ok, variant
    r = replay(spec.instantiate("kip792", doc["params"]), doc)
    assert not r.ok and r.failed_step == 19 and "PreparingRebalance" in r.message


def test_kafka_13419_rejoin_claims_the_moved_partition():
    doc = load(ROOT / "tests/scenarios/classic_group/kafka_13419_missed_sync.json")
    r = replay(spec.instantiate("kip792", doc["params"]), doc)
    steps = r.trace.steps
    late = [i for i, s in enumerate(steps) if s.action == "SyncGroup" and s.outcome == "REBALANCE_IN_PROGRESS"]
    assert late, "the delayed SyncGroup must be answered REBALANCE_IN_PROGRESS"
    rejoin = steps[late[0] + 1]
    assert rejoin.action == "JoinGroup" and rejoin.args == {"m": 1}
    shown = layout_of(spec.instantiate("kip792", doc["params"]))
    after = dict(zip((f.name for f in shown.fields), shown.unpack_flat(rejoin.words)))
    assert after["subscription_owned[5]"] == 1 and after["subscription_generation[1]"] == 2


def test_bad_parameter_is_one_line_error():
    with pytest.raises(SpecError, match="out of range"):
        spec.instantiate("kip792", {"members": 4})
    with pytest.raises(SpecError, match="unknown variant"):
        spec.instantiate("kip-792")


# ---------------------------------------------------------------------------------------------
# Known bugs: each pre-fix variant breaks its property, and the default variant at the very same
# configuration does not, so the fix is what makes the difference (measured, not claimed)

@pytest.mark.parametrize("bug", spec.known_bugs, ids=lambda b: b.jira)
def test_known_bug_is_rediscovered(default_results, bug):
    if bug.variant is None:
        assert bug.not_expressible
        return
    if bug.property in spec.progress:
        return      # the stuck rebalances: test_stuck_rebalance_needs_both_fixes_undone
    params = spec.variants[bug.variant].params
    assert default_results[bug.variant].status(bug.property) == "violated"
    fixed = search(spec.instantiate(spec.default_variant, params), [bug.property])
    assert fixed.exhaustive and fixed.status(bug.property) == "holds"


def test_at_least_five_known_bugs_three_rediscovered():
    assert len(spec.known_bugs) >= 5
    assert len([b for b in spec.known_bugs if b.variant]) >= 6


def progress_verdict(variant, params=None):
    from kcheck.run import Options, progress_of
    r, _ = progress_of(spec, variant, params or {}, Options(progress_properties=["rebalance-completes"]))
    found = r.found.get("rebalance-completes")
    return r.status("rebalance-completes"), (len(found.steps) if found else None)


@pytest.mark.parametrize("variant,base", [("kafka-12984", "pre-kip792-kafka-12983"),
                                          ("kafka-13406", "kafka-14639")])
def test_stuck_rebalance_needs_both_fixes_undone(variant, base):
    """The assignor that throws (kafka-12984) and the validation of the built-in assignor
    (kafka-13406) leave the group CompletingRebalance for ever: rebalance-completes is refuted by
    a protocol-driven lasso whose loop is the leader's JoinGroup answered at once, its JoinGroup
    response and its assignment failing again. The variant each is built on (the bug that fed
    it) and the default at the same configuration both hold the property."""
    status, length = progress_verdict(variant)
    assert (status, length) == ("violated", LASSO[variant])
    doc = load(ROOT / "counterexamples/classic_group" / variant / "rebalance-completes.json")
    assert [s["action"] for s in doc["steps"][-3:]] == ["AssignmentFails", "JoinGroup",
                                                        "JoinGroupResponse"]
    assert progress_verdict(base)[0] == "holds"
    params = {k: v for k, v in spec.instantiate(variant).params.as_dict().items()
              if v != spec.params[k].default}
    assert progress_verdict(spec.default_variant, params)[0] == "holds"


def test_assignor_never_fails_today(default_results):
    """In every variant but the two stuck-rebalance ones the leader's assignment never throws
    (AssignmentFails never takes a step): one claim wins each partition, and the validation is
    skipped for cooperative-sticky, the only COOPERATIVE assignor here."""
    for v in VARIANTS:
        assert ("AssignmentFails" in default_results[v].never_fired()) == (v not in LASSO), v


def double_claims_at_sync(model) -> int:
    """Reachable states in which the leader's assignment is awaited while two members of the
    group claim one partition: the only states in which the claim rule decides anything."""
    sg, lay = build_graph(model), layout_of(model)
    P, M = model.params.partitions, model.params.members
    count = 0
    for i in range(sg.states):
        st = lay.show(lay.unpack_flat(sg.words[:, i]))
        if st["group_state"] == "CompletingRebalance" and any(
                sum(st["in_group"][j] and st["subscription_owned"][j * P + q] for j in range(M)) > 1
                for q in range(P)):
            count += 1
    return count


def test_kip792_problem_needs_the_old_client():
    # with the shipped client no two claims on one partition ever reach the assignor, so the
    # claim rule decides nothing: the verdicts are kip792's. (The state graphs differ since the
    # pre-KIP-792 JoinGroup compares no generation: test_pre_kip792_unchanged_rejoin_...)
    base = {"members": 2, "timeouts": 1}
    shipped = {v: search(spec.instantiate(v, base)) for v in ("kip792", "pre-kip792")}
    assert (shipped["kip792"].distinct_states, shipped["pre-kip792"].distinct_states) == (38038, 40500)
    assert set(shipped["kip792"].found) == set(shipped["pre-kip792"].found)
    assert "stale-claim-never-wins" not in shipped["pre-kip792"].found
    assert double_claims_at_sync(spec.instantiate("pre-kip792", base)) == 0
    # with the client before KAFKA-12983 a member that fell out rejoins claiming what it holds:
    # without a generation the stale claim wins; KIP-792's generation stops it
    old_client = {v: search(spec.instantiate(v)) for v in ("kafka-12983", "pre-kip792-kafka-12983")}
    assert spec.variants["kafka-12983"].params == spec.variants["pre-kip792-kafka-12983"].params
    assert "stale-claim-never-wins" not in old_client["kafka-12983"].found
    assert double_claims_at_sync(old_client["pre-kip792-kafka-12983"].model) > 0
    trace = old_client["pre-kip792-kafka-12983"].found["stale-claim-never-wins"]
    labels = [old_client["pre-kip792-kafka-12983"].model.instances[k].label for k in trace.steps]
    assert len(labels) == 19
    # the member rejoins after an UNKNOWN_MEMBER_ID answer without onJoinPrepare
    assert labels.count("SessionTimeout(m=0)") + labels.count("SessionTimeout(m=1)") >= 1
    # the same steps with today's client: the retry re-runs onJoinPrepare and claims nothing; the
    # scenario breaks at that JoinGroup under the old client
    doc = load(ROOT / "tests/scenarios/classic_group/kip792_problem_needs_the_old_client.json")
    model = old_client["pre-kip792-kafka-12983"].model
    assert [(s["action"], s["args"]) for s in doc["steps"]] == \
        [(model.instances[k].action.name, model.instances[k].args) for k in trace.steps]
    assert replay(spec.instantiate(doc["variant"], doc["params"]), doc).ok
    r = replay(spec.instantiate("pre-kip792-kafka-12983", doc["params"]), doc)
    assert not r.ok and r.failed_step == 16


def test_kafka_14639_needs_the_older_subscription_generation():
    # with KIP-792's subscription generation (the JoinGroup generation) a member that missed a
    # SyncGroup claims at the same generation as everyone else, so the old rule drops nothing
    res = search(spec.instantiate("kafka-14639", {"generation_from_assignment": 0}))
    assert res.exhaustive and not set(res.found) - SOMETIMES and res.distinct_states == 87146


@pytest.mark.parametrize("name,pre_fix", [("kafka_12984_same_generation_claims", "kafka-12984"),
                                          ("kafka_13406", "kafka-13406")])
def test_failed_assignment_scenarios_from_kafkas_tests(name, pre_fix):
    """Kafka's assignor tests' subscriptions (scenario sources): with the pre-fix assignor or
    validation the leader's assignment throws, it rejoins, is answered at once in
    CompletingRebalance with the same generation and throws again; the same subscriptions in
    the default variant sync with the assignment Kafka's test asserts. Each scenario fails in
    the other variant."""
    [throw] = (ROOT / "tests/scenarios/classic_group").glob(f"{name}*throw*.json")
    [fixed] = (ROOT / "tests/scenarios/classic_group").glob(f"{name}*fixed.json")
    for path, variant in ((throw, pre_fix), (fixed, "kip792")):
        doc = load(path)
        assert doc["variant"] == variant
        assert replay(spec.instantiate(variant, doc["params"]), doc).ok
        other = "kip792" if variant == pre_fix else pre_fix
        assert not replay(spec.instantiate(other, doc["params"]), {**doc, "variant": other}).ok
    actions = [s["action"] for s in load(throw)["steps"]]
    assert actions.count("AssignmentFails") == 2 and "SyncGroup" not in actions
