"""Copies of rules (issue 37): `kcheck new --from consumer_group NAME` writes a spec derived from
the shipped one (Spec.derive) under its own name, with one rule changed as a new variant; it
checks, its traces replay against it, and `kcheck compare` compares its rule with the shipped
one across the two spec files."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.spec.lang import Spec, SpecError

KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]


def kcheck(*args, cwd):
    return subprocess.run(KCHECK + [str(a) for a in args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def copy_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("rulecopy")
    r = kcheck("new", "--from", "consumer_group", "my_commit", cwd=d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == ("wrote my_commit.py: consumer_group as my_commit, with rule "
                                        "offset-commit changed in variant any-partition")
    return d


def check_json(d, spec, variant, *extra):
    r = kcheck("check", spec, "--variant", variant, "--json", *extra, cwd=d)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


# -- Spec.derive ---------------------------------------------------------------------------------

def test_derive_names_how_it_copies_every_attribute_of_a_spec():
    # a declaration added to Spec later must say how a derived spec gets it
    assert set(vars(Spec("x"))) == set(Spec._DERIVE)


def test_derive_adds_to_a_copy_and_leaves_the_shipped_spec_alone():
    from kcheck.loader import load_spec
    shipped = load_spec("consumer_group")
    before = ({v: (set(x.expected_violations), dict(x.expected_idle)) for v, x in shipped.variants.items()},
              {r: dict(i) for r, i in shipped.rules.items()})
    mine = shipped.derive("mine")
    mine.variant("mine-v", "a test variant", violates=["no-zombie-commit"])
    mine.rule("offset-commit", variant="mine-v")(lambda s, p, m, q, epoch: epoch == s.member_epoch[m])
    mine.idle(["JoinFenced"], "a test", variants=["kip1251"])
    mine.validate()
    assert mine.name == "mine" and mine.derived_from == "consumer_group"
    assert mine.source_file == __file__       # its traces name the module that derived it
    assert list(mine.variants) == [*shipped.variants, "mine-v"]
    after = ({v: (set(x.expected_violations), dict(x.expected_idle)) for v, x in shipped.variants.items()},
             {r: dict(i) for r, i in shipped.rules.items()})
    assert after == before and "mine-v" not in shipped.variants


@pytest.mark.parametrize("name,needle", [("consumer_group", "shipped spec's name"),
                                         ("producer", "shipped spec's name"),
                                         ("My-Copy", "lower-case Python identifier"),
                                         ("", "lower-case Python identifier")])
def test_derive_refuses_a_shipped_or_malformed_name(name, needle):
    from kcheck.loader import load_spec
    with pytest.raises(SpecError, match=needle) as e:
        load_spec("consumer_group").derive(name)
    assert "\n" not in str(e.value) and str(e.value).startswith(__file__)


# -- kcheck new --from ---------------------------------------------------------------------------

def test_the_copy_loads_under_its_own_name_with_every_shipped_variant(copy_dir):
    from kcheck.loader import load_spec
    mine = load_spec(str(copy_dir / "my_commit.py"))
    shipped = load_spec("consumer_group")
    assert (mine.name, mine.derived_from, mine.default_variant) == ("my_commit", "consumer_group", "kip1251")
    assert list(mine.variants) == [*shipped.variants, "any-partition"]
    assert set(mine.rules["offset-commit"]) == {*shipped.rules["offset-commit"], "any-partition"}
    assert mine.variants["any-partition"].expected_violations == shipped.variants["kip1251"].expected_violations


def test_the_unchanged_default_checks_as_the_shipped_one(copy_dir):
    mine = check_json(copy_dir, "my_commit.py", "kip1251")
    shipped = check_json(copy_dir, "consumer_group", "kip1251")
    assert mine["spec"] == "my_commit" and shipped["spec"] == "consumer_group"
    for k in ("distinct_states", "transitions", "depth", "steps_per_action"):
        assert mine[k] == shipped[k], k
    assert mine["distinct_states"] == 677_362
    assert {p: (v["status"], v["trace_length"]) for p, v in mine["properties"].items()} == \
        {p: (v["status"], v["trace_length"]) for p, v in shipped["properties"].items()}


def test_the_changed_rule_lets_a_shorter_zombie_commit_through(copy_dir):
    mine = check_json(copy_dir, "my_commit.py", "any-partition", "--save", "--out", "out")
    shipped = check_json(copy_dir, "consumer_group", "kip1251")
    # one guard fewer, the same reachable states: only the decisions of HandleCommit differ
    assert mine["distinct_states"] == shipped["distinct_states"]
    got = {p: (v["status"], v["trace_length"]) for p, v in mine["properties"].items()}
    want = {p: (v["status"], v["trace_length"]) for p, v in shipped["properties"].items()}
    assert want.pop("no-zombie-commit") == ("violated", 11)
    assert got.pop("no-zombie-commit") == ("violated", 5)
    assert got == want
    # the trace names the copy, not the shipped spec, and replays against it
    saved = copy_dir / "out" / "my_commit" / "any-partition" / "no-zombie-commit.json"
    doc = json.loads(saved.read_text())
    assert doc["spec"] == "../../../my_commit.py" and doc["variant"] == "any-partition"
    r = kcheck("replay", saved, cwd=copy_dir)
    assert r.returncode == 0 and "REPRODUCES" in r.stdout, r.stdout + r.stderr


def test_the_producer_copy_finds_a_hanging_transaction(tmp_path):
    r = kcheck("new", "--from", "producer", "my_pid", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    mine = check_json(tmp_path, "my_pid.py", "no-busy-check")
    unchanged = check_json(tmp_path, "my_pid.py", "kip360")
    shipped = check_json(tmp_path, "producer", "kip360")
    assert mine["spec"] == "my_pid" and unchanged["distinct_states"] == shipped["distinct_states"]
    assert {p: (v["status"], v["trace_length"]) for p, v in unchanged["properties"].items()} == \
        {p: (v["status"], v["trace_length"]) for p, v in shipped["properties"].items()}
    got = {p: (v["status"], v["trace_length"]) for p, v in mine["properties"].items()}
    want = {p: (v["status"], v["trace_length"]) for p, v in shipped["properties"].items()}
    changed = {p: got[p] for p in got if got[p][0] != want[p][0]}
    assert changed == {"no-hanging-transaction": ("violated", 9), "fenced-stays-fenced": ("violated", 9),
                       "open-transaction-is-unfinished": ("violated", 6),
                       "current-marker-matches-transaction": ("violated", 8)}
    # the record the file writes is these verdicts: check --all-variants matches it
    r = kcheck("check", "my_pid.py", "--all-variants", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["record"]["matches"], r.stderr
    r = kcheck("compare", "my_pid.py", "--rule", "init-producer-id", "--variants", "no-busy-check",
               "producer:kip360", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["relation"] == \
        "my_pid:no-busy-check accepts strictly more than producer:kip360"


@pytest.mark.slow
def test_every_variant_of_the_copy_matches_its_record(copy_dir):
    r = kcheck("check", "my_commit.py", "--all-variants", "--json", cwd=copy_dir)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["spec"] == "my_commit" and doc["record"] == {"matches": True, "differences": []}
    assert [x["variant"] for x in doc["results"]][-1] == "any-partition"


@pytest.mark.parametrize("args,needle", [
    (["--from", "nope", "x"], "--from nope: not a shipped spec; valid: consumer_group, producer"),
    (["--from", "two_phase", "x"], "--from two_phase: has no example rule change; valid: consumer_group, producer"),
    (["--from", "consumer_group", "my_commit"], "my_commit.py already exists; use --force"),
    (["--from", "consumer_group", "My-Copy"], "not a valid spec name"),
    (["--from", "consumer_group", "consumer_group"], "is a shipped spec's name"),
])
def test_new_from_refuses_bad_input_in_one_line(copy_dir, args, needle):
    r = kcheck("new", *args, cwd=copy_dir)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_the_examples_tables_name_real_specs_and_defaults():
    from kcheck.loader import load_spec
    from kcheck.scaffold import FROM, SHIPPED_DEFAULT
    assert set(FROM) == set(SHIPPED_DEFAULT)
    for name, (variant, rule, _) in FROM.items():
        s = load_spec(name)
        assert s.default_variant == SHIPPED_DEFAULT[name] and rule in s.rules
        assert variant not in s.variants


# -- kcheck compare across two spec files ---------------------------------------------------------

def compare_json(d, *args):
    r = kcheck("compare", "my_commit.py", "--rule", "offset-commit", "--variants", *args, "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_compare_finds_what_the_changed_rule_accepts_more(copy_dir):
    doc = compare_json(copy_dir, "any-partition", "consumer_group:kip1251")
    a, b = "my_commit:any-partition", "consumer_group:kip1251"
    assert doc["variants"] == [a, b] and doc["spec"] == "my_commit"
    assert doc["relation"] == f"{a} accepts strictly more than {b}"
    props = doc["properties"]
    assert props[f"{a}-accepts-what-{b}-accepts"]["status"] == "proved"
    w = props[f"{b}-accepts-what-{a}-accepts"]["witness"]
    assert props[f"{b}-accepts-what-{a}-accepts"]["status"] == "violated"
    assert w["results"] == {a: True, b: False}
    # the witness is a commit for a partition the member does not hold: the guard left out
    m, q = w["args"]["m"], w["args"]["q"]
    assert w["state"]["holds"][m][q] == "NONE"


def test_compare_finds_the_unchanged_rule_equal_to_the_shipped_one(copy_dir):
    doc = compare_json(copy_dir, "kip1251", "consumer_group:kip1251")
    assert doc["relation"] == "same-acceptance"
    assert {p: v["status"] for p, v in doc["properties"].items()} == {
        "my_commit:kip1251-accepts-what-consumer_group:kip1251-accepts": "proved",
        "consumer_group:kip1251-accepts-what-my_commit:kip1251-accepts": "proved",
        "same-decisions": "proved"}


@pytest.mark.parametrize("variants,needle", [
    # lost-responses is checked at lost_responses=1, which adds the previous-epoch fields
    (["any-partition", "consumer_group:lost-responses"],
     "different state fields (only in consumer_group: previous_epoch[0], previous_epoch[1])"),
    (["any-partition", "consumer_group:nope"], "unknown variant 'nope' for spec consumer_group"),
    (["any-partition", "producer:kip360"], "unknown rule 'offset-commit' for spec producer"),
    (["any-partition", ":kip1251"], "give VARIANT or SPEC:VARIANT"),
    (["consumer_group:strict", "consumer_group:kip1251"], "at least one of the two is a variant of my_commit.py"),
])
def test_compare_refuses_bad_input_in_one_line(copy_dir, variants, needle):
    r = kcheck("compare", "my_commit.py", "--rule", "offset-commit", "--variants", *variants, cwd=copy_dir)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_the_readmes_copy_is_what_new_from_writes(tmp_path):
    """docs/examples/my_commit.py, which the README's workflow runs, is `kcheck new --from`'s
    file as written today (scripts/readme.py rewrites both together)."""
    from kcheck.scaffold import write_derived
    root = Path(__file__).resolve().parent.parent
    assert write_derived("consumer_group", "my_commit", tmp_path).read_text() == \
        (root / "docs" / "examples" / "my_commit.py").read_text()


@pytest.mark.kafka
def test_a_copy_conforms_in_process_through_the_shipped_spec_s_adapter(copy_dir):
    """conform drives a copy with the shipped spec's adapter (the same fields and actions): the
    copy's default variant, which is the shipped kip1251, conforms on 4.4.0's coordinator in every
    transition of a small graph, and the report names the copy."""
    r = kcheck("conform", "my_commit.py", "--exhaustive", "--kafka", "4.4.0", "--param", "members=1",
               "--param", "partitions=1", "--param", "static_members=0", "--param", "max_epoch=3",
               "--json", cwd=copy_dir)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["spec"], doc["variant"], doc["divergences"]) == ("my_commit", "kip1251", [])
    assert doc["checked"] > 0
