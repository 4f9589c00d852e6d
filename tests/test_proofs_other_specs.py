"""Induction proofs (kcheck prove, Z3) of the producer, classic_group and shared_consumption specs:
the verdict of every safety property in each default variant with the spec's lemmas, that every
lemma is proved inductive there, that the holding properties of the other variants are proved too
(with the recorded exceptions), and that no property or lemma the search finds violated, in any
variant, is ever reported proved. Every proof is k=1 (one to three seconds of CPU each, about 290
of them: the module costs about 5 CPU minutes)."""
import pytest

from kcheck import symbolic
from kcheck.loader import load_spec

SPECS = ["producer", "classic_group", "shared_consumption"]
DEFAULT = {"producer": "kip360", "classic_group": "kip792", "shared_consumption": "draft"}

# The verdict of `kcheck prove SPEC --property P --k 1` at the default variant and sizes, epochs
# unbounded; the notes' "Proofs" section explains each NOT INDUCTIVE one.
VERDICTS = {
    "producer": {
        "no-duplicate": "proved", "in-order": "proved", "fenced-stays-fenced": "proved",
        "no-hanging-transaction": "proved", "marker-epoch-monotonic": "proved",
        "acknowledged-is-appended": "proved", "fenced-only-when-overtaken": "proved",
        # a commit at the current epoch meeting CompleteAbort: unreachable (the search never
        # finds it) but not excluded by an inductive lemma (spec/producer_notes.md, Proofs)
        "aborted-commit-is-fenced": "not-inductive",
        "new-records-in-order": "proved",
        # a request whose sequence is not its record's place in the epoch: unreachable, but the
        # lemma that pins it is not written (spec/producer_notes.md, Still missing)
        "out-of-order-only-after-a-gap": "not-inductive",
    },
    "classic_group": {
        "single-owner": "proved", "revoke-before-assign": "proved",
        "no-double-commit": "proved", "generation-monotonic": "proved",
        "revoked-before-reassigned": "proved", "stale-claim-never-wins": "proved",
        "cooperative-keeps-owned": "proved",
    },
    "shared_consumption": {
        "no-loss": "proved", "key-range-exclusive": "proved", "key-ranges-cover": "proved",
        "stable-offset-sound": "proved", "txn-order": "proved", "at-least-once": "proved",
        # violated in the search (the purgatory deadlock): never proved
        "deadlock": "not-inductive",
    },
}


def lemmas(spec):
    return [n for n, p in spec.properties.items() if p.lemma]


def safety(spec):
    """The properties `kcheck prove` takes: the spec's own (not lemmas), and deadlock when the
    spec has a terminal condition."""
    model = spec.instantiate(None)
    return [p for p in symbolic.provable_properties(model)
            if p not in spec.properties or not spec.properties[p].lemma]


@pytest.mark.parametrize("name", SPECS)
def test_the_table_names_every_safety_property(name):
    assert set(VERDICTS[name]) == set(safety(load_spec(name)))


# That every lemma, and every property proved below, holds in the default variant's search (it is
# exhaustive and finds only its record) is asserted by each spec's own module on the same search:
# test_producer and test_classic_group (test_default_verdicts), test_shared_consumption
# (test_verdicts_at_default_bounds, test_draft_holds_every_safety_property).
@pytest.mark.parametrize("name,prop", [(n, p) for n in SPECS for p in VERDICTS[n]])
def test_default_variant_verdict(name, prop):
    spec = load_spec(name)
    res = symbolic.prove(spec.instantiate(DEFAULT[name]), prop, k_max=1, bmc_depth=0)
    assert res.verdict == VERDICTS[name][prop], res.why
    if res.verdict == "proved":
        # every lemma is proved inductive with it: none dropped in the default variant
        assert res.lemmas_dropped == {}
        assert set(res.lemmas_used) == set(lemmas(spec)) - {prop}
    else:
        assert res.counterexample is not None and res.cti_action
        # a counterexample to induction starts where the property holds and ends where it fails
        assert len(res.counterexample.path.states) == 2


def test_the_lemmas_are_what_makes_the_central_properties_inductive():
    for name, prop in [("producer", "no-duplicate"), ("producer", "fenced-stays-fenced"),
                       ("shared_consumption", "no-loss"),
                       ("shared_consumption", "key-range-exclusive"),
                       ("classic_group", "single-owner"),
                       ("classic_group", "no-double-commit")]:
        model = load_spec(name).instantiate(DEFAULT[name])
        res = symbolic.prove(model, prop, k_max=1, use_lemmas=False, bmc_depth=0)
        assert res.verdict == "not-inductive", (name, prop)


