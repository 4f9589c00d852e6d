"""Breadth-first explicit-state search with shortest counterexamples.

The search runs level by level on blocks of packed states (checker/compile.py). It keeps:
- ``visited``: a sorted array of 64-bit fingerprints of every state seen (8 bytes a state), and
  beside each, when a state is wider than its fingerprint, the state itself (up to EXACT_WORDS
  words: exact) or a second 64-bit hash (a 128-bit fingerprint);
- per level, each state's parent (its position in the previous level) and the action instance
  that reached it (4 + 2 or 4 bytes a state), so a trace is rebuilt by replaying actions from an
  initial state, as Stateright does; finished states themselves are not kept;
- the current and the next frontier as packed words.

Order, and so every count and trace, is deterministic: a level is ordered by fingerprint (then,
for distinct states that share one, by their words or second hash), and a state's parent is the
first (earliest block, then lowest action instance, then earliest state) that produced it. Each
block's new states are sorted and filtered against the visited set as they come; the level is
sorted once at its end (the blocks' sorted runs merged by one sort of packed words) and merged
into the visited set in place (docs/design.md, "A faster single process"). Tie-break between shortest counterexamples: for an invariant, the violating
state that comes first in its level; for a transition property, the step whose pre-state comes
first in its level, then the lowest action instance; a deadlock like an invariant.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from checker.compile import Compiled, fingerprint
from spec.lang import Model

DEADLOCK = "deadlock"


class Terminated(BaseException):
    """SIGTERM (what timeout, CI runners and schedulers send): the command line raises it from
    its signal handler so a search stops as on Ctrl-C, keeping what it found."""


@dataclass
class Found:
    """A shortest counterexample: the initial state and the action instances from it."""
    property: str
    kind: str                 # 'invariant', 'transition', 'deadlock'
    initial: tuple            # packed words of the initial state
    steps: list[int]          # action instance indices


@dataclass
class SearchResult:
    model: Model
    properties: list[str]
    exhaustive: bool = False
    distinct_states: int = 0
    transitions: int = 0
    depth: int = 0
    elapsed_s: float = 0.0
    cut_by_bounds: int = 0           # transitions that left a search bound (e.g. max_epoch)
    stop_reason: str | None = None   # 'max-depth', 'max-states', 'interrupted', 'terminated',
                                     # 'all-violated', 'memory', 'out-of-memory'
    stop_detail: str | None = None   # the figures behind a 'memory' stop
    fired: list[int] = field(default_factory=list)   # per action instance: steps taken
    # states whose every enabled step left a search bound: what lies beyond was not examined,
    # so "no deadlock" is a verdict on the bounded configuration only (status 'bounded')
    cut_only_states: int = 0
    found: dict[str, Found] = field(default_factory=dict)
    deadlock_checked: bool = False
    resumed_from: int | None = None  # the depth of the checkpoint this search resumed from
    # how the visited set told states apart (storage_kind); engines that keep 64-bit
    # fingerprints (Spark) leave it unset
    stored_as: str | None = None
    # the symmetry the search reduced by (checker/symmetry.py), "off", or None when the spec
    # declares none; with it, distinct_states counts orbits and unreduced_states their states
    symmetry: str | None = None
    unreduced_states: int = 0

    @property
    def storage(self) -> str:
        """How states were told apart, as the statistics line prints it."""
        if self.stored_as is not None:
            return self.stored_as
        return storage_kind(1) if self.model.layout.words == 1 else "64-bit fingerprints"

    @property
    def interrupted(self) -> bool:
        return self.stop_reason in ("interrupted", "terminated")

    def never_fired(self) -> list[str]:
        """The actions that have instances for these parameters but none of which took a step in
        the search: a property that relies on them may hold vacuously. (An action with no
        instance at all is one the parameters switch off, e.g. timeouts=0: see disabled().)"""
        counts: dict[str, int] = {}
        for inst, n in zip(self.model.instances, self.fired):
            counts[inst.action.name] = counts.get(inst.action.name, 0) + n
        return [a.name for a in self.model.spec.actions if counts.get(a.name) == 0]

    def disabled(self) -> list[str]:
        """The actions with no instance for these parameters (every guard is false)."""
        have = {inst.action.name for inst in self.model.instances}
        return [a.name for a in self.model.spec.actions if a.name not in have]

    def status(self, prop: str) -> str:
        if prop in self.found:
            return "violated"
        if prop == DEADLOCK and self.cut_only_states:
            return "bounded"
        return "holds" if self.exhaustive else "bounded"

    def reason(self, prop: str) -> str | None:
        """Why a property not violated is 'bounded', in one sentence (None when it holds or is
        violated)."""
        if self.status(prop) != "bounded":
            return None
        if prop == DEADLOCK and self.exhaustive:
            return (f"{self.cut_only_states:,} states have no step but ones that leave a search "
                    f"bound: a deadlock beyond the bound would not be seen")
        return {"max-depth": "the search stopped at --max-depth",
                "max-states": "the search stopped at --max-states",
                "memory": f"the memory watch stopped the search: {self.stop_detail}",
                "out-of-memory": "the search ran out of memory",
                "interrupted": "the search was interrupted",
                "terminated": "the search was terminated (SIGTERM)",
                "all-violated": "the search stopped once every other property was violated",
                }.get(self.stop_reason or "", self.stop_reason)

    @property
    def states_per_s(self) -> float:
        return self.distinct_states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def collision_probability(self) -> float:
        """TLC's optimistic estimate n * (t - n) / 2^b for b-bit fingerprints; zero when states
        are stored exactly (``storage``)."""
        if self.storage.startswith("exact"):
            return 0.0
        n, t = self.distinct_states, self.transitions + len(self.model.initial_words)
        return n * max(0, t - n) / 2.0 ** (128 if self.storage.startswith("128") else 64)


def _merge(visited: np.ndarray, new: np.ndarray) -> np.ndarray:
    """A sorted array of fingerprints with the (sorted, absent) new ones inserted; the state
    graph and Spark's owners keep their sets so."""
    if not len(new):
        return visited
    pos = np.searchsorted(visited, new)
    return np.insert(visited, pos, new)


