"""Figures for docs/spark.md: duplication between slices, Spark's overhead on a small spec, and
the speed-up of --spark local[2] over one process on a sweep and on a spec with more than a
million distinct states, for both partitions (slices; ownership, checker/spark_owner.py), and
Spark's cost per stage and per ownership level; where an ownership level's time goes (each
phase, per level, both modes: ``--only profile``), and the whole command, Spark's start
included, against one process (``--only command``, two_phase N=10 by default; ``--spec
consumer_group:members=3,max_epoch=3`` another, ``--by-fingerprint`` adds ownership with every
state owned by its fingerprint, for comparison). Run:
.venv/bin/python scripts/bench_spark.py [--quick] [--only ownership|slices|overhead|profile|command]
[--n N ...] [--spec NAME[:K=V,...]] [--by-fingerprint]

Each run is timed once, after a warm-up run of the same kind (Python workers started, models
compiled); on a machine shared with other work the figures move by tens of per cent."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from kcheck import bfs, spark, spark_owner
from kcheck.loader import load_spec

MASTER = "local[2]"


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller instances (N=7 instead of 8)")
    ap.add_argument("--only", choices=["slices", "ownership", "overhead", "profile", "command",
                                       "owners"])
    ap.add_argument("--n", type=int, action="append",
                    help="two_phase sizes for --only profile (default 8 9) or command (default 10)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="--only command: runs of each command, back to back (default 3)")
    ap.add_argument("--spec", help="--only command: a spec and its parameters, "
                    "NAME[:K=V,...] (default two_phase:N=<each --n>)")
    ap.add_argument("--by-fingerprint", action="store_true",
                    help="--only command: also ownership with every state owned by its "
                    "fingerprint (owner_mask declined), as before state bits")
    ap.add_argument("--modes", default="barrier,levels",
                    help="ownership modes for --only profile (default barrier,levels)")
    args = ap.parse_args()
    big = 7 if args.quick else 8
    two_phase = load_spec("two_phase")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    if args.only == "owners":
        for spec in ([args.spec] if args.spec else ["consumer_group", "classic_group"]):
            owners(spec, args.repeat)
        spark.stop_session()
        return
    if args.only == "command":
        if args.spec:
            name, _, rest = args.spec.partition(":")
            command(name, [kv for kv in rest.split(",") if kv], args.repeat, args.by_fingerprint)
        for n in ([] if args.spec else args.n or [10]):
            command("two_phase", [f"N={n}"], args.repeat, args.by_fingerprint)
        return
    _, startup = timed(lambda: spark.session(MASTER))
    print(f"Spark start ({MASTER}): {startup:.1f} s (once a process)\n")

    if args.only == "profile":
        for n in args.n or [8, 9]:
            for mode in args.modes.split(","):
                profile(two_phase, n, mode)
        spark.stop_session()
        return
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
        assert [r.distinct_states for r in a] == [r.distinct_states for r in b]
        t_local, t_spark = t_local + t1, t_spark + t2
    total = sum(r.distinct_states for r in a)
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
        assert [r.distinct_states for r in a] == [r.distinct_states for r in b] == [r.distinct_states for r in c]
        t_one, t_sweep, t_own = t_one + t1, t_sweep + t2, t_own + t3
    print(f"\nsweep of two_phase over {[c['N'] for c in configs]} x 2 variants: one process "
          f"{t_one:.2f} s; a Spark task per configuration {t_sweep:.2f} s ({t_one / t_sweep:.2f}x); "
          f"each configuration by ownership, one after another, {t_own:.2f} s ({t_one / t_own:.2f}x)\n")



def profile(two_phase, n, mode):
    """Where an ownership run's time goes, level by level (the slowest owner's time in each
    phase), next to one process on the same model; counts and traces compared."""
    model = two_phase.instantiate("lamport", {"N": n})
    spark_owner.check(model, master=MASTER, owners=2, max_depth=2, prefix_states=0, mode=mode)
    c0 = time.process_time()
    single, t1 = timed(lambda: bfs.search(model))
    c1 = time.process_time() - c0
    load0 = os.getloadavg()[0]
    own, t2 = timed(lambda: spark_owner.check(model, master=MASTER, owners=2, mode=mode))
    assert own.distinct_states == single.distinct_states
    assert {p: (f.initial, f.steps) for p, f in own.found.items()} == \
        {p: (f.initial, f.steps) for p, f in single.found.items()}
    d = own.distribution
    cols = [k for k in d.profile[0] if k not in ("states", "level")] if d.profile else []
    print(f"\ntwo_phase N={n}, ownership ({mode} mode), 2 owners, {MASTER}: "
          f"{own.distinct_states:,} states (= one process, traces identical); "
          f"load average {load0:.1f}")
    print(f"one process {t1:.2f} s ({single.distinct_states / t1:,.0f} states/s); ownership "
          f"{t2:.2f} s = driver prefix {d.prefix_s:.2f} s (levels 0-{d.prefix_depth}; Spark "
          f"ready beside it: session {d.startup_s:.2f} s, workers warmed {d.warm_s:.2f} s; "
          f"the driver then waited {d.waited_s:.2f} s) + "
          + (f"job {d.job_s:.2f} s (owners ready after {d.ready_s:.2f} s, {d.spark_levels} "
             f"levels {d.spark_s:.2f} s, traces {d.walk_s:.2f} s)" if mode == "barrier" else
             f"{d.spark_levels} level jobs {d.spark_s:.2f} s, {d.lookup_jobs} lookup jobs")
          + f" + the rest {t2 - d.prefix_s - (d.job_s if mode == 'barrier' else d.spark_s):.2f} s")
    print("| level | new states | " + " | ".join(cols) + " | level (s) |")
    print("|---" * (len(cols) + 3) + "|")
    tot = {k: 0.0 for k in cols}
    for i, p in enumerate(d.profile):
        for k in cols:
            tot[k] += p.get(k, 0.0)
        print(f"| {d.prefix_depth + i + 1} | {p['states']:,} | "
              + " | ".join(f"{p.get(k, 0.0):.3f}" for k in cols) + f" | {p['level']:.3f} |")
    print(f"| all | {sum(p['states'] for p in d.profile):,} | "
          + " | ".join(f"{tot[k]:.2f}" for k in cols) + f" | {d.spark_s:.2f} |")
    busy = sum(d.owner_busy_s)
    spark_states = sum(p["states"] for p in d.profile)
    if busy:
        print(f"owners' work (expanding, exchanging, merging, checking; no waiting): "
              f"{', '.join(f'{b:.2f} s' for b in d.owner_busy_s)}; states per second per core "
              f"{spark_states / busy:,.0f} on the owners against {single.distinct_states / t1:,.0f} "
              f"for one process")
    if any(d.owner_cpu_s):
        print(f"owners' CPU time over the levels: {', '.join(f'{c:.2f} s' for c in d.owner_cpu_s)}: "
              f"{spark_states / sum(d.owner_cpu_s):,.0f} states per CPU second against "
              f"{single.distinct_states / c1:,.0f} for one process ({c1:.2f} s CPU): the rate "
              f"per core, whatever the load")
    fixed = [p.get("gather", 0.0) + max(0.0, p.get("wait", 0.0)) for p in d.profile]
    print(f"per level: {d.per_level_s:.3f} s on average; the smallest levels "
          f"({min(p['states'] for p in d.profile):,} states) took "
          f"{min(p['level'] for p in d.profile):.3f} s")


def owners(spec: str, repeat: int = 3):
    """The owners' own work, Spark's start left out: a spec at its defaults (``NAME`` or
    ``NAME:K=V,...``) in one process, then by two owners handed the search at the level a
    quarter of the way down (so that the owners, not the driver, build most levels), as
    threads of this process (the protocol without Spark) and as one barrier job on
    ``local[2]`` (a warmed session); wall time of each, best of ``repeat``, and whether the
    counts and traces are the single process's."""
    name, _, rest = spec.partition(":")
    params = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    model = load_spec(name).instantiate(None, {k: int(v) for k, v in params.items()})
    single, _ = timed(lambda: bfs.search(model))
    hand_over = max(1, single.depth // 4)
    spark_owner.check(model, master=MASTER, owners=2, prefix_depth=hand_over, max_depth=hand_over + 2)
    runs = {"one process": lambda: bfs.search(model),
            "2 owners as threads": lambda: spark_owner.check(
                model, master=None, owners=2, threads=True, prefix_depth=hand_over),
            f"2 owners, barrier job on {MASTER}": lambda: spark_owner.check(
                model, master=MASTER, owners=2, prefix_depth=hand_over)}
    best = {k: float("inf") for k in runs}
    cpu = {k: float("inf") for k in runs}
    same = True
    load0 = os.getloadavg()[0]
    for _ in range(repeat):
        for label, run in runs.items():
            c = time.process_time()
            res, t = timed(run)
            # this process's CPU (every thread of it), and the owners' Python workers' on Spark
            c = time.process_time() - c
            d = getattr(res, "distribution", None)
            if d is not None and d.mode == "barrier" and "local" in label:
                c += sum(d.owner_cpu_s)
            best[label], cpu[label] = min(best[label], t), min(cpu[label], c)
            same &= (res.distinct_states == single.distinct_states
                     and res.transitions == single.transitions and res.depth == single.depth
                     and {p: (f.initial, f.steps) for p, f in res.found.items()}
                     == {p: (f.initial, f.steps) for p, f in single.found.items()})
    print(f"{spec} ({single.distinct_states:,} states, depth {single.depth}; owners from level "
          f"{hand_over}), best of {repeat}: " + "; ".join(f"{k} {v:.2f} s ({cpu[k]:.2f} s CPU)"
                                                          for k, v in best.items())
          + f"; load average {load0:.1f}-{os.getloadavg()[0]:.1f}; same counts and traces: {same}",
          flush=True)


def _tree_cpu(root: int, seen: dict):
    """Adds to ``seen`` (pid -> CPU seconds) every live process under ``root``: the JVM's Python
    workers outlive the command's own accounting (their parent, the JVM, does not wait for
    them), so the process tree is sampled instead."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(d))
            seen.setdefault(("stat", int(d)), fields)
    todo = [root]
    while todo:
        pid = todo.pop()
        fields = seen.pop(("stat", pid), None)
        if fields is not None:
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        todo += children.get(pid, [])
    for k in [k for k in seen if isinstance(k, tuple)]:
        del seen[k]


def _run_command(argv: list[str]) -> tuple[float, float, str, str, int]:
    """One whole command -> (wall s, CPU s of its process tree, stdout, stderr, exit code)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    seen: dict = {}
    out: dict = {}
    readers = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f.read()))
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        _tree_cpu(proc.pid, seen)
        time.sleep(0.5)
    for r in readers:
        r.join()
    wall = time.perf_counter() - t
    # every process of the tree at its last sample (each at most 0.5 s short of its end;
    # the command's own accounting would miss the workers the JVM does not wait for)
    return wall, sum(seen.values()), out["out"], out["err"], proc.returncode


