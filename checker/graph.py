"""The reachable state graph on packed arrays: progress properties under weak fairness,
deadlocks, and export (through networkx, built on first use).

The graph is built breadth-first on the explicit-state core (checker/explore.py), with the same
compiled code, level order and parent rule as checker/bfs.py, so a state's shortest trace here
is the one the BFS prints. Nodes are
fingerprints (``words``: the packed state, ``index``: position in level-then-fingerprint order,
``depth``, ``enabled``: a bitmask of the action instances that can take a step there, ``initial``,
``deadlock``); an edge u -> v carries ``actions``, the instances (indices into
``model.instances``) whose step goes from u to v.

Progress (docs/progress.md). "P leads to Q" is violated by a behaviour that reaches a state
where P holds and Q does not, and from there on never meets Q; "always eventually Q" is "TRUE
leads to Q". Fairness is weak and per action instance (an action with its arguments): an
instance of an action the property names that stays enabled must eventually be taken; every
other instance may stop for ever. "Enabled" means enabled with a change of state, as TLC's
``WF_vars(A)`` reads ``<<A>>_vars``; a step that leaves a search bound counts as enabled (it is
enabled in the unbounded protocol) but leads nowhere in the graph. As in TLA+, a behaviour may
stop (stutter) in any state where no fair instance is enabled.

Check: restrict the graph to the states where Q does not hold; a strongly connected component C
of it (a single state counts, by stuttering) holds a fair cycle iff every fair instance is
either disabled at some state of C or labels an edge inside C (weak fairness makes this
condition enough: a cycle through every state and edge of C is then fair, and if it fails for
C it fails for every part of C). A violation is a lasso: the shortest path from an initial
state through a state where P holds and Q does not, staying in not-Q after it, into such a
component, then a loop inside the component that meets every fair instance's obligation.
"""
from __future__ import annotations

import hashlib
import time
import weakref
from collections import deque
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from kcheck import environment, explore
from kcheck import symmetry as symmetry_
from kcheck.compile import Compiled, fingerprint
from kcheck.fairness import (compile_condition, fair_mask, instances_of as _instances,
                             progress_conditions)
from kcheck.layout import initial_words, layout_of
from kcheck.trace import Executor, Trace, build
from kcheck.verdict import Counterexample, RunResult, Verdict
from kcheck.spec.lang import Model, Progress, SpecError

DEADLOCK = "deadlock"


class GraphTooLarge(SpecError):
    """The reachable graph exceeds --max-nodes (exit 2, one line)."""


@dataclass
class StateGraph:
    """The graph as arrays (what the checks walk) and, built on first use, as a networkx
    DiGraph (``graph``: what export and users walk)."""
    model: Model
    compiled: Compiled
    fps: np.ndarray           # fingerprint per state index
    words: np.ndarray         # packed states, one column per state index
    depth: np.ndarray         # BFS depth
    parent: np.ndarray        # BFS-tree parent index (-1 for an initial state)
    via: np.ndarray           # instance that reached the state in the BFS tree (-1: initial)
    enabled_bits: np.ndarray  # per state: packed bits (little-endian) of the instances that
                              # can take a step there
    deadlocked: np.ndarray    # per state: no instance enabled and not terminal (all False when
                              # the spec declares no terminal states)
    src: np.ndarray           # edges in index form, sorted by (src, dst, instance)
    dst: np.ndarray
    act: np.ndarray
    transitions: int = 0
    cut_by_bounds: int = 0
    elapsed_s: float = 0.0
    initial_count: int = 0    # states 0..initial_count-1 are the initial states
    cut_bits: np.ndarray | None = None   # per state: packed bits of the instances whose step
                                         # there leaves a search bound (cut from the graph)
    cut_only: np.ndarray | None = None   # per state: some step is enabled, and every one is cut
    # symmetry reduction (checker/symmetry.py): the graph is the quotient over canonical states
    # (``symmetry``, the group; None: every state), ``symmetry_used`` says what it was as the
    # statistics say it ("off", "none", the declarations, or None when the spec declares none),
    # ``moved`` per edge whether its step changes the state (a quotient's self-loop may be a
    # step to another state of the orbit), ``unreduced_states`` the orbits' sizes summed
    symmetry: symmetry_.Symmetry | None = None
    symmetry_used: str | None = None
    moved: np.ndarray | None = None
    unreduced_states: int = 0
    _offsets: np.ndarray | None = field(default=None, repr=False)
    _by_fp: np.ndarray | None = field(default=None, repr=False)
    _graph: nx.DiGraph | None = field(default=None, repr=False)
    _hidden: np.ndarray | None = field(default=None, repr=False)

    @property
    def states(self) -> int:
        return len(self.fps)

    @property
    def cut_within_budget(self) -> int:
        """Steps (a state and an action instance) cut by a search bound other than the
        disturbance budget: each hides behaviour the verdict would otherwise cover."""
        if self.cut_bits is None or not self.cut_bits.size:
            return 0
        return int(_POPCOUNT[_hidden_cuts(self)].sum())

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if len(self.depth) else 0

    def enabled(self, i: int) -> int:
        """Bitmask of the instances that can take a step in state i."""
        return int.from_bytes(self.enabled_bits[i].tobytes(), "little")

    @property
    def graph(self) -> nx.DiGraph:
        """Nodes: fingerprints with ``index``, ``words``, ``depth``, ``enabled``, ``initial``,
        ``deadlock``; an edge's ``actions``: the instances whose step takes it."""
        if self._graph is None:
            self._graph = self._to_networkx()
        return self._graph

    def _to_networkx(self) -> nx.DiGraph:
        m = self.model
        G = nx.DiGraph(spec=m.spec.name, variant=m.variant, params=m.params.as_dict())
        fpl = [int(x) for x in self.fps.tolist()]
        G.add_nodes_from((fpl[i], {"index": i, "words": self.state_words(i),
                                   "depth": int(self.depth[i]), "enabled": self.enabled(i),
                                   "initial": i < self.initial_count,
                                   "deadlock": bool(self.deadlocked[i])})
                         for i in range(len(fpl)))
        src, dst = self.src, self.dst
        if len(src):
            brk = np.flatnonzero((src[1:] != src[:-1]) | (dst[1:] != dst[:-1])) + 1
            starts, ends = np.r_[0, brk], np.r_[brk, len(src)]
            al = self.act.tolist()
            G.add_edges_from((fpl[s], fpl[d], {"actions": tuple(al[a:b])})
                             for s, d, a, b in zip(src[starts].tolist(), dst[starts].tolist(),
                                                   starts.tolist(), ends.tolist()))
        return G

    @property
    def edges(self) -> int:
        """Distinct (state, successor) pairs."""
        if not len(self.src):
            return 0
        return 1 + int(((self.src[1:] != self.src[:-1]) | (self.dst[1:] != self.dst[:-1])).sum())

    def state_words(self, i: int) -> tuple:
        return tuple(int(x) for x in self.words[:, i])

    def out_edges(self, i: int):
        """(instance, target index) pairs leaving state i, in edge order."""
        if self._offsets is None:
            self._offsets = np.searchsorted(self.src, np.arange(self.states + 1))
        a, b = int(self._offsets[i]), int(self._offsets[i + 1])
        return list(zip(self.act[a:b].tolist(), self.dst[a:b].tolist()))

    def trace_to(self, i: int) -> tuple[tuple, list[int]]:
        """The BFS-tree (shortest) path to state i: (initial words, instance indices)."""
        steps = []
        while self.parent[i] >= 0:
            steps.append(int(self.via[i]))
            i = int(self.parent[i])
        steps.reverse()
        return self.state_words(i), steps

    def indices(self, S: np.ndarray) -> np.ndarray:
        """The index of each state (column) of S in the graph, -1 for one that is not in it."""
        if self._by_fp is None:
            self._by_fp = np.argsort(self.fps, kind="stable")
        f = fingerprint(S)
        if not len(self.fps):
            return np.full(len(f), -1)
        sorted_fp = self.fps[self._by_fp]
        pos = np.searchsorted(sorted_fp, f)
        pos[pos == len(sorted_fp)] = 0
        return np.where(sorted_fp[pos] == f, self._by_fp[pos], -1)

    def index_of(self, S: np.ndarray) -> int | None:
        """The index of the one state (column) of S in the graph, or None."""
        i = int(self.indices(S)[0])
        return None if i < 0 else i

    def concrete(self, cx: Counterexample) -> Counterexample:
        """A path of the graph (from ``trace_to``, the quotient's instances under symmetry) as a
        concrete one of the same length that replays through the unreduced spec
        (symmetry.concretise); the path itself without symmetry."""
        if self.symmetry is None:
            return cx
        return symmetry_.concretise(self.model, self.compiled, self.symmetry, cx)

    def deadlock(self) -> tuple[tuple, list[int]] | None:
        """The shortest trace to a deadlock (the first in level-then-fingerprint order)."""
        bad = np.flatnonzero(self.deadlocked)
        return self.trace_to(int(bad[0])) if bad.size else None


