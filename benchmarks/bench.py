"""Speed and memory of the explicit search, measured on this machine.

Prints one row per model: distinct states, transitions, seconds, distinct states per second,
transitions per second, and peak memory per distinct state (peak resident memory of a fresh
process over its baseline after loading the spec, divided by distinct states). Each model runs
in its own process so that one model's peak does not hide another's. "CPU seconds" is the
search's user and system time: on a machine that others load, it is the figure to compare
between two runs (seconds and the rates are wall-clock). two_phase N=9 and N=10, the rows of
issue 16's rate target, run five times each, taking turns; each shows its fastest run, and the
line under the table gives N=10's rate against N=9's, every run and the ratio per transition.

    .venv/bin/python benchmarks/bench.py              # two_phase N=7 to N=10, every shipped spec,
                                                      # and the Kafka specs at Kafka's sizes
    .venv/bin/python benchmarks/bench.py --no-scale   # without those (the long rows)
    .venv/bin/python benchmarks/bench.py --scale      # those alone
    .venv/bin/python benchmarks/bench.py two_phase:N=8
    .venv/bin/python benchmarks/bench.py --largest    # two_phase N=11 (~370 million states) and
                                                      # consumer_group 3 members at max_epoch=4
                                                      # (127 million orbits): opt-in, ~30 CPU
                                                      # minutes, ~6 GB each

The scale rows (issue 16; about 3 CPU minutes): classic_group with three members, three
partitions and coordinator timeouts, exhaustive and unreduced (its member slots are not
interchangeable, see spec/classic_group_notes.md, Scale); consumer_group with three members at
max_epoch=3, exhaustive, reduced by its member symmetry. At the default max_epoch=4 it is a
`--largest` row (127 million orbits, about 17 CPU minutes and 6 GB; spec/consumer_group_notes.md,
Scale).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
from kcheck.loader import load_spec
from kcheck.bfs import search
from kcheck.compile import Compiled
from kcheck.layout import layout_of

def rss_kb():
    # current resident set, from /proc (ru_maxrss is the peak, read after the search)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

spec = load_spec({name!r})
model = spec.instantiate(None, {params!r})
opts = {opts!r}
Compiled(model, layout=layout_of(model))   # warm the code generator and numpy
base = rss_kb()
before = resource.getrusage(resource.RUSAGE_SELF)
r = search(model, **opts)
after = resource.getrusage(resource.RUSAGE_SELF)
peak = after.ru_maxrss
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps(dict(states=r.distinct_states, transitions=r.transitions, seconds=r.elapsed_s,
                      cpu_seconds=cpu, exhaustive=r.exhaustive, peak_over_base=(peak - base) * 1024,
                      depth=r.depth, unreduced=getattr(r, "unreduced_states", None),
                      reduced=r.symmetry not in (None, "off", "none"))))
"""


# consumer_group's three members at max_epoch=3, reduced by the symmetry; at the default
# max_epoch=4 (127 million orbits, ~17 CPU minutes) they are in LARGEST
SCALE = [("classic_group", {"members": 3, "partitions": 3, "timeouts": 1}, {}),
         ("consumer_group", {"members": 3, "max_epoch": 3}, {"symmetry": True})]


# the largest run (issue 16): only with --largest, since it takes long (docs/design.md, "The
# largest run", has the figure and the command that resumes it from a checkpoint)
LARGEST = [("two_phase", {"N": 11}, {}),
           ("consumer_group", {"members": 3}, {"symmetry": True})]


def run(name: str, params: dict, opts: dict | None = None) -> dict:
    code = CHILD.format(name=name, params=params, opts=opts or {})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


REPEAT = 5   # runs of each row of the rate target (two_phase N=9 and N=10); the fastest is shown


