"""What a "holds" covers (issue 32): a search that cut steps at an epoch cap says "up to" that cap
beside each holding verdict; `check --prove` proves them with the bounds lifted and says "every
epoch (proved)" for each proof that succeeds, and keeps "up to" for the others; a quotient search
covers every value of its domain; a search that cut nothing needs no qualification."""
import json

import pytest

from kcheck.cli import main
from kcheck.loader import load_spec
from kcheck.render import covers_line
from kcheck.run import Options, run_variant

CONSUMER = load_spec("consumer_group")


def _check(capsys, *argv):
    code = main(["check", *argv, "--json"])
    doc = json.loads(capsys.readouterr().out)
    return code, doc["properties"]


def _holding(props):
    return {p for p, r in props.items() if r["status"] in ("holds", "not-reached")}


@pytest.mark.slow
def test_consumer_group_holds_up_to_its_cap_and_every_epoch_when_proved(capsys):
    code, props = _check(capsys, "consumer_group", "--variant", "kip1251")
    assert code == 1      # kip1251 violates no-zombie-commit (the record)
    holding = _holding(props)
    assert len(holding) == 25
    # the search cut steps at max_epoch=4: each holds says so, each trace is its own evidence
    assert {p: r.get("covers") for p, r in props.items() if p in holding} == \
        {p: "up to max_epoch=4" for p in holding}
    assert not [p for p, r in props.items() if p not in holding and "covers" in r]

    code, proved = _check(capsys, "consumer_group", "--variant", "kip1251", "--prove")
    assert code == 1
    # the same verdicts; every holding one (lemmas included: Houdini keeps the inductive ones)
    # is proved with the epochs unbounded (measured: 25 of 25)
    assert {p: r["status"] for p, r in proved.items()} == {p: r["status"] for p, r in props.items()}
    assert {p: r.get("covers") for p, r in proved.items() if p in holding} == \
        {p: "every epoch (proved)" for p in holding}


@pytest.mark.slow
def test_a_holds_the_proof_does_not_decide_keeps_its_bound():
    """KAFKA-19974's variant at its max_epoch=3: a property the proof does not prove (nor
    assume as a lemma it kept) stays "up to max_epoch=3"; a proved one says every epoch."""
    from kcheck.verdict import Verdict, holds_covers
    run = run_variant(CONSUMER, "kafka-19974", None, Options(), prove=True)
    res = run.search
    proved = {pr.property for pr in run.proofs if pr.verdict is Verdict.PROVED}
    proved |= {lemma for pr in run.proofs if pr.verdict is Verdict.PROVED for lemma in pr.lemmas_used}
    holding = {p for p in res.properties if res.status(p) in (Verdict.HOLDS, Verdict.NOT_REACHED)}
    assert proved and holding - proved      # both kinds occur here (measured: 8 of 9 proved)
    assert {p: holds_covers(res, p, run.proofs) for p in holding} == \
        {p: "every epoch (proved)" if p in proved else "up to max_epoch=3" for p in holding}
    assert all(holds_covers(res, p, run.proofs) is None for p in set(res.properties) - holding)


def test_a_quotient_covers_every_generation(capsys):
    code, props = _check(capsys, "classic_group", "--param", "members=2", "--param", "partitions=1")
    holding = _holding(props)
    assert holding and {props[p].get("covers") for p in holding} == {"every generation (quotient)"}


def test_a_search_that_cut_nothing_needs_no_qualification(capsys):
    code, props = _check(capsys, "two_phase")
    assert code == 0 and _holding(props) and not [p for p in props.values() if "covers" in p]


def test_prove_is_for_one_variant(capsys):
    assert main(["check", "all", "--prove"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prove" in err[0] and "--variant" in err[0]
    assert main(["check", "consumer_group", "--all-variants", "--prove"]) == 2


def test_the_matrix_says_what_holds_covers():
    runs = [run_variant(CONSUMER, v, {"max_epoch": 3}, Options()).search
            for v in ("kip1251", "kafka-19974")]
    line = covers_line(CONSUMER, runs)
    assert line.startswith("consumer_group: 'holds' and 'NOT REACHED' cover up to max_epoch=3 "
                           "in every variant")
    assert "--prove" in line
    classic = load_spec("classic_group")
    runs = [run_variant(classic, None, {"members": 2, "partitions": 1}, Options()).search]
    assert covers_line(classic, runs).endswith("cover every generation (quotient) in every variant")