def test_the_purgatory_deadlock_is_reported_violated_with_bmc():
    model = load_spec("shared_consumption").instantiate("draft")
    res = symbolic.prove(model, "deadlock", k_max=1, bmc_depth=8)
    assert res.verdict == "violated"
    assert len(res.counterexample.path.steps) == 8


# Every (variant, property or lemma) that the spec records as violated by the search; prove must
# never call one of them proved. (The records are checked against the search by each spec's own
# tests and by `kcheck check --all-variants`.)
VIOLATED = [(n, v, p) for n in SPECS for v, var in load_spec(n).variants.items()
            for p in sorted(var.expected_violations)
            # a scenario (sometimes) recorded as not reached is no property prove decides
            if ((p in load_spec(n).properties and load_spec(n).properties[p].kind != "sometimes")
                or p == "deadlock")
            # the default variant's are test_default_variant_verdict's (the same proof)
            and v != DEFAULT[n]]


@pytest.mark.parametrize("name,variant,prop", VIOLATED, ids=lambda x: str(x))
def test_a_violated_property_is_never_proved(name, variant, prop):
    model = load_spec(name).instantiate(variant)
    res = symbolic.prove(model, prop, k_max=1, bmc_depth=0)
    assert res.verdict != "proved"


# The other variants: every property the search finds holding is proved at k=1 as well, except
# these, whose counterexamples to induction the notes explain (the lemmas they need are broken
# in that variant or not written).
NOT_INDUCTIVE_ELSEWHERE = {
    ("producer", "pre-kip890"): {"no-duplicate", "acknowledged-is-appended"},
    # expiry before KAFKA-9144 breaks appended-retry-is-rejected, which no-duplicate rests on
    ("producer", "kafka-9144"): {"no-duplicate"},
    # two batches in flight: the lemmas are written for one (spec/producer_notes.md, Proofs)
    ("producer", "pre-kip360-in-flight"): {"new-records-in-order"},
    # two partitions: the lemmas are written per partition, several for one
    ("producer", "kafka-12152"): {"no-duplicate", "in-order", "acknowledged-is-appended",
                                  "new-records-in-order"},
    # not_leader=1: NOT_LEADER_OR_FOLLOWER and the client's last acknowledged sequence, which the
    # lemmas do not mention
    ("producer", "kafka-15591"): {"acknowledged-is-appended"},
    ("classic_group", "kip726-dynamic"): {"no-double-commit", "stale-claim-never-wins"},
    ("classic_group", "kip726-downgrade"): {"no-double-commit", "stale-claim-never-wins"},
    # timeouts=1: the lemmas that exclude a timed-out owner are vacuous there
    ("classic_group", "kafka-12983"): {"revoke-before-assign", "stale-claim-never-wins",
                                       "cooperative-keeps-owned"},
    ("classic_group", "pre-kip792-kafka-12983"): {"revoke-before-assign", "cooperative-keeps-owned"},
    # the pre-fix claim rule breaks assignment-respects-owners, which these rest on
    ("classic_group", "kafka-14639"): {"no-double-commit", "stale-claim-never-wins"},
    # built on pre-kip792-kafka-12983 (timeouts=1), as above
    ("classic_group", "kafka-12984"): {"revoke-before-assign", "cooperative-keeps-owned"},
    # built on kafka-14639's claim rule (assignment-respects-owners broken), with the generation of
    # the last assignment in the userData, which the lemmas do not relate to the group's
    ("classic_group", "kafka-13406"): {"revoke-before-assign", "no-double-commit", "single-owner",
                                       "revoked-before-reassigned", "stale-claim-never-wins"},
}
# Proved in a variant although not inductive in the default: the idempotent-only producer
# (transactional=0) has no transactional step (has_transactions), so a property about the
# transaction's end holds there at k=1 with nothing to step from.
PROVED_ELSEWHERE = {("producer", v): {"aborted-commit-is-fenced"}
                    for v in ("pre-kip360-in-flight", "kafka-8483", "kafka-12152", "kafka-15591")}
HOLDING_ELSEWHERE = [(n, v, p) for n in SPECS for v, var in load_spec(n).variants.items()
                     if v != DEFAULT[n] for p in VERDICTS[n]
                     if p != "deadlock" and p not in var.expected_violations]


@pytest.mark.parametrize("name,variant,prop", HOLDING_ELSEWHERE, ids=lambda x: str(x))
def test_other_variant_verdict(name, variant, prop):
    res = symbolic.prove(load_spec(name).instantiate(variant), prop, k_max=1, bmc_depth=0)
    # a property not inductive in the default has no lemmas to prove it in any variant
    want = "not-inductive" if prop in NOT_INDUCTIVE_ELSEWHERE.get((name, variant), ()) or \
        VERDICTS[name][prop] == "not-inductive" else "proved"
    if prop in PROVED_ELSEWHERE.get((name, variant), ()):
        want = "proved"
    assert res.verdict == want
