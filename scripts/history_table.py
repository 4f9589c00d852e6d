"""Kafka's history as the specs' release profiles tell it (spec.profile): which rule change each
Kafka release runs, one Markdown table per spec that declares profiles. No broker: the table is
read off the specs; what a profile claims is cited in the spec beside its declaration, and
`kcheck conform SPEC --kafka V --which-variant` checks it on a real broker.

    python scripts/history_table.py                 # print the tables
    python scripts/history_table.py --write         # put them in docs/conformance.md
    python scripts/history_table.py --check         # exit 1 if docs/conformance.md is stale

The tables go between the markers <!-- history-table SPEC --> and <!-- /history-table -->."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from kcheck.conform.driver import version_key
from kcheck.loader import load_spec
from kcheck.spec import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "conformance.md"


def table(spec) -> str:
    releases = sorted({r for p in spec.profiles.values() for r in p.releases}, key=version_key)
    changes = []
    for p in spec.profiles.values():
        changes += [c for c in p.changes if c not in changes]
    bugs = {}
    for b in spec.known_bugs:
        if b.variant is not None:
            bugs.setdefault(b.variant, []).append(b.jira)
    lines = [f"| change ({spec.name} variant) | " + " | ".join(releases) + " |",
             "|---|" + "---|" * len(releases)]
    for c in changes:
        before = re.match(r".*?\bbefore ((?:KAFKA|KIP)-\d+)", spec.variants[c].doc)
        jiras = bugs.get(c) or ([before.group(1)] if before else [])
        label = f"{', '.join(jiras)} not in (`{c}`)" if jiras else f"`{c}`"
        cells = ["runs it" if c in spec.profile_for(r).changes else "" for r in releases]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| profile | " + " | ".join(f"`{spec.profile_for(r).name}`" for r in releases) + " |")
    return "\n".join(lines) + "\n"


def tables() -> dict[str, str]:
    out = {}
    for name in SHIPPED:
        spec = load_spec(name)
        if getattr(spec, "profiles", None):
            out[name] = table(spec)
    return out


def put(text: str, found: dict[str, str]) -> str:
    for name, t in found.items():
        start, end = f"<!-- history-table {name} -->\n", "<!-- /history-table -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"history_table.py: {DOC} has no markers '{start.strip()}' ... '{end}'")
        text = pattern.sub(lambda _: start + t + end, text)
    return text


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0] not in ("--write", "--check")):
        print("history_table.py: give nothing (print), --write or --check", file=sys.stderr)
        return 2
    found = tables()
    if not argv:
        for name, t in found.items():
            print(f"{name}:\n\n{t}")
        return 0
    old = DOC.read_text()
    new = put(old, found)
    if argv[0] == "--check":
        if new != old:
            print(f"{DOC} is stale: run python scripts/history_table.py --write", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
