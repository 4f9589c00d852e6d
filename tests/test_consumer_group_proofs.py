"""Proofs for consumer_group at the spec's default sizes with every epoch unbounded (k-induction,
k=1, with the spec's lemmas): what the search finds holding in kip1251 is PROVED, what it finds
violated never is; the lemmas are load-bearing; KAFKA-19974 is what separates kip1251 from the
variant in which no-zombie-commit is proved. See "Proofs" in spec/consumer_group_notes.md."""
import pytest

from kcheck.loader import load_spec
from kcheck.symbolic import prove
from kcheck.trace import replay

SPEC = load_spec("consumer_group")
KIP1251 = SPEC.instantiate("kip1251")          # default sizes: the proofs are for these sizes
LEMMAS = {p.name for p in SPEC.properties.values() if p.lemma}
BROKEN_BY_19974 = {"released-partition-commit-is-stale", "zombie-commit-is-stale"}
HOLDING = ["epoch-order", "single-owner", "client-owns-held", "no-spurious-fencing"]


def replays(cx) -> bool:
    tr = cx.trace
    return tr is not None and replay(tr.model, tr.to_json()).ok


def test_record_lists_what_kip1251_violates():
    # the proofs below are asserted against this record, which the search checks (test_consumer_group)
    v = SPEC.variants["kip1251"].expected_violations
    assert v == {"no-zombie-commit", "unrevoked-has-pending"} | BROKEN_BY_19974
    assert set(HOLDING).isdisjoint(v)
    assert BROKEN_BY_19974 <= LEMMAS and len(LEMMAS) >= 15


@pytest.mark.parametrize("prop", HOLDING)
def test_kip1251_holding_property_is_proved(prop):
    pr = prove(KIP1251, prop, k_max=1, bmc_depth=0)
    assert pr.verdict == "proved" and pr.k == 1, (prop, pr.verdict, pr.lemmas_dropped)
    # every lemma true in kip1251 survives (Houdini keeps it); the two that KAFKA-19974 breaks
    # are dropped, and the proof does not rest on them
    assert set(pr.lemmas_used) == LEMMAS - BROKEN_BY_19974
    assert set(pr.lemmas_dropped) == BROKEN_BY_19974


def test_kip1251_proofs_need_the_lemmas():
    for prop in ("epoch-order", "no-spurious-fencing"):
        pr = prove(KIP1251, prop, k_max=1, use_lemmas=False, bmc_depth=0)
        assert pr.verdict == "not-inductive", (prop, pr.verdict)
        assert len(pr.counterexample.path.steps) == 1 and pr.cti_action


def test_kip1251_unrevoked_has_pending_is_violated_not_proved():
    # KAFKA-20641: a static member that leaves with -2 in UNREVOKED_PARTITIONS (4 steps)
    pr = prove(KIP1251, "unrevoked-has-pending", k_max=1, bmc_depth=4)
    assert pr.verdict == "violated"
    cx = pr.counterexample
    assert len(cx.path.steps) == 4 and replays(cx)
    assert [s.action for s in cx.trace.steps][-1] == "Leave"
    assert cx.trace.steps[-1].args == {"m": 0, "epoch": -2}


def test_kip1251_no_zombie_commit_is_never_proved():
    # the search's counterexample is 11 steps (too deep for bmc here; test_consumer_group's
    # test_kip1251_fixes_the_race_but_not_the_19974_zombie asserts it on this model): k-induction
    # must fail
    pr = prove(KIP1251, "no-zombie-commit", k_max=1, bmc_depth=0)
    assert pr.verdict == "not-inductive" and pr.cti_action.startswith("HandleCommit")
    assert BROKEN_BY_19974 <= set(pr.lemmas_dropped)


def test_kip1251_lemma_broken_by_19974_is_not_proved():
    # proved as a target on its own, the lemma fails induction in kip1251 (the search finds it
    # violated in 8 steps) and is proved in unrevoked-epoch-bump
    pr = prove(KIP1251, "released-partition-commit-is-stale", k_max=1, bmc_depth=0)
    assert pr.verdict == "not-inductive"


def test_pre_19974_reconciliation_proves_no_zombie_commit():
    model = SPEC.instantiate("unrevoked-epoch-bump")
    pr = prove(model, "no-zombie-commit", k_max=1, bmc_depth=0)
    assert pr.verdict == "proved" and pr.k == 1
    assert set(pr.lemmas_used) == LEMMAS and not pr.lemmas_dropped
    # without lemmas, induction fails
    pr = prove(model, "no-zombie-commit", k_max=1, bmc_depth=0, use_lemmas=False)
    assert pr.verdict == "not-inductive"


def test_strict_no_spurious_fencing_is_violated_not_proved():
    # KAFKA-20066 under the pre-KIP-1251 check: the racing owner's commit is fenced (4 steps)
    pr = prove(SPEC.instantiate("strict"), "no-spurious-fencing", k_max=1, bmc_depth=4)
    assert pr.verdict == "violated" and len(pr.counterexample.path.steps) == 4
    assert replays(pr.counterexample)


@pytest.mark.parametrize("prop", ["empty-group-at-target-epoch", "unreleased-waits-for-another-member",
                                  "join-accepted"])
def test_kip1251_known_bug_properties_are_proved(prop):
    # the properties that the pre-fix variants of KAFKA-20442, KAFKA-19449 and KAFKA-19233 break
    # hold in kip1251 for every epoch, not only up to the search bound
    assert prop not in SPEC.variants["kip1251"].expected_violations
    pr = prove(KIP1251, prop, k_max=1, bmc_depth=0)
    assert pr.verdict == "proved" and pr.k == 1, (prop, pr.verdict)
