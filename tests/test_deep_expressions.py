"""Expressions nested thousands of operations deep (issue 36): an invariant that sums 600 terms in
a loop ended in RecursionError in check and bmc. The language measures each node's depth as it is
built and raises Python's recursion limit to match, up to lang.MAX_NESTING; past that the spec is
refused at the line that built the expression, in one line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.spec.lang import MAX_NESTING, Count, Int, StateFields, StateView, Sum

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(Path(__file__).resolve().parent / "specs_deep" / "long_sum.py")
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def run(*args, terms: int):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env=dict(os.environ, KCHECK_TEST_TERMS=str(terms)))


@pytest.mark.parametrize("terms", [600, MAX_NESTING - 1])
def test_every_engine_decides_a_deep_sum_alike(terms, tmp_path):
    """x reaches 2, where the sum is twice TERMS: the shortest violation is two steps, found by
    the search, by bmc, and refuted for prove; the saved trace replays. MAX_NESTING - 1 terms
    and the comparison make the deepest tree accepted."""
    check = run("check", SPEC, "--save", "--out", str(tmp_path), terms=terms)
    assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr[-2000:]
    assert "VIOLATED (2 steps)" in check.stdout, check.stdout
    bmc = run("bmc", SPEC, "--depth", "3", terms=terms)
    assert bmc.returncode == 1 and "Traceback" not in bmc.stderr, bmc.stderr[-2000:]
    assert "VIOLATED" in bmc.stdout and "2 steps" in bmc.stdout, bmc.stdout
    prove = run("prove", SPEC, terms=terms)
    assert prove.returncode == 1 and "VIOLATED" in prove.stdout, prove.stdout + prove.stderr[-2000:]
    [saved] = tmp_path.rglob("*.json")
    replay = run("replay", str(saved), terms=terms)
    assert replay.returncode == 0 and "REPRODUCES" in replay.stdout, replay.stderr[-2000:]


def test_a_sum_deeper_than_the_limit_is_refused_at_its_line():
    p = run("check", SPEC, terms=MAX_NESTING + 1)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    [line] = p.stderr.strip().splitlines()
    assert f"long_sum.py:34: an expression nested {MAX_NESTING + 1} operations deep" in line, line
    assert "Sum(...)" in line and p.stdout == ""


def test_sum_and_count_nest_by_halves():
    """Sum and Count of 4,096 terms are 13 levels deep, not 4,096: they never meet the limit."""
    view = StateView(StateFields({"x": Int(0, 1)}))
    assert Sum(*[view.x] * 4096).depth == 13
    assert Count(*[view.x == 1] * 4096).depth <= 15
    assert Sum(view.x, 2, 3).bounds == (5, 6) and Sum().args == (0,)
