"""The symbolic engine against the explicit search, on every shipped spec and on a small epoch
spec of its own: bmc finds the search's shortest counterexamples and nothing the search does not,
proofs never contradict the search, traces replay, rule comparison answers with a witness."""
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import small_sizes
from kcheck.bfs import search
from kcheck.layout import initial_words, layout_of
from kcheck.loader import load_spec
from kcheck.symbolic import bmc, compare, fit_model, prove, rule_call_sites
from kcheck.trace import replay
from kcheck.spec import SHIPPED
from kcheck.spec.lang import SpecError

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-m", "kcheck.cli"]

# Small bounds of the tests' own; specs without an entry shrink every parameter of the variant
# (its own settings kept, tests/small_sizes.py) to at most 2.
TEST_PARAMS = {"two_phase": {"N": 2}}
# bmc proves "no violation at depth d" for every property up to this depth (or the search's
# depth when smaller). Unsatisfiable unrollings still grow costly on consumer_group (about 9 s at
# depth 6 and 25 s at depth 8 for one property, on this shared machine: docs/symbolic.md), so
# deeper violations are checked at their own length: bmc must find one there, and it must replay.
HOLD_DEPTH = 4
MAX_STATES = 200_000
# no solver timeout: a timeout would make the verdict depend on the machine's load (a 19-step
# bmc took 126 s on this machine at load 13, past the 120 s timeout it had)
TIMEOUT_S = None


def kcheck(*args, timeout=300):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def small_params(name, spec, variant):
    if name in TEST_PARAMS:
        return TEST_PARAMS[name]
    return small_sizes.small_params(spec, variant, lambda p: 2)


def cases():
    out = []
    for name in sorted(SHIPPED):
        spec = load_spec(name)
        for v in spec.variants or [None]:
            out.append(pytest.param(name, v, id=f"{name}-{v}"))
    return out


def replays(cx) -> bool:
    tr = cx.trace
    return tr is not None and replay(tr.model, tr.to_json()).ok


@functools.lru_cache(maxsize=None)
def small_search(name, variant):
    """The variant at the tests' small bounds and its search, shared by the two cross-checks of
    a variant when they run in one process (each cost a search of its own)."""
    spec = load_spec(name)
    model = spec.instantiate(variant, small_params(name, spec, variant))
    return model, search(model, max_states=MAX_STATES)


def proved_at_default_sizes(name, variant) -> bool:
    """Whether the model prove sees here is the very model test_proofs_other_specs proves at the
    variant's default sizes: producer's small bounds differ from its defaults only in max_epoch,
    a search bound that prove lifts, unless the variant sets parameters of its own (which
    small_params brings down to 2: kafka-8483's four records in flight, for one). Its recorded violations are shown never proved there
    (test_a_violated_property_is_never_proved)."""
    return name == "producer" and not load_spec(name).variants[variant].params


# ---------------------------------------------------------------------------------------------
# Cross-checks with the explicit search, over every shipped spec

@pytest.mark.parametrize("name,variant", cases())
def test_bmc_agrees_with_search(name, variant):
    model, r = small_search(name, variant)
    lengths = {p: len(f.steps) for p, f in r.found.items()}
    hold_depth = min(r.depth, HOLD_DEPTH)
    # with the search's caps kept, bmc decides the very same state space as the search: up to
    # hold_depth it finds exactly the violations the search finds, at the same lengths
    b = bmc(model, depth=hold_depth, keep_search_bounds=True, timeout_s=TIMEOUT_S)
    assert b.inconclusive is None
    assert set(r.properties) == set(b.properties)
    assert {p: len(c.path.steps) for p, c in b.found.items()} == \
        {p: n for p, n in lengths.items() if n <= hold_depth}
    found = dict(b.found)
    deeper = {p: n for p, n in lengths.items() if n > hold_depth}
    if deeper:
        # the deeper ones in one unrolling, asked at every depth past hold_depth: each is found at
        # the search's length and no shorter (one unrolling per property cost producer's
        # pre-kip360 50 s of CPU instead of 9)
        kept = bmc(model, list(deeper), depth=max(deeper.values()), keep_search_bounds=True,
                   timeout_s=TIMEOUT_S, min_depth=hold_depth + 1)
        assert kept.inconclusive is None
        assert {p: len(c.path.steps) for p, c in kept.found.items()} == deeper
        found.update(kept.found)
    for p, cx in found.items():
        assert replays(cx), p
    if not lengths:
        return
    # with the caps lifted every behaviour of the capped model is still there, so each violation
    # is found again, no deeper than the search's (lifting may make one shorter), and replays
    lifted = bmc(model, list(lengths), depth=max(lengths.values()), timeout_s=TIMEOUT_S)
    assert lifted.inconclusive is None and set(lifted.found) == set(lengths)
    for p, cx in lifted.found.items():
        assert len(cx.path.steps) <= lengths[p] and replays(cx), p


