"""`kcheck report SPEC` against what it shows: `kcheck check SPEC --all-variants` plus `kcheck
progress SPEC --all-variants`. CPU seconds and peak memory of each, measured on this machine, and
the report's ratio to the sum (issue 37's target: the report within 1.5x of check + progress).

Each command runs in a fresh process (scripts/bench_progress.py's ``measure``: the kernel's
accounting through os.wait4, so a loaded machine changes the wall-clock time but little the CPU
figures); each runs ``--runs`` times and the least of each figure is kept. The report is the
command a user runs: it also replays the spec's saved counterexamples, which check and progress
do not.

    .venv/bin/python scripts/bench_report.py classic_group consumer_group
    .venv/bin/python scripts/bench_report.py --kcheck /other/checkout/.venv/bin/kcheck classic_group
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_progress import measure  # noqa: E402  (the one measuring function, shared)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", metavar="SPEC", help="shipped spec names")
    ap.add_argument("--kcheck", default=str(Path(sys.executable).parent / "kcheck"),
                    help="the kcheck to measure (default: this environment's)")
    ap.add_argument("--runs", type=int, default=1, help="runs per command; the least figures are kept")
    ap.add_argument("--only", choices=("check", "progress", "report"), action="append",
                    help="run only these commands (repeatable): a second kcheck's report against the "
                         "first's check and progress")
    args = ap.parse_args(argv)
    if not Path(args.kcheck).exists():
        print(f"bench_report: no kcheck at {args.kcheck}", file=sys.stderr)
        return 2
    print(f"{'spec':<16} {'command':<10} {'exit':>4} {'CPU s':>8} {'wall s':>8} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.specs:
            commands = {"check": ["check", spec, "--all-variants"],
                        "progress": ["progress", spec, "--all-variants"],
                        "report": ["report", spec, "-o", str(Path(tmp) / "pages")]}
            best = {}
            for label, cmd in commands.items():
                if args.only and label not in args.only:
                    continue
                runs = [measure(args.kcheck, cmd) for _ in range(args.runs)]
                best[label] = {k: min(r[k] for r in runs) for k in ("wall_s", "cpu_s", "peak_mb")}
                best[label]["exit"] = runs[-1]["exit"]
                r = best[label]
                print(f"{spec:<16} {label:<10} {r['exit']:>4} {r['cpu_s']:>8.1f} {r['wall_s']:>8.1f} "
                      f"{r['peak_mb']:>8.0f}", flush=True)
            if len(best) < 3:
                continue
            both = best["check"]["cpu_s"] + best["progress"]["cpu_s"]
            print(f"{spec:<16} report / (check + progress): CPU {best['report']['cpu_s'] / both:.2f}x "
                  f"(target: at most 1.5x); peak memory {best['report']['peak_mb']:.0f} MB against "
                  f"{max(best['check']['peak_mb'], best['progress']['peak_mb']):.0f} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
