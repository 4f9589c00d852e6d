"""The README cannot drift from the code: its two commands are CI's, its example spec runs, and
every verdict matrix it shows agrees with the specs' records (which the main job and the spec
tests check against real searches)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kcheck.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_exactly_two_commands_and_ci_runs_the_second():
    first = re.search(r"```sh\n(.*?)```", README, re.S)
    assert README.index(first.group(0)) < README.index("## ")
    commands = [line for line in first.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "kcheck check all" in commands[0]
    assert "pytest" in commands[1]
    assert commands[1] in (ROOT / ".ci/run").read_text()


def test_the_example_spec_runs(tmp_path):
    code = re.search(r"```python\n(\"\"\"A counter.*?)```", README, re.S).group(1)
    path = tmp_path / "cas_counter.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(path), "--all-variants"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "VIOLATED" in p.stdout and "holds" in p.stdout


def _matrices():
    for m in re.finditer(r"<!-- kcheck-output: check (\w+) --all-variants -->\n```text\n(.*?)```",
                         README, re.S):
        yield m.group(1), m.group(2)


def _rows(block: str):
    header, rows = None, []
    for line in block.splitlines():
        if line.startswith("┃"):
            header = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│") and header:
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[0]:
                rows.append(cells)
            else:   # a wrapped cell continues the row above
                rows[-1] = [a + (" " + b if b else "") for a, b in zip(rows[-1], cells)]
    return header, rows


@pytest.mark.parametrize("name,block", list(_matrices()), ids=lambda x: x if isinstance(x, str) and "\n" not in x else "")
def test_readme_matrix_agrees_with_the_record(name, block):
    spec = load_spec(name)
    header, rows = _rows(block)
    assert header and rows, "the README block holds no matrix: run scripts/readme.py"
    props = [h for h in header[1:-1] if not h.startswith("lemmas")]
    assert {r[0] for r in rows} == set(spec.variants)
    for row in rows:
        record = spec.variants[row[0]].expected_violations
        for prop, cell in zip(props, row[1:1 + len(props)]):
            # the record lists a violated property, and a scenario (sometimes) known not to happen
            departs = cell.startswith("VIOLATED") or cell.startswith("NOT REACHED")
            assert departs == (prop in record), (row[0], prop, cell)
            assert "≠ record" not in cell
        assert not any("≠ record" in c for c in row)


def test_a_failed_run_never_replaces_a_readme_block(tmp_path):
    # scripts/readme.py writes a block from a command's output: a script that fails part-way
    # (a broker that would not start in the conformance table) must stop it, not truncate a table
    import importlib.util
    spec = importlib.util.spec_from_file_location("readme_script", ROOT / "scripts" / "readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    failing = tmp_path / "half.py"
    failing.write_text("print('| a table cut short |')\nraise SystemExit('the broker did not start')\n")
    with pytest.raises(SystemExit) as e:
        mod.run(None, str(failing))
    assert "failed (exit 1): the broker did not start; no file changed" in str(e.value)
    fine = tmp_path / "fine.py"
    fine.write_text("print('| a whole table |')\n")
    assert mod.run(None, str(fine)) == "| a whole table |\n"


def test_the_readmes_trace_example_is_in_the_current_format():
    """The README and the reference it links to show the format kcheck writes (issue 37: it
    showed version 1)."""
    import json

    from kcheck.trace import FORMAT
    text = README + (ROOT / "docs" / "reference.md").read_text()
    examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)
                if '"kcheck_trace"' in block]
    assert examples and all(doc["kcheck_trace"] == FORMAT for doc in examples)


def test_the_readme_opens_with_a_first_run_and_links_that_exist():
    """A newcomer reads what the first run prints, its warnings included, then where to go next
    (issue 37); every local file the README links to exists."""
    first_run = README.index("## Your first run")
    assert README.index("```sh") < first_run < README.index("## Where to go next") \
        < README.index("## What kcheck is for")
    opening = README[first_run:README.index("## What kcheck is for")]
    assert "verdicts compared with the record" in opening and "--explain" in opening
    assert "docs/warnings.md" in opening
    for target in re.findall(r"\]\(((?:docs|spec|tests|checker)/[^)#]+)\)", README):
        assert (ROOT / target).exists(), target
