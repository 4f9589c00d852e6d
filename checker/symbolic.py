"""The symbolic engine: Z3 evaluates the very expression trees the explicit search compiles.

A state is one Z3 variable per flattened field (Int for integers and Enums, Bool for booleans);
an action instance's guard, writes and outcome, and every property, are the ``Expr`` trees of
``spec.lang.Model`` evaluated over those variables, so no rule exists twice. Action arguments
stay concrete: a step is a choice variable naming the action instance that runs.

- ``bmc``: unrolls the transition relation step by step from the initial states and asks, at
  each depth, for a path ending in a violation (shortest first, like the breadth-first search).
- ``prove``: k-induction. The spec's lemmas are first reduced to their largest inductive subset
  (Houdini: a lemma false at the end of a counterexample to induction is dropped and the rest
  retried), then assumed in every state of the target's induction step.
- ``compare``: for a named rule and two variants, whether every request one accepts is accepted
  by the other, over every state satisfying the assumed invariants.

Search bounds (``Int(..., search_bound=True)``) keep their lower end and lose their upper end:
that is what lets a proof speak of every epoch. Counterexamples come back as ordinary traces; when
their epochs exceed the explicit search's caps, the model is instantiated with a larger bound
parameter so that the trace packs and replays.
"""
from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

import z3

from kcheck.layout import layout_of
from kcheck.ops import OPS
from kcheck.trace import Trace, build
from kcheck.verdict import Counterexample, RunResult, Verdict, recorded_violations, sometimes_status
from kcheck.spec.lang import Expr, FieldInfo, Model, SpecError, Transition, const

DEADLOCK = "deadlock"


class Inconclusive(Exception):
    """The solver gave up (timeout or 'unknown')."""


# ---------------------------------------------------------------------------------------------
# Evaluating expression trees over Z3 terms

class Env:
    """Z3 terms for the field tags an expression may read: 'pre', 'post' (state variables) and
    'arg' (lifted rule arguments, by name). Memoises per tree node: the trees are DAGs."""

    def __init__(self, pre=None, post=None, arg=None, bv: int | None = None):
        self.tags = {"pre": pre, "post": post}
        self.arg = arg or {}
        self.bv = bv          # integers are bit-vectors of this width (bounded state spaces)
        self.memo: dict[int, object] = {}


def _where(fn) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else "?"


def evaluate(e: Expr, env: Env, where: str):
    """The Z3 term of ``e``; ``where`` (spec line and construct) names it in errors."""
    hit = env.memo.get(id(e))
    if hit is not None:
        return hit[1]
    op, a = e.op, e.args
    if op == "const":
        v = a[0]
        r = z3.BoolVal(v) if isinstance(v, bool) else \
            z3.BitVecVal(int(v), env.bv) if env.bv else z3.IntVal(int(v))
    elif op == "field":
        idx, name, tag = a
        if tag == "arg":
            r = env.arg.get(name)
        else:
            vs = env.tags.get(tag)
            r = vs[idx] if vs is not None and 0 <= idx < len(vs) else None
        if r is None:
            raise SpecError(f"{where}: reads {name} ({tag}), which the symbolic engine has no "
                            f"value for here")
    elif op in OPS:
        r = OPS[op].z3(z3, *[evaluate(x, env, where) for x in a])
    else:
        raise SpecError(f"{where}: the symbolic engine cannot evaluate operation '{op}'")
    env.memo[id(e)] = (e, r)   # keeping e alive keeps its id from being reused
    return r


# ---------------------------------------------------------------------------------------------
# The narrowest bit-vectors that hold every value exactly

def signed_width(lo: int, hi: int) -> int:
    """The fewest bits of a two's-complement integer holding every value in lo..hi."""
    w = 1
    while lo < -(1 << (w - 1)) or hi > (1 << (w - 1)) - 1:
        w += 1
    return w


def value_range(e: Expr, ranges, memo: dict, widest: list) -> tuple[int, int] | None:
    """The interval of values integer expression ``e`` takes when every field read lies in
    ``ranges[index]`` (None for a condition), by interval arithmetic; ``widest[0]`` grows to the
    widest interval met on the way, the width at which no subterm can wrap."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    op, a = e.op, e.args
    sub = [value_range(x, ranges, memo, widest) if isinstance(x, Expr) else None for x in a]
    r = None
    if op == "const":
        r = None if isinstance(a[0], bool) else (int(a[0]), int(a[0]))
    elif op == "field":
        r = None if e.kind == "bool" else ranges[a[0]]
    elif op in OPS:
        r = OPS[op].interval(*sub)
    if op == "select":   # the positions compared with the index must not wrap either
        widest[1] = max(widest[1], len(a) - 3)
    if r is not None:
        widest[0], widest[1] = min(widest[0], r[0]), max(widest[1], r[1])
    memo[id(e)] = (e, r)
    return r


# ---------------------------------------------------------------------------------------------
# The transition system of one model over Z3

# Z3's counters by the name the output uses: the SMT core's, and the SAT solver's (bmc's solver)
_COUNTERS = {"conflicts": "conflicts", "decisions": "decisions", "propagations": "propagations",
             "sat conflicts": "conflicts", "sat decisions": "decisions",
             "sat propagations 2ary": "propagations", "sat propagations nary": "propagations"}


def _snapshot(solver: z3.Solver) -> dict:
    st = solver.statistics()
    out: dict = {}
    for k in st.keys():
        if k in _COUNTERS:
            out[_COUNTERS[k]] = out.get(_COUNTERS[k], 0) + int(st.get_key_value(k))
        elif k == "max memory":
            out["max memory MB"] = float(st.get_key_value(k))
        elif k == "rlimit count":
            out["rlimit"] = int(st.get_key_value(k))   # Z3's own measure of work, load-independent
    return out


class Z3Call:
    """Whether the main thread is inside a Z3 solver call, so that another thread may stop that
    call and only that call.

    Z3's own SIGINT handler (installed for the length of a call unless the solver's ``ctrl_c``
    is off) cancels the call and swallows the signal: when the call was finishing anyway, it
    returns sat or unsat and the Ctrl-C is lost (seen once in a full suite: bmc ran to its end
    and exited 1). So System's solvers leave SIGINT to Python, whose handler runs once the call
    returns, and symbolic_cli.SolverStop's watcher, woken by the signal, stops a long call with
    ``interrupt()``. Z3's interrupt outside a call cancels whatever API call the main thread is
    making (an expression built meanwhile came back unusable), hence the lock: the interrupt is
    sent only between ``running``'s entry and exit."""

    _lock = threading.Lock()
    _active = False

    @classmethod
    @contextmanager
    def running(cls):
        with cls._lock:
            cls._active = True
        try:
            yield
        finally:
            with cls._lock:
                cls._active = False

    @classmethod
    def interrupt(cls) -> bool:
        """Stop the call the main thread is in, if it is in one; whether it was."""
        with cls._lock:
            if cls._active:
                z3.main_ctx().interrupt()
                return True
        return False


# ---------------------------------------------------------------------------------------------
# What the engine keeps from one call to the next on the same model

# Calls on one model repeat work: prove builds the same induction path and property terms for
# each property it is asked (29 for consumer_group, about 10 per variant in the tests), and every
# bmc call ran Houdini over the lemmas again. What they derive is kept per model, for the few
# models used last: a long process that goes through many models keeps no more than these.
KEPT_MODELS = 4
_kept: OrderedDict[tuple, dict] = OrderedDict()


def model_key(model: Model) -> tuple:
    """What identifies a model here: its spec (the object itself: a spec loaded again from its
    file is another one, and the key keeps it alive, so its id is never reused), its variant and
    its parameters; its fields and number of action instances are checked too."""
    return (model.spec, str(model.variant), tuple(sorted(model.params.as_dict().items())),
            tuple((f.name, f.type.kind, f.type.lo, f.type.hi) for f in model.fields.fields),
            len(model.instances))


def _lru_slot(table: OrderedDict, key, limit: int) -> dict:
    """The dict kept in ``table`` under ``key``, created when absent; ``table`` keeps the
    ``limit`` keys used last."""
    got = table.get(key)
    if got is None:
        got = table[key] = {}
        while len(table) > limit:
            table.popitem(last=False)
    else:
        table.move_to_end(key)
    return got


def kept(model: Model) -> dict:
    """What is kept for ``model`` (a dict to fill; only finished, conclusive results go in)."""
    return _lru_slot(_kept, model_key(model), KEPT_MODELS)


def forget_kept() -> None:
    """Drop everything kept (e.g. after a spec's code changed in a long process)."""
    _kept.clear()


