"""The explicit engine's speed-ups keep their answers (issue 16): equal subexpressions are computed
once (that they compute what the reference interpreter computes, guard by guard and invariant by
invariant on every variant, is test_core's comparison with the interpreter), states are stored
exactly (a fingerprint shared by distinct states loses none of them), and a search killed after a
checkpoint resumes to the same result as one run straight through, refusing a checkpoint of
another search."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kcheck import explore
from kcheck.bfs import search
from kcheck.compile import Compiled, fingerprint
from kcheck.layout import layout_of
from kcheck.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(__file__).parent / "specs_core"
KCHECK = [sys.executable, "-m", "kcheck.cli"]
SEED = fingerprint.__defaults__[0]      # the first hash's seed


def summary(r):
    return (r.distinct_states, r.transitions, r.depth, r.exhaustive, r.fired, r.cut_by_bounds,
            r.cut_only_states, {n: (f.kind, f.initial, f.steps) for n, f in r.found.items()})


def test_equal_subtrees_are_computed_once():
    """two_phase's `consistent` (no member committed while another aborted) reads each of the
    N members' states once, not 2 * N * N times."""
    model = load_spec("two_phase").instantiate(None, {"N": 9})
    src = Compiled(model, ["consistent"], layout=layout_of(model)).source
    body = src[src.index("def inv_0"):].split("\ndef ")[0]
    reads = [line for line in body.splitlines() if "S[" in line]
    assert len(reads) == 9, body[:400]


def test_a_shared_fingerprint_loses_no_state(monkeypatch):
    """With a fingerprint that collides all the time, states stored whole keep every distinct
    state: the same counts, verdicts and trace lengths as with the real fingerprint."""
    model = load_spec(str(SPECS / "wide.py")).instantiate(None, {"limit": 5})
    assert layout_of(model).words == 2
    real = search(model)
    monkeypatch.setattr(explore, "fingerprint", lambda S, seed=SEED: fingerprint(S, seed) & np.uint64(7))
    weak = search(model)
    assert real.storage == weak.storage == "exact (states of 2 words stored whole)"
    assert (weak.distinct_states, weak.transitions, weak.depth) == \
           (real.distinct_states, real.transitions, real.depth)
    assert {n: len(f.steps) for n, f in weak.found.items()} == \
           {n: len(f.steps) for n, f in real.found.items()}
    assert real.collision_probability == 0.0


def test_wider_states_use_128_bit_fingerprints(monkeypatch):
    """A state wider than EXACT_WORDS is stored as a 128-bit fingerprint: a collision of the
    first 64 bits loses nothing, and the statistics say which storage was used."""
    model = load_spec(str(SPECS / "wide.py")).instantiate(None, {})
    real = search(model)
    monkeypatch.setattr(explore, "EXACT_WORDS", 1)
    # the first 64 bits collide all the time; the second hash (another seed) stays whole
    monkeypatch.setattr(explore, "fingerprint", lambda S, seed=SEED: fingerprint(S, seed) if seed != SEED
                        else fingerprint(S) & np.uint64(3))
    r = search(model)
    assert r.stored_as == "128-bit fingerprints"
    assert (r.distinct_states, r.transitions, r.depth) == (real.distinct_states, real.transitions,
                                                           real.depth)
    assert 0 < r.collision_probability < 1e-30


@pytest.mark.parametrize("variant", ["lamport", "commit-without-prepares"])
def test_a_search_resumed_from_a_checkpoint_ends_as_one_run_straight_through(tmp_path, variant):
    """Stopped at depth 6 after writing checkpoints, then resumed: the same states, transitions,
    depth, steps per action and counterexamples (step for step) as without a stop."""
    model = load_spec("two_phase").instantiate(variant, {"N": 4})
    straight = search(model)
    first = search(model, max_depth=6, checkpoint=str(tmp_path), checkpoint_every=0)
    assert first.stop_reason == "max-depth" and (tmp_path / "checkpoint.npz").exists()
    resumed = search(model, checkpoint=str(tmp_path), checkpoint_every=0)
    assert resumed.resumed_from == 6
    assert summary(resumed) == summary(straight)


