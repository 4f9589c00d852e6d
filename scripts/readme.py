"""Refresh the README's real-output blocks by running the commands they name.

A block is an HTML comment naming the command, then a fenced block that this script rewrites:

    <!-- kcheck-output: check two_phase --all-variants -->
    ```text
    ...
    ```

`<!-- bench-output -->` runs benchmarks/bench.py; `<!-- script-output: scripts/X.py [ARG...] -->` runs
that script with those arguments. Run: .venv/bin/python scripts/readme.py [--file PATH] [TEXT...] (only the
blocks whose command contains one of the TEXTs; --file: only that file's blocks, README.md and
spec/classic_group_notes.md by default)
(it takes a few minutes: it runs every command on this machine).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- (kcheck-output: (?P<cmd>[^>]*?)|script-output: (?P<script>[^>]*?)|bench-output) -->\n"
                   r"```text\n)(.*?)(```)", re.S)


def run(cmd: str | None, script: str | None = None) -> str:
    if script is not None:
        path, *args = script.split()      # a script's arguments follow its path
        argv = [sys.executable, str(ROOT / path), *args]
        shown = ""
    elif cmd is None:
        argv = [sys.executable, str(ROOT / "benchmarks/bench.py")]
        shown = ""
    else:
        argv = [str(ROOT / ".venv/bin/kcheck"), *cmd.split()]
        shown = f"$ kcheck {cmd}\n"
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    # a script exits 0; a kcheck command 0 (all as recorded) or 1 (the violation a block shows).
    # Anything else is a failed run, whose partial output must not replace a block
    if p.returncode not in ((0,) if cmd is None else (0, 1)):
        what = script or (f"kcheck {cmd}" if cmd else "benchmarks/bench.py")
        err = (p.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"readme.py: {what} failed (exit {p.returncode}): {err}; no file changed")
    out = "\n".join(line.rstrip() for line in p.stdout.rstrip().splitlines())
    return shown + out + "\n"


# the files whose blocks this script rewrites: the README, and the notes that quote state counts
FILES = ["README.md", "spec/classic_group_notes.md"]


def main() -> None:
    args = sys.argv[1:]
    files = FILES
    if args[:1] == ["--file"]:          # --file PATH: only that file's blocks
        files, args = [args[1]], args[2:]
    for name in files:
        refresh(ROOT / name, args)


def refresh(path: Path, only: list[str]) -> None:
    outputs: dict[str, str] = {}

    def wanted(m: re.Match) -> str | None:
        cmd, script = m.group("cmd"), m.group("script")
        name = cmd or script or "bench"
        return None if only and not any(o in name for o in only) else m.group(1)

    # run everything first, then re-read the README and substitute: a run takes many minutes and
    # the file may have been edited meanwhile
    for m in BLOCK.finditer(path.read_text()):
        key = wanted(m)
        if key is None or key in outputs:
            continue
        cmd, script = m.group("cmd"), m.group("script")
        print(f"running: {cmd or script or 'benchmarks/bench.py'}", file=sys.stderr)
        outputs[key] = run(cmd, script)

    def repl(m: re.Match) -> str:
        if m.group(1) not in outputs:
            return m.group(0)
        return m.group(1) + outputs[m.group(1)] + m.group(6)

    path.write_text(BLOCK.sub(repl, path.read_text()))


if __name__ == "__main__":
    main()
