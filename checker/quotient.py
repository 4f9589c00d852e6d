"""Exact quotients over order-only domains: a state stored with its generations renumbered.

A spec may declare an order-only domain (``spec.epoch``, spec/lang.py) and give fields of it
(``Int(lo, hi, epoch=...)``). The language refuses, where the spec builds it, every use of a
domain value but these: comparison (``<``, ``<=``, ``==``, ``!=``) with a value of the same
domain or a declared sentinel, ``+ 1`` (once), assignment to a field of the same domain, and
``If``/``Min``/``Max``/a select over such values. Then what a step does depends only on the
*order* of the domain values in the state, and on which consecutive ones are exactly 1 apart.

**Normalisation.** Per state, the domain's values are renumbered by rank: values at or below
the highest sentinel (the *anchor*) stay as they are; above it, in increasing order, each value
is the one before (the anchor first) plus its gap, a gap of 1 kept and a larger one compressed to
2. Every comparison the language allows, between values or values + 1, has the same result on a
state and on its normalisation (a gap of 2 or more leaves ``x + 1 < y``).

**Exactness, checked on every step.** A normalised state and every state it stands for take the
same action instances to states of the same class, except when a step stores ``x + 1`` for an x
below another value y: concretely the gap y - x - 1 may be 1 or more than 1, while the
normalised state, whose gap was 2, says 1. So for every action instance that stores a value + 1,
the search also applies it to the *stretched* state (each gap of 2 widened to 3, the same
class); if the two successors normalise differently, the quotient is not exact for the spec and
the search stops with a SpecError naming the action (``check_block``). Every other step maps
classes to classes by the argument above. Under these conditions the quotient search meets a
violation iff the unreduced, uncapped search does, at the same depth (docs/design.md, "Exact
quotients over order-only domains").

**Finite.** A normalised state's values lie in anchor .. anchor + 2k (k the domain's fields), so
the search runs on a copy of the model whose domain fields' ranges are widened to hold them, a
step's + 1, and the stretched states: the epoch cap never cuts a step, and a verdict covers every
generation. The spec's own cap (``max_generation``) applies only with ``--no-quotient``.

**Concrete traces.** A counterexample found on normalised states is replayed from the spec's
initial state in its class by the same action instances (the quotient is exact, so they are
enabled and end in a violation: checked); its states are then the unreduced spec's, and when
its values fit the spec's declared ranges it is reported in the spec's own model; when they go
past a domain's cap, at that cap raised (``spec.epoch(cap=...)``, the result's
``trace_model``), so that it is saved and replayed as any other.
"""
from __future__ import annotations

import copy

import numpy as np

from kcheck.layout import initial_words, layout_of
from kcheck.spec.lang import Model, SpecError

CHUNK = 1 << 15


class QuotientError(SpecError):
    pass


class _Domain:
    """One order-only domain of a model: its flat fields' places in the packed state."""

    def __init__(self, epoch, fields, lay):
        self.epoch = epoch
        self.fields = fields
        self.anchor = (max(epoch.sentinels) if epoch.sentinels
                       else min(f.type.lo for f in fields) - 1)
        self.word = np.array([lay.word[f.index] for f in fields])
        self.shift = [np.uint64(lay.shift[f.index]) for f in fields]
        self.mask = [np.uint64((1 << lay.width[f.index]) - 1) for f in fields]
        self.lo = np.array([f.type.lo for f in fields], dtype=np.int64)[:, None]
        # the values the fields can hold, base .. base + span - 1, and the renumbering of each
        # set of them met so far, per gap size (2: normalise, 3: stretch)
        self.base = min(f.type.lo for f in fields)
        self.span = max(f.type.hi for f in fields) - self.base + 1
        self.tables: dict[int, dict[int, list[int]]] = {2: {}, 3: {}}


def domains_of(model: Model) -> dict:
    """The model's epoch domains that have fields at these parameters -> their flat fields."""
    out: dict = {}
    for f in model.fields.fields:
        e = getattr(f.type, "epoch", None)
        if e is not None:
            out.setdefault(e, []).append(f)
    return out