def build_graph(model: Model, max_nodes: int | None = None, deadlock: bool | None = None,
                block: int = explore.BLOCK, compiled: Compiled | None = None,
                progress=None, symmetry: bool = False) -> StateGraph:
    """Explore ``model`` breadth-first and keep every state and transition. Deadlocks are
    marked when the spec declares terminal states, or when ``deadlock`` says so.
    ``progress(depth, distinct, left)`` is called per block when given, as the search does.
    The level loop, the order and the parent rule are the core's (checker/explore.py); a state
    is known by its 64-bit fingerprint (the graph's node). ``symmetry``: keep one state per
    orbit of the spec's declared symmetry, checked first (checker/symmetry.py): the quotient
    graph, whose edges are the steps from each representative, each to its target's
    representative, labelled with the instance taken from the representative."""
    t0 = time.perf_counter()
    from kcheck.memory import watch
    memory = watch()
    comp = compiled or Compiled(model, [], layout=layout_of(model))
    K = len(model.instances)
    index_t, act_t = _edge_types(max_nodes if max_nodes is not None else 2 ** 31, K)
    sym, used = None, None
    if model.spec.symmetries:
        used = "off"
        if symmetry:
            sym = symmetry_.for_model(model)
            used = "none" if sym is None else sym.description
            if sym is not None:
                symmetry_.verify(model, comp, sym)
    pre: dict = {}

    def canonical(T):
        pre["T"] = T      # the block before canonicalisation: which steps moved (on_block)
        return sym.canonical(T)

    ex = explore.Explorer(model, comp, [], False, keyed=False, block=block,
                          canonical=None if sym is None else canonical)
    level_fp = [ex.start(initial_words(model))]
    level_S = [ex.frontier]
    en_rows: list[np.ndarray] = []
    cut_rows: list[np.ndarray] = []
    only_cut: list[np.ndarray] = []
    any_guard: list[np.ndarray] = []
    terminal: list[np.ndarray] = []
    e_src, e_dfp, e_act, e_moved = [], [], [], []
    _too_large(model, ex.visited.n, max_nodes)
    # per block: which instances can take a step at each state (a step that changes the state,
    # or one that leaves a search bound), which leave a bound, and whether any guard holds
    cur: dict = {}

    def before_block(start, n):
        if progress is not None:
            progress(ex.depth, ex.visited.n, n - start)
        m = min(block, n - start)
        cur.update(m=m, base=ex.visited.n - n + start, en=np.zeros((m, K), dtype=bool),
                   cutm=np.zeros((m, K), dtype=bool), anyg=np.zeros(m, dtype=bool),
                   inside=np.zeros(m, dtype=bool))

    def on_batch(k, idx, sub, T, ok):
        cur["anyg"][idx] = True
        moved = (T != sub).any(axis=0)
        if ok is not None:
            cur["en"][idx[moved | ~ok], k] = True
            cur["cutm"][idx[~ok], k] = True
        else:
            cur["en"][idx[moved], k] = True

    def on_block(start, T, parent, action, fp):
        cur["inside"][parent] = True
        if sym is not None:
            # a step to another state of the parent's orbit is a self-loop of the quotient
            e_moved.append((pre["T"] != ex.frontier[:, start + parent]).any(axis=0))
        e_src.append((parent + cur["base"]).astype(index_t))
        e_dfp.append(fp.copy())
        e_act.append(action.astype(act_t))

    def after_block(start, m, n, level):
        en_rows.append(np.packbits(cur["en"], axis=1, bitorder="little"))
        cut_rows.append(np.packbits(cur["cutm"], axis=1, bitorder="little"))
        any_guard.append(cur["anyg"])
        only_cut.append(cur["anyg"] & ~cur["inside"])
        if comp.terminal is not None:
            S = ex.frontier[:, start:start + m]
            terminal.append(np.broadcast_to(comp.terminal(S), (m,)).copy())
        seen = ex.visited.n
        if max_nodes is not None and seen + level.upper > max_nodes:
            _too_large(model, seen + level.distinct(), max_nodes)
        if memory is not None and memory.exceeded():
            # like --max-nodes, but before the kernel kills the process with nothing said
            raise GraphTooLarge(f"the state graph of {model.spec.name}/{model.variant} was "
                                f"stopped at {seen + level.distinct():,} states by the memory "
                                f"watch: {memory.message()}; lower the parameters")
        return None

    def on_level(depth, fp):
        level_fp.append(fp)
        level_S.append(ex.frontier)

    ex.run(before_block=before_block, on_batch=on_batch, on_block=on_block,
           after_block=after_block, on_level=on_level)

    # each list let go once joined: the graph would otherwise hold its states twice
    ex.visited = None
    level_sizes = [len(f) for f in level_fp]
    fps = np.concatenate(level_fp)
    level_fp.clear()
    words = np.concatenate(level_S, axis=1)
    level_S.clear()
    depth = np.repeat(np.arange(len(level_sizes), dtype=np.int32), level_sizes)
    bits = np.concatenate(en_rows, axis=0) if en_rows else np.zeros((0, 1), dtype=np.uint8)
    en_rows.clear()
    cut = np.concatenate(cut_rows, axis=0) if cut_rows else np.zeros_like(bits)
    cut_rows.clear()
    if model.spec.check_deadlock if deadlock is None else deadlock:
        stuck = ~np.concatenate(any_guard)
        if terminal:
            stuck &= ~np.concatenate(terminal)
    else:
        stuck = np.zeros(len(fps), dtype=bool)
    # the edges, each list joined and let go before the next (a graph of 8 million transitions
    # holds them twice otherwise), the targets' fingerprints resolved to indices a chunk at a time
    by_fp = np.argsort(fps, kind="stable")
    sorted_fp = fps[by_fp]
    edges = [_joined(e_src, index_t), _joined(e_dfp, index_t,
                                              lambda f: by_fp[np.searchsorted(sorted_fp, f)]),
             _joined(e_act, act_t)]
    del by_fp, sorted_fp
    src, dst, act, order = _sorted_edges(edges, len(fps), K, with_order=sym is not None)
    moved = np.concatenate(e_moved)[order] if sym is not None and e_moved else None
    if sym is not None and moved is None:
        moved = np.zeros(0, dtype=bool)
    # the BFS tree: a state's parent as an index into every level, -1 for an initial state
    starts = np.cumsum([0] + level_sizes)
    parents = [ex.parents[0].astype(np.int64)] + [p.astype(np.int64) + starts[d - 1]
                                                  for d, p in enumerate(ex.parents) if d]
    vias = [np.full(level_sizes[0], -1, dtype=np.int32)] + [a.astype(np.int32)
                                                           for a in ex.actions[1:]]
    unreduced = int(sym.orbit_sizes(words).sum()) if sym is not None else len(fps)
    return StateGraph(model, comp, fps, words, depth, np.concatenate(parents),
                      np.concatenate(vias), bits, stuck, src, dst, act, ex.transitions, ex.cut,
                      time.perf_counter() - t0, level_sizes[0], cut,
                      np.concatenate(only_cut) if only_cut else np.zeros(len(fps), dtype=bool),
                      sym, used, moved, unreduced)


