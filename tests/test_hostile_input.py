"""Hostile input over every command and every option (issue 36), generated from the parser itself:
each option that takes a value gets each hostile value in turn (empty, 5000 digits, NaN, inf,
negative, unicode with a right-to-left mark, /dev/full, /dev/zero, a path in a read-only folder,
a path on a full filesystem), each flag is given alone, on a cheap run of the command. Every case
must end with an exit code from the README's table, no traceback, a one-line error when the input
is refused, and no child process left behind.

The cases are the test ids; docs/hostile-input.md is generated from them (scripts/hostile_table.py).
Two commands are not swept here, and the table says why: `explore` serves until it is stopped
(its requests are swept in test_explorer.py) and `conform` starts a Kafka broker (its inputs are
checked before any broker starts in test_conform_core.py).
"""
import argparse
import os
import subprocess
from pathlib import Path

import pytest

from kcheck.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
TOY = str(ROOT / "tests/specs/lost_update.py")
TRACE = str(ROOT / "counterexamples/two_phase/commit-without-prepares/consistent.json")
DOCUMENTED = {0, 1, 2, 3, 4, 5, 130, 143}
NOT_SWEPT = {"explore": "serves until stopped; its requests are swept in test_explorer.py",
             "conform": "starts a Kafka broker; its inputs are checked before any broker starts "
                        "in test_conform_core.py"}

# A cheap, valid run of each command: the hostile value replaces one option's value, or a flag is
# added. {tmp} is the case's own folder.
BASE = {
    "list": ["list"],
    "check": ["check", "two_phase", "--max-states", "2000"],
    "replay": ["replay", TRACE],
    "upgrade": ["upgrade", TRACE, "--check"],      # --check: the shipped trace is never written
    "graph": ["graph", "two_phase", "--max-nodes", "500", "-o", "{tmp}/g.dot"],
    "progress": ["progress", "two_phase", "--max-nodes", "5000"],
    "bmc": ["bmc", "two_phase", "--depth", "2"],
    "prove": ["prove", "two_phase", "--k", "1", "--timeout", "20"],
    "compare": ["compare", "two_phase", "--timeout", "20"],
    "sweep": ["sweep", "two_phase", "--param", "N=2"],
    "bugs": ["bugs", TOY],
    "report": ["report", "two_phase", "-o", "{tmp}/r.html", "--max-states", "2000", "--no-progress"],
    "new": ["new", "hostile_case", "--dir", "{tmp}/new"],
    "walk": ["walk", "two_phase", "--steps", "5"],
}
VALUES = {
    "empty": "",
    "5000-digits": "9" * 5000,
    "nan": "nan",
    "inf": "inf",
    "negative": "-1",
    "unicode": "é∞\u202eN",
    "dev-full": "/dev/full",
    "dev-zero": "/dev/zero",
    "read-only-folder": "{readonly}/x",
    "full-filesystem": "{full}/x",
}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    [sub] = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _cases():
    for command, parser in _subcommands().items():
        if command in NOT_SWEPT:
            continue
        assert command in BASE, f"a new command '{command}': give it a cheap run in BASE"
        for a in parser._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            name = a.option_strings[0] if a.option_strings else a.dest
            if a.nargs == 0:
                yield pytest.param(command, name, None, id=f"{command} {name}")
                continue
            for label in VALUES:
                yield pytest.param(command, name, label, id=f"{command} {name}={label}")


def _argv(command: str, option: str, label: str | None, where: dict) -> list[str]:
    base = [x.format(**where) for x in BASE[command]]
    if label is None:
        return base + [option]
    value = VALUES[label].format(**where)
    if not option.startswith("-"):
        # a positional: the first of the command's positionals is replaced (the spec, a file,
        # a name), another one is added
        positionals = [a.dest for a in _subcommands()[command]._actions
                       if not a.option_strings and not isinstance(a, argparse._HelpAction)]
        if positionals and positionals[0] == option and len(base) > 1:
            return [base[0], value] + base[2:]
        return base + [value]
    if option in base:
        i = base.index(option)
        return base[:i + 1] + [value] + base[i + 2:]
    return base + [option, value]


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for task in Path(f"/proc/{me}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").exists() else ""
        out |= {int(x) for x in text.split()}
    return out


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A read-only folder (a read-only tmpfs where root can mount one), and a full filesystem (a 64 KiB tmpfs filled up) where root can mount
    one, else a folder whose writes fail as a full disk's do (/dev/full is not a folder: the
    case then names a path under a file, which fails too)."""
    # a run killed before its teardown (pytest -x stops the workers) leaves its tmpfs mounted
    for line in Path("/proc/mounts").read_text().splitlines():
        where = line.split()[1]
        if "/pytest-of-" in where and "/hostile" in where and where.endswith(("/full", "/readonly")):
            subprocess.run(["umount", "-l", where], capture_output=True)
    base = tmp_path_factory.mktemp("hostile")
    readonly = base / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)      # enough for a user; root writes through it, so a read-only mount
    ro = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)],
                        capture_output=True).returncode == 0
    full = base / "full"
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                             capture_output=True).returncode == 0
    if mounted:
        try:
            with open(full / "filler", "wb") as f:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass      # ENOSPC: the filesystem is full, as wanted
    yield {"readonly": str(readonly), "full": str(full) if mounted else "/dev/full"}
    for where, was in ((full, mounted), (readonly, ro)):
        if was:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
    readonly.chmod(0o755)


@pytest.mark.parametrize("command,option,label", list(_cases()))
def test_hostile_input(command, option, label, places, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)        # a relative --out or -o lands here, not in the checkout
    where = {**places, "tmp": str(tmp_path)}
    argv = _argv(command, option, label, where)
    before = _children()
    code = main(argv)
    out, err = capsys.readouterr()
    shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in argv)
    assert code in DOCUMENTED, f"kcheck {shown}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in err and "Traceback" not in out, f"kcheck {shown}:\n{err[-3000:]}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kcheck: error: "), \
            f"kcheck {shown}: a refusal in more than one line:\n{err[-2000:]}"
    left = _children() - before
    assert not left, f"kcheck {shown} left child processes {sorted(left)}"
