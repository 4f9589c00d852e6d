"""What a run warns about, gathered and printed as one short summary at its end.

A first `kcheck check all && kcheck progress all` printed 17 one-line warnings between its tables
and 21 lines of 300 characters after them, none explained (issue 37). The commands now hand each
warning to a ``Notices`` and print, on standard error after the results, one line per kind with
a count, and where to read more: ``--explain`` lists every warning, docs/warnings.md says what
each kind means and what to do about it.

A warning the spec expects (an action it declares idle, ``spec.idle``; a verdict it records as
bounded, ``spec.bounded``) is counted apart, as expected, with the spec's reason: a newcomer
sees what needs attention and what the spec's author already looked at.
"""
from __future__ import annotations

from dataclasses import dataclass, field

DOCS = "docs/warnings.md"

# kind -> (what one is, counted; what it means, said once in the summary)
KINDS = {
    "idle": ("variant(s) with actions that never took a step",
             "a property about those actions holds vacuously"),
    "stale-idle": ("action(s) declared idle that took a step",
                   "the spec's idle() declaration no longer says what happens"),
    "bounded": ("verdict(s) decided only within a search bound",
                "no violation was found, but behaviours beyond the bound were not examined"),
}


@dataclass
class Notice:
    kind: str                 # a key of KINDS
    where: str                # spec/variant
    text: str                 # the whole warning, as --explain prints it
    expected: str | None = None   # the spec's declared reason, when it expects this


@dataclass
class Notices:
    items: list[Notice] = field(default_factory=list)

    def add(self, kind: str, where: str, text: str, expected: str | None = None) -> None:
        self.items.append(Notice(kind, where, text, expected))

    def idle(self, result) -> None:
        """The actions of a search's model that had instances but never took a step (the search's
        statistics), split into those the variant declares idle (spec.idle) and the others; and
        the declared ones that did take a step. Only an exhaustive search knows either."""
        never = result.statistics.get("never_fired")
        if never is None:
            return
        m = result.model
        where = f"{m.spec.name}/{m.variant}"
        declared = m.spec.idle_expected(m.variant)
        surprising = [a for a in never if a not in declared]
        if surprising:
            self.add("idle", where, f"action{'s' if len(surprising) > 1 else ''} "
                     f"{', '.join(surprising)} never took a step though enabled by the parameters: "
                     f"a property about {'them' if len(surprising) > 1 else 'it'} holds vacuously")
        for a in never:
            if a in declared:
                self.add("idle", where, f"action {a} never takes a step", expected=declared[a])
        have = {inst.action.name for inst in m.instances}
        for a in declared:
            if a in have and a not in never:
                self.add("stale-idle", where, f"action {a} took a step, but the spec declares it "
                         f"idle here ({declared[a]})")

    def bounded_verdicts(self, result) -> None:
        """A result's 'no violation (bounded)' verdicts (a search's or a state graph's) with the
        engine's reasons, each expected when the spec records it (spec.bounded). The matrix shows
        the cell; the summary, or --explain, says why."""
        if getattr(result, "exhaustive", True) is False:
            return      # a stopped search's verdicts are bounded by the stop: its line says so
        m = result.model
        variant = m.spec.variants.get(m.variant) if m.spec.variants else None
        recorded = getattr(variant, "expected_bounded", {}) or {}
        for p in result.properties:
            why = result.reason(p)
            if why:
                self.add("bounded", f"{m.spec.name}/{m.variant}",
                         f"{p}: no violation (bounded): {why}", recorded.get(p))

    def print(self, err, explain: bool, command: str) -> None:
        """The summary on ``err``: one line per kind of warning, one for the expected ones, and
        where the list and its meaning are; with ``explain``, every warning and expected notice."""
        if not self.items:
            return
        warnings = [n for n in self.items if n.expected is None]
        expected = [n for n in self.items if n.expected is not None]
        if explain:
            for n in warnings:
                err.print(f"kcheck: warning: {n.where}: {n.text}", markup=False)
            for n in expected:
                err.print(f"kcheck: expected: {n.where}: {n.text} (the spec says: {n.expected})",
                          markup=False)
        counts = {k: sum(1 for n in warnings if n.kind == k) for k in KINDS}
        parts = [f"{c} {KINDS[k][0]} ({KINDS[k][1]})" for k, c in counts.items() if c]
        head = (f"kcheck: {len(warnings)} warning{'' if len(warnings) == 1 else 's'}: "
                + "; ".join(parts) if warnings else "kcheck: no warnings")
        if expected:
            kinds = [w for k, w in (("idle", "actions declared idle"),
                                    ("bounded", "verdicts recorded as bounded"))
                     if any(n.kind == k for n in expected)]
            head += f"; {len(expected)} expected, as the specs declare ({', '.join(kinds)})"
        where = (f"{DOCS} says what each kind means" if explain else
                 f"'kcheck {command} --explain' lists them, {DOCS} says what they mean")
        err.print(f"{head} ({where})", markup=False)
