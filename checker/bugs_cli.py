"""`kcheck bugs`: the known Kafka bugs each spec records (spec.known_bug), rediscovered by search.

A bug is rediscovered when the search finds its property violated in the pre-fix variant (the
default with that one fix undone) and holds it exhaustively in the default variant, so the
differing verdict is explained by that fix alone. Both searches run here, every time: the table
shows what was measured, never what the spec says should happen.

A search cut short (--max-depth, --max-states, the memory watch) leaves its bug undecided, not
"missed": the command then exits 3. Ctrl-C or SIGTERM stops at the bug being searched; the rows
finished are printed and the command exits 130 or 143.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from kcheck.spec import SHIPPED
from kcheck.verdict import Verdict, cell

# one exit-code table (options.py): a known bug not rediscovered is a verdict that differs from
# the record, exit 1
from kcheck.options import BOUNDED, INTERRUPTED, OK, TERMINATED, VIOLATED as NOT_REDISCOVERED

NO_FIX = "no fix shipped"


def register(sub) -> dict:
    from kcheck.options import json_option
    p = sub.add_parser("bugs", help="known Kafka bugs per spec, rediscovered from their pre-fix variants",
                       parents=[json_option()])
    p.add_argument("spec", nargs="?", default="all", help="a shipped spec name, 'all' (default), "
                   "or the path of a spec module")
    p.add_argument("--max-depth", type=int, metavar="N",
                   help="stop each search after N levels (a bug then stays undecided, exit 3)")
    p.add_argument("--max-states", type=int, metavar="N",
                   help="stop each search after N distinct states (undecided, exit 3)")
    return {"bugs": cmd_bugs}


@dataclass
class Measured:
    """One search of one property: its verdict, the counterexample's length, the states seen,
    and why it stopped early (None: it ran to the end)."""
    verdict: Verdict
    length: int | None
    states: int
    stop_reason: str | None = None


@dataclass
class BugRun:
    """A known bug and what the searches found: the pre-fix variant's verdict and the default's
    at the same configuration (None for a bug the spec cannot express, or one not reached
    because the command was stopped)."""
    bug: object                        # spec.lang.KnownBug
    spec: str
    params: dict | None = None         # what the pre-fix variant declares beyond the defaults
    pre_fix: Measured | None = None
    fixed: Measured | None = None      # None: no fix shipped (bug.open), or not searched

    @property
    def expressible(self) -> bool:
        return self.bug.variant is not None

    @property
    def rediscovered(self) -> bool:
        if self.pre_fix is None or self.pre_fix.verdict is not Verdict.VIOLATED:
            return False
        return self.bug.open or (self.fixed is not None and self.fixed.verdict is Verdict.HOLDS)

    @property
    def decided(self) -> bool:
        """Whether the verdicts are full answers: a bound or a stop leaves them open."""
        measured = [m for m in (self.pre_fix, self.fixed) if m is not None]
        return (self.pre_fix is not None and (self.bug.open or self.fixed is not None)
                and all(m.verdict.decided for m in measured))

    def to_json(self) -> dict:
        b = self.bug
        out = {"jira": b.jira, "spec": self.spec, "broke": b.broke, "fix": b.fix, "code": b.code,
               "variant": b.variant, "property": b.property, "not_expressible": b.not_expressible}
        if self.expressible and self.pre_fix is not None:
            out.update(params=self.params, pre_fix=self.pre_fix.verdict.value,
                       trace_length=self.pre_fix.length, pre_fix_states=self.pre_fix.states,
                       open=b.open, rediscovered=self.rediscovered,
                       fixed=NO_FIX if b.open else (self.fixed.verdict.value if self.fixed else None),
                       fixed_states=None if b.open or self.fixed is None else self.fixed.states)
        return out


def _measure(spec, variant, params: dict, prop: str, max_depth, max_states) -> Measured:
    """One property of one variant: a safety property by breadth-first search, a progress
    property on the state graph (the lasso's length). A signal during the search is raised
    again (bfs.Terminated, KeyboardInterrupt) once the search has stopped."""
    from kcheck.bfs import Terminated, search
    if prop in spec.progress:
        from kcheck.run import Options, progress_of
        r, _ = progress_of(spec, variant, params, Options(progress_properties=[prop]))
        return Measured(Verdict(r.status(prop)), len(r.found[prop].steps) if prop in r.found else None,
                        r.graph.states)
    model = spec.instantiate(variant, params)
    res = search(model, [prop] if prop in spec.properties else [], max_depth, max_states,
                 deadlock=True if prop == "deadlock" else None)
    if res.stop_reason == "terminated":
        raise Terminated()
    if res.stop_reason == "interrupted":
        raise KeyboardInterrupt
    length = len(res.found[prop].steps) if prop in res.found else None
    return Measured(Verdict(res.status(prop)), length, res.distinct_states,
                    None if res.exhaustive else res.stop_reason)


def rediscover(spec, max_depth: int | None = None, max_states: int | None = None,
               done: list | None = None) -> list[BugRun]:
    """One BugRun per known bug of ``spec``: the measured verdicts of its pre-fix variant and of
    the default variant, both at the configuration the pre-fix variant declares. Each finished
    row is appended to ``done`` as it ends (so that a signal loses none of them)."""
    rows = [] if done is None else done
    defaults: dict[tuple, Measured] = {}
    for bug in spec.known_bugs:
        row = BugRun(bug, spec.name)
        if bug.variant is not None:
            pre = spec.instantiate(bug.variant)
            # the configuration the variant declares: what differs from the spec's defaults
            row.params = {k: v for k, v in pre.params.as_dict().items()
                          if v != spec.params[k].default}
            row.pre_fix = _measure(spec, bug.variant, {}, bug.property, max_depth, max_states)
            if not bug.open:
                # the default at the same configuration, so that the two verdicts differ by the
                # fix alone (a bug that needs four batches in flight is not "fixed" by checking one)
                key = (bug.property, tuple(sorted(row.params.items())))
                if key not in defaults:
                    defaults[key] = _measure(spec, None, row.params, bug.property, max_depth,
                                             max_states)
                row.fixed = defaults[key]
        rows.append(row)
    return rows


def _table(rows: list[BugRun]) -> Table:
    t = Table(title="Known Kafka bugs: pre-fix variant against the default (both searched here)",
              title_justify="left")
    for col in ("JIRA", "spec", "what broke", "variant", "property", "pre-fix", "fixed (default)"):
        t.add_column(col, overflow="fold")
    for r in rows:
        b = r.bug
        if not r.expressible:
            t.add_row(b.jira, r.spec, b.broke, "—", "—",
                      f"not expressible: {b.not_expressible}", "")
            continue
        params = ", ".join(f"{k}={v}" for k, v in (r.params or {}).items())
        fixed = NO_FIX if b.open else cell(r.fixed.verdict)
        t.add_row(b.jira, r.spec, b.broke, b.variant + (f" ({params})" if params else ""),
                  b.property, cell(r.pre_fix.verdict, r.pre_fix.length), fixed)
    return t


def cmd_bugs(args, console) -> int:
    from kcheck.bfs import Terminated
    from kcheck.loader import load_spec
    from kcheck.options import BadInput, make_console
    for flag in ("max_depth", "max_states"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            raise BadInput(f"--{flag.replace('_', '-')} must be 0 or more, "
                           f"not {getattr(args, flag)}")
    names = list(SHIPPED) if args.spec == "all" else [args.spec]
    specs = [load_spec(name) for name in names]      # every name checked before any search
    rows: list[BugRun] = []
    stopped = None
    for spec in specs:
        try:
            rediscover(spec, args.max_depth, args.max_states, done=rows)
        except (KeyboardInterrupt, Terminated) as e:
            stopped = TERMINATED if isinstance(e, Terminated) else INTERRUPTED
            break
    total = sum(len(s.known_bugs) for s in specs)
    expressible = [r for r in rows if r.expressible]
    found = sum(r.rediscovered for r in expressible)
    undecided = [r for r in expressible if not r.decided]
    if args.json:
        from kcheck.verdict import print_json
        print_json({"bugs": [r.to_json() for r in rows], "rediscovered": found,
                    "expressible": len(expressible), "recorded": len(rows)}, "bugs")
    else:
        console.print(_table(rows))
        console.print(f"{found} of {len(expressible)} expressible bugs rediscovered "
                      f"({len(rows) - len(expressible)} recorded as not expressible)"
                      + (f"; {len(undecided)} undecided: a search was bounded"
                         if undecided and stopped is None else ""))
    if stopped is not None:
        said = "terminated (SIGTERM)" if stopped == TERMINATED else "interrupted"
        make_console(stderr=True, soft_wrap=True).print(
            f"kcheck: bugs {said} after {len(rows)} of {total} recorded bugs; the rows above are "
            f"the bugs finished", markup=False)
        return stopped
    missed = [r for r in expressible if r.decided and not r.rediscovered]
    if missed:
        return NOT_REDISCOVERED
    return BOUNDED if undecided else OK
