"""Partial-order reduction: at a state, expand only an ample set of steps that commute with
everything left out, when that provably keeps every verdict of the properties checked.

Static analysis first (from the compiled expression trees, spec/lang.py): each action instance
*reads* the fields its guard, its effects, its outcome and the transition properties that judge
it read, and *writes* the fields its effects change. Two instances are independent when neither
writes a field the other reads or writes: then neither enables, disables or changes the other,
and the two orders reach the same state (client-side steps of different members, for instance).
An instance is *visible* when it writes a field a checked invariant reads, or a checked
transition property judges it.

A candidate ample set ``A`` is the instances of one action by one actor (``Join(m=1,
target=*)``: a nondeterministic choice's siblings are enabled together and depend on each other)
or a single instance; ``Dep(A)`` is every other instance that is not independent of some member
of ``A``. At a state ``s`` the candidate is valid when ``A`` is invisible, one of its steps is
enabled, and every instance of ``Dep(A)`` is disabled at ``s`` by a guard conjunct that only ``A``
or ``Dep(A)`` can change (its *blocker*); the ample set is then every enabled step of ``A``. The
stubborn-set conditions hold (Valmari; Godefroid's ample sets C0-C2): no sequence of steps
outside ``A ∪ Dep(A)`` changes a guard inside it (a writer of a field that ``A`` reads is in
``Dep(A)``) or fails to commute with ``A``, and ``A`` is invisible. Cycle proviso C3, as a
breadth-first search can check it: a state is expanded with its ample set only when every ample
step stays inside the search bounds and reaches a new state (not in the levels up to the current
one), so no cycle of reduced states exists and no step is ignored for ever; otherwise the state
is expanded in full. With C0-C3 the reduced graph keeps every invariant violation, every
deadlock and every transition-property violation (a judged step is visible, and what its
property reads counts as read by the step, so moving independent steps around it cannot change
its verdict).

What it does not keep: the shortest path. A violation is found, but possibly at a greater depth
than the breadth-first minimum; the statistics say so. Nor does it keep every state or every
transition, so state counts and "action never fired" warnings are those of the reduced graph.
Symmetry and partial-order reduction are not combined (not checked here): the engine refuses both.

The engine's hook is one method, ``Reduction.successors(S, fresh)``: it yields exactly what
``Compiled.successors`` yields (instance order, positions ascending), restricted to the steps the
reduction keeps; ``fresh(T)`` is the engine's test of which states T are not yet in the levels
up to the current one. ``Reduction.bind(visited, keys)`` makes it the successor function of
``explore.Explorer`` (checker/bfs.py does so for ``search(..., por=True)``). ``verify`` checks
the static relation against the spec's steps before a search trusts it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcheck.layout import layout_of, show_words
from kcheck.spec.lang import And, Expr, Model, Not, Or, SpecError


def _fields(e: Expr | None, out: set[int], seen: set[int] | None = None) -> set[int]:
    """The flat field indices an expression reads (pre or post values alike)."""
    if e is None:
        return out
    seen = set() if seen is None else seen
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op == "field":
            out.add(int(x.args[0]))
        elif x.op != "const":
            stack.extend(a for a in x.args if isinstance(a, Expr))
    return out


def _conjuncts(e: Expr) -> list[Expr]:
    return list(e.args) if e.op == "and" else [e]


@dataclass
class Access:
    """What one action instance reads and writes (flat field indices)."""
    reads: frozenset
    writes: frozenset
    guard_reads: frozenset


def accesses(model: Model, comp) -> list[Access]:
    """Reads and writes of every instance. Reads: guard, effects, outcome, and the transition
    properties the compiled model checks on it."""
    tprops = {p.name: p for p in model.transition_props}
    out = []
    for inst in model.instances:
        writes = {i for i, e in inst.writes.items()
                  if not (e.op == "field" and e.args[0] == i and e.args[2] == "pre")}
        reads: set[int] = set()
        guard = _fields(inst.guard, set())
        reads |= guard
        for e in inst.writes.values():
            _fields(e, reads)
        _fields(inst.outcome, reads)
        for name, _fn in comp.tprops_by_instance.get(inst.index, ()):
            _fields(model.transition_expr(tprops[name], inst), reads)
        out.append(Access(frozenset(reads), frozenset(writes), frozenset(guard)))
    return out


def independent(a: Access, b: Access) -> bool:
    """Neither writes what the other reads or writes: the two steps commute and neither enables
    or disables the other."""
    return not (a.writes & (b.reads | b.writes) or b.writes & a.reads)


class Reduction:
    """The ample-set reduction of one compiled model for the properties it checks."""

    def __init__(self, model: Model, comp):
        self.model, self.comp = model, comp
        n = len(model.instances)
        self.access = acc = accesses(model, comp)
        seen_fields: set[int] = set()
        for name in comp.invariants:
            prop = model.spec.properties[name]
            _fields(model.invariant_expr(prop), seen_fields)
        judged = set(comp.tprops_by_instance)
        self.visible = np.array([bool(acc[k].writes & seen_fields) or k in judged
                                 for k in range(n)], dtype=bool)
        # writers of each field, to find who can change a guard conjunct
        writers: dict[int, set[int]] = {}
        for k, a in enumerate(acc):
            for f in a.writes:
                writers.setdefault(f, set()).add(k)
        # candidate ample sets: the instances of one action by one actor (its nondeterministic
        # choices, e.g. Join's target, are siblings that are enabled together and depend on
        # each other, so a set of one of them would never be valid)
        groups: dict[tuple, list[int]] = {}
        for inst in model.instances:
            act = inst.action
            if act.actors:
                key = (act.name, act.actors[0].format(**inst.args))
            else:
                key = (act.name, tuple(sorted((k, str(v)) for k, v in inst.args.items())))
            groups.setdefault(key, []).append(inst.index)
        # and each instance alone (a group fails when one sibling has an unblockable dependent)
        sets = list(groups.values()) + [[k] for g in groups.values() if len(g) > 1 for k in g]
        self.candidates: list[tuple[np.ndarray, np.ndarray]] = []   # (A, Dep(A))
        conditions: list[Expr] = []
        self.no_blocker = 0      # invisible groups with a dependent that nothing can block
        self.visible_groups = 0
        for members in sets:
            if self.visible[members].any():
                self.visible_groups += 1
                continue
            inside = set(members)
            dep = [u for u in range(n) if u not in inside and
                   any(not independent(acc[t], acc[u]) for t in members)]
            closed = set(dep) | inside
            terms = []
            for u in dep:
                blockers = [g for g in _conjuncts(model.instances[u].guard)
                            if set().union(*(writers.get(f, set()) for f in _fields(g, set())))
                            <= closed]
                if not blockers:
                    terms = None
                    break
                terms.append(Or(*[Not(g) for g in blockers]))
            if terms is None:
                self.no_blocker += 1
                continue
            self.candidates.append((np.array(members, dtype=np.int64), np.array(dep, dtype=np.int64)))
            conditions.append(And(*terms))
        self.groups = len(sets)
        self._blocked = _compile_conditions(model, conditions)
        self.expanded = 0        # states expanded
        self.reduced = 0         # of them, expanded with an ample set

    @property
    def active(self) -> bool:
        return bool(self.candidates)

    def describe(self) -> str:
        return (f"{len(self.candidates)} of {self.groups} candidate sets (an action's instances by one "
                f"actor, and each instance alone) can be ample "
                f"({self.visible_groups} visible to the properties checked, {self.no_blocker} "
                f"with a dependent step nothing can block)")

    def successors(self, S: np.ndarray, fresh):
        """What ``Compiled.successors(S)`` yields, restricted to each state's ample set where one
        is valid and its successors are all new (``fresh``), in full elsewhere."""
        comp = self.comp
        m = S.shape[1]
        masks = [np.ones(m, dtype=bool) if g is True else np.zeros(m, dtype=bool) if g is False
                 else np.asarray(g) for g in comp.guards(S)]
        chosen = np.full(m, -1, dtype=np.int64)     # each state's candidate ample set
        if self.candidates:
            blocked = self._blocked(S)
            for c, ((members, _dep), b) in enumerate(zip(self.candidates, blocked)):
                ok = np.logical_or.reduce([masks[k] for k in members]) & (chosen < 0)
                if b is not True:
                    ok &= np.broadcast_to(b, (m,))
                chosen[ok] = c
        reduced = chosen >= 0
        steps = {}
        for c in np.unique(chosen[reduced]):
            idx = np.flatnonzero(chosen == c)
            for k in self.candidates[c][0]:
                sel = idx[masks[k][idx]]
                if not sel.size:
                    continue
                T, out, ok = comp.effects[k](S[:, sel])
                # every ample step must stay inside the bounds and reach a new state; a cut
                # step or one to a state already seen makes the state expand in full
                good = np.ones(sel.size, dtype=bool) if ok is None else ok.copy()
                if good.any():
                    good[good] = fresh(T[:, good])
                reduced[sel[~good]] = False
                steps[int(k)] = (sel, T, out, ok)
        self.expanded += m
        self.reduced += int(reduced.sum())
        full = ~reduced
        for k, mask in enumerate(masks):
            parts = []
            want = mask & full
            if want.any():
                idx = np.flatnonzero(want)
                T, out, ok = comp.effects[k](S[:, idx])
                parts.append((idx, T, out, ok))
            if k in steps:
                idx, T, out, ok = steps[k]
                keep = reduced[idx]
                if keep.any():
                    parts.append((idx[keep], T[:, keep], _take(out, keep),
                                  None if ok is None else ok[keep]))
            if not parts:
                continue
            if len(parts) == 2:
                idx = np.concatenate([parts[0][0], parts[1][0]])
                order = np.argsort(idx, kind="stable")
                T = np.concatenate([parts[0][1], parts[1][1]], axis=1)[:, order]
                out = _join(parts[0][2], parts[1][2], parts[0][0].size, parts[1][0].size, order)
                oks = [p[3] for p in parts]
                ok = None if all(o is None for o in oks) else np.concatenate(
                    [np.ones(p[0].size, dtype=bool) if p[3] is None else p[3] for p in parts])[order]
                idx = idx[order]
            else:
                idx, T, out, ok = parts[0]
            yield k, idx, S[:, idx], T, out, ok

    def bind(self, visited, keys):
        """The successor function an engine passes to the core (``explore.Explorer``'s
        ``successors``): ``visited.absent`` over ``keys`` is its test of new states."""
        from kcheck.compile import fingerprint

        def fresh(T):
            return visited.absent(fingerprint(T), keys(T))
        return lambda S: self.successors(S, fresh)

    def clause(self) -> str:
        """The statistics line's part on the reduction."""
        share = self.reduced / self.expanded if self.expanded else 0.0
        return (f"; partial-order reduction: {self.reduced:,} of {self.expanded:,} states "
                f"expanded with an ample set ({share:.0%}); a trace found may be longer than "
                f"the shortest")


