"""The spec language: its table of operations is complete in every evaluator (numpy, Z3, the
reference interpreter) and they agree on each operation; two-dimensional arrays, records and Case
flatten to the fields and operations the engines already know; the validation of names at load
time."""
import itertools
import subprocess
import sys

import numpy as np
import pytest

from kcheck.compile import CodeGen
from kcheck.layout import Layout, initial_words
from kcheck.ops import EVALUATORS, OPS
from kcheck.reference import evaluate as reference
from kcheck.spec.lang import (LEAVES, OPERATIONS, Array, Bool, Expr, If, Int, SpecError,
                              StateFields, StateView, const)


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
        g = CodeGen(lay, {"pre": "S"})
        r = g.expr(e)
        ns = {"np": np}
        exec("def f(S):\n" + "\n".join(g.lines) + f"\n    return {r}\n", ns)
        got = np.broadcast_to(ns["f"](words), (len(states),))
        want = [reference(e, v) for v in states]
        assert [int(v) for v in got] == [int(v) for v in want], e


@pytest.mark.parametrize("op", sorted(OPS))
def test_the_interval_of_an_operation_holds_every_value_it_takes(op):
    """The bound symbolic.value_range computes from the table (what sizes bmc's bit-vectors)."""
    from kcheck.symbolic import value_range
    ranges = [(f.type.lo, f.type.hi) for f in FIELDS.fields]
    states = _grid()
    for e in _instances()[op]:
        r = value_range(e, ranges, {}, [0, 0])
        values = [reference(e, v) for v in states]
        if e.kind == "bool":
            assert r is None
        else:
            assert r is not None and all(r[0] <= v <= r[1] for v in values), (e, r)


@pytest.mark.z3
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("bv", [None, 8])
def test_z3_agrees_with_the_reference_on_every_state(op, bv):
    import z3

    from kcheck.symbolic import Env, evaluate
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


# ---------------------------------------------------------------------------------------------
# Two-dimensional arrays, records and Case: the same protocol written flat (slot arithmetic,
# parallel arrays, nested Ifs) and structured has the same fields, layout, states and verdicts.

from pathlib import Path  # noqa: E402

from kcheck.bfs import search  # noqa: E402
from kcheck.layout import layout_of  # noqa: E402
from kcheck.loader import load_spec  # noqa: E402
from kcheck.reference import explore  # noqa: E402
from kcheck.trace import build, replay  # noqa: E402
from kcheck.spec.lang import Case, Enum, Record  # noqa: E402

LANG_SPECS = Path(__file__).resolve().parent / "specs_lang"
SIZES = [dict(members=2, partitions=2, max_epoch=3), dict(members=3, partitions=2, max_epoch=2),
         dict(members=2, partitions=3, max_epoch=2)]


def _pair(params):
    flat = load_spec(str(LANG_SPECS / "flat.py")).instantiate(None, params)
    structured = load_spec(str(LANG_SPECS / "records.py")).instantiate(None, params)
    return flat, structured


@pytest.mark.parametrize("params", SIZES)
def test_structured_fields_flatten_to_the_same_layout(params):
    flat, structured = _pair(params)
    a, b = layout_of(flat), layout_of(structured)
    assert (a.word, a.shift, a.width, a.words, a.bits) == (b.word, b.shift, b.width, b.words, b.bits)
    assert [f.type.kind for f in a.fields] == [f.type.kind for f in b.fields]
    assert initial_words(flat) == initial_words(structured)
    names = [f.name for f in b.fields]
    assert "owns[1][0]" in names and "request[0].present" in names and "request[1].epoch" in names


@pytest.mark.parametrize("params", SIZES)
def test_structured_spec_has_the_same_states_verdicts_and_traces(params):
    flat, structured = _pair(params)
    r, s = search(flat), search(structured)
    assert (r.distinct_states, r.transitions, r.depth) == (s.distinct_states, s.transitions, s.depth)
    assert r.distinct_states > 1000
    assert sorted(r.found) == sorted(s.found) == ["leader-owns-nothing", "request-to-fence"]
    for prop in r.found:
        fa, fb = r.found[prop], s.found[prop]
        assert (fa.initial, fa.steps) == (fb.initial, fb.steps)


@pytest.mark.parametrize("params", SIZES[:2])
def test_the_reference_interpreter_agrees_on_structured_fields(params):
    _, structured = _pair(params)
    states, transitions, _, exhaustive = explore(structured)
    r = search(structured, properties=[], deadlock=False)
    assert exhaustive and r.exhaustive
    assert (r.distinct_states, r.transitions) == (len(states), transitions)


