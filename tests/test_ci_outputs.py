"""--junit and --sarif of check, progress and prove: valid against Jenkins' JUnit schema and
SARIF 2.1.0's schema (tests/schemas), one test case per spec/variant/property, and a test case
fails exactly when the command's exit code counts it against the run."""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = Path(__file__).resolve().parent / "schemas"
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]
JUNIT = xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))
SARIF = jsonschema.Draft4Validator(json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text()))


def kcheck(*args):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT, timeout=600)


def outputs(tmp_path, *args):
    j, s = tmp_path / "out.xml", tmp_path / "out.sarif"
    r = kcheck(*args, "--junit", str(j), "--sarif", str(s))
    JUNIT.validate(str(j))
    doc = json.loads(s.read_text())
    SARIF.validate(doc)
    return r, ET.parse(j).getroot(), doc


def cases(root) -> dict:
    """(classname, name) -> (outcome, element)."""
    out = {}
    for tc in root.iter("testcase"):
        kind = ("failed" if tc.find("failure") is not None else
                "skipped" if tc.find("skipped") is not None else "passed")
        out[(tc.get("classname"), tc.get("name"))] = (kind, tc)
    return out


def test_check_one_variant_a_violation_is_a_failure_with_its_trace(tmp_path):
    r, root, sarif = outputs(tmp_path, "check", "two_phase", "--variant", "commit-without-prepares")
    assert r.returncode == 1
    c = cases(root)
    assert len(c) == 9          # consistent, 7 lemmas, deadlock
    kind, tc = c[("kcheck.two_phase.commit-without-prepares", "consistent")]
    assert kind == "failed"
    f = tc.find("failure")
    assert f.get("message") == "two_phase/commit-without-prepares: consistent is violated in 3 steps"
    for step in ("TMCommit", "RMRcvCommitMsg(rm=1)", "RMChooseToAbort(rm=0)", "rm_state[0]: working → aborted"):
        assert step in f.text
    assert root.get("failures") == "2"     # consistent and the lemma commit-after-all-prepared
    res = {r_["ruleId"]: r_ for r_ in sarif["runs"][0]["results"]}
    bad = res["two_phase/consistent"]
    assert bad["kind"] == "fail" and bad["level"] == "error"
    loc = bad["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "spec/examples/two_phase.py"
    src = (ROOT / "spec/examples/two_phase.py").read_text().splitlines()
    assert src[loc["region"]["startLine"] - 1] == '@spec.invariant("consistent")'
    flow = bad["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [x["location"]["message"]["text"].split(":")[0] for x in flow] == \
        ["1. TMCommit", "2. RMRcvCommitMsg(rm=1)", "3. RMChooseToAbort(rm=0)"]
    assert res["two_phase/deadlock"]["kind"] == "pass" and res["two_phase/deadlock"]["level"] == "none"


def test_check_all_variants_fails_only_what_differs_from_the_record(tmp_path):
    r, root, sarif = outputs(tmp_path, "check", "two_phase", "--all-variants")
    assert r.returncode == 0
    c = cases(root)
    assert len(c) == 18 and root.get("failures") == "0"
    kind, tc = c[("kcheck.two_phase.commit-without-prepares", "consistent")]
    assert kind == "passed" and "the record expects this violation" in tc.find("system-out").text
    assert [s.get("name") for s in root.iter("testsuite")] == \
        ["kcheck check two_phase/lamport", "kcheck check two_phase/commit-without-prepares"]
    kinds = {(x["properties"]["variant"], x["ruleId"]): x["kind"] for x in sarif["runs"][0]["results"]}
    assert kinds[("commit-without-prepares", "two_phase/consistent")] == "informational"
    assert kinds[("lamport", "two_phase/consistent")] == "pass"


def test_a_bounded_search_is_skipped_with_the_reason(tmp_path):
    r, root, _ = outputs(tmp_path, "check", "two_phase", "--max-depth", "2")
    assert r.returncode == 3
    kind, tc = cases(root)[("kcheck.two_phase.lamport", "consistent")]
    assert kind == "skipped" and "not exhaustive" in tc.find("skipped").get("message")


def test_progress_lasso_is_a_failure_with_its_loop(tmp_path):
    r, root, sarif = outputs(tmp_path, "progress", "tests/specs/ring.py")
    assert r.returncode == 1
    c = cases(root)
    assert c[("kcheck.ring.ring", "reaches-two")][0] == "passed"
    kind, tc = c[("kcheck.ring.ring", "reaches-three")]
    assert kind == "failed" and "(lasso)" in tc.find("failure").get("message")
    assert "repeat for ever" in tc.find("failure").text
    assert {x["ruleId"] for x in sarif["runs"][0]["results"]} == \
        {"ring/reaches-two", "ring/reaches-three", "ring/zero-leads-to-two-unfair"}


@pytest.mark.z3
def test_prove_each_proof_is_a_test_case_with_its_time(tmp_path):
    r, root, sarif = outputs(tmp_path, "prove", "two_phase", "--property", "consistent",
                             "--property", "commit-sent-by-tm")
    assert r.returncode == 0
    c = cases(root)
    assert set(c) == {("kcheck.two_phase.lamport", "consistent"), ("kcheck.two_phase.lamport", "commit-sent-by-tm")}
    assert all(kind == "passed" and tc.get("time") for kind, tc in c.values())
    msgs = [x["message"]["text"] for x in sarif["runs"][0]["results"]]
    assert any("proved by k-induction" in m and "lemmas assumed" in m for m in msgs)


@pytest.mark.z3
def test_prove_a_violation_fails(tmp_path):
    r, root, _ = outputs(tmp_path, "prove", "two_phase", "--variant", "commit-without-prepares",
                         "--property", "consistent")
    assert r.returncode == 1
    kind, tc = cases(root)[("kcheck.two_phase.commit-without-prepares", "consistent")]
    assert kind == "failed" and "TMCommit" in tc.find("failure").text


def test_an_unwritable_output_is_refused_before_the_search(tmp_path):
    r = kcheck("check", "two_phase", "--junit", str(tmp_path / "no" / "such" / "dir.xml"))
    assert r.returncode == 2 and "does not exist" in r.stderr and r.stdout == ""
    r = kcheck("progress", "two_phase", "--sarif", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr


def test_the_schemas_reject_what_they_should():
    """The schemas are not vacuous: a test case without a name, or a result with an unknown
    kind, is refused."""
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        JUNIT.validate('<testsuites><testsuite name="s" tests="1" failures="0" errors="0">'
                       '<testcase classname="x"/></testsuite></testsuites>')
    with pytest.raises(jsonschema.ValidationError):
        SARIF.validate({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "kcheck"}},
                                                      "results": [{"message": {"text": "x"}, "kind": "bad"}]}]})
