"""Writes docs/hostile-input.md: every case of tests/test_hostile_input.py (its test ids: each
command's options with each hostile value, each flag alone), run here as the test runs it, with
the exit code each gave. Run: .venv/bin/python scripts/hostile_table.py"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_hostile_input as t  # noqa: E402
from kcheck.cli import main  # noqa: E402


def run_case(command, option, label, where) -> tuple[int, str]:
    argv = t._argv(command, option, label, where)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue().strip().splitlines()[0] if err.getvalue().strip() else ""


def main_() -> None:
    with tempfile.TemporaryDirectory() as base:
        readonly = Path(base) / "readonly"
        readonly.mkdir()
        readonly.chmod(0o555)
        # root writes through a 555 folder: a read-only tmpfs where it can mount one, as the test
        ro = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)],
                            capture_output=True).returncode == 0
        where = {"readonly": str(readonly), "full": "/dev/full"}
        rows: dict[tuple[str, str], dict[str, int]] = {}
        total = broken = 0
        for case in t._cases():
            command, option, label = case.values
            with tempfile.TemporaryDirectory() as tmp:
                cwd = os.getcwd()
                os.chdir(tmp)
                try:
                    code, first = run_case(command, option, label, {**where, "tmp": tmp})
                finally:
                    os.chdir(cwd)
            total += 1
            bad = code not in t.DOCUMENTED or "Traceback" in first
            broken += bad
            rows.setdefault((command, option), {})[label or "(flag)"] = code
        if ro:
            subprocess.run(["umount", "-l", str(readonly)], capture_output=True)
        readonly.chmod(0o755)
    labels = ["(flag)"] + list(t.VALUES)
    lines = ["# Hostile input: every command, every option (generated)", "",
             "Made by `scripts/hostile_table.py` from the cases of `tests/test_hostile_input.py` "
             "(one test id per cell: `COMMAND OPTION=VALUE`, or `COMMAND FLAG`), each run here. "
             "The test asserts, for every cell: an exit code from the README's table, no "
             "traceback, a refusal (2) in one line, no child process left behind. A cell is the "
             "exit code the case gave (0 ran, 1 a violation found, 2 refused, 3 bounded, 5 an "
             "output could not be written). The full filesystem is a 64 KiB tmpfs in the test "
             "where root can mount one, /dev/full here.", "",
             f"{total} cases, {total - broken} clean, {broken} broken.", "",
             "Not swept: " + "; ".join(f"`{c}`: {why}" for c, why in t.NOT_SWEPT.items()) + ".", "",
             "| command | option | " + " | ".join(labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for (command, option), cells in rows.items():
        lines.append(f"| {command} | `{option}` | "
                     + " | ".join(str(cells.get(lb, "")) for lb in labels) + " |")
    (ROOT / "docs" / "hostile-input.md").write_text("\n".join(lines) + "\n")
    print(f"docs/hostile-input.md: {total} cases, {broken} broken")


if __name__ == "__main__":
    main_()
