"""Every front end gives check's and progress's verdicts: sweep, report, the pytest plugin and the
JUnit and SARIF outputs, on every shipped spec's default variant at its least parameters, verdict
for verdict (not exit codes: sweep and check may exit 1 for different reasons)."""
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kcheck.cli import main
from kcheck.loader import load_spec
from kcheck.pytest_plugin import KcheckFixture
from kcheck.report import collect, render_html
from kcheck.spec import SHIPPED
from kcheck.verdict import record_differences
from small_sizes import least_params

ROOT = Path(__file__).resolve().parent.parent


def _json(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1, 3), (argv, code)
    return json.loads(out)


def _param_args(params: dict) -> list[str]:
    return [x for k, v in params.items() for x in ("--param", f"{k}={v}")]


@pytest.fixture(scope="module", params=list(SHIPPED))
def case(request, tmp_path_factory):
    """(spec, variant, params, check's verdicts and trace lengths, progress's, the CI files)."""
    spec = load_spec(request.param)
    variant = spec.default_variant
    params = least_params(spec, variant)
    tmp = tmp_path_factory.mktemp(request.param)
    argv = ["--variant", variant, *_param_args(params)]
    return spec, variant, params, argv, tmp


def _check(spec, argv, tmp, capsys):
    junit, sarif = tmp / "check.xml", tmp / "check.sarif"
    doc = _json(capsys, "check", spec.name, *argv, "--json", "--junit", str(junit),
                "--sarif", str(sarif))
    return ({p: (v["status"], v["trace_length"]) for p, v in doc["properties"].items()},
            junit, sarif)


def _progress(spec, argv, capsys) -> dict:
    if not (spec.progress or spec.check_deadlock):
        return {}
    doc = _json(capsys, "progress", spec.name, *argv, "--json")
    return {p: (v["status"], v["trace_length"]) for p, v in doc["properties"].items()}


def test_sweep_gives_checks_verdicts(case, capsys):
    """A sweep searches order-only domains up to their caps (it says "quotient off"), as check
    does with --no-quotient."""
    spec, variant, params, argv, tmp = case
    checked, _, _ = _check(spec, argv + ["--no-quotient"], tmp, capsys)
    doc = _json(capsys, "sweep", spec.name, *argv, "--json")
    (config,) = doc["configurations"]
    assert {p: (v["status"], v["trace_length"]) for p, v in config["properties"].items()} == checked
    # a sometimes property's witness is not a counterexample
    witnesses = {p for p, (st, _) in checked.items() if st == "reached"}
    assert set(doc["shortest_witnesses"]) == witnesses
    assert set(doc["minimal_counterexamples"]) == {p for p, (st, _) in checked.items()
                                                   if st == "violated"}


def test_the_report_gives_checks_and_progresss_verdicts(case, capsys):
    spec, variant, params, argv, tmp = case
    checked, _, _ = _check(spec, argv, tmp, capsys)
    progressed = _progress(spec, argv, capsys)
    rep = collect(spec, params, saved_dir=None)
    run = next(r for r in rep.runs if r.variant == variant)
    expected = {p: st for p, (st, _) in {**progressed, **checked}.items()}
    assert run.verdicts == expected
    page = render_html(rep)
    cells = dict(re.findall(rf'data-variant="{re.escape(variant)}" data-property="([^"]+)"'
                            rf'(?: title="[^"]*")? data-status="([^"]+)"', page))
    # the matrix gives each property a column but the lemmas (helper invariants), which share one
    lemmas = {p for p, prop in spec.properties.items() if prop.lemma}
    assert {p: st for p, st in cells.items() if p != "lemmas"} == \
        {p: st for p, st in expected.items() if p not in lemmas}
    if lemmas:
        assert (cells["lemmas"] == "violated") == any(expected[p] == "violated" for p in lemmas)
    # each counterexample section heads with its verdict, and says "not in the record" only
    # where the verdict differs from the record
    diffs = record_differences(spec, variant, expected)
    for prop, status, note in re.findall(
            rf'<h3>{re.escape(variant)}: ([\w-]+) (violated|reached) in \d+ steps? \([\w-]*\)'
            rf'( — not in the record)?</h3>', page):
        assert status == ("violated" if expected[prop] == "violated" else "reached"), prop
        assert bool(note) == any(d.startswith(f"{spec.name}/{variant}: {prop} ") for d in diffs)


def test_the_pytest_plugin_gives_checks_and_progresss_verdicts(case, capsys):
    spec, variant, params, argv, tmp = case
    checked, _, _ = _check(spec, argv, tmp, capsys)
    expected = {p: st for p, (st, _) in {**_progress(spec, argv, capsys), **checked}.items()}
    diffs = record_differences(spec, variant, expected)
    fixture = KcheckFixture(ROOT, ROOT)
    if diffs:   # the record is written for the default parameters
        with pytest.raises(pytest.fail.Exception) as failed:
            fixture.check_record(spec.name, [variant], params)
        listed = re.findall(rf"^{re.escape(spec.name)}/{re.escape(variant)}: .*$",
                            str(failed.value), re.M)
        assert sorted(listed) == sorted(diffs)
    else:
        verdicts = fixture.check_record(spec.name, [variant], params)
        assert {p: st for (v, p), st in verdicts.items()} == expected


def test_junit_and_sarif_give_checks_verdicts(case, capsys):
    spec, variant, params, argv, tmp = case
    checked, junit, sarif = _check(spec, argv, tmp, capsys)
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    by_prop = {r["ruleId"].split("/", 1)[1]: r["properties"]["status"] for r in results}
    assert by_prop == {p: st for p, (st, _) in checked.items()}
    cases = ET.parse(junit).getroot().iter("testcase")
    failed = {c.get("name"): c.find("failure").get("type")
              for c in cases if c.find("failure") is not None}
    assert failed == {p: st for p, (st, _) in checked.items() if st in ("violated", "not-reached")}