class System:
    """The Z3 encoding of a model: state variables, initial states, steps, properties.

    ``keep_search_bounds`` keeps the explicit search's caps (a step leaving one is cut, as in the
    breadth-first search): that makes bmc and the search decide the very same state space."""

    def __init__(self, model: Model, keep_search_bounds: bool = False, timeout_s: float | None = None,
                 cap: int | None = None, bits: bool = False):
        self.model, self.lay = model, model.fields
        self.bits = bits      # bit-vector fields are made of named Boolean atoms (kcheck.cnf)
        self.keep = keep_search_bounds
        self.cap = None if keep_search_bounds or cap is None else \
            max([cap] + [f.type.hi for f in model.fields.fields if f.type.search_bound])
        self.timeout_ms = int(timeout_s * 1000) if timeout_s else None
        self.insts = model.instances
        self._solvers: dict = {}
        self._checks = 0
        self._extra: list[dict] = []   # statistics of sub-runs (the base case's bmc)
        self._n = 0
        self.raw: dict[str, list] = {}     # the variables of each state, by tag
        self._frame = None
        # Terms built once per System: an Env per (pre, post) state, so the guards, writes and
        # every property evaluated on a state share one memo of its subterms; each property's
        # term per state; the induction paths per k. Houdini asks every lemma on the same states
        # round after round, and prove asks the induction path of k twice.
        self._envs: dict[tuple[int, int], tuple] = {}
        self._holds: dict[tuple[str, int], tuple] = {}
        self._inductions: dict[int, _Induction] = {}
        self._tags: dict[int, tuple] = {}    # id of a state's terms -> (tag, terms)
        # the same terms in another System of an equal model: shared for the encoding with every
        # bound lifted and no cap (prove, Houdini, compare), whose terms depend on nothing else
        self._shared = kept(model).setdefault("terms", {}) \
            if not keep_search_bounds and self.cap is None and not bits else None
        sp = model.spec
        self.where_action = {a.name: _where(a.fn) for a in sp.actions}
        self.where_prop = {p.name: _where(p.fn) for p in sp.properties.values()}
        # a sometimes property is "never P" here too: bmc's counterexample is the witness
        self.inv_exprs = {p.name: model.invariant_expr(p) for p in [*model.invariants, *model.sometimes]}
        self.tprop_exprs = {p.name: [model.transition_expr(p, inst) for inst in self.insts]
                            for p in model.transition_props}
        # Where every field is bounded (the search's caps kept, or bmc's cap on the lifted
        # bounds) integers are bit-vectors, bit-blasted to SAT: many times faster than integer
        # arithmetic. Their width is the narrowest that holds every subterm's interval exactly,
        # so nothing wraps; the choice of action is a bit-vector just wide enough to count them.
        self.bv = None
        self.choice_bits = max(1, (len(self.insts) - 1).bit_length())
        if keep_search_bounds or cap is not None:
            self.bv = self.exact_width()

    def field_range(self, f: FieldInfo) -> tuple[int, int]:
        """The values a state's field takes in this encoding (ordinary fields: their range)."""
        t = f.type
        if t.kind == "bool":
            return (0, 1)
        if t.search_bound and not self.keep:
            return (t.lo, max(t.hi, self.cap)) if self.cap is not None else (t.lo, None)
        return (t.lo, t.hi)

    def exact_width(self) -> int:
        """The bit-width at which no term of the guards, writes, outcomes and properties wraps,
        for states whose fields lie in their ranges (and a written value one more step away).
        Each field's own variable is narrower still: wide enough for its range and for every
        value an action writes to it (so a write out of range is seen, not cut off)."""
        ranges = [self.field_range(f) for f in self.lay.fields]
        widest = [min(r[0] for r in ranges), max(r[1] for r in ranges)]
        held = [list(r) for r in ranges]
        memo: dict = {}
        trees = [self.model.terminal] if self.model.terminal is not None else []
        for inst in self.insts:
            for idx, e in inst.writes.items():
                r = value_range(e, ranges, memo, widest)
                if r is not None:
                    held[idx] = [min(held[idx][0], r[0]), max(held[idx][1], r[1])]
            trees += [inst.guard]
            trees += [inst.outcome] if inst.outcome is not None else []
        trees += list(self.inv_exprs.values())
        trees += [e for es in self.tprop_exprs.values() for e in es if e is not None]
        for e in trees:
            value_range(e, ranges, memo, widest)
        # a field never negative is zero-extended: its high bits are constants to the SAT solver
        self.field_bits = [(lo >= 0, hi.bit_length() if lo >= 0 else signed_width(lo, hi))
                           for lo, hi in held]
        return signed_width(*widest)

    def env(self, pre, post=None) -> Env:
        """The Env of state ``pre`` (and ``post``), one per pair of states (kept alive with it,
        so that its id is not reused)."""
        key = (id(pre), id(post))
        hit = self._envs.get(key)
        if hit is None:
            hit = self._envs[key] = (pre, post, Env(pre, post, bv=self.bv))
        return hit[2]

    def induction(self, k: int) -> "_Induction":
        """The unrolled path of arbitrary states for the induction step at k (one per k, and
        one per model where shared)."""
        ind = self._inductions.get(k)
        if ind is None:
            shared = self._shared if self._shared is not None else {}
            ind = shared.get(("induction", k))
            if ind is None:
                ind = shared[("induction", k)] = _Induction(self, k)
            for tag, S in zip(ind.tags, ind.states):
                self._tags[id(S)] = (tag, S)
            self._inductions[k] = ind
        return ind

    def num(self, x: int):
        return z3.BitVecVal(x, self.bv) if self.bv else z3.IntVal(x)

    # -- solvers and states ----------------------------------------------------------------
    @property
    def stats(self) -> dict:
        """Solver statistics summed over every solver this system used (memory: the peak)."""
        out: dict = {"checks": self._checks}
        for snap in list(self._solvers.values()) + self._extra:
            merge_stats(out, snap)
        return out

    def solver(self) -> z3.Solver:
        s = z3.Solver()
        # SIGINT stays Python's (see Z3Call): Z3's own handler cancels the call and swallows the
        # signal, so a Ctrl-C that lands as the call finishes with sat or unsat is lost
        s.set("ctrl_c", False)
        if self.timeout_ms:
            s.set("timeout", self.timeout_ms)
        return s

    def check(self, s: z3.Solver, *assumptions) -> bool:
        from kcheck.cnf import INTERRUPTED
        try:
            if INTERRUPTED.is_set():
                raise KeyboardInterrupt
            with Z3Call.running():
                r = s.check(*assumptions)
            if INTERRUPTED.is_set():
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            # Ctrl-C during the call: Python's handler raised it once the call returned (stopped
            # by SolverStop's interrupt, or finished): the same answer as Z3 giving up on it
            raise Inconclusive("interrupted from keyboard") from None
        # a solver's counters accumulate over its checks: keep each solver's latest snapshot
        self._solvers[s] = _snapshot(s)
        self._checks += 1
        if r == z3.unknown:
            raise Inconclusive(s.reason_unknown())
        return r == z3.sat

    def state(self, tag: str) -> list:
        """The terms of a state's fields (a bit-vector field extended to the common width);
        its variables are kept under ``tag`` for ``frame``."""
        self._n += 1
        out = []
        self._tags[id(out)] = (tag, out)
        self.raw.setdefault(tag, [])
        for f in self.lay.fields:
            name = f"{tag}.{f.name}"
            if f.type.kind == "bool":
                out.append(z3.Bool(name))
                self.raw[tag].append(out[-1])
            elif self.bv and self.bits:
                unsigned, bits = self.field_bits[f.index]
                v = self._atoms(name, max(1, bits), self.raw[tag])
                extend = z3.ZeroExt if unsigned else z3.SignExt
                out.append(extend(self.bv - v.size(), v) if v.size() < self.bv else v)
            elif self.bv:
                unsigned, bits = self.field_bits[f.index]
                v = z3.BitVec(name, max(1, bits))
                self.raw[tag].append(v)
                extend = z3.ZeroExt if unsigned else z3.SignExt
                out.append(extend(self.bv - v.size(), v) if v.size() < self.bv else v)
            else:
                out.append(z3.Int(name))
                self.raw[tag].append(out[-1])
        return out

    @staticmethod
    def _atoms(name: str, width: int, into: list):
        """A bit-vector made of the Boolean atoms name#0 (its lowest bit) .. name#width-1."""
        bits = [z3.Bool(f"{name}#{i}") for i in range(width)]
        into += bits
        one, zero = z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)
        parts = [z3.If(b, one, zero) for b in reversed(bits)]
        return parts[0] if width == 1 else z3.Concat(*parts)

    def template_states(self):
        """The template states of a frame, S -c-> T ('frame.pre', 'frame.step', 'frame.post'),
        over which bmc writes every question once (kcheck.cnf.Template)."""
        if self._frame is None:
            S, T = self.state("frame.pre"), self.state("frame.post")
            self._frame = (S, self.choice("frame.step"), T)
        return self._frame

    def read_state(self, value, tag: str) -> list[int]:
        """The field values of the state ``tag`` from a SAT model (``value(atom name)``)."""
        out = []
        for f in self.lay.fields:
            name = f"{tag}.{f.name}"
            if f.type.kind == "bool":
                out.append(int(value(name)))
                continue
            unsigned, bits = self.field_bits[f.index]
            w = max(1, bits)
            x = sum(1 << i for i in range(w) if value(f"{name}#{i}"))
            out.append(x - (1 << w) if not unsigned and x >= 1 << (w - 1) else x)
        return out

    def read_choice(self, value, name: str) -> int:
        return sum(1 << i for i in range(self.choice_bits) if value(f"{name}#{i}"))

    def assume(self, lemmas: list[str], S):
        """The ``lemmas`` in state S where its ordinary fields are in range (a lemma is proved
        for such states; a state out of range is a spec error, reported by bmc, which the
        lemmas must not hide)."""
        return z3.Implies(z3.Not(self.out_of_range(S)), z3.And(*[self.holds(l, S) for l in lemmas]))

    def choice(self, name: str):
        """The variable naming the action instance a step runs."""
        if self.bv and self.bits:
            return self._atoms(name, self.choice_bits, self.raw.setdefault(name, []))
        return z3.BitVec(name, self.choice_bits) if self.bv else z3.Int(name)

    def chose(self, c, k: int):
        if isinstance(c, list):
            return c[k]
        return c == (z3.BitVecVal(k, self.choice_bits) if self.bv else k)

    def _act(self, k: int) -> str:
        inst = self.insts[k]
        return f"{self.where_action[inst.action.name]}: action {inst.label}"

    def in_range(self, S, ordinary: bool = True, capped: bool = True) -> list:
        """Range constraints: search bounds keep their lower end (their upper end too when the
        search bounds are kept); ordinary integers and Enums keep their range when ``ordinary``."""
        out = []
        for f, v in zip(self.lay.fields, S):
            t = f.type
            if t.kind == "bool":
                continue
            if t.search_bound:
                out.append(v >= t.lo)
                if self.keep:
                    out.append(v <= t.hi)
                elif capped and ordinary and self.cap is not None:
                    out.append(v <= self.cap)
            elif ordinary:
                out += [v >= t.lo, v <= t.hi]
        return out

    def out_of_range(self, S):
        """Some ordinary field outside its range: an error of the spec, as in the search."""
        terms = [z3.Or(v < f.type.lo, v > f.type.hi) for f, v in zip(self.lay.fields, S)
                 if f.type.kind != "bool" and not f.type.search_bound]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def over_cap(self, S):
        """Some lifted search bound above bmc's cap: the encoding must widen to go on exactly."""
        terms = [v > self.cap for f, v in zip(self.lay.fields, S)
                 if f.type.search_bound and not self.keep and self.cap is not None]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def init(self, S):
        alts = []
        for flat in self.model.initial_states:
            alts.append(z3.And(*[v == (z3.BoolVal(bool(x)) if f.type.kind == "bool" else self.num(x))
                                 for f, v, x in zip(self.lay.fields, S, flat)]))
        return z3.Or(*alts)

    def guard(self, k: int, env: Env):
        return evaluate(self.insts[k].guard, env, self._act(k))

    def guards(self, S) -> list:
        env = self.env(S)
        return [self.guard(k, env) for k in range(len(self.insts))]

    def step(self, S, c, T) -> list:
        """c names the instance that runs from S to T; its guard holds and T is its effect."""
        env = self.env(S)
        n = len(self.insts)
        if isinstance(c, list):
            cons = [z3.PbEq([(x, 1) for x in c], 1)]
        elif self.bv:
            cons = [z3.ULT(c, n)] if n < 1 << self.choice_bits else []
        else:
            cons = [c >= 0, c < n]
        for k in range(n):
            g = self.guard(k, env)
            if not z3.is_true(g):
                cons.append(z3.Implies(self.chose(c, k), g))
        writes: dict[int, list] = {}
        for k, inst in enumerate(self.insts):
            for idx, e in inst.writes.items():
                if e.op == "field" and e.args[0] == idx and e.args[2] == "pre":
                    continue   # written back unchanged
                writes.setdefault(idx, []).append((k, evaluate(e, env, self._act(k))))
        for idx, (f, s, t) in enumerate(zip(self.lay.fields, S, T)):
            val = s
            for k, w in reversed(writes.get(idx, [])):
                val = z3.If(self.chose(c, k), w, val)
            cons.append(t == val)
        # a step leaving a search bound is cut, as in the search
        cons += self.in_range(T, ordinary=False)
        return cons

    def outcome(self, k: int, env: Env):
        o = self.insts[k].outcome
        return evaluate(o if o is not None else const(0), env, self._act(k))

    # -- properties ------------------------------------------------------------------------
    def holds(self, prop: str, S):
        """An invariant (or deadlock freedom) as a Z3 condition on state S (built once per
        property and state)."""
        key = (prop, id(S))
        hit = self._holds.get(key)
        if hit is None:
            tag = self._tags.get(id(S))
            if self._shared is None or tag is None:
                term = self._holds_term(prop, S)
            else:
                term = self._shared.get(("holds", prop, tag[0]))
                if term is None:
                    term = self._shared[("holds", prop, tag[0])] = self._holds_term(prop, S)
            hit = self._holds[key] = (S, term)
        return hit[1]

    def _holds_term(self, prop: str, S):
        if prop == DEADLOCK:
            env = self.env(S)
            enabled = [self.guard(k, env) for k in range(len(self.insts))]
            if self.model.terminal is not None:
                enabled.append(evaluate(self.model.terminal, env, "the terminal condition"))
            return z3.Or(*enabled)
        return evaluate(self.inv_exprs[prop], self.env(S), f"{self.where_prop[prop]}: property {prop}")

    def step_ok(self, prop: str, S, c, T):
        """A transition property on the step S -c-> T."""
        env = self.env(S, T)
        terms = []
        for k, e in enumerate(self.tprop_exprs[prop]):
            if e is None or (e.op == "const" and e.args[0]):
                continue
            where = f"{self.where_prop[prop]}: property {prop} on {self.insts[k].label}"
            # the outcome inside e is the instance's outcome tree, a function of the pre-state
            terms.append(z3.Implies(self.chose(c, k), evaluate(e, env, where)))
        return z3.And(*terms) if terms else z3.BoolVal(True)

    def kind(self, prop: str) -> str:
        if prop == DEADLOCK:
            return "deadlock"
        kind = self.model.spec.properties[prop].kind
        return "invariant" if kind == "sometimes" else kind   # a path to a state, like one

    # -- reading a path back ---------------------------------------------------------------
    def values(self, m: z3.ModelRef, S) -> list[int]:
        out = []
        for f, v in zip(self.lay.fields, S):
            x = m.eval(v, model_completion=True)
            out.append(int(z3.is_true(x)) if f.type.kind == "bool" else
                       x.as_signed_long() if self.bv else x.as_long())
        return out

    def first_out_of_range(self, flat) -> FieldInfo | None:
        for f, x in zip(self.lay.fields, flat):
            if f.type.kind != "bool" and not f.type.search_bound and not f.type.lo <= x <= f.type.hi:
                return f
        return None