_CHUNK = 1 << 20
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _joined(chunks: list, dtype, convert=None) -> np.ndarray:
    """The chunks as one array (each passed through ``convert`` first when given), the list
    emptied as it is copied: each chunk is let go once copied, so the copy never holds the
    whole list twice."""
    out = np.empty(sum(len(c) for c in chunks), dtype=dtype)
    chunks.reverse()
    at = 0
    while chunks:
        c = chunks.pop()
        out[at:at + len(c)] = c if convert is None else convert(c)
        at += len(c)
    return out


def _edge_types(n: int, K: int):
    """The dtypes of a graph's state indices and action instances: int32 and int16 where they
    fit (a graph of millions of transitions holds three per transition)."""
    return (np.int32 if n < 2 ** 31 else np.int64), (np.int16 if K < 2 ** 15 else np.int32)


def _sorted_edges(edges: list, n: int, K: int, with_order: bool = False):
    """The edges ``[src, dst, act]`` (the list is emptied: its arrays are let go as they are
    used) sorted by (source, target, instance) -> (src, dst, act, order or None), in the dtypes
    of ``_edge_types``. Sorted as one 64-bit key per edge, in place and with no index array,
    where source, target and instance fit in one; by lexsort otherwise, or when the caller needs
    the permutation (``with_order``) to reorder an array of its own."""
    index_t, act_t = _edge_types(n, K)
    sbits, abits = max(1, (n - 1).bit_length()), max(1, (K - 1).bit_length())
    if with_order or 2 * sbits + abits > 64:
        src, dst, act = edges
        edges.clear()
        order = np.lexsort((act, dst, src))
        return (src[order].astype(index_t), dst[order].astype(index_t),
                act[order].astype(act_t), order)
    # built and taken apart a chunk at a time: a whole-array temporary is as large as the key
    m = len(edges[0])
    key = np.empty(m, dtype=np.uint64)
    for a in range(0, m, _CHUNK):
        b = a + _CHUNK
        k = key[a:b]
        k[:] = edges[0][a:b]
        k <<= np.uint64(sbits)
        k |= edges[1][a:b].astype(np.uint64)
        k <<= np.uint64(abits)
        k |= edges[2][a:b].astype(np.uint64)
    edges.clear()
    key.sort()
    src, dst, act = (np.empty(m, dtype=index_t), np.empty(m, dtype=index_t),
                     np.empty(m, dtype=act_t))
    for a in range(0, m, _CHUNK):
        b = a + _CHUNK
        k = key[a:b]
        act[a:b] = k & np.uint64((1 << abits) - 1)
        k >>= np.uint64(abits)
        dst[a:b] = k & np.uint64((1 << sbits) - 1)
        k >>= np.uint64(sbits)
        src[a:b] = k
    return src, dst, act, None


def _too_large(model: Model, n: int, max_nodes: int | None):
    if max_nodes is not None and n > max_nodes:
        raise GraphTooLarge(f"the reachable graph of {model.spec.name}/{model.variant} has more than "
                            f"{max_nodes:,} states: raise --max-nodes or lower the parameters")


# ---------------------------------------------------------------------------------------------
# Fair components

def fair_components(H: nx.DiGraph, enabled, fair: int, out_actions=None) -> list[set]:
    """The strongly connected components of H that hold a fair cycle under weak fairness of
    the instances in the bitmask ``fair``. ``enabled(node)`` is the bitmask of instances that
    can take a step there; ``out_actions(node)`` yields the (instance, successor) steps leaving
    it (by default read from the edges' ``actions``). A single node counts (the behaviour may
    stutter there) when no fair instance is enabled at it. This is the rule read plainly, on any
    networkx graph (``StateGraph.graph``, a user's); the checks decide it over arrays
    (``_fair_flags``), which the tests hold to this reading."""
    if out_actions is None:
        def out_actions(u):
            return ((k, v) for v, d in H.adj[u].items() for k in d["actions"])
    out = []
    for C in nx.strongly_connected_components(H):
        always = fair
        for u in C:
            always &= enabled(u)
            if not always:
                break
        if always:
            taken = 0
            for u in C:
                for k, v in out_actions(u):
                    if v in C:
                        taken |= 1 << k
            if always & ~taken:
                continue
        out.append(C)
    return out


