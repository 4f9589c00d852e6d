"""The environment's disturbances, counted: the model a progress verdict "for every behaviour with
at most E disturbances" is decided on.

A spec declares which of its actions are the environment (``spec.environment_actions``: joins,
leaves, fences, subscription and metadata changes, timeouts); each step of one is a
*disturbance*, every other step is the protocol's own. ``budgeted(model, E)`` is the model with
one more field, ``disturbances`` in 0..E, which every disturbance adds one to. The field is a
search bound, so the step that would be the (E+1)-th disturbance is cut by the core exactly as a
step past an epoch cap is, and it counts as enabled for fairness (docs/progress.md): the state
graph of the budgeted model holds exactly the behaviours with at most E disturbances, and a fair
cycle of it is a fair behaviour of the protocol that disturbs at most E times.

Every other cut (a step past an epoch cap, by a protocol step or by a disturbance within the
budget) hides part of those behaviours; ``epoch_cuts`` tells them apart from the budget's own, so
that a verdict is "bounded" only where such a cut remains, and names its step.

The field is appended last, so the spec's fields keep their indices (P, Q, the instances'
expressions read them by index); ``unbudgeted`` maps a state back to the spec's own model, in
which a lasso is saved and replayed.
"""
from __future__ import annotations

import copy

import numpy as np

from kcheck.spec.lang import Expr, FieldInfo, Int, Model, SpecError

COUNTER = "disturbances"


def disturbance_mask(model: Model) -> int:
    """The instances of the environment's actions, as a bitmask of instance indices (0 when the
    spec declares no environment)."""
    env = model.spec.environment
    if env is None:
        return 0
    names = set(env.actions)
    return sum(1 << inst.index for inst in model.instances if inst.action.name in names)


def budgeted(model: Model, bound: int) -> Model:
    """``model`` with a count of disturbances, 0..bound, as its last field: a disturbance adds
    one, the step that would pass ``bound`` is cut (a search bound). The instances, their
    indices and the spec's fields are the model's own."""
    if model.spec.environment is None:
        raise SpecError(f"spec {model.spec.name} declares no environment: nothing to bound")
    if COUNTER in model.fields.scalars or COUNTER in model.fields.compound:
        raise SpecError(f"spec {model.spec.name} has a field named '{COUNTER}', the name of the "
                        f"disturbance count: rename it")
    out = copy.copy(model)
    fields = copy.copy(model.fields)
    counter = FieldInfo(len(model.fields.fields), COUNTER, COUNTER,
                        Int(0, bound, search_bound=True))
    fields.fields = list(model.fields.fields) + [counter]
    fields.scalars = {**model.fields.scalars, COUNTER: counter}
    fields.declared = list(model.fields.declared) + [COUNTER]
    out.fields = fields
    out.initial_states = [s + (0,) for s in model.initial_states]
    read = Expr("field", (counter.index, counter.name, "pre"), "int", None, (0, bound))
    plus_one = read + 1
    mask = disturbance_mask(model)
    out.instances = []
    for inst in model.instances:
        if mask >> inst.index & 1:
            inst = copy.copy(inst)
            inst.writes = {**inst.writes, counter.index: plus_one}
        out.instances.append(inst)
    out.budget = bound
    out.unbudgeted = model
    return out


def unbudgeted(model: Model, initial: tuple) -> tuple:
    """A state of the budgeted ``model`` (packed words) as a state of the spec's own model."""
    from kcheck.layout import layout_of
    base = model.unbudgeted
    flat = layout_of(model).unpack_flat([int(w) for w in initial])
    return tuple(int(w) for w in layout_of(base).pack_flat(list(flat)[:-1]))


def budget_spent(model: Model, words: np.ndarray) -> np.ndarray:
    """Per state (column of packed words): whether the budget is spent (no disturbance left)."""
    from kcheck.layout import layout_of
    lay = layout_of(model)
    i = model.fields.scalars[COUNTER].index
    raw = (words[lay.word[i]] >> np.uint64(lay.shift[i])) & np.uint64((1 << lay.width[i]) - 1)
    return raw.astype(np.int64) >= model.budget


def epoch_cuts(model: Model, cut_bits: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Per state, the packed bits of the instances whose step there is cut by something other
    than the disturbance budget: a protocol step past a search bound anywhere, a disturbance
    past one while the budget is not spent."""
    mask = disturbance_mask(model)
    if getattr(model, "budget", None) is None or not mask or not cut_bits.size:
        return cut_bits
    nbytes = cut_bits.shape[1]
    env = np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8)
    spent = budget_spent(model, words)
    return cut_bits & ~(env[None, :] * spent[:, None].astype(np.uint8))
