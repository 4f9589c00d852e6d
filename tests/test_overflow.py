"""Arithmetic at the 64-bit edges means one thing in every engine (issue 36).

The explicit search computes in numpy int64, which wraps silently; the reference interpreter
computes on Python integers and Z3 on exact integers or bit-vectors sized not to wrap. So every
node of an expression tree is bounded by interval arithmetic as it is built (``Expr.bounds``),
and a spec where some node's interval leaves -2^63..2^63-1 is refused at load, naming its line.
On every spec accepted, the three engines agree, value for value (docs/design.md, "Integers").
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kcheck.compile import CodeGen
from kcheck.layout import Layout
from kcheck.reference import evaluate as reference
from kcheck.spec.lang import (INT64_MAX, INT64_MIN, If, Int, Max, Min, SpecError, StateFields,
                              StateView, const)

ROOT = Path(__file__).resolve().parents[1]
SPECS = Path(__file__).resolve().parent / "specs_overflow"
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def run(*args, timeout=120):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def _refused(proc, spec: str, line: int, bounds: str):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr and len(err.splitlines()) == 1, err
    assert f"{spec}:{line}: mul(x, 4) can take values in {bounds}" in err, err
    assert "narrow the Int ranges" in err, err
    assert proc.stdout == "", proc.stdout


# ---------------------------------------------------------------------------------------------
# The three symptoms of the issue, now refused at load by every command

@pytest.mark.parametrize("command", ["check", "bmc", "prove"])
def test_an_invariant_that_would_wrap_is_refused_by_every_engine(command):
    """x*4 with x up to 2^62 is up to 2^64: check said "holds" (4 * 2^62 wrapped to 0), bmc and
    prove said VIOLATED. Now none gives a verdict: the spec is refused, at the line of x*4."""
    _refused(run(command, str(SPECS / "times_four.py")), "times_four.py", 21, "0..2^64")


def test_replaying_a_trace_of_a_spec_that_would_wrap_is_refused(tmp_path):
    """replay said bmc's trace "no longer violates" (the search's wrapped arithmetic judged it)."""
    trace = tmp_path / "small.json"
    trace.write_text(json.dumps({
        "kcheck_trace": 2, "spec": str(SPECS / "times_four.py"), "variant": "default",
        "params": {}, "state": {"x": 2**62}, "steps": [], "property": "small",
        "kind": "invariant"}))
    _refused(run("replay", str(trace)), "times_four.py", 21, "0..2^64")


def test_an_effect_that_would_wrap_is_refused():
    """y = x*4 with x = 2^62 printed `y: 1 -> 0`: the wrapped value was written to y."""
    _refused(run("check", str(SPECS / "scale_effect.py")), "scale_effect.py", 20, "0..2^64")


def test_arithmetic_at_the_edge_gets_one_verdict_from_check_bmc_and_replay(tmp_path):
    """3 * 2^61 fits in int64: check and bmc find the same two violations at the same depths,
    with the exact value written, and replay reproduces bmc's traces on the explicit engine."""
    spec = str(SPECS / "near_edge.py")
    verdicts = {}
    for command in ("check", "bmc"):
        out = tmp_path / command
        proc = run(command, spec, "--json", "--save", "--out", str(out))
        assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        results = json.loads(proc.stdout)
        results = results if isinstance(results, list) else [results]
        props = {}
        for r in results:
            for name, p in r["properties"].items():
                props[name] = (p["status"], p["trace_length"], p["trace"]["state"],
                               p["trace"]["steps"])
        verdicts[command] = props
    assert verdicts["check"] == verdicts["bmc"], verdicts
    assert {k: v[0] for k, v in verdicts["check"].items()} == {"small": "violated",
                                                               "y_small": "violated"}
    for name in ("small", "y_small"):
        trace = tmp_path / "bmc" / "near_edge" / "default" / f"{name}.json"
        proc = run("replay", str(trace))
        assert proc.returncode == 0 and "REPRODUCES" in proc.stdout, (proc.stdout, proc.stderr)
    assert "6917529027641081856" in (tmp_path / "bmc" / "near_edge" / "default" /
                                     "y_small.json").read_text()


# ---------------------------------------------------------------------------------------------
# Generated expressions over fields whose ranges sit at the int64 limits