def test_a_trace_of_a_structured_spec_shows_nested_values_and_replays():
    _, structured = _pair(SIZES[0])
    f = search(structured).found["leader-owns-nothing"]
    tr = build(structured, f.property, f.kind, f.initial, f.steps)
    doc = tr.to_json()
    first = structured.fields.show(list(structured.initial_states[0]))
    assert first["owns"] == [[False, False], [False, False]]
    assert first["request"] == [{"present": False, "epoch": 0}] * 2
    assert replay(structured, doc).ok


def test_case_takes_the_first_condition_that_holds():
    E = Enum("E", "NONE FENCED STALE")
    x = S.x
    e = Case((x < 0, E.FENCED), (x < 1, E.STALE), default=E.NONE)
    got = [reference(e, [v, 0, 0, 0]) for v in range(-2, 3)]
    assert got == [E.FENCED, E.FENCED, E.STALE, E.NONE, E.NONE]
    with pytest.raises(SpecError, match=r"each case is a pair \(condition, value\)"):
        Case(x < 0, default=E.NONE)


REC = StateFields({"r": Array(Record(present=Bool, epoch=Int(0, 3)), 2),
                   "grid": Array(Array(Int(0, 3), 3), 2), "i": Int(0, 2)})


def _transition():
    from kcheck.spec.lang import Params, Spec, Transition
    return Transition(REC, Params({}), "default", Spec("t"))


def test_expression_indices_on_both_dimensions_read_and_write_each_cell():
    t = _transition()
    t.grid[t.i][t.i] = 3          # the diagonal cell chosen by i
    for m in range(2):
        for q in range(3):
            got = [reference(t._current(REC.compound["grid"][m][q]), [0] * 4 + [0] * 6 + [i])
                   for i in range(3)]
            assert got == [3 if m == q == i else 0 for i in range(3)], (m, q)
    read = t.grid[t.i][1]
    # grid[i][1] for i = 0, 1 and past the end (the last row, as every evaluator reads it)
    flat = [0] * 4 + [0, 2, 0, 0, 3, 0] + [0]   # r, grid (grid[0][1] = 2, grid[1][1] = 3), i
    assert [reference(read, flat[:-1] + [i]) for i in range(3)] == [2, 3, 3]


@pytest.mark.parametrize("action, message", [
    (lambda t: t.r[0].__setattr__("epochs", 1), r"record r\[0\] has no member 'epochs'"),
    (lambda t: t.r.__setitem__(0, {"present": True}), "leaves out epoch"),
    (lambda t: t.grid.__setitem__(0, 1), r"cannot assign grid\[0\] as a whole, it is an array"),
    (lambda t: t.r.present, "r is not a record"),
    (lambda t: t.r[0][1], r"r\[0\] is not an array"),
    (lambda t: t.grid[2], r"index 2 out of range for grid\[0..1\]"),
])
def test_a_wrong_use_of_a_structured_field_is_one_line(action, message):
    with pytest.raises(SpecError, match=message) as e:
        action(_transition())
    assert "\n" not in str(e.value)


@pytest.mark.z3
def test_z3_finds_the_same_violations_in_the_structured_spec():
    from kcheck.symbolic import bmc
    flat, structured = _pair(SIZES[0])
    a = bmc(flat, depth=4, keep_search_bounds=True)
    b = bmc(structured, depth=4, keep_search_bounds=True)
    assert sorted(a.found) == sorted(b.found) == ["leader-owns-nothing", "request-to-fence"]
    assert len(a.found["request-to-fence"].path.steps) == len(b.found["request-to-fence"].path.steps) == 3
    assert len(a.found["leader-owns-nothing"].path.steps) == \
        len(b.found["leader-owns-nothing"].path.steps) == 1
    for prop in ("one-owner", "no-fencing-of-current", "shared-partition"):
        assert a.status(prop) == b.status(prop) != "violated"


# ---------------------------------------------------------------------------------------------
# sometimes: a scenario the spec relies on is reachable (the engines search for "never P")

def _reference_levels(model):
    """The reachable states level by level, by the plain interpreter."""
    from kcheck.reference import successors
    level = list(model.initial_states)
    seen, levels = set(level), []
    while level:
        levels.append(level)
        nxt = []
        for st in level:
            for _k, t, _o in successors(model, st):
                if t is not None and t not in seen:
                    seen.add(t)
                    nxt.append(t)
        level = nxt
    return levels