# the command line with spark_owner.owner_mask declined: every state owned by its fingerprint
BY_FINGERPRINT = ("import sys; from kcheck import spark_owner as so; "
                 "so.owner_mask = lambda comp, S, P, *a, **k: (None, 1.0 - 1.0 / P); "
                  "from kcheck.cli import main; sys.exit(main(sys.argv[1:]))")


def command(name: str, params: list[str], repeat: int = 3, by_fingerprint: bool = False):
    """The whole command, Spark's start included: `kcheck check NAME --param K=V ...` in one
    process and with --engine spark-ownership --spark local[2] (and, ``by_fingerprint``, the
    same with every state owned by its fingerprint), back to back, ``repeat`` times each
    (alternating); wall and CPU time of each (the command and every process it starts: the
    JVM, the Python workers), the best of each, and the load average around each run."""
    kcheck = [sys.executable, "-m", "kcheck.cli"]
    base = ["check", name] + [x for kv in params for x in ("--param", kv)] + ["--json"]
    spark_args = ["--engine", "spark-ownership", "--spark", MASTER]
    commands = [("one process", kcheck, []), ("spark-ownership local[2]", kcheck, spark_args)]
    if by_fingerprint:
        commands.append(("spark-ownership local[2], by fingerprint",
                         [sys.executable, "-c", BY_FINGERPRINT], spark_args))
    runs = {label: [] for label, _, _ in commands}
    docs = {}
    for i in range(repeat):
        for label, head, extra in commands:
            load0 = os.getloadavg()[0]
            wall, cpu, out, err, code = _run_command(head + base + extra)
            doc = json.loads(out)
            docs.setdefault(label, doc)
            runs[label].append((wall, cpu, load0, os.getloadavg()[0]))
            line = next((x for x in err.splitlines() if x.startswith("spark (")), "")
            print(f"run {i + 1}, {label}: {wall:.1f} s wall, {cpu:.1f} s CPU (the command and "
                  f"its descendants, sampled every 0.5 s), load average {load0:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after; {doc['distinct_states']:,} states, "
                  f"exit {code}; {doc['distinct_states'] / cpu:,.0f} states per CPU second "
                  f"(whole tree)" + (f"\n  {line}" if line else ""), flush=True)
    a = docs["one process"]
    same = all(a[k] == b[k] for b in docs.values()
               for k in ("distinct_states", "depth", "exhaustive", "transitions", "properties"))
    best = {k: min(v) for k, v in runs.items()}
    one = best["one process"]
    loads = [x for v in runs.values() for r in v for x in r[2:]]
    others = "; ".join(f"{label} {b[0]:.1f} s wall ({b[1]:.1f} s CPU): {one[0] / b[0]:.2f}x "
                       f"faster" for label, b in best.items() if label != "one process")
    print(f"{name} {','.join(params)}, best of {repeat}: one process {one[0]:.1f} s wall "
          f"({one[1]:.1f} s CPU); {others} (whole commands, Spark's start included); "
          f"load average {min(loads):.1f}-{max(loads):.1f}; same verdicts, counts, transitions "
          f"and traces: {same}")


if __name__ == "__main__":
    main()
