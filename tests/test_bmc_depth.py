"""bmc's depth is bounded (symbolic_cli.MAX_DEPTH), and a signal stops a SAT solver call from
inside CaDiCaL's slice of conflicts (cnf's terminator), however deep the unrolling asked: a
depth of 10^8 was once accepted, and SIGTERM then waited for a slice of 20,000 conflicts of
28-bit frames, longer than 15 s."""
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kcheck.cli import build_parser
from kcheck.symbolic_cli import MAX_DEPTH

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-m", "kcheck.cli"]
INTERRUPTED, TERMINATED = 130, 143
# guards against a hang, not timing assertions: reaching the slice (the lemmas are proved
# first), and the end once signalled
START_GUARD_S, STOP_GUARD_S = 600, 60

# kcheck's command line, with CaDiCaL's question to the terminator wrapped: the ASKED-th time
# CaDiCaL asks (well inside the SAT solving), the child says so on stderr and holds the slice
# open until a signal's handler has run; then the terminator answers as it always does. The
# signal is thus always handled inside a slice, never between two
ASKED = 10_000
IN_SLICE = "test: inside a SAT slice"
HOOKED = f"""
import sys
from kcheck import cnf
from kcheck.cli import run
answer, asked = cnf._stop_asked, [0]

def stop_asked(this):
    asked[0] += 1
    if asked[0] == {ASKED}:
        print({IN_SLICE!r}, file=sys.stderr, flush=True)
        try:
            while not (cnf.STOP.is_set() or cnf.INTERRUPTED.is_set()):
                cnf.STOP.wait(0.05)      # the handlers run in this thread, within the wait
        except KeyboardInterrupt:       # Ctrl-C's handler raised here: its flag is set
            pass
    return answer(this)

cnf._stop_asked = stop_asked
sys.argv[0] = "kcheck"
run()
"""


def _read(stream) -> queue.Queue:
    """The stream's lines, read by a thread (None at its end), so a wait for one has a guard."""
    q: queue.Queue = queue.Queue()

    def read():
        for line in stream:
            q.put(line)
        q.put(None)
    threading.Thread(target=read, daemon=True).start()
    return q


def _rest(q: queue.Queue) -> str:
    text = ""
    while (line := q.get(timeout=STOP_GUARD_S)) is not None:
        text += line
    return text


def _stopped_inside_a_slice(sig):
    p = subprocess.Popen([sys.executable, "-c", HOOKED, "bmc", "consumer_group", "--depth",
                          str(MAX_DEPTH)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = _read(p.stdout), _read(p.stderr)
    seen = ""
    try:
        while IN_SLICE not in seen:
            line = err.get(timeout=START_GUARD_S)
            if line is None:
                p.wait()
                raise AssertionError(f"bmc ended (exit {p.returncode}) before CaDiCaL asked "
                                     f"its terminator {ASKED} times: {seen}")
            seen += line
        p.send_signal(sig)
        p.wait(timeout=STOP_GUARD_S)
        return p.returncode, _rest(out), seen + _rest(err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.z3
@pytest.mark.slow
def test_sigterm_inside_a_sat_slice_of_the_deepest_bmc_exits_143():
    code, out, err = _stopped_inside_a_slice(signal.SIGTERM)
    assert code == TERMINATED, err
    assert f"bmc to depth {MAX_DEPTH}" in out and "inconclusive: solver: stopped by SIGTERM" in out
    assert "kcheck: terminated (SIGTERM)" in err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.z3
@pytest.mark.slow
def test_ctrl_c_inside_a_sat_slice_of_the_deepest_bmc_exits_130():
    code, out, err = _stopped_inside_a_slice(signal.SIGINT)
    assert code == INTERRUPTED, err
    assert "inconclusive: solver: interrupted from keyboard" in out
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("args, needle", [
    (["bmc", "consumer_group", "--depth", "100000000"],
     f"--depth must be a positive integer up to {MAX_DEPTH}, got '100000000'"),
    (["bmc", "consumer_group", "--depth", str(MAX_DEPTH + 1)],
     f"--depth must be a positive integer up to {MAX_DEPTH}"),
    (["prove", "consumer_group", "--bmc-depth", "100000000"],
     f"--bmc-depth must be an integer from 0 up to {MAX_DEPTH}, got '100000000'"),
    (["prove", "consumer_group", "--bmc-depth", "-1"],
     f"--bmc-depth must be an integer from 0 up to {MAX_DEPTH}, got '-1'"),
])
def test_a_depth_over_the_ceiling_is_one_line_exit_2(args, needle):
    p = subprocess.run(KCHECK + args, cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and needle in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert p.stdout == ""


def test_the_ceiling_itself_is_a_valid_depth():
    parser = build_parser()
    assert parser.parse_args(["bmc", "consumer_group", "--depth", str(MAX_DEPTH)]).depth == MAX_DEPTH
    args = parser.parse_args(["prove", "consumer_group", "--bmc-depth", str(MAX_DEPTH)])
    assert args.bmc_depth == MAX_DEPTH
    assert parser.parse_args(["prove", "consumer_group", "--bmc-depth", "0"]).bmc_depth == 0


# ---------------------------------------------------------------------------------------------
# A bmc trace past the explicit search's bounds is replayed with a bound raised just enough:
# fit_model reads each candidate's fields from the state declaration alone (Spec.fields_at)

def test_fields_at_are_the_fields_of_the_model_at_those_parameters():
    from kcheck.loader import load_spec
    spec = load_spec("consumer_group")
    for epochs in (1, 3):
        model = spec.instantiate(None, {"max_epoch": epochs})
        fields = spec.fields_at(model.params).fields
        assert [(f.name, f.type.lo, f.type.hi) for f in fields] == \
               [(f.name, f.type.lo, f.type.hi) for f in model.fields.fields]
        assert fields[0].name == "group_epoch" and fields[0].type.hi == epochs


def test_a_path_past_max_epoch_is_fitted_with_max_epoch_raised_just_enough():
    from kcheck.loader import load_spec
    from kcheck.symbolic import SolverPath, fit_model
    model = load_spec("consumer_group").instantiate(None, {"max_epoch": 1})
    first = list(model.initial_states[0])
    later = [3] + first[1:]          # group_epoch 3, past the search's cap of 1
    fitted, note = fit_model(model, SolverPath([first, later], [0]))
    assert fitted.params.as_dict()["max_epoch"] == 3 and fitted.variant == model.variant
    assert note == ("the trace leaves the explicit search's bounds: it is replayed with "
                    "max_epoch=3 (given 1)")