def _take(out, keep):
    if out is None or np.ndim(out) == 0:
        return out
    return out[keep]


def _join(a, b, na, nb, order):
    """Two outcome parts of one instance (arrays, or the same scalar or None) as one."""
    if np.ndim(a) == 0 and np.ndim(b) == 0:
        return a
    full = np.concatenate([np.broadcast_to(np.asarray(a), (na,)), np.broadcast_to(np.asarray(b), (nb,))])
    return full[order]


def _compile_conditions(model: Model, conditions: list[Expr]):
    """One generated function returning every candidate's blocked-dependents mask (reads shared,
    as the guards are)."""
    from kcheck.compile import CodeGen
    g = CodeGen(layout_of(model), {"pre": "S"})
    outs = [g.expr(c) for c in conditions]
    src = "def blocked(S):\n" + "\n".join(g.lines) + f"\n    return [{', '.join(outs) or ''}]\n"
    ns = {"np": np}
    exec(compile(src, f"<kcheck-por:{model.spec.name}>", "exec"), ns)
    return ns["blocked"]


class PorError(SpecError):
    """The static independence relation disagrees with the spec's steps."""


SAMPLE_STATES = 2000


def verify(model: Model, comp, red: Reduction, sample: int = SAMPLE_STATES, depth: int = 12) -> int:
    """Checks the analysis on the initial states and a breadth-first sample of reachable ones:
    at each state where a candidate ample step t is valid, t leaves every invariant's value and
    the terminal condition alone, and for every other enabled step u, t then u and u then t are
    both possible and reach the same state, with u's transition-property verdicts and outcome
    the same before and after t. Raises PorError naming the steps and the state; returns the
    number of states examined."""
    from kcheck.symmetry import sample_states
    S = sample_states(model, comp, sample, depth)
    m = S.shape[1]
    masks = [np.broadcast_to(np.asarray(g), (m,)) for g in comp.guards(S)]
    blocked = red._blocked(S)
    for (members, dep), b in zip(red.candidates, blocked):
        for t in members:
            _check_ample_step(model, comp, S, masks, int(t), set(int(x) for x in members),
                              set(int(x) for x in dep), np.broadcast_to(np.asarray(b), (m,)))
    return m


