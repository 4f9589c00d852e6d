"""A plain interpreter of the spec language, one state at a time, on Python values.

It is slow and obviously right: the tests run it beside the compiled numpy code (state counts
and successor sets must agree), as minicheck tests its optimised transition function against a
reference one. Not used by any engine.
"""
from __future__ import annotations

from collections import deque

from kcheck.ops import OPS
from kcheck.spec.lang import Expr, Model


def evaluate(e: Expr, pre: list[int], post: list[int] | None = None, outcome: int | None = None,
             memo: dict | None = None):
    """The value of ``e`` on the flat field values ``pre`` (and ``post`` for a step). The trees
    are DAGs: ``memo`` (by node) keeps a shared subtree from being evaluated once per path."""
    op, a = e.op, e.args
    if op == "const":
        return a[0]
    if op == "field":
        idx, _name, tag = a
        v = (post if tag == "post" else pre)[idx]
        return bool(v) if e.kind == "bool" else v
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    if op not in OPS:
        raise ValueError(f"unknown operation {op}")
    r = OPS[op].python(*[evaluate(x, pre, post, outcome, memo) for x in a])
    memo[id(e)] = (e, r)   # keeping e alive keeps its id from being reused
    return r


def successors(model: Model, state: tuple[int, ...]):
    """-> list of (instance index, next state or None when cut by a search bound, outcome)."""
    pre = list(state)
    out = []
    for inst in model.instances:
        if not evaluate(inst.guard, pre):
            continue
        nxt = list(pre)
        inside = True
        for idx, e in inst.writes.items():
            v = evaluate(e, pre)
            v = int(v)
            t = model.fields.fields[idx].type
            if not t.lo <= v <= t.hi:
                inside = False
            nxt[idx] = v
        o = evaluate(inst.outcome, pre) if inst.outcome is not None else None
        out.append((inst.index, tuple(nxt) if inside else None, o))
    return out


def explore(model: Model, max_states: int | None = None):
    """Reachable states (as flat value tuples) by plain BFS, level by level; with ``max_states``
    it stops after the first level that passes it. -> (states, transitions, levels expanded,
    exhaustive)."""
    level = list(model.initial_states)
    seen = set(level)
    transitions = depth = 0
    while level:
        if max_states is not None and len(seen) > max_states:
            return seen, transitions, depth, False
        nxt_level = []
        for s in level:
            for _k, nxt, _o in successors(model, s):
                transitions += 1
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    nxt_level.append(nxt)
        level = nxt_level
        depth += 1
    return seen, transitions, depth, True