def _absent(sorted_fp: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Mask of the fingerprints u not in the sorted array."""
    if not len(sorted_fp):
        return np.ones(len(u), dtype=bool)
    pos = np.searchsorted(sorted_fp, u)
    pos[pos == len(sorted_fp)] = 0
    return sorted_fp[pos] != u


EXACT_WORDS = 3   # states of up to this many words are stored whole; wider ones as 128-bit
COMPACT_AT = 1 << 21   # a level's unsorted new states (with duplicates) before they are sorted


def storage_kind(words: int) -> str:
    """How the visited set identifies a state of ``words`` 64-bit words."""
    if words == 1:
        return "exact (a state is its own fingerprint)"
    if words <= EXACT_WORDS:
        return f"exact (states of {words} words stored whole)"
    return "128-bit fingerprints"


def _keys(S: np.ndarray) -> np.ndarray | None:
    """What the visited set stores beside a state's 64-bit fingerprint to tell states apart:
    nothing when the state is its fingerprint, the words themselves when they are few (exact),
    else a second, independent 64-bit hash (a 128-bit fingerprint)."""
    if S.shape[0] == 1:
        return None
    if S.shape[0] <= EXACT_WORDS:
        return S
    return fingerprint(S, seed=0x243F6A8885A308D3)[None, :]


def _sort_with_tag(fp: np.ndarray, tag: np.ndarray, tag_bits: int):
    """(sorted tags, sorted fp or None), fp ascending with ``tag`` (< 2**tag_bits) breaking
    ties, or None. One np.sort of packed words instead of an argsort, which is several times
    slower: a state that leaves ``tag_bits`` free is shifted above the tag (exact, and the
    sorted fp comes with it); otherwise a hash's top bits go above the tag, which orders the
    states unless two distinct fingerprints share their top bits (the caller checks)."""
    if tag_bits >= 40:
        return None
    mask = np.uint64((1 << tag_bits) - 1)
    b = np.uint64(tag_bits)
    if not len(fp) or int(fp.max()) >> (64 - tag_bits) == 0:
        key = np.left_shift(fp, b)
        key |= tag
        key.sort()
        sf = key >> b
        key &= mask
        return key, sf
    key = fp & ~mask
    key |= tag
    key.sort()
    key &= mask
    return key, None


def _first_of_each(fp: np.ndarray, keys: np.ndarray | None,
                   runs: list[int] | None = None) -> np.ndarray:
    """Positions of the first occurrence of each distinct state among ``fp`` (and ``keys``), in
    the level order: by fingerprint, then (only when two states share one) by their keys.
    ``runs``: fp is the concatenation of runs of these lengths, each sorted and distinct (the
    blocks of a level); a position then sorts by its run's number, which takes fewer bits."""
    n = len(fp)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if runs is not None and len(runs) == 1:
        return np.arange(n)
    if runs is None:
        got = _sort_with_tag(fp, np.arange(n, dtype=np.uint64), max(1, (n - 1).bit_length()))
    else:
        tag = np.repeat(np.arange(len(runs), dtype=np.uint64), runs)
        got = _sort_with_tag(fp, tag, max(1, (len(runs) - 1).bit_length()))
        del tag
    order = sf = None
    if got is not None:
        order, sf = got
        del got
        if runs is not None:
            # the k-th time run r appears in the sorted order is its k-th element (a run is
            # sorted): a stable sort of the run numbers (a radix sort) gives every position
            run_of = order.astype(np.uint16 if len(runs) < (1 << 16) else np.int64)
            del order
            by_run = np.argsort(run_of, kind="stable")
            del run_of
            order = np.empty(n, dtype=np.int64)
            order[by_run] = np.arange(n)
            del by_run
        else:
            order = order.view(np.int64)
        if sf is None:
            sf = fp[order]
            if not (sf[1:] >= sf[:-1]).all():
                order = None
    if order is None:
        order = np.argsort(fp, kind="stable")
        sf = fp[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(sf[1:], sf[:-1], out=first[1:])
    del sf
    if keys is not None and not first.all():
        dup = np.flatnonzero(~first[1:]) + 1
        if (keys[:, order[dup]] != keys[:, order[dup - 1]]).any():
            order = _lexsort_states(fp, keys, np.arange(n))
            first = _distinct_sorted(fp, keys, order)
    return order[first]


def _lexsort_states(fp, keys, tag) -> np.ndarray:
    # two distinct states share a 64-bit fingerprint: order by fingerprint, keys, then tag
    return np.lexsort((tag,) + tuple(keys[::-1]) + (fp,))


def _distinct_sorted(fp, keys, order) -> np.ndarray:
    cols = [fp[order]] + ([] if keys is None else [k[order] for k in keys])
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        first[1:] = np.any([c[1:] != c[:-1] for c in cols], axis=0)
    return first


class _Visited:
    """The sorted fingerprints (and keys, see ``_keys``) of every state seen. One buffer for the
    whole search, reserved once and merged into in place from the back, level by level: no
    array of the visited set's size is allocated per level (that cost a quarter of the time in
    system calls and page faults at two_phase N=10)."""

    def __init__(self, nkeys: int):
        self.nkeys = nkeys
        self.n = 0
        self.fp = _reserve((1 << 20,))
        self.keys = _reserve((nkeys, 1 << 20)) if nkeys else None

    @property
    def sorted_fp(self) -> np.ndarray:
        return self.fp[:self.n]

    def absent(self, u: np.ndarray, ukeys: np.ndarray | None) -> np.ndarray:
        """Mask of the states (u sorted, distinct) not in the set."""
        n = self.n
        if not n or not len(u):
            return np.ones(len(u), dtype=bool)
        V = self.fp[:n]
        pos = np.searchsorted(V, u)
        pos[pos == n] = n - 1
        seen = V[pos] == u
        if self.keys is None or not seen.any():
            return ~seen
        same = seen & (self.keys[:, pos] == ukeys).all(axis=0)
        for i in np.flatnonzero(seen & ~same):
            # a fingerprint shared by distinct states: look through all the states that have it
            j = int(pos[i])
            while j < n and V[j] == u[i]:
                if (self.keys[:, j] == ukeys[:, i]).all():
                    same[i] = True
                    break
                j += 1
        return ~same

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
        fp, keys = self.fp, self.keys
        pos = np.searchsorted(fp[:n], new)
        # each old state moves up by the number of new ones that go before it; from the back,
        # a chunk at a time, so that nothing is overwritten before it has moved
        lo = int(pos[0])
        step = 1 << 20
        for b in range(n, lo, -step):
            a = max(lo, b - step)
            i0, i1 = np.searchsorted(pos, [a, b])
            if i0 == i1:                               # no new state among these: one slice
                fp[a + i0:b + i0] = fp[a:b].copy()
                if keys is not None:
                    keys[:, a + i0:b + i0] = keys[:, a:b].copy()
                continue
            dest = np.bincount(pos[i0:i1] - a, minlength=b - a).cumsum()
            dest += np.arange(a + int(i0), b + int(i0))
            fp[dest] = fp[a:b].copy()
            if keys is not None:
                keys[:, dest] = keys[:, a:b].copy()
        at = pos + np.arange(k)
        fp[at] = new
        if keys is not None:
            keys[:, at] = new_keys
        self.n = n + k


def _reserve(shape) -> np.ndarray:
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


class CheckpointError(Exception):
    """A checkpoint directory that holds another search's state, or one that cannot be read."""


def search(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
           max_states: int | None = None, deadlock: bool | None = None,
           progress=None, block: int = 1 << 15, initial: list[tuple] | None = None,
           on_level=None, checkpoint: str | None = None,
           checkpoint_every: float = 60.0, symmetry: bool = False) -> SearchResult:
    """Explore ``model`` breadth-first. ``progress(depth, distinct, frontier)`` is called per
    block when given (distinct: the states of the levels finished). ``initial`` replaces the
    spec's initial states (packed words), e.g. with a slice of them. ``on_level(depth,
    fingerprints)`` receives each level's sorted fingerprints (the distributed search merges
    them). ``checkpoint``: a directory where the search's state is written at the end of a level
    (at most every ``checkpoint_every`` seconds) and from which a search of the same spec,
    variant, parameters and properties resumes (checker/checkpoint.py). Ctrl-C stops the search
    and returns what was found. ``symmetry``: store one state per orbit of the spec's declared
    symmetry, checked first (checker/symmetry.py); counterexamples stay concrete."""
    spec = model.spec
    all_props = list(spec.properties)
    props = all_props if properties is None else list(properties)
    comp = Compiled(model, props)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                       deadlock_checked=check_deadlock, stored_as=storage_kind(model.layout.words))
    t0 = time.perf_counter()
    from checker import symmetry as symmetry_
    sym = symmetry_.prepare(model, comp, res, symmetry, checkpoint)
    from checker.memory import watch
    memory = watch()
    fired = res.fired = [0] * len(model.instances)
    words = model.layout.words
    visited = _Visited(0 if words == 1 else words if words <= EXACT_WORDS else 1)
    act_dtype = np.int16 if len(model.instances) < 32000 else np.int32
    pending = set(props) | ({DEADLOCK} if check_deadlock else set())

    saved = None
    if checkpoint is not None:
        from checker import checkpoint as ckpt
        identity = ckpt.identity(model, props, check_deadlock, comp, initial)
        saved = ckpt.load(checkpoint, identity)
    if saved is not None:
        visited.add(saved.fp, saved.keys)
        frontier, parents, actions = saved.frontier, saved.parents, saved.actions
        initial_words = saved.initial_words
        res.transitions, res.cut_by_bounds, res.cut_only_states = (
            saved.transitions, saved.cut_by_bounds, saved.cut_only_states)
        fired[:] = saved.fired
        res.found = saved.found
        pending -= set(res.found)
        depth = res.depth = saved.depth
        t0 -= saved.elapsed_s
        res.distinct_states = visited.n
        res.resumed_from = depth
    else:
        init = np.array(initial if initial is not None else model.initial_words,
                        dtype=np.uint64).reshape(-1, words).T.copy()
        if sym is not None:
            init = sym.canonical(init)
        fp0 = fingerprint(init)
        first = _first_of_each(fp0, _keys(init))
        frontier = init[:, first]
        visited.add(fp0[first], _keys(frontier))
        initial_words = [tuple(int(x) for x in frontier[:, i]) for i in range(frontier.shape[1])]
        parents: list[np.ndarray] = [np.full(frontier.shape[1], -1, dtype=np.int32)]
        actions: list[np.ndarray] = [np.zeros(frontier.shape[1], dtype=np.int32)]
        depth = 0
    last_saved = time.perf_counter()

    def trace_to(level: int, index: int) -> tuple[tuple, list[int]]:
        steps = []
        for d in range(level, 0, -1):
            steps.append(int(actions[d][index]))
            index = int(parents[d][index])
        steps.reverse()
        return initial_words[index], steps

    def check_invariants(S: np.ndarray, level: int):
        for name in comp.invariants:
            if name in res.found:
                continue
            i = comp.first_violation(name, S, block)
            if i is not None:
                init_w, steps = trace_to(level, i)
                res.found[name] = Found(name, "invariant", init_w, steps)
                pending.discard(name)

    if saved is None:
        res.distinct_states = frontier.shape[1]
        if sym is not None:
            res.unreduced_states = int(sym.orbit_sizes(frontier).sum())
        if on_level is not None:
            on_level(0, visited.sorted_fp)
        check_invariants(frontier, 0)
    try:
        while frontier.shape[1]:
            if not pending and props:
                res.stop_reason = "all-violated"
                break
            if max_depth is not None and depth >= max_depth:
                res.stop_reason = "max-depth"
                break
            n = frontier.shape[1]
            # this level's new states, block by block: each block's distinct states not seen
            # before, sorted; duplicates between blocks go when the level is sorted once
            chunks_fp, chunks_S, chunks_par, chunks_act = [], [], [], []
            level_upper = 0
            compacted = unsorted = 0     # states in the sorted first run; in the runs after it
            tviol: dict[str, tuple[int, int]] = {}   # property -> (parent, instance), this level
            deadlocked = None
            for start in range(0, n, block):
                S = frontier[:, start:start + block]
                m = S.shape[1]
                enabled = np.zeros(m, dtype=bool) if check_deadlock and DEADLOCK in pending else None
                inside = np.zeros(m, dtype=bool) if enabled is not None else None
                cS, cpar, cact = [], [], []
                for k, idx, sub, T, out, ok in comp.successors(S):
                    res.transitions += idx.size
                    fired[k] += idx.size
                    if enabled is not None:
                        enabled[idx] = True
                    for name, i in comp.step_violations(k, sub, T, out, ok, res.found):
                        cand = (start + int(idx[i]), k)
                        if name not in tviol or cand < tviol[name]:
                            tviol[name] = cand
                    if ok is not None:
                        res.cut_by_bounds += int(idx.size - ok.sum())
                        idx, T = idx[ok], T[:, ok]
                        if not idx.size:
                            continue
                    if inside is not None:
                        inside[idx] = True
                    cS.append(T)
                    cpar.append(idx + start)
                    cact.append(np.full(idx.size, k, dtype=act_dtype))
                if enabled is not None:
                    res.cut_only_states += int((enabled & ~inside).sum())
                if enabled is not None and deadlocked is None:
                    stuck = ~enabled
                    if comp.terminal is not None:
                        stuck &= ~np.broadcast_to(comp.terminal(S), (m,))
                    if stuck.any():
                        deadlocked = start + int(np.flatnonzero(stuck)[0])
                if cS:
                    T = np.concatenate(cS, axis=1) if len(cS) > 1 else cS[0]
                    if sym is not None:
                        T = sym.canonical(T)    # one representative per orbit
                    fp = fingerprint(T)
                    keys = _keys(T)
                    # the first (lowest instance, then earliest state) that reaches a state is
                    # its parent
                    first = _first_of_each(fp, keys)
                    u = fp[first]
                    fresh = visited.absent(u, None if keys is None else keys[:, first])
                    first = first[fresh]
                    chunks_fp.append(u[fresh])
                    chunks_S.append(T[:, first])
                    chunks_par.append(np.concatenate(cpar)[first].astype(np.int32))
                    chunks_act.append(np.concatenate(cact)[first])
                    level_upper += len(first)
                    unsorted += len(first)
                    if unsorted > max(COMPACT_AT, 2 * compacted):
                        # a state reached from many blocks is kept once per block until the
                        # level is sorted: sort what there is now, so that the level never
                        # holds many copies of its states (the doubling rule keeps the sorting
                        # to a few passes over the level)
                        every = np.concatenate(chunks_S, axis=1)
                        sel = _level_order(chunks_fp, every)
                        chunks_fp = [np.concatenate(chunks_fp)[sel]]
                        chunks_S = [every[:, sel]]
                        del every
                        chunks_par = [np.concatenate(chunks_par)[sel]]
                        chunks_act = [np.concatenate(chunks_act)[sel]]
                        compacted, unsorted = len(sel), 0
                        level_upper = compacted
                if progress is not None:
                    progress(depth, res.distinct_states, n - start - m)
                if (max_states is not None and res.distinct_states + level_upper >= max_states
                        and res.distinct_states + len(_level_order(
                            chunks_fp, np.concatenate(chunks_S, axis=1))) >= max_states):
                    res.stop_reason = "max-states"
                    break
                if memory is not None and memory.exceeded():
                    res.stop_reason, res.stop_detail = "memory", memory.message()
                    break
            for name, (parent, k) in sorted(tviol.items()):
                init_w, steps = trace_to(depth, parent)
                res.found[name] = Found(name, "transition", init_w, steps + [k])
                pending.discard(name)
            if deadlocked is not None:
                init_w, steps = trace_to(depth, deadlocked)
                res.found[DEADLOCK] = Found(DEADLOCK, "deadlock", init_w, steps)
                pending.discard(DEADLOCK)
            if not level_upper:
                frontier = frontier[:, :0]
                if res.stop_reason:
                    break
                continue
            # the level sorted once: earliest block first among equal states, then by state;
            # the level expanded is no longer needed (parents are positions in it)
            del S
            frontier = None
            every = np.concatenate(chunks_S, axis=1) if len(chunks_S) > 1 else chunks_S[0]
            del chunks_S
            sel = _level_order(chunks_fp, every)
            level_fp = np.concatenate(chunks_fp)[sel]
            frontier = every[:, sel]
            del every
            parents.append(np.concatenate(chunks_par)[sel])
            actions.append(np.concatenate(chunks_act)[sel])
            del chunks_par, chunks_act, chunks_fp
            visited.add(level_fp, _keys(frontier))
            depth += 1
            if on_level is not None:
                on_level(depth, level_fp)
            del level_fp
            res.depth = depth
            res.distinct_states = visited.n
            if sym is not None:
                res.unreduced_states += int(sym.orbit_sizes(frontier).sum())
            check_invariants(frontier, depth)
            if res.stop_reason:
                break
            if checkpoint is not None and time.perf_counter() - last_saved >= checkpoint_every:
                ckpt.save(checkpoint, identity, visited, frontier, parents, actions, initial_words,
                          res, time.perf_counter() - t0)
                last_saved = time.perf_counter()
    except KeyboardInterrupt:
        res.stop_reason = "interrupted"
    except Terminated:
        res.stop_reason = "terminated"
    except MemoryError:
        # what was found stands; the answer is bounded, not a crash
        res.stop_reason = "out-of-memory"
    res.exhaustive = res.stop_reason is None
    if res.stop_reason == "all-violated":
        res.exhaustive = False
    if sym is not None:
        symmetry_.finish(model, comp, sym, res)
    res.elapsed_s = time.perf_counter() - t0
    return res


def _level_order(chunks_fp: list[np.ndarray], every: np.ndarray) -> np.ndarray:
    """Positions in ``every`` (a level's blocks' new states, concatenated) of the level's
    distinct states, in level order."""
    if not chunks_fp:
        return np.empty(0, dtype=np.int64)
    fp = np.concatenate(chunks_fp) if len(chunks_fp) > 1 else chunks_fp[0]
    return _first_of_each(fp, _keys(every), [len(c) for c in chunks_fp])
