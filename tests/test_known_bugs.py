"""`kcheck bugs` and the specs' known-bug records: a bug counts as rediscovered only when the
search violates its property in the pre-fix variant and holds it in the default."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.loader import load_spec
from kcheck.spec import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests/specs/lost_update.py"


def kcheck(*argv):
    return subprocess.run([sys.executable, "-m", "kcheck.cli", *argv], capture_output=True,
                          text=True, cwd=ROOT)


def test_a_toy_bug_is_rediscovered_with_its_shortest_trace():
    p = kcheck("bugs", str(TOY), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["rediscovered"], doc["expressible"], doc["recorded"]) == (1, 1, 2)
    bug = doc["bugs"][0]
    assert (bug["jira"], bug["pre_fix"], bug["trace_length"], bug["fixed"]) == \
        ("TOY-1", "violated", 4, "holds")
    assert doc["bugs"][1]["not_expressible"] == "a second counter"


def test_a_recorded_bug_that_the_search_does_not_find_fails_the_command(tmp_path):
    # the record claims the renamed default breaks the property; the search says it holds
    text = TOY.read_text().replace('spec.variant("harmless", "the same rule under another name", violates=[])',
                                   'spec.variant("harmless", "the same rule", violates=["no-lost-update"])')
    text += ('spec.known_bug("TOY-3", broke="claimed", fix="none", code="Counter.write", '
             'variant="harmless", property="no-lost-update")\n')
    path = tmp_path / "claimed.py"
    path.write_text(text)
    p = kcheck("bugs", str(path), "--json")
    assert p.returncode == 1
    rows = {b["jira"]: b for b in json.loads(p.stdout)["bugs"]}
    assert rows["TOY-3"]["pre_fix"] == "holds" and rows["TOY-3"]["rediscovered"] is False


@pytest.mark.parametrize("edit,message", [
    ('variant="no-cas", property="no-lost-update")', "names unknown variant 'no-cass'"),
    ('property="no-lost-update")', "names unknown property 'no-lost-updat'"),
])
def test_a_known_bug_naming_an_unknown_variant_or_property_is_refused_on_load(tmp_path, edit, message):
    wrong = edit.replace("no-cas", "no-cass") if "variant" in edit else \
        edit.replace("no-lost-update", "no-lost-updat")
    path = tmp_path / "typo.py"
    path.write_text(TOY.read_text().replace(edit, wrong, 1))
    p = kcheck("bugs", str(path))
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


SHIPPED_BUGS = [(name, bug) for name in SHIPPED for bug in load_spec(name).known_bugs
                if bug.variant is not None]


@pytest.mark.parametrize("name,bug", SHIPPED_BUGS, ids=lambda x: getattr(x, "jira", x))
def test_every_shipped_bug_has_its_saved_trace_and_a_default_that_holds(name, bug):
    spec = load_spec(name)
    # an open bug (no fix shipped) is found in the default itself; any other holds there
    assert (bug.property in spec.variants[spec.default_variant].expected_violations) == bug.open
    saved = ROOT / "counterexamples" / name / bug.variant / f"{bug.property}.json"
    assert saved.exists(), f"no saved counterexample {saved.relative_to(ROOT)}"
    assert json.loads(saved.read_text())["property"] == bug.property


def test_the_specs_record_at_least_fifteen_rediscoverable_bugs():
    # issue 15's bar: at least 15 known bugs of the modelled code with a pre-fix variant
    assert len(SHIPPED_BUGS) >= 15, [b.jira for _, b in SHIPPED_BUGS]


def test_a_bounded_search_leaves_a_bug_undecided_not_missed():
    """--max-depth 1 stops the pre-fix search before its 4-step trace: the bug is neither
    rediscovered nor missed, and the command exits 3 (undecided), not 1."""
    p = kcheck("bugs", str(TOY), "--json", "--max-depth", "1")
    assert p.returncode == 3, p.stderr
    [bug] = [b for b in json.loads(p.stdout)["bugs"] if b["variant"]]
    assert (bug["pre_fix"], bug["rediscovered"]) == ("bounded", False)
    p = kcheck("bugs", str(TOY), "--max-depth", "1")
    assert "0 of 1 expressible bugs rediscovered" in p.stdout and "1 undecided" in p.stdout


def test_a_signal_prints_the_bugs_finished_and_exits_143(tmp_path, monkeypatch, capsys):
    """SIGTERM during the second bug's search: the first bug's row is printed, the second is not
    counted as missed (it printed "6 of 7 rediscovered" and exited 1), and the exit is 143."""
    from kcheck import bugs_cli, cli
    from kcheck.bfs import Terminated
    text = TOY.read_text() + ('spec.known_bug("TOY-3", broke="again", fix="none", '
                              'code="Counter.write", variant="no-cas", property="no-lost-update")\n')
    path = tmp_path / "two_bugs.py"
    path.write_text(text)
    measured, calls = bugs_cli._measure, []

    def stopped_at_the_third_search(*a, **k):
        calls.append(a)
        if len(calls) == 3:
            raise Terminated()
        return measured(*a, **k)
    monkeypatch.setattr(bugs_cli, "_measure", stopped_at_the_third_search)
    assert cli.main(["bugs", str(path), "--json"]) == 143
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [b["jira"] for b in doc["bugs"]] == ["TOY-1", "TOY-2"]   # TOY-3 was being searched
    assert doc["rediscovered"] == 1
    assert "bugs terminated (SIGTERM) after 2 of 3 recorded bugs" in err
