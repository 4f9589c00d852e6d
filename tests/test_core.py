"""The checker core: counts against TLC, shortest traces, determinism, bounds, the compiled code
against the reference interpreter, and the command line's answers and exit codes."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kcheck import reference
from kcheck.bfs import search
from kcheck.compile import Compiled
from kcheck.layout import layout_of
from kcheck.loader import load_spec
from kcheck.reference import evaluate, explore, successors as reference_successors
from kcheck.trace import build, load, replay
from kcheck.spec import SHIPPED
from kcheck.spec.lang import SpecError

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(__file__).resolve().parent / "specs_core"
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def kcheck(*args, timeout=300):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT, timeout=timeout)


@pytest.mark.parametrize("n,states", [(3, 288), (4, 1568), (5, 8832), (6, 50816)])
def test_two_phase_matches_tlc(n, states):
    r = search(load_spec("two_phase").instantiate(None, {"N": n}))
    assert r.exhaustive and r.distinct_states == states
    assert not r.found


def test_broken_two_phase_shortest_trace_and_replay(tmp_path):
    m = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 3})
    r = search(m)
    f = r.found["consistent"]
    tr = build(m, f.property, f.kind, f.initial, f.steps)
    # TMCommit, an RM receives Commit, another chooses to abort: nothing shorter breaks it
    assert [s.action for s in tr.steps] == ["TMCommit", "RMRcvCommitMsg", "RMChooseToAbort"]
    doc = tr.to_json()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert replay(m, load(path)).ok
    # the same trace does not break the correct TM: its first step is not enabled there
    fixed = load_spec("two_phase").instantiate("lamport", {"N": 3})
    res = replay(fixed, load(path))
    assert not res.ok and res.failed_step == 1


def test_deterministic():
    m = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    a, b = search(m), search(m)
    assert (a.distinct_states, a.transitions) == (b.distinct_states, b.transitions)
    assert a.found["consistent"] == b.found["consistent"]


def test_block_size_does_not_change_the_answer():
    m = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    a, b = search(m, block=7), search(m)
    assert (a.distinct_states, a.transitions) == (b.distinct_states, b.transitions)
    assert a.found["consistent"] == b.found["consistent"]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_compiled_code_agrees_with_reference_interpreter(name, monkeypatch):
    """The first levels of every variant of every shipped spec, at default parameters: the
    same states and transitions from the numpy code as from the plain interpreter, and on every
    state the interpreter expanded, the same enabled action instances from the compiled guards
    and on the first 400 the same values of the invariants and of the scenarios' "never P"
    (compiled with equal subtrees shared, issue 16)."""
    # the interpreter's guards, recorded as its own search evaluates them: one evaluation serves
    # the counts and the state-by-state comparison
    enabled = {}

    def successors(model, state):
        out = reference_successors(model, state)
        enabled[state] = {k for k, _nxt, _o in out}
        return out
    monkeypatch.setattr(reference, "successors", successors)
    compared = set()
    spec = load_spec(name)
    for v in spec.variants:
        m = spec.instantiate(v, {})
        enabled.clear()
        states, transitions, depth, exhaustive = explore(m, max_states=1000)
        r = search(m, properties=[], deadlock=False, max_depth=None if exhaustive else depth)
        assert r.distinct_states == len(states), (v, depth)
        if exhaustive:
            assert r.exhaustive and r.transitions == transitions
        expanded = list(enabled)
        lay = layout_of(m)
        S = np.array([lay.pack_flat(s) for s in expanded], dtype=np.uint64).reshape(-1, lay.words).T
        comp = Compiled(m, layout=lay)
        for inst, mask in zip(m.instances, comp.guards(S)):
            got = np.broadcast_to(mask, (S.shape[1],))
            want = [inst.index in enabled[s] for s in expanded]
            assert list(got) == want, (v, inst.label)
        # the invariants on the first levels' 400 states (the interpreter takes seconds for
        # them); the variants share most of those states and most invariants' code, so a pair of
        # generated code and state that an earlier variant compared is not compared again
        memos = {s: {} for s in expanded[:400]}
        for k, prop in enumerate(comp.invariant_names):
            code = comp.source[comp.source.index(f"def inv_{k}(S):\n"):].split("\n", 1)[1]
            code = code.split("\ndef ")[0]
            todo = [i for i, s in enumerate(expanded[:400]) if (code, s) not in compared]
            if not todo:
                continue
            got = np.broadcast_to(comp.invariants[prop](S[:, todo]), (len(todo),))
            e = m.invariant_expr(m.spec.properties[prop])
            want = [bool(evaluate(e, list(expanded[i]), memo=memos[expanded[i]])) for i in todo]
            assert list(got) == want, (v, prop)
            compared.update((code, expanded[i]) for i in todo)


def test_max_states_stops_cleanly_and_says_so():
    p = kcheck("check", "two_phase", "--param", "N=7", "--max-states", "5000")
    assert p.returncode == 3, p.stderr
    assert "BOUNDED by --max-states" in p.stdout
    assert "no violation (bounded)" in p.stdout


def test_max_depth_bounded_json():
    p = kcheck("check", "two_phase", "--max-depth", "4", "--json")
    assert p.returncode == 3
    doc = json.loads(p.stdout)
    assert doc["exhaustive"] is False and doc["stop_reason"] == "max-depth"
    assert doc["properties"]["consistent"]["status"] == "bounded"


def test_json_schema_and_counts():
    p = kcheck("check", "two_phase", "--param", "N=5", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    for key in ("spec", "variant", "parameters", "exhaustive", "distinct_states", "transitions",
                "depth", "elapsed_s", "properties"):
        assert key in doc
    assert doc["distinct_states"] == 8832 and doc["exhaustive"] is True
    assert doc["properties"]["consistent"] == {"status": "holds", "kind": "invariant", "trace_length": None,
                                               "loop_index": None, "trace": None}


def test_violation_exit_code_save_and_replay(tmp_path):
    p = kcheck("check", "two_phase", "--variant", "commit-without-prepares", "--save", "--out", str(tmp_path))
    assert p.returncode == 1
    assert "VIOLATED (3 steps)" in p.stdout
    saved = tmp_path / "two_phase" / "commit-without-prepares" / "consistent.json"
    md = saved.with_suffix(".md").read_text()
    assert "sequenceDiagram" in md and "| 1 | TMCommit |" in md
    r = kcheck("replay", str(saved))
    assert r.returncode == 0 and "REPRODUCES" in r.stdout
    # edit the trace so that step 2 expects something else: replay names the step
    doc = json.loads(saved.read_text())
    doc["steps"][1]["expect"]["state"]["rm_state[1]"] = "aborted"
    saved.write_text(json.dumps(doc))
    r = kcheck("replay", str(saved))
    assert r.returncode == 1 and "step 2" in r.stdout


def test_all_variants_matrix_compares_with_record():
    p = kcheck("check", "two_phase", "--all-variants", "--json")
    assert p.returncode == 0, p.stdout[-2000:]
    doc = json.loads(p.stdout)
    assert doc["record"]["matches"] is True
    statuses = {r["variant"]: r["properties"]["consistent"]["status"] for r in doc["results"]}
    assert statuses == {"lamport": "holds", "commit-without-prepares": "violated"}


def test_record_difference_exits_1(tmp_path):
    # a copy of two_phase whose record wrongly says the broken variant holds
    src = (ROOT / "spec/examples/two_phase.py").read_text()
    src = src.replace('violates=["consistent"]', "violates=[]")
    f = tmp_path / "tp.py"
    f.write_text(src)
    p = kcheck("check", str(f), "--all-variants")
    assert p.returncode == 1
    assert "DIFFERS FROM RECORD" in p.stdout and "commit-without-prepares" in p.stdout


def test_wide_state_uses_two_words_and_reports_cut_and_collision():
    m = load_spec(str(SPECS / "wide.py")).instantiate(None, {})
    assert layout_of(m).words == 2
    r = search(m)
    assert r.exhaustive and r.distinct_states == 27 * 3
    assert r.cut_by_bounds == 27          # Bump from epoch 2 is cut in every counter state
    # two words are stored whole (issue 16): no collision is possible, and the line says so
    assert r.collision_probability == 0 and r.storage == "exact (states of 2 words stored whole)"
    r2 = search(load_spec(str(SPECS / "wide.py")).instantiate(None, {"limit": 5}))
    assert len(r2.found["small-sum"].steps) == 5


BAD = [
    (["check", "no_such_spec"], "unknown spec 'no_such_spec'"),
    (["check", "two_phase", "--variant", "nope"], "unknown variant 'nope'"),
    (["check", "two_phase", "--property", "nope"], "unknown property 'nope'"),
    (["check", "two_phase", "--param", "M=3"], "unknown parameter 'M'"),
    (["check", "two_phase", "--param", "N=three"], "not an integer"),
    (["check", "two_phase", "--param", "N=99"], "out of range (valid: 1..12)"),
    (["check", "two_phase", "--param", "N"], "NAME=VALUE"),
    (["check", "two_phase", "--max-states", "-5"], "--max-states must be a positive integer"),
    (["check", "tests/specs_core/raises.py"], "raises.py:20"),
    (["check", "tests/specs_core/python_if.py"], "python_if.py:19"),
    (["check", "/no/such/file.py"], "does not exist"),
    (["frobnicate"], "invalid choice"),
    (["replay", "/no/such/trace.json"], "does not exist"),
    (["replay", "README.md"], "is not JSON"),
    (["replay", "pyproject.toml"], "is not JSON"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_is_one_line_exit_2(argv, needle):
    p = kcheck(*argv)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("doc,needle", [
    ({"spec": "two_phase"}, "'steps' is missing"),
    ({"spec": "other_spec", "steps": []}, "unknown spec 'other_spec'"),
    ({"spec": "two_phase", "steps": [{"action": "Nope"}]}, "unknown action 'Nope'"),
    ({"spec": "two_phase", "steps": [{"action": "RMPrepare", "args": {"rm": 7}}]}, "no instance"),
    # (a state may leave fields out, docs/writing-specs.md; a name the spec lacks is refused)
    ({"spec": "two_phase", "state": {"tm_state": "init", "nope": 1}, "steps": []},
     "unknown state field 'nope'"),
    ({"spec": "two_phase", "state": {"tm_state": "nope"}, "steps": []}, "tm_state"),
    ({"spec": "two_phase", "variant": "x", "steps": []}, "unknown variant"),
    ([1, 2], "JSON object"),
])
def test_malformed_or_foreign_trace_exit_2(tmp_path, doc, needle):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    p = kcheck("replay", str(f))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_list_json_names_everything():
    p = kcheck("list", "--json")
    assert p.returncode == 0
    specs = {s["spec"]: s for s in json.loads(p.stdout)}
    assert set(specs) == set(SHIPPED)
    tp = specs["two_phase"]
    assert tp["parameters"]["N"]["default"] == 3
    assert tp["variants"]["lamport"]["default"] is True
    assert "consistent" in tp["properties"]


def test_list_prints_the_rules_the_readme_says_it_prints():
    p = kcheck("list")
    assert p.returncode == 0
    assert "  rules:      offset-commit (replaced in strict, no-lower-bound, revocation-epoch)" \
        in p.stdout.splitlines()


def test_ctrl_c_prints_what_was_found_and_exits_130():
    # the signal goes after the first progress line, so states have been found whatever the load
    proc = subprocess.Popen(KCHECK + ["check", "two_phase", "--param", "N=11"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "KCHECK_PROGRESS_SECONDS": "0.5"})
    first = proc.stderr.readline()
    assert "distinct states" in first, first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "INTERRUPTED" in out and "distinct states" in out


def test_python_if_on_state_is_refused_at_build_time():
    with pytest.raises(SpecError, match="use If"):
        load_spec(str(SPECS / "python_if.py")).instantiate(None, {})


def test_trace_of_a_user_spec_replays_by_its_path(tmp_path):
    p = kcheck("check", "tests/specs_core/wide.py", "--param", "limit=5", "--save", "--out", str(tmp_path))
    assert p.returncode == 1, p.stderr
    saved = tmp_path / "wide" / "default" / "small-sum.json"
    assert json.loads(saved.read_text())["spec"].endswith("tests/specs_core/wide.py")
    r = kcheck("replay", str(saved))
    assert r.returncode == 0 and "REPRODUCES" in r.stdout, r.stdout + r.stderr
