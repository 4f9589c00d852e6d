"""The pytest plugin on a user-style repository (pytester, in a subprocess so that the plugin is
found through the installed package's pytest11 entry point, as in a user's checkout): a spec
kept beside the code, one test file, the verdicts compared with the spec's record."""
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow     # each test runs pytest in a subprocess

TWO_PHASE = (Path(__file__).resolve().parent.parent / "spec" / "examples" / "two_phase.py").read_text()
RECORD = 'violates=["consistent"] + ["commit-after-all-prepared"]'


@pytest.fixture
def repo(pytester):
    """A user's repository: its protocol spec under specs/, its tests under tests/."""
    assert RECORD in TWO_PHASE, "two_phase's record changed: update this test's edit of it"
    pytester.mkdir("specs")
    pytester.mkdir("tests")
    (pytester.path / "specs" / "two_phase.py").write_text(TWO_PHASE)
    return pytester


def _run(pytester, test_source: str):
    (pytester.path / "tests" / "test_protocol.py").write_text(test_source)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")


def test_a_spec_that_matches_its_record_passes(repo):
    r = _run(repo, "def test_two_phase(kcheck):\n"
                   "    v = kcheck.check_record('../specs/two_phase.py')\n"
                   "    assert v[('commit-without-prepares', 'consistent')] == 'violated'\n"
                   "    assert v[('lamport', 'decides')] == 'holds'\n")
    r.assert_outcomes(passed=1)


def test_a_verdict_that_differs_fails_with_the_counterexample(repo):
    spec = repo.path / "specs" / "two_phase.py"
    # a change that forgets to record the known violation of `consistent`
    spec.write_text(TWO_PHASE.replace(RECORD, 'violates=["commit-after-all-prepared"]'))
    r = _run(repo, "def test_two_phase(kcheck):\n    kcheck.check_record('specs/two_phase.py')\n")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "1 verdict(s) of two_phase differ from its record" in out
    assert "two_phase/commit-without-prepares: consistent is violated but the record says it holds" in out
    for step in ("TMCommit", "RMRcvCommitMsg(rm=1)", "RMChooseToAbort(rm=0)"):
        assert step in out


def test_the_marker_checks_the_named_variants(repo):
    spec = repo.path / "specs" / "two_phase.py"
    spec.write_text(TWO_PHASE.replace(RECORD, 'violates=["commit-after-all-prepared"]'))
    r = _run(repo, "import pytest\n\n"
                   "@pytest.mark.kcheck_record('specs/two_phase.py', variants=['lamport'], params={'N': 2})\n"
                   "def test_lamport():\n    pass\n\n"
                   "@pytest.mark.kcheck_record('specs/two_phase.py', variants=['commit-without-prepares'])\n"
                   "def test_broken():\n    pass\n")
    r.assert_outcomes(passed=1, failed=1)
    assert "consistent is violated but the record says it holds" in r.stdout.str()


def test_replay_asserts_a_scenario_still_reproduces(repo):
    import json
    trace = {"kcheck_trace": 1, "spec": "specs/two_phase.py", "variant": "lamport", "params": {"N": 3},
             "steps": [{"action": "TMAbort", "args": {}, "expect": {"state": {"tm_state": "aborted"}}},
                       {"action": "RMRcvAbortMsg", "args": {"rm": 0},
                        "expect": {"state": {"rm_state[0]": "aborted"}}}]}
    (repo.path / "tests" / "abort.json").write_text(json.dumps(trace))
    wrong = dict(trace, steps=[dict(trace["steps"][0], expect={"state": {"tm_state": "committed"}})])
    (repo.path / "tests" / "wrong.json").write_text(json.dumps(wrong))
    r = _run(repo, "def test_abort(kcheck):\n    kcheck.replay('abort.json', spec='../specs/two_phase.py')\n\n"
                   "def test_wrong(kcheck):\n    kcheck.replay('wrong.json', spec='../specs/two_phase.py')\n")
    r.assert_outcomes(passed=1, failed=1)
    assert "does not reproduce: step 1 (TMAbort): tm_state is aborted, expected committed" in r.stdout.str()


def test_an_unknown_variant_is_a_usage_error(repo):
    r = _run(repo, "def test_x(kcheck):\n    kcheck.check_record('specs/two_phase.py', variants=['nope'])\n")
    assert "spec two_phase has no variant 'nope'" in r.stdout.str() + r.stderr.str()
    assert r.ret != 0