@pytest.mark.parametrize("name", ["flat", "records"])
def test_a_reachable_scenario_has_the_shortest_witness_and_it_replays(name):
    model = load_spec(str(LANG_SPECS / f"{name}.py")).instantiate(None, SIZES[0])
    prop = model.spec.properties["request-to-fence"]
    assert prop.kind == "sometimes" and prop in model.sometimes and prop not in model.invariants
    r = search(model)
    w = r.found["request-to-fence"]
    assert len(w.steps) == 3
    tr = build(model, w.property, w.kind, w.initial, w.steps)
    assert replay(model, tr.to_json()).ok
    # the reference interpreter: P holds first at depth 3, and at the witness's last state
    from kcheck.spec.lang import Not
    p_expr = Not(model.invariant_expr(prop))
    levels = _reference_levels(model)
    first = next(d for d, lv in enumerate(levels) if any(reference(p_expr, list(st)) for st in lv))
    assert first == 3


def test_an_unreachable_scenario_is_not_found_in_an_exhaustive_search():
    model = load_spec(str(LANG_SPECS / "records.py")).instantiate(None, SIZES[1])
    r = search(model)
    assert r.exhaustive and "shared-partition" not in r.found


# ---------------------------------------------------------------------------------------------
# Names checked when the spec is loaded: a one-line error naming the spec's file and line

TINY = '''from kcheck.spec.lang import Spec, Int
spec = Spec("tiny")
spec.param("top", 2, 1, 5)


@spec.state
def state(p):
    return {{"x": Int(0, 5)}}


@spec.init
def init(p):
    yield {{"x": 0}}


@spec.action
def Inc(s, p):
    s.require(s.x < p.top)
    s.x = s.x + 1
    {extra}


@spec.invariant("small")
def small(s, p):
    """x stays small."""
    return s.x <= p.top


@spec.sometimes("top-reached")
def top_reached(s, p):
    """x reaches the top."""
    return s.x == p.top


spec.variant("plain", "as is", default=True)
spec.variant("low", "a lower top")
{more}
'''


def _tiny(tmp_path, extra="", more=""):
    path = tmp_path / "tiny.py"
    path.write_text(TINY.format(extra=extra, more=more))
    return path