DEADLOCK_DOC = "no reachable state without a successor"


@dataclass
class GraphFigures:
    """What a state graph's result still reads once the graph's arrays are let go
    (``ProgressResult.keep_figures_only``)."""
    model: Model
    states: int
    cut_within_budget: int
    symmetry_used: str | None
    unreduced_states: int


@dataclass
class ProgressResult(RunResult):
    """A progress check on a state graph (verdict.RunResult): a verdict per property (the
    progress properties asked, and 'deadlock' when it was checked), the lassos and the deadlock
    found (``found``: property -> Counterexample, concrete even when the graph is a quotient),
    why a verdict is bounded (``reasons``), and the graph's figures (``statistics``). The graph
    is built whole or refused (GraphTooLarge), so ``stop_reason`` is None."""
    engine = "state-graph"
    model: Model
    properties: list[str]
    graph: StateGraph
    found: dict[str, Counterexample] = field(default_factory=dict)
    verdict_of: dict[str, Verdict] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    # what a "holds" assumes of the environment ("at most E disturbances"; absent: nothing), and
    # per lasso whether its loop disturbs (environment-driven) or not (protocol-driven)
    assumes: dict[str, str] = field(default_factory=dict)
    drivers: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0            # building the graph and checking every property
    stop_reason: str | None = None
    trace_model: Model | None = None  # the spec's own model, when the graph's counts disturbances
    # (parameter, asked, used) when the run layer raised the epoch cap until it cut no step
    # within the disturbance bound (kcheck.run.progress_of)
    cap_raised: tuple | None = None

    def status(self, prop: str) -> str:
        return self.verdict_of[prop].value

    def reason(self, prop: str) -> str | None:
        return self.reasons.get(prop)

    def kind(self, prop: str) -> str:
        p = self.model.spec.progress.get(prop)
        return p.kind if p is not None else DEADLOCK

    def fair(self, prop: str) -> list[str]:
        p = self.model.spec.progress.get(prop)
        return list(p.fair) if p is not None else []

    def doc(self, prop: str) -> str:
        p = self.model.spec.progress.get(prop)
        return p.doc if p is not None else DEADLOCK_DOC

    def lasso(self, prop: str) -> Counterexample | None:
        f = self.found.get(prop)
        return f if f is not None and f.is_lasso else None

    # what the statistics line (checker/symmetry.py clause) reads
    @property
    def symmetry(self) -> str | None:
        return self.graph.symmetry_used

    @property
    def distinct_states(self) -> int:
        return self.graph.states

    @property
    def unreduced_states(self) -> int:
        return self.graph.unreduced_states

    def keep_figures_only(self):
        """Lets go of the graph's arrays, keeping its figures (``GraphFigures``) and the
        statistics: a run over every variant of a spec prints its table at the end, and would
        otherwise hold every variant's graph until then."""
        self._statistics = self.statistics
        self.graph = GraphFigures(self.graph.model, self.graph.states, self.graph.cut_within_budget,
                                  self.graph.symmetry_used, self.graph.unreduced_states)

    @property
    def statistics(self) -> dict:
        if getattr(self, "_statistics", None) is not None:
            return self._statistics
        sg = self.graph
        return {"states": sg.states, "edges": sg.edges, "transitions": sg.transitions,
                "depth": sg.max_depth, "cut_by_search_bounds": sg.cut_by_bounds,
                "elapsed_s": round(self.elapsed_s, 3), "stop_reason": self.stop_reason,
                "disturbances": getattr(sg.model, "budget", None),
                "cap_raised": (None if self.cap_raised is None else
                               dict(zip(("parameter", "from", "to"), self.cap_raised))),
                "cut_within_budget": sg.cut_within_budget,
                "symmetry": sg.symmetry_used,
                "unreduced_states": sg.unreduced_states if sg.symmetry is not None else None}

    def report(self, traces: dict, details: dict | None = None, engine: str | None = None):
        """As every run's (verdict.RunResult.report), with each property's fair actions."""
        extra = {p: {"fair": self.fair(p), **({"assumes": self.assumes.get(p),
                                               "lasso": self.drivers.get(p)}
                                              if p in self.model.spec.progress else {}),
                     **(details or {}).get(p, {})} for p in self.properties}
        return super().report(traces, extra, engine)


def check(sg: StateGraph, names: list[str] | None = None, deadlock: bool = False) -> ProgressResult:
    """The progress properties ``names`` (default: every one of the spec) on the graph, and
    deadlocks when ``deadlock`` (the graph must have been built with them marked)."""
    t0 = time.perf_counter()
    spec = sg.model.spec
    names = list(spec.progress) if names is None else list(names)
    res = ProgressResult(sg.model, names + ([DEADLOCK] if deadlock else []), sg)
    budget = getattr(sg.model, "budget", None)
    for name in names:
        status, lasso, reason = _decide(sg, spec.progress[name])
        res.verdict_of[name] = Verdict(status)
        if lasso is not None:
            res.drivers[name] = driver(sg.model, lasso)
            res.found[name] = _spec_states(sg.model, lasso)
        if reason:
            res.reasons[name] = reason
        if status == "holds" and budget is not None and sg.cut_by_bounds:
            res.assumes[name] = f"at most {budget} disturbance{'s' if budget != 1 else ''}"
    if budget is not None:
        res.trace_model = sg.model.unbudgeted
    if deadlock:
        d = sg.deadlock()
        cut_only = int(sg.cut_only.sum()) if sg.cut_only is not None else 0
        if d is not None:
            res.verdict_of[DEADLOCK] = Verdict.VIOLATED
            res.found[DEADLOCK] = _spec_states(sg.model, sg.concrete(
                Counterexample(DEADLOCK, DEADLOCK, d[0], d[1])))
        elif cut_only:
            res.verdict_of[DEADLOCK] = Verdict.BOUNDED
            res.reasons[DEADLOCK] = (f"{cut_only:,} states have no step but ones that leave a "
                                     f"search bound: a deadlock beyond the bound would not be seen")
        else:
            res.verdict_of[DEADLOCK] = Verdict.HOLDS
    res.elapsed_s = sg.elapsed_s + time.perf_counter() - t0
    return res


def check_progress(sg: StateGraph, prop: Progress) -> ProgressResult:
    """One progress property on the graph (``check`` of that property alone)."""
    return check(sg, [prop.name])