KILLED = r"""
import os, signal, sys
from kcheck.loader import load_spec
from kcheck.bfs import search
model = load_spec("two_phase").instantiate(None, {{"N": 5}})
def on_level(depth, fps):
    if depth == {kill_at}:      # after the checkpoint of depth {kill_at} - 1: a hard kill
        os.kill(os.getpid(), signal.SIGKILL)
search(model, on_level=on_level, checkpoint={dir!r}, checkpoint_every=0)
"""


def test_a_killed_run_resumes_from_the_command_line(tmp_path):
    """A search killed (SIGKILL) mid-run leaves a checkpoint; `kcheck check --checkpoint` resumes
    from it and prints what a run straight through prints, figures and traces alike."""
    ck = tmp_path / "ck"
    p = subprocess.run([sys.executable, "-c", KILLED.format(dir=str(ck), kill_at=9)],
                       capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL, p.stderr
    args = ["check", "two_phase", "--param", "N=5", "--json"]
    resumed = subprocess.run(KCHECK + args + ["--checkpoint", str(ck)], capture_output=True,
                             text=True, cwd=ROOT)
    straight = subprocess.run(KCHECK + args, capture_output=True, text=True, cwd=ROOT)
    assert resumed.returncode == straight.returncode == 0, resumed.stderr
    a, b = json.loads(resumed.stdout), json.loads(straight.stdout)
    for doc in (a, b):
        doc.pop("elapsed_s", None)
        doc.pop("states_per_s", None)
    assert a == b


@pytest.mark.parametrize("other, what", [
    (["--param", "N=4"], "parameters"),
    (["--variant", "commit-without-prepares"], "variant"),
    (["--property", "consistent"], "properties"),
])
def test_a_checkpoint_of_another_search_is_refused(tmp_path, other, what):
    """One line naming what differs, exit 2, and the checkpoint left as it was."""
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    search(model, max_depth=3, checkpoint=str(tmp_path), checkpoint_every=0)
    before = (tmp_path / "checkpoint.npz").read_bytes()
    args = ["check", "two_phase"] + (other if other[0] == "--param" else ["--param", "N=3"] + other)
    p = subprocess.run(KCHECK + args + ["--checkpoint", str(tmp_path)], capture_output=True,
                       text=True, cwd=ROOT)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert (tmp_path / "checkpoint.npz").read_bytes() == before


def test_a_checkpoint_of_other_compiled_code_is_refused(tmp_path):
    """A checkpoint whose compiled code differs (the spec was edited, or kcheck now packs the
    states another way, as the layout by flip counts did for one-word states) is refused in
    one line that says both causes."""
    import json as json_
    import numpy as np
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    search(model, max_depth=3, checkpoint=str(tmp_path), checkpoint_every=0)
    path = tmp_path / "checkpoint.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json_.loads(str(arrays["meta"]))
    meta["identity"]["code"] = "0" * 16
    arrays["meta"] = np.array(json_.dumps(meta))
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    p = subprocess.run(KCHECK + ["check", "two_phase", "--param", "N=3", "--checkpoint",
                                 str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "kcheck's packing of its states" in lines[0], p.stderr


def test_a_damaged_checkpoint_is_named_in_one_line(tmp_path):
    (tmp_path / "checkpoint.npz").write_bytes(b"not a checkpoint")
    p = subprocess.run(KCHECK + ["check", "two_phase", "--checkpoint", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "cannot be read" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_checkpoint_needs_a_single_search(tmp_path):
    p = subprocess.run(KCHECK + ["check", "two_phase", "--all-variants", "--checkpoint", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "--checkpoint" in p.stderr
    assert not os.listdir(tmp_path)


def test_sorting_a_level_in_parts_does_not_change_the_answer(monkeypatch):
    """A level sorted every block (duplicates between blocks dropped as it grows) gives the same
    counts and the same counterexamples, step for step, as a level sorted once."""
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    once = search(model, block=64)
    monkeypatch.setattr(explore, "COMPACT_AT", 1)
    parts = search(model, block=64)
    assert summary(parts) == summary(once)