# ---------------------------------------------------------------------------------------------
# From a Z3 path to an ordinary trace

@dataclass
class SolverPath:
    """What the solver's model says: the flat field values of each state and the instances run.
    Not a counterexample yet: its values may lie outside the explicit encoding's ranges (a
    lifted search bound), so it is kept beside the verdict.Counterexample built from it
    (``solver_counterexample``, ``decode``)."""
    states: list[list[int]]
    steps: list[int]


def solver_counterexample(prop: str, kind: str, path: SolverPath) -> Counterexample:
    """The one counterexample type (checker/verdict.py) for a solver's path; ``decode`` packs
    its initial state and builds its trace."""
    return Counterexample(prop, kind, None, list(path.steps), path=path)


def decode(model: Model, cx: Counterexample) -> None:
    """Packs a solver's counterexample for replay: its trace (in a model with a bound raised,
    when needed, and then a note saying so) and, when it packs in ``model`` itself, its
    initial state."""
    cx.trace, cx.note = to_trace(model, cx.property, cx.kind, cx.path)
    if _fits(model, cx.path):
        cx.initial = tuple(layout_of(model).pack(_flat_to_dict(model, cx.path.states[0])))


def _flat_to_dict(model: Model, flat: list[int]) -> dict:
    return model.fields.show(flat)


def _fits(model: Model, path: SolverPath) -> bool:
    return _fits_fields(model.fields.fields, path)


def _fits_fields(fields: list[FieldInfo], path: SolverPath) -> bool:
    return all(f.type.lo <= x <= f.type.hi for st in path.states for f, x in zip(fields, st))


def _fields_at(spec, variant: str, params: dict) -> list[FieldInfo]:
    """The fields of the spec's model at these parameters, from the state declaration alone
    (instantiating the model builds every action instance: fit_model tried up to 85 models
    for one consumer_group trace, 0.15 s each, where it needs the fields of each and one model)."""
    defaults = spec.variant_info(variant).params if variant in spec.variants or variant in spec.profiles else {}
    return spec.fields_at(spec.resolve_params({**defaults, **params})).fields


def fit_model(model: Model, path: SolverPath) -> tuple[Model, str | None]:
    """A model of the same spec and variant in which every state of ``path`` packs: the same one
    when it fits, otherwise one with a bound parameter raised just enough."""
    if _fits(model, path):
        return model, None
    spec, base = model.spec, model.params.as_dict()
    for name, p in spec.params.items():
        probe = dict(base, **{name: min(p.hi, base[name] + 1)})
        if probe[name] == base[name]:
            continue
        fields = _fields_at(spec, model.variant, probe)
        if all(a.type.hi == b.type.hi and a.type.lo == b.type.lo
               for a, b in zip(fields, model.fields.fields)):
            continue   # not a bound parameter
        for v in range(base[name] + 1, p.hi + 1):
            params = dict(base, **{name: v})
            fields = fields if v == probe[name] else _fields_at(spec, model.variant, params)
            if _fits_fields(fields, path):
                return spec.instantiate(model.variant, params), (
                    f"the trace leaves the explicit search's bounds: it is replayed with "
                    f"{name}={v} (given {base[name]})")
    return model, None