def _decide(sg: StateGraph, prop: Progress):
    """-> (status, lasso or None, reason or None) of one property. A step that leaves a search
    bound counts as enabled (docs/progress.md), so a cycle that starves it is not fair, and a
    violation found is a behaviour of the unbounded protocol. A "holds" is as wide as what was
    cut: where the graph counts disturbances (checker/environment.py), the budget's own cuts
    leave exactly the behaviours with at most E disturbances, and "holds" says so
    (``ProgressResult.assumes``). Any other cut (an epoch cap) hides a step: of a spec that
    declares its environment, any such cut makes the verdict 'bounded', naming the steps; of one
    that does not, the property is checked again with the cut steps counted as disabled, and
    the verdict is 'bounded' only if that finds a fair cycle."""
    lasso = _find_lasso(sg, prop, relaxed=False)
    if lasso is not None:
        return Verdict.VIOLATED, lasso, None
    if sg.cut_bits is None or not sg.cut_within_budget:
        return Verdict.HOLDS, None, None
    hidden = _hidden_cuts(sg)
    nbytes = hidden.shape[1]
    names = lambda bits: sorted({sg.model.instances[k].action.name for k in _instances(bits)})  # noqa: E731
    bounds = sorted({f.base for f in layout_of(sg.model).fields
                     if f.type.search_bound and f.base != environment.COUNTER})
    budget = getattr(sg.model, "budget", None)
    if budget is not None:
        states = int(hidden.any(axis=1).sum())
        cut = int.from_bytes(np.bitwise_or.reduce(hidden, axis=0).tobytes(), "little")
        env = environment.disturbance_mask(sg.model)
        protocol, disturbances = names(cut & ~env), names(cut & env)
        what = "; ".join(x for x in (
            f"the protocol's {', '.join(protocol)}" if protocol else "",
            f"the disturbance{'s' if len(disturbances) > 1 else ''} {', '.join(disturbances)} "
            f"before {budget} were made" if disturbances else "") if x)
        return Verdict.BOUNDED, None, (
            f"the search bound ({', '.join(bounds)}) cuts steps of {what}, in {states:,} states "
            f"within {budget} disturbances: behaviours within the bound were not examined")
    alt = _find_lasso(sg, prop, relaxed=True)
    if alt is None:
        return Verdict.HOLDS, None, None
    fair = fair_mask(sg.model, prop)
    cut_fair = int.from_bytes(np.bitwise_or.reduce(hidden & _mask_bytes(fair, nbytes),
                                                   axis=0).tobytes(), "little")
    return Verdict.BOUNDED, None, (
        f"holds only because fair steps of {', '.join(names(cut_fair)) or 'some action'} that "
        f"leave the search bound ({', '.join(bounds)}) count as enabled: counted as disabled, a "
        f"fair cycle violates it ({len(alt.steps)} steps); the protocol beyond the bound was not "
        f"examined")


def driver(model: Model, lasso: Counterexample) -> str | None:
    """Whether a lasso's loop has a disturbance ("environment-driven": the environment disturbs
    for ever, which fairness permits, not a protocol failure) or none ("protocol-driven": the
    protocol's own steps fail to make progress); None when the spec declares no environment."""
    if model.spec.environment is None:
        return None
    env = environment.disturbance_mask(model)
    loop = lasso.steps[lasso.loop_index:]
    return "environment-driven" if any(env >> k & 1 for k in loop) else "protocol-driven"


def _spec_states(model: Model, cx: Counterexample) -> Counterexample:
    """A counterexample of a graph that counts disturbances as one of the spec's own model (the
    same steps from the initial state without the count)."""
    if getattr(model, "budget", None) is None:
        return cx
    import dataclasses
    return dataclasses.replace(cx, initial=environment.unbudgeted(model, cx.initial))


def _hidden_cuts(sg: StateGraph) -> np.ndarray:
    """Per state, the packed bits of the instances whose step is cut by a search bound other
    than the disturbance budget (checker/environment.py; every cut when there is none)."""
    if sg._hidden is None:
        sg._hidden = environment.epoch_cuts(sg.model, sg.cut_bits, sg.words)
    return sg._hidden


def _relax(sg: StateGraph) -> StateGraph:
    """The graph with the steps that leave a search bound counted as disabled, except those the
    disturbance budget cuts (the same edges: their offsets per state are shared; the networkx
    view, which carries what is enabled, is not)."""
    import dataclasses
    return dataclasses.replace(sg, enabled_bits=sg.enabled_bits & ~_hidden_cuts(sg), _graph=None)


def _mask_bytes(mask: int, nbytes: int) -> np.ndarray:
    """A bitmask of instances as the packed little-endian bytes of a state's enabled bits."""
    return np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8)


def _fair_enabled(sg: StateGraph, fair: int) -> np.ndarray:
    """Per state: whether an instance in the bitmask ``fair`` can take a step there."""
    nbytes = sg.enabled_bits.shape[1]
    if not nbytes:
        return np.zeros(sg.states, dtype=bool)
    fair_bytes = _mask_bytes(fair, nbytes)
    return (sg.enabled_bits & fair_bytes).any(axis=1)


def _components(sg: StateGraph, not_q: np.ndarray, fair: int, moving: np.ndarray | None = None):
    """The fair components of the not-Q part of the graph -> (component per state, -1 for
    none; how many). Where no fair instance is enabled the behaviour may stop for ever: a fair
    component alone. Elsewhere a fair cycle needs at least two states (or a step that moves);
    states without a predecessor or a successor among the candidates lie on no cycle and are
    trimmed before the SCC analysis. ``moving``: per edge, whether its step changes the state
    (default: its ends differ)."""
    fair_enabled = _fair_enabled(sg, fair)
    stop = not_q & ~fair_enabled
    if moving is None:
        moving = sg.src != sg.dst
    alive = _trim(sg, not_q & fair_enabled, moving)
    e = alive[sg.src] & alive[sg.dst] & moving
    e[1:] &= (sg.src[1:] != sg.src[:-1]) | (sg.dst[1:] != sg.dst[:-1])   # one edge a pair
    scc, count = _strong_components(sg, alive, e)
    fair_scc = np.flatnonzero(_fair_flags(sg, scc, count, fair))
    # the fair ones numbered 0.. in their order, every other state -1 (scc's -1 reads the last
    # entry)
    renumber = np.full(count + 1, -1, dtype=np.int64)
    renumber[fair_scc] = np.arange(len(fair_scc))
    comp_id = renumber[scc]
    comp_id[stop] = len(fair_scc) + np.arange(int(stop.sum()))
    return comp_id, len(fair_scc) + int(stop.sum())


# the last two decompositions: (weak references to the graph's src and dst, digest of its states
# and edges, component per state); weak, so that a graph's edges are not kept for the cache
_SCC_KEPT: list = []


