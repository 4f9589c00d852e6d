"""How the explicit engines store a state: the spec's flat fields packed into 64-bit words.

The spec language knows a state as its fields (``spec.lang.StateFields``); the packing is the
engines' choice (docs/design.md, "The bit layout belongs to the engines"): each field takes the
fewest bits that hold its range, offset by its lower bound, first fit in declaration order, and a
field never straddles two words, so that the compiled code reads it with one shift and one mask.

A state of one word is its own fingerprint, so its layout is also the order of a level: there
the fields that steps change most often go in the lowest bits (``by_flips``, from the counts of
a pilot search over the first states, checker/explore.py ``flip_counts``). A level's block is a
range of that order; its states then differ mostly in the bits their steps change, so more of a
block's successors are the same state, found within the block rather than across the level
(two_phase N=10: 6 % less time).

This module sits above the core it measures with (explore, compile), which take a layout passed
in and never look one up: the pilot compiles and explores with the declaration order before the
model's layout exists, and a core that looked the layout up would import this module back.
"""
from __future__ import annotations

import threading
import weakref

from kcheck import explore
from kcheck.spec.lang import Model, StateFields


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


# a layout is computed once per model, under this lock (Spark's owners as threads and the tests
# compute layouts in several threads: another thread waits for the pilot's result)
_computing = threading.RLock()


def layout_of(model: Model) -> Layout:
    """The packing of ``model``'s states."""
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
        lay = by_flips(model.fields, explore.flip_counts(model, lay))
    return lay


def by_flips(fields: StateFields, changed: list[int] | None) -> Layout:
    """The layout with the flat fields that steps change most often first (``changed``: per
    flat field, the steps of a pilot search that change it); ties, and fields no step changes,
    in declaration order. No counts (the pilot could not run) leave the declaration order."""
    if changed is None:
        return Layout(fields)
    return Layout(fields, sorted(range(len(changed)), key=lambda i: (-changed[i], i)))


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
