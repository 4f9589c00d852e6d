"""Breadth-first explicit-state search with shortest counterexamples.

The search runs level by level on blocks of packed states (checker/compile.py). It keeps:
- ``visited``: a sorted array of 64-bit fingerprints of every state seen (8 bytes a state);
- per level, each state's parent (its position in the previous level) and the action instance
  that reached it (4 + 2 or 4 bytes a state), so a trace is rebuilt by replaying actions from an
  initial state, as Stateright does; finished states themselves are not kept;
- the current and the next frontier as packed words.

Order, and so every count and trace, is deterministic: a level is ordered by fingerprint, and a
state's parent is the first (earliest block, then lowest action instance, then earliest state)
that produced it. Tie-break between shortest counterexamples: for an invariant, the violating
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

    @property
    def interrupted(self) -> bool:
        return self.stop_reason in ("interrupted", "terminated")

    def never_fired(self) -> list[str]:
        """The actions none of whose instances took a step in the search (every action when it
        has no instance for these parameters): a property that relies on them may hold
        vacuously."""
        counts: dict[str, int] = {a.name: 0 for a in self.model.spec.actions}
        for inst, n in zip(self.model.instances, self.fired):
            counts[inst.action.name] += n
        return [a for a, n in counts.items() if n == 0]

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
        """TLC's optimistic estimate n * (t - n) / 2^64; zero when a state is its own
        fingerprint (it fits in 64 bits)."""
        if self.model.layout.words == 1:
            return 0.0
        n, t = self.distinct_states, self.transitions + len(self.model.initial_words)
        return n * max(0, t - n) / 2.0 ** 64


def _merge(visited: np.ndarray, new: np.ndarray) -> np.ndarray:
    if not len(new):
        return visited
    pos = np.searchsorted(visited, new)
    return np.insert(visited, pos, new)


def _absent(sorted_fp: np.ndarray, u: np.ndarray) -> np.ndarray:
    if not len(sorted_fp):
        return np.ones(len(u), dtype=bool)
    pos = np.searchsorted(sorted_fp, u)
    pos[pos == len(sorted_fp)] = 0
    return sorted_fp[pos] != u


def search(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
           max_states: int | None = None, deadlock: bool | None = None,
           progress=None, block: int = 1 << 15, initial: list[tuple] | None = None,
           on_level=None) -> SearchResult:
    """Explore ``model`` breadth-first. ``progress(depth, distinct, frontier)`` is called per
    block when given. ``initial`` replaces the spec's initial states (packed words), e.g. with a
    slice of them. ``on_level(depth, fingerprints)`` receives each level's sorted fingerprints
    (the distributed search merges them). Ctrl-C stops the search and returns what was found."""
    spec = model.spec
    all_props = list(spec.properties)
    props = all_props if properties is None else list(properties)
    comp = Compiled(model, props)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                       deadlock_checked=check_deadlock)
    t0 = time.perf_counter()
    from checker.memory import watch
    memory = watch()
    fired = res.fired = [0] * len(model.instances)

    init = np.array(initial if initial is not None else model.initial_words,
                    dtype=np.uint64).reshape(-1, model.layout.words).T.copy()
    fp0 = fingerprint(init)
    visited, order = np.unique(fp0, return_index=True)
    frontier = init[:, order]
    initial_words = [tuple(int(x) for x in frontier[:, i]) for i in range(frontier.shape[1])]
    parents: list[np.ndarray] = [np.full(frontier.shape[1], -1, dtype=np.int32)]
    actions: list[np.ndarray] = [np.zeros(frontier.shape[1], dtype=np.int32)]
    act_dtype = np.int16 if len(model.instances) < 32000 else np.int32

    def trace_to(level: int, index: int) -> tuple[tuple, list[int]]:
        steps = []
        for d in range(level, 0, -1):
            steps.append(int(actions[d][index]))
            index = int(parents[d][index])
        steps.reverse()
        return initial_words[index], steps

    pending = set(props) | ({DEADLOCK} if check_deadlock else set())

    def check_invariants(S: np.ndarray, level: int):
        for name in comp.invariants:
            if name in res.found:
                continue
            i = comp.first_violation(name, S, block)
            if i is not None:
                init_w, steps = trace_to(level, i)
                res.found[name] = Found(name, "invariant", init_w, steps)
                pending.discard(name)

    res.distinct_states = frontier.shape[1]
    if on_level is not None:
        on_level(0, visited)
    check_invariants(frontier, 0)
    depth = 0
    try:
        while frontier.shape[1]:
            if not pending and props:
                res.stop_reason = "all-violated"
                break
            if max_depth is not None and depth >= max_depth:
                res.stop_reason = "max-depth"
                break
            n = frontier.shape[1]
            chunks_fp, chunks_S, chunks_par, chunks_act = [], [], [], []
            level_fp = np.empty(0, dtype=np.uint64)
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
                    T = np.concatenate(cS, axis=1)
                    par = np.concatenate(cpar)
                    act = np.concatenate(cact)
                    fp = fingerprint(T)
                    u, first = np.unique(fp, return_index=True)
                    fresh = _absent(visited, u) & _absent(level_fp, u)
                    first = first[fresh]
                    u = u[fresh]
                    # the level so far stays deduplicated, so a level holds no more than its
                    # own distinct states however many parents reach each one
                    level_fp = _merge(level_fp, u)
                    chunks_fp.append(u)
                    chunks_S.append(T[:, first])
                    chunks_par.append(par[first])
                    chunks_act.append(act[first])
                if progress is not None:
                    progress(depth, res.distinct_states + len(level_fp), n - start - m)
                if max_states is not None and res.distinct_states + len(level_fp) >= max_states:
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
            if not len(level_fp):
                frontier = frontier[:, :0]
                if res.stop_reason:
                    break
                continue
            order = np.argsort(np.concatenate(chunks_fp), kind="stable")
            frontier = np.concatenate(chunks_S, axis=1)[:, order]
            parents.append(np.concatenate(chunks_par)[order].astype(np.int32))
            actions.append(np.concatenate(chunks_act)[order])
            del chunks_S, chunks_par, chunks_act, chunks_fp
            visited = _merge(visited, level_fp)
            depth += 1
            if on_level is not None:
                on_level(depth, level_fp)
            res.depth = depth
            res.distinct_states = len(visited)
            check_invariants(frontier, depth)
            if res.stop_reason:
                break
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
    res.elapsed_s = time.perf_counter() - t0
    return res
