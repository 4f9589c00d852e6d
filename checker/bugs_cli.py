"""`kcheck bugs`: the known Kafka bugs each spec records (spec.known_bug), rediscovered by search.

A bug is rediscovered when the search finds its property violated in the pre-fix variant (the
default with that one fix undone) and holds it exhaustively in the default variant, so the
differing verdict is explained by that fix alone. Both searches run here, every time: the table
shows what was measured, never what the spec says should happen.
"""
from __future__ import annotations


from rich.table import Table

from kcheck.spec import SHIPPED

# one exit-code table (options.py): a known bug not rediscovered is a verdict that differs from
# the record, exit 1
from kcheck.options import OK, VIOLATED as NOT_REDISCOVERED


def register(sub) -> dict:
    from kcheck.options import json_option
    p = sub.add_parser("bugs", help="known Kafka bugs per spec, rediscovered from their pre-fix variants",
                       parents=[json_option()])
    p.add_argument("spec", nargs="?", default="all", help="a shipped spec name, 'all' (default), "
                   "or the path of a spec module")
    return {"bugs": cmd_bugs}


def _verdict(model, prop: str):
    """-> (status, trace length or None, states explored) of one property: a safety property by
    breadth-first search, a progress property on the state graph (the lasso's length)."""
    from kcheck.bfs import search
    if prop in model.spec.progress:
        from kcheck.graph import build_graph, check_progress
        sg = build_graph(model)
        r = check_progress(sg, model.spec.progress[prop])
        return r.status(prop), len(r.found[prop].steps) if prop in r.found else None, sg.states
    res = search(model, [prop] if prop in model.spec.properties else [],
                 deadlock=True if prop == "deadlock" else None)
    length = len(res.found[prop].steps) if prop in res.found else None
    return res.status(prop), length, res.distinct_states


def rediscover(spec) -> list[dict]:
    """One row per known bug of ``spec``, with the measured verdicts of its pre-fix variant and
    of the default variant, both at the configuration the pre-fix variant declares."""
    rows = []
    default_cache: dict[str, tuple] = {}
    for bug in spec.known_bugs:
        row = {"jira": bug.jira, "spec": spec.name, "broke": bug.broke, "fix": bug.fix,
               "code": bug.code, "variant": bug.variant, "property": bug.property,
               "not_expressible": bug.not_expressible}
        if bug.variant is not None:
            pre = spec.instantiate(bug.variant)
            status, length, states = _verdict(pre, bug.property)
            # the configuration the variant declares: what differs from the spec's defaults
            declared = {k: v for k, v in pre.params.as_dict().items() if v != spec.params[k].default}
            row.update(params=declared, pre_fix=status, trace_length=length,
                       pre_fix_states=states, open=bug.open)
            if bug.open:
                # no fix shipped: the default is the pre-fix code, and finding the bug there is all
                row.update(fixed="no fix shipped", fixed_states=None, rediscovered=status == "violated")
                rows.append(row)
                continue
            # the default at the same configuration, so that the two verdicts differ by the fix
            # alone (a bug that needs four batches in flight is not "fixed" by checking one)
            key = (bug.property, tuple(sorted(declared.items())))
            if key not in default_cache:
                default_cache[key] = _verdict(spec.instantiate(None, declared), bug.property)
            fixed_status, _, fixed_states = default_cache[key]
            row.update(fixed=fixed_status, fixed_states=fixed_states,
                       rediscovered=status == "violated" and fixed_status == "holds")
        rows.append(row)
    return rows


def _table(rows: list[dict]) -> Table:
    t = Table(title="Known Kafka bugs: pre-fix variant against the default (both searched here)",
              title_justify="left")
    for col in ("JIRA", "spec", "what broke", "variant", "property", "pre-fix", "fixed (default)"):
        t.add_column(col, overflow="fold")
    for r in rows:
        if r["variant"] is None:
            t.add_row(r["jira"], r["spec"], r["broke"], "—", "—",
                      f"not expressible: {r['not_expressible']}", "")
            continue
        pre = (f"VIOLATED ({r['trace_length']} steps)" if r["pre_fix"] == "violated" else r["pre_fix"])
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        t.add_row(r["jira"], r["spec"], r["broke"], r["variant"] + (f" ({params})" if params else ""),
                  r["property"],
                  pre, r["fixed"])
    return t


def cmd_bugs(args, console) -> int:
    from kcheck.loader import load_spec
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    rows = []
    for name in names:
        rows += rediscover(load_spec(name))
    expressible = [r for r in rows if r["variant"] is not None]
    found = sum(r["rediscovered"] for r in expressible)
    if args.json:
        from kcheck.verdict import print_json
        print_json({"bugs": rows, "rediscovered": found, "expressible": len(expressible),
                    "recorded": len(rows)}, "bugs")
    else:
        console.print(_table(rows))
        console.print(f"{found} of {len(expressible)} expressible bugs rediscovered "
                      f"({len(rows) - len(expressible)} recorded as not expressible)")
    return OK if found == len(expressible) else NOT_REDISCOVERED