def _strong_components(sg: StateGraph, alive: np.ndarray,
                       e: np.ndarray) -> tuple[np.ndarray, int]:
    """The strongly connected components of the graph of the states ``alive`` and the edges
    ``e`` -> (the component of each state, numbered 0.. in order of their least state, -1 for a
    state not alive; how many components). Computed on the edges as compressed sparse rows by
    scipy.sparse.csgraph (Pearce's iterative algorithm, in C), not in networkx: consumer_group's
    442,221 states and 1,414,655 edges took networkx about 15 s to build and decompose, scipy
    under one (tests/test_graph.py holds it to networkx's components). A progress property is
    checked twice, the second time with some cut steps counted as disabled (``_decide``); where
    that leaves the same graph, as it mostly does, its decomposition is the one already made."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components
    digest = hashlib.blake2b(np.packbits(alive).tobytes() + np.packbits(e).tobytes(),
                             digest_size=32).digest()
    for src, dst, d, kept in _SCC_KEPT:
        if src() is sg.src and dst() is sg.dst and d == digest:
            return kept
    # the rows are the graph's states (those not alive have no edge: each its own component,
    # dropped below); the edges are sorted by source already, so the row pointers are counts
    n = sg.states
    ed = sg.dst[e].astype(np.int32, copy=False)
    indptr = np.zeros(n + 1, dtype=np.int64 if len(ed) >= 2 ** 31 else np.int32)
    np.cumsum(np.bincount(sg.src[e], minlength=n), out=indptr[1:])
    A = csr_matrix((np.ones(len(ed), dtype=np.int8), ed, indptr), shape=(n, n))
    count, labels = connected_components(A, directed=True, connection="strong") if n else (0, np.empty(0))
    del A, ed, indptr
    # numbered 0.. in order of each component's least alive state, -1 for a state not alive
    labels = np.asarray(labels, dtype=np.int64)
    nodes = np.flatnonzero(alive)
    lab = labels[nodes]
    comps, first = np.unique(lab, return_index=True)     # first: where each starts in nodes
    rank = np.full(count, -1, dtype=np.int64)
    rank[comps[np.argsort(first, kind="stable")]] = np.arange(len(comps))
    scc = np.full(n, -1, dtype=np.int64)
    scc[nodes] = rank[lab]
    count = len(comps)
    kept = scc, int(count)
    _SCC_KEPT[:] = _SCC_KEPT[-1:] + [(weakref.ref(sg.src), weakref.ref(sg.dst), digest, kept)]
    return kept


def _fair_flags(sg: StateGraph, scc: np.ndarray, count: int, fair: int) -> np.ndarray:
    """Per component of ``scc`` (numbered 0..count-1, -1 for none): whether it holds a fair
    cycle under weak fairness of the instances in ``fair``, the rule of ``fair_components`` over
    arrays: no fair instance enabled at every state of the component goes untaken by a step
    inside it (a self-loop included)."""
    nbytes = sg.enabled_bits.shape[1]
    if not count or not nbytes:
        return np.ones(count, dtype=bool)
    fair_bytes = _mask_bytes(fair, nbytes)
    nodes = np.flatnonzero(scc >= 0)
    nodes = nodes[np.argsort(scc[nodes], kind="stable")]
    starts = np.flatnonzero(np.r_[True, scc[nodes][1:] != scc[nodes][:-1]])
    always = np.bitwise_and.reduceat(sg.enabled_bits[nodes], starts, axis=0) & fair_bytes
    scc32 = scc.astype(np.int32) if count < 2 ** 31 else scc
    cs = scc32[sg.src]
    inside = cs >= 0
    inside &= cs == scc32[sg.dst]
    cs = cs[inside]
    act = sg.act[inside].astype(np.int64)
    taken = np.zeros((count, nbytes), dtype=np.uint8)
    np.bitwise_or.at(taken, (cs, act >> 3), (1 << (act & 7)).astype(np.uint8))
    return ~(always & ~taken).any(axis=1)


def _trim(sg: StateGraph, alive: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """The states of ``alive`` left once those with no predecessor or no successor among them
    (by a step that moves) are taken away, repeatedly."""
    n = sg.states
    while True:
        e = alive[sg.src] & alive[sg.dst] & moving
        keep = alive & (np.bincount(sg.src[e], minlength=n) > 0) & (np.bincount(sg.dst[e], minlength=n) > 0)
        if (keep == alive).all():
            return alive
        alive = keep


def _conditions(sg: StateGraph, prop: Progress):
    """-> (P mask, Q mask) on the graph's states; under symmetry, P and Q must not tell a state
    from its images (checked on every representative: a SymmetryError otherwise)."""
    model = sg.model
    P, Q = progress_conditions(model, prop)
    if not sg.states:
        return np.zeros(0, bool), np.zeros(0, bool)
    p_fn = compile_condition(model, P, prop.name + ".P")
    q_fn = compile_condition(model, Q, prop.name + ".Q")
    p_ok, q_ok = p_fn(sg.words), q_fn(sg.words)
    if sg.symmetry is not None:
        for what, fn, base in (("P", p_fn, p_ok), ("Q", q_fn, q_ok)):
            _same_on_images(sg, fn, base, f"{what} of progress property {prop.name}")
    return p_ok, q_ok


def _same_on_images(sg: StateGraph, fn, base: np.ndarray, what: str):
    sym = sg.symmetry
    for a in range(0, sg.states, symmetry_.CHUNK):
        S = sg.words[:, a:a + symmetry_.CHUNK]
        for e in sym.group[1:]:
            bad = np.flatnonzero(fn(sym.apply(e, S)) != base[a:a + S.shape[1]])
            if bad.size:
                raise symmetry_.SymmetryError(
                    f"symmetry {sym.description} of spec {sg.model.spec.name}: {what} differs "
                    f"between state {_state_text(sg.model, S[:, bad[0]])} and its image under "
                    f"{e.label}")


def _find_lasso(sg: StateGraph, prop: Progress, relaxed: bool) -> Counterexample | None:
    """A shortest lasso violating ``prop`` (cut steps counted as disabled when ``relaxed``), or
    None. Without symmetry, on the graph itself: restrict it to the states where Q does not
    hold, find the fair components, and go from the nearest P-and-not-Q state into one. Under
    symmetry (a quotient), the components are found on the concrete states of the candidate
    orbits (``_unfold``) and the lasso is made concrete (docs/design.md, "Progress under
    symmetry")."""
    if sg.symmetry is not None:
        return _find_lasso_quotient(sg, prop, relaxed)
    if relaxed:
        sg = _relax(sg)
    p_ok, q_ok = _conditions(sg, prop)
    not_q = ~q_ok
    fair = fair_mask(sg.model, prop)
    comp_id, count = _components(sg, not_q, fair)
    if not count:
        return None
    found = _stem(sg, prop, p_ok, not_q, comp_id >= 0)
    if found is None:
        return None
    initial, steps, trigger, u = found
    loop_index = len(steps)
    steps += _fair_loop(sg, u, comp_id, fair)
    return Counterexample(prop.name, "lasso", initial, steps, loop_index, trigger)


def _stem(sg: StateGraph, prop: Progress, p_ok, not_q, in_b):
    """The shortest path from an initial state through a state where P holds and Q does not,
    staying in not-Q after it, to a state of ``in_b`` (a fair component) -> (initial, steps,
    trigger index, last state) or None when no such state is reachable."""
    n = sg.states
    # distance to a fair component, moving through not-Q states only
    dist = np.full(n, -1, dtype=np.int64)
    dist[in_b] = 0
    inside = not_q[sg.src] & not_q[sg.dst]
    es, ed = sg.src[inside], sg.dst[inside]
    front, d = in_b, 0
    while True:
        new = np.unique(es[front[ed] & (dist[es] < 0)])
        if not new.size:
            break
        d += 1
        dist[new] = d
        front = np.zeros(n, dtype=bool)
        front[new] = True
    cand = np.flatnonzero(p_ok & not_q & (dist >= 0))
    if not cand.size:
        return None
    s = int(cand[np.argmin(sg.depth[cand] + dist[cand])])
    initial, steps = sg.trace_to(s)
    trigger = len(steps)
    u = s
    while dist[u] > 0:
        k, v = min((k, v) for k, v in sg.out_edges(u) if not_q[v] and dist[v] == dist[u] - 1)
        steps.append(k)
        u = v
    return initial, steps, trigger, u


# ---------------------------------------------------------------------------------------------
# Progress on a quotient graph (symmetry; docs/design.md, "Progress under symmetry")

def _find_lasso_quotient(sg: StateGraph, prop: Progress, relaxed: bool) -> Counterexample | None:
    """``_find_lasso`` on a quotient graph. The quotient finds the candidates: the not-Q orbits
    where a fair instance is enabled and that lie on a cycle of the not-Q quotient (trimmed by
    steps that move), and those where none is. Their concrete states are unfolded (every image
    of their representatives, with every step between them), and the fair components are those
    of that concrete graph, per action instance exactly as without symmetry; an orbit is in a
    fair component when one of its states is. The stem is found on the quotient and made
    concrete; the loop is found on the unfolded graph."""
    fair = fair_mask(sg.model, prop)
    p_ok, q_ok = _conditions(sg, prop)
    not_q = ~q_ok
    rq = _relax(sg) if relaxed else sg
    fair_enabled = _fair_enabled(rq, fair)
    candidates = (_trim(sg, not_q & fair_enabled, sg.moved)) | (not_q & ~fair_enabled)
    if not candidates.any():
        return None
    U = _unfold(sg, np.flatnonzero(candidates))
    if relaxed:
        U = _relax(U)
    # the representative of each unfolded state, as an index of the quotient
    rep_of = sg.indices(sg.symmetry.canonical(U.words))
    # whether a fair instance is enabled must not tell a state from its images: on every state
    # unfolded, and on the symmetry check's sample for the orbits that were not
    _fair_enabled_symmetric(sg, prop, fair, _fair_enabled(U, fair), fair_enabled[rep_of], U.words)
    S = symmetry_.sample_states(sg.model, sg.compiled, symmetry_.SAMPLE_STATES, symmetry_.SAMPLE_DEPTH)
    base = _fair_enabled_on(sg.compiled, S, fair, relaxed)
    for e in sg.symmetry.group[1:]:
        img = sg.symmetry.apply(e, S)
        _fair_enabled_symmetric(sg, prop, fair, _fair_enabled_on(sg.compiled, img, fair, relaxed),
                                base, img, e.label)
    comp_id, count = _components(U, np.ones(U.states, dtype=bool), fair)
    if not count:
        return None
    in_b = np.zeros(sg.states, dtype=bool)
    in_b[rep_of[comp_id >= 0]] = True
    found = _stem(sg, prop, p_ok, not_q, in_b)
    if found is None:
        return None
    initial, steps, trigger, _u = found
    stem = sg.concrete(Counterexample(prop.name, "lasso", initial, steps))
    x = U.index_of(_last_state(sg, stem.initial, stem.steps))
    if x is None or comp_id[x] < 0:
        # fair components are images of one another when fairness respects the symmetry
        raise symmetry_.SymmetryError(
            f"symmetry {sg.symmetry.description} of spec {sg.model.spec.name}: the fairness of "
            f"{prop.name} tells apart states of one orbit (an image of a fair component is not "
            f"fair): check it with --no-symmetry")
    steps = list(stem.steps)
    loop_index = len(steps)
    steps += _fair_loop(U, int(x), comp_id, fair)
    return Counterexample(prop.name, "lasso", stem.initial, steps, loop_index, trigger)


def _fair_enabled_on(comp: Compiled, S: np.ndarray, fair: int, relaxed: bool) -> np.ndarray:
    """Per state of S: whether an instance in ``fair`` can take a step there (as build_graph
    marks it: a step that changes the state or, unless ``relaxed``, leaves a search bound)."""
    out = np.zeros(S.shape[1], dtype=bool)
    for k, idx, sub, T, _out, ok in comp.successors(S):
        if fair >> k & 1:
            moved = (T != sub).any(axis=0)
            if ok is not None:
                moved = moved & ok if relaxed else moved | ~ok
            out[idx[moved]] = True
    return out


def _fair_enabled_symmetric(sg: StateGraph, prop: Progress, fair: int, seen: np.ndarray,
                            expected: np.ndarray, S: np.ndarray, element: str | None = None):
    bad = np.flatnonzero(seen != expected)
    if bad.size:
        other = "its representative" if element is None else f"the state it is the image of under {element}"
        raise symmetry_.SymmetryError(
            f"symmetry {sg.symmetry.description} of spec {sg.model.spec.name}: whether a fair step "
            f"of {prop.name} is enabled differs between state {_state_text(sg.model, S[:, bad[0]])} "
            f"and {other}")


def _last_state(sg: StateGraph, initial: tuple, steps: list[int]) -> np.ndarray:
    S = np.array(initial, dtype=np.uint64).reshape(-1, 1)
    for k in steps:
        S = sg.compiled.effects[k](S)[0]
    return S


def _unfold(sg: StateGraph, reps: np.ndarray) -> StateGraph:
    """The concrete states of the orbits of the representatives ``reps`` (indices of the
    quotient) and every step between two of them: a StateGraph of their own (no BFS tree, no
    deadlocks), enabled and cut instances as build_graph marks them."""
    model, comp, sym = sg.model, sg.compiled, sg.symmetry
    K = len(model.instances)
    R = sg.words[:, reps]
    X = np.concatenate([R] + [sym.apply(e, R) for e in sym.group[1:]], axis=1)
    fps, first = np.unique(fingerprint(X), return_index=True)
    X = X[:, first]
    n = len(fps)
    en_rows, cut_rows, e_src, e_dst, e_act = [], [], [], [], []
    for start in range(0, n, explore.BLOCK):
        S = X[:, start:start + explore.BLOCK]
        m = S.shape[1]
        en, cut = np.zeros((m, K), dtype=bool), np.zeros((m, K), dtype=bool)
        for k, idx, sub, T, _out, ok in comp.successors(S):
            moved = (T != sub).any(axis=0)
            if ok is not None:
                en[idx[moved | ~ok], k] = True
                cut[idx[~ok], k] = True
                idx, T = idx[ok], T[:, ok]
            else:
                en[idx[moved], k] = True
            tfp = fingerprint(T)
            pos = np.searchsorted(fps, tfp)
            pos[pos == n] = 0
            inside = fps[pos] == tfp
            e_src.append(idx[inside] + start)
            e_dst.append(pos[inside])
            e_act.append(np.full(int(inside.sum()), k, dtype=np.int32))
        en_rows.append(np.packbits(en, axis=1, bitorder="little"))
        cut_rows.append(np.packbits(cut, axis=1, bitorder="little"))
    src, dst, act, _ = _sorted_edges([_joined(e_src, np.int64), _joined(e_dst, np.int64),
                                      _joined(e_act, np.int32)], n, K)
    none = np.full(n, -1)
    return StateGraph(model, comp, fps, X, np.zeros(n, dtype=np.int32), none, none,
                      np.concatenate(en_rows, axis=0), np.zeros(n, dtype=bool), src, dst, act,
                      cut_bits=np.concatenate(cut_rows, axis=0))


def _fair_loop(sg: StateGraph, e: int, comp_id: np.ndarray, fair: int) -> list[int]:
    """A cycle from e back to e inside e's component that meets every fair instance's
    obligation (disabled at a visited state, or taken); empty when the behaviour may stop at e.
    Greedy: go to the nearest state or edge that discharges an obligation, then return."""
    c = comp_id[e]
    en = _Enabled(sg)
    rem = fair & en[e]
    loop: list[int] = []
    cur = e

    def bfs(goal):
        prev = {cur: None}
        q = deque([cur])
        while q:
            u = q.popleft()
            for k, v in sorted(sg.out_edges(u)):
                if comp_id[v] != c:
                    continue
                hit = goal(u, k, v)
                if hit == "edge":
                    return _path(prev, u) + [(k, v)]
                if v in prev:
                    continue
                prev[v] = (u, k)
                if hit == "node":
                    return _path(prev, v)
                q.append(v)
        raise AssertionError("a fair component's obligation cannot be met")  # pragma: no cover

    while rem:
        def goal(u, k, v):
            if rem >> k & 1:
                return "edge"
            return "node" if rem & ~en[v] else None
        for k, v in bfs(goal):
            loop.append(k)
            rem &= ~(1 << k)
            rem &= en[v]
            cur = v
    if cur != e:
        for k, v in bfs(lambda u, k, v: "node" if v == e else None):
            loop.append(k)
    return loop


class _Enabled:
    def __init__(self, sg):
        self.sg, self.cache = sg, {}

    def __getitem__(self, i):
        v = self.cache.get(i)
        if v is None:
            v = self.cache[i] = self.sg.enabled(i)
        return v


def _path(prev: dict, v) -> list[tuple[int, int]]:
    out = []
    while prev[v] is not None:
        u, k = prev[v]
        out.append((k, v))
        v = u
    out.reverse()
    return out


def lasso_trace(sg: StateGraph, prop: str, lasso: Counterexample) -> Trace:
    return build(sg.model, prop, "lasso", lasso.initial, lasso.steps,
                 Executor(sg.model, sg.compiled), loop_index=lasso.loop_index)


# ---------------------------------------------------------------------------------------------
# Replay of a lasso (called from kcheck.trace.replay)

# ---------------------------------------------------------------------------------------------
# Export

def _state_text(model: Model, words) -> str:
    lay = layout_of(model)
    st = lay.show(lay.unpack_flat([int(w) for w in words]))
    return "{" + ", ".join(f"{k}={v}" for k, v in st.items()) + "}"


def _label(sg: StateGraph, i: int) -> dict:
    lay = layout_of(sg.model)
    return lay.show(lay.unpack_flat(sg.words[:, i]))


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(_fmt, v)) + "]"
    return str(v)