def _check_ample_step(model, comp, S, masks, t, group, dep_set, blocked):
    """verify's check of step t at the sample states where its set is a valid ample set."""
    at = masks[t] & blocked
    if not at.any():
        return
    where = np.flatnonzero(at)
    P = S[:, where]
    Pt, _o, ok = comp.effects[t](P)
    if ok is not None:
        where, P, Pt = where[ok], P[:, ok], Pt[:, ok]
    if not where.size:
        return
    label = model.instances[t].label
    name_ = f"partial-order reduction of spec {model.spec.name}"
    for name, fn in comp.invariants.items():
        a, c = np.broadcast_to(fn(P), (P.shape[1],)), np.broadcast_to(fn(Pt), (P.shape[1],))
        if (a != c).any():
            i = int(np.flatnonzero(a != c)[0])
            raise PorError(f"{name_}: step {label} changes invariant {name} at state "
                           f"{show_words(model, P[:, i])}, yet counts as invisible")
    after = [np.broadcast_to(np.asarray(g), (Pt.shape[1],)) for g in comp.guards(Pt)]
    for u in range(len(model.instances)):
        if u in group:
            continue          # the ample set's own steps: all of them are expanded
        en = masks[u][where]
        if u in dep_set:
            if en.any():
                i = int(np.flatnonzero(en)[0])
                raise PorError(f"{name_}: step {model.instances[u].label} depends on {label} "
                               f"and is enabled at {show_words(model, P[:, i])}, where {label} was "
                               f"taken as ample")
            continue
        if (en != after[u]).any():
            i = int(np.flatnonzero(en != after[u])[0])
            raise PorError(f"{name_}: step {label} enables or disables "
                           f"{model.instances[u].label} at state {show_words(model, P[:, i])}, yet "
                           f"the two count as independent")
        if not en.any():
            continue
        sel = np.flatnonzero(en)
        U, uo, _ = comp.effects[u](P[:, sel])
        Ut, uto, _ = comp.effects[u](Pt[:, sel])
        TU, _, _ = comp.effects[t](U)
        same = (TU == Ut).all(axis=0)
        same &= np.broadcast_to(np.asarray(uo if uo is not None else 0) ==
                                np.asarray(uto if uto is not None else 0), (sel.size,))
        for _name, tp in comp.tprops_by_instance.get(u, ()):
            same &= np.broadcast_to(tp(P[:, sel], U, uo) == tp(Pt[:, sel], Ut, uto), (sel.size,))
        if not same.all():
            i = int(sel[np.flatnonzero(~same)[0]])
            raise PorError(f"{name_}: steps {label} and {model.instances[u].label} do not "
                           f"commute at state {show_words(model, P[:, i])}, yet count as independent")


def prepare(model: Model, comp, enabled: bool, symmetry=None, checkpoint=None) -> Reduction | None:
    """The reduction the search uses, checked (``verify``), or None when off or when no set of
    steps can be ample for the properties checked."""
    if not enabled:
        return None
    if symmetry is not None:
        raise SpecError("partial-order reduction is not combined with symmetry reduction: add "
                        "--no-symmetry")
    if checkpoint is not None:
        raise SpecError("--checkpoint does not record a partial-order-reduced search: leave out "
                        "--por to checkpoint")
    red = Reduction(model, comp)
    if not red.active:
        return None
    verify(model, comp, red)
    return red


def clause(r) -> str:
    """The statistics line's part on partial-order reduction: empty when it was not used."""
    red = getattr(r, "por", None)
    return "" if red is None else red.clause()