def to_trace(model: Model, prop: str | None, kind: str | None, path: SolverPath) -> tuple[Trace | None, str | None]:
    m, note = fit_model(model, path)
    if not _fits(m, path):
        return None, "the trace exceeds every parameter's range, so it cannot be packed for replay"
    initial = tuple(layout_of(m).pack(_flat_to_dict(m, path.states[0])))
    ks = []
    for k in path.steps:
        inst = model.instances[k]
        ks.append(m.instance(inst.action.name, inst.args).index)
    return build(m, prop, kind, initial, ks), note


def path_from(sys_: System, m: z3.ModelRef, states: list, choices: list) -> SolverPath:
    return SolverPath([sys_.values(m, S) for S in states],
                [_chosen(m, c) for c in choices])


def _chosen(m: z3.ModelRef, c) -> int:
    if isinstance(c, list):
        return next(k for k, x in enumerate(c) if z3.is_true(m.eval(x, model_completion=True)))
    return m.eval(c, model_completion=True).as_long()


# ---------------------------------------------------------------------------------------------
# Bounded model checking

@dataclass
class BmcResult(RunResult):
    """A bounded model check's run (verdict.RunResult)."""
    engine = "z3-bmc"                 # not a field
    model: Model
    properties: list[str]
    depth: int                        # the depth explored
    found: dict[str, Counterexample] = field(default_factory=dict)
    exhaustive: bool = False          # no path is longer than the depth explored
    inconclusive: str | None = None   # why the solver stopped
    elapsed_s: float = 0.0
    stats: dict = field(default_factory=dict)
    width: int | None = None          # the bit-width of integer terms
    cap: int | None = None            # the cap on lifted search bounds (None: the bounds kept)
    requested_depth: int | None = None
    search_bounds_kept: bool = False
    lemmas_assumed: list[str] = field(default_factory=list)   # inductive lemmas asserted per state

    def status(self, prop: str) -> Verdict:
        if prop in self.found:
            st = Verdict.VIOLATED
        elif self.inconclusive:
            st = Verdict.UNKNOWN
        else:
            st = Verdict.HOLDS if self.exhaustive else Verdict.BOUNDED
        return sometimes_status(self.model.spec, prop, st)   # a witness of a sometimes: reached

    def reason(self, prop: str) -> str | None:
        return self.inconclusive if self.status(prop) is Verdict.UNKNOWN else None

    def kind(self, prop: str) -> str:
        return self.found[prop].kind if prop in self.found else super().kind(prop)

    @property
    def stop_reason(self) -> str | None:
        """Why the unrolling stopped before every path ended: 'interrupted' (Ctrl-C or SIGTERM
        stopped a solver call), 'solver' (it gave up), 'all-violated', 'max-depth'; None when
        no path is longer than the depth explored."""
        if self.inconclusive:
            cancelled = "interrupted from keyboard" in self.inconclusive or "cancel" in self.inconclusive
            return "interrupted" if cancelled else "solver"
        if self.exhaustive:
            return None
        return "all-violated" if self.properties and len(self.found) == len(self.properties) else "max-depth"

    @property
    def statistics(self) -> dict:
        """The figures of the run, as bmc's JSON names them."""
        return {"depth": self.depth, "requested_depth": self.requested_depth,
                "search_bounds": "kept" if self.search_bounds_kept else "lifted",
                "encoding": {"integer_bits": self.width, "lifted_bound_cap": self.cap},
                "lemmas_assumed": list(self.lemmas_assumed),
                "exhaustive": self.exhaustive, "inconclusive": self.inconclusive,
                "elapsed_s": round(self.elapsed_s, 3), "solver": self.stats}


def default_properties(model: Model) -> list[str]:
    props = list(model.spec.properties)
    return props + ([DEADLOCK] if model.spec.check_deadlock else [])


def _check_props(model: Model, props: list[str] | None) -> list[str]:
    valid = default_properties(model)
    if props is None:
        return valid
    for p in props:
        if p not in model.spec.properties and p != DEADLOCK:
            raise SpecError(f"unknown property '{p}' for spec {model.spec.name}; properties: "
                            f"{', '.join(model.spec.properties)}")
    return list(props)


class _Widen(Exception):
    """A lifted search bound can pass bmc's cap within the depth: encode again, wider."""


def bmc(model: Model, properties: list[str] | None = None, depth: int = 10,
        keep_search_bounds: bool = False, timeout_s: float | None = None,
        check_domain: bool = True, min_depth: int = 0, lemmas: bool | list[str] = True) -> BmcResult:
    """Shortest violations of ``properties`` within ``depth`` steps from the initial states
    (looking only at depths from ``min_depth`` on, when given: a quick search for a violation
    of known length).

    The lifted search bounds get a cap that no path of ``depth`` steps reaches when each step
    raises an epoch by at most one, which makes every field bounded and the encoding bit-vectors;
    whether a path passes the cap is asked at every depth with the other questions, and when one
    does the unrolling starts again with the cap raised: the answer is the one over unbounded
    integers.

    With ``lemmas``, the spec's lemmas that are inductive (``inductive_lemmas``) are asserted in
    every state of the unrolling: they hold in every reachable state, so no path is lost, and
    the SAT solver need not rediscover them to rule a depth out. ``lemmas`` may also be the list
    of lemmas to assume, already shown inductive (prove's base case)."""
    props = _check_props(model, properties)
    t0 = time.perf_counter()
    from kcheck.cnf import interrupted_in_z3
    cap = None if keep_search_bounds else depth + max(
        [f.type.hi for f in model.fields.fields if f.type.search_bound] + [0])
    try:
        if isinstance(lemmas, list):
            assumed, extra = list(lemmas), []
        else:
            assumed, extra = ([], []) if not lemmas else inductive_lemmas(model, timeout_s)
    except (KeyboardInterrupt, ctypes.ArgumentError) as e:
        if not interrupted_in_z3(e):
            raise
        # Ctrl-C while the lemmas were proved: not one depth was asked, which the result says
        # (bmc does not go on without the lemmas it was asked to assume)
        assumed, extra = [], []
        res = BmcResult(model, props, 0, inconclusive="solver: interrupted from keyboard")
    else:
        while True:
            try:
                res = _bmc(model, props, depth, keep_search_bounds, timeout_s, check_domain,
                           min_depth, cap, extra, assumed)
                break
            except _Widen:
                cap = 4 * cap + 1
    res.elapsed_s = time.perf_counter() - t0
    res.requested_depth, res.search_bounds_kept = depth, keep_search_bounds
    res.lemmas_assumed = assumed
    return res


KEPT_ENCODINGS = 3   # bmc's templates are kept for this many encodings of a model


def _templates(model: Model, encoding: tuple) -> dict:
    """bmc's templates of ``model`` in ``encoding`` (search bounds kept, cap, domain checked)."""
    return _lru_slot(kept(model).setdefault("templates", OrderedDict()), encoding, KEPT_ENCODINGS)


def _rename(d: int):
    """A template's atom names as frame d's: S -c-> T is state d-1, step d, state d."""
    pre, post, step = f"s{d - 1}.", f"s{d}.", f"step{d}#"

    def rename(name: str) -> str:
        if name.startswith("frame.post."):
            return post + name[11:]
        if name.startswith("frame.pre."):
            return pre + name[10:]
        if name.startswith("frame.step#"):
            return step + name[11:]
        return name
    return rename


