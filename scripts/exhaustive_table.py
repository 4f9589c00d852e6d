"""The README's table of conformance in every state: for each spec with an in-process backend and
each release, `kcheck conform SPEC --exhaustive --kafka V --json` at the parameters below (the
spec's default variant), and `--exhaustive --which-variant` at the same parameters for the
variants that conform in every transition. One Markdown table per spec on stdout.

Arguments: the specs to tabulate (default: both), then optional NAME=VALUE parameters that
replace the table's for every spec given (e.g. `classic_group members=3`); exit 2 on a spec
without an in-process backend or a malformed parameter, 1 when a run fails."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ("4.2.2", "4.3.1", "4.4.0")
# the parameters of each spec's table: small enough that a run of every variant on every
# release takes minutes (the defaults' figures are in docs/conformance.md)
PARAMS = {
    "consumer_group": {"members": 2, "partitions": 1, "static_members": 0, "max_epoch": 3},
    "classic_group": {"members": 2, "partitions": 2, "max_generation": 3},
}


def run(spec: str, version: str, params: dict, *extra: str) -> dict:
    args = [str(ROOT / ".venv/bin/kcheck"), "conform", spec, "--exhaustive", "--kafka", version,
            "--json", *extra]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode not in (0, 1):
        sys.exit(f"conform {spec} --exhaustive --kafka {version} failed (exit {p.returncode}): "
                 f"{p.stderr.strip()}")
    return json.loads(p.stdout)


def row(version: str, doc: dict, variants: dict) -> str:
    divergent = len(doc["divergences"]) + doc["expected_divergences"]
    first = (doc["divergences"][0]["detail"] if doc["divergences"] else
             "as the release record expects" if doc["expected_divergences"] else "")
    not_mappable = sum(doc["not_mappable"].values())
    conforming = doc["checked"] - len(doc["divergences"]) - doc["expected_divergences"]
    return (f"| {version} | {doc['transitions']:,} | {doc['checked']:,} | {conforming:,} | "
            f"{divergent:,}{' (' + first[:80] + ')' if first else ''} | {doc['client_side']:,} | "
            f"{not_mappable:,} | {doc['seconds']:.1f} s | "
            f"{', '.join(f'`{v}`' for v in variants['conforming']) or 'none'} |")


def main() -> None:
    specs = [a for a in sys.argv[1:] if "=" not in a] or list(PARAMS)
    override = {}
    for a in sys.argv[1:]:
        if "=" in a:
            k, _, v = a.partition("=")
            if not v.lstrip("-").isdigit():
                print(f"exhaustive_table.py: {a!r}: write NAME=INTEGER", file=sys.stderr)
                sys.exit(2)
            override[k] = int(v)
    for spec in specs:
        if spec not in PARAMS:
            print(f"exhaustive_table.py: no in-process backend for {spec!r}; valid: "
                  f"{', '.join(PARAMS)}", file=sys.stderr)
            sys.exit(2)
        params = {**PARAMS[spec], **override}
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        print(f"{spec} in every state ({shown}, the default variant):\n")
        print("| release | transitions | checked | conforming | divergent (first) | client-side | "
              "not mappable | time | variants conforming in every transition |")
        print("|---|---|---|---|---|---|---|---|---|")
        for version in RELEASES:
            doc = run(spec, version, params)
            variants = run(spec, version, params, "--which-variant")
            print(row(version, doc, variants))
        print()


if __name__ == "__main__":
    main()
