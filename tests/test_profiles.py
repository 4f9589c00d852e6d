"""Release profiles (issue 34): a profile is the default variant with several independent rule
changes composed (spec.profile), a model checked like a variant. The language refuses a
composition it cannot make sound, naming the spec's lines; a profile of one change is that
variant exactly; consumer_group declares what each Kafka 4.x release runs."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kcheck.bfs import search
from kcheck.cli import main
from kcheck.conform import driver
from kcheck.loader import load_spec
from kcheck.spec.lang import SpecError
from kcheck.verdict import record_differences

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "consumer_group"

TOY = '''
from kcheck.spec.lang import Spec, Int
spec = Spec("toy")
spec.param("top", 3, 1, 5)
spec.param("extra", 0, 0, 2)


@spec.state
def state(p):
    return {{"x": Int(0, 9), "y": Int(0, 9)}}


@spec.init
def init(p):
    yield {{"x": 0, "y": 0}}


@spec.rule("step")
def step(s, p):
    return 1


@spec.rule("step", variant="two")
def step_two(s, p):
    return 2


@spec.rule("step", variant="three")
def step_three(s, p):
    return 3


@spec.action
def IncX(s, p):
    s.require(s.x < p.top)
    s.x = s.x + s.rule("step")


@spec.action
def IncY(s, p):
    s.require(s.y < p.top)
    s.y = s.y + (2 if s.variant == "double-y" else 1)
    {lookup}


@spec.invariant("small")
def small(s, p):
    """x and y stay below ten."""
    return s.x + s.y < 10


spec.variant("plain", "as is", default=True)
spec.variant("two", "x moves by two")
spec.variant("three", "x moves by three")
spec.variant("double-y", "y moves by two")
spec.variant("wide", "checked at top 5", params={{"top": 5}})
spec.variant("narrow", "checked at top 2", params={{"top": 2}})
{profiles}
'''


def _toy(tmp_path, profiles: str, lookup: str = "") -> "Spec":
    path = tmp_path / "toy.py"
    path.write_text(TOY.format(profiles=textwrap.dedent(profiles), lookup=lookup))
    return load_spec(str(path))


def _states(model) -> set:
    return search(model).distinct_states


def test_a_profile_composes_independent_changes(tmp_path):
    spec = _toy(tmp_path, 'spec.profile("r1", ["two", "double-y"], releases=["1.0"])\n'
                          'spec.profile("r2", ["two"], releases=["2.0"])\n')
    both, two = spec.instantiate("r1"), spec.instantiate("r2")
    # the composition: x by two (the rule of 'two') and y by two (s.variant == 'double-y')
    assert spec.profile_for("1.0").name == "r1" and spec.profile_for("3.0") is None
    r = search(both)
    assert r.exhaustive
    # x in {0, 2, 4} (top 3: 0 -> 2 -> 4), y in {0, 2, 4}: 9 states; 'two' alone keeps y by one
    assert r.distinct_states == 9 and search(two).distinct_states == 3 * 4
    # a profile of one change is that variant's model, state for state
    assert search(two).distinct_states == search(spec.instantiate("two")).distinct_states


def test_two_changes_of_one_rule_are_refused_with_the_spec_lines(tmp_path):
    with pytest.raises(SpecError) as e:
        _toy(tmp_path, 'spec.profile("bad", ["two", "three"])\n')
    msg = str(e.value)
    assert "profile bad composes two and three, which each replace rule step" in msg
    assert "toy.py:" in msg and msg.count("toy.py:") >= 3   # the profile's line and both rules'


def test_changes_checked_at_different_parameters_are_refused(tmp_path):
    with pytest.raises(SpecError, match="narrow is checked at top=2 and wide at top=5|wide is "
                                        "checked at top=5 and narrow at top=2"):
        _toy(tmp_path, 'spec.profile("bad", ["wide", "narrow"])\n')


@pytest.mark.parametrize("profiles,message", [
    ('spec.profile("bad", ["nope"])\n', "profile bad: unknown variant 'nope'"),
    ('spec.profile("bad", ["plain"])\n', "plain is the default variant"),
    ('spec.profile("bad", ["two", "two"])\n', "names a change twice"),
    ('spec.profile("two", ["three"])\n', "profile 'two' is declared twice"),
    ('spec.profile("a", ["two"], releases=["1.0"])\nspec.profile("b", ["three"], releases=["1.0"])\n',
     "release 1.0 is already profile a's"),
    # a misspelled record would silently claim nothing about the property it means
    ('spec.profile("bad", ["two"], violates=["smal"])\n', "profile bad: violates= names property 'smal'"),
])
def test_a_profile_that_cannot_be_made_is_refused(tmp_path, profiles, message):
    with pytest.raises(SpecError, match=message):
        _toy(tmp_path, profiles)


def test_a_profile_cannot_say_which_change_a_set_lookup_means(tmp_path):
    spec = _toy(tmp_path, 'spec.profile("r1", ["two", "double-y"])\n',
                lookup='s.y = s.y if s.variant in {"two"} else s.y')
    with pytest.raises(SpecError, match="stands for several variants .*not in a set or dict .*toy.py"):
        spec.instantiate("r1")


def test_a_profile_is_checked_like_a_variant(tmp_path):
    _toy(tmp_path, 'spec.profile("r1", ["two", "double-y"])\n')
    r = subprocess.run([sys.executable, "-c", "from kcheck.cli import run; run()", "check",
                        str(tmp_path / "toy.py"),
                        "--variant", "r1", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["variant"], doc["distinct_states"]) == ("r1", 9)
    assert doc["properties"]["small"]["status"] == "holds"


# -- consumer_group's profiles -----------------------------------------------------------------

SPEC = load_spec("consumer_group")


def test_every_4x_release_on_maven_central_has_a_profile():
    releases = ["4.0.0", "4.0.1", "4.0.2", "4.1.0", "4.1.1", "4.1.2", "4.2.0", "4.2.1", "4.2.2",
                "4.3.0", "4.3.1", "4.3.2", "4.4.0"]
    got = {v: SPEC.profile_for(v).changes for v in releases}
    # 4.1.0 runs KAFKA-19974's, 19449's and 19233's pre-fix rules and the strict commit check
    assert set(got["4.1.0"]) == {"strict", "unrevoked-epoch-bump", "kafka-19449", "kafka-19233",
                                 "kafka-20442"}
    assert "kafka-19449" not in got["4.1.2"] and "kafka-19449" not in got["4.0.2"]
    assert set(got["4.2.2"]) == {"strict", "kafka-20442"}
    assert got["4.3.1"] == ("kafka-20442",) and got["4.3.2"] == got["4.4.0"] == ()


def _predict(profile: str, path: Path):
    job = driver.load_job(path, "consumer_group")
    model = driver.model_of(SPEC, profile, job.doc["params"])
    return driver.predict(model, driver.initial_words(model, job.doc), job.doc["steps"])


def test_the_41_profile_refuses_the_zombie_and_the_42_profile_accepts_it():
    path = SCENARIOS / "stock_assignor_zombie_commit_uniform.json"
    old, new = _predict("kafka-4.1.0", path), _predict("kafka-4.2", path)
    # step 8: before KAFKA-19974 member 0 moves to epoch 2; after it, it stays at 1
    assert old[7].post["member_epoch[0]"] == 2 and new[7].post["member_epoch[0]"] == 1
    assert (str(old[-1].outcome), str(new[-1].outcome)) == ("STALE_MEMBER_EPOCH", "NONE")


@pytest.mark.parametrize("profile", list(SPEC.profiles))
def test_a_profile_of_consumer_group_adds_the_states_of_each_of_its_changes(profile):
    """At two members, one partition, dynamic members and max_epoch 3 (the default has 2,857
    states; kafka-19449 adds 40, kafka-20442 31, the other changes none), each profile has the
    default's states plus what each of its changes adds: measured, the changes do not interact
    there (4.0.0 and 4.1.0: 2,928). A profile that dropped a change, or ran one that it does not
    name, would miss or add that change's states."""
    params = {"members": 2, "partitions": 1, "static_members": 0, "max_epoch": 3,
              "lost_responses": 0}
    base = search(SPEC.instantiate(None, params)).distinct_states
    added = sum(search(SPEC.instantiate(c, params)).distinct_states - base
                for c in SPEC.profiles[profile].changes)
    assert search(SPEC.instantiate(profile, params)).distinct_states == base + added
    assert base == 2857


