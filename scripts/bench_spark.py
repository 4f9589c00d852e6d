"""Figures for docs/spark.md: duplication between slices, Spark's overhead on a small spec, and
the speed-up of --spark local[2] over one process on a sweep and on a spec with more than a
million distinct states, for both partitions (slices; ownership, checker/spark_owner.py), and
Spark's cost per stage and per ownership level. Run: .venv/bin/python scripts/bench_spark.py
[--quick] [--only ownership|slices|overhead]

Each run is timed once, after a warm-up run of the same kind (Python workers started, models
compiled); on a machine shared with other work the figures move by tens of per cent."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checker import bfs, spark, spark_owner  # noqa: E402
from checker.loader import load_spec  # noqa: E402

MASTER = "local[2]"


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller instances (N=7 instead of 8)")
    ap.add_argument("--only", choices=["slices", "ownership", "overhead"])
    args = ap.parse_args()
    big = 7 if args.quick else 8
    two_phase = load_spec("two_phase")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    _, startup = timed(lambda: spark.session(MASTER))
    print(f"Spark start ({MASTER}): {startup:.1f} s (once a process)\n")

    if args.only in (None, "overhead"):
        overhead()
    if args.only in (None, "ownership"):
        ownership(two_phase, big, args.quick)
    if args.only == "ownership" or args.only == "overhead":
        spark.stop_session()
        return

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


def _ident(k):
    return k


def _drain(it):
    yield sum(1 for _ in it)


def overhead():
    """Spark's own cost, no search: a one-stage job, a job with a shuffle, and an ownership
    level's shape (expand, shuffle, zip with the persisted store, collect) on empty data."""
    sc = spark.session(MASTER)
    base = sc.parallelize([0, 1], 2).persist()
    base.count()

    def one():
        base.mapPartitions(_drain).collect()

    def two():
        base.map(lambda x: (x, x)).partitionBy(2, _ident).mapPartitions(_drain).collect()

    state = {"s": base}

    def level():
        s = state["s"]
        inc = s.map(lambda x: (x, x)).partitionBy(2, _ident).mapPartitions(lambda it: [list(it)])
        n = s.zip(inc).map(lambda p: p[0]).persist()
        n.mapPartitions(_drain).collect()
        if s is not base:
            s.unpersist()
        state["s"] = n
    for name, fn in [("one-stage job", one), ("job with a shuffle (two stages)", two),
                     ("an empty ownership level", level)]:
        fn()
        ts = []
        for _ in range(10):
            _, t = timed(fn)
            ts.append(t)
        ts.sort()
        print(f"{name}: median {ts[5] * 1000:.0f} ms (min {ts[0] * 1000:.0f}, max {ts[-1] * 1000:.0f})")
    print()


def ownership(two_phase, big, quick):
    """One process, slices and ownership side by side."""
    print("| run | states | one process | slices (2) | ownership (2 owners) | ownership speed-up "
          "| levels on Spark | s a level | exchanged (to the other owner) |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(6, 0), (6, spark_owner.PREFIX_STATES), (big, spark_owner.PREFIX_STATES), (big, 0)]
    for n, prefix in runs:
        model = two_phase.instantiate("lamport", {"N": n})
        spark_owner.check(model, master=MASTER, owners=2, max_depth=2, prefix_states=0)   # warm-up
        single, t1 = timed(lambda: bfs.search(model))
        sl, t2 = timed(lambda: spark.check(model, master=MASTER, slices=2))
        own, t3 = timed(lambda: spark_owner.check(model, master=MASTER, owners=2,
                                                  prefix_states=prefix))
        assert sl.distinct_states == own.distinct_states == single.distinct_states
        d = own.distribution
        print(f"| two_phase N={n}, driver prefix below {prefix:,} states | "
              f"{single.distinct_states:,} | {t1:.2f} s | {t2:.2f} s | {t3:.2f} s | {t1 / t3:.2f}x | "
              f"{d.spark_levels} (levels 0-{d.prefix_depth} in the driver) | {d.per_level_s:.2f} | "
              f"{d.sent:,} ({d.sent_away:,}) |")
    configs = [{"N": n} for n in (5, 6, 6, 6, 6, 7)] if quick else \
        [{"N": 7}, {"N": 7}, {"N": 7}, {"N": 7}, {"N": 6}, {"N": 6}]
    t_one = t_sweep = t_own = 0.0
    for v in ["lamport", "commit-without-prepares"]:
        a, t1 = timed(lambda: spark.sweep(two_phase, v, configs, deadlock=False))
        b, t2 = timed(lambda: spark.sweep(two_phase, v, configs, deadlock=False, master=MASTER))
        t = time.perf_counter()
        c = [spark_owner.check(two_phase.instantiate(v, cfg), deadlock=False, master=MASTER,
                               owners=2) for cfg in configs]
        t3 = time.perf_counter() - t
        assert [r["distinct"] for r in a] == [r["distinct"] for r in b] == [r.distinct_states for r in c]
        t_one, t_sweep, t_own = t_one + t1, t_sweep + t2, t_own + t3
    print(f"\nsweep of two_phase over {[c['N'] for c in configs]} x 2 variants: one process "
          f"{t_one:.2f} s; a Spark task per configuration {t_sweep:.2f} s ({t_one / t_sweep:.2f}x); "
          f"each configuration by ownership, one after another, {t_own:.2f} s ({t_one / t_own:.2f}x)\n")


if __name__ == "__main__":
    main()
