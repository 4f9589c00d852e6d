"""Symmetry reduction: one stored state per orbit, checked before it is trusted.

A spec declares slots that it treats alike (``spec.symmetry``, spec/lang.py): permuting them, in
the arrays they index and in the fields whose values name them, must map initial states to
initial states, steps to steps, and keep every property's value. Then a breadth-first search
over one representative per orbit (the least image in word order under every permutation of
the group) meets a violation exactly when the full search does, at the same depth, and the sum
of the orbits' sizes is the full search's state count.

The claim is checked, not assumed (``verify``): on every initial state and on a bounded sample
of reachable states, each state and each of its images must agree on every invariant and on the
terminal condition, and the successors of the image must be the images of the successors, each
with the same transition-property verdicts and the same search-bound cut. A declaration the
spec does not respect is a SpecError naming the symmetry, the permutation and what differed.

Traces stay concrete (``concretise``): a path of representatives is replayed from its initial
state, choosing at each step the lowest action instance whose successor lies in the next
representative's orbit; the result has the same length and replays through the unreduced spec.

Everything works on blocks of packed states (checker/compile.py): for each permutation of the
group, the fields it moves are unpacked (one row per field), gathered into their new places,
slot-valued ones renamed by a table lookup, and repacked over the untouched bits; the images are
compared word by word and the least kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations, product

import numpy as np

from kcheck.layout import initial_words, layout_of, show_words
from kcheck.spec.lang import Model, SpecError

CHUNK = 1 << 15          # columns canonicalised at once (a field row per column: bounded memory)
SAMPLE_STATES = 3000     # reachable states the soundness check examines, besides initial ones
SAMPLE_DEPTH = 12


class SymmetryError(SpecError):
    """A declared symmetry that the spec does not respect."""


@dataclass
class _Element:
    """One permutation of the group, on the flattened fields: image[i] = lut[i][F[src[i]]]."""
    src: np.ndarray                  # int64, per field
    luts: dict[int, np.ndarray]      # field -> table over the raw encoding
    label: str
    parts: tuple = ()                # a product's factors, applied in turn


def _value_fields(lay, name: str) -> list:
    """The flat fields a symmetry's ``values`` entry names: a scalar, an array, or one member of
    an array of records ("commit.member": that member of every element)."""
    base, _, member = name.partition(".")
    if member:
        return [f for f in lay.arrays.get(base, ()) if member in f.path]
    return lay.arrays.get(name) or ([lay.scalars[name]] if name in lay.scalars else [])


class Symmetry:
    """The symmetry group a model's declarations generate, as operations on packed blocks."""

    def __init__(self, model: Model):
        lay = layout_of(model)
        p = model.params
        self.layout = lay
        nf = len(lay.fields)
        self.words = lay.words
        self.shift = np.array(lay.shift, dtype=np.uint64)
        self.mask = np.array([(1 << w) - 1 for w in lay.width], dtype=np.uint64)
        self.word_of = np.array(lay.word, dtype=np.int64)
        self.kinds: list[str] = []
        per_decl: list[list[_Element]] = []
        for decl in model.spec.symmetries:
            count = int(decl.count(p))
            slots = decl.slots(p)
            slots = list(range(slots)) if isinstance(slots, int) else [int(x) for x in slots]
            if any(not 0 <= s < count for s in slots) or len(set(slots)) != len(slots):
                raise SymmetryError(f"{decl.line}: symmetry {decl.kind}: slots {slots} are not "
                                    f"distinct slots among 0..{count - 1}")
            if len(slots) < 2:
                continue
            self.kinds.append(f"{decl.kind} slots {','.join(map(str, slots))}")
            elems = []
            for image in permutations(slots):
                pi = list(range(count))
                for a, b in zip(slots, image):
                    pi[a] = b
                elems.append(self._element(decl, pi, count))
            per_decl.append(elems)
        # the group: every combination of one element per declaration (they act on different
        # fields or commute), identity first
        self.group: list[_Element] = []
        for combo in product(*per_decl):
            self.group.append(_Element(None, {}, "; ".join(d.label for d in combo if d.label),
                                       parts=combo))
        self.active = len(self.group) > 1
        self.description = ", ".join(self.kinds)

    def _element(self, decl, pi: list[int], count: int) -> _Element:
        lay = self.layout
        nf = len(lay.fields)
        inv = [0] * count
        for a, b in enumerate(pi):
            inv[b] = a
        src = np.arange(nf)
        for name, how in decl.arrays.items():
            if name not in lay.arrays:
                if name in lay.scalars:
                    raise SymmetryError(f"{decl.line}: symmetry {decl.kind}: {name} is not an array")
                continue
            elems = lay.arrays[name]
            n = len(elems)
            if n % count:
                raise SymmetryError(f"{decl.line}: symmetry {decl.kind}: array {name} has {n} "
                                    f"elements, not a multiple of the {count} slots")
            inner = n // count
            for k in range(n):
                if how == "slot":
                    if inner != 1:
                        raise SymmetryError(f"{decl.line}: symmetry {decl.kind}: array {name} has "
                                            f"{n} elements, not one per slot: use 'slot,_' or '_,slot'")
                    j = inv[k]
                elif how == "slot,_":
                    j = inv[k // inner] * inner + k % inner
                else:
                    j = (k // count) * count + inv[k % count]
                src[elems[k].index] = elems[j].index
        luts = {}
        for name in decl.values:
            for f in _value_fields(lay, name):
                lo, width = f.type.lo, lay.width[f.index]
                table = np.arange(1 << width, dtype=np.uint64)
                for raw in range(1 << width):
                    v = raw + lo
                    if 0 <= v < count and v <= f.type.hi:
                        table[raw] = pi[v] - lo
                luts[f.index] = table
        moved = [i for i in range(count) if pi[i] != i]
        label = f"{decl.kind} " + " ".join(f"{i}->{pi[i]}" for i in moved) if moved else ""
        return _Element(src, luts, label)

    # -- blocks ------------------------------------------------------------------------------
    def apply(self, e: _Element, S: np.ndarray) -> np.ndarray:
        # only the fields the permutation moves are unpacked and repacked
        needed, rows, luts, words = self._plan(e)
        F = (S[self.word_of[needed]] >> self.shift[needed, None]) & self.mask[needed, None]
        G = F[rows]
        for r, lut in luts:
            G[r] = lut[G[r]]
        out = S.copy()
        for w, keep, sel, shifts in words:
            out[w] = np.bitwise_or.reduce(G[sel] << shifts, axis=0) | (S[w] & keep)
        return out

    def _plan(self, e: _Element):
        """The element as one mapping on the fields it moves (computed once)."""
        if hasattr(e, "_plan_cache"):
            return e._plan_cache
        nf = len(self.layout.fields)
        src, luts = np.arange(nf), {}
        for d in e.parts:    # apply the parts in turn: image = d(previous image)
            new_luts = {}
            for i in range(nf):
                j = int(d.src[i])
                t = luts.get(j)
                u = d.luts.get(i)
                if t is not None and u is not None:
                    new_luts[i] = u[t]
                elif t is not None or u is not None:
                    new_luts[i] = t if u is None else u
            src, luts = src[d.src], new_luts
        support = [i for i in range(nf) if src[i] != i or i in luts]
        needed = sorted({int(src[i]) for i in support})
        pos = {f: k for k, f in enumerate(needed)}
        rows = np.array([pos[int(src[i])] for i in support], dtype=np.int64)
        row_luts = [(k, luts[i]) for k, i in enumerate(support) if i in luts]
        words = []
        for w in range(self.words):
            sel = [k for k, i in enumerate(support) if self.word_of[i] == w]
            if not sel:
                continue
            clear = 0
            for k in sel:
                clear |= int(self.mask[support[k]]) << int(self.shift[support[k]])
            words.append((w, np.uint64(((1 << 64) - 1) ^ clear), np.array(sel),
                          self.shift[[support[k] for k in sel], None]))
        plan = (np.array(needed, dtype=np.int64), rows, row_luts, words)
        e._plan_cache = plan
        return plan

    def canonical(self, S: np.ndarray) -> np.ndarray:
        """The representative of each state's orbit: its least image in word order."""
        if not self.active or not S.shape[1]:
            return S
        out = np.empty_like(S)
        for a in range(0, S.shape[1], CHUNK):
            out[:, a:a + CHUNK] = self._canonical(S[:, a:a + CHUNK])[0]
        return out

    def orbit_sizes(self, S: np.ndarray) -> np.ndarray:
        """For representatives S: how many distinct states each stands for (the group's size over
        the number of its elements that fix the state)."""
        if not self.active:
            return np.ones(S.shape[1], dtype=np.int64)
        out = np.empty(S.shape[1], dtype=np.int64)
        for a in range(0, S.shape[1], CHUNK):
            part = S[:, a:a + CHUNK]
            fixed = np.zeros(part.shape[1], dtype=np.int64)
            for e in self.group:
                fixed += (self.apply(e, part) == part).all(axis=0)
            out[a:a + CHUNK] = len(self.group) // fixed
        return out

    def _canonical(self, S: np.ndarray):
        best = S.copy()    # the identity's image
        for e in self.group[1:]:
            img = self.apply(e, S)
            less = img[0] < best[0]
            eq = img[0] == best[0]
            for w in range(1, self.words):
                less |= eq & (img[w] < best[w])
                eq &= img[w] == best[w]
            best = np.where(less, img, best)
        return best, None


def for_model(model: Model) -> Symmetry | None:
    """The model's symmetry, or None when it declares none that moves anything."""
    if not model.spec.symmetries:
        return None
    sym = Symmetry(model)
    return sym if sym.active else None


# ---------------------------------------------------------------------------------------------
# The soundness check

def verify(model: Model, comp, sym: Symmetry, sample: int = SAMPLE_STATES,
           depth: int = SAMPLE_DEPTH) -> int:
    """Checks the declared symmetry on the initial states and on up to ``sample`` reachable
    states (breadth-first, unreduced, at most ``depth`` steps deep); raises SymmetryError on
    the first disagreement. Returns the number of states examined."""
    words = layout_of(model).words
    init = np.array(initial_words(model), dtype=np.uint64).reshape(-1, words).T.copy()
    init_set = {tuple(c) for c in init.T.tolist()}
    for e in sym.group[1:]:
        img = sym.apply(e, init)
        for i, col in enumerate(img.T.tolist()):
            if tuple(col) not in init_set:
                raise SymmetryError(
                    f"symmetry {sym.description} of spec {model.spec.name}: the initial states are "
                    f"not closed under {e.label}: the image of initial state "
                    f"{show_words(model, init[:, i])} is not initial")
    S = sample_states(model, comp, sample, depth)
    base = _observe(comp, S)
    for e in sym.group[1:]:
        img = sym.apply(e, S)
        seen_img = _observe(comp, img)
        _compare(model, comp, sym, e, S, base, seen_img)
    return S.shape[1]


def sample_states(model: Model, comp, sample: int, depth: int) -> np.ndarray:
    """The initial states and, breadth-first (unreduced), reachable states up to ``sample`` in
    all and ``depth`` steps deep: the states a soundness check examines."""
    words = layout_of(model).words
    init = np.array(initial_words(model), dtype=np.uint64).reshape(-1, words).T.copy()
    states = [init]
    seen = {tuple(c) for c in init.T.tolist()}
    frontier = init
    for _ in range(depth):
        if sum(s.shape[1] for s in states) >= sample or not frontier.shape[1]:
            break
        nxt = []
        for _k, _idx, _sub, T, _out, ok in comp.successors(frontier):
            if ok is not None:
                T = T[:, ok]
            for col in T.T.tolist():
                t = tuple(col)
                if t not in seen:
                    seen.add(t)
                    nxt.append(col)
        room = sample - sum(s.shape[1] for s in states)
        frontier = np.array(nxt[:max(0, room)], dtype=np.uint64).reshape(-1, words).T.copy()
        states.append(frontier)
    return np.concatenate(states, axis=1)


def _observe(comp, S):
    """What must agree between a state and its image: invariant and terminal masks, and per
    state the sorted rows (successor words, within-bounds, transition-property verdicts)."""
    m = S.shape[1]
    invs = {n: np.broadcast_to(fn(S), (m,)).copy() for n, fn in comp.invariants.items()}
    term = None if comp.terminal is None else np.broadcast_to(comp.terminal(S), (m,)).copy()
    names = sorted({n for lst in comp.tprops_by_instance.values() for n, _ in lst})
    rows, labels = [], []
    for k, idx, sub, T, out, ok in comp.successors(S):
        good = np.ones((len(names), idx.size), dtype=np.uint64)
        for name, tp in comp.tprops_by_instance.get(k, ()):
            v = tp(sub, T, out)
            good[names.index(name)] = np.broadcast_to(v, (idx.size,))
        inside = np.ones(idx.size, dtype=np.uint64) if ok is None else ok.astype(np.uint64)
        rows.append(np.vstack([idx.astype(np.uint64)[None], T * inside, inside[None], good]))
        labels.append(np.full(idx.size, k))
    R = np.concatenate(rows, axis=1) if rows else np.empty((comp.words + 2, 0), dtype=np.uint64)
    K = np.concatenate(labels) if labels else np.empty(0, dtype=np.int64)
    return invs, term, R, K, names


def _compare(model, comp, sym, e, S, base, imgd):
    name = f"symmetry {sym.description} of spec {model.spec.name}"
    invs, term, R, K, names = base
    invs2, term2, R2, _K2, _ = imgd
    for n in invs:
        bad = np.flatnonzero(invs[n] != invs2[n])
        if bad.size:
            raise SymmetryError(f"{name}: invariant {n} differs between state "
                                f"{show_words(model, S[:, bad[0]])} and its image under {e.label}")
    if term is not None:
        bad = np.flatnonzero(term != term2)
        if bad.size:
            raise SymmetryError(f"{name}: the terminal condition differs between state "
                                f"{show_words(model, S[:, bad[0]])} and its image under {e.label}")
    # the image's successors must be the images of the successors (parent positions agree)
    W = comp.words
    mapped = R.copy()
    inside = R[1 + W] == 1
    mapped[1:1 + W] = sym.apply(e, R[1:1 + W]) * inside
    a, b = _sorted_rows(mapped), _sorted_rows(R2)
    if a.shape == b.shape and (a == b).all():
        return
    # name the first parent and action whose step has no counterpart
    have = {tuple(c) for c in R2.T.tolist()}
    for i, col in enumerate(mapped.T.tolist()):
        if tuple(col) not in have:
            inst = model.instances[int(K[i])]
            what = "" if col[1 + W] else " (a step that leaves a search bound)"
            verdicts = [n for n, v in zip(names, col[2 + W:]) if not v]
            if verdicts:
                what += f" (it breaks {', '.join(verdicts)} on one side only, or differs)"
            raise SymmetryError(
                f"{name}: step {inst.label} from state {show_words(model, S[:, int(col[0])])} has no "
                f"counterpart from its image under {e.label}{what}")
    raise SymmetryError(f"{name}: a state's image under {e.label} has more successors than the "
                        f"images of the state's successors")


def _sorted_rows(R):
    if not R.shape[1]:
        return R
    order = np.lexsort(R[::-1])
    return R[:, order]


# ---------------------------------------------------------------------------------------------
# Concrete traces

def concretise(model: Model, comp, sym: Symmetry, found, canonical=None):
    """Rebuilds a counterexample found on representatives into a concrete one of the same length
    that replays through the unreduced spec: at each step the lowest action instance whose
    successor has the next representative's orbit (for a transition property's last step, the
    lowest one that breaks the property). ``canonical``: the search's canonical form when it is
    more than the symmetry's (with a quotient, checker/quotient.py)."""
    from kcheck.verdict import Counterexample
    canon = canonical or sym.canonical
    words = layout_of(model).words
    rep = np.array(found.initial, dtype=np.uint64).reshape(words, 1)
    cur = rep.copy()
    steps = []
    last = len(found.steps) - 1
    for i, k in enumerate(found.steps):
        if found.kind == "transition" and i == last:
            for k2, _idx, sub, T, out, ok in comp.successors(cur):
                for name, tp in comp.tprops_by_instance.get(k2, ()):
                    if name == found.property and not np.broadcast_to(tp(sub, T, out), (1,))[0] \
                            and (ok is None or ok[0]):
                        steps.append(k2)
                        break
                else:
                    continue
                break
            else:
                raise SymmetryError(f"no concrete step breaks {found.property} where the reduced "
                                    f"search found one: the symmetry check missed a difference")
            break
        T, _out, _ok = comp.effects[k](rep)
        rep = canon(T)
        for k2, _idx, _sub, T2, _out2, ok in comp.successors(cur):
            if ok is not None and not ok[0]:
                continue
            if (canon(T2) == rep).all():
                steps.append(k2)
                cur = T2
                break
        else:
            raise SymmetryError(f"no concrete step reaches the orbit the reduced search reached "
                                f"at step {i + 1}: the symmetry check missed a difference")
    return Counterexample(found.property, found.kind, found.initial, steps)


# ---------------------------------------------------------------------------------------------
# The search's hooks (checker/bfs.py)

def prepare(model: Model, comp, res, enabled: bool, checkpoint=None) -> Symmetry | None:
    """The symmetry the search reduces by, checked, or None; records on ``res`` whether it was
    on ("off" when the spec declares one and the caller turned it off)."""
    if not model.spec.symmetries:
        return None
    if not enabled:
        res.symmetry = "off"
        return None
    sym = for_model(model)
    if sym is None:
        res.symmetry = "none"   # no two slots alike at these parameters: nothing to reduce
        return None
    if checkpoint is not None:
        raise SpecError("--checkpoint does not yet record a symmetry-reduced search: add "
                        "--no-symmetry to checkpoint this spec")
    verify(model, comp, sym)
    res.symmetry = sym.description
    return sym


def finish(model: Model, comp, sym: Symmetry, res, canonical=None) -> None:
    """Replaces the counterexamples found on representatives by concrete ones."""
    for name, f in list(res.found.items()):
        res.found[name] = concretise(model, comp, sym, f, canonical)


def clause(r) -> str:
    """The statistics line's part on the symmetry (empty when the spec declares none)."""
    s = getattr(r, "symmetry", None)
    if s is None:
        return ""
    if s == "off":
        return "; symmetry off"
    if s == "none":
        return "; symmetry: no two declared slots alike at these parameters"
    factor = r.unreduced_states / r.distinct_states if r.distinct_states else 1.0
    return (f"; symmetry over {s}: {r.distinct_states:,} orbits stand for "
            f"{r.unreduced_states:,} states ({factor:.2f}x reduction)")
