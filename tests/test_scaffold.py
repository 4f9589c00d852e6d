"""kcheck new NAME: the files it writes are a complete, checkable spec with its test and a
scenario; `kcheck check NAME.py` passes on them as written."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]


def kcheck(*args, cwd):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture
def new_spec(tmp_path):
    r = kcheck("new", "lease_protocol", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path


def test_writes_a_spec_its_test_and_a_scenario(new_spec):
    assert sorted(str(p.relative_to(new_spec)) for p in new_spec.rglob("*") if p.is_file()) == [
        "lease_protocol.py", "lease_protocol_scenarios/join_then_heartbeat.json", "test_lease_protocol.py"]


def test_check_passes_out_of_the_box(new_spec):
    r = kcheck("check", "lease_protocol.py", "--json", cwd=new_spec)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["spec"] == "lease_protocol" and doc["variant"] == "fenced" and doc["exhaustive"]
    assert {p: v["status"] for p, v in doc["properties"].items()} == {
        "epoch-order": "holds", "stale-epoch-fenced": "holds", "older-epoch-exists": "reached"}
    assert doc["properties"]["older-epoch-exists"]["trace_length"] == 1   # its witness: one Join
    assert doc["distinct_states"] == 5


def test_every_variant_matches_the_record(new_spec):
    r = kcheck("check", "lease_protocol.py", "--all-variants", "--json", cwd=new_spec)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["record"]["matches"]
    broken = next(x for x in doc["results"] if x["variant"] == "accept-stale")
    assert broken["properties"]["stale-epoch-fenced"]["status"] == "violated"
    assert broken["properties"]["stale-epoch-fenced"]["trace_length"] == 2


def test_the_scenario_replays(new_spec):
    r = kcheck("replay", "lease_protocol_scenarios/join_then_heartbeat.json", cwd=new_spec)
    assert r.returncode == 0 and "REPRODUCES" in r.stdout, r.stdout + r.stderr


def test_the_scenario_is_in_the_current_trace_format(new_spec):
    from kcheck.trace import FORMAT
    path = new_spec / "lease_protocol_scenarios" / "join_then_heartbeat.json"
    assert json.loads(path.read_text())["kcheck_trace"] == FORMAT
    r = kcheck("upgrade", "--check", path, cwd=new_spec)
    assert r.returncode == 0 and "0 would be upgraded, 1 already current, 0 failed" in r.stdout, r.stdout


@pytest.mark.slow
def test_its_test_passes_under_pytest(new_spec):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=new_spec,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


def test_refuses_to_overwrite_and_bad_names(new_spec):
    r = kcheck("new", "lease_protocol", cwd=new_spec)
    assert r.returncode == 2 and "already exist" in r.stderr and "--force" in r.stderr
    assert kcheck("new", "lease_protocol", "--force", cwd=new_spec).returncode == 0
    for bad in ("Lease", "my-spec", "class", "two_phase"):
        r = kcheck("new", bad, cwd=new_spec)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (bad, r.stderr)
