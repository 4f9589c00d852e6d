"""A verdict the engines can only answer "bounded" (it rests on a step cut by a search_bound) is
recorded with spec.bounded, like a violation: the record-comparing run then matches it (exit 0),
a bounded verdict the record does not expect still exits 3, and a record that says bounded where
the property now holds is a difference (exit 1)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLOCK = (ROOT / "tests/specs_reliability/clock.py").read_text()
RECORD = ('spec.bounded("rings", why="the tick at the cap counts as enabled")\n'
          'spec.bounded("deadlock", why="the clock stops only beyond the cap")\n')


def progress(tmp_path, text, *args):
    path = tmp_path / "clock.py"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "kcheck.cli", "progress", str(path),
                           "--all-variants", *args], capture_output=True, text=True, cwd=ROOT)


def test_an_unrecorded_bounded_verdict_exits_3(tmp_path):
    p = progress(tmp_path, CLOCK)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "bounded" in p.stdout


def test_a_recorded_bounded_verdict_matches_the_record(tmp_path):
    p = progress(tmp_path, CLOCK + RECORD)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all match" in p.stdout


def test_a_record_of_bounded_where_the_property_is_decided_differs(tmp_path):
    # past LIMIT the cap cuts nothing and the verdict is decided (violated): the record is stale
    p = progress(tmp_path, CLOCK + RECORD, "--param", "cap=12")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DIFFERS FROM RECORD" in p.stdout


def test_bounded_naming_an_unknown_property_is_refused_on_load(tmp_path):
    p = progress(tmp_path, CLOCK + RECORD.replace('"rings"', '"ringz"'))
    assert p.returncode == 2
    assert "ringz" in p.stderr and len(p.stderr.strip().splitlines()) == 1