EDGES = [INT64_MIN, INT64_MIN + 1, -(1 << 62), -(1 << 32), -3, -1, 0, 1, 2, 3, 1 << 31,
         (1 << 62) - 1, 1 << 62, INT64_MAX - 1, INT64_MAX]


@st.composite
def field_ranges(draw):
    """An Int range with an end at or near an int64 limit, spanning less than 2^63 values."""
    lo = draw(st.sampled_from(EDGES[:-1]))
    his = [h for h in EDGES if h >= lo and h - lo < 1 << 63]
    hi = draw(st.sampled_from(his))
    return lo, hi


CONSTANTS = st.sampled_from(EDGES + [1 << 63, -(1 << 63) - 1, 4, 1 << 61])


def trees(depth):
    """A small expression: ('field', name), ('const', v), a binary operation or an If."""
    leaf = st.one_of(st.tuples(st.just("field"), st.sampled_from("xyz")),
                     st.tuples(st.just("const"), CONSTANTS))
    if depth == 0:
        return leaf
    sub = trees(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["add", "sub", "mul", "min", "max"]), sub, sub),
        st.tuples(st.just("neg"), sub),
        st.tuples(st.just("ite"), sub, sub, sub, sub),   # If(a < b, then, else)
    )


def build(t, s):
    """The tree as a spec writes it, through the language's operators and helpers."""
    op = t[0]
    if op == "field":
        return getattr(s, t[1])
    if op == "const":
        return t[1]
    args = [build(x, s) for x in t[1:]]
    if op == "neg":
        return -args[0]
    if op == "ite":
        return If(args[0] < args[1], args[2], args[3])
    a, b = args
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "min": lambda: Min(a, b), "max": lambda: Max(a, b)}[op]()


def truth(t, values):
    """The exact value, on Python integers."""
    op = t[0]
    if op == "field":
        return values[t[1]]
    if op == "const":
        return t[1]
    a = [truth(x, values) for x in t[1:]]
    if op == "neg":
        return -a[0]
    if op == "ite":
        return a[2] if a[0] < a[1] else a[3]
    return {"add": a[0] + a[1], "sub": a[0] - a[1], "mul": a[0] * a[1],
            "min": min(a), "max": max(a)}[op]


def widest(t, ranges, out):
    """The language's nodes for tree t, written afresh here: appends to ``out`` the interval of
    every node the language builds, and returns ('py', value) for a subtree Python computes alone
    (no node is built), ('const', value) for one the language folds to a constant node, else
    ('expr', interval)."""
    op = t[0]
    if op == "field":
        out.append(ranges[t[1]])
        return ("expr", ranges[t[1]])
    if op == "const":
        return ("py", t[1])
    a = [widest(x, ranges, out) for x in t[1:]]

    def node(x):
        """An argument as the language takes it: a Python integer becomes a constant node."""
        if x[0] == "py":
            out.append((x[1], x[1]))
            return ("const", x[1])
        return x

    def interval(x):
        return (x[1], x[1]) if x[0] == "const" else x[1]

    if op in ("add", "sub", "mul", "neg") and all(x[0] == "py" for x in a):
        return ("py", _python(op, [x[1] for x in a]))
    if op == "ite":
        if a[0][0] == "py" and a[1][0] == "py":   # Python compares, the language never sees it
            cond = a[0][1] < a[1][1]
        else:
            c = [node(a[0]), node(a[1])]
            cond = c[0][1] < c[1][1] if all(x[0] == "const" for x in c) else None
        t_, o_ = node(a[2]), node(a[3])
        if cond is not None:     # If folds to the branch taken
            return t_ if cond else o_
        ti, oi = interval(t_), interval(o_)
        r = (min(ti[0], oi[0]), max(ti[1], oi[1]))
    else:
        x = [node(v) for v in a]
        if all(v[0] == "const" for v in x):      # folded to a constant node
            v = _python(op, [v[1] for v in x])
            out.append((v, v))
            return ("const", v)
        x = [interval(v) for v in x]
        if op == "neg":
            r = (-x[0][1], -x[0][0])
        elif op == "add":
            r = (x[0][0] + x[1][0], x[0][1] + x[1][1])
        elif op == "sub":
            r = (x[0][0] - x[1][1], x[0][1] - x[1][0])
        elif op == "mul":
            ps = [p * q for p in x[0] for q in x[1]]
            r = (min(ps), max(ps))
        elif op == "min":
            r = (min(x[0][0], x[1][0]), min(x[0][1], x[1][1]))
        else:
            r = (max(x[0][0], x[1][0]), max(x[0][1], x[1][1]))
    out.append(r)
    return ("expr", r)