def widened(model: Model) -> Model:
    """A copy of ``model`` whose domain fields' ranges hold every normalised state, its
    successors and its stretched form (anchor .. anchor + 3k + 2): the quotient search's model.
    The spec's initial states and action instances are the same (the instances' expressions
    refer to fields by index), only the field types are copies with a higher ``hi``."""
    doms = domains_of(model)
    wide = copy.copy(model)
    fields = copy.copy(model.fields)
    fields.fields = list(model.fields.fields)
    replace = {}
    for epoch, fs in doms.items():
        anchor = max(epoch.sentinels) if epoch.sentinels else min(f.type.lo for f in fs) - 1
        for f in fs:
            if f.type.lo > anchor + 1:
                raise QuotientError(
                    f"{epoch.line}: epoch {epoch.name}: field {f.name} starts at {f.type.lo}, "
                    f"above the domain's first value {anchor + 1}: a renumbered state could not "
                    f"hold it (give it the range of the domain's other fields)")
        hi = anchor + 3 * len(fs) + 2
        for f in fs:
            if f.type.hi < hi:
                t = copy.copy(f.type)
                t.hi = hi
                g = copy.copy(f)
                g.type = t
                replace[f.index] = g
    fields.fields = [replace.get(f.index, f) for f in fields.fields]
    fields.scalars = {k: replace.get(f.index, f) for k, f in model.fields.scalars.items()}

    def swap(node):
        if isinstance(node, list):
            return [swap(x) for x in node]
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        return replace.get(node.index, node)
    fields.compound = {k: swap(v) for k, v in model.fields.compound.items()}
    fields.arrays = {k: [replace.get(f.index, f) for f in v] for k, v in model.fields.arrays.items()}
    wide.fields = fields
    return wide


