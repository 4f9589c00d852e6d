"""The README's conformance table: `kcheck conform SPEC --kafka VERSION --which-variant --json`
for each adapter and release, folded into one Markdown table per spec (which rule each release
runs, and the traces' outcomes). Run by scripts/readme.py; it starts a real broker per run.
Arguments: the specs to tabulate (default: all three)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ("4.2.2", "4.3.1", "4.4.0")
SPECS = ("consumer_group", "classic_group", "producer")
SHORT = {"runs this variant's change": "**runs the change**", "runs the default's rule": "default",
         "mixed: traces side with both": "mixed", "not told apart by these traces": "not told apart",
         "the default (every other row is judged against it)": "default"}


def run(spec: str, version: str) -> dict:
    p = subprocess.run([str(ROOT / ".venv/bin/kcheck"), "conform", spec, "--kafka", version,
                        "--which-variant", "--json"], capture_output=True, text=True, cwd=ROOT)
    if p.returncode not in (0, 1):
        sys.exit(f"conform {spec} --kafka {version} failed (exit {p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def main() -> None:
    specs = sys.argv[1:] or SPECS          # one table per spec, so that one can be refreshed alone
    for spec in specs:
        if spec not in SPECS:
            print(f"conformance_table.py: no adapter for {spec!r}; valid: {', '.join(SPECS)}",
                  file=sys.stderr)
            sys.exit(2)     # bad input; 1 is a failed conform run
        docs = {v: run(spec, v) for v in RELEASES}
        print(f"{spec}: which rule each release runs (traces siding with the default / with the change)\n")
        print("| variant | " + " | ".join(RELEASES) + " |")
        print("|---|" + "---|" * len(RELEASES))
        for i, row in enumerate(docs[RELEASES[0]]["variants"]):
            cells = []
            for v in RELEASES:
                r = docs[v]["variants"][i]
                cells.append(f"{SHORT.get(r['kafka'], r['kafka'])} ({r['siding_with_default']}/"
                             f"{r['siding_with_change']})")
            print(f"| `{row['variant']}` | " + " | ".join(cells) + " |")
        counts = {v: Counter(t["outcome"] for t in docs[v]["traces"]) for v in RELEASES}
        kinds = sorted({k for c in counts.values() for k in c})
        for k in kinds:
            print(f"| traces: {k} | " + " | ".join(str(counts[v][k]) for v in RELEASES) + " |")
        print()


if __name__ == "__main__":
    main()
