"""Symmetry in the state graph (checker/graph.py, docs/design.md "Progress under symmetry"): the
progress check on the quotient graph gives the verdicts of the full graph, its orbits add up to
the full graph's states, a property that tells permuted slots apart is refused, the lassos and
paths it reports are concrete and replay through the unreduced spec, and the output says that
symmetry was on and by how much it reduced."""
import json
from pathlib import Path

import pytest

from kcheck.cli import main
from kcheck.graph import build_graph, check, lasso_trace
from kcheck.loader import load_spec
from kcheck.symmetry import SymmetryError
from kcheck.trace import build, replay, traces_of

ROOT = Path(__file__).resolve().parent.parent
TWO_PHASE = (ROOT / "spec" / "examples" / "two_phase.py").read_text()
RMS = ('spec.symmetry("rm", count=lambda p: p.N, '
       'arrays={"rm_state": "slot", "tm_prepared": "slot", "msg_prepared": "slot"}, '
       'why="the resource managers run the same code")\n')
# progress properties of two_phase with less fairness: violated, by a behaviour that stops
LESS_FAIR = '''
from kcheck.spec.lang import Exists

@spec.always_eventually("decides-if-rms-only", fair=["RMPrepare", "RMRcvCommitMsg", "RMRcvAbortMsg"])
def decides_if_rms_only(s, p):
    """Every resource manager eventually decides, with only the resource managers' steps fair."""
    return done(s, p)


@spec.leads_to("prepared-leads-to-decided", fair=["TMCommit", "TMAbort", "TMRcvPrepared"])
def prepared_leads_to_decided(s, p):
    """Once some resource manager is prepared, every one eventually decides."""
    return Exists(rms(p), lambda i: s.rm_state[i] == RMState.prepared), done(s, p)
'''
# a goal that names one slot: the declared symmetry does not keep it
ONE_SLOT = '''
@spec.always_eventually("first-rm-commits", fair=["TMCommit", "TMAbort", "TMRcvPrepared",
                                                  "RMPrepare", "RMRcvCommitMsg", "RMRcvAbortMsg"])
def first_rm_commits(s, p):
    """The first resource manager eventually commits."""
    return s.rm_state[0] == RMState.committed
'''


def two_phase(tmp_path, extra=LESS_FAIR):
    path = tmp_path / "two_phase_sym.py"
    path.write_text(TWO_PHASE + "\n" + RMS + extra)
    return load_spec(str(path)), path


def verdicts(res):
    return {p: res.status(p) for p in res.properties}


def assert_same_progress(model):
    """Reduced and full graphs: same verdicts and lasso lengths, the orbits add up, and every
    lasso of the reduced check replays through the unreduced spec."""
    full = check(build_graph(model, deadlock=None, symmetry=False))
    sg = build_graph(model, deadlock=None, symmetry=True)
    reduced = check(sg)
    assert sg.symmetry is not None and reduced.symmetry not in (None, "off", "none")
    assert full.symmetry == "off" and full.statistics["unreduced_states"] is None
    assert verdicts(reduced) == verdicts(full)
    assert sg.unreduced_states == full.graph.states
    assert sg.states < full.graph.states
    assert sg.max_depth == full.graph.max_depth
    for p, f in full.found.items():
        r = reduced.found[p]
        assert len(r.steps) == len(f.steps), p
        assert (r.loop_index, r.trigger_index) == (f.loop_index, f.trigger_index), p
    for p, tr in traces_of(reduced).items():
        rr = replay(model, json.loads(json.dumps(tr.to_json())))
        assert rr.ok, (p, rr.message)
    return reduced, full


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("variant", ["lamport", "commit-without-prepares"])
def test_two_phase_progress_reduced_equals_unreduced(tmp_path, n, variant):
    spec, _ = two_phase(tmp_path)
    reduced, _ = assert_same_progress(spec.instantiate(variant, {"N": n}))
    assert reduced.status("decides") == "holds"
    # the weaker fairness is violated by stopping: a lasso whose loop is empty
    for p in ("decides-if-rms-only", "prepared-leads-to-decided"):
        assert reduced.status(p) == "violated"
        assert reduced.lasso(p).loop_index == len(reduced.lasso(p).steps)


