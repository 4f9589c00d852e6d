"""The explicit-state core: one breadth-first level loop that every explicit engine builds on.

The single-process search (checker/bfs.py), the state graph (checker/graph.py), Spark's slices
(checker/spark.py, its driver's prefix) and Spark's ownership mode (checker/spark_owner.py: its
driver's prefix, and every owner's search over its share of each level, ``Explorer``'s
``share``) all run what this module defines:

(a) **expansion** of a block of states (``expand_block``): every enabled action instance's
    successors, the steps that left a search bound, and per action instance how often it fired;
(b) **deduplication** against the visited set (``Visited``, ``first_of_each``) and within the
    level, block by block and once more when the level ends;
(c) **the parent rule**: a state first reached at level d gets as parent the predecessor at level
    d-1 that minimises (action instance id, parent), the parent compared by its place in level
    d-1 (``Level``; across Spark's owners, spark_owner._candidates);
(d) the **invariant and transition checks**, and deadlocks (``Explorer``), what a level found
    merged by one rule (``keep_least``) across blocks, and across owners (``Findings``);
(e) the **stopping rule** (``Pending``, ``replay_stop``);
(f) **action coverage** (``never_fired``, ``disabled_actions``);
(g) the **pilot search** that orders a one-word layout (``flip_counts``; checker/layout.py turns
    its counts into the layout, and this module takes the layout from ``Compiled.layout``).

Definitions (docs/design.md, "The core's parent rule"):

- An **action instance** is an action with concrete arguments; its **id** is its index in
  ``model.instances`` (``ActionInstance.index``): the spec's actions in the order they are
  declared, each action's argument combinations in the order ``Model`` enumerates them (the
  product of the argument domains, first argument slowest), leaving out the combinations whose
  guard is false whatever the state (spec/lang.py, ``Model.__init__``). A step is one action
  instance applied to one state; every (state, action instance) pair gives at most one step.
- A **level** is ordered by fingerprint (checker/compile.py ``fingerprint``; a one-word state is
  its own), then, for distinct states that share a 64-bit fingerprint, by the stored state
  (``state_keys``). The place of a state in its level is its **position**; comparing parents by
  position is comparing them by fingerprint, which the distributed modes do, since they know a
  parent by its fingerprint only.
- The parent of a state is its least (action instance id, parent position) among every step
  into it from level d-1. It does not depend on how a level is cut into blocks, nor on how
  the states are spread over Spark's slices or owners: a trace is the same in every engine.
- Tie-break between shortest counterexamples: for an invariant or a deadlock, the violating
  state first in its level; for a transition property, the step whose pre-state is first in its
  level, then the lowest action instance.

A block is 32,768 states (``BLOCK``): every numpy operation then does thousands of states' work
per Python step, and a block's temporaries stay in the tens of megabytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kcheck import native
from kcheck.compile import Compiled, fingerprint

DEADLOCK = "deadlock"
BLOCK = 1 << 15           # states expanded at once
EXACT_WORDS = 3           # states of up to this many words are stored whole; wider ones as 128-bit
COMPACT_AT = 1 << 21      # a level's unsorted new states (with duplicates) before they are sorted
PART = 1 << 22            # elements a time when a whole level's array is transformed (temporaries)
PILOT_STATES = 4096       # states the pilot search expands to order a one-word layout (flip_counts)


# ---------------------------------------------------------------------------------------------
# Action coverage

def fired_per_action(model, fired) -> dict[str, int]:
    """Steps taken per action (summed over its instances), for every action of the spec."""
    counts = {a.name: 0 for a in model.spec.actions}
    for inst, n in zip(model.instances, fired):
        counts[inst.action.name] += int(n)
    return counts


def never_fired(model, fired) -> list[str]:
    """The actions that have instances for these parameters but none of which took a step: a
    property that relies on them may hold vacuously. (An action with no instance at all is one
    the parameters switch off, e.g. timeouts=0: see disabled_actions.)"""
    have = {inst.action.name for inst in model.instances}
    counts = fired_per_action(model, fired)
    return [a.name for a in model.spec.actions if a.name in have and counts[a.name] == 0]


def disabled_actions(model) -> list[str]:
    """The actions with no instance for these parameters (every guard is false)."""
    have = {inst.action.name for inst in model.instances}
    return [a.name for a in model.spec.actions if a.name not in have]


# ---------------------------------------------------------------------------------------------
# The stopping rule

class Pending:
    """The properties a search has still to decide, and the breadth-first stopping rule: before
    expanding level d, stop when every property asked for is violated ('all-violated'), or when
    d is --max-depth ('max-depth'). What a level finds (transition properties and deadlocks while
    it is expanded, invariants on the level it adds) counts from the next level on."""

    def __init__(self, properties, deadlock: bool):
        self.properties = list(properties)
        self.left = set(self.properties) | ({DEADLOCK} if deadlock else set())

    def __contains__(self, name) -> bool:
        return name in self.left

    def decide(self, name: str):
        self.left.discard(name)

    def stop_before(self, depth: int, max_depth: int | None) -> str | None:
        if not self.left and self.properties:
            return "all-violated"
        if max_depth is not None and depth >= max_depth:
            return "max-depth"
        return None


def keep_least(found: dict, name: str, candidate):
    """The merge rule for what a level finds, written once: of the candidates for one property
    (a transition property's (pre-state, action instance), an invariant's or a deadlock's
    state, each state by its place in the level), the least is kept, whichever block, share or
    owner found it. The single process's blocks, and Spark's owners' summaries, all merge
    through it, so the tie-break is the same everywhere (the module's docstring)."""
    if name not in found or candidate < found[name]:
        found[name] = candidate


def decided_at(kind: str, steps: int) -> int:
    """The level at whose start a breadth-first search knows of a violation of ``steps`` steps:
    an invariant on the level it is in, a transition property once the level before its last
    step is expanded, a deadlock once the deadlocked state's own level is expanded."""
    return steps + 1 if kind == "deadlock" else steps


def replay_stop(decided: dict[str, int], properties, deadlock: bool, deepest: int,
                max_depth: int | None) -> tuple[str | None, int]:
    """Replays the stopping rule over levels 0..``deepest`` (the deepest non-empty one), given
    the level at which each property violated is decided (``decided_at``) -> (stop reason or
    None, the last level the search would have added). Spark's slices explore past where the
    single process stops; this says where that is."""
    pending = Pending(properties, deadlock)
    d = 0
    while True:
        for name, at in decided.items():
            if at <= d:
                pending.decide(name)
        reason = pending.stop_before(d, max_depth)
        if reason:
            return reason, d
        if d + 1 > deepest:
            return None, d
        d += 1


# ---------------------------------------------------------------------------------------------
# Sets of states as sorted arrays

def storage_kind(words: int) -> str:
    """How the visited set identifies a state of ``words`` 64-bit words."""
    if words == 1:
        return "exact (a state is its own fingerprint)"
    if words <= EXACT_WORDS:
        return f"exact (states of {words} words stored whole)"
    return "128-bit fingerprints"


def state_keys(S: np.ndarray) -> np.ndarray | None:
    """What the visited set stores beside a state's 64-bit fingerprint to tell states apart:
    nothing when the state is its fingerprint, the words themselves when they are few (exact),
    else a second, independent 64-bit hash (a 128-bit fingerprint)."""
    if S.shape[0] == 1:
        return None
    if S.shape[0] <= EXACT_WORDS:
        return S
    return fingerprint(S, seed=0x243F6A8885A308D3)[None, :]


def absent(sorted_fp: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Mask of the fingerprints u not in the sorted array (states known by fingerprint only)."""
    if not len(sorted_fp):
        return np.ones(len(u), dtype=bool)
    return native.absent(np.ascontiguousarray(sorted_fp, dtype=np.uint64), None,
                         len(sorted_fp), u, None)


def insert_sorted(sorted_fp: np.ndarray, new: np.ndarray) -> np.ndarray:
    """A sorted array of fingerprints with the (sorted, absent) new ones inserted."""
    if not len(new):
        return sorted_fp
    return np.insert(sorted_fp, np.searchsorted(sorted_fp, new), new)


def _sort_with_tag(fp: np.ndarray, tag: np.ndarray, tag_bits: int):
    """(sorted tags, mask of the slots that hold a state's first occurrence, or None), fp
    ascending with ``tag`` (< 2**tag_bits) breaking ties, or None. One np.sort of packed words
    instead of an argsort, which is several times slower: a state that leaves ``tag_bits`` free
    is shifted above the tag (exact: the mask comes with it); otherwise a hash's top bits go
    above the tag, which orders the states unless two distinct fingerprints share their top
    bits (the caller checks). The words are packed into ``tag`` itself, a part at a time, so
    that a level's sort holds one array of its size, not three."""
    if tag_bits >= 40:
        return None
    n = len(fp)
    mask = np.uint64((1 << tag_bits) - 1)
    b = np.uint64(tag_bits)
    exact = not n or int(fp.max()) >> (64 - tag_bits) == 0
    key = tag
    for a in range(0, n, PART):
        if exact:
            key[a:a + PART] |= fp[a:a + PART] << b
        else:
            key[a:a + PART] |= fp[a:a + PART] & ~mask
    key.sort()
    first = None
    if exact and n:
        first = np.empty(n, dtype=bool)
        first[0] = True
        for a in range(1, n, PART):
            z = min(n, a + PART)
            np.not_equal(key[a:z] >> b, key[a - 1:z - 1] >> b, out=first[a:z])
    key &= mask
    return key, first


def first_of_each(fp: np.ndarray, keys: np.ndarray | None, runs: list[int] | None = None,
                  actions: np.ndarray | None = None, action_bits: int = 16) -> np.ndarray:
    """Positions of one occurrence of each distinct state among ``fp`` (and ``keys``), in level
    order (by fingerprint, then, only when two states share one, by their keys).

    Without ``runs``, the first occurrence: the candidates of one block come in (action
    instance, parent) order, so the first is the least. With ``runs``: fp is the concatenation
    of runs of these lengths, each sorted and distinct, run r holding candidates whose parents
    all come after those of the runs before it (a level's blocks, in order); ``actions`` (below
    2**action_bits) the candidates' action instances. The occurrence kept is then the least
    (action instance, run), which is the least (action instance, parent): two candidates of one
    state lie in different runs."""
    n = len(fp)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if runs is not None and len(runs) == 1:
        return np.arange(n)
    if runs is None and keys is None:
        free = 64 - int(fp.max()).bit_length()
        tag_bits = max(1, (n - 1).bit_length())
        if tag_bits <= free:
            # a state that is its own fingerprint, with room for its position below it (a
            # block of two_phase's): the packing and the reading of the sorted words compiled
            return native.first_positions(fp, tag_bits)
        if free >= 12:
            # too few free bits for the positions (two_phase N=11: 48 bits, 2^18 candidates a
            # block): the exact sort in chunks whose positions fit, the chunks then merged as
            # runs (the earliest chunk wins)
            size = 1 << free
            parts = [first_of_each(fp[a:a + size], None) + a for a in range(0, n, size)]
            at = np.concatenate(parts)
            return at[first_of_each(fp[at], None, [len(q) for q in parts],
                                    np.zeros(len(at), dtype=np.int8), 0)]
    run_bits = 0
    if runs is None:
        tag_bits = max(1, (n - 1).bit_length())
        got = _sort_with_tag(fp, np.arange(n, dtype=np.uint64), tag_bits)
    else:
        run_bits = max(1, (len(runs) - 1).bit_length())
        if keys is None and int(fp.max()).bit_length() + run_bits + action_bits <= 64:
            # a state that is its own fingerprint, with room for (action instance, run) below
            # it: the packing and the recovery of positions compiled
            return native.first_in_runs(fp, actions, runs, action_bits, run_bits)
        got = _sort_with_tag(fp, _run_tags(runs, actions, run_bits), run_bits + action_bits)
    order = sf = first = None
    if got is not None:
        order, first = got
        del got
        exact = first is not None
        if runs is not None:
            # the k-th time run r appears in the sorted order is its k-th element (a run is
            # sorted): a stable sort of the run numbers (a radix sort) gives every position
            slot_action = None if exact else (order >> np.uint64(run_bits)).astype(actions.dtype)
            order &= np.uint64((1 << run_bits) - 1)
            run_of = order.astype(np.uint16 if len(runs) < (1 << 16) else np.int64)
            del order
            by_run = np.argsort(run_of, kind="stable")
            del run_of
            order = np.empty(n, dtype=np.int32 if n < (1 << 31) else np.int64)
            for a in range(0, n, 1 << 22):     # the inverse permutation, a part at a time
                b = min(n, a + (1 << 22))
                order[by_run[a:b]] = np.arange(a, b)
            del by_run
        else:
            order = order.view(np.int64)
        if not exact:
            sf = fp[order]
            if not (sf[1:] >= sf[:-1]).all():
                order = None
            elif runs is not None:
                # ties must be in (action, run) order: the recovered candidate at each slot of
                # an equal pair is the one the sort put there (sf sorted: the top bits agree)
                dup = np.flatnonzero(sf[1:] == sf[:-1]) + 1
                for at in (dup, dup - 1):
                    if (actions[order[at]] != slot_action[at]).any():
                        order = None
                        break
        slot_action = None
    if order is None:
        tag = np.arange(n, dtype=np.uint64) if runs is None else _run_tags(runs, actions, run_bits)
        order = np.lexsort((tag, fp))
        sf = fp[order]
    if first is None:
        first = _firsts(sf)
    del sf
    if keys is not None and not first.all():
        dup = np.flatnonzero(~first[1:]) + 1
        if (keys[:, order[dup]] != keys[:, order[dup - 1]]).any():
            # two distinct states share a 64-bit fingerprint: order by fingerprint, keys, tag
            tag = np.arange(n, dtype=np.uint64) if runs is None else _run_tags(runs, actions, run_bits)
            order = np.lexsort((tag,) + tuple(keys[::-1]) + (fp,))
            cols = [fp[order]] + [k[order] for k in keys]
            first = np.ones(n, dtype=bool)
            first[1:] = np.any([c[1:] != c[:-1] for c in cols], axis=0)
    return order[first]


def _firsts(sf: np.ndarray) -> np.ndarray:
    """Mask of the first of each run of equal values of the sorted array."""
    first = np.empty(len(sf), dtype=bool)
    first[0] = True
    np.not_equal(sf[1:], sf[:-1], out=first[1:])
    return first


def _run_tags(runs: list[int], actions: np.ndarray, run_bits: int) -> np.ndarray:
    tag = actions.astype(np.uint64)
    tag <<= np.uint64(run_bits)
    at = 0
    for r, size in enumerate(runs):     # no array of run numbers beside it
        tag[at:at + size] |= np.uint64(r)
        at += size
    return tag


class Visited:
    """The sorted fingerprints (and keys, see ``state_keys``) of every state seen. One buffer for
    the whole search, reserved once and merged into in place from the back, level by level: no
    array of the visited set's size is allocated per level (that cost a quarter of the time in
    system calls and page faults at two_phase N=10). The membership test walks forward through
    the set with a level's sorted states, the merge walks back through it once (both in C:
    checker/native.py), instead of a binary search a state and a scatter of the whole set."""

    def __init__(self, nkeys: int):
        self.nkeys = nkeys
        self.n = 0
        self.fp = reserve((1 << 20,))
        self.keys = reserve((nkeys, 1 << 20)) if nkeys else None

    @property
    def sorted_fp(self) -> np.ndarray:
        return self.fp[:self.n]

    def absent(self, u: np.ndarray, ukeys: np.ndarray | None) -> np.ndarray:
        """Mask of the states (u sorted, distinct) not in the set: one forward walk through
        the set (checker/native.py)."""
        if not self.n or not len(u):
            return np.ones(len(u), dtype=bool)
        return native.absent(self.fp, self.keys, self.n, u, ukeys)

    def add(self, new: np.ndarray, new_keys: np.ndarray | None):
        """Merge the new states (sorted by fingerprint, none already present) into the set."""
        k, n = len(new), self.n
        if not k:
            return
        # the two buffers may have different room: the keys' reservation (nkeys times the
        # fingerprints') can fail where the fingerprints' succeeded, and then grows by copying
        if n + k > len(self.fp):
            self.fp = _grow(self.fp, (max(n + k, 2 * len(self.fp)),), n)
        if self.keys is not None and n + k > self.keys.shape[1]:
            self.keys = _grow(self.keys, (self.nkeys, max(n + k, 2 * self.keys.shape[1])), n)
        if not n:   # the first level, or a checkpoint's set: a copy
            self.fp[:k] = new
            if self.keys is not None:
                self.keys[:, :k] = new_keys
        else:       # one backward walk, in place (checker/native.py)
            native.merge(self.fp, self.keys, n, new, new_keys)
        self.n = n + k


def reserve(shape) -> np.ndarray:
    """An array of room for as many states as the machine's memory could hold, reserved as
    address space only: a page costs memory once written, so the set never grows by copying
    (a copy would hold the set twice at that moment)."""
    import mmap
    import os
    try:
        rows = shape[0] if len(shape) == 2 else 1
        # no more room than the machine's memory in all (a set of states of several words can
        # hold no more states than that either): a larger reservation may be refused
        cap = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8 // rows
        buf = mmap.mmap(-1, rows * cap * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                        getattr(mmap, "MAP_NORESERVE", 0))
        a = np.frombuffer(buf, dtype=np.uint64)
        return a.reshape(rows, cap) if len(shape) == 2 else a
    except (OSError, ValueError, OverflowError):   # no such reservation here: grow by copying
        return np.empty(shape, dtype=np.uint64)


def _grow(a: np.ndarray, shape, n: int) -> np.ndarray:
    b = np.empty(shape, dtype=np.uint64)
    b[..., :n] = a[..., :n]
    return b


# ---------------------------------------------------------------------------------------------
# (a) Expansion of a block

@dataclass
class Block:
    """The steps from one block of states. ``words``, ``parent``, ``action``: the successors
    that stay inside the search bounds, in (action instance, position) order, each with the
    position in the block of its state and its action instance id (None when there is none)."""
    words: np.ndarray | None = None
    parent: np.ndarray | None = None
    action: np.ndarray | None = None
    transitions: int = 0
    cut: int = 0                      # steps that left a search bound (not explored)
    violations: dict = field(default_factory=dict)   # transition property -> (position, instance)
    stuck: int | None = None          # position of the first deadlocked state
    cut_only: int = 0                 # states with steps, every one of which left a bound


def expand_block(comp: Compiled, S: np.ndarray, fired: list, skip=(), deadlock: bool = False,
                 stuck: bool = False, act_dtype=np.int32, successors=None,
                 on_batch=None, loops: bool = True) -> Block:
    """Every enabled step from the states S (columns). ``fired[k]`` grows by instance k's steps;
    transition properties not in ``skip`` are judged (the least (position, instance) violating
    each); with ``deadlock``, the states whose every step left a search bound are counted and,
    with ``stuck``, the first state with no step (and not terminal) is found. ``successors``
    replaces ``comp.successors`` (a reduction's: it yields the same tuples, in the same order);
    ``on_batch(k, idx, sub, T, ok)`` sees each instance's steps before the bound is applied.
    Without ``loops``, the steps that leave their state as it was are left out of ``words``: they
    reach a state already visited (their own; two_phase's repeated receipts, 37 % of its steps),
    and dropping them here spares the sorts that would find that out."""
    m = S.shape[1]
    blk = Block()
    enabled = np.zeros(m, dtype=bool) if deadlock else None
    inside = np.zeros(m, dtype=bool) if deadlock else None
    viol = blk.violations

    def judged(k, idx, sub, T, out, ok):
        """Counts and judges one instance's steps -> the steps kept (successors, positions),
        or None."""
        blk.transitions += idx.size
        fired[k] += idx.size
        if enabled is not None:
            enabled[idx] = True
        if on_batch is not None:
            on_batch(k, idx, sub, T, ok)
        for name, i in comp.step_violations(k, sub, T, out, ok, skip):
            keep_least(viol, name, (int(idx[i]), k))
        if ok is not None:
            blk.cut += int(idx.size - ok.sum())
        keep = ok
        if not loops:
            if inside is not None:
                inside[idx if ok is None else idx[ok]] = True
            keep = T[0] != sub[0]
            for w in range(1, T.shape[0]):
                keep |= T[w] != sub[w]
            if ok is not None:
                keep &= ok
        if keep is not None:
            idx, T = idx[keep], T[:, keep]
            if not idx.size:
                return None
        if inside is not None and loops:
            inside[idx] = True
        return T, idx

    if successors is None and on_batch is None and np.dtype(act_dtype).itemsize in (2, 4):
        _expand_in_place(comp, S, blk, fired, skip, enabled, inside, act_dtype, loops, judged)
    else:
        cS, cpar, cact = [], [], []
        for k, idx, sub, T, out, ok in (successors or comp.successors)(S):
            got = judged(k, idx, sub, T, out, ok)
            if got is not None:
                cS.append(got[0])
                cpar.append(got[1])
                cact.append(np.full(got[1].size, k, dtype=act_dtype))
        if cS:
            if len(cS) > 1:
                blk.words = np.concatenate(cS, axis=1)
                blk.parent, blk.action = np.concatenate(cpar), np.concatenate(cact)
            else:
                blk.words, blk.parent, blk.action = cS[0], cpar[0], cact[0]
    if enabled is not None:
        blk.cut_only = int((enabled & ~inside).sum())
        if stuck:
            none = ~enabled
            if comp.terminal is not None and none.any():
                none &= ~np.broadcast_to(comp.terminal(S), (m,))
            if none.any():
                blk.stuck = int(np.flatnonzero(none)[0])
    return blk


def _expand_in_place(comp: Compiled, S: np.ndarray, blk: Block, fired: list, skip, enabled,
                     inside, act_dtype, loops: bool, judged):
    """expand_block's steps written into one array for the block (no concatenation at the
    end): an instance whose writes are all constants, and that no transition property still
    pending judges, is taken in one compiled pass (checker/native.py, Steps.constant); the
    others through their compiled effects and ``judged``. The same steps in the same (action
    instance, position) order as comp.successors gives."""
    m = S.shape[1]
    masks = comp.guards(S)
    counts = [0 if mask is False else m if mask is True else int(np.count_nonzero(mask))
              for mask in masks]
    if not sum(counts):
        return
    if S.dtype != np.uint64 or S.strides[1] != 8:
        S = np.ascontiguousarray(S, dtype=np.uint64)
    steps = native.Steps(S.shape[0], sum(counts), act_dtype)
    at_S = native.address(S)
    keeps, puts = comp.constant_addresses()
    row = 8 * S.shape[0]
    for k, mask in enumerate(masks):
        count = counts[k]
        if not count:
            continue
        if comp.constant[k] and all(name in skip for name, _ in comp.tprops_by_instance.get(k, ())):
            blk.transitions += count
            fired[k] += count
            if enabled is not None:      # no step of constant writes leaves a search bound
                if mask is True:
                    enabled[:] = inside[:] = True
                else:
                    enabled |= mask
                    inside |= mask
            steps.constant(S, at_S, mask, keeps + row * k, puts + row * k, k, loops)
            continue
        idx = np.arange(m) if mask is True else np.flatnonzero(mask)
        sub = S[:, idx]
        got = judged(k, idx, sub, *comp.effects[k](sub))
        if got is not None:
            steps.put(got[0], got[1], k)
    if steps.n:
        blk.words, blk.parent, blk.action = steps.taken()


def flip_counts(model, lay) -> list[int] | None:
    """The pilot search a one-word layout is ordered by (checker/layout.py ``by_flips``): per
    flat field of ``lay`` (a one-word ``Layout``, the declaration order), how many steps of a
    breadth-first search of its first ``PILOT_STATES`` states change it. None when
    the pilot cannot run: an error in the spec's actions, which the real search then reports in
    full. It is a level loop, hence here; it compiles against the layout it is given, since the
    layout it measures for does not exist yet."""
    n = len(lay.fields)
    masks = [np.uint64(((1 << lay.width[i]) - 1) << lay.shift[i]) for i in range(n)]
    changed = [0] * n
    try:
        comp = Compiled(model, [], layout=lay)
        ninst = len(model.instances)
        act = np.int16 if ninst < 32000 else np.int32
        level = np.unique(np.array([lay.pack_flat(s)[0] for s in model.initial_states],
                                   dtype=np.uint64))
        seen = level
        while len(level) and len(seen) < PILOT_STATES:
            S = level[None, :PILOT_STATES]
            blk = expand_block(comp, S, [0] * ninst, set(), False, False, act, loops=False)
            if blk.words is None:
                break
            flipped = S[0, blk.parent] ^ blk.words[0]
            for i in range(n):
                changed[i] += int(np.count_nonzero(flipped & masks[i]))
            level = np.setdiff1d(blk.words[0], seen)
            seen = np.union1d(seen, level)
    except Exception:
        return None
    return changed


# ---------------------------------------------------------------------------------------------
# (b), (c) A level's new states, deduplicated, each with its parent

class Level:
    """The states a level adds, gathered block by block: each block's distinct states, sorted (a
    run); duplicates between blocks, and the states seen at earlier levels, go when the runs are
    sorted together (when they grow large, and at the level's end), keeping for each state the
    least (action instance, parent).

    The visited set is searched once for the sorted runs together, not once a block: a binary
    search's cost is its cache misses, and sorted queries in batches of millions miss a few
    times less often than a block's (two_phase N=10: 45 ns a query against 300). A state that is
    its own fingerprint (one word) is kept once, as its fingerprint."""

    def __init__(self, visited: Visited, keyed: bool, action_bits: int, one_word: bool = False,
                 state_bits: int = 64, scratch: native.Scratch | None = None):
        self.visited, self.keyed, self.action_bits = visited, keyed, action_bits
        self.scratch = scratch        # the search's array for the collapse's sort keys
        self.one_word = one_word
        self.fp: list[np.ndarray] = []
        self.words: list[np.ndarray] = []
        self.parent: list[np.ndarray] = []
        self.action: list[np.ndarray] = []
        self.upper = 0                # states gathered, duplicates and states seen included
        self._compacted = self._unsorted = 0
        self._sorted = False          # the first run is the level gathered so far, sorted
        # the runs sorted together carry (action instance, run) beside a one-word state in one
        # word: no more runs than the bits it leaves free (else the slow sort would be taken)
        free = 64 - state_bits - action_bits if one_word else 0
        self.max_runs = 1 << free if free >= 2 else None

    def keys(self, S):
        return state_keys(S) if self.keyed else None

    def add(self, T: np.ndarray, fp: np.ndarray, parent: np.ndarray, action: np.ndarray,
            offset: int):
        """One block's successors (fingerprints ``fp``), their parents' positions in the block
        and action instances; ``offset``: the block's first position in its level."""
        # the first (lowest instance, then earliest state) of the block that reaches a state
        n = len(fp)
        tag_bits = max(1, (n - 1).bit_length())
        if (self.one_word and n and tag_bits <= 64 - int(fp.max()).bit_length()
                and np.dtype(action.dtype).itemsize in (2, 4)):
            # a state that is its own fingerprint, with room for its position below it: the
            # sort's reading and the gathers after it in one compiled pass
            ufp, par, act = native.first_gather(fp, tag_bits, parent, action, offset)
            self.fp.append(ufp)
            self.parent.append(par)
            self.action.append(act)
            added = len(ufp)
        else:
            first = first_of_each(fp, self.keys(T))
            self.fp.append(fp[first])
            if not self.one_word:
                self.words.append(T[:, first])
            par = parent[first]
            par += offset
            self.parent.append(par.astype(np.int32))
            self.action.append(action[first])
            added = len(first)
        self.upper += added
        self._unsorted += added
        if (self._unsorted > max(COMPACT_AT, 2 * self._compacted)
                or (self.max_runs is not None and len(self.fp) >= self.max_runs)):
            # a state reached from many blocks is kept once per block until the runs are
            # sorted: sort what there is now, so that the level never holds many copies of its
            # states (the doubling rule keeps the sorting to a few passes over the level)
            self._collapse()
            self._compacted, self._unsorted = len(self.fp[0]), 0
            self.upper = self._compacted

    def _collapse(self):
        """The runs merged into one: the level's distinct states not seen before, in level
        order, each with its least (action instance, parent)."""
        if not self.fp:
            return
        if (self.one_word and self.max_runs is not None and len(self.fp) <= self.max_runs
                and self.visited.keys is None
                and all(np.dtype(a.dtype).itemsize in (2, 4) for a in self.action)):
            # a state that is its own fingerprint, with room for (action instance, run) below
            # it: one sort of the runs' packed words, read in one compiled pass that keeps each
            # state's least (action instance, run), drops the states visited and merges the
            # rest into the level gathered so far (the runs are never joined; no array of
            # positions, no mask, no second merge)
            if self._sorted and len(self.fp) == 1:
                return                     # the level gathered so far, sorted and filtered
            before = None
            if self._sorted:
                before = (self.fp.pop(0), self.parent.pop(0), self.action.pop(0))
            runs = (self.fp, self.parent, self.action)
            self.fp, self.parent, self.action = [], [], []
            got = native.collapse(runs, self.action_bits, self.visited.fp, self.visited.n, before,
                                  self.scratch)
            del runs, before
            self.fp, self.parent, self.action = [got[0]], [got[1]], [got[2]]
            self._sorted = True
            return
        before = None
        if self.one_word and self._sorted and len(self.fp) > 1:
            # the first run is the level gathered so far, sorted and not seen before: only the
            # runs after it are sorted, then merged into it in one pass (not sorted again with
            # every new part: two to three times a level, two_phase N=10)
            before = (self.fp.pop(0), self.parent.pop(0), self.action.pop(0))
        runs = [len(c) for c in self.fp]

        def joined(parts, axis=0):   # the runs joined, each list let go at once (less memory)
            return np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
        fp, self.fp = joined(self.fp), []
        words = None
        if not self.one_word:
            words, self.words = joined(self.words, axis=1), []
        action, self.action = joined(self.action), []
        parent, self.parent = joined(self.parent), []
        keys = self.keys(words) if words is not None else None
        sel = first_of_each(fp, keys, runs, action, self.action_bits) if len(runs) > 1 else None
        u = fp if sel is None else fp[sel]
        ukeys = None if keys is None else (keys if sel is None else keys[:, sel])
        fresh = self.visited.absent(u, ukeys)
        del ukeys
        if not fresh.all():
            sel = np.flatnonzero(fresh) if sel is None else sel[fresh]
            u = u[fresh]
        del fresh
        self.fp = [u]
        if sel is None:
            self.words, self.parent, self.action = ([] if words is None else [words]), [parent], [action]
        else:
            self.words = [] if words is None else [words[:, sel]]
            self.parent, self.action = [parent[sel]], [action[sel]]
        del fp, parent, action, sel, u
        if before is not None:
            after = (self.fp.pop(), self.parent.pop(), self.action.pop())
            fp, parent, action = native.merge_runs(before, after)
            del before, after
            self.fp, self.parent, self.action = [fp], [parent], [action]
        self._sorted = True

    @property
    def nbytes(self) -> int:
        """The bytes the level holds now: its end (the runs joined, sorted and filtered) takes
        about as much again, all at once (the memory watch's forecast, bfs)."""
        return sum(a.nbytes for part in (self.fp, self.words, self.parent, self.action)
                   for a in part)

    def distinct(self) -> int:
        """The level's distinct new states so far (a sort: called only near a bound)."""
        self._collapse()
        self.upper = len(self.fp[0]) if self.fp else 0
        return self.upper

    def finish(self):
        """-> (fingerprints, states, parents, action instances) of the level, in level order."""
        self._collapse()
        fp = self.fp[0]
        words = fp[None, :] if self.one_word else self.words[0]
        parent, action = self.parent[0], self.action[0]
        if parent.base is not None and parent.base.nbytes > parent.nbytes + parent.nbytes // 4:
            # the collapse's output has room for every candidate: the search keeps a level's
            # parents to its end, so not the room with them
            parent, action = parent.copy(), action.copy()
        self.fp = self.words = self.parent = self.action = []
        return fp, words, parent, action


# ---------------------------------------------------------------------------------------------
# (d), (e) The level loop

@dataclass
class Findings:
    """What one level's step found, each state named by its key (``Whole.key``: its position in
    the level; an owner's: its fingerprint): transition property -> (pre-state's key, action
    instance), the least stuck state's key, invariant -> the key of its least violating state
    in the level added, and how many states that level has."""
    transition: dict = field(default_factory=dict)
    deadlock: int | None = None
    invariant: dict = field(default_factory=dict)
    new: int = 0


class Whole:
    """The share of a search that holds every state of each level (the single process, the
    state graph, Spark's slices and its drivers' prefixes): a state is known by its position
    in its level, a level ends by sorting what was gathered (``Level.finish``), what this
    process found is what the search found, and a violation's trace is rebuilt at once from
    the parents kept. Spark's ownership gives an ``Explorer`` another share (one owner's of P:
    checker/spark_owner.py), whose level ends with an exchange, and whose findings are merged
    with the other owners' before the core decides; the loop, the blocks and the stopping rule
    stay the core's."""

    def key(self, ex: "Explorer", position: int) -> int:
        """The key of the state at ``position`` of the current frontier (its order in a level is
        its keys' order)."""
        return position

    def finish(self, ex: "Explorer", level: "Level") -> tuple:
        """The level's end -> (fingerprints, states, parents, action instances) of the new states
        this share holds, in level order (or four Nones when it holds none)."""
        return level.finish() if level.upper else (None,) * 4

    def gather(self, ex: "Explorer", found: Findings) -> Findings:
        """This share's findings -> the search's."""
        return found

    def located(self, ex: "Explorer", name: str, kind: str, depth: int, key: int, last):
        """A violation decided at the state of key ``key`` at ``depth`` (``last``: the
        violating step's action instance, for a transition property) -> what ``found`` keeps:
        the counterexample, replayed from the parents kept."""
        initial, steps = ex.trace_to(depth, key)
        if last is not None:
            steps.append(last)
        return ex.counterexample(name, kind, initial, steps)


class Explorer:
    """A breadth-first search's state between levels, and the loop over levels.

    Keeps the visited set, the frontier, per level each state's parent (its position in the
    level before) and action instance (a trace is rebuilt by replaying actions from an initial
    state, as Stateright does), the counters, the violations found (``found``: property ->
    ``counterexample(property, kind, initial, steps)``: verdict.Counterexample, which the engines
    pass, this layer being below the results'; an exploration that checks nothing leaves it
    out) and the properties pending. ``keyed``:
    tell apart distinct states that share a 64-bit fingerprint (the single process); the state
    graph and Spark know a state by its fingerprint. ``canonical``: one representative per
    orbit of a symmetry (checker/symmetry.py). ``successors``: replaces ``comp.successors``.
    ``share``: which part of each level this process holds (``Whole``, the default: all of it;
    see checker/spark_owner.py for one owner's)."""

    def __init__(self, model, comp: Compiled, properties, deadlock: bool, *, keyed: bool = True,
                 canonical: Callable | None = None, block: int = BLOCK,
                 counterexample: Callable | None = None, successors: Callable | None = None,
                 share: Whole | None = None):
        self.model, self.comp, self.block = model, comp, block
        self.share = share if share is not None else Whole()
        words = comp.layout.words
        self.keyed = keyed and words > 1
        # a one-word state is its own fingerprint: a level keeps it once
        self.one_word, self.state_bits = words == 1, comp.layout.bits
        self.visited = Visited((words if words <= EXACT_WORDS else 1) if self.keyed else 0)
        self.scratch = native.Scratch()
        self.canonical, self.successors = canonical, successors
        self.counterexample = counterexample
        self.pending = Pending(properties, deadlock)
        self.found: dict = {}
        ninst = len(model.instances)
        self.fired = [0] * ninst
        self.act_dtype = np.int16 if ninst < 32000 else np.int32
        self.action_bits = max(1, (ninst - 1).bit_length())
        self.transitions = self.cut = self.cut_only = 0
        self.depth = 0
        self.frontier: np.ndarray | None = None
        # the states of the current level, over every share (this process's frontier holds
        # them all unless it is one owner of several): the loop ends when a level has none
        self.level_states = 0
        self.parents: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.initial_words: list[tuple] = []
        self.stop_reason: str | None = None

    def keys(self, S):
        return state_keys(S) if self.keyed else None

    # -- level 0, or a saved search ----------------------------------------------------------

    def start(self, initial) -> np.ndarray:
        """Level 0 from the initial states (packed words, a list of tuples); -> its sorted
        fingerprints. Invariants are checked on it."""
        W = self.comp.layout.words
        init = np.array(initial, dtype=np.uint64).reshape(-1, W).T.copy()
        if self.canonical is not None:
            init = self.canonical(init)
        fp0 = fingerprint(init)
        first = first_of_each(fp0, self.keys(init))
        self.frontier = init[:, first]
        fp0 = fp0[first]
        self.visited.add(fp0, self.keys(self.frontier))
        self.initial_words = [tuple(int(x) for x in self.frontier[:, i])
                              for i in range(self.frontier.shape[1])]
        self.parents = [np.full(self.frontier.shape[1], -1, dtype=np.int32)]
        self.actions = [np.zeros(self.frontier.shape[1], dtype=np.int32)]
        self.depth = 0
        self.level_states = self.frontier.shape[1]
        self.check_invariants(self.frontier, 0)
        return fp0

    def resume(self, saved):
        """Where a checkpoint left off (checker/checkpoint.py ``Saved``); its visited set is
        copied into the search's and dropped from ``saved``."""
        self.visited.add(saved.fp, saved.keys)
        saved.fp = saved.keys = None
        self.frontier, self.parents, self.actions = saved.frontier, saved.parents, saved.actions
        self.initial_words = saved.initial_words
        self.transitions, self.cut, self.cut_only = (saved.transitions, saved.cut_by_bounds,
                                                     saved.cut_only_states)
        self.fired[:] = saved.fired
        for name, f in saved.found.items():
            self.found[name] = self.counterexample(name, f.kind, f.initial, f.steps)
            self.pending.decide(name)
        self.depth = saved.depth
        self.level_states = self.frontier.shape[1]

    def take_over(self, visited: np.ndarray, frontier: np.ndarray, depth: int,
                  level_states: int, left):
        """A search another process began, from ``depth`` on: this share's visited states
        (sorted fingerprints; the share is not keyed) and frontier (its states of level
        ``depth``, in level order), the whole level's size, and the properties still
        ``left`` to decide. The parents of the levels before are not held here."""
        self.visited.add(visited, None)
        self.frontier, self.depth, self.level_states = frontier, depth, level_states
        self.parents = [None] * (depth + 1)
        self.actions = [None] * (depth + 1)
        self.pending.left = set(left)

    # -- traces and checks -------------------------------------------------------------------

    def trace_to(self, level: int, index: int) -> tuple[tuple, list[int]]:
        """(initial words, action instance ids) of the path to the state at ``index`` of
        ``level``."""
        steps = []
        for d in range(level, 0, -1):
            steps.append(int(self.actions[d][index]))
            index = int(self.parents[d][index])
        steps.reverse()
        return self.initial_words[index], steps

    def _record(self, name, kind, level, key, last=None):
        self.found[name] = self.share.located(self, name, kind, level, key, last)
        self.pending.decide(name)

    def check_invariants(self, S: np.ndarray, level: int):
        """Each invariant still pending, on the states S of ``level`` (in level order)."""
        for name, key in self.invariant_violations(S).items():
            self._record(name, "invariant", level, key)

    def invariant_violations(self, S: np.ndarray) -> dict:
        """Invariant still pending -> the key of its first violating state among S (the
        frontier, in level order), in the spec's order of invariants."""
        pending = [name for name in self.comp.invariants if name in self.pending]
        found = self.comp.first_violations(pending, S, self.block)
        return {name: self.share.key(self, found[name]) for name in pending if name in found}

    # -- one level ---------------------------------------------------------------------------

    def expand_level(self, before_block=None, after_block=None, on_batch=None, on_block=None,
                     on_level=None) -> np.ndarray | None:
        """Expands the frontier block by block and adds the next level -> its fingerprints (in
        level order; this share's), or None when the level adds no state (this share's frontier
        is then empty).

        Hooks: ``before_block(start, n)``; ``after_block(start, m, n, level)`` returns a stop
        reason to end the level after that block (what it found stands, the states gathered
        are added, ``stop_reason`` is set); ``on_batch`` (see expand_block);
        ``on_block(start, T, parent, action, fp)`` sees a block's successors inside the bounds
        before deduplication; ``on_level(depth, fp)`` sees the level added."""
        level, tviol, deadlocked = self.expand_frontier(before_block, after_block, on_batch,
                                                        on_block)
        share = self.share
        found = Findings({name: (share.key(self, i), k) for name, (i, k) in tviol.items()},
                         None if deadlocked is None else share.key(self, deadlocked))
        fp = words = parent = action = None
        if self.stop_reason == "memory":
            # the level's end would take the memory there is not: its states are let go, and
            # the search ends at the level before, with the violations this level's steps found
            del level
        else:
            # the level sorted once; the level expanded is no longer needed (parents are
            # positions in it)
            width = self.frontier.shape[0]
            self.frontier = None
            fp, words, parent, action = share.finish(self, level)
            del level
            if fp is None or not len(fp):
                fp, words = None, np.empty((width, 0), dtype=np.uint64)
                parent, action = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32)
            else:
                self.visited.add(fp, self.keys(words))
                found.invariant = self.invariant_violations(words)
            found.new = 0 if fp is None else len(fp)
            self.frontier = words          # this share's part of the new level
        found = share.gather(self, found)
        for name, (key, k) in sorted(found.transition.items()):
            self._record(name, "transition", self.depth, key, k)
        if found.deadlock is not None and DEADLOCK in self.pending:
            self._record(DEADLOCK, "deadlock", self.depth, found.deadlock)
        if self.stop_reason == "memory":
            return None
        self.level_states = found.new
        if not found.new:
            return None
        self.parents.append(parent)
        self.actions.append(action)
        self.depth += 1
        for name, key in found.invariant.items():
            self._record(name, "invariant", self.depth, key)
        if on_level is not None and fp is not None:
            on_level(self.depth, fp)
        return fp

    def expand_frontier(self, before_block=None, after_block=None, on_batch=None,
                        on_block=None) -> tuple:
        """The frontier expanded block by block (expand_level's hooks) -> (the next level's
        states gathered, ``Level``; transition property -> (least pre-state position, action
        instance); the first stuck state's position or None), the counters updated."""
        comp, block = self.comp, self.block
        frontier = self.frontier
        n = frontier.shape[1]
        check_deadlock = DEADLOCK in self.pending
        skip = set(comp.tprop_names) - self.pending.left
        level = Level(self.visited, self.keyed, self.action_bits, self.one_word, self.state_bits,
                      self.scratch)
        tviol: dict[str, tuple[int, int]] = {}   # property -> (parent, instance), this level
        deadlocked = None
        for start in range(0, n, block):
            if before_block is not None:
                before_block(start, n)
            S = frontier[:, start:start + block]
            blk = expand_block(comp, S, self.fired, skip, check_deadlock, deadlocked is None,
                               self.act_dtype, self.successors, on_batch,
                               loops=on_block is not None)
            self.transitions += blk.transitions
            self.cut += blk.cut
            self.cut_only += blk.cut_only
            for name, (i, k) in blk.violations.items():
                keep_least(tviol, name, (start + i, k))
            if blk.stuck is not None and deadlocked is None:
                deadlocked = start + blk.stuck
            if blk.words is not None:
                T = blk.words
                if self.canonical is not None:
                    T = self.canonical(T)    # one representative per orbit
                fp = fingerprint(T)
                parent, action = blk.parent, blk.action
                if on_block is not None:
                    on_block(start, T, parent, action, fp)
                    # the hook saw every step; a step that leaves its state as it was reaches a
                    # state already visited (see expand_block)
                    moved = T[0] != S[0, parent]
                    for w in range(1, T.shape[0]):
                        moved |= T[w] != S[w, parent]
                    if not moved.all():
                        T, parent, action = T[:, moved], parent[moved], action[moved]
                        fp = T[0] if self.one_word else fp[moved]
                    del moved
                if len(parent):
                    level.add(T, fp, parent, action, start)
                del T, fp, parent, action
            del blk
            if after_block is not None:
                reason = after_block(start, S.shape[1], n, level)
                if reason:
                    self.stop_reason = reason
                    break
        return level, tviol, deadlocked

    def run(self, max_depth: int | None = None, until: Callable | None = None,
            **hooks) -> str | None:
        """Levels until the space ends, the stopping rule stops the search, a hook stops it, or
        ``until()`` holds before a level -> the stop reason (None: the space ended or ``until``
        held). ``hooks``: those of expand_level."""
        while self.level_states:
            reason = self.pending.stop_before(self.depth, max_depth)
            if reason:
                self.stop_reason = reason
                break
            if until is not None and until():
                break
            self.expand_level(**hooks)
            if self.stop_reason:
                break
        return self.stop_reason
