"""The kcheck spec language.

A spec is a Python module holding one ``Spec`` object named ``spec``. Guards, effects and
properties are ordinary Python functions, but they do not compute on values: they build
expression trees (``Expr``) once per action instance. The engines compile those trees, to
vectorised numpy code for the explicit search and to Z3 terms for the symbolic engine, so a
rule is written exactly once. Branching on a *state* value must therefore go through the
helpers ``If``, ``And``, ``Or``, ``Not``, ``Implies``, ``Min``, ``Max``; branching on action
arguments, parameters and the variant is plain Python. See docs/design.md.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from kcheck.ops import OPS


class SpecError(Exception):
    """A mistake in a spec or in how it is used; the message is one line for the user."""


# ---------------------------------------------------------------------------------------------
# Types of state fields

class FieldType:
    kind = "int"  # 'int' or 'bool'
    lo = 0
    hi = 0
    search_bound = False
    epoch = None  # the order-only domain of an Int (Epoch), or None

    def bits(self) -> int:
        return max(1, (self.hi - self.lo).bit_length())

    def check(self, value) -> int:
        raise NotImplementedError

    def show(self, value: int) -> Any:
        return value


class Epoch:
    """An order-only domain of integers (``spec.epoch``): its values are only compared (``<``,
    ``<=``, ``==``, ``!=``) with one another or with its sentinels, incremented by one and
    assigned to fields of the same domain. Every expression that does anything else with one is
    refused where the spec builds it. The explicit search may then store a state with the
    domain's values renumbered by rank (checker/quotient.py): a verdict for every value."""

    def __init__(self, name: str, sentinels: tuple[int, ...], doc: str, line: str,
                 cap: str | None = None):
        self.name, self.sentinels, self.doc, self.line = name, tuple(sorted(sentinels)), doc, line
        self.cap = cap      # the parameter that caps the domain's fields, if one does

    def __repr__(self):
        return f"Epoch({self.name!r}, sentinels={self.sentinels})"


class Int(FieldType):
    """An integer in lo..hi. With search_bound=True the range is a bound of the explicit search
    (e.g. an epoch cap): a transition leaving it is cut, not an error, and the symbolic engine
    lifts it."""

    def __init__(self, lo: int, hi: int, search_bound: bool = False, epoch: "Epoch | None" = None):
        if epoch is not None and not isinstance(epoch, Epoch):
            raise SpecError(f"Int(..., epoch={epoch!r}): give the domain spec.epoch(...) returned "
                            f"(at {_user_frame()})")
        for v in (lo, hi):
            if isinstance(v, bool) or not isinstance(v, int):
                raise SpecError(f"Int({lo!r}, {hi!r}): bounds must be integers (at {_user_frame()})")
        if hi < lo:
            raise SpecError(f"Int({lo}, {hi}): empty range (at {_user_frame()})")
        # a value is packed as hi-lo bits of one 64-bit word and computed on as a signed 64-bit
        # integer: both must fit
        if lo < -(1 << 63) or hi >= 1 << 63 or hi - lo >= 1 << 63:
            raise SpecError(f"Int({lo}, {hi}): the range must lie in -2^63..2^63-1 and span less "
                            f"than 2^63 values (at {_user_frame()})")
        self.lo, self.hi, self.search_bound, self.epoch = lo, hi, search_bound, epoch

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or not self.lo <= value <= self.hi:
            raise SpecError(f"value {value!r} is not an integer in {self.lo}..{self.hi}")
        return value

    def __repr__(self):
        return (f"Int({self.lo}, {self.hi}{', search_bound=True' if self.search_bound else ''}"
                f"{f', epoch={self.epoch.name}' if self.epoch is not None else ''})")


class _Bool(FieldType):
    kind = "bool"
    lo, hi = 0, 1

    def check(self, value):
        if not isinstance(value, bool):
            raise SpecError(f"value {value!r} is not a bool")
        return int(value)

    def show(self, value):
        return bool(value)

    def __repr__(self):
        return "Bool"


Bool = _Bool()


class EnumValue(int):
    """A named constant of an Enum; an int underneath so that it packs and compares."""
    enum: "Enum"

    def __new__(cls, enum: "Enum", name: str, value: int):
        obj = int.__new__(cls, value)
        obj.enum, obj.name = enum, name
        return obj

    def __repr__(self):
        return self.name

    __str__ = __repr__

    # int's own ==/!= would swallow comparisons with expressions
    def __eq__(self, other):
        if isinstance(other, Expr):
            return other.__eq__(self)
        return int(self) == other

    def __ne__(self, other):
        if isinstance(other, Expr):
            return other.__ne__(self)
        return int(self) != other

    __hash__ = int.__hash__


class Enum(FieldType):
    """A small enumeration: Enum("TMState", "init committed aborted")."""

    def __init__(self, name: str, names: str | Iterable[str]):
        self.name = name
        self.names = names.split() if isinstance(names, str) else list(names)
        self.values = [EnumValue(self, n, i) for i, n in enumerate(self.names)]
        self.lo, self.hi = 0, max(0, len(self.names) - 1)
        for v in self.values:
            setattr(self, v.name, v)

    def check(self, value):
        if isinstance(value, EnumValue) and value.enum is self:
            return int(value)
        if isinstance(value, str) and value in self.names:
            return self.names.index(value)
        raise SpecError(f"value {value!r} is not one of {self.name}: {', '.join(self.names)}")

    def show(self, value):
        return self.names[value] if 0 <= value < len(self.names) else value

    def __getitem__(self, name: str) -> EnumValue:
        return self.values[self.names.index(name)]

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"Enum({self.name})"


@dataclass
class Array:
    """A fixed-size array, indexed 0..size-1 (members, partitions, ...), of a field type, of
    arrays (``Array(Array(Bool, partitions), members)`` is read ``s.owns[m][q]``) or of records."""
    of: "FieldType | Array | Record"
    size: int

    def __post_init__(self):
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise SpecError(f"Array(..., {self.size!r}): the size must be a positive integer "
                            f"(at {_user_frame()})")
        if not isinstance(self.of, (FieldType, Array, Record)):
            raise SpecError(f"Array({self.of!r}, ...): elements must be Int, Bool, an Enum, an "
                            f"Array or a Record (at {_user_frame()})")


class Record:
    """Named fields that belong together, e.g. a request in flight:
    ``Record(epoch=Int(0, 3), owned=Array(Bool, 2), error=Error)``, read ``s.request[m].epoch``.
    Stored as one field per member, so it costs nothing over parallel arrays."""

    def __init__(self, **members):
        if not members:
            raise SpecError(f"Record(): give at least one member (at {_user_frame()})")
        for name, t in members.items():
            if not isinstance(t, (FieldType, Array, Record)):
                raise SpecError(f"Record member '{name}' has type {t!r}: use Int, Bool, an Enum, "
                                f"an Array or a Record (at {_user_frame()})")
        self.members = dict(members)

    def __repr__(self):
        return f"Record({', '.join(f'{k}={v!r}' for k, v in self.members.items())})"


# ---------------------------------------------------------------------------------------------
# Expressions

# The operations an expression tree is made of. The leaves take their value from where the tree
# is evaluated; the others mean the same in every evaluator (checker/ops.py holds each one's
# implementation per evaluator, and a test checks that none is missing).
LEAVES = ("const", "field")
OPERATIONS = LEAVES + ("add", "sub", "mul", "eq", "ne", "lt", "le", "and", "or", "not", "ite",
                       "min", "max", "select")
_OPERATIONS = frozenset(OPERATIONS)


# The integers every engine can compute on: the explicit search's numpy code is 64-bit (it would
# wrap silently past them), so no value of any node may leave them (docs/design.md, "Integers")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Expr:
    """A node of an expression tree over state fields. ``op`` names the operation.

    ``bounds`` is the interval (lo, hi) of the values an integer node takes when every field it
    reads lies in its declared range (interval arithmetic, OPS[op].interval), None for a
    condition or where a leaf's range is unknown (a field built without one). It is computed
    once, as the node is built, and a node whose interval leaves the 64-bit integers is refused
    there, naming the spec's line: no engine then meets a value it would wrap."""
    __slots__ = ("op", "args", "kind", "enum", "bounds", "epoch", "depth")

    def __init__(self, op: str, args: tuple, kind: str, enum: Enum | None = None,
                 bounds: tuple[int, int] | None = None, epoch: tuple | None = None):
        if op not in _OPERATIONS:
            # an operation no evaluator knows would fail only when an engine meets it
            raise SpecError(f"{_user_frame()}: '{op}' is not an operation of the language; "
                            f"operations: {', '.join(OPERATIONS)}")
        self.op, self.args, self.kind, self.enum = op, args, kind, enum
        # the longest path to a leaf: every engine walks the tree recursively, so a deep one
        # (an invariant summing 600 terms in a loop) raises Python's recursion limit first
        self.depth = 1 + max((a.depth for a in args if isinstance(a, Expr)), default=0)
        if self.depth > _recursion_room[0]:
            _make_room(self)
        if kind == "int" and bounds is None:
            bounds = _bounds(op, args)
        if bounds is not None and (bounds[0] < INT64_MIN or bounds[1] > INT64_MAX):
            _too_wide(self, bounds)
        self.bounds = bounds
        # (Epoch, offset): a value of an order-only domain, plus 0 or 1 (see _epoch_of)
        self.epoch = epoch

    __hash__ = object.__hash__

    def __bool__(self):
        raise SpecError(
            "a state value was used in a Python 'if', 'and', 'or' or 'not' "
            f"(at {_user_frame()}): use If(...), And(...), Or(...), Not(...) instead")

    # arithmetic
    def __add__(self, o): return _arith("add", self, o)
    def __radd__(self, o): return _arith("add", o, self)
    def __sub__(self, o): return _arith("sub", self, o)
    def __rsub__(self, o): return _arith("sub", o, self)
    def __mul__(self, o): return _arith("mul", self, o)
    def __rmul__(self, o): return _arith("mul", o, self)
    def __neg__(self): return _arith("sub", 0, self)

    # comparisons
    def __eq__(self, o): return _cmp("eq", self, o)
    def __ne__(self, o): return _cmp("ne", self, o)
    def __lt__(self, o): return _cmp("lt", self, o)
    def __le__(self, o): return _cmp("le", self, o)
    def __gt__(self, o): return _cmp("lt", o, self)
    def __ge__(self, o): return _cmp("le", o, self)

    # boolean connectives as operators, for brevity in specs
    def __and__(self, o): return And(self, o)
    def __rand__(self, o): return And(o, self)
    def __or__(self, o): return Or(self, o)
    def __ror__(self, o): return Or(o, self)
    def __invert__(self): return Not(self)

    def __repr__(self):
        if self.op == "const":
            return repr(self.args[0])
        if self.op == "field":
            return self.args[1]
        return f"{self.op}({', '.join(map(repr, self.args))})"


