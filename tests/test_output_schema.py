"""The result model (checker/verdict.py) and the schema of the --json outputs
(checker/output_schema.json): every command's document validates, a wrong one does not, and the
command line shares its options and engines as README documents them."""
import ast
import json
from pathlib import Path

import jsonschema
import pytest

from kcheck.cli import BAD_INPUT, BOUNDED, OK, VIOLATED, main
from kcheck.verdict import (OUTPUT_SCHEMA, OutputSchemaError, Verdict, cell, check_output,
                            differs_from_record, exit_code, record_differences)
from kcheck.spec import SHIPPED  # noqa: F401  (the shipped specs load)
from kcheck.layout import initial_words
from kcheck.trace import FORMAT
from kcheck.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent


def run_json(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr().out
    return code, json.loads(out) if not "--json-lines" in args else [json.loads(x) for x in out.splitlines()]


def test_the_output_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(json.loads(OUTPUT_SCHEMA.read_text()))


@pytest.mark.parametrize("args, kind", [
    (["check", "two_phase", "--json"], "run"),
    (["check", "two_phase", "--variant", "commit-without-prepares", "--json"], "run"),
    (["check", "two_phase", "--all-variants", "--json"], "variants_or_specs"),
    (["check", "two_phase", "--max-depth", "3", "--json"], "run"),
    (["list", "--json"], "list"),
])
def test_every_document_follows_the_schema(capsys, args, kind):
    code, doc = run_json(capsys, *args)
    assert code in (OK, VIOLATED, BOUNDED)
    check_output(doc, kind)


def test_json_lines_follow_the_schema_line_by_line(capsys):
    code, docs = run_json(capsys, "check", "two_phase", "--all-variants", "--json-lines")
    assert code == OK and len(docs) == 2
    for d in docs:
        check_output(d, "run_with_record")


def test_a_violation_carries_its_trace_as_a_trace_file(capsys):
    code, doc = run_json(capsys, "check", "two_phase", "--variant", "commit-without-prepares", "--json")
    assert code == VIOLATED
    bad = {p: v for p, v in doc["properties"].items() if v["status"] == "violated"}
    assert bad and all(v["trace"]["kcheck_trace"] == FORMAT and v["trace_length"] == len(v["trace"]["steps"])
                       for v in bad.values())


def test_replay_document(capsys, tmp_path):
    assert main(["check", "two_phase", "--variant", "commit-without-prepares", "--save", "--out",
                 str(tmp_path)]) == VIOLATED
    capsys.readouterr()
    saved = sorted(tmp_path.rglob("*.json"))[0]
    code, doc = run_json(capsys, "replay", saved, "--json")
    assert code == OK and doc["reproduces"] is True
    check_output(doc, "replay")


@pytest.mark.z3
@pytest.mark.slow
def test_bmc_and_prove_documents(capsys):
    code, doc = run_json(capsys, "bmc", "two_phase", "--variant", "commit-without-prepares",
                         "--depth", "6", "--json")
    assert code == VIOLATED and doc["engine"] == "z3-bmc"
    check_output(doc, "run")
    code, doc = run_json(capsys, "prove", "two_phase", "--property", "consistent", "--json")
    check_output(doc, "run")
    assert code == OK and doc["properties"]["consistent"]["status"] == "proved"
    code, doc = run_json(capsys, "compare", "consumer_group", "--rule", "offset-commit", "--variants",
                         "kip1251", "strict", "--json")
    check_output(doc, "run")
    assert doc["engine"] == "z3-compare" and len(doc["properties"]) == 3


@pytest.mark.z3
def test_prove_json_carries_the_not_inductive_hint_the_terminal_prints(capsys):
    """Issue 37: `prove --json` gives the hint printed under NOT INDUCTIVE (the fields that make
    the counterexample to induction unreachable, the candidate lemmas), null for a proof."""
    code, doc = run_json(capsys, "prove", "two_phase", "--property", "consistent", "--no-lemmas",
                         "--k", "1", "--bmc-depth", "0", "--json")
    check_output(doc, "run")
    res = doc["properties"]["consistent"]
    assert code == BOUNDED and res["status"] == "not-inductive"
    hint = res["hint"]
    assert hint["exhaustive"] and hint["reachable"] == 288 and hint["why_not_searched"] is None
    assert hint["distance"] >= 1 and hint["nearest"] >= 1 and hint["differing"] and hint["candidates"]
    for name, d in hint["differing"].items():
        assert 1 <= d["in"] <= hint["nearest"] and d["here"] not in d["reachable"], name
    for c in hint["candidates"]:
        assert c["why_not_assumed"] == ("a lemma, left out by --no-lemmas" if c["lemma"] else
                                        "declare it lemma=True to assume it")
    code, doc = run_json(capsys, "prove", "two_phase", "--property", "consistent", "--json")
    assert doc["properties"]["consistent"]["status"] == "proved"
    assert doc["properties"]["consistent"]["hint"] is None


@pytest.mark.z3
def test_the_json_hint_and_the_printed_one_say_the_same():
    """One proof's hint, as prove's JSON gives it and as the terminal prints it."""
    from rich.console import Console
    from kcheck.symbolic import induction_hint, prove
    from kcheck.symbolic_cli import _print_hint, prove_run
    model = load_spec("two_phase").instantiate("lamport", {"N": 3})
    r = prove(model, "consistent", k_max=1, use_lemmas=False, bmc_depth=0)
    h = induction_hint(model, r)
    doc = prove_run(model, [r], {}, {"consistent": h}).to_json()["properties"]["consistent"]["hint"]
    console = Console(record=True, width=300)
    _print_hint(console, r, h)
    out = console.export_text()
    assert f"(of {doc['reachable']:,}, every one) differ from it in {doc['distance']} field(s)" in out
    for name, d in doc["differing"].items():
        where = "every one of them" if d["in"] == doc["nearest"] else f"{d['in']} of them"
        assert f"  {name}: {d['here']} here; {' or '.join(map(str, d['reachable']))} in {where}" in out
    for c in doc["candidates"]:
        assert f"  {c['invariant']} ({c['why_not_assumed']})" in out


@pytest.mark.z3
def test_prove_and_compare_return_run_results():
    from kcheck.symbolic import compare, prove
    from kcheck.verdict import RunResult
    spec = load_spec("two_phase")
    pr = prove(spec.instantiate("commit-without-prepares", {}), "consistent", k_max=1, bmc_depth=4)
    assert isinstance(pr, RunResult) and pr.engine == "z3-k-induction"
    assert pr.verdicts == {"consistent": Verdict.VIOLATED} and len(pr.found["consistent"].steps) == 3
    # the record says consistent is violated there: a proof of it would be a difference
    assert differs_from_record(spec, "commit-without-prepares", "consistent", "proved")
    cti = prove(spec.instantiate("lamport", {}), "consistent", k_max=1, use_lemmas=False, bmc_depth=0)
    assert cti.verdicts == {"consistent": Verdict.NOT_INDUCTIVE} and cti.found == {}
    assert cti.counterexample.initial is not None     # its first state is concrete and packs
    assert cti.report({"consistent": cti.counterexample.trace}).properties["consistent"].trace


def test_a_document_the_schema_does_not_describe_is_refused():
    good = {"file": "t.json", "reproduces": True, "message": "ok", "failed_step": None, "steps": 3}
    check_output(good, "replay")
    with pytest.raises(OutputSchemaError, match="reproduce"):
        check_output({**good, "reproduce": True}, "replay")           # an unknown key
    with pytest.raises(OutputSchemaError, match="steps"):
        check_output({**good, "steps": "3"}, "replay")                # a wrong type
    run = {"spec": "s", "variant": None, "parameters": {}, "engine": "bfs", "elapsed_s": 0.1,
           "properties": {"p": {"status": "violated", "kind": "invariant", "trace_length": None,
                                "loop_index": None, "trace": None}}}
    with pytest.raises(OutputSchemaError):
        check_output(run, "run")       # bfs statistics missing, and a violation without a length


# ---------------------------------------------------------------------------------------------
# The result model

def test_a_verdict_is_its_string():
    assert Verdict("violated") is Verdict.VIOLATED and Verdict.VIOLATED == "violated"
    assert json.dumps({"status": Verdict.NOT_INDUCTIVE}) == '{"status": "not-inductive"}'
    assert Verdict.HOLDS.decided and not Verdict.BOUNDED.decided and not Verdict.UNKNOWN.decided


def test_one_cell_for_every_matrix():
    assert cell("violated", 1) == "VIOLATED (1 step)"
    assert cell("violated", 4, lasso=True) == "VIOLATED (lasso, 4 steps)"
    assert cell("bounded") == "no violation (bounded)"
    assert cell("bounded", bounded="no violation up to depth 5") == "no violation up to depth 5"
    assert cell("holds") == "holds" and cell("proved") == "PROVED"
    with pytest.raises(ValueError):
        cell("typo")


def test_one_comparison_with_the_record():
    spec = load_spec("two_phase")
    # commit-without-prepares records 'consistent' as violated
    assert "consistent" in spec.variants["commit-without-prepares"].expected_violations
    assert differs_from_record(spec, "commit-without-prepares", "consistent", "violated") is None
    assert "record says it is violated" in differs_from_record(spec, "commit-without-prepares",
                                                               "consistent", "holds")
    assert "within the bounds" in differs_from_record(spec, "commit-without-prepares", "consistent",
                                                      "bounded")
    assert "regression" in differs_from_record(spec, "lamport", "consistent", "violated")
    assert differs_from_record(spec, "lamport", "consistent", "bounded") is None
    assert len(record_differences(spec, "lamport", {"consistent": "violated",
                                                    "commit-sent-by-tm": "holds"})) == 1


def test_exit_codes_of_a_run():
    assert exit_code({"p": "holds"}, True) == OK
    assert exit_code({"p": "holds", "q": "violated"}, True) == VIOLATED
    assert exit_code({"p": "bounded"}, True) == BOUNDED
    assert exit_code({"p": "holds"}, False) == BOUNDED
    assert exit_code({"p": "violated"}, False, "terminated") == 143
    assert exit_code({"p": "holds"}, False, "interrupted") == 130


# ---------------------------------------------------------------------------------------------
# The thin command line

@pytest.mark.parametrize("args, needle", [
    (["--engine", "bfs", "--spark"], "--spark is for a Spark engine"),
    (["--engine", "spark-ownership", "--partition", "slices"], "contradicts --engine"),
    (["--engine", "nope"], "invalid choice"),
    (["--slices", "2"], "--slices needs --spark"),
    (["--partition", "ownership"], "--partition needs --spark"),
])
def test_engine_choices_that_cannot_mean_one_engine_are_refused(capsys, args, needle):
    code = main(["check", "two_phase", *args])
    err = capsys.readouterr().err
    assert code == BAD_INPUT and needle in err and len(err.strip().splitlines()) == 1


def test_engine_bfs_is_the_default(capsys):
    code, a = run_json(capsys, "check", "two_phase", "--engine", "bfs", "--json")
    code2, b = run_json(capsys, "check", "two_phase", "--json")
    assert code == code2 == OK and a["engine"] == b["engine"] == "bfs"
    assert a["distinct_states"] == b["distinct_states"] == 288


COMMAND_MODULES = ["cli", "graph_cli", "symbolic_cli", "spark_cli", "bugs_cli", "conform_cli",
                   "report", "walk", "explorer", "scaffold", "options", "verdict", "ci_outputs",
                   "render", "trace", "graph"]


CHECKER_MODULES = sorted(str(p.relative_to(ROOT / "checker")) for p in (ROOT / "checker").rglob("*.py"))


@pytest.mark.parametrize("name", CHECKER_MODULES)
def test_checker_modules_import_no_private_names(name):
    # every module of checker/, engines and adapters included: a private name stays in its module
    # (the form `module._name` is tests/test_architecture.py's)
    tree = ast.parse((ROOT / "checker" / name).read_text())
    private = [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module and n.module.startswith("kcheck") for a in n.names
               if a.name.startswith("_") and a.name != "__version__"]
    assert not private, f"checker/{name} imports private names: {private}"


def test_command_modules_do_not_import_the_command_line():
    # cli.py assembles the commands; a command module importing it back would be a cycle
    for name in COMMAND_MODULES:
        if name == "cli":
            continue
        tree = ast.parse((ROOT / "checker" / f"{name}.py").read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "kcheck.cli" not in mods, f"checker/{name}.py imports kcheck.cli"


def test_shared_options_are_defined_once():
    # --variant, --json, --save, --property: only in checker/options.py's parent parsers (sweep's
    # --param takes ranges and conform's --variant/--out mean other things: options of their own)
    for name in COMMAND_MODULES:
        if name in ("options", "conform_cli"):
            continue
        text = (ROOT / "checker" / f"{name}.py").read_text()
        for opt in ('"--variant"', '"--json"', '"--save"', '"--property"', '"--no-symmetry"'):
            assert f"add_argument({opt}" not in text, f"checker/{name}.py defines {opt}"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("args, engine", [
    (["--engine", "spark-slices", "--spark", "local[2,2]"], "spark-slices"),
    (["--spark", "local[2,2]", "--partition", "ownership"], "spark-ownership"),   # the alias
])
def test_the_spark_engines_answer_as_bfs(capsys, args, engine):
    from kcheck import spark
    try:
        code, doc = run_json(capsys, "check", "two_phase", "--variant", "commit-without-prepares",
                             *args, "--json")
        code_bfs, bfs = run_json(capsys, "check", "two_phase", "--variant", "commit-without-prepares",
                                 "--json")
    finally:
        spark.stop_session()
    assert code == code_bfs == VIOLATED and doc["engine"] == engine and bfs["engine"] == "bfs"
    check_output(doc, "run")
    assert doc["distinct_states"] == bfs["distinct_states"]
    assert {p: (v["status"], v["trace_length"]) for p, v in doc["properties"].items()} == \
        {p: (v["status"], v["trace_length"]) for p, v in bfs["properties"].items()}


# ---------------------------------------------------------------------------------------------
# conform and walk documents, and one counterexample type across engines

def test_conform_document_follows_the_schema():
    """`conform --json` without a broker: the document built from the driver's outcomes."""
    from kcheck.conform import driver
    from kcheck.conform_cli import conform_document
    spec = load_spec("consumer_group")
    default = spec.default_variant
    other = next(v for v in spec.variants if v != default)
    outcomes = [driver.Outcome("tests/scenarios/a.json", default, 3, driver.CONFORMS,
                               matches=[default], seconds=1.5),
                driver.Outcome("walk seed=1", default, 4, driver.DIVERGES, step=2,
                               detail="spec said NONE, Kafka said FENCED_MEMBER_EPOCH",
                               matches=[other], wire_log="w.txt"),
                driver.Outcome("b.json", default, 2, driver.NOT_DRIVABLE, step=1, detail="no adapter")]
    doc = conform_document(spec, outcomes, "4.3.1", which_variant=True)
    check_output(doc, "conform")
    assert [t["outcome"] for t in doc["traces"]] == ["conforms", "diverges", "not drivable"]
    row = next(r for r in doc["variants"] if r["variant"] == other)
    assert (row["siding_with_default"], row["siding_with_change"]) == (1, 1)
    with pytest.raises(OutputSchemaError, match="outcome"):
        check_output({**doc, "traces": [{**doc["traces"][0], "outcome": "conform"}]}, "conform")


def test_walk_prints_the_trace_it_saves(capsys, tmp_path):
    out = tmp_path / "walk.json"
    code, doc = run_json(capsys, "walk", "two_phase", "--steps", "4", "--seed", "3", "-o", out, "--json")
    assert code == OK and doc == json.loads(out.read_text())
    check_output(doc, "walk")
    assert len(doc["steps"]) == 4 and doc.get("property") is None   # a walk breaks nothing
    code, again = run_json(capsys, "walk", "two_phase", "--steps", "4", "--seed", "3", "--json")
    assert again == doc                       # seeded: the same walk


def test_a_lasso_is_the_one_counterexample_type():
    from kcheck.graph import build_graph, check_progress
    from kcheck.verdict import Counterexample
    spec = load_spec(str(ROOT / "tests" / "specs" / "clients.py"))
    model = spec.instantiate(None, {})
    r = check_progress(build_graph(model), spec.progress["served-unfair"])
    lasso = r.lasso("served-unfair")
    assert r.status("served-unfair") == "violated" and type(lasso) is Counterexample
    assert (lasso.property, lasso.kind, len(lasso.steps), lasso.loop_index,
            lasso.trigger_index) == ("served-unfair", "lasso", 1, 1, 1)
    assert lasso.is_lasso and lasso.initial in [tuple(w) for w in initial_words(model)]


@pytest.mark.z3
def test_a_solver_counterexample_is_the_one_counterexample_type():
    from kcheck.bfs import search
    from kcheck.symbolic import SolverPath, bmc
    from kcheck.verdict import Counterexample
    model = load_spec("two_phase").instantiate("commit-without-prepares", {})
    cx = bmc(model, ["consistent"], depth=6).found["consistent"]
    found = search(model, ["consistent"]).found["consistent"]
    assert type(cx) is Counterexample and isinstance(cx.path, SolverPath)
    assert cx.steps == cx.path.steps and len(cx.steps) == len(found.steps) == len(cx.trace.steps)
    assert cx.initial in [tuple(w) for w in initial_words(model)] and cx.note is None


def test_graph_export_follows_the_schema(capsys, tmp_path):
    code, doc = run_json(capsys, "graph", "two_phase", "--format", "json")
    assert code == OK
    check_output(doc, "graph")
    assert doc["states"] == len(doc["nodes"]) == 288 and doc["edges"] == len(doc["links"]) == 886
    assert sum(n["initial"] for n in doc["nodes"]) == 1
    out = tmp_path / "g.json"
    assert main(["graph", "two_phase", "--format", "json", "-o", str(out)]) == OK
    assert json.loads(out.read_text()) == doc           # the file and stdout are one document


def test_a_search_returns_a_run_result():
    from kcheck.bfs import search
    from kcheck.verdict import RunResult
    model = load_spec("two_phase").instantiate("commit-without-prepares", {})
    r = search(model)
    assert isinstance(r, RunResult) and r.engine == "bfs" and r.stop_reason is None
    assert r.statistics["distinct_states"] == r.distinct_states == 623
    assert {p for p, v in r.verdicts.items() if v is Verdict.VIOLATED} == {"consistent", "commit-after-all-prepared"}
    cut = search(model, max_depth=2)
    assert cut.stop_reason == "max-depth" and cut.statistics["exhaustive"] is False
    assert cut.verdicts["consistent"] is Verdict.BOUNDED and cut.report({}).properties["consistent"].reason
    # the report is what check --json prints
    assert r.report({}).to_json()["distinct_states"] == 623


@pytest.mark.z3
def test_bmc_returns_a_run_result():
    from kcheck.symbolic import bmc
    from kcheck.verdict import RunResult
    model = load_spec("two_phase").instantiate("commit-without-prepares", {})
    r = bmc(model, depth=4)
    assert isinstance(r, RunResult) and r.engine == "z3-bmc" and r.stop_reason == "max-depth"
    assert r.statistics["requested_depth"] == 4 and r.statistics["search_bounds"] == "lifted"
    assert r.verdicts["consistent"] is Verdict.VIOLATED and r.verdicts["deadlock"] is Verdict.BOUNDED
    both = bmc(model, ["consistent"], depth=6)
    assert both.stop_reason == "all-violated"


def test_every_option_of_every_command_has_help():
    """`kcheck CMD --help` explains each option (most of --variant, --param, --property, --json
    had none)."""
    import argparse
    from kcheck.cli import build_parser
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    silent = [f"{name} {a.option_strings[0] if a.option_strings else a.dest}"
              for name, sub in commands.choices.items() for a in sub._actions
              if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert silent == []
