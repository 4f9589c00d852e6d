"""The spec language: its table of operations is complete in every evaluator (numpy, Z3, the
reference interpreter) and they agree on each operation; two-dimensional arrays, records and Case
flatten to the fields and operations the engines already know; the validation of names at load
time."""
import itertools

import numpy as np
import pytest

from checker.compile import _Gen
from checker.layout import Layout
from checker.ops import EVALUATORS, OPS
from checker.reference import evaluate as reference
from spec.lang import (LEAVES, OPERATIONS, Array, Bool, Expr, If, Int, SpecError, StateFields,
                       StateView, const)


def test_every_operation_of_the_language_has_a_row_with_every_evaluator():
    assert set(OPS) == set(OPERATIONS) - set(LEAVES)
    for name, row in OPS.items():
        for ev in EVALUATORS:
            assert callable(getattr(row, ev)), (name, ev)


def test_an_expression_of_an_unknown_operation_is_refused():
    with pytest.raises(SpecError, match="'xor' is not an operation of the language"):
        Expr("xor", (const(1), const(2)), "int")


# A small state of three integers and a boolean; each operation is applied to fields so that no
# constant folding hides it, and evaluated on every state of a grid.
FIELDS = StateFields({"x": Int(-2, 2), "y": Int(-2, 2), "z": Int(0, 2), "b": Bool})
S = StateView(FIELDS)


def _instances():
    """One expression per operation (several arities where it is variadic)."""
    x, y, z, b = S.x, S.y, S.z, S.b
    return {
        "add": [x + y], "sub": [x - y], "mul": [x * y],
        "eq": [x == y], "ne": [x != y], "lt": [x < y], "le": [x <= y],
        "and": [Expr("and", (b, x < y), "bool"), Expr("and", (b, x < y, z == 1), "bool")],
        "or": [Expr("or", (b, x < y), "bool"), Expr("or", (b, x < y, z == 1), "bool")],
        "not": [Expr("not", (b,), "bool")],
        "ite": [Expr("ite", (b, x, y), "int")],
        "min": [Expr("min", (x, y), "int")], "max": [Expr("max", (x, y), "int")],
        # z indexes 0..2 of three elements; x indexes past both ends (the last element is read)
        "select": [Expr("select", (z, x, y, z), "int"), Expr("select", (x, y, z), "int")],
    }


def _grid():
    ranges = [range(f.type.lo, f.type.hi + 1) for f in FIELDS.fields]
    return [list(v) for v in itertools.product(*ranges)]


def test_the_test_covers_every_operation():
    assert set(_instances()) == set(OPS)


@pytest.mark.parametrize("op", sorted(OPS))
def test_numpy_agrees_with_the_reference_on_every_state(op):
    lay = Layout(FIELDS)
    states = _grid()
    words = np.array([lay.pack_flat(v) for v in states], dtype=np.uint64).T
    for e in _instances()[op]:
        g = _Gen(lay, {"pre": "S"})
        r = g.expr(e)
        ns = {"np": np}
        exec("def f(S):\n" + "\n".join(g.lines) + f"\n    return {r}\n", ns)
        got = np.broadcast_to(ns["f"](words), (len(states),))
        want = [reference(e, v) for v in states]
        assert [int(v) for v in got] == [int(v) for v in want], e


@pytest.mark.z3
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("bv", [None, 8])
def test_z3_agrees_with_the_reference_on_every_state(op, bv):
    import z3

    from checker.symbolic import Env, evaluate
    states = _grid()
    for e in _instances()[op]:
        for v in states:
            pre = [z3.BoolVal(bool(x)) if f.type.kind == "bool" else
                   (z3.BitVecVal(x, bv) if bv else z3.IntVal(x)) for f, x in zip(FIELDS.fields, v)]
            term = z3.simplify(evaluate(e, Env(pre, bv=bv), "test"))
            want = reference(e, v)
            if isinstance(want, bool):
                assert z3.is_true(term) == want, (e, v)
            else:
                got = term.as_signed_long() if bv else term.as_long()
                assert got == want, (e, v)