def _bounds(op: str, args: tuple) -> tuple[int, int] | None:
    """The interval of an integer node from its arguments' (None when one is unknown)."""
    if op == "const":
        return (int(args[0]), int(args[0]))
    if op == "field":
        return None     # a field read knows its range where it is built (StateView._read)
    sub = []
    for x in args:
        if x.kind == "int" and x.bounds is None:
            return None
        sub.append(x.bounds)
    return OPS[op].interval(*sub)


def _shown(lo: int, hi: int) -> str:
    def one(v):
        a = abs(v)
        if a >= 1 << 32 and a & (a - 1) == 0:   # a power of two, as the limits are written
            return f"{'-' if v < 0 else ''}2^{a.bit_length() - 1}"
        return str(v)
    return f"{one(lo)}..{one(hi)}"


# An expression may nest this many operations deep. Each engine's walk takes a few Python frames
# per level (the numpy compiler, Z3's translation, the reference interpreter, the interval
# analysis), so the recursion limit is raised to match as deeper trees are built; past this the
# spec is refused at the line that built it rather than risk the interpreter's own stack.
MAX_NESTING = 5_000
_FRAMES_PER_LEVEL = 8
_recursion_room = [(sys.getrecursionlimit() - 200) // _FRAMES_PER_LEVEL]


def _make_room(e: Expr):
    if e.depth > MAX_NESTING:
        raise SpecError(f"{_user_frame()}: an expression nested {e.depth} operations deep (more "
                        f"than {MAX_NESTING}); write a long sum as Sum(...) and a long conjunction as "
                        f"And(...), which do not nest term by term")
    _recursion_room[0] = min(max(_recursion_room[0] * 2, e.depth), MAX_NESTING)
    sys.setrecursionlimit(max(sys.getrecursionlimit(),
                              _recursion_room[0] * _FRAMES_PER_LEVEL + 200))


def _too_wide(e: Expr, bounds: tuple[int, int]):
    text = repr(e) if e.op != "const" else f"the constant {e.args[0]}"
    if len(text) > 80:
        text = text[:77] + "..."
    raise SpecError(
        f"{_user_frame()}: {text} can take values in {_shown(*bounds)}, beyond the 64-bit "
        f"integers (-2^63..2^63-1) the engines compute with: narrow the Int ranges of the "
        f"fields it reads, or bound an argument with Min/Max")


def _named(decorator: str, name) -> None:
    """A decorator that takes the property's or rule's name, used without it (``@spec.invariant``
    on a function) would register nothing and every verdict would read "holds"."""
    if not isinstance(name, str) or not name:
        raise SpecError(f"{_user_frame()}: @spec.{decorator} needs a name, e.g. "
                        f"@spec.{decorator}(\"my-property\"), before the function it decorates")


_LANG = __file__


def _kchecks_own(filename: str) -> bool:
    """A frame of kcheck itself (this module, the engines, the command line and what starts it:
    the console script, `python -c`), as opposed to a spec's (a shipped spec counts as one)."""
    if filename == _LANG or filename.startswith("<") or filename == sys.argv[0]:
        return True
    engines = sys.modules.get("kcheck")
    root = getattr(engines, "__file__", None)
    if root is None:
        return False
    root = root.rsplit("/", 1)[0] + "/"          # kcheck's engines: checker/, or kcheck/ installed
    specs = _LANG.rsplit("/", 1)[0] + "/"        # the shipped specs: spec/, or kcheck/spec/
    return filename.startswith(root) and not filename.startswith(specs)


def _user_frame() -> str:
    """'file:line' of the innermost frame that is the spec's (the line that declared or used
    what is wrong), or '?' when the spec is not on the stack."""
    # frames walked, not inspect.stack(): that reads every frame's source file, which made
    # loading the shipped specs cost 1.0 s of CPU instead of 0.13 s (every kcheck process pays it)
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _kchecks_own(name):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


TRUE = Expr("const", (True,), "bool")
FALSE = Expr("const", (False,), "bool")


def const(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return TRUE if value else FALSE
    if isinstance(value, EnumValue):
        return Expr("const", (int(value),), "int", value.enum)
    if isinstance(value, int):
        return Expr("const", (value,), "int")
    raise SpecError(f"{value!r} ({type(value).__name__}) cannot be used in a state expression "
                    f"(at {_user_frame()})")


def is_const(e: Expr) -> bool:
    return e.op == "const"


def _arith(op, a, b) -> Expr:
    a, b = const(a), const(b)
    if a.kind != "int" or b.kind != "int":
        raise SpecError(f"arithmetic on a boolean (at {_user_frame()})")
    if is_const(a) and is_const(b):
        x, y = a.args[0], b.args[0]
        return const({"add": x + y, "sub": x - y, "mul": x * y}[op])
    if a.epoch is not None or b.epoch is not None:
        return Expr(op, (a, b), "int", epoch=_epoch_plus_one(op, a, b))
    return Expr(op, (a, b), "int")


def _cmp(op, a, b) -> Expr:
    a, b = const(a), const(b)
    if is_const(a) and is_const(b):
        x, y = a.args[0], b.args[0]
        return const({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y}[op])
    if op in ("lt", "le") and (a.kind != "int" or b.kind != "int"):
        raise SpecError(f"ordering comparison on a boolean (at {_user_frame()})")
    if a.epoch is not None or b.epoch is not None:
        _epoch_of((a, b), {"eq": "==", "ne": "!=", "lt": "<", "le": "<="}[op] + " (or its converse)")
    return Expr(op, (a, b), "bool")


# ---------------------------------------------------------------------------------------------
# Order-only domains (Epoch): what an expression may do with their values. A value of a domain
# carries (Epoch, offset) in Expr.epoch, offset 0 or 1 (the value + 1); a constant is allowed
# beside one only when it is one of the domain's sentinels. The engines rely on these rules to
# renumber the domain's values by rank (checker/quotient.py; docs/design.md, "Exact quotients
# over order-only domains").

def _describe(e: Expr) -> str:
    return f"{e.epoch[0].name} value {e!r}" if e.epoch is not None else repr(e)


def _epoch_refused(why: str) -> SpecError:
    return SpecError(f"{_user_frame()}: {why}")


def _epoch_of(values, what: str) -> tuple | None:
    """(Epoch, offset) of an expression made of ``values`` by ``what`` (a comparison, an If, Min,
    Max, a select), which preserves order: every value of the same domain, or a constant that is
    one of its sentinels. Refused otherwise."""
    domains = [v.epoch for v in values if v.epoch is not None]
    if not domains:
        return None
    epoch = domains[0][0]
    for v in values:
        if v.epoch is not None:
            if v.epoch[0] is not epoch:
                raise _epoch_refused(f"{what} mixes {epoch.name} and {v.epoch[0].name} values "
                                     f"({values[0]!r}, {values[1]!r}): each domain is only "
                                     f"compared with itself")
        elif is_const(v):
            if v.args[0] not in epoch.sentinels:
                raise _epoch_refused(
                    f"{what} between a value of {epoch.name} and the literal {v.args[0]}, which is not "
                    f"a declared sentinel of {epoch.name} ({', '.join(map(str, epoch.sentinels)) or 'none'}"
                    f"): compare {epoch.name} values only with each other or a sentinel")
        else:
            raise _epoch_refused(f"{what} between a value of {epoch.name} and {v!r}, which is "
                                 f"not one: {epoch.name} values are order-only")
    return (epoch, max(d[1] for d in domains))


def _epoch_plus_one(op: str, a: Expr, b: Expr) -> tuple:
    """``value + 1`` is the one arithmetic allowed on a domain value."""
    x, one = (a, b) if a.epoch is not None else (b, a)
    epoch = x.epoch[0]
    if op == "add" and is_const(one) and one.args[0] == 1 and one.epoch is None:
        if x.epoch[1]:
            raise _epoch_refused(f"{x!r} + 1: a value of {epoch.name} may take +1 once, not twice "
                                 f"(the renumbering keeps gaps of 1 and 2 apart only)")
        return (epoch, 1)
    sym = {"add": "+", "sub": "-", "mul": "*"}[op]
    raise _epoch_refused(f"{a!r} {sym} {b!r}: {epoch.name} values are order-only; the one "
                         f"arithmetic allowed is + 1 (declare the field outside the domain, or "
                         f"rewrite with a sentinel)")


def _epoch_store(field_name: str, field_epoch, value: Expr):
    """Assigning ``value`` to a field: a domain's field takes a value of its domain (+1 allowed)
    or a sentinel; a field outside it never takes one of its values."""
    if field_epoch is None:
        if value.epoch is not None:
            raise _epoch_refused(f"{field_name} := {value!r}: a value of {value.epoch[0].name} "
                                 f"stored in a field outside the domain (declare the field "
                                 f"with epoch={value.epoch[0].name})")
        return
    if value.epoch is not None:
        if value.epoch[0] is not field_epoch:
            raise _epoch_refused(f"{field_name} := {value!r}: a value of {value.epoch[0].name} "
                                 f"stored in a field of {field_epoch.name}")
        return
    if is_const(value) and value.args[0] in field_epoch.sentinels:
        return
    raise _epoch_refused(f"{field_name} := {value!r}: a field of {field_epoch.name} takes a "
                         f"value of {field_epoch.name}, that value + 1, or a sentinel "
                         f"({', '.join(map(str, field_epoch.sentinels)) or 'none declared'})")


def _as_bool(x) -> Expr:
    e = const(x)
    if e.kind != "bool":
        raise SpecError(f"expected a condition, got an integer expression {e!r} (at {_user_frame()})")
    return e


def And(*xs) -> Expr:
    args = []
    for x in xs:
        e = _as_bool(x)
        if e is FALSE or (is_const(e) and not e.args[0]):
            return FALSE
        if is_const(e):
            continue
        args.extend(e.args if e.op == "and" else (e,))
    if not args:
        return TRUE
    return args[0] if len(args) == 1 else Expr("and", tuple(args), "bool")


def Or(*xs) -> Expr:
    args = []
    for x in xs:
        e = _as_bool(x)
        if is_const(e) and e.args[0]:
            return TRUE
        if is_const(e):
            continue
        args.extend(e.args if e.op == "or" else (e,))
    if not args:
        return FALSE
    return args[0] if len(args) == 1 else Expr("or", tuple(args), "bool")


def Not(x) -> Expr:
    e = _as_bool(x)
    if is_const(e):
        return const(not e.args[0])
    if e.op == "not":
        return e.args[0]
    return Expr("not", (e,), "bool")


def Implies(a, b) -> Expr:
    return Or(Not(a), b)


def If(cond, then, other) -> Expr:
    c, t, o = _as_bool(cond), const(then), const(other)
    if t.kind != o.kind:
        raise SpecError(f"If branches differ in kind ({t.kind} vs {o.kind}) (at {_user_frame()})")
    epoch = _epoch_of((t, o), "If") if t.epoch is not None or o.epoch is not None else None
    if is_const(c):
        return t if c.args[0] else o
    if t is o:
        return t
    return Expr("ite", (c, t, o), t.kind, t.enum or o.enum, epoch=epoch)


def Case(*cases, default) -> Expr:
    """The value of the first case whose condition holds, else ``default``: Kafka's order of error
    checks, e.g. ``Case((fenced, Error.FENCED_MEMBER_EPOCH), (stale, Error.STALE_MEMBER_EPOCH),
    default=Error.NONE)``. Each case is a pair (condition, value)."""
    for c in cases:
        if not isinstance(c, tuple) or len(c) != 2:
            raise SpecError(f"Case: each case is a pair (condition, value), got {c!r} "
                            f"(at {_user_frame()})")
    out = const(default)
    for cond, value in reversed(cases):
        out = If(cond, value, out)
    return out


def Min(a, b) -> Expr:
    a, b = const(a), const(b)
    if is_const(a) and is_const(b):
        return const(min(a.args[0], b.args[0]))
    epoch = _epoch_of((a, b), "Min") if a.epoch is not None or b.epoch is not None else None
    return Expr("min", (a, b), "int", epoch=epoch)


def Max(a, b) -> Expr:
    a, b = const(a), const(b)
    if is_const(a) and is_const(b):
        return const(max(a.args[0], b.args[0]))
    epoch = _epoch_of((a, b), "Max") if a.epoch is not None or b.epoch is not None else None
    return Expr("max", (a, b), "int", epoch=epoch)


def Sum(*terms) -> Expr:
    """The sum of the terms, nested by halves: a sum of n terms is log2(n) additions deep, where
    a loop of ``total = total + t`` is n deep (see MAX_NESTING)."""
    if not terms:
        return const(0)
    if len(terms) == 1:
        return const(terms[0])
    half = len(terms) // 2
    return Sum(*terms[:half]) + Sum(*terms[half:])


def Count(*conds) -> Expr:
    """The number of the conditions that hold."""
    return Sum(*[If(c, 1, 0) for c in conds])


def Exists(items, pred: Callable) -> Expr:
    return Or(*[pred(i) for i in items])


def Forall(items, pred: Callable) -> Expr:
    return And(*[pred(i) for i in items])


# ---------------------------------------------------------------------------------------------
# Fields, state views and the transition builder

@dataclass
class FieldInfo:
    index: int
    name: str          # flattened, e.g. "member_epoch[1]", "owns[1][0]", "request[0].epoch"
    base: str          # declared name, e.g. "member_epoch"
    type: FieldType
    element: int | None = None   # position among the declared field's flat fields (None: scalar)
    path: tuple = ()             # the indices and member names from the declared field to it


class _Selected:
    """Elements of the same shape chosen by a state expression (``s.owns[m]`` with ``m`` an
    expression): reading a field of it is a ``select`` over the candidates, writing one writes
    each candidate under ``index == k``."""

    def __init__(self, index: Expr, candidates: list):
        self.index, self.candidates = index, candidates


def _shape_len(node) -> int:
    return len(node.candidates[0]) if isinstance(node, _Selected) else len(node)


class FieldView:
    """A compound field (an Array or a Record, or part of one) seen from an action or property.
    ``[i]`` with a Python int is the element, with a state expression a select over the
    elements; ``.name`` is a record's member. A leaf reads as an expression."""

    def __init__(self, owner, label: str, node):
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_node", node)

    # navigation: a node is a FieldInfo, a list (array), a dict (record) or a _Selected
    def _index(self, node, i, label):
        if isinstance(node, _Selected):
            return _Selected(node.index, [self._index(c, i, label) for c in node.candidates])
        if not isinstance(node, list):
            raise SpecError(f"{label} is not an array: it cannot be indexed (at {_user_frame()})")
        if isinstance(i, Expr):
            if i.kind != "int":
                raise SpecError(f"{label}[...] indexed by a condition (at {_user_frame()})")
            if i.epoch is not None:
                raise _epoch_refused(f"{label}[...] indexed by a value of {i.epoch[0].name}: "
                                     f"{i.epoch[0].name} values are order-only")
            return _Selected(i, list(node))
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(node):
            raise SpecError(f"index {i!r} out of range for {label}[0..{len(node) - 1}] "
                            f"(at {_user_frame()})")
        return node[i]

    def _member(self, node, name, label):
        if isinstance(node, _Selected):
            return _Selected(node.index, [self._member(c, name, label) for c in node.candidates])
        if not isinstance(node, dict):
            raise SpecError(f"{label} is not a record: it has no member '{name}' (at {_user_frame()})")
        if name not in node:
            raise SpecError(f"record {label} has no member '{name}' (at {_user_frame()}); "
                            f"members: {', '.join(node)}")
        return node[name]

    def _read(self, node, label):
        if isinstance(node, FieldInfo):
            return self._owner._read(node)
        if isinstance(node, _Selected) and isinstance(node.candidates[0], FieldInfo):
            elems = [self._read(c, label) for c in node.candidates]
            epoch = (_epoch_of(elems, f"{label}") if any(e.epoch is not None for e in elems)
                     else None)
            return Expr("select", (node.index, *elems), elems[0].kind, elems[0].enum,
                        epoch=epoch)
        return FieldView(self._owner, label, node)

    def _assign(self, node, value, guard, label):
        if isinstance(node, FieldInfo):
            self._owner._write(node, value if guard is None else
                               If(guard, value, self._owner._current(node)))
        elif isinstance(node, _Selected):
            for k, c in enumerate(node.candidates):
                self._assign(c, value, And(node.index == k) if guard is None else
                             And(guard, node.index == k), label)
        elif isinstance(node, dict) and isinstance(value, dict):
            for name in value:
                if name not in node:
                    raise SpecError(f"record {label} has no member '{name}' (at {_user_frame()}); "
                                    f"members: {', '.join(node)}")
            missing = [n for n in node if n not in value]
            if missing:
                raise SpecError(f"assigning record {label} leaves out {', '.join(missing)} "
                                f"(at {_user_frame()}): give every member")
            for name, sub in node.items():
                self._assign(sub, value[name], guard, f"{label}.{name}")
        else:
            what = "a record: assign a dict of its members or one member" if isinstance(node, dict) \
                else "an array: assign its elements"
            raise SpecError(f"cannot assign {label} as a whole, it is {what} (at {_user_frame()})")

    def _writable(self, label):
        if not isinstance(self._owner, Transition):
            raise SpecError(f"cannot assign {label} here: state is read-only (at {_user_frame()})")

    def __len__(self):
        return _shape_len(self._node) if not isinstance(self._node, dict) else len(self._node)

    def __iter__(self):
        if isinstance(self._node, dict):
            raise SpecError(f"record {self._label} cannot be iterated (at {_user_frame()})")
        return (self[i] for i in range(len(self)))

    def __getitem__(self, i):
        label = f"{self._label}[{i!r}]" if not isinstance(i, Expr) else f"{self._label}[...]"
        return self._read(self._index(self._node, i, self._label), label)

    def __setitem__(self, i, value):
        label = f"{self._label}[{i!r}]" if not isinstance(i, Expr) else f"{self._label}[...]"
        self._writable(label)
        self._assign(self._index(self._node, i, self._label), value, None, label)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._read(self._member(self._node, name, self._label), f"{self._label}.{name}")

    def __setattr__(self, name, value):
        self._writable(f"{self._label}.{name}")
        self._assign(self._member(self._node, name, self._label), value, None,
                     f"{self._label}.{name}")

    def __bool__(self):
        raise SpecError(f"{self._label} is an array or a record, not a condition (at {_user_frame()})")


ArrayView = FieldView   # the name engines knew before records and nested arrays


class StateView:
    """Read-only view of one state: attribute access gives field expressions."""

    def __init__(self, fields: "StateFields", tag: str = "pre"):
        object.__setattr__(self, "_fields", fields)
        object.__setattr__(self, "_tag", tag)

    def _read(self, f: FieldInfo) -> Expr:
        return Expr("field", (f.index, f.name, self._tag), f.type.kind,
                    f.type if isinstance(f.type, Enum) else None,
                    (f.type.lo, f.type.hi) if f.type.kind == "int" else None,
                    None if f.type.epoch is None else (f.type.epoch, 0))

    def __getattr__(self, name):
        fields = self._fields
        if name in fields.compound:
            return FieldView(self, name, fields.compound[name])
        if name in fields.scalars:
            return self._read(fields.scalars[name])
        raise SpecError(f"unknown state field '{name}' (at {_user_frame()}); fields: "
                        f"{', '.join(fields.declared)}")

    def __setattr__(self, name, value):
        raise SpecError(f"cannot assign '{name}' here: state is read-only (at {_user_frame()})")


class DeclaredName(str):
    """A name the spec declared, as spec code sees it: the variant (``s.variant`` in an action)
    or the action (a transition property's ``action``). Comparing it with a name the spec does
    not declare would make the comparison silently false (a misspelled action in a transition
    property: the property holds), so it is an error naming the spec's line."""

    def _known(self, other):
        names = getattr(self, "names", ())
        if isinstance(other, str) and names and other not in names:
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise SpecError(f"{self.what} compared with '{other}', which is not {article} "
                            f"{self.kind} of this spec (at {_user_frame()}); {self.kind}s: {', '.join(names)}")

    def __eq__(self, other):
        self._known(other)
        return str.__eq__(self, other)

    def __ne__(self, other):
        self._known(other)
        return str.__ne__(self, other)

    __hash__ = str.__hash__


class ComposedName(DeclaredName):
    """``s.variant`` in a profile's model (``spec.profile``): one name for several independent
    rule changes. ``s.variant == "x"`` (and ``in`` a tuple) is true when the profile runs change
    x; a lookup by hash (a set, a dict) cannot say which of its changes is meant, so it is an
    error naming the spec's line."""

    def __eq__(self, other):
        self._known(other)
        return other in self.runs

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        raise SpecError(f"s.variant of profile {str(self)} stands for several variants "
                        f"({', '.join(sorted(self.runs))}): compare it with == or look it up in a "
                        f"tuple, not in a set or dict (at {_user_frame()})")


def _declared_name(name: str, names, what: str, kind: str, runs=None) -> DeclaredName:
    if runs is not None:
        v = ComposedName(name)
        v.names, v.what, v.kind, v.runs = tuple(names), what, kind, frozenset(runs)
        return v
    v = DeclaredName(name)
    v.names, v.what, v.kind = tuple(names), what, kind
    return v


class Post(StateView):
    """The next state as built so far inside an action (reads see earlier writes)."""

    def __init__(self, t: "Transition"):
        StateView.__init__(self, t._fields, "pre")
        object.__setattr__(self, "_t", t)

    def _read(self, f):
        return self._t._current(f)


class Transition(StateView):
    """What an action function receives. Reads give the state before the step; assignments
    define the state after it. ``require`` adds guard conjuncts, ``respond`` sets the outcome,
    ``post`` reads the next state as assigned so far."""

    def __init__(self, fields, params, variant, spec, runs=None):
        StateView.__init__(self, fields, "pre")
        d = object.__getattribute__(self, "__dict__")
        # rule_calls: every s.rule(name, **args) this action made, in order (the symbolic
        # engine's compare finds a rule's call sites by it)
        d.update(_guard=[], _writes={}, _outcome=None, params=params,
                 variant=_declared_name(variant, spec.variants, "s.variant", "variant", runs),
                 _spec=spec, post=None,
                 rule_calls=[])
        d["post"] = Post(self)

    def _current(self, f: FieldInfo) -> Expr:
        e = self._writes.get(f.index)
        return e if e is not None else StateView._read(self, f)

    def _write(self, f: FieldInfo, value):
        e = const(value)
        if f.type.kind != e.kind:
            raise SpecError(f"assigning a {e.kind} to {f.type.kind} field {f.name} (at {_user_frame()})")
        if e.epoch is not None or f.type.epoch is not None:
            _epoch_store(f.name, f.type.epoch, e)
        if is_const(e) and f.type.kind == "int" and not f.type.search_bound:
            v = e.args[0]
            if not f.type.lo <= v <= f.type.hi:
                raise SpecError(f"{f.name} := {v} is outside its range {f.type.lo}..{f.type.hi} "
                                f"(at {_user_frame()})")
        self._writes[f.index] = e

    def __setattr__(self, name, value):
        fields = self._fields
        if name in fields.scalars:
            self._write(fields.scalars[name], value)
        elif name in fields.compound:
            FieldView(self, name, fields.compound[name])._assign(fields.compound[name], value,
                                                                 None, name)
        else:
            raise SpecError(f"unknown state field '{name}' (at {_user_frame()}); fields: "
                            f"{', '.join(fields.declared)}")

    def require(self, *conds):
        for c in conds:
            self._guard.append(_as_bool(c))

    def respond(self, outcome):
        """The response of this step: an Outcome constant or an If-expression over them."""
        e = const(outcome)
        if e.epoch is not None:
            raise _epoch_refused(f"respond({e!r}): a value of {e.epoch[0].name} as an outcome")
        self.__dict__["_outcome"] = e

    def rule(self, name: str, **args):
        """Evaluate a named rule (a decision that variants may replace) on the current state."""
        self.rule_calls.append((name, dict(args)))
        return self._spec._rule_impl(name, self.variant)(self, self.params, **args)


class Params:
    """The parameter values of one run, as attributes."""

    def __init__(self, values: dict):
        self.__dict__.update(values)

    def as_dict(self):
        return dict(self.__dict__)


def _storage_order(t, path: tuple):
    """(path, leaf type) of every leaf of type ``t`` in the order they are stored: arrays element
    by element, records member by member, an array of records member by member (each member an
    array over the elements)."""
    if isinstance(t, Record):
        for k, m in t.members.items():
            yield from _storage_order(m, path + (k,))
    elif isinstance(t, Array) and isinstance(t.of, Record):
        for k, m in t.of.members.items():
            for p, leaf in _storage_order(Array(m, t.size), ()):
                yield path + (p[0], k) + p[1:], leaf
    elif isinstance(t, Array):
        for i in range(t.size):
            yield from _storage_order(t.of, path + (i,))
    else:
        yield path, t


class StateFields:
    """The state's fields, flattened: an array is one field per element. How they are stored
    (the explicit engine packs them into 64-bit words) is the engines' concern: checker/layout.py."""

    def __init__(self, decl: dict[str, Any]):
        self.fields: list[FieldInfo] = []
        self.scalars: dict[str, FieldInfo] = {}
        # a compound field (Array, Record) as its flat fields in order (row-major: owns[m][q]
        # is element m*partitions+q), and as its tree of lists and dicts of FieldInfo
        self.arrays: dict[str, list[FieldInfo]] = {}
        self.compound: dict[str, list | dict] = {}
        self.declared = list(decl)
        for base, t in decl.items():
            if isinstance(t, (Array, Record)):
                self.arrays[base] = []
                self.compound[base] = self._flatten_type(base, base, t, ())
            elif isinstance(t, FieldType):
                f = FieldInfo(len(self.fields), base, base, t)
                self.fields.append(f)
                self.scalars[base] = f
            else:
                raise SpecError(f"state field '{base}' has type {t!r}: use Int, Bool, an Enum, "
                                f"an Array or a Record")

    def _flatten_type(self, base: str, name: str, t, path: tuple):
        """The tree of ``t`` (lists for arrays, dicts for records) with a FieldInfo per leaf. An
        array of records is stored as a record of arrays (every element's first member, then
        every element's second...): the order of the parallel arrays it replaces, so that
        writing a spec's messages as records keeps its layout."""
        def skeleton(t):
            if isinstance(t, Array):
                return [skeleton(t.of) for _ in range(t.size)]
            if isinstance(t, Record):
                return {k: skeleton(m) for k, m in t.members.items()}
            return None
        tree = skeleton(t)
        for p, leaf in _storage_order(t, ()):
            f = FieldInfo(len(self.fields), name + "".join(f"[{x}]" if isinstance(x, int) else f".{x}"
                                                           for x in p),
                          base, leaf, len(self.arrays[base]), path + p)
            self.fields.append(f)
            self.arrays[base].append(f)
            node = tree
            for x in p[:-1]:
                node = node[x]
            node[p[-1]] = f
        return tree

    def flatten(self, values: dict) -> list[int]:
        """A dict of declared names to Python values (arrays as lists, records as dicts) as the
        flat field values, each checked against its type."""
        for base in self.declared:
            if base not in values:
                raise SpecError(f"initial state lacks field '{base}'")
        for k in values:
            if k not in self.scalars and k not in self.compound:
                raise SpecError(f"unknown state field '{k}'; fields: {', '.join(self.declared)}")
        flat: list[int] = [0] * len(self.fields)
        for base in self.declared:
            if base in self.scalars:
                self._check_into(flat, self.scalars[base], values[base])
            else:
                self._flatten_value(flat, self.compound[base], values[base], base)
        return flat

    def _flatten_value(self, flat, node, v, name):
        if isinstance(node, FieldInfo):
            self._check_into(flat, node, v)
        elif isinstance(node, list):
            if not isinstance(v, (list, tuple)) or len(v) != len(node):
                raise SpecError(f"field '{name}' must be a list of {len(node)} values")
            for i, (n, x) in enumerate(zip(node, v)):
                self._flatten_value(flat, n, x, f"{name}[{i}]")
        else:
            if not isinstance(v, dict) or set(v) != set(node):
                raise SpecError(f"field '{name}' must be a dict of its members: {', '.join(node)}")
            for k, n in node.items():
                self._flatten_value(flat, n, v[k], f"{name}.{k}")

    def leaves(self, name: str, value) -> list[tuple[FieldInfo, Any]] | None:
        """The flat fields of the compound field ``name`` paired with the parts of ``value`` (an
        array as a list, nested for 2-D, a record as a dict of some or all members), or None when
        the value does not have the field's shape."""
        out: list[tuple[FieldInfo, Any]] = []

        def walk(node, v) -> bool:
            if isinstance(node, FieldInfo):
                out.append((node, v))
                return True
            if isinstance(node, list):
                return isinstance(v, list) and len(v) == len(node) and all(map(walk, node, v))
            return isinstance(v, dict) and all(k in node and walk(node[k], x) for k, x in v.items())
        if name not in self.compound or not walk(self.compound[name], value):
            return None
        return out

    @staticmethod
    def _check_into(flat, f: FieldInfo, v):
        try:
            flat[f.index] = f.type.check(v)
        except SpecError as e:
            raise SpecError(f"field {f.name}: {e}") from None

    def show(self, flat: list[int]) -> dict:
        """Flat field values to a dict of declared names with readable values."""
        def shown(node):
            if isinstance(node, FieldInfo):
                return node.type.show(flat[node.index])
            if isinstance(node, list):
                return [shown(n) for n in node]
            return {k: shown(n) for k, n in node.items()}
        return {base: shown(self.scalars[base] if base in self.scalars else self.compound[base])
                for base in self.declared}


# ---------------------------------------------------------------------------------------------
# The spec object

@dataclass
class Param:
    name: str
    default: int
    lo: int
    hi: int
    doc: str


@dataclass
class Action:
    name: str
    fn: Callable
    args: dict[str, Callable | Iterable]
    actors: tuple[str, str] | None
    doc: str


@dataclass
class Property:
    name: str
    kind: str           # 'invariant', 'transition' or 'sometimes'
    fn: Callable
    doc: str
    actions: tuple[str, ...] | None = None   # transition properties: which actions they judge
    lemma: bool = False


@dataclass
class Progress:
    name: str
    kind: str                        # 'leads-to' or 'always-eventually'
    p: Callable | None
    q: Callable
    fair: tuple[str, ...]
    doc: str


@dataclass
class Environment:
    """The actions that are the protocol's environment (``spec.environment``): joins, leaves,
    fences, subscription and metadata changes, timeouts. Each step of one is a *disturbance*;
    every other action is the protocol's own (heartbeats, reconciliation, responses). The state
    graph bounds the disturbances of a behaviour by ``bound`` (overridable) and never cuts a
    protocol step for it (checker/environment.py)."""
    actions: tuple[str, ...]
    bound: int | Callable       # a count, or p -> a count
    why: str
    line: str = "?"
    cap: str | None = None      # the parameter capping the epochs, which the graph may raise

    def bound_at(self, params) -> int:
        """The default bound at these parameters."""
        b = call_spec("the environment's bound", self.bound, params) if callable(self.bound) else self.bound
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            raise SpecError(f"{self.line}: environment: the bound {b!r} is not a count (0 or more)")
        return b


@dataclass
class Variant:
    name: str
    doc: str
    expected_violations: set[str] = field(default_factory=set)
    findings: dict[str, str] = field(default_factory=dict)
    # the configuration the variant is checked at when the user gives none (a bug that needs
    # three members); it overrides the spec's parameter defaults, --param overrides it
    params: dict[str, int] = field(default_factory=dict)
    # properties the engines can only answer "bounded" for at this configuration (a verdict that
    # rests on a step cut by a search_bound), each with the reason: recorded like a violation, so
    # the main job can tell an expected bounded verdict from a new one
    expected_bounded: dict[str, str] = field(default_factory=dict)
    # actions that have instances at this configuration but are expected never to take a step
    # (a static member's session timer where the variant has no static members), each with the
    # reason: printed as expected rather than as a warning that a property may hold vacuously
    expected_idle: dict[str, str] = field(default_factory=dict)


@dataclass
class Profile:
    """What one Kafka release runs: the default variant with a set of independent rule changes,
    each a declared variant (``spec.profile``). A profile is a model like a variant
    (``spec.instantiate(name)``): ``s.variant == x`` is true in it for each change x it runs, and
    ``s.rule(name)`` is the replacement of the one change that replaces that rule."""
    name: str
    changes: tuple[str, ...]
    releases: tuple[str, ...]
    variant: Variant          # how the engines see it: its doc, expected verdicts, parameters
    recorded: bool = False    # its expected verdicts were declared (violates=), so they are compared


@dataclass
class Symmetry:
    """Slots of one kind (member slots, partitions) that the spec treats alike: swapping two of
    them, in every array indexed by them and every field whose value names one, maps initial
    states to initial states, steps to steps and keeps every property's value. The engines check
    this before they rely on it (checker/symmetry.py)."""
    kind: str                                  # what a slot is: "member", "partition"
    count: Callable                            # p -> the number of slots of this kind
    slots: Callable                            # p -> the interchangeable ones among them
    arrays: dict[str, str]                     # field -> "slot", "slot,_" (slot-major) or "_,slot"
    values: tuple[str, ...]                    # fields whose value is a slot of this kind
    why: str                                   # one sentence: why these slots are alike
    line: str = "?"


@dataclass
class KnownBug:
    """A bug Kafka had in the modelled code, with its fix. ``variant`` is the default with that one
    fix undone and ``property`` the property the bug breaks there; a bug the spec cannot express
    has no variant and says in ``not_expressible`` what the spec would need."""
    jira: str
    broke: str                      # one sentence: what went wrong
    fix: str                        # the fix commit (and pull request) in apache/kafka
    code: str                       # the class and method the fix changed
    variant: str | None = None
    property: str | None = None
    not_expressible: str | None = None
    open: bool = False              # no fix shipped: the default variant is the pre-fix code
    line: str = "?"                 # where the spec records it (file:line), for errors


@dataclass
class ActionInstance:
    """An action with concrete arguments: the unit the engines enumerate."""
    index: int
    action: Action
    args: dict
    guard: Expr
    writes: dict[int, Expr]
    outcome: Expr | None

    @property
    def label(self) -> str:
        if not self.args:
            return self.action.name
        return f"{self.action.name}({', '.join(f'{k}={v}' for k, v in self.args.items())})"


class Spec:
    def __init__(self, name: str, doc: str = ""):
        self.name, self.doc = name, (doc or "").strip()
        self.params: dict[str, Param] = {}
        self._state_fn: Callable | None = None
        self._init_fn: Callable | None = None
        self.actions: list[Action] = []
        self.properties: dict[str, Property] = {}
        self.progress: dict[str, Progress] = {}
        self.variants: dict[str, Variant] = {}
        self.profiles: dict[str, Profile] = {}
        self.known_bugs: list[KnownBug] = []
        self.symmetries: list[Symmetry] = []
        self.epochs: dict[str, Epoch] = {}
        self.environment: Environment | None = None
        self.default_variant: str | None = None
        self.rules: dict[str, dict[str | None, Callable]] = {}
        self.outcome_enum: Enum | None = None
        self._terminal_fn: Callable | None = None
        self.check_deadlock = False
        # idle(): actions expected never to take a step in a spec without variants (a variant's
        # are in Variant.expected_idle)
        self.expected_idle: dict[str, str] = {}
        self.source_file = sys._getframe(1).f_code.co_filename
        # where each name was declared ((kind, name) -> file:line), for errors found later
        self.lines: dict[tuple[str, str], str] = {}
        # the spec this one was derived from (Spec.derive), None for a spec written whole
        self.derived_from: str | None = None

    def _declare(self, kind: str, name: str, taken: Iterable[str], what: str):
        """Records where ``name`` is declared; a second declaration would silently replace the
        first, so it is an error naming both lines."""
        here = _user_frame()
        if name in taken:
            first = next((v for (k, n), v in self.lines.items() if n == name and k in kind.split("|")),
                         "?")
            raise SpecError(f"{here}: {what} '{name}' is declared twice (first at {first})")
        self.lines[(kind.split("|")[0], name)] = here

    # -- a spec built on another ------------------------------------------------------------
    # How derive copies each attribute of a Spec: "same" shares the object (functions, and
    # declarations a derived spec cannot change: a parameter, an action, a property), "copy" a
    # shallow copy of the container (a derived spec adds to it without changing this spec's),
    # "own" is set by derive itself. tests/test_rule_copy.py fails when Spec gains an attribute
    # this table does not name, so a new declaration cannot be silently left out of a copy
    _DERIVE = {"name": "own", "doc": "own", "source_file": "own", "derived_from": "own",
               "params": "copy", "_state_fn": "same", "_init_fn": "same", "actions": "copy",
               "properties": "copy", "progress": "copy", "variants": "variants",
               "profiles": "profiles", "known_bugs": "copy", "symmetries": "copy",
               "epochs": "copy", "environment": "same", "default_variant": "same",
               "rules": "rules", "outcome_enum": "same", "_terminal_fn": "same",
               "check_deadlock": "same", "expected_idle": "copy", "lines": "copy"}

    def derive(self, name: str, doc: str = "") -> "Spec":
        """A new spec named ``name`` with every declaration of this one (parameters, state,
        actions, properties, variants with their records, profiles, rules, known bugs), to which
        the caller adds variants and rule replacements (``@spec.rule(rule, variant=...)``)
        without changing this spec. Its own name keeps its saved traces and records apart from
        this spec's: a trace names a spec that is not shipped by its module's path
        (trace._spec_ref), so a derived spec's traces replay against the derived spec."""
        from kcheck.spec import SHIPPED
        here = _user_frame()
        if not isinstance(name, str) or not name.isidentifier() or not name.islower():
            raise SpecError(f"{here}: derive({name!r}): a spec's name is a lower-case Python "
                            f"identifier, e.g. my_{self.name}")
        if name == self.name or name in SHIPPED:
            raise SpecError(f"{here}: derive({name!r}): '{name}' is a shipped spec's name, and a "
                            f"trace naming it would replay against that spec; choose another "
                            f"(shipped: {', '.join(SHIPPED)})")
        new = Spec.__new__(Spec)
        for attr, how in self._DERIVE.items():
            value = getattr(self, attr, None)
            if how == "same":
                setattr(new, attr, value)
            elif how == "copy":
                setattr(new, attr, type(value)(value))
            elif how == "variants":
                # bounded() and idle() write into a Variant: each is the derived spec's own
                new.variants = {k: _copy_variant(v) for k, v in value.items()}
            elif how == "profiles":
                new.profiles = {k: Profile(p.name, p.changes, p.releases, _copy_variant(p.variant),
                                           p.recorded) for k, p in value.items()}
            elif how == "rules":
                new.rules = {k: dict(impls) for k, impls in value.items()}
        new.name, new.doc = name, (doc or "").strip() or self.doc
        new.derived_from = self.name
        # the derived spec's module, as for Spec(): its traces name this file and replay from it
        new.source_file = sys._getframe(1).f_code.co_filename
        return new

    # -- declarations ----------------------------------------------------------------------
    def param(self, name: str, default: int, lo: int = 0, hi: int = 1 << 16, doc: str = ""):
        if not name.isidentifier():
            raise SpecError(f"parameter name '{name}' is not a Python identifier")
        self._declare("param", name, self.params, "parameter")
        if not lo <= default <= hi:
            raise SpecError(f"{self.lines[('param', name)]}: parameter {name}: default {default} is "
                            f"outside its range {lo}..{hi}")
        self.params[name] = Param(name, default, lo, hi, doc)

    def epoch(self, name: str, sentinels: Iterable[int] = (), doc: str = "",
              cap: str | None = None) -> Epoch:
        """Declares an order-only domain of integers (generations, epochs) and returns it, for
        ``Int(lo, hi, epoch=...)``. ``sentinels``: the constants that stand for "none" (e.g. -1,
        no generation), below every real value; a domain value may be compared with them or set
        to them. Any other use of a domain value (a literal, ``- 1``, arithmetic, mixing with
        plain integers) is refused at the spec's line when the spec is built. ``cap``: the
        parameter that caps the domain's fields (max_generation), which a counterexample that
        goes past it is reported at."""
        self._declare("epoch", name, self.epochs, "epoch domain")
        if cap is not None and cap not in self.params:
            raise SpecError(f"{self.lines[('epoch', name)]}: epoch {name}: cap= names parameter "
                            f"'{cap}', which is not declared (before it); parameters: "
                            f"{', '.join(self.params) or 'none'}")
        for v in sentinels:
            if isinstance(v, bool) or not isinstance(v, int):
                raise SpecError(f"{self.lines[('epoch', name)]}: epoch {name}: sentinel {v!r} is "
                                f"not an integer")
        self.epochs[name] = Epoch(name, tuple(sentinels), doc, self.lines[("epoch", name)], cap)
        return self.epochs[name]

    def state(self, fn: Callable):
        """Decorates fn(p) -> {name: Int|Bool|Enum|Array}."""
        self._state_fn = fn
        return fn

    def init(self, fn: Callable):
        """Decorates fn(p) -> iterable of dicts (one per initial state)."""
        self._init_fn = fn
        return fn

    def action(self, _fn=None, *, actors: tuple[str, str] | None = None, **args):
        """Decorates fn(s, p, **args). Each keyword names an argument and gives its values:
        an iterable, or a function of the parameters returning one."""
        def deco(fn):
            self._declare("action", fn.__name__, [a.name for a in self.actions], "action")
            self.actions.append(Action(fn.__name__, fn, args, actors, (fn.__doc__ or "").strip()))
            return fn
        return deco(_fn) if _fn is not None else deco

    def rule(self, name: str, variant: str | None = None):
        """A named decision (e.g. 'offset-commit'): the default, or a variant's replacement."""
        _named("rule", name)

        def deco(fn):
            if variant in self.rules.get(name, {}):
                raise SpecError(f"{_user_frame()}: rule '{name}' is declared twice for "
                                f"{'the default' if variant is None else 'variant ' + variant}")
            self.lines[("rule", f"{name}/{variant}")] = _user_frame()
            self.rules.setdefault(name, {})[variant] = fn
            return fn
        return deco

    def _rule_impl(self, name: str, variant: str) -> Callable:
        impls = self.rules.get(name)
        if not impls:
            raise SpecError(f"unknown rule '{name}'; rules: {', '.join(self.rules) or 'none'}")
        runs = getattr(variant, "runs", None)
        if runs is not None:      # a profile: the one change that replaces it (spec.profile checks)
            owner = next((v for v in sorted(runs) if v in impls), None)
            return impls[owner] if owner is not None else impls[None]
        return impls.get(variant) or impls[None]

    def invariant(self, name: str, lemma: bool = False):
        _named("invariant", name)
        def deco(fn):
            self._declare("property|progress", name, self._property_names(), "property")
            self.properties[name] = Property(name, "invariant", fn, _doc(fn), lemma=lemma)
            return fn
        return deco

    def sometimes(self, name: str):
        """fn(s, p) -> a condition that some reachable state meets: a scenario the spec relies
        on (a zombie commit, a fenced member) is stated to happen, so that a guard that quietly
        never opens shows as "not reached" instead of every property holding vacuously. The
        engines look for it as for a violation of "never P": the shortest path to it is the
        witness, and "not reached" is a failure of the spec's record."""
        _named("sometimes", name)
        def deco(fn):
            self._declare("property|progress", name, self._property_names(), "property")
            self.properties[name] = Property(name, "sometimes", fn, _doc(fn))
            return fn
        return deco

    def transition_property(self, name: str, actions: Iterable[str] | None = None):
        """fn(pre, post, action_name, args, outcome, p) -> condition that every step must meet."""
        _named("transition_property", name)
        def deco(fn):
            self._declare("property|progress", name, self._property_names(), "property")
            self.properties[name] = Property(name, "transition", fn, _doc(fn),
                                             tuple(actions) if actions else None)
            return fn
        return deco

    def leads_to(self, name: str, fair: Iterable[str]):
        """fn(s, p) -> (P, Q): every state where P holds is eventually followed by one where Q
        holds, assuming the named actions weakly fair."""
        _named("leads_to", name)
        def deco(fn):
            self._declare("progress|property", name, self._property_names(), "property")
            self.progress[name] = Progress(name, "leads-to", fn, fn, tuple(fair), _doc(fn))
            return fn
        return deco

    def always_eventually(self, name: str, fair: Iterable[str]):
        _named("always_eventually", name)
        def deco(fn):
            self._declare("progress|property", name, self._property_names(), "property")
            self.progress[name] = Progress(name, "always-eventually", None, fn, tuple(fair), _doc(fn))
            return fn
        return deco

    def terminal(self, fn: Callable):
        """fn(s, p) -> condition under which a state may have no successor (not a deadlock)."""
        self._terminal_fn = fn
        self.check_deadlock = True
        return fn

    def variant(self, name: str, doc: str, default: bool = False, violates: Iterable[str] = (),
                findings: dict[str, str] | None = None, params: dict[str, int] | None = None):
        """A named alternative. ``violates`` records the properties known to be violated in it
        (the expected verdicts the main job compares against); ``findings`` explains why;
        ``params`` is the configuration it is checked at by default."""
        for k in params or {}:
            if k not in self.params:
                raise SpecError(f"variant {name}: unknown parameter '{k}' ({_user_frame()}); "
                                f"parameters: {', '.join(self.params) or 'none'}")
        self._declare("variant|profile", name, list(self.variants) + list(self.profiles), "variant")
        if default and self.default_variant is not None:
            raise SpecError(f"{self.lines[('variant', name)]}: variant {name} is the default, but "
                            f"so is {self.default_variant}")
        self.variants[name] = Variant(name, doc, set(violates), dict(findings or {}), dict(params or {}))
        if default:
            self.default_variant = name

    def profile(self, name: str, changes: Iterable[str] = (), releases: Iterable[str] = (),
                doc: str = "", violates: Iterable[str] | None = None,
                findings: dict[str, str] | None = None):
        """What a Kafka release runs, as a model: the default variant with ``changes`` (declared
        variants, each one rule change) composed. The changes must be independent: two that
        replace the same named rule (``@spec.rule(name, variant=...)``), or that are checked at
        different values of one parameter, are refused with the spec's lines. ``releases`` names
        the releases that run it (``kcheck conform --kafka V`` checks V against it). ``violates``
        records the properties known to be violated in it; without it the profile claims no
        expected verdict. Its parameters are its changes' (``Variant.params``)."""
        self._declare("profile|variant", name, list(self.variants) + list(self.profiles), "profile")
        changes = tuple(changes)
        where = self.lines[("profile", name)]
        for c in changes:
            if c not in self.variants:
                raise SpecError(f"{where}: profile {name}: unknown variant '{c}'; variants: "
                                f"{', '.join(self.variants)}")
            if c == self.default_variant:
                raise SpecError(f"{where}: profile {name}: {c} is the default variant, which every "
                                f"profile starts from: list only the changes it makes")
        if len(set(changes)) != len(changes):
            raise SpecError(f"{where}: profile {name} names a change twice")
        params: dict[str, int] = {}
        for c in changes:
            for k, v in self.variants[c].params.items():
                if params.get(k, v) != v:
                    other = next(o for o in changes if self.variants[o].params.get(k) == params[k])
                    raise SpecError(f"{where}: profile {name}: {other} is checked at {k}="
                                    f"{params[k]} and {c} at {k}={v}: give the profile's own "
                                    f"configuration by composing variants that agree")
                params[k] = v
        self._check_independent(name, changes)
        for r in releases:
            owner = next((p.name for p in self.profiles.values() if r in p.releases), None)
            if owner is not None:
                raise SpecError(f"{where}: profile {name}: release {r} is already profile {owner}'s")
        docs = "; ".join(self.variants[c].doc for c in changes)
        variant = Variant(name, doc or (f"{self.default_variant} with {', '.join(changes)}: {docs}"
                                        if changes else f"the default variant {self.default_variant}"),
                          set(violates or ()), dict(findings or {}), params)
        self.profiles[name] = Profile(name, changes, tuple(releases), variant, violates is not None)

    def _check_independent(self, name: str, changes: tuple[str, ...]) -> None:
        where = self.lines.get(("profile", name), self.source_file)
        for rule, impls in self.rules.items():
            owners = [c for c in changes if c in impls]
            if len(owners) > 1:
                at = ", ".join(f"{c} at {self.lines.get(('rule', f'{rule}/{c}'), '?')}" for c in owners)
                raise SpecError(f"{where}: profile {name} composes {' and '.join(owners)}, which "
                                f"each replace rule {rule} ({at}): two changes of one rule are not "
                                f"independent; declare their combination as a variant of its own")

    def variant_info(self, name: str) -> Variant:
        """The variant, or the profile as the engines see it (its doc, verdicts, parameters)."""
        if name in self.variants:
            return self.variants[name]
        if name in self.profiles:
            return self.profiles[name].variant
        raise SpecError(f"unknown variant '{name}' for spec {self.name}; variants: "
                        f"{', '.join(self.variants)}" + (f"; profiles: {', '.join(self.profiles)}"
                                                         if self.profiles else ""))

    def profile_for(self, release: str) -> Profile | None:
        """The profile a Kafka release runs (declared by its releases=), or None."""
        return next((p for p in self.profiles.values() if release in p.releases), None)

    def symmetry(self, kind: str, *, count: Callable, slots: Callable | None = None,
                 arrays: dict[str, str], values: Iterable[str] = (), why: str = ""):
        """Declares the slots of ``kind`` that are interchangeable: ``count(p)`` slots exist,
        ``slots(p)`` (default: all) may be permuted among themselves; ``arrays`` names each array
        indexed by them and how ("slot": element i is slot i; "slot,_": slot-major rows, element
        i*n+j; "_,slot": element j*count+i), ``values`` each field (scalar or array) holding a
        slot number (other values, e.g. -1, stay). A field absent at some parameters is skipped.
        The search stores one state per orbit; checker/symmetry.py checks the claim first."""
        for f, how in arrays.items():
            if how not in ("slot", "slot,_", "_,slot"):
                raise SpecError(f"{_user_frame()}: symmetry {kind}: array {f} is indexed "
                                f"'{how}'; valid: slot, slot,_ or _,slot")
        if any(s.kind == kind for s in self.symmetries):
            raise SpecError(f"{_user_frame()}: symmetry '{kind}' is declared twice")
        self.symmetries.append(Symmetry(kind, count, slots or count, dict(arrays),
                                        tuple(values), why, _user_frame()))

    def known_bug(self, jira: str, broke: str, fix: str, code: str, variant: str | None = None,
                  property: str | None = None, not_expressible: str | None = None,
                  open: bool = False):
        """Records a known Kafka bug: its pre-fix variant and the property it breaks, or why the
        spec cannot express it. The names are checked when the spec is loaded (kcheck.loader)."""
        if (variant is None) == (not_expressible is None):
            raise SpecError(f"known_bug {jira}: give either variant= (and property=) or "
                            f"not_expressible=, not both or neither ({_user_frame()})")
        if variant is not None and property is None:
            raise SpecError(f"known_bug {jira}: variant {variant} names no property ({_user_frame()})")
        self.known_bugs.append(KnownBug(jira, broke, fix, code, variant, property, not_expressible,
                                        open, _user_frame()))

    def _property_names(self) -> list[str]:
        return [*self.properties, *self.progress]

    def environment_actions(self, actions: Iterable[str], bound: int | Callable, why: str = "",
                            cap: str | None = None):
        """Declares the actions that are the environment (each step one a disturbance) and the
        default number of disturbances ``bound`` a progress verdict assumes at most (a count, or
        a function of the parameters returning one; ``kcheck progress --disturbances``
        overrides it). ``why``: one sentence, why these actions and not the others. ``cap``: the
        parameter that caps the epochs; where it cuts a step within the bound, the state graph
        raises it until it cuts none (or reaches its range's end), unless it is given."""
        here = _user_frame()
        if self.environment is not None:
            raise SpecError(f"{here}: the environment is declared twice (first at "
                            f"{self.environment.line})")
        if not callable(bound) and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
            raise SpecError(f"{here}: environment: bound={bound!r} is not a count (0 or more)")
        if cap is not None and cap not in self.params:
            raise SpecError(f"{here}: environment: cap= names parameter '{cap}', which is not "
                            f"declared (before it); parameters: {', '.join(self.params) or 'none'}")
        self.environment = Environment(tuple(actions), bound, why, here, cap)

    def bounded(self, prop: str, why: str, variants: Iterable[str] | None = None):
        """Records that ``prop`` is expected to be answered "bounded" (not decided within the
        search bounds) in the named variants, by default every variant declared so far."""
        names = list(self.variants) if variants is None else list(variants)
        for v in names:
            if v not in self.variants:
                raise SpecError(f"bounded({prop!r}): unknown variant '{v}' ({_user_frame()}); "
                                f"variants: {', '.join(self.variants)}")
            self.variants[v].expected_bounded[prop] = why
        self.lines[("bounded", prop)] = _user_frame()

    def idle(self, actions: Iterable[str], why: str, variants: Iterable[str] | None = None):
        """Records that ``actions`` are expected never to take a step in the named variants (by
        default every variant declared so far) at their default configuration, and why. The
        search warns about an action that never took a step (a property about it would hold
        vacuously); a declared one is reported as expected, with ``why``, and one that does take
        a step is reported as a stale declaration."""
        names = list(self.variants) if variants is None else list(variants)
        if not why.strip():
            raise SpecError(f"{_user_frame()}: idle(): give the reason the actions never take a step")
        if not self.variants and variants is None:
            for a in actions:
                self.expected_idle[a] = why
                self.lines[("idle", a)] = _user_frame()
        for v in names:
            if v not in self.variants:
                raise SpecError(f"idle(): unknown variant '{v}' ({_user_frame()}); "
                                f"variants: {', '.join(self.variants)}")
            for a in actions:
                self.variants[v].expected_idle[a] = why
                self.lines[("idle", a)] = _user_frame()

    def validate(self) -> None:
        """Checks that every name the spec gives refers to something it declares: a misspelled
        name would otherwise make a verdict vacuous (a fair action that does not exist, a
        transition property judging no action) or drop a record (violates=[...]). Run when the
        spec is loaded; an error names the spec's line."""
        actions = [a.name for a in self.actions]
        props = self._property_names() + ["deadlock"]

        def unknown(where: str, what: str, name: str, valid: Iterable[str]):
            raise SpecError(f"{where}: {what} '{name}' is not declared in spec {self.name}; "
                            f"valid: {', '.join(valid) or 'none'}")
        # a profile's record (spec.profile's violates=, findings=) is compared like a variant's
        records = [("variant", v) for v in self.variants.values()] + \
                  [("profile", p.variant) for p in self.profiles.values()]
        for kind, v in records:
            where = self.lines.get((kind, v.name), self.source_file)
            for p in sorted(v.expected_violations):
                if p not in props:
                    unknown(where, f"{kind} {v.name}: violates= names property", p, props)
            for p in v.findings:
                if p not in props:
                    unknown(where, f"{kind} {v.name}: findings= names property", p, props)
            for p in v.expected_bounded:
                if p not in props:
                    unknown(self.lines.get(("bounded", p), where), "bounded() names property", p, props)
            for a in v.expected_idle:
                if a not in actions:
                    unknown(self.lines.get(("idle", a), where), "idle() names action", a, actions)
            for k, val in v.params.items():
                par = self.params[k]
                if isinstance(val, bool) or not isinstance(val, int) or not par.lo <= val <= par.hi:
                    raise SpecError(f"{where}: variant {v.name}: params= gives {k}={val!r}, outside "
                                    f"its range {par.lo}..{par.hi}")
        for a in self.expected_idle:
            if a not in actions:
                unknown(self.lines.get(("idle", a), self.source_file), "idle() names action", a, actions)
        for p in self.properties.values():
            for a in p.actions or ():
                if a not in actions:
                    unknown(self.lines.get(("property", p.name), self.source_file),
                            f"transition property {p.name}: actions= names action", a, actions)
        for p in self.progress.values():
            for a in p.fair:
                if a not in actions:
                    unknown(self.lines.get(("progress", p.name), self.source_file),
                            f"progress property {p.name}: fair= names action", a, actions)
        if self.environment is not None:
            for a in self.environment.actions:
                if a not in actions:
                    unknown(self.environment.line, "environment names action", a, actions)
        self._validate_symmetries(unknown)
        for prof in self.profiles.values():
            self._check_independent(prof.name, prof.changes)
        for rule, impls in self.rules.items():
            for v in impls:
                if v is not None and v not in self.variants:
                    unknown(self.lines.get(("rule", f"{rule}/{v}"), self.source_file),
                            f"rule {rule}: a replacement for variant", v, self.variants)
            missing = [v for v in self.variants if v not in impls]
            if None not in impls and (missing or not self.variants):
                raise SpecError(f"{self.source_file}: rule {rule} has no default "
                                f"(@spec.rule('{rule}') without variant=) and no replacement for "
                                f"{', '.join(missing) or 'the spec without variants'}")

    def _validate_symmetries(self, unknown) -> None:
        """Every field a symmetry names exists at some parameters (its default, a variant's, or
        every parameter at its greatest): a misspelled array is skipped as one absent at these
        parameters, and the symmetry silently reduces nothing (1.00x)."""
        if not self.symmetries or self._state_fn is None:
            return
        settings = [{}, {k: p.hi for k, p in self.params.items()}]
        settings += [v.params for v in self.variants.values()]
        bases: set[str] = set()
        members: dict[str, set] = {}
        for given in settings:
            fields = self.fields_at(self.resolve_params(given))
            bases |= set(fields.declared)
            for base, flat in fields.arrays.items():
                members.setdefault(base, set()).update(x for f in flat for x in f.path
                                                       if isinstance(x, str))
        for s in self.symmetries:
            for f in s.arrays:
                if f not in bases:
                    unknown(s.line, f"symmetry {s.kind}: arrays= names field", f, sorted(bases))
            for f in s.values:
                base, _, member = f.partition(".")
                if base not in bases:
                    unknown(s.line, f"symmetry {s.kind}: values= names field", base, sorted(bases))
                if member and member not in members.get(base, ()):
                    unknown(s.line, f"symmetry {s.kind}: values= names member of {base}", member,
                            sorted(members.get(base, ())))

    def outcomes(self, enum: Enum):
        self.outcome_enum = enum
        return enum

    # -- instantiation --------------------------------------------------------------------
    def resolve_params(self, given: dict[str, Any]) -> Params:
        values = {}
        for k, v in given.items():
            if k not in self.params:
                raise SpecError(f"unknown parameter '{k}' for spec {self.name}; parameters: "
                                f"{', '.join(self.params) or 'none'}")
        for name, p in self.params.items():
            v = given.get(name, p.default)
            if isinstance(v, str):
                try:
                    v = int(v)
                except ValueError:
                    shown = repr(v) if len(repr(v)) <= 40 else f"{repr(v)[:20]}... ({len(str(v))} characters)"
                    raise SpecError(f"parameter {name}={shown} is not an integer (valid: "
                                    f"{p.lo}..{p.hi})") from None
            if isinstance(v, bool) or not isinstance(v, int) or not p.lo <= v <= p.hi:
                raise SpecError(f"parameter {name}={v} is out of range (valid: {p.lo}..{p.hi})")
            values[name] = v
        return Params(values)

    def fields_at(self, params: Params) -> "StateFields":
        """The state's fields at these parameters (as resolve_params gives them), from the state
        declaration alone: unlike instantiate, no initial state or action instance is built."""
        if self._state_fn is None:
            raise SpecError(f"spec {self.name} declares no state")
        return call_spec("the state declaration", lambda: StateFields(self._state_fn(params)))

    def idle_expected(self, variant: str | None) -> dict[str, str]:
        """The actions declared idle (``idle``) in this variant, each with the reason."""
        v = self.variants.get(variant) if variant is not None else None
        return dict(v.expected_idle) if v is not None else dict(self.expected_idle)

    def variant_name(self, variant: str | None) -> str:
        """The variant ``variant`` names: the default one for None (an empty name is a name,
        refused by instantiate, not the default)."""
        return self.default_variant or next(iter(self.variants), "default") \
            if variant is None else variant

    def variant_params(self, variant: str | None = None, params: dict | None = None) -> Params:
        """The parameters ``instantiate(variant, params)`` compiles at (the spec's defaults, the
        variant's, then ``params``), without compiling: a caller can tell two runs at the same
        configuration apart from two at different ones."""
        variant = self.variant_name(variant)
        if variant in self.profiles:
            return self.resolve_params({**self.profiles[variant].variant.params, **(params or {})})
        if self.variants and variant not in self.variants:
            raise SpecError(f"unknown variant '{variant}' for spec {self.name}; variants: "
                            f"{', '.join(self.variants)}" + (f"; profiles: {', '.join(self.profiles)}"
                                                             if self.profiles else ""))
        defaults = self.variants[variant].params if variant in self.variants else {}
        return self.resolve_params({**defaults, **(params or {})})

    def instantiate(self, variant: str | None = None, params: dict | None = None) -> "Model":
        name = self.variant_name(variant)
        # a profile's model runs its changes composed (None: one variant's model)
        runs = self.profiles[name].changes if name in self.profiles else None
        return Model(self, name, self.variant_params(variant, params), runs=runs)


def _copy_variant(v: Variant) -> Variant:
    """A variant whose records (violates=, findings=, bounded(), idle()) can grow without
    changing ``v``'s."""
    return Variant(v.name, v.doc, set(v.expected_violations), dict(v.findings), dict(v.params),
                   dict(v.expected_bounded), dict(v.expected_idle))


def _doc(fn) -> str:
    return " ".join((fn.__doc__ or "").split())


def call_spec(what: str, fn: Callable, *args, **kwargs):
    """Run spec code; any exception becomes a one-line SpecError naming the spec's line."""
    try:
        return fn(*args, **kwargs)
    except SpecError:
        raise
    except (Exception, SystemExit) as e:     # sys.exit in spec code ends nothing but the spec
        import traceback
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if not f.filename.endswith(("spec/lang.py",))]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        raise SpecError(f"{where}: {what} raised {type(e).__name__}: {e}") from None


class Model:
    """A spec at one variant and parameter setting: the fields, the initial states and every
    action instance with its guard, writes and outcome built as expression trees."""

    def __init__(self, spec: Spec, variant: str, params: Params, runs: tuple[str, ...] | None = None):
        self.spec, self.variant, self.params = spec, variant, params
        # a profile's model: the changes it composes (None: one variant's model)
        self.runs = runs
        if spec._state_fn is None or spec._init_fn is None:
            raise SpecError(f"spec {spec.name} declares no state or no initial states")
        self.fields = spec.fields_at(params)
        # the initial states as flat field values, each once, in the order the spec yields them
        self.initial_states: list[tuple[int, ...]] = []
        seen = set()
        for st in call_spec("the initial states", lambda: list(spec._init_fn(params))):
            flat = tuple(call_spec("the initial states", self.fields.flatten, st))
            if flat not in seen:
                seen.add(flat)
                self.initial_states.append(flat)
        if not self.initial_states:
            raise SpecError(f"spec {spec.name} has no initial state for these parameters")
        self.instances: list[ActionInstance] = []
        for action in spec.actions:
            for args in self._arg_combinations(action):
                t = Transition(self.fields, params, variant, spec, runs)
                call_spec(f"action {action.name}{args or ''}", action.fn, t, params, **args)
                guard = And(*t._guard)
                if is_const(guard) and not guard.args[0]:
                    continue  # never enabled for these arguments
                self.instances.append(ActionInstance(len(self.instances), action, args, guard,
                                                     dict(t._writes), t._outcome))
        self.invariants = [p for p in spec.properties.values() if p.kind == "invariant"]
        self.transition_props = [p for p in spec.properties.values() if p.kind == "transition"]
        # reachability properties: the engines search for "never P" like an invariant
        self.sometimes = [p for p in spec.properties.values() if p.kind == "sometimes"]
        self.terminal = None
        if spec._terminal_fn is not None:
            self.terminal = _as_bool(spec._terminal_fn(StateView(self.fields), params))

    def _arg_combinations(self, action: Action):
        names = list(action.args)
        domains = []
        for n in names:
            d = action.args[n]
            d = call_spec(f"the arguments of {action.name}", d, self.params) if callable(d) else d
            domains.append(list(d))
        out = [{}]
        for n, d in zip(names, domains):
            out = [{**o, n: v} for o in out for v in d]
        return out

    def invariant_expr(self, prop: Property) -> Expr:
        """The condition every reachable state must meet: an invariant's, or for a ``sometimes``
        property "never P", whose counterexample is the witness that P is reachable."""
        e = call_spec(f"property {prop.name}", lambda: _as_bool(prop.fn(StateView(self.fields), self.params)))
        return Not(e) if prop.kind == "sometimes" else e

    def transition_expr(self, prop: Property, inst: ActionInstance) -> Expr | None:
        if prop.actions is not None and inst.action.name not in prop.actions:
            return None
        pre = StateView(self.fields, "pre")
        post = StateView(self.fields, "post")
        outcome = inst.outcome if inst.outcome is not None else const(0)
        action = _declared_name(inst.action.name, [a.name for a in self.spec.actions],
                                "the action of transition property " + prop.name, "action")
        return call_spec(f"property {prop.name}", lambda: _as_bool(
            prop.fn(pre, post, action, inst.args, outcome, self.params)))

    def instance(self, name: str, args: dict) -> ActionInstance:
        for inst in self.instances:
            if inst.action.name == name and {k: _plain(v) for k, v in inst.args.items()} == \
                    {k: _plain(v) for k, v in args.items()}:
                return inst
        if not any(a.name == name for a in self.spec.actions):
            raise SpecError(f"unknown action '{name}'; actions: "
                            f"{', '.join(a.name for a in self.spec.actions)}")
        raise SpecError(f"action {name} has no instance with arguments {args} "
                        f"(or it can never be enabled with them)")

    def show_outcome(self, value: int | None):
        if value is None:
            return None
        if self.spec.outcome_enum is not None:
            return self.spec.outcome_enum.show(value)
        return value


def _plain(v):
    """An argument value as a trace writes it, typed: True is not 1 and 1.0 is not 1 here, so a
    trace's argument matches only the value the spec declares (an enum value by its name)."""
    if isinstance(v, EnumValue):
        return ("str", v.name)
    return (type(v).__name__, v)
