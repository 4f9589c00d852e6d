"""`kcheck bmc` against `kcheck check` on the shipped counterexamples: whole commands, timed.

For every spec and variant under counterexamples/, the shortest saved counterexample of a safety
property (bmc does not check progress properties) of at most --max-steps steps (ties: the property name first in order), plus the 11-step zombie commit of
consumer_group kip1251 (issue 16's case), is found twice: by `kcheck check --property P` (the
breadth-first search) and by `kcheck bmc --property P --depth MAX_STEPS` (search bounds lifted,
as a user runs it), each with the parameters saved in the trace. The table gives both wall times
(start-up included), their ratio, and both trace lengths, which must agree: both engines find a
shortest counterexample. Every figure is measured by this run; the machine's load average is
printed with the table, since other work on a shared machine slows both commands.

    .venv/bin/python scripts/bench_bmc.py [--max-steps 12] [--only SPEC[/VARIANT]] [--timeout S]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-m", "kcheck.cli"]
HEADLINE = ("consumer_group", "kip1251", "no-zombie-commit")


def cases(max_steps: int, only: str | None) -> list[dict]:
    best: dict = {}
    extra = []
    for f in sorted((ROOT / "counterexamples").glob("*/*/*.json")):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        # progress properties (lasso traces) are not the symbolic engine's: safety only
        if "kcheck_trace" not in doc or doc.get("kind") == "lasso" or "loop_index" in doc:
            continue
        case = {"spec": doc["spec"], "variant": doc["variant"], "property": f.stem,
                "params": doc.get("params", {}), "steps": len(doc["steps"])}
        if case["steps"] > max_steps:
            continue
        key = (case["spec"], case["variant"])
        if key not in best or (case["steps"], case["property"]) < (best[key]["steps"], best[key]["property"]):
            best[key] = case
        if (case["spec"], case["variant"], case["property"]) == HEADLINE:
            extra.append(case)
    # issue 16's case first: on a shared machine it is the row that must not be cut short
    out = extra + [c for c in sorted(best.values(), key=lambda c: (c["spec"], c["variant"]))
                   if c not in extra]
    if only:
        out = [c for c in out if f"{c['spec']}/{c['variant']}".startswith(only)]
    return out


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: list[str], timeout: float) -> tuple[float, float, int | None, dict | None, str]:
    """Wall time and CPU time (user + system, of the command alone: commands run one at a time,
    so the children's usage grows by this one's) of one whole command."""
    t0, c0 = time.perf_counter(), cpu_of_children()
    try:
        p = subprocess.run(KCHECK + args, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, cpu_of_children() - c0, None, None, f"timed out after {timeout:.0f} s"
    wall, cpu = time.perf_counter() - t0, cpu_of_children() - c0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    err = "" if doc is not None else (p.stderr.strip().splitlines() or ["no output"])[-1][:120]
    return wall, cpu, p.returncode, doc, err


def trace_length(doc: dict | None, prop: str):
    if not doc:
        return None
    return (doc.get("properties", {}).get(prop) or {}).get("trace_length")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--only", help="SPEC or SPEC/VARIANT prefix")
    ap.add_argument("--timeout", type=float, default=1800, help="per command, seconds")
    a = ap.parse_args()
    rows = []
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    for c in cases(a.max_steps, a.only):
        params = [x for k, v in c["params"].items() for x in ("--param", f"{k}={v}")]
        common = [c["spec"], "--variant", c["variant"], *params, "--json"]
        # `check` names deadlock freedom by a flag (then it checks every property as well)
        asked = ["--deadlock"] if c["property"] == "deadlock" else ["--property", c["property"]]
        tc, cc, rc_c, dc, ec = run(["check", *common, *asked], a.timeout)
        tb, cb, rc_b, db, eb = run(["bmc", *common, "--property", c["property"], "--depth", str(a.max_steps)],
                                   a.timeout)
        row = {**c, "check_s": round(tc, 2), "bmc_s": round(tb, 2),
               "check_cpu_s": round(cc, 2), "bmc_cpu_s": round(cb, 2),
               "check_length": trace_length(dc, c["property"]),
               "bmc_length": trace_length(db, c["property"]),
               "check_exit": rc_c, "bmc_exit": rc_b, "error": ec or eb or None,
               "bmc_solver": (db or {}).get("solver")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    print()
    print("| spec | variant | property | steps (check / bmc) | check wall (CPU) | bmc wall (CPU) "
          "| bmc / check, wall (CPU) |")
    print("|---|---|---|---|---|---|---|")
    worst, worst_cpu = 0.0, 0.0
    for r in rows:
        ratio = r["bmc_s"] / r["check_s"] if r["check_s"] else float("inf")
        ratio_cpu = r["bmc_cpu_s"] / r["check_cpu_s"] if r["check_cpu_s"] else float("inf")
        ok = r["check_length"] is not None and r["check_length"] == r["bmc_length"]
        if ok:
            worst, worst_cpu = max(worst, ratio), max(worst_cpu, ratio_cpu)
        lengths = f"{r['check_length']} / {r['bmc_length']}" + ("" if ok else f" (saved {r['steps']}; {r['error'] or 'lengths differ'})")
        print(f"| {r['spec']} | {r['variant']} | {r['property']} | {lengths} | "
              f"{r['check_s']:.1f} s ({r['check_cpu_s']:.1f} s) | {r['bmc_s']:.1f} s ({r['bmc_cpu_s']:.1f} s) | "
              f"{ratio:.1f}x ({ratio_cpu:.1f}x) |")
    agree = sum(1 for r in rows if r["check_length"] is not None and r["check_length"] == r["bmc_length"])
    print(f"\n{agree} of {len(rows)} cases: both engines find a counterexample of the same length; "
          f"the largest ratio among them is {worst:.1f}x in wall time, {worst_cpu:.1f}x in CPU time")
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
