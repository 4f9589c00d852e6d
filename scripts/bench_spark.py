"""Figures for docs/spark.md: duplication between slices, Spark's overhead on a small spec, and
the speed-up of --spark local[2] over one process on a sweep and on a spec with more than a
million distinct states. Run: .venv/bin/python scripts/bench_spark.py [--quick]

Each run is timed once, after a warm-up run of the same kind (Python workers started, models
compiled); on a machine shared with other work the figures move by tens of per cent."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checker import bfs, spark  # noqa: E402
from checker.loader import load_spec  # noqa: E402

MASTER = "local[2]"


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller instances (N=7 instead of 8)")
    args = ap.parse_args()
    big = 7 if args.quick else 8
    two_phase = load_spec("two_phase")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    _, startup = timed(lambda: spark.session(MASTER))
    print(f"Spark start ({MASTER}): {startup:.1f} s (once a process)\n")

    print("| run | states | one process | --spark local[2] | speed-up | slices | duplication | "
          "each slice reaches |")
    print("|---|---|---|---|---|---|---|---|")
    for n, slices in [(3, 2), (6, 2), (6, 4), (6, 8), (big, 2), (big, 4)]:
        model = two_phase.instantiate("lamport", {"N": n})
        spark.check(model, master=MASTER, slices=slices, max_depth=3)      # warm-up
        single, t1 = timed(lambda: bfs.search(model))
        dist, t2 = timed(lambda: spark.check(model, master=MASTER, slices=slices))
        assert dist.distinct_states == single.distinct_states
        d = dist.distribution
        reach = d.reach_pct
        print(f"| two_phase N={n} | {single.distinct_states:,} | {t1:.2f} s | {t2:.2f} s | "
              f"{t1 / t2:.2f}x | {d.slices} (depth-{d.frontier_depth} frontier) | "
              f"{d.duplication_pct:.0f} % | {min(reach):.0f}-{max(reach):.0f} % |")

    # a sweep: independent configurations, one Spark task each
    configs = [{"N": n} for n in (5, 6, 6, 6, 6, 7)] if args.quick else \
        [{"N": 7}, {"N": 7}, {"N": 7}, {"N": 7}, {"N": 6}, {"N": 6}]
    variants = ["lamport", "commit-without-prepares"]
    spark.sweep(two_phase, "lamport", [{"N": 3}], master=MASTER)       # warm-up
    t_local = t_spark = 0.0
    for v in variants:
        a, t1 = timed(lambda: spark.sweep(two_phase, v, configs, deadlock=False))
        b, t2 = timed(lambda: spark.sweep(two_phase, v, configs, deadlock=False, master=MASTER))
        assert [r["distinct"] for r in a] == [r["distinct"] for r in b]
        t_local, t_spark = t_local + t1, t_spark + t2
    total = sum(r["distinct"] for r in a)
    print(f"\nsweep of two_phase over {[c['N'] for c in configs]} x {len(variants)} variants "
          f"({len(configs) * len(variants)} configurations): one process {t_local:.2f} s, "
          f"--spark local[2] {t_spark:.2f} s, speed-up {t_local / t_spark:.2f}x")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    spark.stop_session()


if __name__ == "__main__":
    main()