@pytest.mark.parametrize("name,variant", cases())
def test_prove_never_contradicts_the_search(name, variant):
    spec = load_spec(name)
    model, r = small_search(name, variant)
    # a scenario's witness is not a violation: prove does not take it
    violated = {p for p in r.found if p not in spec.properties or spec.properties[p].kind != "sometimes"}
    if proved_at_default_sizes(name, variant):
        # the same proofs are made on the same model by test_proofs_other_specs; what the search
        # finds here must be among them
        assert violated <= spec.variants[variant].expected_violations
        return
    for p in sorted(violated):
        pr = prove(model, p, k_max=1, timeout_s=TIMEOUT_S, bmc_depth=0)
        assert pr.verdict in ("violated", "not-inductive"), (p, pr.verdict)


# ---------------------------------------------------------------------------------------------
# Proofs on two_phase

def test_two_phase_every_property_proved_with_lemmas():
    model = load_spec("two_phase").instantiate("lamport", {"N": 3})
    for p in model.spec.properties:
        pr = prove(model, p, k_max=1)
        assert pr.verdict == "proved" and pr.k == 1, (p, pr.verdict, pr.lemmas_dropped)
    # deadlock freedom would need the converse lemmas too (a TM that has aborted has sent Abort):
    # from a state where it has not, nothing is enabled
    pr = prove(model, "deadlock", k_max=1, bmc_depth=0)
    assert pr.verdict == "not-inductive" and replays(pr.counterexample)
    pr = prove(model, "consistent", k_max=1)
    assert set(pr.lemmas_used) == {p.name for p in model.invariants if p.lemma}


def test_two_phase_consistent_not_inductive_without_lemmas():
    model = load_spec("two_phase").instantiate("lamport", {"N": 3})
    pr = prove(model, "consistent", k_max=2, use_lemmas=False, bmc_depth=6)
    assert pr.verdict == "not-inductive" and pr.k == 2
    cx = pr.counterexample
    assert len(cx.path.steps) == 2 and pr.cti_action == cx.trace.steps[-1].label
    # the counterexample to induction replays from its (unreachable) first state and ends in a
    # state that breaks the property
    assert replays(cx)
    first = cx.trace.initial_state
    assert first not in [layout_of(model).show(layout_of(model).unpack_flat(w)) for w in initial_words(model)]


def test_two_phase_broken_variant_violated_and_lemma_dropped():
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 3})
    pr = prove(model, "consistent", k_max=2, bmc_depth=5)   # the base case sees 1-step violations
    assert pr.verdict == "violated" and len(pr.counterexample.path.steps) == 3
    assert sorted(s.action for s in pr.counterexample.trace.steps) == \
        ["RMChooseToAbort", "RMRcvCommitMsg", "TMCommit"]
    assert pr.lemmas_dropped.get("commit-after-all-prepared") == "violated"
    assert prove(model, "commit-after-all-prepared", k_max=1).verdict == "violated"


# ---------------------------------------------------------------------------------------------
# A spec of the tests' own, with epochs and a rule with two variants