def _node_id(fp: int) -> str:
    return f"{fp:016x}"


def to_json(sg: StateGraph) -> dict:
    m = sg.model
    inst = m.instances
    nodes = []
    for f, d in sg.graph.nodes(data=True):
        nodes.append({"id": _node_id(f), "state": _label(sg, d["index"]), "depth": d["depth"],
                      "initial": d["initial"], "deadlock": d["deadlock"]})
    edges = [{"source": _node_id(u), "target": _node_id(v),
              "actions": [inst[k].label for k in d["actions"]]}
             for u, v, d in sg.graph.edges(data=True)]
    return {"spec": m.spec.name, "variant": m.variant, "params": m.params.as_dict(),
            "states": sg.states, "edges": len(edges), "cut_by_search_bounds": sg.cut_by_bounds,
            "nodes": nodes, "links": edges}


def to_dot(sg: StateGraph) -> str:
    m = sg.model
    esc = lambda s: s.replace("\\", "\\\\").replace('"', '\\"')   # noqa: E731
    out = [f'digraph "{esc(m.spec.name)}/{esc(m.variant)}" {{', "  node [shape=box, fontsize=10];"]
    for f, d in sg.graph.nodes(data=True):
        lab = "\\n".join(esc(f"{k}={_fmt(v)}") for k, v in _label(sg, d["index"]).items())
        style = ", peripheries=2" if d["initial"] else ""
        style += ", color=red" if d["deadlock"] else ""
        out.append(f'  "{_node_id(f)}" [label="{lab}"{style}];')
    for u, v, d in sg.graph.edges(data=True):
        lab = esc("\n".join(m.instances[k].label for k in d["actions"])).replace("\n", "\\n")
        out.append(f'  "{_node_id(u)}" -> "{_node_id(v)}" [label="{lab}"];')
    out.append("}")
    return "\n".join(out) + "\n"


def to_graphml(sg: StateGraph) -> str:
    """GraphML with string ids and scalar attributes (GraphML has no tuples or dicts)."""
    import json
    m = sg.model
    X = nx.DiGraph()
    for f, d in sg.graph.nodes(data=True):
        X.add_node(_node_id(f), state=json.dumps(_label(sg, d["index"])), depth=d["depth"],
                   initial=d["initial"], deadlock=d["deadlock"])
    for u, v, d in sg.graph.edges(data=True):
        X.add_edge(_node_id(u), _node_id(v), actions="; ".join(m.instances[k].label for k in d["actions"]))
    return "\n".join(nx.generate_graphml(X)) + "\n"
