"""A progress property's conditions and fairness, as the state graph (checker/graph.py) and the
replay of a lasso (checker/trace.py) both read them: P and Q as expressions and as compiled
conditions on blocks of packed states, and the mask of the instances it assumes fair."""
from __future__ import annotations

import numpy as np

from kcheck.compile import CodeGen
from kcheck.layout import layout_of
from kcheck.spec.lang import TRUE, And, Model, Progress, SpecError, StateView, call_spec



def compile_condition(model: Model, expr, name: str):
    """A state condition (an Expr) as a function of a block of packed states -> bool mask."""
    g = CodeGen(layout_of(model), {"pre": "S"})
    r = g.expr(expr)
    src = "def cond(S):\n" + "".join(line + "\n" for line in g.lines) + f"    return {r}\n"
    ns = {"np": np}
    exec(compile(src, f"<kcheck:{model.spec.name}:{name}>", "exec"), ns)
    fn = ns["cond"]
    return lambda S: np.broadcast_to(fn(S), (S.shape[1],)).copy()


def progress_conditions(model: Model, prop: Progress):
    """(P, Q) as expressions; P is TRUE for 'always eventually Q'."""
    view = StateView(layout_of(model))
    where = f"progress property {prop.name}"
    if prop.kind == "leads-to":
        pq = call_spec(where, prop.p, view, model.params)
        if not isinstance(pq, tuple) or len(pq) != 2:
            raise SpecError(f"{where}: a leads-to property returns (P, Q), got {pq!r}")
        return call_spec(where, And, pq[0]), call_spec(where, And, pq[1])
    return TRUE, call_spec(where, And, prop.q(view, model.params))


def fair_mask(model: Model, prop: Progress) -> int:
    names = {a.name for a in model.spec.actions}
    for a in prop.fair:
        if a not in names:
            raise SpecError(f"progress property {prop.name} names unknown action '{a}' as fair; "
                            f"actions: {', '.join(sorted(names))}")
    fair = set(prop.fair)
    return sum(1 << inst.index for inst in model.instances if inst.action.name in fair)


def instances_of(mask: int) -> list[int]:
    """The action instance indices set in ``mask``."""
    out, k = [], 0
    while mask:
        if mask & 1:
            out.append(k)
        mask >>= 1
        k += 1
    return out
