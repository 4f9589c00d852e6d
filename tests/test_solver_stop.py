"""SIGTERM during one long Z3 call (kcheck bmc / prove): the call stops, the partial result is
printed as on Ctrl-C, and the exit code is 143. The spec makes the solver factor a product of two
31-bit primes, so a call runs for hours unless it is stopped."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FACTOR = str(ROOT / "tests" / "specs_reliability" / "factor.py")
KCHECK = [sys.executable, "-m", "kcheck.cli"]
TERMINATED = 143

pytestmark = [pytest.mark.z3, pytest.mark.slow]


def _run_until_solving(*args):
    # the command says on stderr that the solver is running, at once with no progress interval
    p = subprocess.Popen(KCHECK + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, KCHECK_PROGRESS_SECONDS="0"))
    seen = ""
    for line in p.stderr:
        seen += line
        if "solver running" in line:
            return p
    p.wait()
    raise AssertionError(f"kcheck {' '.join(args)} ended before starting the solver: {seen}")


def _terminate(p):
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=600)    # a guard against a hang, not a timing assertion
    return p.returncode, out, err


def test_sigterm_stops_a_long_induction_call_and_prints_the_partial_result():
    p = _run_until_solving("prove", FACTOR, "--no-lemmas")
    code, out, err = _terminate(p)
    assert code == TERMINATED, err
    assert "UNKNOWN: solver: stopped by SIGTERM" in out and "benchmark: not-factored" in out
    assert "kcheck: terminated (SIGTERM)" in err and "Traceback" not in err


def test_sigterm_during_prove_json_prints_the_document():
    p = _run_until_solving("prove", FACTOR, "--no-lemmas", "--json")
    code, out, err = _terminate(p)
    assert code == TERMINATED, err
    doc = json.loads(out)
    [r] = doc["properties"].values()
    assert r["status"] == "unknown" and r["reason"] == "solver: stopped by SIGTERM"


def test_sigterm_stops_bmc_and_prints_the_depths_done():
    p = _run_until_solving("bmc", FACTOR, "--depth", "62")
    code, out, err = _terminate(p)
    assert code == TERMINATED, err
    assert "inconclusive: solver: stopped by SIGTERM" in out
    assert "not-factored" in out and "Traceback" not in err


def test_the_solver_runs_to_its_answer_without_a_signal():
    # the same machinery left alone: a short bmc of the same spec ends on its own, exit 3
    p = subprocess.run(KCHECK + ["bmc", FACTOR, "--depth", "4"], cwd=ROOT, capture_output=True,
                       text=True)
    assert p.returncode == 3 and "no violation up to depth 4" in p.stdout, p.stderr


def test_ctrl_c_stops_a_long_induction_call_and_prints_the_partial_result():
    # Z3's own SIGINT handler is off (it swallowed a Ctrl-C that landed as a call finished): the
    # watcher stops the call and Python's handler makes it an interruption, exit 130
    p = _run_until_solving("prove", FACTOR, "--no-lemmas")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=600)    # a guard against a hang, not a timing assertion
    assert p.returncode == 130, err
    assert "interrupted from keyboard" in out and "benchmark: not-factored" in out
    assert "Traceback" not in err and "Exception ignored" not in err
