"""What each variant's "holds" covers (issue 32): per variant, the properties the search finds
holding (or not reaching), how many of them `kcheck check --prove` proves for every epoch, and the
ones left at the search's bounds, with the proof's verdict. A markdown table for docs/symbolic.md
(scripts/readme.py --file docs/symbolic.md covers_table).

    .venv/bin/python scripts/covers_table.py [SPEC ...]     (default: every shipped spec)

Every figure is measured by running the search and the proofs on this machine (minutes for
consumer_group: one proof per holding property per variant).
"""
from __future__ import annotations

import sys

from kcheck.loader import load_spec
from kcheck.run import Options, run_variant
from kcheck.spec import SHIPPED
from kcheck.verdict import Verdict, cell, holds_covers


def rows(name: str):
    spec = load_spec(name)
    for variant in spec.variants or [None]:
        run = run_variant(spec, variant, None, Options(), prove=True)
        res = run.search
        holding = [p for p in res.properties
                   if res.status(p) in (Verdict.HOLDS, Verdict.NOT_REACHED)]
        covers = {p: holds_covers(res, p, run.proofs) for p in holding}
        proved = [p for p in holding if covers[p] == "every epoch (proved)"]
        rest = [p for p in holding if p not in proved]
        verdicts = {pr.property: pr.verdict for pr in run.proofs}

        def why(p):
            if p in verdicts:
                return cell(verdicts[p])
            prop = spec.properties.get(p)
            return ("a scenario: not proved" if prop is not None and prop.kind == "sometimes"
                    else "a lemma the proofs dropped")
        # the rest: what the search alone covers (nothing cut: every reachable state)
        cover = sorted({covers[p] or "every reachable state" for p in rest})
        capped = [f"{p} ({why(p)})" for p in rest if (covers[p] or "").startswith("up to")]
        yield (f"{name}/{spec.variant_name(variant)}", len(holding), len(proved),
               ", ".join(cover) or "-", "; ".join(capped) or "none")


def main(argv: list[str]) -> int:
    names = argv or list(SHIPPED)
    print("| variant | holding | proved for every epoch | the rest cover | left up to the cap (the proof's verdict) |")
    print("|---|---:|---:|---|---|")
    for name in names:
        for variant, holding, proved, bound, left in rows(name):
            print(f"| {variant} | {holding} | {proved} | {bound} | {left} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