def _bmc(model: Model, props: list[str], depth: int, keep_search_bounds: bool,
         timeout_s: float | None, check_domain: bool, min_depth: int, cap: int | None,
         extra: list[dict], assumed: list[str]) -> BmcResult:
    from kcheck.cnf import Cnf, Interrupted, Template, interrupted_in_z3
    sy = System(model, keep_search_bounds, timeout_s, cap, bits=True)
    lifted = any(f.type.search_bound for f in model.fields.fields)
    res = BmcResult(model, props, 0, width=sy.bv, cap=sy.cap if lifted else None)
    # Every question is written once over the template frame S -c-> T and bit-blasted once;
    # a frame is a renumbered copy of its clauses (checker/cnf.py). One incremental solver for
    # the whole unrolling: each depth adds its frame once, and every question is asked under an
    # assumption literal, so what the SAT solver learnt at depth d is kept at depth d + 1.
    # The templates depend on the model and the encoding alone: kept per model for the
    # encodings used last (prove asks the same base case of every property, and the tests ask
    # bmc several times of a model with the same bounds)
    made = _templates(model, (keep_search_bounds, sy.cap, check_domain))
    out = z3.Bool("out")   # a question's answer, one atom per copy

    def template(name, term) -> Template:
        """The template ``name``, bit-blasted from ``term()`` unless it was made before."""
        t = made.get(name)
        if t is None:
            t = made[name] = Template(term())
        return t

    def answer(name, term) -> Template:
        return template(name, lambda: out == term())

    def frame(build):
        """``build(S, c, T)`` over the template frame (whose variables are made only when a
        template is bit-blasted)."""
        return lambda: build(*sy.template_states())

    try:
        # (at depth 0, prove's base case for k = 1, no step is taken: none is bit-blasted)
        step = template("step", frame(lambda S, c, T: z3.And(*sy.step(S, c, T), *sy.in_range(S), *(
            [] if check_domain else sy.in_range(T, capped=False))))) if depth > 0 else None
        init = template("init", frame(lambda S, c, T: sy.init(T)))
        lemmas = template(("lemmas", tuple(assumed)), frame(lambda S, c, T: sy.assume(assumed, T))) \
            if assumed else None
        bad = {}
        for p in props:
            if sy.kind(p) == "transition":
                bad[p] = answer(("bad", p), frame(lambda S, c, T: z3.Not(sy.step_ok(p, S, c, T))))
            else:
                bad[p] = answer(("bad", p), frame(lambda S, c, T: z3.Not(sy.holds(p, T))))

        def wrong_term(S, c, T):
            return z3.Or(*([sy.out_of_range(T)] if check_domain else []),
                         *([sy.over_cap(T)] if sy.cap is not None else []))
        wrong = answer("wrong", frame(wrong_term)) if check_domain or sy.cap is not None else None
    except (KeyboardInterrupt, ctypes.ArgumentError) as e:
        if not interrupted_in_z3(e):
            raise
        # Ctrl-C while the questions were bit-blasted (Z3's tactics leave SIGINT to Python):
        # no depth was looked at, which the result says rather than a bare 'interrupted'
        res.inconclusive = "solver: interrupted from keyboard"
        return res
    cnf = Cnf(timeout_s)
    cnf.add(init, _rename(0))
    if lemmas:
        cnf.add(lemmas, _rename(0))
    pending = list(props)

    def ask(template: Template, d: int, name: str) -> int:
        """The literal of a question about depth d."""
        rename = _rename(d)
        cnf.add(template, lambda a: name if a == "out" else rename(a))
        return cnf.atom(name)

    def solve(lits: list[int]):
        """A model of the unrolling in which one of ``lits`` holds, or None."""
        a = cnf.fresh()
        cnf.clause([-a, *lits])
        m = cnf.solve([a])
        cnf.clause([-a])   # retire the question
        return m

    def path(m) -> SolverPath:
        value = lambda name: cnf.value(m, name)
        return SolverPath([sy.read_state(value, f"s{i}") for i in range(d_now[0] + 1)],
                          [sy.read_choice(value, f"step{i}") for i in range(1, d_now[0] + 1)])

    d_now = [0]

    def look(d: int) -> bool:
        """Check depth d; False when no path has d steps."""
        d_now[0] = d
        if d < min_depth:
            return True
        bads = {p: ask(bad[p], d, f"bad.{p}.{d}") for p in pending
                if not (d == 0 and sy.kind(p) == "transition")}
        w = ask(wrong, d, f"wrong.{d}") if wrong is not None and d > 0 else None
        # one question per depth when nothing is wrong there (the common case)
        m = solve([*bads.values()] + ([w] if w else []))
        if m is None:
            # no state at depth d violates anything: a fact the solver keeps for deeper depths
            for b in bads.values():
                cnf.clause([-b])
            return d == 0 or cnf.solve([]) is not None
        if w:
            mw = m if w in m else solve([w])
            if mw is not None:
                pa = path(mw)
                f = sy.first_out_of_range(pa.states[-1])
                if f is None:
                    raise _Widen()
                inst = model.instances[pa.steps[-1]]
                raise SpecError(f"{sy.where_action[inst.action.name]}: action {inst.label} sets {f.name} to "
                                f"{pa.states[-1][f.index]}, outside its range {f.type.lo}..{f.type.hi} "
                                f"(found by bmc at depth {d}): widen the field's Int range or guard the action")
        # a model answers for every property it violates; the others are asked together, so
        # that one unsatisfiable question rules them all out at this depth (asked one by one,
        # each cost a question: most of consumer_group's 180 at depth 11)
        left, now = dict(bads), {}
        try:
            while m is not None:
                for p in [p for p, b in left.items() if b in m]:
                    now[p] = path(m)
                    del left[p]
                m = solve(list(left.values())) if left else None
        finally:   # what was found stays found when a later question is interrupted
            for p in bads:
                if p in now:
                    res.found[p] = solver_counterexample(p, sy.kind(p), now[p])
                    pending.remove(p)
        for b in left.values():
            cnf.clause([-b])
        return True

    try:
        look(0)
        for d in range(1, depth + 1):
            if props and not pending:
                break   # every property is violated
            cnf.add(step, _rename(d))
            if lemmas:
                cnf.add(lemmas, _rename(d))
            if not look(d):
                res.exhaustive = True   # no path has d steps: every behaviour was covered
                break
            res.depth = d
    except Interrupted as e:
        res.inconclusive = f"solver: {e}"
    except (KeyboardInterrupt, ctypes.ArgumentError) as e:
        if not interrupted_in_z3(e):
            raise
        # Ctrl-C while a frame was being encoded (in Z3, outside the SAT solver's call)
        res.inconclusive = "solver: interrupted from keyboard"
    except _Widen:
        extra.append({"checks": cnf.calls, **cnf.stats})   # this encoding's work counts too
        cnf.close()
        raise
    for cx in res.found.values():
        decode(model, cx)
    res.stats = {"checks": cnf.calls, **cnf.stats}
    for more in extra:
        merge_stats(res.stats, more)
    cnf.close()
    return res


# ---------------------------------------------------------------------------------------------
# k-induction with lemmas

@dataclass
class ProofResult(RunResult):
    """One property's k-induction run (verdict.RunResult, engine 'z3-k-induction'): its
    ``verdict`` (proved, violated, not-inductive or unknown), the k that decided it, the lemmas
    assumed and dropped, and its ``counterexample``: a reachable violation, or the counterexample
    to induction, a verdict.Counterexample whose first state is concrete (it satisfies the
    property and the lemmas) though maybe unreachable; ``cti_action`` is the instance that
    breaks the property there. ``why`` says in one sentence how the verdict was reached when the
    k-induction alone did not (bmc after the induction step failed, the solver gave up)."""
    engine = "z3-k-induction"          # not a field
    model: Model
    property: str
    verdict: Verdict
    k: int                             # the k that proved it, or the largest tried
    lemmas_used: list[str] = field(default_factory=list)
    lemmas_dropped: dict[str, str] = field(default_factory=dict)   # name -> 'violated'/'not inductive'
    counterexample: Counterexample | None = None   # a violation, or the counterexample to induction
    cti_action: str | None = None
    why: str | None = None
    elapsed_s: float = 0.0
    stats: dict = field(default_factory=dict)
    k_max: int = 1

    @property
    def properties(self) -> list[str]:
        return [self.property]

    @property
    def found(self) -> dict[str, Counterexample]:
        """The reachable violation (a counterexample to induction is not one)."""
        cx = self.counterexample
        return {self.property: cx} if cx is not None and self.verdict is Verdict.VIOLATED else {}

    def status(self, prop: str) -> str:
        return self.verdict.value

    def reason(self, prop: str) -> str | None:
        return self.why

    @property
    def stop_reason(self) -> str | None:
        return "solver" if self.verdict is Verdict.UNKNOWN else None

    @property
    def statistics(self) -> dict:
        """The figures of the proof, as prove's JSON names them (per property)."""
        return {"k": self.k, "k_max": self.k_max, "lemmas_used": list(self.lemmas_used),
                "lemmas_dropped": dict(self.lemmas_dropped), "cti_action": self.cti_action,
                "elapsed_s": round(self.elapsed_s, 3), "solver": self.stats}


class _Induction:
    """Shared unrolled paths s0..sk of arbitrary (in-range) states for the induction steps."""

    def __init__(self, sy: System, k: int):
        self.tags = [f"i{k}.s{i}" for i in range(k + 1)]
        self.states = [sy.state(tag) for tag in self.tags]
        self.choices = [z3.Int(f"i{k}.step{i + 1}") for i in range(k)]
        self.base = []
        for S in self.states:
            self.base += sy.in_range(S)
        for i in range(k):
            self.base += sy.step(self.states[i], self.choices[i], self.states[i + 1])


def _houdini(sy: System, k: int, lemmas: list[str], dropped: dict,
             trusted: frozenset = frozenset()) -> list[str]:
    """The largest subset of ``lemmas`` that is k-inductive (relative to itself).

    ``trusted`` are lemmas already shown inductive together (``inductive_lemmas``): any set of
    lemmas inductive relative to itself is part of the largest, so none of them is ever dropped,
    and once they are assumed in the first k states they hold in the last one too. So a round
    asks only whether a lemma not trusted can fail there: the same answer, and in the common
    case (every lemma inductive) a question about the target alone instead of about every lemma."""
    ind = sy.induction(k)
    live = list(lemmas)
    while live:
        goal = [l for l in live if l not in trusted]
        if not goal:
            return live
        s = sy.solver()
        s.add(*ind.base)
        for S in ind.states[:-1]:
            s.add(*[sy.holds(l, S) for l in live])
        last = ind.states[-1]
        if not sy.check(s, z3.Not(z3.And(*[sy.holds(l, last) for l in goal]))):
            return live
        m = s.model()
        bad = [l for l in live if z3.is_false(m.eval(sy.holds(l, last), model_completion=True))]
        for l in bad:
            live.remove(l)
            dropped[l] = "not inductive"
    return live