# consumer_group at a size where its partition slots 1 and 2 are alike; lost-responses and the
# pre-fix variants violate eventually-converges with a loop that is not empty
CG = {"partitions": "3", "max_epoch": "2", "commits_in_flight": "0"}
CG_VARIANTS = ["kip1251", "kafka-20442", "kafka-19233", "lost-responses", "static-keeps-epochs",
               "subscription-changes"]


@pytest.mark.parametrize("variant", CG_VARIANTS)
def test_consumer_group_progress_reduced_equals_unreduced(variant):
    model = load_spec("consumer_group").instantiate(variant, CG)
    reduced, _ = assert_same_progress(model)
    assert reduced.symmetry == "partition slots 1,2"
    expected = load_spec("consumer_group").variants[variant].expected_violations
    assert (reduced.status("eventually-converges") == "violated") == \
        ("eventually-converges" in expected)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["unsubscribes", "kafka-19974", "metadata-changes"])
def test_consumer_group_progress_reduced_equals_unreduced_larger(variant):
    assert_same_progress(load_spec("consumer_group").instantiate(variant, CG))


def test_a_lasso_with_a_loop_found_under_symmetry_replays(tmp_path):
    model = load_spec("consumer_group").instantiate("lost-responses", CG)
    sg = build_graph(model, symmetry=True)
    res = check(sg)
    lasso = res.lasso("eventually-converges")
    assert lasso is not None and lasso.loop_index < len(lasso.steps)   # a loop, not a stop
    doc = lasso_trace(sg, "eventually-converges", lasso).to_json()
    path = tmp_path / "lasso.json"
    path.write_text(json.dumps(doc))
    assert main(["replay", str(path)]) == 0


def test_paths_of_the_quotient_are_made_concrete(tmp_path):
    """Every path to a deepest orbit (what a deadlock's trace is) replays through the unreduced
    spec and ends in that orbit."""
    from kcheck.verdict import Counterexample
    spec, _ = two_phase(tmp_path)
    model = spec.instantiate(None, {"N": 3})
    sg = build_graph(model, symmetry=True)
    deepest = [i for i in range(sg.states) if sg.depth[i] == sg.max_depth]
    assert deepest
    for i in deepest:
        initial, steps = sg.trace_to(i)
        cx = sg.concrete(Counterexample("deadlock", "deadlock", initial, steps))
        assert len(cx.steps) == len(steps)
        tr = build(model, None, None, cx.initial, cx.steps)
        assert replay(model, json.loads(json.dumps(tr.to_json()))).ok
        last = tr.steps[-1].words if tr.steps else tr.initial
        import numpy as np
        canon = sg.symmetry.canonical(np.array(last, dtype=np.uint64).reshape(-1, 1))
        assert sg.index_of(canon) == i


def test_a_progress_property_that_tells_slots_apart_is_refused(tmp_path, capsys):
    spec, path = two_phase(tmp_path, ONE_SLOT)
    model = spec.instantiate(None, {"N": 2})
    with pytest.raises(SymmetryError, match="first-rm-commits differs between state"):
        check(build_graph(model, symmetry=True))
    # the command line says so in one line (exit 2), and --no-symmetry checks it in full
    assert main(["progress", str(path), "--param", "N=2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "first-rm-commits" in err
    assert main(["progress", str(path), "--param", "N=2", "--no-symmetry",
                 "--property", "first-rm-commits"]) == 1     # an abort is a fair outcome


def test_the_output_says_symmetry_was_on_and_the_reduction(tmp_path, capsys):
    _, path = two_phase(tmp_path)
    code = main(["progress", str(path), "--param", "N=3", "--property", "decides", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["symmetry"] == "rm slots 0,1,2" and doc["unreduced_states"] == 288
    assert doc["states"] < 288
    main(["progress", str(path), "--param", "N=3", "--property", "decides"])
    out = capsys.readouterr().out
    assert (f"symmetry over rm slots 0,1,2: {doc['states']:,} orbits stand for 288 states "
            f"({288 / doc['states']:.2f}x reduction)") in out
    main(["progress", str(path), "--param", "N=3", "--property", "decides", "--no-symmetry", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["symmetry"] == "off" and doc["states"] == 288 and doc["unreduced_states"] is None