def measured(name: str, params: dict, opts: dict) -> dict:
    """One row's run, with the one-minute load average before and after it (others' work slows a
    search's CPU seconds too), logged as JSON on stderr."""
    before = os.getloadavg()[0]
    r = run(name, params, opts)
    r["load"] = [round(before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps({"model": name, "params": params, **opts, **r}), file=sys.stderr, flush=True)
    return r


def main(argv: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    from kcheck.spec import SHIPPED
    targets = []
    only_scale, no_scale = "--scale" in argv, "--no-scale" in argv
    largest = "--largest" in argv
    argv = [a for a in argv if a not in ("--scale", "--no-scale", "--largest")]
    if argv:
        for a in argv:
            name, _, rest = a.partition(":")
            params = dict(kv.split("=") for kv in rest.split(",") if kv)
            targets.append((name, {k: int(v) for k, v in params.items()}, {}))
    elif not (only_scale or largest):
        # N=9 and N=10: issue 16's targets (the rate at N=10 against N=9, bytes a state)
        targets = [("two_phase", {"N": n}, {}) for n in (7, 8, 9, 10)]
        targets += [(n, {}, {}) for n in SHIPPED if n != "two_phase"]
    if largest:
        targets += LARGEST
    elif only_scale or not (argv or no_scale):
        targets += SCALE
    t = Table(title="kcheck explicit search, one process, this machine")
    for col in ("model", "distinct states", "transitions", "seconds", "CPU seconds", "states/s",
                "transitions/s", "bytes/state (peak RSS)"):
        t.add_column(col, justify="right" if col != "model" else "left")
    notes = []
    rates = {}
    loads = {}
    transitions, cpu_s, steps = {}, {}, {}
    # the rate target's two rows are measured REPEAT times each, N=9 and N=10 taking turns (a
    # load that comes and goes then falls on both): the same N=9 search took 3.27 to 4.61 CPU
    # seconds within ten minutes on this machine, since others' work slows a search's CPU seconds
    # too (shared caches and memory bandwidth). Such work only ever adds time, so each row shows
    # its fastest run, the closest to the search's own cost, and the ratio is theirs
    pair = [(n, p, o) for n, p, o in targets if n == "two_phase" and not o and p.get("N") in (9, 10)]
    runs: dict = {}
    if len(pair) == 2:
        for _ in range(REPEAT):
            for name, params, opts in pair:
                runs.setdefault(params["N"], []).append(measured(name, params, opts))
    for name, params, opts in targets:
        if (name, params, opts) in pair and runs:
            r = min(runs[params["N"]], key=lambda x: x["cpu_seconds"])
        else:
            r = measured(name, params, opts)
        label = name + (" " + ",".join(f"{k}={v}" for k, v in params.items()) if params else " (defaults)")
        if (name, params, opts) in SCALE:
            size = (f"{params['members']}x{params['partitions']}" if "partitions" in params
                    else f"{params['members']} members")
            label = f"{name} {size}" + (" timeouts" if params.get("timeouts") else "") + \
                (f" max_epoch={params['max_epoch']}" if "max_epoch" in params else "")
        if r["reduced"]:
            label += " (symmetry)"
            notes.append(f"{label}: {r['states']:,} orbits stand for {r['unreduced']:,} states "
                         f"({r['unreduced'] / max(1, r['states']):.2f}x)")
        if not r["exhaustive"]:
            label += f" (stopped, depth {r['depth']})"
        s = r["seconds"] or 1e-9
        if name == "two_phase" and not opts:
            n = params.get("N")
            rates[n] = r["states"] / (r["cpu_seconds"] or 1e-9)
            loads[n] = r["load"]
            transitions[n], cpu_s[n] = r["transitions"], r["cpu_seconds"] or 1e-9
            steps[n] = r["transitions"] / max(1, r["states"])
        t.add_row(label, f"{r['states']:,}", f"{r['transitions']:,}", f"{s:.2f}", f"{r['cpu_seconds']:.2f}",
                  f"{r['states'] / s:,.0f}", f"{r['transitions'] / s:,.0f}",
                  f"{r['peak_over_base'] / max(1, r['states']):.0f}")
    Console(width=140).print(t)
    if 9 in rates and 10 in rates:
        # per CPU second, so that another process's load moves the ratio less
        every = [x["load"] for n in (9, 10) for x in runs.get(n, [])] or [loads[9], loads[10]]
        low, high = min(min(x) for x in every), max(max(x) for x in every)
        print(f"two_phase: the rate at N=10 is {rates[10] / rates[9]:.1%} of the rate at N=9 "
              f"(distinct states per CPU second; load average {low:.1f}-{high:.1f})")
        if runs:
            # the spread: each N=10 run against each N=9 run
            each = sorted((b["states"] / b["cpu_seconds"]) / (a["states"] / a["cpu_seconds"])
                          for a in runs[9] for b in runs[10])
            cpu = {n: ", ".join(f"{x['cpu_seconds']:.2f}" for x in runs[n]) for n in (9, 10)}
            print(f"  the fastest of {REPEAT} runs each (CPU seconds N=9: {cpu[9]}; N=10: "
                  f"{cpu[10]}); any N=10 run against any N=9 run: {each[0]:.1%}-{each[-1]:.1%}")
        # a state of N=10 has more steps than one of N=9 (each resource manager adds five
        # action instances): the same ratio per transition says what the engine does per step
        per = {n: transitions[n] / cpu_s[n] for n in (9, 10)}
        print(f"  per transition: the rate at N=10 is {per[10] / per[9]:.1%} of N=9's "
              f"({steps[9]:.2f} and {steps[10]:.2f} transitions a state)")
    for line in notes:
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
