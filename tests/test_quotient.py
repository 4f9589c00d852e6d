"""The exact quotient over order-only domains (checker/quotient.py), one direction per test:

- every violation found on the quotient replays as a concrete trace on the unreduced spec
  (its generation cap raised out of the way);
- every violation the capped search finds within its cap is found on the quotient, with a trace
  no longer than the capped one (every classic_group variant, at small parameters);
- a spec that uses a declared domain other than order-wise is refused at its line;
- a spec the language accepts but whose quotient is not exact (a value + 1 stored below another)
  is stopped by the search's exactness check;
- the quotient's state count does not depend on the cap (it is finite)."""
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.bfs import search
from kcheck.loader import load_spec
from kcheck.quotient import QuotientError
from kcheck.spec.lang import SpecError
from kcheck.trace import replay, traces_of

ROOT = Path(__file__).resolve().parent.parent
EPOCHS = ROOT / "tests" / "specs_quotient" / "epochs.py"
classic = load_spec("classic_group")
SMALL = {"members": 2, "partitions": 2}
REFUSED = ["literal", "minus-one", "plain-int", "store-outside", "twice", "literal-assign"]


def _violations(res):
    return {name: f for name, f in res.found.items()}


def _replays_unreduced(spec, variant, params, res):
    """Every counterexample of ``res`` replays on the spec without the quotient, its caps raised
    to the most the parameters allow (a concrete trace's generations are the steps' own)."""
    big = spec.instantiate(variant, params)
    for name, tr in traces_of(res).items():
        out = replay(big, tr.to_json())
        assert out.ok, (variant, name, out.message)


@pytest.fixture(scope="module")
def classic_runs():
    """Per classic_group variant at small parameters: the capped search (max_generation=2) and
    the quotient search."""
    runs = {}
    for v in classic.variants:
        capped = search(classic.instantiate(v, {**SMALL, "max_generation": 2}))
        quotient = search(classic.instantiate(v, {**SMALL, "max_generation": 2}), quotient=True)
        runs[v] = capped, quotient
    return runs


def test_quotient_violations_replay_on_the_unreduced_spec(classic_runs):
    for v, (_capped, quotient) in classic_runs.items():
        assert quotient.quotient == "generation" and quotient.exhaustive
        _replays_unreduced(classic, v, {**SMALL, "max_generation": 12}, quotient)


def test_capped_violations_are_found_on_the_quotient_no_longer(classic_runs):
    found_any = 0
    for v, (capped, quotient) in classic_runs.items():
        assert capped.quotient is None or capped.quotient == "off"
        for name, f in capped.found.items():
            assert name in quotient.found, (v, name)
            assert len(quotient.found[name].steps) <= len(f.steps), (v, name)
            found_any += 1
    assert found_any >= 20       # the comparison is not vacuous


def test_quotient_statistics_say_every_generation(classic_runs):
    from kcheck.render import stats_line
    _capped, quotient = classic_runs["kip792"]
    line = stats_line(quotient)
    assert "every generation (quotient)" in line and "cut by search bounds" not in line
    assert quotient.cut_by_bounds == 0
    assert quotient.statistics["covers"] == "every generation (quotient)"


@pytest.mark.parametrize("variant", REFUSED)
def test_non_order_use_is_refused_at_its_line(variant):
    spec = load_spec(str(EPOCHS))
    line = next(i for i, text in enumerate(EPOCHS.read_text().splitlines(), start=1)
                if text.rstrip().endswith(f"# refused: {variant}"))
    with pytest.raises(SpecError) as e:
        spec.instantiate(variant)
    msg = str(e.value)
    assert msg.startswith(f"{EPOCHS}:{line}: "), msg
    assert "\n" not in msg


def test_refusal_on_the_command_line_is_one_line_exit_2():
    p = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(EPOCHS),
                        "--variant", "minus-one"], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and f"epochs.py:" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_an_inexact_quotient_is_detected():
    spec = load_spec(str(EPOCHS))
    with pytest.raises(QuotientError, match="not exact: Misuse"):
        search(spec.instantiate("catch-up"), quotient=True)
    # without the quotient the capped search runs as before
    assert search(spec.instantiate("catch-up")).exhaustive


def test_toy_quotient_matches_a_large_cap():
    spec = load_spec(str(EPOCHS))
    for v in ("exact", "skip-ahead"):
        capped = search(spec.instantiate(v, {"cap": 10}))
        quotient = search(spec.instantiate(v, {"cap": 1}), quotient=True)
        assert set(capped.found) == set(quotient.found)
        for name, f in capped.found.items():
            assert len(quotient.found[name].steps) == len(f.steps)
        _replays_unreduced(spec, v, {"cap": 12}, quotient)


