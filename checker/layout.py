"""How the explicit engines store a state: the spec's flat fields packed into 64-bit words.

The spec language knows a state as its fields (``spec.lang.StateFields``); the packing is the
engines' choice (docs/design.md, "The bit layout belongs to the engines"): each field takes the
fewest bits that hold its range, offset by its lower bound, first fit in declaration order, and a
field never straddles two words, so that the compiled code reads it with one shift and one mask.

A state of one word is its own fingerprint, so its layout is also the order of a level: there
the fields that steps change most often go in the lowest bits (measured on the first states, a
pilot search, ``PILOT_STATES``). A level's block is a range of that order; its states then
differ mostly in the bits their steps change, so more of a block's successors are the same
state, found within the block rather than across the level (two_phase N=10: 6 % less time).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from kcheck.spec.lang import Model, StateFields

PILOT_STATES = 4096      # states a pilot search expands to order a one-word layout


class Layout(StateFields):
    """The fields of a state (names, types, arrays) and where each lives: ``word[i]``,
    ``shift[i]``, ``width[i]`` for flat field i; ``words`` per state, ``bits`` in all.
    ``order``: the flat fields' indices in the order they are placed (else declaration order)."""

    def __init__(self, fields: StateFields, order: list[int] | None = None):
        self.__dict__.update(fields.__dict__)
        n = len(self.fields)
        self.word, self.shift, self.width = [0] * n, [0] * n, [0] * n
        used: list[int] = []
        for i in (range(n) if order is None else order):
            b = self.fields[i].type.bits()
            for w, u in enumerate(used):
                if u + b <= 64:
                    break
            else:
                used.append(0)
                w = len(used) - 1
            self.word[i] = w
            self.shift[i] = used[w]
            self.width[i] = b
            used[w] += b
        self.words = max(1, len(used))
        self.bits = sum(self.width)

    def pack_flat(self, flat) -> list[int]:
        """Flat field values (each within its type's range) into words."""
        words = [0] * self.words
        for f in self.fields:
            words[self.word[f.index]] |= (int(flat[f.index]) - f.type.lo) << self.shift[f.index]
        return words

    def pack(self, values: dict) -> list[int]:
        """A dict of declared names to Python values (arrays as lists) into words."""
        return self.pack_flat(self.flatten(values))

    def unpack_flat(self, words) -> list[int]:
        out = []
        for f in self.fields:
            raw = (int(words[self.word[f.index]]) >> self.shift[f.index]) & ((1 << self.width[f.index]) - 1)
            out.append(raw + f.type.lo)
        return out


# computed once per model, forgotten with it
_layouts: "weakref.WeakKeyDictionary[Model, Layout]" = weakref.WeakKeyDictionary()
_initial: "weakref.WeakKeyDictionary[Model, list]" = weakref.WeakKeyDictionary()


# a layout is computed once per model, under this lock; the pilot search compiles its model
# with the declaration order, which only the pilot's own thread sees (Spark's owners as threads
# and the tests compute layouts in several threads)
_computing = threading.RLock()
_pilot = threading.local()


def layout_of(model: Model) -> Layout:
    """The packing of ``model``'s states."""
    if getattr(_pilot, "model", None) is model:
        return _pilot.layout
    lay = _layouts.get(model)
    if lay is None:
        with _computing:
            lay = _layouts.get(model)
            if lay is None:
                lay = _layouts[model] = _computed(model)
    return lay


def _computed(model: Model) -> Layout:
    lay = Layout(model.fields)
    if lay.words == 1 and len(lay.fields) > 1:
        _pilot.model, _pilot.layout = model, lay
        try:
            order = _by_flips(model, lay)
        finally:
            _pilot.model = _pilot.layout = None
        lay = Layout(model.fields, order)
    return lay


def _by_flips(model: Model, lay: Layout) -> list[int]:
    """The flat fields, those that the steps of a breadth-first pilot search (its first
    ``PILOT_STATES`` states) change most often first; ties, and fields no step changes, in
    declaration order. A pilot that cannot run (an error in the spec's actions, which the real
    search then reports in full) leaves the declaration order."""
    from kcheck import explore                     # they import this module
    from kcheck.compile import Compiled
    n = len(lay.fields)
    masks = [np.uint64(((1 << lay.width[i]) - 1) << lay.shift[i]) for i in range(n)]
    changed = [0] * n
    try:
        comp = Compiled(model, [])
        ninst = len(model.instances)
        act = np.int16 if ninst < 32000 else np.int32
        level = np.unique(np.array([lay.pack_flat(s)[0] for s in model.initial_states],
                                   dtype=np.uint64))
        seen = level
        while len(level) and len(seen) < PILOT_STATES:
            S = level[None, :PILOT_STATES]
            blk = explore.expand_block(comp, S, [0] * ninst, set(), False, False, act,
                                       loops=False)
            if blk.words is None:
                break
            flipped = S[0, blk.parent] ^ blk.words[0]
            for i in range(n):
                changed[i] += int(np.count_nonzero(flipped & masks[i]))
            level = np.setdiff1d(blk.words[0], seen)
            seen = np.union1d(seen, level)
    except Exception:
        return list(range(n))
    return sorted(range(n), key=lambda i: (-changed[i], i))


def initial_words(model: Model) -> list[tuple[int, ...]]:
    """The model's initial states, packed, in the order the spec yields them."""
    words = _initial.get(model)
    if words is None:
        lay = layout_of(model)
        words = _initial[model] = [tuple(lay.pack_flat(s)) for s in model.initial_states]
    return words


def show_words(model: Model, words) -> str:
    """A packed state as one line of its declared fields, for error messages."""
    lay = layout_of(model)
    st = lay.show(lay.unpack_flat([int(w) for w in words]))
    return "{" + ", ".join(f"{k}={v}" for k, v in st.items()) + "}"
