"""How the explicit engines store a state: the spec's flat fields packed into 64-bit words.

The spec language knows a state as its fields (``spec.lang.StateFields``); the packing is the
engines' choice (docs/design.md, "The bit layout belongs to the engines"): each field takes the
fewest bits that hold its range, offset by its lower bound, first fit in declaration order, and a
field never straddles two words, so that the compiled code reads it with one shift and one mask.
"""
from __future__ import annotations

import weakref

from spec.lang import Model, StateFields


class Layout(StateFields):
    """The fields of a state (names, types, arrays) and where each lives: ``word[i]``,
    ``shift[i]``, ``width[i]`` for flat field i; ``words`` per state, ``bits`` in all."""

    def __init__(self, fields: StateFields):
        self.__dict__.update(fields.__dict__)
        self.word, self.shift, self.width = [], [], []
        used: list[int] = []
        for f in self.fields:
            b = f.type.bits()
            for w, u in enumerate(used):
                if u + b <= 64:
                    break
            else:
                used.append(0)
                w = len(used) - 1
            self.word.append(w)
            self.shift.append(used[w])
            self.width.append(b)
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


def layout_of(model: Model) -> Layout:
    """The packing of ``model``'s states."""
    lay = _layouts.get(model)
    if lay is None:
        lay = _layouts[model] = Layout(model.fields)
    return lay


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