def test_the_history_table_in_the_docs_is_the_profiles():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "history_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "history_table.py")],
                         capture_output=True, text=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| KAFKA-19974"))
    # KAFKA-19974's pre-fix reconciliation: every 4.0 and 4.1 release, none from 4.2.0
    assert row.count("runs it") == 6


def test_every_profile_record_is_explained_by_its_changes_own_records():
    """A profile's recorded violation is one that some change it runs (or the default, which every
    profile starts from) violates alone, and its findings explain exactly its record: a property
    that only a combination violated would be a finding of its own, to be written down."""
    for name, prof in SPEC.profiles.items():
        assert prof.recorded, name
        record = prof.variant.expected_violations
        assert set(prof.variant.findings) == record, name
        alone = set().union(*(SPEC.variants[c].expected_violations
                              for c in (*prof.changes, SPEC.default_variant)))
        assert record <= alone, (name, record - alone)


def _verdicts(command: str, profile: str, capsys) -> tuple[int, dict]:
    code = main([command, "consumer_group", "--variant", profile, "--json"])
    doc = json.loads(capsys.readouterr().out)
    return code, doc


@pytest.mark.parametrize("profile", list(SPEC.profiles))
def test_every_profile_matches_its_record_at_the_defaults(profile, capsys):
    """What `kcheck check` and `kcheck progress --variant P` answer at the defaults is P's record
    (violates=), as `check --all-variants` compares a variant's: the exit code of one variant's
    run is 1 whenever something is violated, so the record is compared here."""
    for command in ("check", "progress"):
        code, doc = _verdicts(command, profile, capsys)
        statuses = {p: r["status"] for p, r in doc["properties"].items()}
        assert record_differences(SPEC, profile, statuses) == [], command
        assert "bounded" not in statuses.values(), command
        assert code == (1 if set(statuses.values()) & {"violated", "not-reached"} else 0), command
        # the safety search is exhaustive at the defaults, so a 'holds' above is a real answer
        assert command != "check" or doc["exhaustive"]
