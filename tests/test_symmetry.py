"""Symmetry reduction (checker/symmetry.py): a wrong declaration is refused, and a reduced search
gives the unreduced search's verdicts and trace lengths, its orbits add up to the unreduced
count, and its counterexamples replay through the unreduced spec."""
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck import symmetry
from kcheck.bfs import search
from kcheck.compile import Compiled
from kcheck.layout import layout_of
from kcheck.loader import load_spec
from kcheck.trace import build, replay

ROOT = Path(__file__).resolve().parent.parent
TWO_PHASE = (ROOT / "spec" / "examples" / "two_phase.py").read_text()
RMS = ('spec.symmetry("rm", count=lambda p: p.N, '
       'arrays={"rm_state": "slot", "tm_prepared": "slot", "msg_prepared": "slot"}, '
       'why="the resource managers run the same code")\n')


def _spec_file(tmp_path, source: str, extra: str, name="sym_spec.py") -> Path:
    path = tmp_path / name
    path.write_text(source + "\n" + extra)
    return path


def _same_results(model, reduced, full):
    """The reduced search agrees with the full one: verdicts, depth, orbit sum, trace lengths,
    and every reduced counterexample replays through the unreduced spec."""
    assert reduced.symmetry not in (None, "off")
    assert {p: reduced.status(p) for p in reduced.properties} == \
        {p: full.status(p) for p in full.properties}
    assert reduced.depth == full.depth
    assert reduced.unreduced_states == full.distinct_states
    assert reduced.distinct_states < full.distinct_states
    for name, f in reduced.found.items():
        assert len(f.steps) == len(full.found[name].steps)
        doc = build(model, f.property, f.kind, f.initial, f.steps).to_json()
        assert replay(model, doc).ok, name


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("variant", ["default", "commit-without-prepares"])
def test_two_phase_reduced_matches_unreduced(tmp_path, n, variant):
    spec = load_spec(str(_spec_file(tmp_path, TWO_PHASE, RMS)))
    model = spec.instantiate(variant if variant in spec.variants else None, {"N": n})
    full = search(model)
    reduced = search(model, symmetry=True)
    _same_results(model, reduced, full)
    if variant == "commit-without-prepares":
        assert "consistent" in reduced.found
    assert full.symmetry == "off"


def test_two_phase_orbit_counts(tmp_path):
    """N=3 has 288 states (TLC's count); the orbits of three interchangeable resource managers
    are fewer, and add up to it."""
    model = load_spec(str(_spec_file(tmp_path, TWO_PHASE, RMS))).instantiate(None, {"N": 3})
    reduced = search(model, symmetry=True)
    assert (reduced.distinct_states, reduced.unreduced_states) == (80, 288)


def test_consumer_group_three_members_bounded(tmp_path):
    """Three members (slots 1 and 2 dynamic, slot 0 static): the same verdicts and trace lengths
    as the full search to depth 4, and the orbits add up to its count."""
    model = load_spec("consumer_group").instantiate(None, {"members": 3})
    full = search(model, max_depth=4)
    reduced = search(model, max_depth=4, symmetry=True)
    assert reduced.symmetry == "member slots 1,2"
    _same_results(model, reduced, full)
    assert reduced.found, "a counterexample within 4 steps exercises concrete traces"


def test_consumer_group_transition_counterexample_is_concrete():
    """KAFKA-19233's refused join (a transition property, 5 steps) at three members: the reduced
    search's last step is re-chosen on the concrete path and the trace replays unreduced."""
    model = load_spec("consumer_group").instantiate("kafka-19233", {"members": 3})
    full = search(model, ["join-accepted"], max_depth=5)
    reduced = search(model, ["join-accepted"], max_depth=5, symmetry=True)
    _same_results(model, reduced, full)
    assert reduced.found["join-accepted"].kind == "transition"
    assert len(reduced.found["join-accepted"].steps) == 5


@pytest.mark.slow
def test_consumer_group_every_variant_passes_the_check():
    spec = load_spec("consumer_group")
    for v in spec.variants:
        model = spec.instantiate(v, {"members": 3})
        sym = symmetry.for_model(model)
        assert sym is not None and len(sym.group) == 2, v
        assert symmetry.verify(model, Compiled(model, layout=layout_of(model)), sym, sample=500) == 500


# The soundness check (symmetry.verify: states permuted, successors and property values
# compared) runs on every variant above; the end-to-end comparison below runs on the default and
# on the variants whose rules read the slots differently from it: a static member's slot
# (static-keeps-epochs), partitions dropped and regexes resolved (unsubscribes,
# subscription-changes) and responses lost per member (lost-responses). The ten other variants
# change a coordinator rule that every slot goes through alike (about 120 s of test time saved).
END_TO_END = ["kip1251", "static-keeps-epochs", "unsubscribes", "subscription-changes",
              "lost-responses"]


def test_the_end_to_end_variants_exist():
    assert set(END_TO_END) <= set(load_spec("consumer_group").variants)


