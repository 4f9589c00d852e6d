"""Compile a model's expression trees to vectorised numpy code.

Every guard, effect and property is turned into straight-line Python source that works on a
whole block of packed states at once: a state is a column of 64-bit words (``S[w]`` is one word
of every state in the block), a field is a bit range of one word. Generated once per run, the
code costs a handful of numpy operations per action instance per block, instead of an
interpreter walk per state; this is what makes the explicit search fast (docs/design.md).
"""
from __future__ import annotations

import numpy as np

from kcheck.ops import OPS
from kcheck.spec.lang import ActionInstance, Expr, Model, SpecError

U64 = (1 << 64) - 1


class DomainError(SpecError):
    pass


def _domain_error(field, values, mask, lo, hi, action):
    bad = np.asarray(values)[~mask] if np.ndim(values) else values
    v = bad[0] if np.ndim(bad) else bad
    raise DomainError(f"action {action} sets {field} to {int(v)}, outside its range {lo}..{hi}: "
                      f"widen the field's Int range or guard the action")


class CodeGen:
    """Emits source for one function; shares sub-expressions, both the same node reached twice
    (the trees are DAGs) and equal nodes built twice (by the code that computes them)."""

    def __init__(self, layout, sources: dict[str, str]):
        self.layout, self.sources = layout, sources
        self.lines: list[str] = []
        self.memo: dict[int, str] = {}
        # value numbering: every temporary is pure and assigned once, so two nodes whose code
        # reads the same temporaries the same way have the same value; a spec builds equal
        # subtrees separately (two_phase's `consistent` reads each member's state 18 times)
        self.by_code: dict[str, str] = {}
        self.n = 0

    def tmp(self, code: str) -> str:
        if code in self.by_code:
            return self.by_code[code]
        self.n += 1
        name = f"t{self.n}"
        self.lines.append(f"    {name} = {code}")
        self.by_code[code] = name
        return name

    def expr(self, e: Expr) -> str:
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        op, a = e.op, e.args
        if op == "const":
            v = a[0]
            return "True" if v is True else "False" if v is False else str(int(v))
        if op == "field":
            idx, _name, tag = a
            lay = self.layout
            src = self.sources[tag]
            w, sh, width = lay.word[idx], lay.shift[idx], lay.width[idx]
            raw = f"(({src}[{w}] >> {sh}) & {(1 << width) - 1})" if sh else f"({src}[{w}] & {(1 << width) - 1})"
            ftype = lay.fields[idx].type
            if ftype.kind == "bool":   # the bit tested where it lies: no shift
                code = f"(({src}[{w}] & {1 << sh}) != 0)"
            else:
                code = f"{raw}.astype(np.int64)" + (f" + {ftype.lo}" if ftype.lo else "")
            r = self.tmp(code)
        elif op in _ORDERED and (r := self._compare_bits(op, a)) is not None:
            pass
        elif op == "and" and (r := self._no_pair(a)) is not None:
            pass
        elif op in OPS:
            r = self.tmp(OPS[op].numpy(*[self.expr(x) for x in a]))
        else:
            raise SpecError(f"the numpy compiler does not know operation '{op}'")
        self.memo[key] = r
        return r


    def _compare_bits(self, op: str, a) -> str | None:
        """A field of integers compared with a constant, on the field's bits where they lie in
        their word: masked, not shifted down nor widened to int64 (the value is its bits plus
        the type's lower bound, and the bits below it are zero, so the order is the same). Two
        passes over a block instead of four, and the masked word is shared by every comparison
        of the field (an enum's several states). None when it does not apply."""
        x, y = a
        if x.op == "const" and y.op == "field":
            x, y, op = y, x, _MIRROR[op]
        if x.op != "field" or y.op != "const":
            return None
        c = y.args[0]
        if isinstance(c, bool) or not isinstance(c, int):
            return None
        idx, _name, tag = x.args
        lay = self.layout
        ftype = lay.fields[idx].type
        if ftype.kind == "bool":
            return None
        w, sh, width = lay.word[idx], lay.shift[idx], lay.width[idx]
        raw = c - ftype.lo
        if not 0 <= raw < (1 << width):   # outside the bits: the general code decides
            return None
        masked = self.tmp(f"({self.sources[tag]}[{w}] & {((1 << width) - 1) << sh})")
        return self.tmp(f"{masked} {_SYMBOL[op]} {raw << sh}")

    def _no_pair(self, a) -> str | None:
        """A conjunction of not(p and q) over every pair of p in P and q in Q (two_phase's
        `consistent`: no RM committed while any RM aborted, N^2 terms) computed as
        not((any of P) and (any of Q)): 2N operations instead of 3N^2. None when the terms
        are not such a product."""
        pairs, rest = [], []
        for x in a:
            inner = x.args[0] if x.op == "not" else None
            if inner is not None and inner.op == "and" and len(inner.args) == 2:
                pairs.append((self.expr(inner.args[0]), self.expr(inner.args[1])))
            else:
                rest.append(x)
        P = list(dict.fromkeys(p for p, _ in pairs))
        Q = list(dict.fromkeys(q for _, q in pairs))
        if (len(pairs) < 4 or len(set(pairs)) != len(P) * len(Q)
                or any(n in ("True", "False") for n in P + Q)):
            return None
        anyp = self.tmp(" | ".join(P)) if len(P) > 1 else P[0]
        anyq = self.tmp(" | ".join(Q)) if len(Q) > 1 else Q[0]
        terms = [self.tmp(f"~({anyp} & {anyq})")] + [self.expr(x) for x in rest]
        return self.tmp(" & ".join(terms)) if len(terms) > 1 else terms[0]


