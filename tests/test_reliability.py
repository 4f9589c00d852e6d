"""Nothing a user gives is silently ignored, nothing computed is lost, no verdict claims more than
was checked (issue 13). Each test rebuilds one of the issue's inputs; before the change each gave a
false pass, a lost result or a traceback."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kcheck.cli import BAD_INPUT, BOUNDED, INTERRUPTED, OK, SAVE_FAILED, TERMINATED, VIOLATED, main

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "specs_reliability"
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kcheck: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------------------------------
# Trace files: validated against the format's schema

@pytest.fixture
def trace(tmp_path, capsys):
    """A fresh counterexample of two_phase, saved by kcheck itself."""
    code, _, _ = run(capsys, "check", "two_phase", "--variant", "commit-without-prepares",
                     "--save", "--out", tmp_path)
    assert code == VIOLATED
    path = tmp_path / "two_phase" / "commit-without-prepares" / "consistent.json"
    return path, json.loads(path.read_text())


def write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def test_a_saved_trace_still_reproduces(trace, capsys):
    path, _ = trace
    code, out, _ = run(capsys, "replay", path)
    assert code == OK and "REPRODUCES" in out


def test_misspelled_expect_is_an_error_naming_the_key_and_the_file(trace, tmp_path, capsys):
    _, doc = trace
    step = doc["steps"][0]
    step["expcet"] = step.pop("expect")
    p = write(tmp_path, doc)
    code, out, err = run(capsys, "replay", p)
    assert code == BAD_INPUT and out == ""
    line = one_line_error(err)
    assert str(p) in line and "'expcet'" in line and "step 1" in line and "expect" in line


@pytest.mark.parametrize("where", ["top", "expect"])
def test_unknown_keys_anywhere_are_errors(trace, tmp_path, capsys, where):
    _, doc = trace
    (doc if where == "top" else doc["steps"][-1]["expect"])["colour"] = "blue"
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "'colour'" in one_line_error(err)


@pytest.mark.parametrize("version", [3, 0, "1", True, None])
def test_unknown_format_versions_are_refused(trace, tmp_path, capsys, version):
    _, doc = trace
    doc["kcheck_trace"] = version
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "format version" in one_line_error(err)


def test_a_scenario_without_a_version_is_read_as_the_current_format(trace, tmp_path, capsys):
    _, doc = trace
    del doc["kcheck_trace"]
    code, out, _ = run(capsys, "replay", write(tmp_path, doc))
    assert code == OK and "REPRODUCES" in out
    doc["expcet"] = {}
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "'expcet'" in one_line_error(err)


@pytest.mark.parametrize("value", [True, 1.0, "3"])
def test_bool_float_and_string_are_not_integer_parameters(trace, tmp_path, capsys, value):
    _, doc = trace
    doc["params"]["N"] = value
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "params.N" in one_line_error(err)


@pytest.mark.parametrize("value", [True, 1.0])
def test_bool_and_float_do_not_match_an_integer_argument(trace, tmp_path, capsys, value):
    _, doc = trace
    step = next(s for s in doc["steps"] if s["args"].get("rm") == 1)
    step["args"]["rm"] = value
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT
    assert "args.rm" in one_line_error(err) or "no instance" in one_line_error(err)


def test_a_repeated_key_is_an_error(trace, tmp_path, capsys):
    path, _ = trace
    text = path.read_text().replace('"variant":', '"variant": "lamport", "variant":', 1)
    code, _, err = run(capsys, "replay", write(tmp_path, text))
    assert code == BAD_INPUT and "'variant' appears twice" in one_line_error(err)


def test_a_property_without_its_kind_is_not_replayed_as_a_plain_scenario(trace, tmp_path, capsys):
    _, doc = trace
    del doc["kind"]
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "kind" in one_line_error(err)


def test_an_unknown_property_is_an_error(trace, tmp_path, capsys):
    _, doc = trace
    doc["property"] = "consistant"
    code, _, err = run(capsys, "replay", write(tmp_path, doc))
    assert code == BAD_INPUT and "'consistant'" in one_line_error(err)


# ---------------------------------------------------------------------------------------------
# Specs: every name validated when the spec is loaded, errors naming the spec's line

SPEC = '''
from kcheck.spec.lang import Int, Spec

spec = Spec("tiny", "a counter")
spec.param("top", 2, 1, 5)


@spec.state
def state(p):
    return {{"x": Int({lo}, {hi})}}


@spec.init
def init(p):
    yield {{"x": 0}}


@spec.action
def Inc(s, p):
    """x grows."""
    s.require(s.x < p.top)
    s.x = s.x + 1
    {extra_action}


@spec.invariant("small")
def small(s, p):
    """x stays small."""
    return s.x <= p.top


@spec.transition_property("grows", actions={actions})
def grows(pre, post, action, args, outcome, p):
    """A step makes x larger."""
    return pre.x < post.x


@spec.always_eventually("tops", fair={fair})
def tops(s, p):
    """x reaches the top."""
    return s.x == p.top


@spec.rule("limit")
def limit(s, p):
    return p.top


@spec.rule("limit", variant={rule_variant!r})
def limit_low(s, p):
    return 1
{more}
spec.variant("plain", "as is", default=True, violates={violates})
spec.variant("low", "a lower top")
'''


def spec_file(tmp_path, **kw) -> Path:
    fields = dict(lo=0, hi=5, extra_action="", actions='["Inc"]', fair='["Inc"]',
                  rule_variant="low", more="", violates="[]")
    fields.update(kw)
    p = tmp_path / "tiny.py"
    p.write_text(SPEC.format(**fields))
    return p


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_template_spec_is_valid(tmp_path, capsys):
    code, out, _ = run(capsys, "check", spec_file(tmp_path), "--all-variants")
    assert code == OK, out


@pytest.mark.parametrize("kw, named, at", [
    (dict(violates='["smal"]'), "'smal'", 'spec.variant("plain"'),
    (dict(actions='["Increment"]'), "'Increment'", "@spec.transition_property"),
    (dict(fair='["Inc", "Dec"]'), "'Dec'", "@spec.always_eventually"),
    (dict(rule_variant="lo"), "'lo'", 'variant=\'lo\''),
    (dict(more='\n@spec.invariant("small")\ndef small2(s, p):\n    return s.x >= 0\n'),
     "'small' is declared twice", '@spec.invariant("small")\ndef small2'),
    (dict(more='\n@spec.always_eventually("grows", fair=[])\ndef g2(s, p):\n    return s.x == 0\n'),
     "'grows' is declared twice", '@spec.always_eventually("grows"'),
])
def test_a_misspelled_or_repeated_name_is_an_error_naming_the_line(tmp_path, capsys, kw, named, at):
    p = spec_file(tmp_path, **kw)
    code, out, err = run(capsys, "check", p)
    assert code == BAD_INPUT and out == ""
    line = one_line_error(err)
    assert named in line
    text = p.read_text()
    want = text[:text.index(at)].count("\n") + 1
    assert f"{p}:{want}" in line, (line, want)


def test_comparing_the_variant_with_an_unknown_name_is_an_error(tmp_path, capsys):
    p = spec_file(tmp_path, extra_action='s.require(s.variant != "lo")')
    code, _, err = run(capsys, "check", p)
    line = one_line_error(err)
    assert code == BAD_INPUT and "'lo'" in line and f"{p}:{line_of(p, 's.variant')}" in line


def test_comparing_the_variant_with_a_declared_name_works(tmp_path, capsys):
    p = spec_file(tmp_path, extra_action='s.require(s.variant != "low")')
    code, out, _ = run(capsys, "check", p, "--all-variants")
    assert code == OK, out


@pytest.mark.parametrize("lo, hi", [(0, 1 << 63), (-(1 << 63) - 1, 0), (-(1 << 62), 1 << 62)])
def test_an_int_range_too_wide_for_a_word_is_one_line(tmp_path, capsys, lo, hi):
    p = spec_file(tmp_path, lo=lo, hi=hi)
    code, _, err = run(capsys, "check", p)
    line = one_line_error(err)
    assert code == BAD_INPUT and "2^63" in line and f"{p}:{line_of(p, 'Int(')}" in line


def test_a_parameter_default_outside_its_range_is_an_error(tmp_path, capsys):
    p = spec_file(tmp_path)
    p.write_text(p.read_text().replace('spec.param("top", 2, 1, 5)', 'spec.param("top", 9, 1, 5)'))
    code, _, err = run(capsys, "check", p)
    assert code == BAD_INPUT and "outside its range" in one_line_error(err)


def test_an_action_that_never_fires_is_named(capsys):
    code, out, err = run(capsys, "check", SPECS / "never_fires.py")
    assert code == OK and "holds" in out
    # Nothing has no instance (switched off, as a parameter at 0 switches actions off): not warned
    assert "warning" in err and "action Reset never took a step" in err and "Nothing" not in err
    code, out, _ = run(capsys, "check", SPECS / "never_fires.py", "--json")
    doc = json.loads(out)
    assert doc["never_fired"] == ["Reset"] and doc["disabled_actions"] == ["Nothing"]


def test_every_action_of_a_shipped_spec_fires_or_is_named(capsys):
    code, out, _ = run(capsys, "check", "two_phase", "--json")
    assert code == OK and json.loads(out)["never_fired"] == []


# ---------------------------------------------------------------------------------------------
# Verdicts through a search_bound cut: a cut that could hide a violation makes them bounded

def test_progress_through_a_cut_step_is_bounded_not_holds(capsys):
    code, out, _ = run(capsys, "progress", SPECS / "clock.py", "--json")
    doc = json.loads(out)
    assert code == BOUNDED
    rings = doc["properties"]["rings"]
    assert rings["status"] == "bounded" and "Tick" in rings["reason"] and "clock" in rings["reason"]
    assert doc["properties"]["deadlock"]["status"] == "bounded"
    assert doc["cut_by_search_bounds"] == 2


def test_the_cut_hid_real_violations(capsys):
    """Beyond the cap the clock stops at LIMIT=10: with the cap above it both are violated."""
    code, out, _ = run(capsys, "progress", SPECS / "clock.py", "--param", "cap=12", "--json")
    doc = json.loads(out)
    assert code == VIOLATED
    assert doc["properties"]["rings"]["status"] == "violated"
    assert doc["properties"]["deadlock"]["status"] == "violated"
    assert doc["properties"]["deadlock"]["trace_length"] == 10


def test_deadlock_through_a_cut_is_bounded_in_check(capsys):
    code, out, _ = run(capsys, "check", SPECS / "clock.py", "--json")
    doc = json.loads(out)
    assert code == BOUNDED and doc["exhaustive"] is True
    assert doc["properties"]["deadlock"]["status"] == "bounded"
    assert "search bound" in doc["properties"]["deadlock"]["reason"]
    code, out, _ = run(capsys, "check", SPECS / "clock.py")
    assert "deadlock: no violation (bounded): 2 states" in out
    code, out, _ = run(capsys, "check", SPECS / "clock.py", "--param", "cap=12", "--json")
    assert code == VIOLATED and json.loads(out)["properties"]["deadlock"]["trace_length"] == 10


def test_a_progress_verdict_without_cuts_still_holds(capsys):
    code, out, _ = run(capsys, "progress", ROOT / "tests" / "specs" / "spin.py", "--json")
    doc = json.loads(out)
    assert doc["properties"]["finishes"]["status"] == "holds"
    assert "reason" not in doc["properties"]["finishes"]


# ---------------------------------------------------------------------------------------------
# Nothing computed is lost

@pytest.mark.parametrize("kind", ["file", "missing-parent-of-a-file"])
def test_a_failed_save_comes_after_the_results_with_its_own_code(tmp_path, capsys, kind):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out_dir = blocker if kind == "file" else blocker / "sub"
    code, out, err = run(capsys, "check", "two_phase", "--variant", "commit-without-prepares",
                         "--save", "--out", out_dir)
    assert code == SAVE_FAILED
    assert "VIOLATED (3 steps)" in out and "Shortest counterexample for consistent" in out
    line = one_line_error(err)
    assert "cannot save" in line and str(blocker) in line


def test_a_failed_save_in_progress_and_json(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, out, err = run(capsys, "progress", ROOT / "tests" / "specs" / "spin.py", "--json",
                         "--save", "--out", blocker)
    assert code == SAVE_FAILED and json.loads(out)["properties"]["finishes-spin-fair"]["status"] == "violated"
    assert "cannot save" in one_line_error(err)


def test_the_memory_watch_stops_a_search_as_bounded_with_the_figures(capsys, monkeypatch):
    monkeypatch.setenv("KCHECK_MEMORY_LIMIT", "1M")
    code, out, _ = run(capsys, "check", "two_phase", "--json")
    doc = json.loads(out)
    assert code == BOUNDED and doc["stop_reason"] == "memory"
    assert "of the 1 MB limit set by KCHECK_MEMORY_LIMIT" in doc["stop_detail"]
    assert all(p["status"] == "bounded" for p in doc["properties"].values())


def test_a_bad_memory_limit_is_an_error(capsys, monkeypatch):
    monkeypatch.setenv("KCHECK_MEMORY_LIMIT", "lots")
    code, _, err = run(capsys, "check", "two_phase")
    assert code == BAD_INPUT and "KCHECK_MEMORY_LIMIT" in one_line_error(err)


def test_the_memory_watch_reads_a_limit_in_force():
    from kcheck.memory import watch
    w = watch()
    assert w is not None and w.limit > 0 and 0 < w.usage() < w.limit


def test_json_lines_print_each_variant_as_it_finishes(capsys):
    code, out, _ = run(capsys, "check", "two_phase", "--all-variants", "--json-lines")
    lines = out.splitlines()
    docs = [json.loads(line) for line in lines]
    assert code == OK
    assert [d["variant"] for d in docs] == ["lamport", "commit-without-prepares"]
    assert all(d["record"]["matches"] for d in docs)


def _wait_for(stream, text: str) -> str:
    seen = ""
    for line in stream:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"the process ended before printing {text!r}: {seen}")


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, TERMINATED, "TERMINATED"),
                                             (signal.SIGINT, INTERRUPTED, "INTERRUPTED")])
def test_a_signal_prints_the_partial_verdicts(sig, code, word):
    env = dict(os.environ, KCHECK_PROGRESS_SECONDS="0")
    p = subprocess.Popen(KCHECK + ["check", "two_phase", "--param", "N=9"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the search is running once it reports progress on stderr
    _wait_for(p.stderr, "kcheck: two_phase/lamport (every property): depth")
    p.send_signal(sig)
    out, err = p.communicate(timeout=600)
    assert p.returncode == code, err
    assert word in out and "no violation (bounded)" in out and "Traceback" not in err


def _interrupted_solver(monkeypatch, command: str):
    # prove asks Z3, which answers unknown when Ctrl-C stops it; bmc asks CaDiCaL (checker/cnf.py)
    # between slices of conflicts, where Ctrl-C arrives as a KeyboardInterrupt
    # (what SIGINT's handler does first, symbolic_cli.SolverStop._on_sigint: the flag tells an
    # interruption from a solver that gave up on its own, whose reason may read the same)
    import threading
    import z3
    from kcheck import cnf
    from kcheck.cnf import Cnf
    # a flag of this test's own: the module's would stay set after it, and every later solver
    # call of this worker would read "interrupted from keyboard"
    monkeypatch.setattr(cnf, "INTERRUPTED", threading.Event())
    if command == "prove":
        def stopped(self, *a):
            cnf.INTERRUPTED.set()
            return z3.unknown
        monkeypatch.setattr(z3.Solver, "check", stopped)
        monkeypatch.setattr(z3.Solver, "reason_unknown", lambda self: "interrupted from keyboard")
        return

    def ctrl_c(self, *a, **k):
        cnf.INTERRUPTED.set()
        raise KeyboardInterrupt
    monkeypatch.setattr(Cnf, "_slice", ctrl_c)


@pytest.mark.z3
@pytest.mark.slow
def test_a_real_ctrl_c_during_bmc_exits_130_without_a_traceback():
    # python-sat's own SIGINT handler once turned this into a traceback (exit 1) and left SIGINT
    # blocked in the process and its later children; Z3's swallowed it while the lemmas were
    # checked, and bmc ran to its end. Wherever the signal lands now, the exit is 130.
    env = dict(os.environ, KCHECK_PROGRESS_SECONDS="0.2")
    for delay in (0.0, 1.0, 2.5):
        p = subprocess.Popen(KCHECK + ["bmc", "consumer_group", "--depth", "11"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for(p.stderr, "solver running")
        threading.Event().wait(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=600)
        assert p.returncode == INTERRUPTED, (delay, err)
        assert "Traceback" not in err and "Exception ignored" not in err, (delay, err)


@pytest.mark.z3
@pytest.mark.parametrize("command", [["bmc", "two_phase", "--depth", "3"], ["prove", "two_phase"]])
def test_bmc_and_prove_exit_130_when_ctrl_c_stops_the_solver(capsys, monkeypatch, command):
    _interrupted_solver(monkeypatch, command[0])
    code, out, _ = run(capsys, *command)
    assert code == INTERRUPTED and "interrupted from keyboard" in out


# ---------------------------------------------------------------------------------------------
# One line, not a traceback

def test_a_spec_path_without_py_loads(tmp_path, capsys):
    p = tmp_path / "tiny_spec"
    shutil.copy(spec_file(tmp_path), p)
    code, out, _ = run(capsys, "check", p)
    assert code == OK and "small" in out


def test_a_folder_or_a_binary_file_as_spec_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "check", tmp_path)
    assert code == BAD_INPUT and "folder" in one_line_error(err)
    b = tmp_path / "blob.py"
    b.write_bytes(b"\x00\xff\xfe")
    code, _, err = run(capsys, "check", b)
    assert code == BAD_INPUT and "not a Python source file" in one_line_error(err)


def _fake_server(reply: bytes | None):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.recv(64)
        if reply:
            conn.sendall(reply)
        conn.close()
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def test_a_port_that_is_not_a_spark_master_fails_fast():
    from kcheck.spark import SparkError, _check_master
    port = _fake_server(b"HTTP/1.0 200 OK\r\n\r\n")
    with pytest.raises(SparkError, match="accepts connections but is not a Spark master"):
        _check_master(f"spark://127.0.0.1:{port}", timeout_s=5)


def test_a_port_that_closes_silently_like_spark_passes_the_probe():
    from kcheck.spark import _check_master
    _check_master(f"spark://127.0.0.1:{_fake_server(None)}", timeout_s=5)


# ---------------------------------------------------------------------------------------------
# Specs as users keep them

def test_a_spec_imports_a_module_beside_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # away from the spec's folder
    code, out, _ = run(capsys, "check", SPECS / "import_beside.py")
    assert code == OK and "holds" in out


def test_a_saved_trace_names_a_users_spec_relative_to_itself_and_moves_with_it(tmp_path, capsys):
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    spec = spec_file(project / "specs", violates='["small"]')
    spec.write_text(spec.read_text().replace("return s.x <= p.top", "return s.x < p.top"))
    code, _, _ = run(capsys, "check", spec, "--save", "--out", project / "traces")
    assert code == VIOLATED
    saved = project / "traces" / "tiny" / "plain" / "small.json"
    assert json.loads(saved.read_text())["spec"] == "../../../specs/tiny.py"
    moved = tmp_path / "elsewhere"
    shutil.move(project, moved)
    code, out, _ = run(capsys, "replay", moved / "traces" / "tiny" / "plain" / "small.json")
    assert code == OK and "REPRODUCES" in out


def test_replay_spec_overrides_the_spec_a_trace_names(tmp_path, capsys):
    spec = spec_file(tmp_path, violates='["small"]')
    spec.write_text(spec.read_text().replace("return s.x <= p.top", "return s.x < p.top"))
    code, _, _ = run(capsys, "check", spec, "--save", "--out", tmp_path / "t")
    saved = tmp_path / "t" / "tiny" / "plain" / "small.json"
    other = tmp_path / "other" / "tiny.py"
    other.parent.mkdir()
    spec.rename(other)
    code, _, err = run(capsys, "replay", saved)
    assert code == BAD_INPUT and "replay --spec PATH" in one_line_error(err)
    code, out, _ = run(capsys, "replay", saved, "--spec", other)
    assert code == OK and "REPRODUCES" in out


@pytest.mark.z3
def test_prove_prints_and_saves_a_counterexample_outside_the_ranges(tmp_path, capsys):
    spec = tmp_path / "epochs.py"
    spec.write_text('''
from kcheck.spec.lang import Int, Spec
spec = Spec("epochs", "an epoch bumped for ever")

@spec.state
def state(p):
    return {"epoch": Int(0, 2, search_bound=True)}

@spec.init
def init(p):
    yield {"epoch": 0}

@spec.action
def Bump(s, p):
    """The epoch grows."""
    s.epoch = s.epoch + 1

@spec.invariant("not-four")
def not_four(s, p):
    """The epoch never reaches 4."""
    return s.epoch != 4
''')
    code, out, _ = run(capsys, "prove", spec, "--save", "--out", tmp_path / "out")
    assert code == VIOLATED
    assert "epoch=4" in out and "epoch=3" in out
    saved = json.loads((tmp_path / "out" / "epochs" / "default" / "not-four.json").read_text())
    assert saved["states"][-1] == {"epoch": 4} and saved["steps"][-1] == "Bump"


def test_a_repeated_param_is_an_error(capsys):
    code, _, err = run(capsys, "check", "two_phase", "--param", "N=3", "--param", "N=4")
    assert code == BAD_INPUT and "--param N is given twice" in one_line_error(err)


@pytest.mark.parametrize("command", ["check", "progress", "bmc", "prove"])
def test_out_without_save_is_an_error(capsys, command):
    code, _, err = run(capsys, command, "two_phase", "--out", "somewhere")
    assert code == BAD_INPUT and "without --save" in one_line_error(err)


def test_prove_names_a_progress_property_as_such(capsys):
    code, _, err = run(capsys, "prove", "two_phase", "--property", "decides")
    line = one_line_error(err)
    assert code == BAD_INPUT and "'decides' is a progress property" in line and "kcheck progress" in line


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("kcheck ")


# ---------------------------------------------------------------------------------------------
# A run you can follow

def test_progress_goes_to_stderr_naming_spec_and_variant(capsys, monkeypatch):
    monkeypatch.setenv("KCHECK_PROGRESS_SECONDS", "0")
    code, out, err = run(capsys, "check", "two_phase", "--json")
    assert code == OK and json.loads(out)["distinct_states"] == 288
    assert "kcheck: two_phase/lamport (every property): depth" in err


def test_a_closing_line_counts_the_verdicts_compared(capsys):
    code, out, _ = run(capsys, "check", "two_phase", "--all-variants")
    assert code == OK
    assert "verdicts compared with the record: all match;" in out.splitlines()[-1]


# ---------------------------------------------------------------------------------------------
# Packaging: kcheck's generic package names beside a user's own

def test_a_users_own_spec_package_beside_kcheck_is_left_alone(tmp_path):
    """kcheck's one top-level name is kcheck: a user's own 'spec' package first on the path
    neither replaces the spec language nor is refused."""
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "__init__.py").write_text("")
    p = subprocess.run([sys.executable, "-m", "kcheck.cli", "list"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == OK and "two_phase" in p.stdout, p.stderr


def test_a_spec_module_beside_a_users_spec_is_importable_from_the_spec(tmp_path, capsys):
    (tmp_path / "spec.py").write_text("HELPER = 1\n")
    user = tmp_path / "tiny.py"
    user.write_text("import spec\nassert spec.HELPER == 1\n" + (SPECS / "never_fires.py").read_text())
    code, out, err = run(capsys, "check", user)
    assert code == OK and "holds" in out, err
    assert "kcheck's package" not in err


# ---------------------------------------------------------------------------------------------
# Matrices at the terminal's width

def _matrix(width: int) -> str:
    import io
    from rich.console import Console
    from kcheck.bfs import search
    from kcheck.trace import traces_of
    from kcheck.loader import load_spec
    from kcheck.render import print_matrix
    spec = load_spec("two_phase")
    results = [search(spec.instantiate(v, {})) for v in spec.variants]
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=width, color_system=None)
    print_matrix(con, spec, results, {r.model.variant: traces_of(r) for r in results}, [])
    return buf.getvalue()


def test_a_matrix_wider_than_the_terminal_folds_its_headers_with_a_legend():
    narrow = _matrix(60)
    assert "P1 = consistent" in narrow and "P2 = deadlock" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 60
    wide = _matrix(200)
    assert "P1" not in wide and "consistent" in wide


@pytest.mark.z3
def test_prove_prints_and_saves_a_counterexample_to_induction_outside_the_ranges(tmp_path, capsys):
    spec = tmp_path / "epochs.py"
    spec.write_text('''
from kcheck.spec.lang import Int, Spec
spec = Spec("epochs", "an epoch bumped for ever")

@spec.state
def state(p):
    return {"epoch": Int(0, 2, search_bound=True)}

@spec.init
def init(p):
    yield {"epoch": 0}

@spec.action
def Bump(s, p):
    """The epoch grows."""
    s.epoch = s.epoch + 1

@spec.invariant("not-four")
def not_four(s, p):
    """The epoch never reaches 4."""
    return s.epoch != 4
''')
    # no bmc after the failed induction step: the answer is the counterexample to induction
    code, out, _ = run(capsys, "prove", spec, "--k", "1", "--bmc-depth", "0", "--save", "--out",
                       tmp_path / "out")
    assert code == BOUNDED and "NOT INDUCTIVE" in out
    assert "epoch=3" in out and "epoch=4" in out
    saved = json.loads((tmp_path / "out" / "induction" / "epochs" / "default" / "not-four.json").read_text())
    assert saved["states"] == [{"epoch": 3}, {"epoch": 4}] and saved["kind"] == "not-inductive"


def test_the_memory_watch_stops_a_state_graph_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("KCHECK_MEMORY_LIMIT", "1M")
    code, out, err = run(capsys, "progress", "two_phase")
    line = one_line_error(err)
    assert code == BAD_INPUT and "memory watch" in line and "1 MB limit set by KCHECK_MEMORY_LIMIT" in line