@pytest.mark.slow
@pytest.mark.parametrize("variant", END_TO_END)
def test_consumer_group_variant_reduced_matches_unreduced(variant):
    """The variant at three members and three partitions (member slots 1,2 and partitions 1,2
    alike: a group of 4), to depth 3."""
    model = load_spec("consumer_group").instantiate(variant, {"members": 3, "partitions": 3})
    full = search(model, max_depth=3)
    reduced = search(model, max_depth=3, symmetry=True)
    assert reduced.symmetry == "member slots 1,2, partition slots 1,2"
    _same_results(model, reduced, full)


def test_consumer_group_default_size_has_nothing_to_reduce():
    """Two members, one static: one dynamic slot, so the search is the unreduced one."""
    model = load_spec("consumer_group").instantiate(None, {})
    assert symmetry.for_model(model) is None


@pytest.mark.parametrize("extra,what", [
    # msg_prepared is indexed by resource manager too: leaving it out breaks the steps
    ('spec.symmetry("rm", count=lambda p: p.N, arrays={"rm_state": "slot", "tm_prepared": "slot"})\n',
     "step "),
    # a property about resource manager 0 only
    ('@spec.invariant("first-never-aborts")\ndef first(s, p):\n'
     '    """RM 0 never aborts."""\n    return s.rm_state[0] != RMState.aborted\n' + RMS,
     "invariant first-never-aborts differs"),
    # an initial state where resource manager 0 is special
    ('@spec.init\ndef init2(p):\n    yield {"rm_state": [RMState.prepared] + [RMState.working] * (p.N - 1),'
     ' "tm_state": TMState.init, "tm_prepared": [False] * p.N, "msg_prepared": [True] + [False] * (p.N - 1),'
     ' "msg_commit": False, "msg_abort": False}\n' + RMS,
     "initial states are not closed"),
])
def test_wrong_declaration_is_refused(tmp_path, extra, what):
    model = load_spec(str(_spec_file(tmp_path, TWO_PHASE, extra))).instantiate(None, {"N": 3})
    # checking `consistent` alone, so that a wrong step is not first seen as a wrong invariant
    props = ["consistent"] if what == "step " else None
    with pytest.raises(symmetry.SymmetryError, match=what):
        search(model, props, symmetry=True)
    assert search(model, props).exhaustive    # without the reduction nothing is claimed


def test_classic_group_member_symmetry_is_refused(tmp_path):
    """classic_group's coordinator picks the lowest joined slot as leader and the range assignor
    orders members by slot: a member symmetry is not one, and the check says so."""
    source = (ROOT / "spec" / "classic_group.py").read_text()
    decl = ('spec.symmetry("member", count=lambda p: p.members, arrays={f: "slot" for f in '
            '("in_group", "awaiting_join", "subscription_generation", "assignors", '
            '"rebalance_protocol", "member_state", "member_generation", "has_member_id", '
            '"rejoin_needed", "needs_join_prepare", "join_response_generation", '
            '"join_response_protocol", "completed_generation")} | {f: "slot,_" for f in '
            '("subscription_owned", "assignment", "owned", "committed")}, values=("leader",))\n')
    model = load_spec(str(_spec_file(tmp_path, source, decl))).instantiate(None, {"members": 2})
    with pytest.raises(symmetry.SymmetryError, match="symmetry member slots 0,1"):
        symmetry.verify(model, Compiled(model, layout=layout_of(model)), symmetry.for_model(model))


def _kcheck(*args):
    return subprocess.run([sys.executable, "-m", "kcheck.cli", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_cli_statistics_line_and_no_symmetry(tmp_path):
    path = str(_spec_file(tmp_path, TWO_PHASE, RMS))
    on = _kcheck("check", path, "--param", "N=3")
    assert on.returncode == 0, on.stderr
    assert "80 distinct states" in on.stdout
    assert "symmetry over rm slots 0,1,2: 80 orbits stand for 288 states (3.60x reduction)" in on.stdout
    off = _kcheck("check", path, "--param", "N=3", "--no-symmetry")
    assert off.returncode == 0, off.stderr
    assert "288 distinct states" in off.stdout and "symmetry off" in off.stdout


def test_cli_wrong_declaration_is_one_line(tmp_path):
    path = str(_spec_file(tmp_path, TWO_PHASE, 'spec.symmetry("rm", count=lambda p: p.N, '
                                                'arrays={"rm_state": "slot"})\n'))
    p = _kcheck("check", path, "--param", "N=3")
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("kcheck: error: symmetry rm slots 0,1,2 of spec two_phase: ")
    assert "Traceback" not in p.stderr
    assert _kcheck("check", path, "--param", "N=3", "--no-symmetry").returncode == 0


def test_cli_checkpoint_of_a_reduced_search_is_refused(tmp_path):
    """A checkpoint does not record the symmetry yet: refused in one line, --no-symmetry works."""
    path = str(_spec_file(tmp_path, TWO_PHASE, RMS))
    p = _kcheck("check", path, "--param", "N=3", "--checkpoint", str(tmp_path / "ck"))
    assert p.returncode == 2 and "add --no-symmetry" in p.stderr and "Traceback" not in p.stderr
    p = _kcheck("check", path, "--param", "N=3", "--checkpoint", str(tmp_path / "ck"), "--no-symmetry")
    assert p.returncode == 0, p.stderr
    assert "288 distinct states" in p.stdout