def inductive_lemmas(model: Model, timeout_s: float | None = None) -> tuple[list[str], list[dict]]:
    """The spec's lemmas that hold in every reachable state, epochs unbounded: those true in
    every initial state that are 1-inductive together (Houdini), and the statistics of the
    solvers that showed it. When the solver gives up, no lemma is assumed.

    The answer depends on the model alone (not on the time limit, when it is reached in time),
    so it is kept per model (``kept``) once found: a later call on the same model answers at once,
    with no solver statistics of its own. An answer the solver gave up on is never kept."""
    try:
        return _inductive_lemmas(model, timeout_s)
    except Inconclusive as e:
        from kcheck.cnf import STOP      # set on SIGTERM (symbolic_cli.SolverStop)
        if STOP.is_set():
            from kcheck.bfs import Terminated
            raise Terminated from None
        reason = str(e)
        if "interrupted from keyboard" in reason or ("cancel" in reason and timeout_s is None):
            # Ctrl-C stopped Z3's call (Z3 takes SIGINT for itself and says either): an
            # interruption, not a reason to go on without the lemmas. With a --timeout,
            # 'canceled' is the timeout's word too, and the lemmas are left out as before.
            raise KeyboardInterrupt from None
        return [], [e.stats]


def _inductive_lemmas(model: Model, timeout_s: float | None) -> tuple[list[str], list[dict]]:
    """inductive_lemmas, or Inconclusive (carrying the statistics of the work done) when the
    solver gave up."""
    names = [p.name for p in model.invariants if p.lemma]
    if not names:
        return [], []
    store = kept(model)
    if "inductive lemmas" in store:
        return list(store["inductive lemmas"]), []
    sy = System(model, False, timeout_s)
    try:
        S = sy.state("init")
        s = sy.solver()
        s.add(sy.init(S), *sy.in_range(S))
        live = [l for l in names if not sy.check(s, z3.Not(sy.holds(l, S)))]
        live = _houdini(sy, 1, live, {})
    except Inconclusive as e:
        e.stats = sy.stats
        raise
    store["inductive lemmas"] = tuple(live)
    return live, [sy.stats]


def prove(model: Model, prop: str, k_max: int = 3, use_lemmas: bool = True,
          timeout_s: float | None = None, bmc_depth: int = 5) -> ProofResult:
    """Prove ``prop`` for every reachable state with the search bounds lifted, by k-induction
    for k = 1..k_max, assuming the spec's lemmas that are proved first. When it is not
    inductive, bmc looks ``bmc_depth`` steps deep for a real violation before saying so."""
    res = _prove(model, prop, k_max, use_lemmas, timeout_s)
    if res.verdict is Verdict.NOT_INDUCTIVE and bmc_depth > k_max - 1:
        b = bmc(model, [prop], bmc_depth, timeout_s=timeout_s)
        res.stats = dict(res.stats)
        merge_stats(res.stats, b.stats)
        res.elapsed_s += b.elapsed_s
        if prop in b.found:
            res.verdict, res.counterexample, res.cti_action = Verdict.VIOLATED, b.found[prop], None
            res.why = f"not inductive, and bmc finds a violation in {len(b.found[prop].path.steps)} steps"
        elif b.exhaustive:
            res.verdict, res.counterexample, res.cti_action = Verdict.PROVED, None, None
            res.why = f"bmc covers every behaviour (none is longer than {b.depth} steps)"
        else:
            res.why = f"bmc finds no violation up to depth {b.depth} either"
    return res


def provable_properties(model: Model) -> list[str]:
    """The properties k-induction answers: all but the sometimes properties (a scenario is
    reachable or not; check and bmc find its witness, and a proof of "never P" would read as
    the opposite of what the property says)."""
    return [p for p in default_properties(model)
            if p not in model.spec.properties or model.spec.properties[p].kind != "sometimes"]


def _prove(model: Model, prop: str, k_max: int, use_lemmas: bool, timeout_s: float | None) -> ProofResult:
    _check_props(model, [prop])
    if prop not in provable_properties(model):
        raise SpecError(f"{prop} is a sometimes property (a scenario stated reachable): 'kcheck "
                        f"check' and 'kcheck bmc' find its witness; prove answers "
                        f"{', '.join(provable_properties(model))}")
    sy = System(model, False, timeout_s)
    t0 = time.perf_counter()
    res = ProofResult(model, prop, Verdict.UNKNOWN, 0, k_max=k_max)
    kind = sy.kind(prop)
    lemmas = [p.name for p in model.invariants if p.lemma and p.name != prop] if use_lemmas else []
    try:
        # the lemmas shown inductive hold in every reachable state: once they are known for the
        # model (kept by an earlier proof), the base case assumes them instead of asking. The
        # first proof finds them after its base case, which stays its first step: a Ctrl-C there
        # is its partial result, not a bare interruption
        trusted = frozenset(kept(model).get("inductive lemmas", ()))
        # base: no violation of the target or of a lemma within k_max - 1 steps
        base = bmc(model, [prop] + [l for l in lemmas if l not in trusted], k_max - 1,
                   timeout_s=timeout_s, lemmas=[l for l in lemmas if l in trusted])
        sy._extra.append(base.stats)
        if base.inconclusive:      # bmc's reason already starts 'solver: ', as ours will
            raise Inconclusive(base.inconclusive.removeprefix("solver: "))
        for l in lemmas:
            if l in base.found:
                res.lemmas_dropped[l] = "violated"
        if prop in base.found:
            res.verdict, res.counterexample = Verdict.VIOLATED, base.found[prop]
            res.k = len(base.found[prop].path.steps)
            return _done(res, sy, t0)
        if base.exhaustive:
            res.verdict, res.k, res.why = Verdict.PROVED, base.depth, "every behaviour ends within the base case"
            return _done(res, sy, t0)
        lemmas = [l for l in lemmas if l not in res.lemmas_dropped]
        if lemmas and "inductive lemmas" not in kept(model):
            trusted = _trusted_lemmas(model, sy, timeout_s)
        for k in range(1, k_max + 1):
            dropped: dict = {}
            # the target joins the lemmas: a lemma may need the target as much as the reverse
            joint = lemmas + ([prop] if kind != "transition" else [])
            live = _houdini(sy, k, joint, dropped, trusted)
            if prop in live:
                res.verdict, res.k = Verdict.PROVED, k
                res.lemmas_used = [l for l in live if l != prop]
                res.lemmas_dropped.update(dropped)
                return _done(res, sy, t0)
            dropped.pop(prop, None)
            ind = sy.induction(k)
            s = sy.solver()
            s.add(*ind.base)
            for S in ind.states:   # proved lemmas hold in every reachable state
                s.add(*[sy.holds(l, S) for l in live])
            last, pre = ind.states[-1], ind.states[-2]
            if kind == "transition":
                for i in range(k - 1):
                    s.add(sy.step_ok(prop, ind.states[i], ind.choices[i], ind.states[i + 1]))
                bad = z3.Not(sy.step_ok(prop, pre, ind.choices[-1], last))
            else:
                for S in ind.states[:-1]:
                    s.add(sy.holds(prop, S))
                bad = z3.Not(sy.holds(prop, last))
            res.k, res.lemmas_used = k, live
            res.lemmas_dropped.update(dropped)
            if not sy.check(s, bad):
                res.verdict = Verdict.PROVED
                return _done(res, sy, t0)
            path = path_from(sy, s.model(), ind.states, ind.choices)
            res.counterexample = solver_counterexample(prop, kind, path)
            res.cti_action = model.instances[path.steps[-1]].label
            res.verdict = Verdict.NOT_INDUCTIVE
            if k < k_max:
                res.lemmas_dropped = {l: r for l, r in res.lemmas_dropped.items() if r == "violated"}
    except Inconclusive as e:
        res.verdict, res.why = Verdict.UNKNOWN, f"solver: {e}"
    return _done(res, sy, t0)


def _trusted_lemmas(model: Model, sy: System, timeout_s: float | None) -> frozenset:
    """The spec's lemmas shown inductive together (kept per model: found once for every
    property proved on it), which Houdini then need not ask about again. A time limit reached
    on the way leaves none trusted (the proof goes on as before); an interruption is the
    proof's own (Inconclusive)."""
    from kcheck.cnf import INTERRUPTED, STOP
    try:
        live, stats = _inductive_lemmas(model, timeout_s)
    except Inconclusive as e:
        sy._extra.append(e.stats)
        if INTERRUPTED.is_set() or STOP.is_set():
            raise
        return frozenset()
    sy._extra += stats
    return frozenset(live)


def merge_stats(total: dict, more: dict):
    for k, v in more.items():
        total[k] = max(total.get(k, 0), v) if k == "max memory MB" else total.get(k, 0) + v


def _done(res: ProofResult, sy: System, t0: float) -> ProofResult:
    cx = res.counterexample
    if cx is not None and cx.trace is None:
        decode(res.model, cx)
    res.elapsed_s = time.perf_counter() - t0
    res.stats = sy.stats
    return res