EPOCHS = '''
"""A member, its client and a coordinator: the client commits offsets with the last epoch it
heard of; the coordinator bumps the group epoch."""
from kcheck.spec.lang import Spec, Int, Bool, Enum, If

spec = Spec("epochs", __doc__)
spec.param("max_epoch", 2, lo=1, hi=20)
Error = spec.outcomes(Enum("Error", "NONE STALE_MEMBER_EPOCH"))


@spec.state
def state(p):
    return {"group_epoch": Int(1, p.max_epoch, search_bound=True),
            "member_epoch": Int(0, p.max_epoch, search_bound=True),
            "client_epoch": Int(0, p.max_epoch, search_bound=True),
            "committed": Bool}


@spec.init
def init(p):
    yield {"group_epoch": 1, "member_epoch": 0, "client_epoch": 0, "committed": False}


@spec.action
def Bump(s, p):
    s.group_epoch = s.group_epoch + 1


@spec.action
def Heartbeat(s, p):
    s.require(s.member_epoch != s.group_epoch)
    s.member_epoch = s.group_epoch


@spec.action
def HeartbeatResponse(s, p):
    s.require(s.client_epoch != s.member_epoch)
    s.client_epoch = s.member_epoch


@spec.action
def Commit(s, p):
    decision = s.rule("offset-commit", epoch=s.client_epoch)
    s.committed = decision == Error.NONE
    s.respond(decision)


@spec.action(e=lambda p: range(0, p.max_epoch + 1))
def ZombieCommit(s, p, e):
    s.respond(s.rule("offset-commit", epoch=e))


@spec.rule("offset-commit")
def lenient(s, p, epoch):
    return If(epoch <= s.member_epoch, Error.NONE, Error.STALE_MEMBER_EPOCH)


@spec.rule("offset-commit", variant="strict")
def strict(s, p, epoch):
    return If(epoch == s.member_epoch, Error.NONE, Error.STALE_MEMBER_EPOCH)


@spec.invariant("member-behind-group", lemma=True)
def member_behind_group(s, p):
    """No member epoch is ahead of the group epoch."""
    return s.member_epoch <= s.group_epoch


@spec.invariant("client-behind-member")
def client_behind_member(s, p):
    """The client's epoch is never ahead of its member epoch."""
    return s.client_epoch <= s.member_epoch


@spec.invariant("group-epoch-below-three")
def below_three(s, p):
    """The group epoch stays below 3."""
    return s.group_epoch < 3


@spec.transition_property("commit-at-member-epoch", actions=["Commit"])
def commit_at_member_epoch(pre, post, action, args, outcome, p):
    """A commit is accepted only at the member's current epoch."""
    return (outcome != Error.NONE) | (pre.client_epoch == pre.member_epoch)


spec.variant("lenient", "accepts any epoch up to the member epoch", default=True,
             violates=["commit-at-member-epoch"])
spec.variant("strict", "accepts only the member epoch")
'''


@pytest.fixture
def epochs(tmp_path):
    f = tmp_path / "epochs.py"
    f.write_text(EPOCHS)
    return f


def test_keep_bounds_matches_search_and_lifting_finds_more(epochs):
    spec = load_spec(str(epochs))
    m = spec.instantiate("lenient", {})
    r = search(m)
    assert r.exhaustive and r.cut_by_bounds > 0
    assert "group-epoch-below-three" not in r.found   # the cap max_epoch=2 hides it
    kept = bmc(m, depth=r.depth + 2, keep_search_bounds=True)
    assert kept.exhaustive is False and "group-epoch-below-three" not in kept.found
    # Heartbeat, then a Commit with the client still at epoch 0
    assert len(kept.found["commit-at-member-epoch"].path.steps) == len(r.found["commit-at-member-epoch"].steps) == 2
    lifted = bmc(m, ["group-epoch-below-three"], depth=4)
    cx = lifted.found["group-epoch-below-three"]
    assert [s.action for s in cx.trace.steps] == ["Bump", "Bump"]
    # the trace leaves max_epoch=2: it is replayed in a model with a larger cap, and says so
    assert cx.trace.model.params.max_epoch == 3 and "max_epoch=3" in cx.note
    assert replays(cx)


def test_fit_model_keeps_a_model_that_fits(epochs):
    m = load_spec(str(epochs)).instantiate("lenient", {})
    cx = bmc(m, ["commit-at-member-epoch"], depth=4).found["commit-at-member-epoch"]
    assert fit_model(m, cx.path)[0] is m and cx.note is None


def test_epoch_invariants_proved_for_every_epoch(epochs):
    m = load_spec(str(epochs)).instantiate("strict", {})
    for p in ("member-behind-group", "client-behind-member", "commit-at-member-epoch"):
        assert prove(m, p, k_max=1).verdict == "proved", p
    pr = prove(m, "group-epoch-below-three", k_max=2, bmc_depth=3)
    assert pr.verdict == "violated" and len(pr.counterexample.path.steps) == 2
    # lenient: commit-at-member-epoch fails once the client lags its member
    pr = prove(load_spec(str(epochs)).instantiate("lenient", {}), "commit-at-member-epoch", k_max=1)
    assert pr.verdict == "violated" and replays(pr.counterexample)


