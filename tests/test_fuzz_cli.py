"""A sweep of the command line and of trace documents with Hypothesis: whatever a user types or
feeds to replay, kcheck answers with an exit code from the documented set and never a traceback.
Searches are kept small (two_phase at N <= 3, the test specs, --max-states) so every example
is cheap."""
import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
# README "Exit codes" (4, the broker, comes from conform, which this sweep does not start)
DOCUMENTED = {0, 1, 2, 3, 5, 130, 143}
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

SPECS = ["two_phase", str(ROOT / "tests/specs/spin.py"), str(ROOT / "tests/specs_reliability/clock.py"),
         "no_such_spec", "two_phase.py", str(ROOT / "tests"), ""]
WORDS = ["N", "N=2", "N=3", "N=x", "=", "N=", "cap=2", "members=2", "-1", "0", "1", "2.5", "true",
         "lamport", "commit-without-prepares", "nope", "consistent", "decides", "rings", "all"]
junk = st.text(alphabet=string.printable, max_size=12)


def _option(command: str):
    values = st.sampled_from(WORDS) | junk
    opts = [st.tuples(st.just("--param"), st.sampled_from(["N=2", "N=3", "cap=2", "N=0", "N=9999"])
                      | values),
            st.tuples(st.just("--variant"), values),
            st.tuples(st.just("--property"), values),
            st.tuples(st.sampled_from(["--json", "--all-variants", "--save", "--deadlock",
                                       "--json-lines", "--help", "--no-such-flag"])),
            st.tuples(st.just("--out"), values)]
    if command == "check":
        opts.append(st.tuples(st.sampled_from(["--max-states", "--max-depth"]), values))
    if command == "progress":
        opts.append(st.tuples(st.just("--max-nodes"), values))
    return st.one_of(opts)


@st.composite
def argv(draw):
    command = draw(st.sampled_from(["check", "progress", "list", "replay", "graph", "nope", ""]))
    spec = draw(st.sampled_from(SPECS) | junk)
    options = draw(st.lists(_option(command), max_size=4))
    out = [command, spec] + [x for o in options for x in o]
    if command == "check" and "--max-states" not in out:
        out += ["--max-states", "2000"]   # bounded whatever the parameters
    if command == "graph" and "-o" not in out:
        out += ["--max-nodes", "500"]
    return out


def _run(args, capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as e:          # --help, --version: argparse exits itself
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.slow
@SETTINGS
@given(args=argv())
def test_the_command_line_never_answers_with_a_traceback(args, tmp_path_factory, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))   # --save writes here, not in the repository
    if "--param" in args and "N=9999" in args and args[0] == "progress":
        args = [a if a != "N=9999" else "N=3" for a in args]   # a graph that size is just slow
    code, text = _run(args, capsys)
    assert code in DOCUMENTED, (args, code, text)
    assert "Traceback" not in text, (args, text)


# ---------------------------------------------------------------------------------------------
# Trace documents: a valid trace, mutated

BASE = {"kcheck_trace": 1, "spec": "two_phase", "variant": "commit-without-prepares",
        "params": {"N": 3},
        "steps": [{"action": "TMCommit", "args": {}, "expect": {"state": {"tm_state": "committed"}}},
                  {"action": "RMRcvCommitMsg", "args": {"rm": 0},
                   "expect": {"state": {"rm_state[0]": "committed"}}},
                  {"action": "RMChooseToAbort", "args": {"rm": 1}, "expect": {}}],
        "property": "consistent", "kind": "invariant"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) |
    st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
KEYS = ["kcheck_trace", "spec", "variant", "params", "state", "steps", "property", "kind",
        "loop_index", "expcet", "action", "args", "expect", "outcome", "rm", "N", "tm_state"]


@st.composite
def trace_doc(draw):
    doc = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(1, 3))):
        # pick an object somewhere in the document and set, replace or delete one key
        target = doc
        path = draw(st.lists(st.sampled_from(["steps", 0, 1, 2, "expect", "state", "args", "params"]),
                             max_size=4))
        for k in path:
            nxt = target[k] if isinstance(target, dict) and isinstance(k, str) and k in target else \
                target[k] if isinstance(target, list) and isinstance(k, int) and k < len(target) else None
            if isinstance(nxt, (dict, list)):
                target = nxt
        if isinstance(target, dict):
            key = draw(st.sampled_from(KEYS + list(target)))
            if draw(st.booleans()) and key in target:
                del target[key]
            else:
                target[key] = draw(json_values)
        elif isinstance(target, list) and target:
            target[draw(st.integers(0, len(target) - 1))] = draw(json_values)
    return doc


@pytest.mark.slow
@SETTINGS
@given(doc=trace_doc())
def test_replay_of_any_trace_document_is_an_answer_not_a_traceback(doc, tmp_path_factory, capsys):
    p = tmp_path_factory.mktemp("traces") / "t.json"
    p.write_text(json.dumps(doc))
    code, text = _run(["replay", str(p)], capsys)
    assert code in {0, 1, 2}, (doc, code, text)
    assert "Traceback" not in text, (doc, text)


@pytest.mark.slow
@SETTINGS
@given(data=st.text(max_size=200).map(str.encode) | st.binary(max_size=200))
def test_replay_of_any_file_is_an_answer(data, tmp_path_factory, capsys):
    p = tmp_path_factory.mktemp("traces") / "t.json"
    p.write_bytes(data)
    code, out = _run(["replay", str(p)], capsys)
    assert code == 2 and "Traceback" not in out


def test_the_unmutated_base_trace_reproduces(tmp_path, capsys):
    """The mutations start from a trace that replays, so a rejection is the mutation's doing."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps(BASE))
    code, text = _run(["replay", str(p)], capsys)
    assert code == 0, text