def test_a_violation_past_the_cap_is_reported_at_the_cap_raised(tmp_path):
    """member-keeps-up breaks only at epoch 2: the capped search at cap=1 cannot see it, the
    quotient finds it, and its trace is reported (and saved, and replayed) at cap=2."""
    from kcheck.render import stats_line
    from kcheck.render import save
    from kcheck.trace import load
    spec = load_spec(str(EPOCHS))
    capped = search(spec.instantiate("exact", {"cap": 1}), ["member-keeps-up"])
    assert "member-keeps-up" not in capped.found
    res = search(spec.instantiate("exact", {"cap": 1}), ["member-keeps-up"], quotient=True)
    assert len(res.found["member-keeps-up"].steps) == 3
    assert res.model.params.cap == 1 and res.trace_model.params.cap == 2
    assert "reported at cap=2" in stats_line(res)
    tr = traces_of(res)["member-keeps-up"]
    doc = load(save(tr, tmp_path))
    assert doc["params"]["cap"] == 2
    out = replay(spec.instantiate(doc["variant"], doc["params"]), doc)
    assert out.ok, out.message


def test_quotient_with_symmetry():
    """Both canonical forms at once (renumbered, then the least member permutation): the same
    violations at the same depths, concrete traces that replay on the unreduced spec."""
    spec = load_spec(str(EPOCHS))
    for v in ("exact", "skip-ahead"):
        alone = search(spec.instantiate(v, {"members": 3}), quotient=True)
        both = search(spec.instantiate(v, {"members": 3}), quotient=True, symmetry=True)
        assert both.distinct_states < alone.distinct_states
        assert {n: len(f.steps) for n, f in both.found.items()} == \
            {n: len(f.steps) for n, f in alone.found.items()}
        _replays_unreduced(spec, v, {"members": 3, "cap": 12}, both)


def test_quotient_state_count_is_stable_when_the_cap_is_raised():
    spec = load_spec(str(EPOCHS))
    counts = {cap: search(spec.instantiate("exact", {"cap": cap}), quotient=True).distinct_states
              for cap in (1, 3, 12)}
    assert len(set(counts.values())) == 1, counts
    # the capped search grows with its cap; the quotient holds fewer states than a cap of 3
    assert search(spec.instantiate("exact", {"cap": 3})).distinct_states > counts[3]
    classic_counts = {g: search(classic.instantiate("kip792", {**SMALL, "max_generation": g}),
                                quotient=True).distinct_states for g in (1, 4)}
    assert len(set(classic_counts.values())) == 1, classic_counts


def test_renumbering_is_a_bisimulation_on_concrete_states():
    """The claim the quotient rests on, checked on concrete states with real gaps (random walks
    of classic_group with no cap in the way): a state and its renumbering enable the same action
    instances, give the same outcomes, invariants and transition-property verdicts, and reach
    states that renumber alike."""
    import random

    import numpy as np

    from kcheck import quotient as quotient_
    from kcheck.compile import Compiled
    from kcheck.layout import initial_words, layout_of
    rng = random.Random(32)
    for v in ("kip792", "kafka-12983", "kafka-14639"):
        q = quotient_.prepare(classic.instantiate(v, {**SMALL, "max_generation": 2}), True)
        comp = q.comp = Compiled(q.model, layout=layout_of(q.model))
        states = []
        for _walk in range(30):
            cur = np.array(initial_words(q.model)[0], dtype=np.uint64).reshape(-1, 1)
            for _step in range(40):
                states.append(cur)
                moves = [(k, T) for k, _i, _s, T, _o, ok in comp.successors(cur)
                         if ok is None or ok[0]]
                if not moves:
                    break
                cur = rng.choice(moves)[1]
        S = np.concatenate(states, axis=1)
        N = q.normalise(S)
        assert (q.normalise(N) == N).all()                        # idempotent
        assert (N != S).any(axis=0).sum() > S.shape[1] // 4       # real gaps: not vacuous
        for name, inv in comp.invariants.items():
            assert (np.broadcast_to(inv(S), S.shape[1:]) ==
                    np.broadcast_to(inv(N), S.shape[1:])).all(), (v, name)
        gs, gn = comp.guards(S), comp.guards(N)
        for k, (a, b) in enumerate(zip(gs, gn)):
            a, b = np.broadcast_to(a, S.shape[1:]), np.broadcast_to(b, S.shape[1:])
            assert (a == b).all(), (v, q.model.instances[k].label)
            idx = np.flatnonzero(a)
            if not len(idx):
                continue
            Tc, oc, okc = comp.effects[k](S[:, idx])
            Tn, on, okn = comp.effects[k](N[:, idx])
            if okc is not None:
                keep = np.asarray(okc) & np.asarray(okn)   # a walk's state may sit at the top
                Tc, Tn = Tc[:, keep], Tn[:, keep]
                sub_c, sub_n = S[:, idx][:, keep], N[:, idx][:, keep]
            else:
                sub_c, sub_n = S[:, idx], N[:, idx]
            assert (q.normalise(Tc) == q.normalise(Tn)).all(), (v, q.model.instances[k].label)
            if oc is not None:
                assert (np.broadcast_to(oc, idx.shape) == np.broadcast_to(on, idx.shape)).all()
            for name, tp in comp.tprops_by_instance.get(k, ()):
                if okc is not None:
                    oc_, on_ = (np.broadcast_to(oc, idx.shape)[keep] if oc is not None else None,
                                np.broadcast_to(on, idx.shape)[keep] if on is not None else None)
                else:
                    oc_, on_ = oc, on
                n = sub_c.shape[1]
                assert (np.broadcast_to(tp(sub_c, Tc, oc_), (n,)) ==
                        np.broadcast_to(tp(sub_n, Tn, on_), (n,))).all(), (v, name)