def test_compare_finds_the_lenient_rule_accepts_strictly_more(epochs):
    spec = load_spec(str(epochs))
    sites = rule_call_sites(spec.instantiate("lenient", {}), "offset-commit")
    assert len(sites) == 1 + 3   # Commit's client epoch, ZombieCommit's e = 0..2
    r = compare(spec, "offset-commit", "lenient", "strict")
    assert r.relation == "lenient accepts strictly more than strict"
    assert r.a_rejects_b_accepts is None
    d = r.b_rejects_a_accepts
    assert (d.result_a, d.result_b) == ("NONE", "STALE_MEMBER_EPOCH")
    assert "group-epoch-below-three" in r.assumed   # recorded as holding in both variants
    # the witness really distinguishes the two rules
    epoch = d.args["epoch"] if isinstance(d.args["epoch"], int) else d.state["client_epoch"]
    assert epoch < d.state["member_epoch"]
    r2 = compare(spec, "offset-commit", "strict", "lenient", lift=["epoch"])
    assert r2.relation == "lenient accepts strictly more than strict"
    assert r2.b_rejects_a_accepts is None and r2.a_rejects_b_accepts.args["epoch"] < \
        r2.a_rejects_b_accepts.state["member_epoch"]
    same = compare(spec, "offset-commit", "strict", "strict")
    assert same.relation == "same-acceptance" and same.decisions_differ is None


def test_compare_on_consumer_group_offset_commit():
    """KIP-1251 says the new check is strictly weaker (accepts more) than the strict one."""
    if "consumer_group" not in SHIPPED:
        pytest.skip("consumer_group has not landed")
    spec = load_spec("consumer_group")
    if "offset-commit" not in spec.rules or not {"kip1251", "strict"} <= set(spec.variants):
        pytest.skip("consumer_group has no offset-commit rule with kip1251 and strict variants")
    r = compare(spec, "offset-commit", "kip1251", "strict", timeout_s=TIMEOUT_S)
    assert r.inconclusive is None
    assert r.relation == "kip1251 accepts strictly more than strict", r.relation
    assert r.b_rejects_a_accepts is not None


# ---------------------------------------------------------------------------------------------
# The command line

def test_cli_bmc_json_and_save(tmp_path):
    p = kcheck("bmc", "two_phase", "--variant", "commit-without-prepares", "--param", "N=2",
               "--property", "consistent", "--depth", "4", "--json", "--save", "--out", str(tmp_path))
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["properties"]["consistent"]["status"] == "violated"
    assert doc["properties"]["consistent"]["trace_length"] == 3
    saved = tmp_path / "two_phase" / "commit-without-prepares" / "consistent.json"
    assert saved.exists()
    r = kcheck("replay", str(saved))
    assert r.returncode == 0 and "REPRODUCES" in r.stdout