# ---------------------------------------------------------------------------------------------
# Comparing a named rule across two variants

def _key(v):
    if isinstance(v, Expr):
        return (v.op, v.kind, tuple(_key(x) for x in v.args))
    return (type(v).__name__, repr(v))


def rule_call_sites(model: Model, rule: str) -> list[dict]:
    """The distinct argument sets with which the model's actions call ``rule``."""
    seen, out = set(), []
    for action in model.spec.actions:
        for args in model._arg_combinations(action):
            t = Transition(model.fields, model.params, model.variant, model.spec, getattr(model, "runs", None))
            try:
                action.fn(t, model.params, **args)
            except SpecError:
                raise
            except Exception as e:
                raise SpecError(f"{_where(action.fn)}: action {action.name} raised "
                                f"{type(e).__name__}: {e}") from None
            for name, a in t.rule_calls:
                if name != rule:
                    continue
                key = tuple(sorted((k, _key(v)) for k, v in a.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(a)
    return out


@dataclass
class Difference:
    """A state and request on which the two variants decide differently."""
    state: dict
    args: dict
    result_a: object
    result_b: object

    def to_json(self, variants: tuple[str, str]) -> dict:
        return {"state": self.state, "args": self.args,
                "results": {variants[0]: self.result_a, variants[1]: self.result_b}}


@dataclass
class CompareResult(RunResult):
    """A rule compared across two variants (verdict.RunResult, engine 'z3-compare'). Three
    questions, each answered over every state satisfying the assumed invariants: whether A
    accepts every request B accepts, the converse, and whether the two decide alike. Each is
    PROVED, VIOLATED with a ``Difference`` as its witness, or UNKNOWN when the solver gave up
    (``inconclusive``); ``relation`` sums them up. ``model`` is variant A's."""
    engine = "z3-compare"             # not a field
    model: Model
    rule: str
    variants: tuple[str, str]
    assumed: list[str]
    call_sites: int
    accept_value: str | None
    a_rejects_b_accepts: Difference | None = None   # None: A accepts everything B accepts
    b_rejects_a_accepts: Difference | None = None
    decisions_differ: Difference | None = None       # any difference of result (e.g. error code)
    inconclusive: str | None = None
    elapsed_s: float = 0.0
    stats: dict = field(default_factory=dict)
    lifted: list[str] = field(default_factory=list)

    @property
    def witnesses(self) -> dict[str, Difference | None]:
        """Each question by its name, with the witness that answers it no (None: none found)."""
        a, b = self.variants
        return {f"{a}-accepts-what-{b}-accepts": self.a_rejects_b_accepts,
                f"{b}-accepts-what-{a}-accepts": self.b_rejects_a_accepts,
                "same-decisions": self.decisions_differ}

    @property
    def properties(self) -> list[str]:
        return list(self.witnesses)

    def status(self, prop: str) -> str:
        if self.witnesses[prop] is not None:
            return Verdict.VIOLATED.value
        return Verdict.UNKNOWN.value if self.inconclusive else Verdict.PROVED.value

    def reason(self, prop: str) -> str | None:
        return self.inconclusive if self.status(prop) == Verdict.UNKNOWN else None

    def kind(self, prop: str) -> str:
        return "rule-decisions" if prop == "same-decisions" else "rule-acceptance"

    @property
    def stop_reason(self) -> str | None:
        return "solver" if self.inconclusive else None

    @property
    def relation(self) -> str:
        a, b = self.variants
        if self.inconclusive:
            return "unknown"
        x, y = self.a_rejects_b_accepts is None, self.b_rejects_a_accepts is None
        if x and y:
            return "same-acceptance"
        if x:
            return f"{a} accepts strictly more than {b}"
        if y:
            return f"{b} accepts strictly more than {a}"
        return "incomparable"

    @property
    def statistics(self) -> dict:
        """The figures of the comparison, as compare's JSON names them."""
        return {"rule": self.rule, "variants": list(self.variants), "relation": self.relation,
                "accept_value": self.accept_value, "assumed_invariants": list(self.assumed),
                "call_sites": self.call_sites, "lifted": list(self.lifted),
                "inconclusive": self.inconclusive, "elapsed_s": round(self.elapsed_s, 3),
                "solver": self.stats}


def _field_layout(model: Model) -> dict[str, tuple]:
    """Each flat state field with what its value means (kind and range), as compare needs them
    alike in two models: one solver state stands for a state of both. A search bound's upper end
    is left out: the solver lifts it (two variants checked at different max_epoch compare)."""
    return {f.name: (f.type.kind, f.type.lo, None if f.type.search_bound else f.type.hi)
            for f in model.fields.fields}


def same_layout(ma: Model, mb: Model) -> None:
    """Refuses two models whose state fields differ (in name, order, kind or range), naming the
    fields: a rule of one evaluated on the other's state would read another field."""
    la, lb = _field_layout(ma), _field_layout(mb)
    if list(la.items()) == list(lb.items()):
        return
    only_a = [n for n in la if n not in lb]
    only_b = [n for n in lb if n not in la]
    ranged = [n for n in la if n in lb and la[n] != lb[n]]
    parts = ([f"only in {ma.spec.name}: {', '.join(only_a[:6])}{' ...' if len(only_a) > 6 else ''}"]
             if only_a else []) + \
            ([f"only in {mb.spec.name}: {', '.join(only_b[:6])}{' ...' if len(only_b) > 6 else ''}"]
             if only_b else []) + \
            ([f"of another kind or range: {', '.join(ranged[:6])}{' ...' if len(ranged) > 6 else ''}"]
             if ranged else [])
    raise SpecError(f"{ma.spec.name}/{ma.variant} and {mb.spec.name}/{mb.variant} have different state "
                    f"fields ({'; '.join(parts) or 'the same fields in another order'}): compare "
                    f"evaluates both rules on one state, which needs the fields alike (give "
                    f"--param values that make them so, or compare other variants)")


def compare(spec, rule: str, variant_a: str, variant_b: str, params: dict | None = None,
            lift: list[str] | None = None, accept: str | None = None, assume: str = "invariants",
            timeout_s: float | None = None, spec_b=None) -> CompareResult:
    """Decide whether rule ``rule`` in variant A accepts every request that variant B accepts,
    and conversely, over every state satisfying the assumed invariants (search bounds lifted).
    ``spec_b``: the spec variant B belongs to, when it is not ``spec`` (a copy of a rule in a
    spec derived from a shipped one, compared with the shipped rule); both must have the same
    state fields at ``params``, and the variants are then named SPEC:VARIANT."""
    spec_b = spec if spec_b is None else spec_b
    for sp in (spec, spec_b):
        if rule not in sp.rules:
            raise SpecError(f"unknown rule '{rule}' for spec {sp.name}; rules: {', '.join(sp.rules) or 'none'}")
    ma = spec.instantiate(variant_a, params or {})
    mb = spec_b.instantiate(variant_b, params or {})
    # also within one spec: two variants checked at different parameters (a variant's params=)
    # may have different fields, and B's rule would read A's state at the wrong places
    same_layout(ma, mb)
    t0 = time.perf_counter()
    sy = System(ma, False, timeout_s)
    impl_a, impl_b = spec._rule_impl(rule, variant_a), spec_b._rule_impl(rule, variant_b)
    sites_raw = rule_call_sites(ma, rule) + rule_call_sites(mb, rule)
    if not sites_raw:
        raise SpecError(f"no action of {spec.name} calls rule '{rule}'")
    lift = list(lift or [])
    for name in lift:
        if not any(name in a for a in sites_raw):
            raise SpecError(f"--lift {name}: rule '{rule}' has no argument '{name}'; arguments: "
                            f"{', '.join(sorted({k for a in sites_raw for k in a}))}")
    # lifted arguments become free integers; the remaining argument sets are deduplicated
    lifted = {n: Expr("field", (-1, n, "arg"), "int") for n in lift}
    sites, seen = [], set()
    for a in sites_raw:
        a = {**a, **{n: lifted[n] for n in lift if n in a}}
        key = tuple(sorted((k, _key(v)) for k, v in a.items()))
        if key not in seen:
            seen.add(key)
            sites.append(a)
    if assume == "none":
        assumed = []
    else:
        bad = set()
        for sp, v in ((spec, ma.variant), (spec_b, mb.variant)):
            bad |= recorded_violations(sp, v)
        # across two specs, an invariant is assumed only where both state it: a state the
        # comparison ranges over must be one that both specs' reachable states may be
        both = {p.name for p in mb.invariants}
        assumed = [p.name for p in ma.invariants if (p.lemma or assume == "invariants")
                   and p.name not in bad and p.name in both]
    arg_vars = {n: z3.Int(f"arg.{n}") for n in lift}
    names = ((ma.variant, mb.variant) if spec_b is spec else
             (f"{spec.name}:{ma.variant}", f"{spec_b.name}:{mb.variant}"))
    res = CompareResult(ma, rule, names, assumed, len(sites), None, lifted=lift)
    S = sy.state("s")
    s = sy.solver()
    s.add(*sy.in_range(S))
    for p in assumed:
        s.add(sy.holds(p, S))
    where_a, where_b = _where(impl_a), _where(impl_b)
    try:
        for args in sites:
            ra = _call_rule(impl_a, ma, args, where_a, rule)
            rb = _call_rule(impl_b, mb, args, where_b, rule)
            if ra.kind != rb.kind:
                raise SpecError(f"{where_b}: rule {rule} returns a {rb.kind} in {mb.variant} but a "
                                f"{ra.kind} in {ma.variant}")
            env = Env(S, None, arg_vars)
            za = evaluate(ra, env, f"{where_a}: rule {rule} ({ma.variant})")
            zb = evaluate(rb, env, f"{where_b}: rule {rule} ({mb.variant})")
            enum = ra.enum or rb.enum
            if ra.enum is not None and rb.enum is not None and ra.enum.names != rb.enum.names:
                raise SpecError(f"{where_b}: rule {rule} returns a {rb.enum.name} in "
                                f"{res.variants[1]} but a {ra.enum.name} in {res.variants[0]}, "
                                f"with other values: their answers cannot be compared")
            if ra.kind == "bool":
                acc_a, acc_b = za, zb
            else:
                if enum is None:
                    raise SpecError(f"{where_a}: rule {rule} returns a plain integer; compare needs a "
                                    f"condition or an Enum (e.g. an error code)")
                names = enum.names
                av = accept or ("NONE" if "NONE" in names else names[0])
                if av not in names:
                    raise SpecError(f"--accept {av}: not a value of {enum.name}: {', '.join(names)}")
                res.accept_value = av
                acc_a, acc_b = za == names.index(av), zb == names.index(av)
            show = (lambda v: enum.show(v)) if enum is not None else bool

            def witness(cond):
                if not sy.check(s, cond):
                    return None
                m = s.model()
                vals = sy.values(m, S)
                shown_args = {}
                for k, v in args.items():
                    if k in arg_vars:
                        shown_args[k] = m.eval(arg_vars[k], model_completion=True).as_long()
                    elif isinstance(v, Expr):
                        x = m.eval(evaluate(v, env, f"rule {rule} argument {k}"), model_completion=True)
                        shown_args[k] = f"{v!r} = {x}"
                    else:
                        shown_args[k] = getattr(v, "name", v)
                ev = lambda z: m.eval(z, model_completion=True)
                ra_v, rb_v = ev(za), ev(zb)
                conv = (lambda x: z3.is_true(x)) if ra.kind == "bool" else (lambda x: show(x.as_long()))
                return Difference(ma.fields.show(vals), shown_args, conv(ra_v), conv(rb_v))

            if res.a_rejects_b_accepts is None:
                res.a_rejects_b_accepts = witness(z3.And(acc_b, z3.Not(acc_a)))
            if res.b_rejects_a_accepts is None:
                res.b_rejects_a_accepts = witness(z3.And(acc_a, z3.Not(acc_b)))
            if res.decisions_differ is None:
                res.decisions_differ = witness(za != zb)
    except Inconclusive as e:
        res.inconclusive = f"solver: {e}"
    res.elapsed_s = time.perf_counter() - t0
    res.stats = sy.stats
    return res


def _call_rule(impl, model: Model, args: dict, where: str, rule: str) -> Expr:
    t = Transition(model.fields, model.params, model.variant, model.spec, getattr(model, "runs", None))
    try:
        r = impl(t, model.params, **args)
    except SpecError as e:
        raise SpecError(f"{where}: rule {rule}: {e}") from None
    except Exception as e:
        raise SpecError(f"{where}: rule {rule} raised {type(e).__name__}: {e}") from None
    return const(r)


# ---------------------------------------------------------------------------------------------
# After NOT INDUCTIVE: what the counterexample to induction has that reachable states do not

@dataclass
class InductionHint:
    """Guidance for a counterexample to induction (CTI), for a person choosing a lemma (issue
    37: prove answered NOT INDUCTIVE with epochs in the thousands and no word on what to add).

    ``differing``: the fields in which the CTI's first state differs from the reachable states
    it resembles most (fewest differing fields), each with its value there and the values in
    those reachable states; ``candidates``: the spec's declared invariants that are false in a
    state of the CTI and hold in every reachable state searched, so that assuming one (as a
    lemma) would exclude this CTI. ``reachable``: the states searched, all of them when
    ``exhaustive``."""
    reachable: int
    exhaustive: bool
    distance: int | None = None               # fields differing from the nearest reachable states
    nearest: int = 0                          # how many reachable states are that near
    # field -> (its value in the CTI, its other values in the nearest states, in how many of them)
    differing: dict[str, tuple] = field(default_factory=dict)
    candidates: list[tuple[str, bool]] = field(default_factory=list)   # (invariant, is a lemma)
    why_not_searched: str | None = None

    def to_json(self, lemmas_dropped: dict[str, str]) -> dict:
        """The hint as `prove --json` gives it, with what the terminal prints: each differing
        field with its value here, its values in the nearest reachable states and in how many
        of them; each candidate lemma with why it was not assumed (``lemmas_dropped``: the
        proof's lemmas not proved inductive)."""
        return {"reachable": self.reachable, "exhaustive": self.exhaustive,
                "distance": self.distance, "nearest": self.nearest,
                "differing": {name: {"here": here, "reachable": list(there), "in": n}
                              for name, (here, there, n) in self.differing.items()},
                "candidates": [{"invariant": name, "lemma": lemma,
                                "why_not_assumed": candidate_note(name, lemma, lemmas_dropped)}
                               for name, lemma in self.candidates],
                "why_not_searched": self.why_not_searched}


def candidate_note(name: str, lemma: bool, lemmas_dropped: dict[str, str]) -> str:
    """Why a candidate lemma of an induction hint was not assumed, in a few words."""
    if name in lemmas_dropped:
        return "a lemma not proved inductive: it may need a lemma of its own"
    return "a lemma, left out by --no-lemmas" if lemma else "declare it lemma=True to assume it"


def induction_hint(model: Model, res: ProofResult, max_states: int = 200_000) -> InductionHint | None:
    """The hint for ``res``'s counterexample to induction (None unless it is NOT INDUCTIVE with
    a solver path): the reachable states come from the explicit state graph at the model's
    parameters (up to ``max_states``), the invariants are evaluated on the CTI's states by Z3
    (its values may lie outside the parameters' ranges, where no state can be packed)."""
    from kcheck.graph import GraphTooLarge, build_graph
    cx = res.counterexample
    if res.verdict is not Verdict.NOT_INDUCTIVE or cx is None or getattr(cx, "path", None) is None:
        return None
    lay = layout_of(model)
    names = [f.name for f in model.fields.fields]
    first = list(cx.path.states[0])
    # the graph and the invariants the search breaks, once per model: prove may answer NOT
    # INDUCTIVE for several of its properties
    store = kept(model)
    if "reachable" not in store:
        try:
            store["reachable"] = (build_graph(model, max_states), None)
        except GraphTooLarge:      # no nearest state then, but the candidates are still asked
            store["reachable"] = (None, f"more than {max_states:,} reachable states")
    sg, why = store["reachable"]
    hint = InductionHint(0, False)
    # the invariants that a reachable state violates cannot be lemmas
    invariants = [p.name for p in model.invariants if p.name != res.property
                  and p.name not in res.lemmas_used]
    broken_reachable: set[str] = set()
    if sg is not None:
        hint.reachable, hint.exhaustive = sg.states, True
        best, near = None, []
        for i in range(sg.states):
            flat = lay.unpack_flat([int(w) for w in sg.words[:, i]])
            d = sum(1 for a, b in zip(first, flat) if a != b)
            if best is None or d < best:
                best, near = d, [flat]
            elif d == best and len(near) < 50:
                near.append(flat)
        hint.distance, hint.nearest = best, len(near)
        for j, n in enumerate(names):
            other = [flat[j] for flat in near if flat[j] != first[j]]
            if other:
                hint.differing[n] = (_shown(model, j, first[j]),
                                     sorted({_shown(model, j, v) for v in other}, key=str), len(other))
        if "broken invariants" not in store:
            from kcheck.bfs import search
            every = [p.name for p in model.invariants]
            store["broken invariants"] = set(search(model, every).found)
        broken_reachable = store["broken invariants"]
    else:
        hint.why_not_searched = why
    sy = System(model, False)
    for p in invariants:
        if p in broken_reachable:
            continue
        if any(not _holds_at(sy, p, st) for st in cx.path.states):
            hint.candidates.append((p, model.spec.properties[p].lemma))
    return hint


def _shown(model: Model, j: int, value: int):
    """Field ``j``'s value as a person reads it (an enum's name, a Boolean), even out of range."""
    f = model.fields.fields[j]
    if f.type.kind == "bool":
        return bool(value)
    names = getattr(f.type, "names", None)
    if names and 0 <= value - f.type.lo < len(names):
        return names[value - f.type.lo]
    return value


def _holds_at(sy: System, prop: str, values: list[int]) -> bool:
    """Whether invariant ``prop`` holds in the concrete state ``values`` (flat, in the model's
    field order), asked of Z3 with every field fixed."""
    S = sy.state("hint")
    s = z3.Solver()
    for f, var, v in zip(sy.lay.fields, S, values):
        s.add(var == (z3.BoolVal(bool(v)) if f.type.kind == "bool" else sy.num(v)))
    return s.check(sy.holds(prop, S)) == z3.sat
