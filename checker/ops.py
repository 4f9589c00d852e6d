"""The operations of the spec language, one row each, with their meaning in every evaluator.

An expression tree (``spec.lang.Expr``) has two kinds of leaves, ``const`` and ``field``, whose
value depends on where it is evaluated (a Python value, a bit range of a packed word, a Z3
variable), and operations whose meaning is the same everywhere. Those are written here once, per
evaluator: ``python`` computes on Python values (checker/reference.py), ``numpy`` emits source
over the names of numpy arrays (checker/compile.py), ``z3`` builds a Z3 term, given the z3 module
first (checker/symbolic.py), ``interval`` bounds an integer result from its arguments' bounds
(checker/symbolic.py sizes its bit-vectors with it). Each evaluator walks the tree and looks an operation up here, so an
operation added to the language (``spec.lang.OPERATIONS``) without a row, or a row lacking an
evaluator, fails tests/test_lang.py instead of a run.

Semantics every evaluator shares: integers are unbounded mathematical integers (the packed
engines check ranges on write); the numpy code computes them in int64, exactly, because a node
whose interval (``interval``, from the fields' declared ranges) leaves int64 is refused as it is
built (``spec.lang.Expr``), ``select(i, e0, .., en)`` is element i and an index past either
end reads the last element (the numpy code's If-chain), ``ite`` is if-then-else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Op:
    python: Callable      # (*values) -> value
    numpy: Callable       # (*source strings) -> source string of a numpy expression
    z3: Callable          # (z3 module, *terms) -> term
    # (*intervals of the arguments, None for a condition) -> the result's (lo, hi), or None for
    # a condition: the interval arithmetic that sizes bmc's bit-vectors (symbolic.value_range)
    interval: Callable = lambda *_: None


def _hull(*xs):
    xs = [x for x in xs if x is not None]
    return (min(x[0] for x in xs), max(x[1] for x in xs)) if xs else None


def _mul_interval(x, y):
    ps = [x[0] * y[0], x[0] * y[1], x[1] * y[0], x[1] * y[1]]
    return (min(ps), max(ps))


def _select_python(i, *elems):
    return elems[i] if 0 <= i < len(elems) else elems[-1]


def _select_numpy(i, *elems):
    code = elems[-1]
    for k in range(len(elems) - 2, -1, -1):
        code = f"np.where({i} == {k}, {elems[k]}, {code})"
    return code


def _select_z3(z3, i, *elems):
    r = elems[-1]
    for k in range(len(elems) - 2, -1, -1):
        r = z3.If(i == k, elems[k], r)
    return r


def _binary(sym: str) -> Callable:
    return lambda x, y: f"{x} {sym} {y}"


OPS: dict[str, Op] = {
    "add": Op(lambda x, y: x + y, _binary("+"), lambda z3, x, y: x + y,
              lambda x, y: (x[0] + y[0], x[1] + y[1])),
    "sub": Op(lambda x, y: x - y, _binary("-"), lambda z3, x, y: x - y,
              lambda x, y: (x[0] - y[1], x[1] - y[0])),
    "mul": Op(lambda x, y: x * y, _binary("*"), lambda z3, x, y: x * y, _mul_interval),
    "eq": Op(lambda x, y: x == y, _binary("=="), lambda z3, x, y: x == y),
    "ne": Op(lambda x, y: x != y, _binary("!="), lambda z3, x, y: x != y),
    "lt": Op(lambda x, y: x < y, _binary("<"), lambda z3, x, y: x < y),
    "le": Op(lambda x, y: x <= y, _binary("<="), lambda z3, x, y: x <= y),
    "and": Op(lambda *xs: all(xs), lambda *xs: " & ".join(xs), lambda z3, *xs: z3.And(*xs)),
    "or": Op(lambda *xs: any(xs), lambda *xs: " | ".join(xs), lambda z3, *xs: z3.Or(*xs)),
    "not": Op(lambda x: not x, lambda x: f"~{x}", lambda z3, x: z3.Not(x)),
    "ite": Op(lambda c, t, o: t if c else o, lambda c, t, o: f"np.where({c}, {t}, {o})",
              lambda z3, c, t, o: z3.If(c, t, o), lambda c, t, o: _hull(t, o)),
    "min": Op(min, lambda x, y: f"np.minimum({x}, {y})", lambda z3, x, y: z3.If(x <= y, x, y),
              lambda x, y: (min(x[0], y[0]), min(x[1], y[1]))),
    "max": Op(max, lambda x, y: f"np.maximum({x}, {y})", lambda z3, x, y: z3.If(x >= y, x, y),
              lambda x, y: (max(x[0], y[0]), max(x[1], y[1]))),
    "select": Op(_select_python, _select_numpy, _select_z3, lambda i, *elems: _hull(*elems)),
}

EVALUATORS = ("python", "numpy", "z3", "interval")