# comparisons that _compare_bits does on a field's bits, and each with its sides swapped
_ORDERED = ("eq", "ne", "lt", "le")
_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MIRROR = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge"}


class Compiled:
    """The generated functions of one model.

    guards(S) -> list of masks, one per action instance (a bool array, or a Python bool);
    effects[k](S) -> (T, outcome, ok): successors of the states in S (all of which satisfy
    guard k), the outcome per step (array or scalar, None when the action has none), and the
    mask of steps that stay within the search bounds (None when none can leave them);
    invariants[name](S) -> mask; tprops[(name, k)](S, T, O) -> mask;
    terminal(S) -> mask or None.

    ``layout`` (checker/layout.py ``Layout``) is where each field lives in the words: passed in,
    not looked up, since the layout of a one-word state is chosen by a pilot search that runs
    compiled code itself (with the declaration order); the code is valid for that layout only.
    """

    def __init__(self, model: Model, properties=None, *, layout):
        self.model = model
        lay = self.layout = layout
        self.words = lay.words
        ns: dict = {"np": np, "_domain_error": _domain_error}
        src: list[str] = []
        want = set(properties) if properties is not None else None

        # guards: one function so that field reads are shared by all instances
        g = CodeGen(lay, {"pre": "S"})
        outs = [g.expr(inst.guard) for inst in model.instances]
        src.append("def guards(S):\n" + "\n".join(g.lines) + f"\n    return [{', '.join(outs)}]\n")

        # the action instances whose writes are all constants: a successor's word w is the
        # state's word w & constant_keep[k, w] | constant_put[k, w]
        self.constant = [False] * len(model.instances)
        self.constant_keep = np.full((len(model.instances), self.words), U64, dtype=np.uint64)
        self.constant_put = np.zeros((len(model.instances), self.words), dtype=np.uint64)
        for inst in model.instances:
            src.append(self._effect_source(inst))

        self.invariant_names = []
        # every invariant also in one function, so that they share their field reads (two_phase's
        # eight read the same members' states): what the search checks a level with
        every = CodeGen(lay, {"pre": "S"})
        every_out, every_exprs = [], []   # the trees kept alive: CodeGen memoises by id()
        # a sometimes property is compiled as the invariant "never P": its violation is the witness
        for prop in [*model.invariants, *model.sometimes]:
            if want is not None and prop.name not in want:
                continue
            e = model.invariant_expr(prop)
            g = CodeGen(lay, {"pre": "S"})
            r = g.expr(e)
            src.append(f"def inv_{len(self.invariant_names)}(S):\n" + "\n".join(g.lines) + f"\n    return {r}\n")
            self.invariant_names.append(prop.name)
            every_out.append(every.expr(e))
            every_exprs.append(e)
        src.append("def inv_every(S):\n" + "\n".join(every.lines) +
                   f"\n    return [{', '.join(every_out)}]\n")

        self.tprop_keys = []   # (name, instance index)
        for prop in model.transition_props:
            if want is not None and prop.name not in want:
                continue
            for inst in model.instances:
                e = model.transition_expr(prop, inst)
                if e is None or (e.op == "const" and e.args[0]):
                    continue
                g = CodeGen(lay, {"pre": "S", "post": "T", "outcome": "O"})
                g.memo[id(inst.outcome)] = "O" if inst.outcome is not None else "0"
                r = g.expr(e)
                src.append(f"def tp_{len(self.tprop_keys)}(S, T, O):\n" + "\n".join(g.lines) + f"\n    return {r}\n")
                self.tprop_keys.append((prop.name, inst.index))

        if model.terminal is not None:
            g = CodeGen(lay, {"pre": "S"})
            r = g.expr(model.terminal)
            src.append("def terminal(S):\n" + "\n".join(g.lines) + f"\n    return {r}\n")
        self.source = "\n".join(src)
        exec(compile(self.source, f"<kcheck:{model.spec.name}:{model.variant}>", "exec"), ns)
        self.guards = ns["guards"]
        self.effects = [ns[f"eff_{i.index}"] for i in model.instances]
        self.invariants = {n: ns[f"inv_{k}"] for k, n in enumerate(self.invariant_names)}
        self._every_invariant = ns["inv_every"]
        self.tprops_by_instance: dict[int, list[tuple[str, object]]] = {}
        for k, (name, idx) in enumerate(self.tprop_keys):
            self.tprops_by_instance.setdefault(idx, []).append((name, ns[f"tp_{k}"]))
        self.tprop_names = sorted({n for n, _ in self.tprop_keys} |
                                  {p.name for p in model.transition_props
                                   if want is None or p.name in want})
        self.terminal = ns.get("terminal")

    def constant_addresses(self) -> tuple[int, int]:
        """Where constant_keep's and constant_put's data begin (their rows are read in place by
        the compiled expansion, checker/native.py)."""
        return (self.constant_keep.__array_interface__["data"][0],
                self.constant_put.__array_interface__["data"][0])

    def successors(self, S: np.ndarray):
        """Every enabled action instance on the block S, in instance order:
        (k, positions in S, their states, successors, outcome, within-bounds mask or None).
        The one expansion step that the search, the state graph and Spark share."""
        m = S.shape[1]
        for k, mask in enumerate(self.guards(S)):
            if mask is False:
                continue
            idx = np.arange(m) if mask is True else np.flatnonzero(mask)
            if not idx.size:
                continue
            sub = S[:, idx]
            T, out, ok = self.effects[k](sub)
            yield k, idx, sub, T, out, ok

    def first_violation(self, name: str, S: np.ndarray, block: int) -> int | None:
        """Position in S of the first state that breaks invariant ``name``, or None. Block by
        block: generated code keeps its temporaries until it returns."""
        fn = self.invariants[name]
        for start in range(0, S.shape[1], block):
            part = S[:, start:start + block]
            ok = fn(part)
            if ok is True:
                continue
            bad = np.flatnonzero(~np.broadcast_to(ok, (part.shape[1],)))
            if bad.size:
                return start + int(bad[0])
        return None

    def first_violations(self, names, S: np.ndarray, block: int) -> dict[str, int]:
        """For each invariant of ``names``: the position in S of the first state that breaks
        it, when one does. Every invariant at once, block by block (shared field reads)."""
        names = [n for n in self.invariant_names if n in set(names)]
        if len(names) < 2:
            got = {n: self.first_violation(n, S, block) for n in names}
            return {n: i for n, i in got.items() if i is not None}
        found: dict[str, int] = {}
        for start in range(0, S.shape[1], block):
            part = S[:, start:start + block]
            for name, ok in zip(self.invariant_names, self._every_invariant(part)):
                if ok is True or name in found or name not in names:
                    continue
                bad = np.flatnonzero(~np.broadcast_to(ok, (part.shape[1],)))
                if bad.size:
                    found[name] = start + int(bad[0])
            if len(found) == len(names):
                break
        return found

    def step_violations(self, k: int, sub, T, out, ok, skip=()):
        """For the transition properties that judge instance k: (name, position in sub of the
        first violating step). A step cut by a search bound is not explored, so not judged."""
        for name, tp in self.tprops_by_instance.get(k, ()):
            if name in skip:
                continue
            good = tp(sub, T, out)
            if good is True:
                continue
            bad = np.flatnonzero(~np.broadcast_to(good, (sub.shape[1],)))
            if ok is not None and bad.size:
                bad = bad[ok[bad]]
            if bad.size:
                yield name, int(bad[0])

    def _effect_source(self, inst: ActionInstance) -> str:
        lay = self.layout
        g = CodeGen(lay, {"pre": "S"})
        ok_terms: list[str] = []
        per_word: dict[int, list[str]] = {}
        clear: dict[int, int] = {}
        constant = True
        for idx, e in sorted(inst.writes.items()):
            f = lay.fields[idx]
            if e.op == "field" and e.args[0] == idx and e.args[2] == "pre":
                continue  # written back unchanged
            w, sh, width = lay.word[idx], lay.shift[idx], lay.width[idx]
            clear[w] = clear.get(w, 0) | (((1 << width) - 1) << sh)
            if e.op == "const":
                enc = (int(e.args[0]) - f.type.lo) << sh
                if enc:
                    per_word.setdefault(w, []).append(str(enc))
                continue
            constant = False
            v = g.expr(e)
            if f.type.kind == "bool":
                per_word.setdefault(w, []).append(f"({v}.astype(np.uint64) << {sh})")
                continue
            lo, hi = f.type.lo, f.type.hi
            inside = g.tmp(f"({v} >= {lo}) & ({v} <= {hi})")
            if f.type.search_bound:
                ok_terms.append(inside)
            else:
                g.lines.append(f"    if not {inside}.all(): _domain_error({f.name!r}, {v}, {inside}, "
                               f"{lo}, {hi}, {inst.label!r})")
            off = f" - {lo}" if lo else ""
            per_word.setdefault(w, []).append(
                f"((({v}{off}) & {(1 << width) - 1}).astype(np.uint64) << {sh})")
        if constant:
            # every word of a successor is (word & keep) | put: expanded in C (checker/native.py)
            self.constant[inst.index] = True
            for w, m in clear.items():
                self.constant_keep[inst.index, w] = U64 ^ m
                self.constant_put[inst.index, w] = sum(int(t) for t in per_word.get(w, []))
        # the outcome is a function of the state before the step
        out = g.expr(inst.outcome) if inst.outcome is not None else "None"
        body = list(g.lines)
        # every word written: no copy of S to overwrite (one pass less a step); in place after
        body.append("    T = np.empty_like(S)" if len(clear) == self.words else "    T = S.copy()")
        for w, m in clear.items():
            body.append(f"    np.bitwise_and(S[{w}], {U64 ^ m}, out=T[{w}])")
            terms = per_word.get(w, [])
            const = sum(int(t) for t in terms if t.isdigit())   # the constants' bits as one
            for term in [t for t in terms if not t.isdigit()] + ([str(const)] if const else []):
                body.append(f"    T[{w}] |= {term}")
        ok = " & ".join(ok_terms) if ok_terms else "None"
        return f"def eff_{inst.index}(S):\n" + "\n".join(body) + f"\n    return T, {out}, {ok}\n"


def fingerprint(S: np.ndarray, seed: int = 0x9E3779B97F4A7C15) -> np.ndarray:
    """64-bit fingerprints of a block of packed states. A state that fits one word is its own
    fingerprint (no collision is possible); wider states are mixed with a splitmix64 chain
    (another ``seed`` gives an independent hash: the second half of a 128-bit fingerprint)."""
    if S.shape[0] == 1 and seed == 0x9E3779B97F4A7C15:
        return S[0]
    h = np.full(S.shape[1], seed, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for w in range(S.shape[0]):
            h ^= S[w]
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
    return h