def _python(op, a):
    return {"add": lambda: a[0] + a[1], "sub": lambda: a[0] - a[1], "mul": lambda: a[0] * a[1],
            "neg": lambda: -a[0], "min": lambda: min(a), "max": lambda: max(a)}[op]()


@st.composite
def cases(draw):
    ranges = {n: draw(field_ranges()) for n in "xyz"}
    tree = draw(trees(3))
    # states at the corners of the ranges and inside them
    states = [{n: draw(st.one_of(st.sampled_from(ranges[n]), st.integers(*ranges[n])))
               for n in "xyz"} for _ in range(4)]
    return ranges, tree, states


def _numpy_values(e, fields, states):
    lay = Layout(fields)
    words = np.array([lay.pack_flat([st[f.name] for f in fields.fields]) for st in states],
                     dtype=np.uint64).T
    g = CodeGen(lay, {"pre": "S"})
    r = g.expr(e)
    ns = {"np": np}
    exec("def f(S):\n" + "\n".join(g.lines or ["    pass"]) + f"\n    return {r}\n", ns)
    got = np.broadcast_to(ns["f"](words), (len(states),))
    return [int(v) for v in got]


def _z3_values(e, fields, states, bv):
    import z3

    from kcheck.symbolic import Env, evaluate
    out = []
    for st_ in states:
        pre = [z3.BitVecVal(st_[f.name], bv) if bv else z3.IntVal(st_[f.name])
               for f in fields.fields]
        term = z3.simplify(evaluate(e, Env(pre, bv=bv), "test"))
        out.append(term.as_signed_long() if bv else term.as_long())
    return out


@pytest.mark.z3
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_engines_agree_at_the_int64_edges_and_refuse_exactly_what_would_leave_it(case):
    """A spec is refused exactly when some node's interval leaves int64; when it is accepted,
    the numpy code, the reference interpreter and Z3 (integers, and 64-bit vectors) give the
    exact value on every state."""
    ranges, tree, states = case
    fields = StateFields({n: Int(*ranges[n]) for n in "xyz"})
    intervals = []
    root = widest(tree, ranges, intervals)
    if root[0] == "py":   # the constant the language meets as const(...)
        intervals.append((root[1], root[1]))
    leaves = any(lo < INT64_MIN or hi > INT64_MAX for lo, hi in intervals)
    try:
        # a tree of constants is folded by Python: it meets the language as one constant
        e = const(build(tree, StateView(fields)))
    except SpecError as err:
        assert leaves, (tree, ranges, err)
        event("refused")
        assert "beyond the 64-bit integers" in str(err) and "test_overflow.py:" in str(err)
        return
    assert not leaves, (tree, ranges)
    event("accepted")
    want = [truth(tree, st_) for st_ in states]
    flat = [[st_[f.name] for f in fields.fields] for st_ in states]
    assert [int(reference(e, v)) for v in flat] == want, tree
    assert _numpy_values(e, fields, states) == want, tree
    assert _z3_values(e, fields, states, None) == want, tree
    assert _z3_values(e, fields, states, 64) == want, tree


def test_a_constant_beyond_int64_is_refused_at_its_line():
    s = StateView(StateFields({"x": Int(0, 3)}))
    with pytest.raises(SpecError, match=r"test_overflow.py:\d+: the constant 18446744073709551616 "
                                        r"can take values in 2\^64..2\^64"):
        s.x < 2**64


def test_min_and_max_bound_an_argument_tightly():
    """The refusal's advice works: Min(x, 10) * 4 is at most 40 whatever x's range."""
    s = StateView(StateFields({"x": Int(0, 2**62)}))
    assert (Min(s.x, 10) * 4).bounds == (0, 40)
    assert (Max(s.x, -10) * -1).bounds == (-(2**62), 0)
    with pytest.raises(SpecError, match="beyond the 64-bit integers"):
        Max(s.x, 10) * 4