def test_cli_bmc_bounded_exit_3_and_exhaustive_exit_0(epochs, tmp_path):
    p = kcheck("bmc", "two_phase", "--param", "N=2", "--depth", "3")
    assert p.returncode == 3 and "no violation up to depth 3" in p.stdout
    # a spec whose every behaviour stops: bmc covers it all
    stop = tmp_path / "stop.py"
    stop.write_text('from kcheck.spec.lang import Spec, Int\nspec = Spec("stop")\n'
                    '@spec.state\ndef state(p):\n    return {"x": Int(0, 3)}\n'
                    '@spec.init\ndef init(p):\n    yield {"x": 0}\n'
                    '@spec.action\ndef Step(s, p):\n    s.require(s.x < 3)\n    s.x = s.x + 1\n'
                    '@spec.invariant("small")\ndef small(s, p):\n    """x stays below 4."""\n'
                    '    return s.x < 4\n')
    p = kcheck("bmc", str(stop), "--depth", "10", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["exhaustive"] is True


def test_cli_prove_output_and_codes(epochs):
    p = kcheck("prove", "two_phase", "--property", "consistent")
    assert p.returncode == 0 and "PROVED" in p.stdout and "benchmark: consistent:" in p.stdout
    p = kcheck("prove", "two_phase", "--property", "consistent", "--no-lemmas", "--k", "1",
               "--bmc-depth", "3", "--json")
    assert p.returncode == 3
    doc = json.loads(p.stdout)
    res = doc["properties"]["consistent"]
    # one run document, like check's: the counterexample to induction is the property's trace
    assert doc["engine"] == "z3-k-induction" and doc["record"]["matches"] is True
    assert res["status"] == "not-inductive" and res["trace"]["steps"] and res["trace_length"] == 1
    assert res["cti_action"] == res["trace"]["steps"][-1]["action"] + "(rm=" + \
        str(res["trace"]["steps"][-1]["args"]["rm"]) + ")"
    p = kcheck("prove", str(epochs), "--property", "group-epoch-below-three", "--k", "1")
    assert p.returncode == 1 and "VIOLATED" in p.stdout and "max_epoch=3" in p.stdout


def test_cli_compare(epochs):
    p = kcheck("compare", str(epochs), "--rule", "offset-commit", "--variants", "strict", "lenient",
               "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["relation"] == "lenient accepts strictly more than strict"
    assert doc["engine"] == "z3-compare" and doc["variants"] == ["strict", "lenient"]
    props = doc["properties"]
    assert props["strict-accepts-what-lenient-accepts"]["status"] == "violated"
    assert props["strict-accepts-what-lenient-accepts"]["witness"]["results"] == {
        "strict": "STALE_MEMBER_EPOCH", "lenient": "NONE"}
    assert props["lenient-accepts-what-strict-accepts"] == {
        "status": "proved", "kind": "rule-acceptance", "trace_length": None, "loop_index": None,
        "trace": None, "witness": None}


@pytest.mark.parametrize("args,needle", [
    (["bmc", "two_phase", "--depth", "0"], "--depth must be a positive integer"),
    (["bmc", "two_phase", "--property", "nope"], "unknown property 'nope'"),
    (["prove", "two_phase", "--variant", "nope"], "unknown variant 'nope'"),
    (["compare", "two_phase", "--rule", "nope", "--variants", "lamport", "lamport"], "unknown rule 'nope'"),
    (["bmc", "two_phase", "--timeout", "x"], "--timeout must be a number"),
])
def test_cli_bad_input_one_line_exit_2(args, needle):
    p = kcheck(*args)
    assert p.returncode == 2 and needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_unsupported_construct_names_the_spec_line(tmp_path):
    f = tmp_path / "odd.py"
    f.write_text('from kcheck.spec.lang import Spec, Int, Expr\nspec = Spec("odd")\n'
                 '@spec.state\ndef state(p):\n    return {"x": Int(0, 3)}\n'
                 '@spec.init\ndef init(p):\n    yield {"x": 0}\n'
                 '@spec.action\ndef Step(s, p):\n    s.require(Expr("xor", (s.x < 1, s.x < 2), "bool"))\n'
                 '    s.x = 1\n')
    with pytest.raises(SpecError, match=r"odd.py:11: 'xor' is not an operation of the language"):
        bmc(load_spec(str(f)).instantiate(None, {}), depth=2)
    p = kcheck("bmc", str(f), "--depth", "2")
    assert p.returncode == 2 and "odd.py:11" in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------------------------------------
# bmc's encoding: exact bit-widths, and a cap on lifted bounds that widens

def test_signed_width_and_value_range_cover_every_subterm():
    from kcheck.symbolic import signed_width, value_range
    from kcheck.spec.lang import Expr
    assert [signed_width(lo, hi) for lo, hi in ((0, 0), (0, 1), (-1, 0), (-2, 1), (-2, 4), (0, 15), (-16, 15))] \
        == [1, 2, 1, 2, 4, 5, 5]
    x = Expr("field", (0, "x", "pre"), "int")
    y = Expr("field", (1, "y", "pre"), "int")
    widest = [0, 0]
    r = value_range(Expr("sub", (Expr("mul", (x, y), "int"), Expr("const", (3,), "int")), "int"),
                    [(-2, 5), (0, 10)], {}, widest)
    assert r == (-23, 47) and widest == [-23, 50]   # x*y reaches 50 before the subtraction


SQUARES = '''
from kcheck.spec.lang import Spec, Int

spec = Spec("squares")


@spec.state
def state(p):
    return {"x": Int(0, 15)}


@spec.init
def init(p):
    yield {"x": 2}


@spec.action
def Square(s, p):
    s.x = s.x * s.x
'''


def test_bmc_sees_a_write_out_of_range_exactly(tmp_path):
    """x * x reaches 16 at the second step: the width holds every written value (up to 225),
    so the value outside x's range is reported as it is, not wrapped into the range."""
    f = tmp_path / "squares.py"
    f.write_text(SQUARES)
    m = load_spec(str(f)).instantiate(None, {})
    with pytest.raises(SpecError, match=r"action Square sets x to 16, outside its range 0\.\.15 "
                                        r"\(found by bmc at depth 2\)"):
        bmc(m, depth=4, keep_search_bounds=True)


LEAPS = '''
from kcheck.spec.lang import Spec, Int

spec = Spec("leaps")
spec.param("max_epoch", 2, lo=1, hi=40)


@spec.state
def state(p):
    return {"epoch": Int(1, p.max_epoch, search_bound=True)}


@spec.init
def init(p):
    yield {"epoch": 1}


@spec.action
def Bump(s, p):
    s.epoch = s.epoch + 1


@spec.action
def Leap(s, p):
    s.epoch = s.epoch + 7


@spec.invariant("epoch-below-twenty")
def below_twenty(s, p):
    """The epoch stays below 20."""
    return s.epoch < 20
'''


def test_bmc_raises_its_cap_when_a_path_reaches_it(tmp_path):
    """The first cap (max_epoch + depth = 6) assumes an epoch grows by one a step; Leap adds 7,
    so bmc must widen and still answer as over unbounded integers: three leaps reach 22."""
    f = tmp_path / "leaps.py"
    f.write_text(LEAPS)
    m = load_spec(str(f)).instantiate(None, {})
    r = bmc(m, ["epoch-below-twenty"], depth=4)
    cx = r.found["epoch-below-twenty"]
    assert [m.instances[k].label for k in cx.path.steps] == ["Leap", "Leap", "Leap"]
    assert [st[0] for st in cx.path.states] == [1, 8, 15, 22]
    assert r.cap > 22 and r.width >= signed_width_of(r.cap + 7)
    assert replays(cx) and "max_epoch=22" in cx.note
    # below the depth at which 20 is reachable, no violation and no false alarm from the cap
    r2 = bmc(m, ["epoch-below-twenty"], depth=2)
    assert r2.found == {} and r2.depth == 2 and not r2.exhaustive and r2.cap >= 15


def signed_width_of(v: int) -> int:
    from kcheck.symbolic import signed_width
    return signed_width(0, v)


def test_bmc_json_names_its_encoding():
    p = kcheck("bmc", "two_phase", "--variant", "commit-without-prepares", "--property", "consistent",
               "--depth", "4", "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["properties"]["consistent"]["trace_length"] == 3
    # two_phase has no search bound: every field is an ordinary range, 3 bits hold them all
    assert doc["encoding"] == {"integer_bits": 3, "lifted_bound_cap": None}


def test_bmc_solver_timeout_is_inconclusive_not_a_verdict():
    """The incremental solver honours --timeout per call: consumer_group's zombie commit needs
    ten unsatisfiable depths first, the deeper ones far beyond half a second each."""
    model = load_spec("consumer_group").instantiate("kip1251", {})
    r = bmc(model, ["no-zombie-commit"], depth=12, timeout_s=0.5)
    assert r.inconclusive == "solver: timeout" and r.found == {}
    assert r.status("no-zombie-commit") == "unknown" and r.depth < 11


def test_value_range_covers_the_positions_a_select_compares():
    """An index in 0..3 into 40 elements is compared with positions up to 38: they must not wrap
    into the index's range."""
    from kcheck.symbolic import value_range
    from kcheck.spec.lang import Expr
    i = Expr("field", (0, "i", "pre"), "int")
    elems = tuple(Expr("const", (k % 2,), "int") for k in range(40))
    widest = [0, 0]
    assert value_range(Expr("select", (i,) + elems, "int"), [(0, 3)], {}, widest) == (0, 1)
    assert widest == [0, 38]


def test_what_the_engine_keeps_never_crosses_models(epochs):
    """The inductive lemmas and the induction terms are kept per model (symbolic.kept): a model
    of another variant, other parameters, or a spec loaded again after its file changed gets its
    own answer, the one it gets with nothing kept."""
    from kcheck import symbolic
    two_phase = load_spec("two_phase")
    lamport = two_phase.instantiate("lamport", {"N": 2})
    broken = two_phase.instantiate("commit-without-prepares", {"N": 2})
    symbolic.forget_kept()
    alone = symbolic.inductive_lemmas(broken)[0]
    symbolic.forget_kept()
    everything = symbolic.inductive_lemmas(lamport)[0]
    assert set(alone) < set(everything)           # the broken variant loses a lemma
    assert symbolic.inductive_lemmas(broken)[0] == alone
    # an equal model is answered from what was kept, with no solver work of its own
    assert symbolic.inductive_lemmas(two_phase.instantiate("lamport", {"N": 2})) == (everything, [])
    # proofs on one variant do not lend their terms to the other
    assert prove(lamport, "consistent", k_max=1).verdict == "proved"
    pr = prove(broken, "consistent", k_max=1, bmc_depth=0)
    assert pr.verdict == "not-inductive" and "commit-after-all-prepared" in pr.lemmas_dropped
    # the same file, changed: a spec loaded again is another model
    first = load_spec(str(epochs)).instantiate("lenient", {})
    assert symbolic.inductive_lemmas(first)[0] == ["member-behind-group"]
    epochs.write_text(EPOCHS.replace("return s.member_epoch <= s.group_epoch",
                                     "return s.member_epoch < s.group_epoch"))
    again = load_spec(str(epochs)).instantiate("lenient", {})
    assert symbolic.inductive_lemmas(again)[0] == []
    assert prove(again, "member-behind-group", k_max=1, bmc_depth=0).verdict == "not-inductive"
    assert prove(first, "member-behind-group", k_max=1, bmc_depth=0).verdict == "proved"
    # what is kept is bounded: the models used last, no more
    for n in range(2, 2 + symbolic.KEPT_MODELS + 2):
        symbolic.inductive_lemmas(two_phase.instantiate("lamport", {"N": n}))
    assert len(symbolic._kept) == symbolic.KEPT_MODELS


def test_not_inductive_names_the_differing_fields_and_the_lemmas_that_exclude_it():
    """Issue 37: after NOT INDUCTIVE, prove says how the counterexample to induction differs
    from the reachable states most like it, and which declared invariants would exclude it."""
    from kcheck.symbolic import System, _holds_at, induction_hint
    model = load_spec("two_phase").instantiate("lamport", {"N": 3})
    pr = prove(model, "consistent", k_max=1, use_lemmas=False, bmc_depth=0)
    assert pr.verdict == "not-inductive"
    h = induction_hint(model, pr)
    assert h.exhaustive and h.reachable == search(model).distinct_states == 288
    # the CTI's first state is unreachable: every reachable state differs in some field
    assert h.distance >= 1 and h.nearest >= 1
    first = dict(zip([f.name for f in model.fields.fields], pr.counterexample.path.states[0]))
    here, _, n = h.differing["tm_state"]
    assert here == "committed" and n == h.nearest     # no reachable state like it has committed
    # a candidate is false in a state of the CTI and holds in every reachable state; a declared
    # invariant that is neither is not offered
    res = search(model)
    sy = System(model, False)
    for p in model.invariants:
        if p.name == "consistent":
            continue
        false_in_cti = any(not _holds_at(sy, p.name, st) for st in pr.counterexample.path.states)
        offered = p.name in [c for c, _ in h.candidates]
        assert offered == (false_in_cti and res.status(p.name) == "holds"), p.name
    assert h.candidates and first
    # assumed, they exclude it: with the lemmas the property is proved at k=1
    assert prove(model, "consistent", k_max=1).verdict == "proved"
    p = kcheck("prove", "two_phase", "--property", "consistent", "--no-lemmas", "--k", "1",
               "--bmc-depth", "0")
    assert p.returncode == 3
    assert "tm_state: committed here; aborted in every one of them" in p.stdout
    assert "Candidate lemmas:" in p.stdout
    for name, _ in h.candidates:
        assert f"  {name} (a lemma, left out by --no-lemmas)" in p.stdout