def _line(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("more, named, at", [
    ('spec.known_bug("KAFKA-1", "x", "abc", "C.m", variant="lwo", property="small")',
     "unknown variant 'lwo'", "spec.known_bug"),
    ('spec.known_bug("KAFKA-1", "x", "abc", "C.m", variant="low", property="smal")',
     "unknown property 'smal'", "spec.known_bug"),
    ('spec.known_bug("KAFKA-1", "x", "abc", "C.m", variant="low", property="small")',
     "does not record small as violated", "spec.known_bug"),
    ('spec.bounded("top-reachd", "why")', "'top-reachd'", "spec.bounded"),
    ('@spec.sometimes("small")\ndef again(s, p):\n    return s.x == 0',
     "'small' is declared twice", '@spec.sometimes("small")'),
])
def test_a_misspelled_name_is_one_line_naming_the_spec_line(tmp_path, more, named, at):
    path = _tiny(tmp_path, more=more)
    with pytest.raises(SpecError) as e:
        load_spec(str(path))
    msg = str(e.value)
    assert "\n" not in msg and named in msg and f"{path}:{_line(path, at)}" in msg, msg


def test_a_sometimes_property_may_be_recorded_as_not_reached_in_a_variant(tmp_path):
    path = _tiny(tmp_path, more='spec.variant("never", "x stays", violates=["top-reached"])')
    spec = load_spec(str(path))
    assert "top-reached" in spec.variants["never"].expected_violations


@pytest.mark.parametrize("extra", ['s.require(s.variant in ("lo", "plain"))',
                                   's.require(s.variant == "lo")'])
def test_a_comparison_of_the_variant_with_an_unknown_name_is_an_error(tmp_path, extra):
    path = _tiny(tmp_path, extra=extra)
    spec = load_spec(str(path))
    with pytest.raises(SpecError) as e:
        spec.instantiate("plain")
    msg = str(e.value)
    assert "'lo'" in msg and f"{path}:{_line(path, 's.variant')}" in msg and "plain, low" in msg


def test_the_state_graph_and_progress_verdicts_are_the_same_for_the_structured_spec():
    from kcheck.graph import build_graph, check_progress
    flat, structured = _pair(SIZES[0])
    a, b = build_graph(flat), build_graph(structured)
    assert (a.states, a.edges) == (b.states, b.edges) and a.states > 1000
    ra = check_progress(a, flat.spec.progress["request-answered"])
    rb = check_progress(b, structured.spec.progress["request-answered"])
    p = "request-answered"
    assert ra.status(p) == rb.status(p) == "violated"   # Receive is fair, but a new request may follow
    assert len(ra.lasso(p).steps) == len(rb.lasso(p).steps)


def test_the_result_says_reached_and_not_reached_and_compares_them_with_the_record():
    from kcheck.verdict import cell, differs_from_record, exit_code
    spec = load_spec(str(LANG_SPECS / "records.py"))
    r = search(spec.instantiate(None, SIZES[0]))
    assert r.status("request-to-fence") == "reached" and r.status("shared-partition") == "not-reached"
    assert r.status("leader-owns-nothing") == "violated"
    assert cell("reached", 3) == "reached (3 steps)" and cell("not-reached") == "NOT REACHED"
    # recorded: shared-partition is known not to be reached (violates=), request-to-fence is not
    assert differs_from_record(spec, "default", "request-to-fence", "reached") is None
    assert differs_from_record(spec, "default", "shared-partition", "not-reached") is None
    assert "is not reached but the record says it is" in \
        differs_from_record(spec, "default", "request-to-fence", "not-reached")
    assert "is reached but the record says it is not" in \
        differs_from_record(spec, "default", "shared-partition", "reached")
    assert exit_code({"request-to-fence": "reached"}, True) == 0
    assert exit_code({"request-to-fence": "not-reached"}, True) == 1


@pytest.mark.z3
def test_prove_leaves_a_sometimes_property_to_check_and_bmc(capsys):
    from kcheck.cli import main
    from kcheck.symbolic import provable_properties, prove
    model = load_spec(str(LANG_SPECS / "records.py")).instantiate(None, SIZES[0])
    assert "request-to-fence" not in provable_properties(model)
    assert "one-owner" in provable_properties(model)
    with pytest.raises(SpecError, match="request-to-fence is a sometimes property"):
        prove(model, "request-to-fence")
    code = main(["prove", str(LANG_SPECS / "records.py"), "--property", "request-to-fence"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "sometimes property" in err and "\n" not in err


def test_ci_outputs_pass_a_reached_scenario_and_fail_one_not_reached(tmp_path):
    import subprocess
    import sys
    import xml.etree.ElementTree as ET
    junit = tmp_path / "out.xml"
    root_dir = Path(__file__).resolve().parent.parent
    # the flat twin recorded with nothing expected: shared-partition (not reached) differs
    spec_path = tmp_path / "flat.py"
    spec_path.write_text((LANG_SPECS / "flat.py").read_text().replace(
        ', "shared-partition"])', '])'))
    r = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(spec_path),
                        "--junit", str(junit)], capture_output=True, text=True, cwd=root_dir,
                       timeout=600)
    assert r.returncode == 1, r.stderr
    cases = {tc.get("name"): tc for tc in ET.parse(junit).getroot().iter("testcase")}
    assert cases["request-to-fence"].find("failure") is None
    assert cases["request-to-fence"].find("skipped") is None
    failure = cases["shared-partition"].find("failure")
    assert failure is not None and "shared-partition is not reached" in failure.get("message")


@pytest.mark.parametrize("expect, ok", [
    ({"request": [{"present": True, "epoch": 0}, {"present": False, "epoch": 0}]}, True),
    ({"request": [{"present": True}, {}]}, True),               # some members only
    ({"request[0].present": True, "owns[1][0]": False}, True),  # flat names
    ({"owns": [[False, False], [False, False]]}, True),         # a whole 2-D array
    ({"request": [{"present": False}, {}]}, False),
    ({"owns": [[False, True], [False, False]]}, False),
])
def test_a_scenario_expects_nested_arrays_and_records(expect, ok):
    _, structured = _pair(SIZES[0])
    doc = {"kcheck_trace": 1, "spec": str(LANG_SPECS / "records.py"), "variant": "default",
           "params": SIZES[0], "steps": [{"action": "Send", "args": {"m": 0},
                                          "expect": {"state": expect}}]}
    from kcheck.trace import validate
    res = replay(structured, validate(doc))
    assert res.ok is ok, res.message


@pytest.mark.parametrize("decorator", ["invariant", "sometimes", "transition_property", "rule"])
def test_a_decorator_without_its_name_is_refused_at_the_spec_line(tmp_path, decorator):
    """@spec.invariant on a function (no name) registered nothing, and check said every
    property held, exit 0."""
    path = tmp_path / "unnamed.py"
    path.write_text("from kcheck import Spec, Int\nspec = Spec('unnamed')\n@spec.state\n"
                    "def state(p):\n    return {'x': Int(0, 1)}\n@spec.init\ndef init(p):\n"
                    "    yield {'x': 0}\n"
                    f"@spec.{decorator}\ndef small(s, p):\n    return s.x < 2\n")
    r = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (f"kcheck: error: {path}:9: @spec.{decorator} needs a name, e.g. "
                                f"@spec.{decorator}(\"my-property\"), before the function it "
                                f"decorates")


TINY_SYMMETRIC = (
    "from kcheck import Array, Int, Record, Spec\nspec = Spec('tiny')\n"
    "spec.param('n', 2, lo=1, hi=3)\n"
    "@spec.state\ndef state(p):\n"
    "    return {'x': Array(Int(0, 1), p.n), 'who': Array(Record(owner=Int(-1, 2)), 1)}\n"
    "@spec.init\ndef init(p):\n    yield {'x': [0] * p.n, 'who': [{'owner': -1}]}\n"
    "@spec.action(i=lambda p: range(p.n))\ndef Flip(s, p, i):\n    s.x[i] = 1 - s.x[i]\n")


@pytest.mark.parametrize("extra,message", [
    ("spec.symmetry('m', count=lambda p: p.n, arrays={'xx': 'slot'})\n",
     "symmetry m: arrays= names field 'xx' is not declared in spec tiny; valid: who, x"),
    ("spec.symmetry('m', count=lambda p: p.n, arrays={'x': 'slot'}, values=('whoo.owner',))\n",
     "symmetry m: values= names field 'whoo' is not declared in spec tiny; valid: who, x"),
    ("spec.symmetry('m', count=lambda p: p.n, arrays={'x': 'slot'}, values=('who.ownr',))\n",
     "symmetry m: values= names member of who 'ownr' is not declared in spec tiny; valid: owner"),
    ("@spec.transition_property('flips', actions=['Flip'])\n"
     "def flips(pre, post, action, args, outcome, p):\n    return action != 'Flp'\n",
     "the action of transition property flips compared with 'Flp', which is not an action of "
     "this spec"),
])
def test_a_misspelled_name_in_a_symmetry_or_a_transition_property_is_refused(tmp_path, extra,
                                                                            message):
    """Each made the declaration silently do nothing: a symmetry that reduced nothing (1.00x), a
    transition property that held because its comparison was always false."""
    path = tmp_path / "tiny.py"
    path.write_text(TINY_SYMMETRIC + extra)
    r = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert message in r.stderr and str(path) in r.stderr, r.stderr


@pytest.mark.parametrize("condition,refused", [
    ("s.a == s.b & s.c", True),
    ("s.a != s.b | s.c", True),
    ("s.a == (s.b & s.c)", False),
    ("(s.a == s.b) & s.c", False),
    ("And(s.a == s.b, s.c)", False),
])
def test_a_comparison_with_an_unparenthesised_and_or_is_refused(tmp_path, condition, refused):
    """In the language & is And: `a == b & c` is `a == (b & c)` to Python, a different condition
    from the one it reads as, and nothing is left of the parentheses at run time."""
    path = tmp_path / "precedence.py"
    path.write_text("from kcheck import And, Bool, Spec\nspec = Spec('precedence')\n"
                    "@spec.state\ndef state(p):\n"
                    "    return {'a': Bool, 'b': Bool, 'c': Bool}\n"
                    "@spec.init\ndef init(p):\n    yield {'a': False, 'b': False, 'c': False}\n"
                    "@spec.invariant('reads-as-written')\ndef reads(s, p):\n"
                    f"    return {condition}\n")
    r = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", str(path)],
                       capture_output=True, text=True)
    if not refused:
        assert r.returncode in (0, 1), r.stderr
        return
    assert r.returncode == 2 and "Traceback" not in r.stderr
    part = condition.split(" ", 2)[2]
    assert r.stderr.strip() == (
        f"kcheck: error: {path}:11: '{condition}' compares with '{part}': Python binds & and | "
        f"tighter than comparisons, so it reads '{condition.replace(part, f'({part})')}'; add the "
        f"parentheses you mean, or write And(...) / Or(...)")
