"""`kcheck progress` says where it is while it builds a state graph: plain lines on stderr when
stderr is not a terminal (a CI log moves), naming spec, variant and properties; stdout keeps only
the results."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_progress_prints_plain_lines_on_stderr_while_building_the_graph():
    env = {**os.environ, "KCHECK_PROGRESS_SECONDS": "0"}
    p = subprocess.run([sys.executable, "-m", "kcheck.cli", "progress", "two_phase"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if "building the state graph" in l]
    assert lines and all(l.startswith("kcheck: two_phase lamport (N=3)") for l in lines)
    assert "decides" in lines[0] and "depth 0" in lines[0]
    assert "building the state graph" not in p.stdout