class Quotient:
    """Normalisation of a (widened) model's packed states, its exactness check and concrete
    traces."""

    def __init__(self, model: Model, comp=None):
        self.model = model
        lay = layout_of(model)
        self.domains = [_Domain(e, fs, lay) for e, fs in domains_of(model).items()]
        self.description = ", ".join(d.epoch.name for d in self.domains)
        # the action instances that store a value + 1 in a domain field: the only steps whose
        # successors' class could depend on more than the normalised state (module docstring)
        self.plus_one = [inst.index for inst in model.instances
                         if any(e.epoch is not None and e.epoch[1] for e in inst.writes.values())]
        self.comp = comp

    # -- the renumbering ---------------------------------------------------------------------

    def _values(self, d: _Domain, S: np.ndarray) -> np.ndarray:
        V = np.empty((len(d.fields), S.shape[1]), dtype=np.int64)
        for i in range(len(d.fields)):
            V[i] = ((S[d.word[i]] >> d.shift[i]) & d.mask[i]).astype(np.int64)
        return V + d.lo

    def _store(self, d: _Domain, S: np.ndarray, V: np.ndarray):
        R = (V - d.lo).astype(np.uint64)
        for i in range(len(d.fields)):
            w = d.word[i]
            S[w] = (S[w] & ~(d.mask[i] << d.shift[i])) | (R[i] << d.shift[i])

    def _renumber(self, d: _Domain, S: np.ndarray, big_gap: int) -> np.ndarray:
        V = self._values(d, S)
        if d.span <= 64:
            # the set of values a state holds, as a bit mask: the renumbering is a function of
            # that set alone, so it is computed once per distinct set (a table row), and each
            # field is then one lookup (a block holds few distinct sets)
            R = V - d.base
            mask = np.zeros(S.shape[1], dtype=np.uint64)
            one = np.uint64(1)
            for i in range(len(d.fields)):
                mask |= one << R[i].astype(np.uint64)
            sets, which = np.unique(mask, return_inverse=True)
            cache = d.tables[big_gap]
            rows = []
            for m in sets.tolist():
                row = cache.get(m)
                if row is None:
                    row = cache[m] = self._table(d, m, big_gap)
                rows.append(row)
            table = np.array(rows, dtype=np.int64)
            N = table[which.reshape(-1)[None, :], R]
        else:
            order = np.argsort(V, axis=0, kind="stable")
            sv = np.take_along_axis(V, order, axis=0)
            prev = np.empty_like(sv)
            prev[0] = d.anchor
            prev[1:] = np.maximum(sv[:-1], d.anchor)
            gap = np.clip(sv - prev, 0, 2)
            if big_gap != 2:
                gap[gap == 2] = big_gap
            out = np.where(sv <= d.anchor, sv, d.anchor + np.cumsum(gap, axis=0))
            N = np.empty_like(V)
            np.put_along_axis(N, order, out, axis=0)
        S = S.copy()
        self._store(d, S, N)
        return S

    @staticmethod
    def _table(d: _Domain, m: int, big_gap: int) -> list[int]:
        """The renumbering of the values in the set ``m`` (bit v: value base + v), by value."""
        row = [0] * d.span
        prev = cur = d.anchor
        for v in range(d.span):
            if not m >> v & 1:
                continue
            x = d.base + v
            if x <= d.anchor:
                row[v] = x
                continue
            gap = min(x - max(prev, d.anchor), 2)
            cur += big_gap if gap == 2 else gap
            row[v] = cur
            prev = x
        return row

    def normalise(self, S: np.ndarray) -> np.ndarray:
        """Each state of the block with its domain values renumbered (gaps over 1 made 2)."""
        if not S.shape[1]:
            return S
        for d in self.domains:
            S = self._renumber(d, S, 2)
        return S

    def stretch(self, S: np.ndarray) -> np.ndarray:
        """Normalised states with each gap of 2 widened to 3: the same classes."""
        for d in self.domains:
            S = self._renumber(d, S, 3)
        return S

    # -- exactness ---------------------------------------------------------------------------

    def check_block(self, S: np.ndarray):
        """Every step from the normalised states S that stores a value + 1 reaches the same
        class from S and from S stretched; else a QuotientError naming the action."""
        if not self.plus_one or not S.shape[1]:
            return
        comp = self.comp
        guards = comp.guards(S)
        for k in self.plus_one:
            g = guards[k]
            if g is False:
                continue
            sub = S if g is True else S[:, np.flatnonzero(g)]
            if not sub.shape[1]:
                continue
            T1, _o1, ok1 = comp.effects[k](sub)
            T2, _o2, ok2 = comp.effects[k](self.stretch(sub))
            differ = (self.normalise(T1) != self.normalise(T2)).any(axis=0)
            if ok1 is not None:
                differ |= np.asarray(ok1) != np.asarray(ok2)
            if differ.any():
                from kcheck.layout import show_words
                i = int(np.flatnonzero(differ)[0])
                inst = self.model.instances[k]
                raise QuotientError(
                    f"{self._line()}: the quotient over {self.description} is not exact: "
                    f"{inst.label} stores a value + 1 below another value of the domain, so its "
                    f"successor depends on more than the values' order, from "
                    f"{show_words(self.model, sub[:, i])}; leave the field that takes it outside "
                    f"the domain, or check with --no-quotient")

    def _line(self) -> str:
        return self.domains[0].epoch.line if self.domains else "?"

    # -- concrete traces ---------------------------------------------------------------------

    def concretise(self, found, counterexample):
        """The counterexample rebuilt from the spec's initial state in the class of the one
        found, by the same action instances; checked to be enabled, within the ranges and to end
        in the violation."""
        words = len(found.initial)
        rep = np.array(found.initial, dtype=np.uint64).reshape(words, 1)
        init = None
        for w in initial_words(self.model):
            S = np.array(w, dtype=np.uint64).reshape(words, 1)
            if (self.normalise(S) == rep).all():
                init = w
                break
        if init is None:
            raise QuotientError(f"no initial state normalises to the one the quotient search "
                                f"started from ({found.property})")
        comp = self.comp
        cur = np.array(init, dtype=np.uint64).reshape(words, 1)
        for i, k in enumerate(found.steps):
            g = comp.guards(cur)[k]
            if not (g if isinstance(g, bool) else bool(np.asarray(g)[0])):
                raise QuotientError(f"the concrete replay of {found.property}'s counterexample "
                                    f"is not enabled at step {i + 1}: the quotient is not exact")
            T, out, ok = comp.effects[k](cur)
            last = i == len(found.steps) - 1
            if last and found.kind == "transition":
                for name, tp in comp.tprops_by_instance.get(k, ()):
                    if name == found.property and bool(np.broadcast_to(tp(cur, T, out), (1,))[0]):
                        raise QuotientError(f"the concrete replay of {found.property}'s "
                                            f"counterexample does not break it at its last step")
            if ok is not None and not bool(np.asarray(ok)[0]):
                raise QuotientError(f"the concrete replay of {found.property}'s counterexample "
                                    f"leaves the widened range at step {i + 1}")
            cur = T
        if found.kind == "invariant":
            r = comp.invariants[found.property](cur)
            if bool(np.broadcast_to(r, (1,))[0]):
                raise QuotientError(f"the concrete replay of {found.property}'s counterexample "
                                    f"ends in a state where it holds: the quotient is not exact")
        return counterexample(found.property, found.kind, tuple(init), list(found.steps))

    def fits(self, found, original: Model) -> tuple | None:
        """The concrete counterexample's initial words in ``original``'s layout when every state
        along it fits the spec's own ranges, else None."""
        lay, olay = layout_of(self.model), layout_of(original)
        comp = self.comp
        cur = np.array(found.initial, dtype=np.uint64).reshape(-1, 1)
        states = [cur]
        for k in found.steps:
            cur = comp.effects[k](cur)[0]
            states.append(cur)
        for S in states:
            flat = lay.unpack_flat([int(w) for w in S[:, 0]])
            for f, v in zip(olay.fields, flat):
                if not f.type.lo <= v <= f.type.hi:
                    return None
        return tuple(olay.pack_flat(lay.unpack_flat(list(found.initial))))


    def raised(self, original: Model, found) -> Model | None:
        """``original`` with its domains' cap parameters (``spec.epoch(cap=...)``) raised to the
        highest value the concrete counterexamples reach, or None when a domain declares no cap
        or the value is past the parameter's range."""
        lay = layout_of(self.model)
        top: dict[str, int] = {}
        for d in self.domains:
            if d.epoch.cap is None:
                return None
            top.setdefault(d.epoch.cap, 0)
        comp = self.comp
        for f in found:
            cur = np.array(f.initial, dtype=np.uint64).reshape(-1, 1)
            for k in [None, *f.steps]:
                if k is not None:
                    cur = comp.effects[k](cur)[0]
                flat = lay.unpack_flat([int(w) for w in cur[:, 0]])
                for d in self.domains:
                    v = max(flat[x.index] for x in d.fields)
                    top[d.epoch.cap] = max(top[d.epoch.cap], v)
        params = original.params.as_dict()
        spec = original.spec
        for name, v in top.items():
            if v <= params[name]:
                continue
            if v > spec.params[name].hi:
                return None
            params[name] = v
        return spec.instantiate(original.variant, params)


