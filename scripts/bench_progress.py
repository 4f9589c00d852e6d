"""`kcheck progress all` against `kcheck check all`: CPU seconds and peak memory of each, measured
on this machine, and their ratios (issue 32's target: progress within 2x of check's CPU time,
its peak memory within 2x of check's).

Each command runs in a fresh process of its own; its CPU time (user + system) and its peak
resident set come from the kernel's accounting of that process (os.wait4), so a loaded machine
changes the wall-clock time but little the CPU figures. Every command runs ``--runs`` times (2
by default) and the least of each figure is kept.

    .venv/bin/python scripts/bench_progress.py
    .venv/bin/python scripts/bench_progress.py --kcheck /other/checkout/.venv/bin/kcheck   # before
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (("check all", ["check", "all"]), ("progress all", ["progress", "all"]))


def measure(kcheck: str, argv: list[str]) -> dict:
    """One run of ``kcheck argv``: its exit code, wall and CPU seconds and peak memory (MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([kcheck, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": proc.returncode, "wall_s": time.perf_counter() - t0,
            "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kcheck", default=str(Path(sys.executable).parent / "kcheck"),
                    help="the kcheck to measure (default: this environment's)")
    ap.add_argument("--runs", type=int, default=2, help="runs per command; the least figures are kept")
    args = ap.parse_args(argv)
    if not Path(args.kcheck).exists():
        print(f"bench_progress: no kcheck at {args.kcheck}", file=sys.stderr)
        return 2
    best = {}
    for label, cmd in COMMANDS:
        runs = [measure(args.kcheck, cmd) for _ in range(args.runs)]
        best[label] = {k: min(r[k] for r in runs) for k in ("wall_s", "cpu_s", "peak_mb")}
        best[label]["exit"] = runs[-1]["exit"]
    print(f"{'command':<14} {'exit':>4} {'CPU s':>8} {'wall s':>8} {'peak MB':>8}")
    for label, r in best.items():
        print(f"{label:<14} {r['exit']:>4} {r['cpu_s']:>8.1f} {r['wall_s']:>8.1f} {r['peak_mb']:>8.0f}")
    c, p = best["check all"], best["progress all"]
    print(f"progress / check: CPU {p['cpu_s'] / c['cpu_s']:.2f}x, peak memory "
          f"{p['peak_mb'] / c['peak_mb']:.2f}x (target: at most 2x each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
