"""`kcheck upgrade TRACE...` (issue 37): a trace rewritten in the current format version, with
the fields its spec has gained filled from the spec's initial state; a file that cannot be
upgraded is named with the reason (exit 2) and the others are still done; `--check` writes
nothing. And a scenario's partial state: the fields it leaves out come from the spec's initial
state, so it survives its spec gaining a field."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.trace import FORMAT

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]
V1 = ROOT / "tests" / "traces_v1" / "out-of-order-only-after-a-gap.json"

# the field the starter spec of `kcheck new` gains below, in its state and its initial state
STATE_LINE = '        "group_epoch": Int(0, p.max_epoch, search_bound=True),\n'
INIT_LINE = '    yield {"group_epoch": 0, "member_epoch": [NOT_JOINED] * p.members}\n'


def kcheck(*args, cwd):
    return subprocess.run(KCHECK + [str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def gain_a_field(spec: Path, initial_values=(0,)) -> None:
    """The spec gains a field 'lease', whose initial value is each of ``initial_values`` (one
    initial state per value)."""
    text = spec.read_text()
    assert STATE_LINE in text and INIT_LINE in text
    yields = "".join(INIT_LINE.replace('{"group_epoch": 0,', f'{{"group_epoch": 0, "lease": {v},')
                     for v in initial_values)
    spec.write_text(text.replace(STATE_LINE, STATE_LINE + '        "lease": Int(0, 3),\n')
                    .replace(INIT_LINE, yields))


@pytest.fixture
def saved(tmp_path):
    """A spec of `kcheck new` and its saved counterexample (check --save)."""
    assert kcheck("new", "lease", cwd=tmp_path).returncode == 0
    r = kcheck("check", "lease.py", "--variant", "accept-stale", "--save", "--out", "cx", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    trace = tmp_path / "cx" / "lease" / "accept-stale" / "stale-epoch-fenced.json"
    assert json.loads(trace.read_text())["kcheck_trace"] == FORMAT
    return tmp_path, trace


def test_a_version_1_file_is_rewritten_in_the_current_version_and_keeps_its_layout(tmp_path):
    target = tmp_path / "t.json"
    shutil.copy(V1, target)
    r = kcheck("upgrade", target, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"format version 1 -> {FORMAT}" in r.stdout and "1 upgraded, 0 already current, 0 failed" in r.stdout
    old, new = V1.read_text().splitlines(), target.read_text().splitlines()
    assert [(a, b) for a, b in zip(old, new) if a != b] == [('  "kcheck_trace": 1,', f'  "kcheck_trace": {FORMAT},')]
    assert kcheck("replay", target, cwd=tmp_path).returncode == 0
    # a second run finds nothing to do
    r = kcheck("upgrade", target, cwd=tmp_path)
    assert r.returncode == 0 and "0 upgraded, 1 already current, 0 failed" in r.stdout


def test_check_reports_what_would_change_and_writes_nothing(tmp_path):
    target = tmp_path / "t.json"
    shutil.copy(V1, target)
    r = kcheck("upgrade", "--check", tmp_path, cwd=tmp_path)
    assert r.returncode == 1
    assert f"{target}: format version 1 -> {FORMAT} (not written: --check)" in r.stdout
    assert "1 would be upgraded" in r.stdout
    assert target.read_text() == V1.read_text()
    kcheck("upgrade", target, cwd=tmp_path)
    r = kcheck("upgrade", "--check", target, cwd=tmp_path)
    assert r.returncode == 0 and "0 would be upgraded, 1 already current" in r.stdout


def test_a_counterexample_lacking_a_field_its_spec_gained_is_filled_from_the_initial_state(saved):
    folder, trace = saved
    before = trace.read_text()
    gain_a_field(folder / "lease.py")
    # it still replays as it is (a partial state), and upgrade writes the field in
    assert kcheck("replay", trace, cwd=folder).returncode == 0
    r = kcheck("upgrade", "--check", trace, cwd=folder)
    assert r.returncode == 1 and "filled lease from the spec's initial state" in r.stdout
    assert trace.read_text() == before
    r = kcheck("upgrade", trace, cwd=folder)
    assert r.returncode == 0, r.stderr
    doc = json.loads(trace.read_text())
    assert doc["state"] == {"group_epoch": 0, "lease": 0, "member_epoch": [-1, -1]}
    assert list(doc["state"]) == ["group_epoch", "lease", "member_epoch"]     # the spec's order
    assert doc["steps"] == json.loads(before)["steps"]
    assert "lease=0" in trace.with_suffix(".md").read_text()                # its Markdown twin too
    r = kcheck("replay", trace, cwd=folder)
    assert r.returncode == 0 and "REPRODUCES" in r.stdout


def test_a_file_that_cannot_be_fixed_is_named_with_why_and_the_others_are_still_done(saved):
    folder, trace = saved
    before = trace.read_text()
    gain_a_field(folder / "lease.py", initial_values=(0, 1))      # which one the trace began in?
    other = folder / "v1.json"
    shutil.copy(V1, other)
    missing = folder / "missing.json"
    r = kcheck("upgrade", trace, other, missing, cwd=folder)
    assert r.returncode == 2
    errors = r.stderr.strip().splitlines()
    assert len(errors) == 2 and "Traceback" not in r.stderr
    assert errors[0].startswith(f"kcheck: error: {trace}: ") and "'lease'" in errors[0] \
        and "differ between the 2 initial states" in errors[0] and "give it in 'state'" in errors[0]
    assert errors[1].startswith(f"kcheck: error: {missing} does not exist")
    assert trace.read_text() == before
    assert json.loads(other.read_text())["kcheck_trace"] == FORMAT
    assert f"1 upgraded, 0 already current, 2 failed: {trace}, {missing}" in r.stdout


def test_a_trace_that_no_longer_reproduces_is_not_written(saved):
    folder, trace = saved
    doc = json.loads(trace.read_text())
    doc["kcheck_trace"] = 1
    doc["steps"][0]["expect"]["outcome"] = "FENCED_MEMBER_EPOCH"
    trace.write_text(json.dumps(doc))
    r = kcheck("upgrade", trace, cwd=folder)
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"kcheck: error: {trace}: does not replay after the upgrade") \
        and "step 1 (Join(m=0)): outcome NONE, expected FENCED_MEMBER_EPOCH" in line
    assert json.loads(trace.read_text()) == doc


@pytest.mark.parametrize("text,why", [
    ("not json", "is not JSON"),
    ('{"kcheck_trace": 9, "spec": "two_phase", "steps": []}', "format version 9 is not one this kcheck reads"),
    ('{"kcheck_trace": 1, "spec": "no_such_spec", "steps": []}', "no_such_spec"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, text, why):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    r = kcheck("upgrade", bad, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("kcheck: error: ") and str(bad) in line and why in line
    assert bad.read_text() == text


def test_a_scenario_with_a_partial_state_survives_its_spec_gaining_a_field(tmp_path):
    assert kcheck("new", "lease", cwd=tmp_path).returncode == 0
    scenario = tmp_path / "lease_scenarios" / "after_join.json"
    doc = {"kcheck_trace": FORMAT, "spec": "../lease.py", "variant": "fenced",
           "description": "member 0 has joined; only the fields the scenario is about are given",
           "state": {"group_epoch": 1, "member_epoch": [1, -1]},
           "steps": [{"action": "Heartbeat", "args": {"m": 0, "epoch": 0},
                      "expect": {"outcome": "FENCED_MEMBER_EPOCH"}}]}
    scenario.write_text(json.dumps(doc, indent=1))
    assert kcheck("replay", scenario, cwd=tmp_path).returncode == 0
    gain_a_field(tmp_path / "lease.py")
    r = kcheck("replay", scenario, cwd=tmp_path)
    assert r.returncode == 0 and "REPRODUCES" in r.stdout, r.stdout + r.stderr
    # a scenario's partial state is what it means to say: upgrade leaves it as written
    r = kcheck("upgrade", scenario, cwd=tmp_path)
    assert r.returncode == 0 and "1 already current" in r.stdout
    assert json.loads(scenario.read_text()) == doc
    # a field left out whose initial value is not one value is refused, naming it
    assert kcheck("new", "lease", "--force", cwd=tmp_path).returncode == 0
    gain_a_field(tmp_path / "lease.py", initial_values=(0, 1))
    r = kcheck("replay", scenario, cwd=tmp_path)
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert "'lease'" in line and "give it in 'state'" in line


def test_conformance_completes_a_partial_state_in_the_traces_own_variant_only():
    """conform reads a scenario's partial state as replay does, in the variant the scenario is
    written for; in another variant (--which-variant) a field that variant adds is not one the
    scenario left out, so the state must fit as given (as before partial states)."""
    from kcheck.conform.driver import initial_words
    from kcheck.loader import load_spec
    from kcheck.trace import load
    doc = load(ROOT / "tests" / "scenarios" / "consumer_group" / "stale_member_epoch.json")
    spec = load_spec("consumer_group")
    own = spec.instantiate(doc["variant"], doc["params"])
    whole = initial_words(own, doc)
    # two fields the scenario gives with their initial values, left out
    partial = {**doc, "state": {k: v for k, v in doc["state"].items()
                                if k not in ("commit_zombie", "commit_owner")}}
    assert initial_words(own, partial) == whole
    other = spec.instantiate("kafka-16147", doc["params"])      # a variant that adds fields
    assert set(other.fields.declared) > set(own.fields.declared)
    assert initial_words(other, doc) is None and initial_words(other, partial) is None