def prepare(model: Model, enabled: bool, checkpoint=None) -> Quotient | None:
    """The quotient the search reduces by (its widened model), or None when the spec declares
    no order-only domain with fields, or ``enabled`` is false."""
    if not enabled or not domains_of(model):
        return None
    if checkpoint is not None:
        raise SpecError("--checkpoint does not yet record a quotient search: add --no-quotient "
                        "to checkpoint this spec")
    return Quotient(widened(model))


def covers(r) -> str | None:
    """What a 'holds' of this run covers, for the statistics line and JSON."""
    q = getattr(r, "quotient", None)
    if q is None:
        return None
    if q == "off":
        return "up to the search bounds"
    return f"every {q} (quotient)"


def clause(r) -> str:
    """The statistics line's part on the quotient (empty when the spec declares no domain)."""
    c = covers(r)
    if c is None:
        return ""
    if r.quotient == "off":
        return "; quotient off: verdicts up to the search bounds"
    out = (f"; {c}: {r.quotient} values renumbered by rank, gaps over 1 stored as 2, no "
           f"{r.quotient} cap")
    tm = getattr(r, "trace_model", None)
    if tm is not None:
        raised = {k: v for k, v in tm.params.as_dict().items() if r.model.params.as_dict()[k] != v}
        out += (f"; the counterexamples go past the cap: reported at "
                f"{', '.join(f'{k}={v}' for k, v in raised.items()) or 'the widened ranges'}")
    return out
