"""Distributed exploration on Spark, partitioned by state ownership.

Every state has one owner of P: a hash of the state bits that steps rarely change, chosen on a
sample of the level the driver hands over (``owner_mask``; of each word, for states of several
words), or of its fingerprint where no choice of bits beats it (the mixing is checker/spark.py's,
so a one-word state, which is its own fingerprint, spreads too). The search is breadth-first and
level-synchronous; each state is explored exactly once, by its owner:

1. Spark starts in a thread (``_Starter``: the JVM, then the owners' Python workers with the
   model compiled) while the driver builds the first levels itself, on the single process's
   core; at the first level of at least ``prefix_states`` states after Spark is ready, the
   driver hands each owner its share (the fingerprints it has seen and its part of the
   frontier, as .npy files in the run's exchange directory). Spark's start thus costs the run
   the CPU it takes, not its wall time.
2. The owners run as one Spark job in barrier mode (``mode="barrier"``, the default when every
   owner has a task slot): P tasks started together, each the long-lived home of one owner's
   visited set, frontier and parent links, in its own memory, for the whole search. Per level,
   each owner expands its frontier with the compiled numpy code (checker/compile.Compiled),
   checks the transition properties and deadlocks on its own states, and writes its
   successors for each other owner as one packed array (fingerprint, parent fingerprint, action
   instance, words: 8 bytes a word) to the exchange directory (``exchange_root``); a barrier;
   each owner reads what it was sent, drops what it has seen, keeps one parent per new state
   and checks the invariants on its new states. An owner does per state what the single
   process does (steps that leave their state unchanged dropped before any sort, its own
   successors checked against its visited set while it gathers them, every invariant checked
   at once); what it does more is the exchange and the merge of the runs it received. One ``allGather`` of the owners' small
   summaries (counts, the least violating fingerprint per property) gives every owner the same
   view, so each applies the driver's stopping rule (``Rule``, the core's ``explore.Pending``)
   itself and they stop together. No Spark job, shuffle or serialisation per level: a level
   costs the work, the exchange through files and two round trips of ``FileSync`` (files in
   the exchange directory; Spark's own barrier() took a second each).
3. Traces: when the search stops, the owners walk each violation back through the parents they
   hold, handing over to the owner that holds the next parent (one ``allGather`` per hand-over;
   a parent is known by its fingerprint, which does not tell the owner of a wider state), down to
   the driver's prefix; the task returns the per-level summaries and the walks, and the driver
   replays the summaries through ``bfs.search``'s loop, finishes each walk through the prefix
   it holds and kcheck.trace.build replays it.

With more owners than task slots (barrier mode needs every task running at once), or with
``mode="levels"``, each level is one Spark job of two stages instead (the mode this module had
first; docs/spark.md has what each costs): stage 1 expands each owner's frontier and emits its
successors keyed by owner, Spark shuffles them, stage 2 zips each owner's store (a persisted
RDD of one record per owner: sorted visited fingerprints, frontier words, per level the parent
fingerprint and action instance of each state) with what it received; lineage is truncated every
``CHECKPOINT_EVERY`` levels; traces are walked back by lookup jobs on the stores.

The exchange directory must be one that every executor reaches: on one machine (local masters,
a standalone cluster on 127.0.0.1) the default, /dev/shm or the temporary directory; on several
machines a shared filesystem, named by ``KCHECK_EXCHANGE_DIR``.

Exactness. Every state is expanded once, at its BFS depth, so distinct-state counts, levels,
verdicts and shortest trace lengths are those of checker/bfs.py by construction; the driver
replays bfs.search's loop (the all-violated and max-depth stops, the properties still pending
at each level) on the merged summaries, so a search stops where bfs stops. Transitions and
transitions cut by search bounds are counted once, as in bfs.

Tie-break: the single process's (checker/explore.py, "the parent rule"). The end of a trace:
for an invariant or a deadlock the violating state with the least fingerprint in its level; for
a transition property the step whose pre-state has the least fingerprint, then the lowest
action instance (a level is ordered by fingerprint, so "first in its level" is "least
fingerprint"). The path: each state keeps the least (action instance, parent fingerprint) among
the steps into it, over every owner's candidates, which is the single process's parent whatever
the size of a level: the traces are the single process's, byte for byte.

Symmetry (checker/symmetry.py): where the spec declares one, the driver checks it as bfs does,
and the prefix and every owner store one canonical representative per orbit (successors are
canonicalised, block by block, before they are fingerprinted and sent to their owner); counts
are orbits, each owner sums its new states' orbit sizes, and the traces found on
representatives are made concrete by the driver, as bfs makes them.

Action coverage: each state is expanded once, so the steps per action instance are the single
process's (summed over the owners and the driver's prefix).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcheck import explore, spark
from kcheck import symmetry as symmetry_
from kcheck.bfs import DEADLOCK, SearchResult
from kcheck.verdict import Counterexample
from kcheck.compile import Compiled, fingerprint
from kcheck.explore import BLOCK
from kcheck.layout import initial_words, layout_of
from kcheck.spec.lang import Model

# a frontier below this many states is expanded in the driver: measured on this machine, one
# Spark level costs 0.2-0.8 s, the driver expands about 10^6 states a second
PREFIX_STATES = 50_000
# the words of the driver's prefix levels kept for the hand-over (states of several words owned
# by their bits, see _split): beyond this the driver keeps none, and those states are owned by
# fingerprint (a Spark slow to start lets the driver search far, as one process would)
PREFIX_WORDS_BYTES = 1 << 29
CHECKPOINT_EVERY = 10
MODES = ("barrier", "levels")
_EMPTY = np.zeros(0, dtype=np.uint64)
# the phases of a level an owner times (barrier mode); docs/spark.md
PHASES = ("expand", "write", "wait", "read", "merge", "invariants", "gather")


def owner_of(fps: np.ndarray | None, parts: int, mask=None,
             words: np.ndarray | None = None) -> np.ndarray:
    """Each state's owner: a hash of its fingerprint ``fps``; with ``mask``, a hash of those
    bits of the state alone (``owner_mask``): an int for one-word states, whose fingerprint is
    the state, or one int a word for wider states, whose ``words`` (a column a state) are
    then read instead of their fingerprints."""
    # owners are below ``parts``: viewed as int64 (np.bincount's type), not copied (the
    # hand-over splits every state seen so far, 13.4 M at two_phase N=10)
    if mask is None:
        return spark.bucket(fps, parts).view(np.int64)
    if isinstance(mask, int):
        return spark.bucket(fps & np.uint64(mask), parts, in_place=True).view(np.int64)
    masked = words & np.array(mask, dtype=np.uint64)[:, None]
    # the fingerprint's mixing chain with another seed: independent of the states' fingerprints
    return spark.bucket(fingerprint(masked, seed=_OWNER_SEED), parts,
                        in_place=True).view(np.int64)


_OWNER_SEED = 0x5851F42D4C957F2D


def owner_bits(mask) -> int:
    """How many state bits ``mask`` owns by (0: by fingerprint)."""
    if mask is None:
        return 0
    return sum(bin(m).count("1") for m in ((mask,) if isinstance(mask, int) else mask))


def _bit_means(a: np.ndarray) -> np.ndarray:
    """(words, 64): the fraction of the columns of ``a`` (uint64, a word a row) with each bit
    of each word set."""
    return ((a[:, :, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).mean(axis=1)


def owner_mask(comp: Compiled, S: np.ndarray, P: int, canonical=None,
               sample: int = 16384) -> tuple:
    """The state bits to own states by, chosen on a sample of the frontier ``S`` (the
    hand-over level) -> (mask, or None to own by fingerprint; the sampled steps' share that
    would cross owners). The mask is an int for one-word states, a tuple of one int a word for
    wider ones (``owner_of``).

    By fingerprint, a successor has another owner with probability (P-1)/P, and most of them
    are states the other owner has seen already, which it cannot know before receiving them:
    two_phase N=10 exchanged 0.98 candidates a new state, and two owners took twice one
    process's CPU. Owned by bits that steps rarely change, a successor mostly stays with its
    parent's owner. The bits are taken in order of how rarely the sample's steps flip them
    (bits that never vary are left out); each mask so made is scored by the busiest owner's
    time for a level, from costs measured on the sample (``_costs``): its share (of the sample
    or of its successors, whichever is larger, times P) of the expansion, and of a sort of
    the whole level when the steps that cross owners are too many to insert into its own run
    (``_candidates``), plus the exchange of those crossing steps. The cheapest is kept if it
    beats owning by fingerprint. The costs, not a fixed weight, decide: a crossing step cost
    two_phase N=10 (24 bytes, cheap to expand) more than a 14 % busier owner, and
    consumer_group with 3 members (expanding 6x slower a step) less. Any function of the state
    is a valid owner: counts, verdicts and traces do not depend on it (the parent rule is by
    fingerprint, see the module's docstring)."""
    by_fingerprint = (None, 1.0 - 1.0 / P)
    if P < 2 or S.shape[1] < 64 * P:
        return by_fingerprint
    W = S.shape[0]
    # a random sample, by a fixed seed: every k-th state of a level sorted by its bits is no
    # sample when the low bits cycle with k
    pick = np.random.default_rng(0).choice(S.shape[1], min(sample, S.shape[1]), replace=False)
    B = np.ascontiguousarray(S[:, np.sort(pick)])
    costs = _costs(comp, B, canonical)
    if costs is None:
        return by_fingerprint
    (src, dst), (own_s, sort_s, cross_s) = costs
    ones = _bit_means(np.concatenate([B, dst], axis=1))
    flips = _bit_means(src ^ dst)
    bits = sorted(((w, b) for w in range(W) for b in range(64) if 0.0 < ones[w, b] < 1.0),
                  key=lambda wb: (flips[wb], wb))
    after = dst[:, np.unique(fingerprint(dst), return_index=True)[1]]

    def level_s(busiest, crossing):
        # crossing steps past 1/16 of an owner's own are merged by sorting the whole level
        sorts = crossing * 16 > 1.0 - crossing
        return busiest * (own_s + (sort_s if sorts else 0.0)) + crossing * cross_s

    best, best_s, bit_masks = by_fingerprint, level_s(1.0, by_fingerprint[1]), [0] * W
    for w, b in bits:
        bit_masks[w] |= 1 << b
        mask = bit_masks[0] if W == 1 else tuple(bit_masks)      # owner_of's form
        busiest = max(np.bincount(owner_of(x[0], P, mask, x), minlength=P).max() * P
                      / x.shape[1] for x in (B, after))
        crossing = float((owner_of(src[0], P, mask, src) != owner_of(dst[0], P, mask, dst))
                         .mean())
        s = level_s(busiest, crossing)
        if s < best_s:
            best, best_s = (mask, crossing), s
    return best


def _costs(comp: Compiled, B: np.ndarray, canonical=None, repeat: int = 3):
    """The sample ``B``'s steps (parents' words, successors' words, self-loops left out) and
    what each successor costs, in seconds, measured here (the fastest of ``repeat`` runs):
    (expanding it where its parent is owned; sorting it into a level by ``_candidates``'s
    full sort; sending it to another owner: packed, written to the owners' exchange directory,
    read and looked up in its visited set). None when the sample has no steps."""
    ninst = len(comp.model.instances)
    act = np.int16 if ninst < 32000 else np.int32

    def fastest(run):
        best, out = float("inf"), None
        for _ in range(repeat):
            t = time.perf_counter()
            out = run()
            best = min(best, time.perf_counter() - t)
        return best, out

    def expanded():
        blk = explore.expand_block(comp, B, [0] * ninst, set(comp.tprop_names), False, False,
                                   act, loops=False)
        if blk.words is None:
            return None
        T = blk.words if canonical is None else canonical(blk.words)
        return blk, T, (T[0] if T.shape[0] == 1 else fingerprint(T))
    own_s, got = fastest(expanded)
    if got is None:
        return None
    blk, T, fp = got
    n, one_word = T.shape[1], T.shape[0] == 1
    fp_s, S_s = np.unique(fp, return_index=True)
    parts = [(fp_s[i::2], T[:, S_s[i::2]], blk.parent[S_s[i::2]].astype(np.uint64),
              blk.action[S_s[i::2]]) for i in range(2)]
    sort_s = fastest(lambda: _candidates(parts))[0]
    # through the directory the owners exchange in (on a cluster, a shared one is slower)
    path = exchange_root() / f"kcheck-cost-{os.getpid()}-{uuid.uuid4().hex[:12]}.npy"

    def sent():
        try:
            np.save(path, _pack(*parts[1], one_word))
            got = _unpack(np.load(path))
        finally:
            path.unlink(missing_ok=True)
        return explore.absent(parts[0][0], got[0])
    cross_s = fastest(sent)[0]
    return (B[:, blk.parent], T), (own_s / n, sort_s / len(fp_s), cross_s / len(parts[1][0]))


def exchange_root() -> Path:
    """Where the owners exchange successors (barrier mode): ``KCHECK_EXCHANGE_DIR``, else
    /dev/shm (memory: the files live one level), else the temporary directory. A
    ``KCHECK_EXCHANGE_DIR`` that cannot be a writable directory is a SparkError."""
    given = os.environ.get("KCHECK_EXCHANGE_DIR")
    if given:
        root = Path(given)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise spark.SparkError(f"KCHECK_EXCHANGE_DIR={given}: cannot be a directory "
                                   f"({e.strerror}); name one the owners can write (on several "
                                   f"machines, a shared filesystem)") from None
        if not os.access(root, os.W_OK):
            raise spark.SparkError(f"KCHECK_EXCHANGE_DIR={given}: not writable; name a "
                                   f"directory the owners can write")
        return root
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


# ---------------------------------------------------------------------------------------------
# The owners' work on the explicit-state core (checker/explore.py)


@dataclass
class Expansion:
    """The successors of one frontier, one candidate per distinct fingerprint (the least
    (action instance, parent fingerprint)), sorted by fingerprint."""
    fp: np.ndarray
    words: np.ndarray
    parent: np.ndarray
    action: np.ndarray
    transitions: int = 0
    cut: int = 0
    cut_only: int = 0                             # states whose every step left a search bound
    fired: list = field(default_factory=list)     # steps per action instance
    tviol: dict = field(default_factory=dict)     # property -> (pre-state fingerprint, instance)
    deadlock: int | None = None                   # least fingerprint of a stuck state


def _least(fp, words, parent, action):
    sel = explore.least_per_state(fp, action, parent)
    return fp[sel], words[:, sel], parent[sel], action[sel]


def expand(comp: Compiled, S: np.ndarray, fps: np.ndarray, tprops: set, deadlock: bool,
           block: int = BLOCK, canonical=None, visited: explore.Visited | None = None) -> Expansion:
    """Expands the states S (columns, sorted by fingerprint ``fps``) as the core expands one
    level: counts, transition properties still pending (``tprops``), deadlocks. ``canonical``:
    a symmetry's representative of each successor (checker/symmetry.py), or None.
    ``visited``: the owner's visited set, whose states are dropped here already.

    The successors are gathered as the core gathers a level (``explore.Level``): the frontier
    is in fingerprint order, so the least parent position is the least parent fingerprint,
    and the candidate kept for each state is the least (action instance, parent)."""
    words = S.shape[0]
    judged_elsewhere = set(comp.tprop_names) - set(tprops)   # already violated, or not asked
    ninst = len(comp.model.instances)
    ex = Expansion(_EMPTY, np.zeros((words, 0), dtype=np.uint64), _EMPTY, np.zeros(0, np.int32),
                   fired=[0] * ninst)
    # a one-word state is its own fingerprint and is kept once, as it (the core's fast path)
    level = explore.Level(visited if visited is not None else explore.Visited(0), False,
                          max(1, (ninst - 1).bit_length()), words == 1,
                          layout_of(comp.model).bits)
    act_dtype = np.int16 if ninst < 32000 else np.int32
    for start in range(0, S.shape[1], block):
        B = S[:, start:start + block]
        Bfp = fps[start:start + block]
        # as the core's level loop: steps that leave their state as it was reach a state seen
        # already (two_phase: 37 % of its steps) and are dropped before any sort
        blk = explore.expand_block(comp, B, ex.fired, judged_elsewhere, deadlock,
                                   deadlock and ex.deadlock is None, act_dtype, loops=False)
        ex.transitions += blk.transitions
        ex.cut += blk.cut
        ex.cut_only += blk.cut_only
        for name, (i, k) in blk.violations.items():
            cand = (int(Bfp[i]), k)
            if name not in ex.tviol or cand < ex.tviol[name]:
                ex.tviol[name] = cand
        if blk.stuck is not None and ex.deadlock is None:
            ex.deadlock = int(Bfp[blk.stuck])
        if blk.words is not None:
            T = blk.words if canonical is None else canonical(blk.words)
            level.add(T, fingerprint(T), blk.parent, blk.action, start)
        del blk
    if level.upper:
        fp, T, par, act = level.finish()
        ex.fp, ex.words, ex.parent, ex.action = fp, T, fps[par], act.astype(np.int32)
    return ex


def _candidates(parts: list[tuple]) -> tuple | None:
    """Candidates (fp, words, parent, action) from every sender, each sender's sorted by
    fingerprint -> one per fingerprint, the least (action instance, parent), sorted by
    fingerprint; None when there are none. The senders' runs are merged by one stable sort
    (a merge of sorted runs); a state sent by several senders (at most one candidate each)
    keeps its least by two segmented minima (``np.minimum.reduceat``), linear, where a
    lexicographic sort of the ties took ten times as long (two_phase N=9: as long as
    expanding)."""
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return None
    if len(parts) == 1 and (parts[0][0][1:] > parts[0][0][:-1]).all():
        return parts[0]                      # one sender's, already one per state
    big = max(range(len(parts)), key=lambda i: len(parts[i][0]))
    rest = sum(len(p[0]) for p in parts) - len(parts[big][0])
    if rest * 16 < len(parts[big][0]) and (parts[big][0][1:] > parts[big][0][:-1]).all():
        # owned by state bits (owner_mask), an owner keeps nearly all of its successors and
        # receives few: those few go into its own run, not a sort of the whole level
        return _into(parts[big], _candidates(parts[:big] + parts[big + 1:]))
    fp = np.concatenate([p[0] for p in parts])
    order = np.argsort(fp, kind="stable")
    sf = fp[order]
    first = np.empty(len(sf), dtype=bool)
    first[0] = True
    np.not_equal(sf[1:], sf[:-1], out=first[1:])
    del sf
    par = np.concatenate([p[2] for p in parts])
    act = np.concatenate([p[3] for p in parts])
    if not first.all():
        # within a state's group (adjacent in ``order``), the least action instance, then among
        # those the least parent ((action, parent) is one step, sent by its parent's owner
        # only: one candidate per group is left; the first, should a step come twice)
        starts = np.flatnonzero(first)
        group = np.cumsum(first) - 1
        del first
        act_s, par_s = act[order], par[order]
        least = act_s == np.minimum.reduceat(act_s, starts)[group]
        best = np.minimum.reduceat(np.where(least, par_s, np.uint64(2 ** 64 - 1)), starts)
        least &= par_s == best[group]
        order = order[least]
        del act_s, par_s, least, group
        if len(order) != len(starts):
            kept = fp[order]
            order = order[np.concatenate(([True], kept[1:] != kept[:-1]))]
    S = np.concatenate([p[1] for p in parts], axis=1)
    return fp[order], S[:, order], par[order], act[order]


def _into(run: tuple, few: tuple) -> tuple:
    """Candidates ``few`` (one per state, sorted) into ``run`` (the same, and much larger):
    a state in both keeps its least (action instance, parent); the others are inserted in
    order. The run's parents and action instances are changed in place."""
    fp, S, par, act = run
    ffp, fS, fpar, fact = few
    i = np.searchsorted(fp, ffp)
    hit = i < len(fp)
    hit[hit] = fp[i[hit]] == ffp[hit]
    at, hpar, hact = i[hit], fpar[hit], fact[hit]
    better = (hact < act[at]) | ((hact == act[at]) & (hpar < par[at]))
    par[at[better]] = hpar[better]
    act[at[better]] = hact[better]
    miss = ~hit
    if not miss.any():
        return fp, S, par, act
    at = i[miss]
    return (np.insert(fp, at, ffp[miss]), np.insert(S, at, fS[:, miss], axis=1),
            np.insert(par, at, fpar[miss]), np.insert(act, at, fact[miss]))


def merge(visited: np.ndarray, parts: list[tuple]) -> tuple:
    """Candidates (fp, words, parent, action) from every sender -> the new states not in
    ``visited`` (one parent each, sorted by fingerprint) and the new visited set."""
    got = _candidates(parts)
    if got is None:
        return (_EMPTY, None, _EMPTY, np.zeros(0, np.int32)), visited
    fp, S, par, act = got
    fresh = explore.absent(visited, fp)
    fp, S, par, act = fp[fresh], S[:, fresh], par[fresh], act[fresh]
    return (fp, S, par, act), explore.insert_sorted(visited, fp)


def check_invariants(comp: Compiled, S: np.ndarray, fps: np.ndarray, names: set,
                     block: int = BLOCK) -> dict:
    """-> {invariant: least violating fingerprint} over the states S (sorted by fingerprint).
    Every invariant at once, block by block, as the core checks a level (shared field reads)."""
    return {name: int(fps[i]) for name, i in comp.first_violations(names, S, block).items()}


def combine(sums: list[dict]) -> tuple[dict, int | None, dict, int]:
    """The owners' summaries of one level -> (transition property -> least (pre-state
    fingerprint, instance), least deadlocked fingerprint or None, invariant -> least violating
    fingerprint, new states)."""
    tviol: dict = {}
    for s in sums:
        for name, cand in s["tviol"].items():
            if name not in tviol or tuple(cand) < tviol[name]:
                tviol[name] = tuple(cand)
    dl = [s["deadlock"] for s in sums if s["deadlock"] is not None]
    inv: dict = {}
    for s in sums:
        for name, f in s["inv"].items():
            inv[name] = min(inv.get(name, f), f)
    return tviol, (min(dl) if dl else None), inv, sum(s["new"] for s in sums)


class Rule:
    """The single process's decisions between levels (checker/explore.py): which properties
    are pending, the stopping rule, and where each violation was found. The driver holds one;
    in barrier mode every owner holds a copy, fed the same summaries, so all stop together."""

    def __init__(self, comp: Compiled, pending: explore.Pending, max_depth: int | None):
        self.comp, self.pending, self.max_depth = comp, pending, max_depth
        self.where: dict[str, tuple] = {}          # property -> (kind, fingerprint, depth, k)

    def pending_tprops(self):
        return {p for p in self.pending.left if p in self.comp.tprop_names}

    def pending_invariants(self):
        return {p for p in self.pending.left if p in self.comp.invariants}

    def record(self, depth, tviol, deadlock, inv_next, new):
        """One level's merged summary, in the core's order."""
        for name, (fp, k) in sorted(tviol.items()):
            self.where[name] = ("transition", fp, depth, k)
            self.pending.decide(name)
        if deadlock is not None and DEADLOCK in self.pending:
            self.where[DEADLOCK] = ("deadlock", deadlock, depth, None)
            self.pending.decide(DEADLOCK)
        if new:
            for name, fp in sorted(inv_next.items()):
                self.where[name] = ("invariant", fp, depth + 1, None)
                self.pending.decide(name)

    def stop_before(self, depth) -> str | None:
        return self.pending.stop_before(depth, self.max_depth)


# ---------------------------------------------------------------------------------------------
# The owners' side (Spark tasks): plain data in, plain data out

_COMPILED: dict = {}


def _compiled(ctx: dict) -> tuple[Compiled, object]:
    """The compiled model and its symmetry (None unless asked for and declared), once per
    Python worker."""
    key = (ctx["spec"], ctx["variant"], tuple(sorted(ctx["params"].items())), tuple(ctx["props"]),
           ctx.get("symmetry", False))
    if key not in _COMPILED:
        model = spark.model_for(ctx["spec"], ctx["variant"], ctx["params"])
        sym = symmetry_.for_model(model) if ctx.get("symmetry") else None
        _COMPILED[key] = (Compiled(model, ctx["props"]), sym)
    return _COMPILED[key]


def _one(it):
    """The partition's single record. The iterator is drained: a Python worker that leaves
    input unread is not reused by Spark, and a fresh one costs 0.3-1 s here (imports, compiling
    the model)."""
    records = list(it)
    if len(records) != 1:
        raise RuntimeError(f"kcheck: an owner's partition holds {len(records)} stores")
    return records[0]


def _walk_levels(levels: dict, requests: dict) -> dict:
    """Walks each request (name -> [fingerprint, depth, actions so far in reverse]) whose state
    this owner holds back through the parents it holds -> the requests it moved, where each
    stopped: a parent another owner holds, or a depth the owner does not hold (the driver's
    prefix). An owner is known by what it holds, not by ``owner_of``: a parent is kept as its
    fingerprint, and states of several words owned by their bits cannot be told their owner
    from it."""
    def at(fp, depth) -> int:            # the state's position at that depth here, or -1
        if depth not in levels:
            return -1
        lfp = levels[depth][0]
        i = int(np.searchsorted(lfp, np.uint64(fp)))
        return i if i < len(lfp) and int(lfp[i]) == fp else -1
    out = {}
    for name, (fp, depth, steps) in requests.items():
        i = at(fp, depth)
        if i < 0:
            continue
        steps = list(steps)
        while i >= 0:
            _, par, act = levels[depth]
            steps.append(int(act[i]))
            fp, depth = int(par[i]), depth - 1
            i = at(fp, depth)
        out[name] = [fp, depth, steps]
    return out


def _unheld(before: dict, after: dict, prefix_depth: int):
    """A walk's round that moved none of the requests still past the driver's prefix: no
    owner holds their states (a fault: every state past the prefix has one owner)."""
    stuck = [n for n, w in after.items() if w[1] > prefix_depth and tuple(w) == tuple(before[n])]
    if stuck:
        fp, depth = after[stuck[0]][:2]
        raise RuntimeError(f"kcheck: no owner holds state {fp:#x} at depth {depth} "
                           f"(the trace of {stuck[0]})")


# -- barrier mode: one long-lived task per owner ---------------------------------------------


def _pack(fp, words, parent, action, one_word: bool = False) -> np.ndarray:
    """Candidates as one array of 64-bit rows (fingerprint, parent, action instance, words;
    a one-word state is its fingerprint, sent once)."""
    return np.vstack([fp[None], parent[None], action.astype(np.uint64)[None]] +
                     ([] if one_word else [words]))


def _unpack(a: np.ndarray) -> tuple:
    return a[0], (a[3:] if a.shape[0] > 3 else a[:1]), a[1], a[2].astype(np.int32)


def _inject_fault(ctx: dict, depth: int, me: int):
    """Tests: owner 0 fails expanding level ``fail_once_at``, once per run (a marker file in
    the run's exchange directory: a retried barrier stage starts its tasks at attempt 0)."""
    if ctx.get("fail_once_at") == depth and me == 0:
        marker = Path(ctx["exchange"]) / "fault-injected"
        if not marker.exists():
            marker.touch()
            raise RuntimeError(f"kcheck test fault: owner 0 fails expanding level {depth} once")


class _Owner:
    """One owner's state for the whole search, in its task's memory: the visited set (the
    core's, merged into in place), the frontier, and per level its states' parents."""

    def __init__(self, ctx: dict, me: int):
        self.comp, self.sym = _compiled(ctx)
        self.P, self.me, self.block = ctx["parts"], me, ctx["block"]
        self.mask = ctx.get("owner_mask")
        share = load_share(Path(ctx["exchange"]), me)
        self.visited = explore.Visited(0)
        self.visited.add(share["visited"], None)
        self.S, self.fp = share["words"], share["fp"]
        self.one_word = self.S.shape[0] == 1
        self.levels: dict[int, tuple] = {}

    def expand(self, tprops, deadlock) -> tuple[Expansion, np.ndarray]:
        ex = expand(self.comp, self.S, self.fp, tprops, deadlock, self.block,
                    None if self.sym is None else self.sym.canonical, self.visited)
        return ex, owner_of(ex.fp, self.P, self.mask, ex.words)

    def merge(self, depth: int, kept: tuple, received: list[tuple]) -> int:
        """This owner's own candidates (``kept``: already checked against its visited set while
        it expanded) and those the others sent -> its states of level ``depth`` (the
        frontier). Only what the others sent is looked up in the visited set."""
        fresh = []
        for part in received:
            new = self.visited.absent(part[0], None)
            fresh.append(part if new.all() else tuple(x[..., new] for x in part))
        got = _candidates([kept] + fresh)
        del fresh
        if got is None:
            self.fp, self.S = _EMPTY, self.S[:, :0]
            self.levels[depth] = (_EMPTY, _EMPTY, np.zeros(0, np.int32))
            return 0
        fp, S, par, act = got
        self.visited.add(fp, None)
        self.fp, self.S = fp, S
        self.levels[depth] = (fp, par, act)
        return len(fp)


def _owner_task(ctx: dict, it, bar=None):
    """Barrier mode: one owner for the whole search (see the module's docstring). ``bar``:
    what synchronises the owners (``barrier()``, ``allGather(message)``): Spark's
    BarrierTaskContext, or ``Threads`` (tests of the protocol without Spark)."""
    t_task = time.perf_counter()
    me, P = _one(it), ctx["parts"]
    if bar is None:
        from pyspark import BarrierTaskContext
        bar = BarrierTaskContext.get()
    # one directory per attempt of the stage: a retried stage never reads a failed one's files
    # (PySpark tells a task its own attempt, not the stage's: owner 0 names it). One round of
    # Spark's synchronisation, which takes a second here: in a thread, while the owner reads
    # its share and expands its first level (nothing is exchanged before); every later round
    # goes through files
    named: list = []
    naming = threading.Thread(target=lambda: named.append(
        next(m for m in bar.allGather(uuid.uuid4().hex if me == 0 else "") if m)), daemon=True)
    naming.start()

    def exchange() -> tuple[Path, FileSync]:
        naming.join()
        if not named:
            raise RuntimeError("kcheck: the owners' first synchronisation failed")
        where = Path(ctx["exchange"]) / named[0]
        where.mkdir(parents=True, exist_ok=True)
        return where, FileSync(where, me, P, getattr(bar, "aborted", None))
    own = _Owner(ctx, me)
    where = None
    pending = explore.Pending(ctx["props"], ctx["deadlock"])
    pending.left = set(ctx["left"])
    rule = Rule(own.comp, pending, ctx["max_depth"])
    depth = ctx["depth"]
    history: list[list[dict]] = []
    distinct = ctx["distinct"]
    ready_s = time.perf_counter() - t_task
    while not rule.stop_before(depth):
        prof = {}
        cpu = time.process_time()
        t = time.perf_counter()
        _inject_fault(ctx, depth, me)
        ex, dest = own.expand(rule.pending_tprops(), DEADLOCK in rule.pending)
        t = _lap(prof, "expand", t)
        if where is None:
            where, bar = exchange()
            t = _lap(prof, "name", t)
        kept = None
        for q in range(P):
            sel = dest == q
            part = (ex.fp[sel], ex.words[:, sel], ex.parent[sel], ex.action[sel])
            if q == me:
                kept = part
            else:
                np.save(where / f"{depth}-{me}-{q}.npy", _pack(*part, own.one_word))
        sent, away = len(ex.fp), int((dest != me).sum())
        del dest
        t = _lap(prof, "write", t)
        bar.barrier()
        t = _lap(prof, "wait", t)
        parts = []
        for p in range(P):
            if p != me:
                path = where / f"{depth}-{p}-{me}.npy"
                parts.append(_unpack(np.load(path)))
                path.unlink()
        received = len(kept[0]) + sum(len(x[0]) for x in parts)
        t = _lap(prof, "read", t)
        new = own.merge(depth + 1, kept, parts)
        del parts, kept
        t = _lap(prof, "merge", t)
        inv = check_invariants(own.comp, own.S, own.fp, rule.pending_invariants(),
                               own.block) if new else {}
        unreduced = int(own.sym.orbit_sizes(own.S).sum()) if own.sym is not None and new else new
        t = _lap(prof, "invariants", t)
        summary = {"owner": me, "transitions": ex.transitions, "cut": ex.cut,
                   "cut_only": ex.cut_only, "fired": [int(c) for c in ex.fired],
                   "tviol": {n: [int(f), int(k)] for n, (f, k) in ex.tviol.items()},
                   "deadlock": ex.deadlock, "sent": sent, "sent_away": away, "new": new,
                   "inv": inv, "received": received, "owned": own.visited.n,
                   "unreduced": unreduced, "prof": prof,
                   "cpu": time.process_time() - cpu}
        del ex
        sums = [json.loads(m) for m in bar.allGather(json.dumps(summary))]
        _lap(prof, "gather", t)
        sums[me]["prof"]["gather"] = prof["gather"]     # this owner's own view of the round
        history.append(sums)
        tviol, dl, inv_all, total_new = combine(sums)
        rule.record(depth, tviol, dl, inv_all, total_new)
        distinct += total_new
        if me == 0 and ctx.get("progress_file"):
            Path(ctx["progress_file"]).write_text(json.dumps([depth + 1, distinct, total_new]))
        if not total_new:
            break
        depth += 1
    if where is None:                  # no level was built (a bound or a stop came first)
        where, bar = exchange()
    t = time.perf_counter()
    # the traces: every owner walks the violations through the parents it owns, in rounds
    walking = {name: [fp, d, []] for name, (_, fp, d, _) in rule.where.items()}
    rounds = 0
    while any(w[1] > ctx["depth"] for w in walking.values()):
        away = {n: w for n, w in walking.items() if w[1] > ctx["depth"]}
        for m in bar.allGather(json.dumps(_walk_levels(own.levels, away))):
            walking.update(json.loads(m))
        _unheld(away, walking, ctx["depth"])
        rounds += 1
    walk_s = time.perf_counter() - t
    # the directory stays: another owner may still be reading the last round's messages (the
    # driver removes the run's directory after the job)
    yield {"owner": me, "history": history if me == 0 else None,
           "walking": walking if me == 0 else None, "rounds": rounds, "ready_s": ready_s,
           "task_s": time.perf_counter() - t_task, "walk_s": walk_s}


class FileSync:
    """``barrier()`` and ``allGather(message)`` among the owners through files in their exchange
    directory: each writes its message for round r (written whole, then renamed into place) and
    polls, every half millisecond at first and at most every 10 ms, until every owner's is
    there. Spark's own BarrierTaskContext calls cost about a second each here: its task thread
    sleeps a whole second before it looks at the coordinator's answer again (measured: the
    wait phases of barrier mode came in steps of 1.00 s), which made every level cost 2 s."""

    def __init__(self, where: Path, me: int, parts: int, aborted: threading.Event | None = None):
        self.where, self.me, self.parts, self.round = where, me, parts, 0
        # owners as threads (tests): another owner's failure ends the wait (it waited for ever)
        self.aborted = aborted

    def allGather(self, message: str = "") -> list[str]:
        r = self.round
        self.round += 1
        mine = self.where / f"sync-{r}-{self.me}"
        tmp = self.where / f".sync-{r}-{self.me}"
        tmp.write_text(message)
        os.replace(tmp, mine)
        paths = [self.where / f"sync-{r}-{p}" for p in range(self.parts)]
        pause = 0.0005
        while not all(p.exists() for p in paths):
            if self.aborted is not None and self.aborted.is_set():
                raise RuntimeError("kcheck: another owner failed; this one stops waiting for it")
            time.sleep(pause)
            pause = min(0.01, pause * 2)
        got = [p.read_text() for p in paths]
        if r >= 2:
            # every owner wrote round r-1 after reading round r-2: nobody reads it any more
            (self.where / f"sync-{r - 2}-{self.me}").unlink(missing_ok=True)
        return got

    def barrier(self):
        self.allGather("")


class Threads:
    """Barrier mode's synchronisation for owners run as threads of one process (tests):
    ``barrier()`` and ``allGather(message)`` as Spark's BarrierTaskContext has them."""

    def __init__(self, parts: int):
        self._barrier = threading.Barrier(parts)
        self._messages = [""] * parts
        self.aborted = threading.Event()

    def view(self, me: int):
        outer = self

        class _View:
            aborted = outer.aborted

            def barrier(self):
                outer._barrier.wait()

            def allGather(self, message: str = ""):
                outer._messages[me] = message
                outer._barrier.wait()
                got = list(outer._messages)
                outer._barrier.wait()       # nobody writes the next round's before all read
                return got
        return _View()


def run_owners_in_threads(ctx: dict, shares: list[dict]) -> list[dict]:
    """Barrier mode's owners as threads of this process, no Spark (tests of the protocol)."""
    sync = Threads(len(shares))
    outs: list = [None] * len(shares)
    errors: list = []

    def run(i):
        try:
            outs[i] = next(_owner_task(ctx, iter([shares[i]]), sync.view(i)))
        except BaseException as e:        # noqa: BLE001 (reported to the caller)
            errors.append(e)
            sync.aborted.set()
            sync._barrier.abort()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(shares))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outs


def _keyed_by_owner(out: dict):
    return 0, out


def _lap(prof: dict, name: str, t: float) -> float:
    now = time.perf_counter()
    prof[name] = now - t
    return now


# -- levels mode: one Spark job per level, the stores in Spark's cache -----------------------


def _expand_task(ctx, depth, tprops, deadlock, index, it):
    """Stage 1: an owner's frontier -> (owner, payload) for every owner, its statistics to
    itself."""
    t0 = time.perf_counter()
    store = _one(it)
    t1 = time.perf_counter()
    if ctx.get("fail_once_at") == depth and index == 0:
        from pyspark import TaskContext
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError(f"kcheck test fault: owner 0 fails expanding level {depth} once")
    if store["owner"] != index:
        raise RuntimeError(f"kcheck: partition {index} holds owner {store['owner']}'s store")
    comp, sym = _compiled(ctx)
    P = ctx["parts"]
    ex = expand(comp, store["words"], store["fp"], tprops, deadlock, ctx["block"],
                None if sym is None else sym.canonical)
    dest = owner_of(ex.fp, P, ctx.get("owner_mask"), ex.words)
    for q in range(P):
        sel = dest == q
        yield q, (ex.fp[sel], ex.words[:, sel], ex.parent[sel], ex.action[sel])
    yield index, {"owner": store["owner"], "transitions": ex.transitions, "cut": ex.cut,
                  "fired": ex.fired, "cut_only": ex.cut_only,
                  "tviol": ex.tviol, "deadlock": ex.deadlock, "sent": len(ex.fp),
                  "sent_away": int((dest != store["owner"]).sum()),
                  "prof": {"read store": t1 - t0, "expand": time.perf_counter() - t1}}


def _identity(k):
    return k


def _gather(it):
    yield [v for _, v in it]


def _merge_task(ctx, depth, invariants, pair):
    """Stage 2: an owner's store and what it received -> its store one level deeper."""
    t0 = time.perf_counter()
    store, received = pair
    comp, sym = _compiled(ctx)
    stats = next(v for v in received if isinstance(v, dict))
    parts = [v for v in received if not isinstance(v, dict)]
    (fp, S, par, act), visited = merge(store["visited"], parts)
    if S is None:
        S = np.zeros((store["words"].shape[0], 0), dtype=np.uint64)
    t1 = time.perf_counter()
    inv = check_invariants(comp, S, fp, invariants, ctx["block"]) if len(fp) else {}
    unreduced = int(sym.orbit_sizes(S).sum()) if sym is not None else len(fp)
    levels = dict(store["levels"])
    levels[depth] = (fp, par, act)
    prof = dict(stats["prof"], merge=t1 - t0, invariants=time.perf_counter() - t1)
    summary = dict(stats, new=len(fp), inv=inv, received=sum(len(p[0]) for p in parts),
                   owned=len(visited), unreduced=unreduced, prof=prof)
    return {"owner": store["owner"], "visited": visited, "fp": fp, "words": S, "levels": levels,
            "summary": summary}


def _summary(store):
    return store["summary"]


def _walk(requests: dict, it):
    """A lookup job's task: the requests whose states this owner holds, walked through its
    store."""
    store = _one(it)
    return list(_walk_levels(store["levels"], requests).items())


# ---------------------------------------------------------------------------------------------
# The driver


@dataclass
class Ownership:
    """How a run was spread, for people and for the benchmark."""
    master: str
    owners: int
    mode: str = "barrier"
    prefix_depth: int = 0             # the levels 0..prefix_depth were built in the driver
    prefix_states: int = 0
    prefix_s: float = 0.0             # the driver's prefix (and handing it over)
    in_driver: bool = False           # the prefix answered the whole search
    spark_levels: int = 0             # levels built by the owners
    spark_s: float = 0.0              # wall time of the owners' levels (their job, or jobs)
    job_s: float = 0.0                # barrier mode: the whole job, from submitting to collecting
    ready_s: float = 0.0              # barrier mode: job start until the slowest owner is ready
    walk_s: float = 0.0               # the owners' walk of the traces
    lookup_jobs: int = 0
    owner_states: list[int] = field(default_factory=list)
    sent: int = 0                     # candidate successors exchanged (after local dedup)
    sent_away: int = 0                # of which to another owner
    levels: list[int] = field(default_factory=list)   # distinct states per depth
    # per level on Spark: each phase's time, the slowest owner's ("spark": the job's wall time
    # that no owner's phase accounts for, levels mode)
    profile: list[dict] = field(default_factory=list)
    # each owner's time at work on the levels (not waiting for the others), and its CPU time
    # (barrier mode: the processor time of its Python worker over the levels)
    owner_busy_s: list[float] = field(default_factory=list)
    owner_cpu_s: list[float] = field(default_factory=list)
    startup_s: float = 0.0            # Spark's start (in a thread, beside the driver's prefix)
    warm_s: float = 0.0               # then the owners' Python workers started, the model compiled
    waited_s: float = 0.0             # the driver's wait for them after its prefix
    spark_ready: bool = False         # Spark had started when the driver's prefix ended
    owner_bits: int = 0               # owned by this many state bits (owner_mask); 0: fingerprint
    crossing: float = 0.0             # the sampled steps' share that crosses owners

    @property
    def per_level_s(self) -> float:
        return self.spark_s / self.spark_levels if self.spark_levels else 0.0

    def line(self) -> str:
        if self.in_driver:
            return (f"spark ({self.master}): ownership; answered by the driver's breadth-first "
                    f"prefix ({self.prefix_states:,} states, {self.prefix_s:.1f} s); no Spark "
                    f"level was needed" + ("" if self.spark_ready or self.master is None else
                                           " (Spark was still starting)"))
        total = sum(self.owner_states)
        share = [100.0 * n / total for n in self.owner_states] if total else [0.0]
        how = ("one barrier job, the owners' state in their tasks" if self.mode == "barrier"
               else "one Spark job a level")
        spark_states = sum(self.levels[self.prefix_depth + 1:])
        rate = (f", {spark_states / sum(self.owner_cpu_s):,.0f} states per CPU second an owner"
                if self.mode == "barrier" and sum(self.owner_cpu_s) > 0 else "")
        by = (f"{self.owner_bits} state bits that steps rarely change ({100 * self.crossing:.1f} "
              f"% of sampled steps cross owners)" if self.owner_bits else "fingerprint")
        return (f"spark ({self.master}): ownership by {by} over {self.owners} owners "
                f"({how}); Spark started in {self.startup_s + self.warm_s:.1f} s while the "
                f"driver searched levels 0-{self.prefix_depth} ({self.prefix_states:,} states, "
                f"{self.prefix_s:.1f} s); {self.spark_levels} levels on Spark "
                f"({self.per_level_s:.2f} s a level{rate}); each owner holds "
                f"{min(share):.0f}-{max(share):.0f} % of the states; {self.sent:,} successors "
                f"exchanged, {self.sent_away:,} to another owner; no state explored twice")


class _Search(Rule):
    """The single process's loop over levels (checker/explore.py): the driver's prefix is the
    core's Explorer; the levels after it are expanded by the owners, and their merged summaries
    go through the same stopping rule (``Rule``)."""

    def __init__(self, model, props, check_deadlock, max_depth, block=BLOCK, sym=None,
                 comp=None, res=None):
        self.model, self.props = model, props
        self.comp = comp or Compiled(model, props)
        self.check_deadlock = check_deadlock
        self.res = res or SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                                       deadlock_checked=check_deadlock)
        self.block, self.sym = block, sym
        self.prefix = explore.Explorer(model, self.comp, props, check_deadlock, keyed=False,
                                       counterexample=Counterexample, block=block,
                                       canonical=None if sym is None else sym.canonical)
        super().__init__(self.comp, self.prefix.pending, max_depth)
        self.levels: list[int] = []
        self.fired = self.prefix.fired             # steps per action instance, prefix and owners
        self.owner_mask = None                     # owner_mask's choice at the hand-over
        self.handed = None                         # the prefix's (fingerprints, words) a level

    def record(self, depth, tviol, deadlock, inv_next, new):
        super().record(depth, tviol, deadlock, inv_next, new)
        if new:
            self.levels.append(new)

    def absorb(self, depth: int, sums: list[dict], dist: Ownership, wall: float | None = None) -> int:
        """One level's summaries from the owners, into the result -> its new states."""
        res = self.res
        sums = sorted(sums, key=lambda s: s["owner"])
        tviol, dl, inv, new = combine(sums)
        res.transitions += sum(s["transitions"] for s in sums)
        res.cut_by_bounds += sum(s["cut"] for s in sums)
        res.cut_only_states += sum(s["cut_only"] for s in sums)
        res.unreduced_states += sum(s["unreduced"] for s in sums)
        for s in sums:
            for k, c in enumerate(s["fired"]):
                self.fired[k] += c
        dist.sent += sum(s["sent"] for s in sums)
        dist.sent_away += sum(s["sent_away"] for s in sums)
        dist.owner_states = [s["owned"] for s in sums]
        phases = sorted({k for s in sums for k in s["prof"]}, key=lambda k: (k not in PHASES, k))
        prof = {k: max(s["prof"].get(k, 0.0) for s in sums) for k in phases}
        # the level's wall time: barrier mode, the slowest owner's round (they end together)
        level = wall if wall is not None else max(sum(s["prof"].values()) for s in sums)
        if wall is not None:
            # levels mode: what the two stages' slowest owners do not account for is Spark's
            # (scheduling, moving the stores and the successors between the JVM and Python)
            prof["spark"] = max(0.0, wall - sum(prof.values()))
        prof["level"], prof["states"] = level, new
        dist.profile.append(prof)
        busy = [sum(v for k, v in s["prof"].items() if k not in ("wait", "gather", "name"))
                for s in sums]
        dist.owner_busy_s = [a + b for a, b in zip(dist.owner_busy_s or [0.0] * len(busy), busy)]
        cpu = [s.get("cpu", 0.0) for s in sums]
        dist.owner_cpu_s = [a + b for a, b in zip(dist.owner_cpu_s or [0.0] * len(cpu), cpu)]
        self.record(depth, tviol, dl, inv, new)
        return new


def check(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
          deadlock: bool | None = None, master: str = "local[*]", owners: int | None = None,
          verbose: bool = False, progress=None, prefix_states: int = PREFIX_STATES,
          prefix_depth: int | None = None, fail_once_at: int | None = None,
          block: int = BLOCK, symmetry: bool = False, mode: str | None = None,
          threads: bool = False) -> SearchResult:
    """Explore ``model`` on Spark, each state by its owner; returns the SearchResult bfs.search
    would return (see the module's docstring) with a ``distribution`` attribute (Ownership).
    The driver builds the levels itself until one has ``prefix_states`` states or it reaches
    ``prefix_depth``. ``progress(depth, distinct, frontier)`` is called after every level.
    ``fail_once_at`` (tests only): owner 0's first attempt at expanding that level fails.
    ``block``: states expanded at once (tests: small blocks make small levels span several).
    ``symmetry``: one representative per orbit of the spec's declared symmetry, as bfs.search.
    ``mode``: "barrier" (one job, the default when every owner has a task slot) or "levels"
    (one job per level). ``threads`` (tests, with master None): the barrier mode's owners run
    as threads of this process, without Spark."""
    t0 = time.perf_counter()
    spec = model.spec
    props = list(spec.properties) if properties is None else list(properties)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    if threads and (master or mode == "levels"):
        raise ValueError("threads: the barrier mode's owners without Spark (master None)")
    # master None: the driver alone (tests of the numpy core); it must then answer by itself.
    # Otherwise Spark starts in a thread while the driver searches (_Starter)
    exchange_root()                          # a wrong exchange directory fails before the search
    starter = _Starter(master, verbose, owners, mode) if master else None
    dist = Ownership(master, owners or 1, mode or "barrier")
    comp = Compiled(model, props)
    res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                       deadlock_checked=check_deadlock)
    sym = symmetry_.prepare(model, comp, res, symmetry)
    srch = _Search(model, props, check_deadlock, max_depth, block, sym, comp, res)
    pre = srch.prefix
    if starter is not None:
        starter.warm(_ctx(srch, model, 0, 0, None, symmetry and sym is not None))

    # level 0, and the prefix, in the driver: the core's loop, one owner
    prefix_fp = [pre.start(initial_words(model))]
    srch.levels.append(len(prefix_fp[0]))
    # states of several words may be owned by their bits, which their fingerprints do not
    # tell: the driver keeps its levels' words to split its visited set at the hand-over
    kept = {"words": [pre.frontier] if pre.frontier.shape[0] > 1 else None, "bytes": 0}
    if sym is not None:
        res.unreduced_states = int(sym.orbit_sizes(pre.frontier).sum())

    def level_added(depth, fp):
        prefix_fp.append(fp)
        if kept["words"] is not None:
            kept["words"].append(pre.frontier)
            kept["bytes"] += pre.frontier.nbytes
            if kept["bytes"] > PREFIX_WORDS_BYTES:
                kept["words"] = None
        srch.levels.append(len(fp))
        if sym is not None:
            res.unreduced_states += int(sym.orbit_sizes(pre.frontier).sum())
        if progress:
            progress(depth, pre.visited.n, len(fp))

    def hand_over() -> bool:
        """Before each level: whether the owners take the search from here. At
        ``prefix_depth`` when given; else once a level has ``prefix_states`` states and Spark
        is ready (until then the driver goes on searching, as one process would)."""
        if prefix_depth is not None and pre.depth >= prefix_depth:
            return True
        return pre.frontier.shape[1] >= prefix_states and (starter is None or starter.ready())

    stop, store, walking, sc = None, None, {}, None
    try:
        stop = pre.run(max_depth, until=hand_over, on_level=level_added)
        depth = pre.depth
        dist.prefix_depth, dist.prefix_states = depth, pre.visited.n
        dist.prefix_s = time.perf_counter() - t0
        needed = stop is None and pre.frontier.shape[1] > 0
        if starter is not None and (needed or starter.ready()):
            # a search the driver finished does not wait for Spark (the JVM ends with this
            # process), but reports a Spark that could not start when that is known
            t = time.perf_counter()
            sc = starter.wait()
            dist.waited_s = time.perf_counter() - t
            dist.startup_s, dist.warm_s = starter.startup_s, starter.warm_s
            dist.owners = owners or sc.defaultParallelism
            dist.mode = mode or ("barrier" if dist.owners <= sc.defaultParallelism else "levels")
            dist.spark_ready = True
        P, mode = dist.owners, dist.mode
        if needed:
            if sc is None and not threads:
                raise spark.SparkError("the search outgrew the driver's prefix and no Spark master was given")
            if pre.frontier.shape[0] > 1 and kept["words"] is None:
                # the prefix's words were let go: its visited set cannot be split by bits
                srch.owner_mask, dist.crossing = None, 1.0 - 1.0 / P
            else:
                srch.owner_mask, dist.crossing = owner_mask(
                    comp, pre.frontier, P, None if sym is None else sym.canonical)
            dist.owner_bits = owner_bits(srch.owner_mask)
            if kept["words"] is not None:
                srch.handed = list(zip(prefix_fp, kept["words"]))
            kept["words"] = None
            run = _barrier if mode == "barrier" else _levels
            store, walking, stop = run(sc, srch, model, P, pre.visited.sorted_fp,
                                       pre.frontier, prefix_fp[-1], depth, dist, progress,
                                       fail_once_at, symmetry and sym is not None)
        else:
            dist.in_driver = True
    except KeyboardInterrupt:
        stop = "interrupted"
    try:
        res.stop_reason = stop
        res.exhaustive = stop is None
        res.depth = len(srch.levels) - 1
        res.distinct_states = sum(srch.levels)
        if sym is None:
            res.unreduced_states = 0
        res.transitions += pre.transitions
        res.cut_by_bounds += pre.cut
        res.cut_only_states += pre.cut_only
        res.fired = list(srch.fired)
        if store is not None:
            walking = _lookup(sc, srch, store, P, dist)
        res.found = _traces(srch, prefix_fp, walking)
    finally:
        if store is not None:
            store.unpersist()
    if sym is not None:
        symmetry_.finish(model, comp, sym, res)
    dist.levels = list(srch.levels)
    if dist.in_driver:
        dist.owner_states = [res.distinct_states]
    res.elapsed_s = time.perf_counter() - t0
    res.distribution = dist
    return res


class _Starter:
    """Spark's start, in a thread beside the driver's prefix: the session (the JVM: 5-35 s on
    this machine), then, for a barrier job, one small job on every owner's task slot that
    starts its Python worker and compiles the model there (``_warm``; Spark reuses the worker
    for the barrier job's task). The driver searches meanwhile, as one process would, and
    hands over at the first level past ``PREFIX_STATES`` once this is done: Spark's start
    costs the run only the CPU it takes from the driver."""

    def __init__(self, master: str, verbose: bool, owners: int | None, mode: str | None):
        self.owners, self.mode = owners, mode
        self.sc = self.error = None
        self.startup_s = self.warm_s = 0.0
        self._ctx: dict | None = None
        self._ctx_set = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(master, verbose), daemon=True,
                                        name="kcheck-spark-start")
        self._thread.start()

    def warm(self, ctx: dict):
        """What the owners' workers compile (the run's spec, variant, parameters)."""
        self._ctx = ctx
        self._ctx_set.set()

    def _run(self, master: str, verbose: bool):
        t = time.perf_counter()
        try:
            sc = spark.session(master, verbose)
            self.startup_s = time.perf_counter() - t
            self._ctx_set.wait()
            t = time.perf_counter()
            P = self.owners or sc.defaultParallelism
            if self.mode != "levels" and P <= sc.defaultParallelism:
                add_spec_file(sc, self._ctx["spec"])
                sc.parallelize(range(P), P).mapPartitions(
                    functools.partial(_warm, self._ctx)).collect()
            self.warm_s = time.perf_counter() - t
            self.sc = sc
        except BaseException as e:        # noqa: BLE001 (raised in the caller's thread)
            self.error = e
        finally:
            self._done.set()

    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self):
        """-> the SparkContext, once started (Spark's own error, raised here)."""
        while not self._done.wait(0.2):      # a short wait: Ctrl-C stays responsive
            pass
        if self.error is not None:
            raise self.error
        return self.sc


def _warm(ctx: dict, it):
    """A Python worker made ready for an owner: input drained (so Spark reuses the worker),
    the model compiled into its cache."""
    for _ in it:
        pass
    _compiled(ctx)
    yield os.getpid()


def add_spec_file(sc, ref: str):
    """A spec given by path shipped to the executors, once a session."""
    added = _ADDED.setdefault(id(sc), set())
    if ref.endswith(".py") and ref not in added:
        sc.addFile(ref)
        added.add(ref)


_ADDED: dict = {}


def _ctx(srch: _Search, model, P: int, depth: int, fail_once_at, symmetry: bool) -> dict:
    return {"spec": spark.spec_ref(model.spec), "variant": model.variant,
            "params": model.params.as_dict(), "props": srch.props, "parts": P,
            "fail_once_at": fail_once_at, "block": srch.block, "symmetry": symmetry,
            "deadlock": srch.check_deadlock, "max_depth": srch.max_depth, "depth": depth,
            "left": sorted(srch.pending.left), "owner_mask": srch.owner_mask}


def _split(P: int, visited, S, fp, mask=None, prefix=None):
    """The hand-over's shares -> for each owner (the fingerprints it has seen, its
    fingerprints and words of the frontier). States of several words owned by their bits
    (a tuple ``mask``) are told their owner by their words, which the visited set does not
    keep: ``prefix`` then holds each level's (fingerprints, words), kept by the driver."""
    so = owner_of(fp, P, mask, S)
    if mask is None or isinstance(mask, int):
        vo = owner_of(visited, P, mask)
        seen = [visited[vo == o] for o in range(P)]
    else:
        if prefix is None or sum(len(f) for f, _ in prefix) != len(visited):
            raise RuntimeError("kcheck: the prefix's states are needed to split its visited set")
        lo = [owner_of(None, P, mask, w) for _, w in prefix]
        seen = [np.sort(np.concatenate([f[o_ == o] for (f, _), o_ in zip(prefix, lo)]))
                for o in range(P)]
    return [(seen[o], fp[so == o], S[:, so == o]) for o in range(P)]


def _shares(P: int, visited, S, fp, mask=None, prefix=None) -> list[dict]:
    return [{"owner": o, "visited": v, "fp": f, "words": w, "levels": {}, "summary": None}
            for o, (v, f, w) in enumerate(_split(P, visited, S, fp, mask, prefix))]


SHARE_ARRAYS = ("visited", "fp", "words")


def save_shares(where: Path, P: int, visited, S, fp, mask=None, prefix=None):
    """The driver's hand-over, each owner's share as .npy files in the run's exchange directory
    (the fingerprints it has seen, its part of the frontier): written once, read by memory
    copy, not pickled through the JVM; a rerun stage reads them again."""
    for o, share in enumerate(_split(P, visited, S, fp, mask, prefix)):
        for name, a in zip(SHARE_ARRAYS, share):
            np.save(where / f"share-{o}-{name}.npy", a)


def load_share(where: Path, me: int) -> dict:
    return {name: np.load(where / f"share-{me}-{name}.npy") for name in SHARE_ARRAYS}


def _barrier(sc, srch: _Search, model, P, visited, S, fp, depth, dist, progress, fail_once_at,
             symmetry):
    """The levels after the prefix, one barrier job -> (None, the walks, stop)."""
    ctx = _ctx(srch, model, P, depth, fail_once_at, symmetry)
    if sc is not None:
        add_spec_file(sc, ctx["spec"])
    root = exchange_root() / f"kcheck-owners-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    root.mkdir(parents=True)
    ctx["exchange"] = str(root)
    ctx["distinct"] = srch.prefix.visited.n
    poller = None
    if progress:
        ctx["progress_file"] = str(root / "progress.json")
        poller = _Poller(Path(ctx["progress_file"]), progress)
    t = time.perf_counter()
    stop = None
    try:
        save_shares(root, P, visited, S, fp, ctx["owner_mask"], srch.handed)
        srch.handed = None
        del visited, S, fp
        shares = list(range(P))
        if sc is None:
            outs = run_owners_in_threads(ctx, shares)
        else:
            # the barrier stage ends in a shuffle (of the P small results): Spark reruns a failed
            # barrier stage only when it is a shuffle map stage, never a result stage
            outs = (sc.parallelize(shares, P).barrier()
                    .mapPartitions(functools.partial(_owner_task, ctx))
                    .map(_keyed_by_owner).partitionBy(1, _identity).values().collect())
    except KeyboardInterrupt:
        if sc is not None:
            sc.cancelAllJobs()
        return None, {}, "interrupted"
    finally:
        if poller:
            poller.stop()
        shutil.rmtree(root, ignore_errors=True)
    dist.job_s = time.perf_counter() - t
    first = next(o for o in outs if o["owner"] == 0)
    dist.ready_s = max(o["ready_s"] for o in outs)
    dist.walk_s = max(o["walk_s"] for o in outs)
    dist.lookup_jobs = first["rounds"]
    for sums in first["history"]:
        new = srch.absorb(depth, sums, dist)
        dist.spark_levels += 1
        if not new:
            break
        depth += 1
    else:
        stop = srch.stop_before(depth)
    dist.spark_s = sum(p["level"] for p in dist.profile)
    return None, {n: tuple(w) for n, w in first["walking"].items()}, stop


class _Poller:
    """Reads the progress owner 0 writes after each level (barrier mode) for ``progress``."""

    def __init__(self, path: Path, progress):
        self.path, self.progress, self.done = path, progress, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        last = None
        while not self.done.wait(0.25):
            try:
                now = tuple(json.loads(self.path.read_text()))
            except (OSError, ValueError):
                continue
            if now != last:
                self.progress(*now)
                last = now

    def stop(self):
        self.done.set()
        self.thread.join()


def _levels(sc, srch: _Search, model, P, visited, S, fp, depth, dist, progress, fail_once_at,
            symmetry):
    """The levels after the prefix, one Spark job each -> (final store RDD, {}, stop)."""
    from pyspark import StorageLevel
    ctx = _ctx(srch, model, P, depth, fail_once_at, symmetry)
    add_spec_file(sc, ctx["spec"])
    store = sc.parallelize(_shares(P, visited, S, fp, ctx["owner_mask"], srch.handed), P).persist(
        StorageLevel.MEMORY_AND_DISK)
    del visited, S, fp
    srch.handed = None
    stop = None
    try:
        while True:
            stop = srch.stop_before(depth)
            if stop:
                break
            t = time.perf_counter()
            exp = store.mapPartitionsWithIndex(functools.partial(
                _expand_task, ctx, depth, srch.pending_tprops(), DEADLOCK in srch.pending))
            inc = exp.partitionBy(P, _identity).mapPartitions(_gather)
            nxt = store.zip(inc).map(functools.partial(_merge_task, ctx, depth + 1,
                                                       srch.pending_invariants()))
            nxt.persist(StorageLevel.MEMORY_AND_DISK)
            if (depth + 1) % CHECKPOINT_EVERY == 0:
                nxt.localCheckpoint()
            sums = nxt.map(_summary).collect()
            store.unpersist()
            store = nxt
            wall = time.perf_counter() - t
            dist.spark_s += wall
            dist.spark_levels += 1
            new = srch.absorb(depth, sums, dist, wall)
            if not new:
                break
            depth += 1
            if progress:
                progress(depth, sum(srch.levels), new)
    except KeyboardInterrupt:
        stop = "interrupted"
    return store, {}, stop


def _lookup(sc, srch: _Search, store, P, dist) -> dict:
    """Levels mode: the violations walked back through the owners' stores, one lookup job per
    hand-over between owners (all violations at once), down to the driver's prefix."""
    walking = {name: (fp, depth, []) for name, (_, fp, depth, _) in srch.where.items()}
    while True:
        away = {n: w for n, w in walking.items() if w[1] > dist.prefix_depth}
        if not away:
            return walking
        # every owner looks: an owner is known by the states it holds (_walk_levels)
        for n, w in sc.runJob(store, functools.partial(_walk, away), list(range(P))):
            walking[n] = tuple(w)
        _unheld(away, walking, dist.prefix_depth)
        dist.lookup_jobs += 1


def _traces(srch: _Search, prefix_fp, walking: dict) -> dict:
    """Every violation as a trace: those the driver's prefix found are the core's already; the
    others, walked back through the owners (``walking``: name -> where the walk reached the
    prefix and the actions on the way, in reverse), are finished through the prefix to an
    initial state."""
    res, pre = srch.res, srch.prefix
    found = dict(pre.found)
    for name, (kind, fp, depth, k) in srch.where.items():
        fp, depth, rev = walking.get(name, (fp, depth, []))
        i = int(np.searchsorted(prefix_fp[depth], np.uint64(fp)))
        initial, steps = pre.trace_to(depth, i)
        steps += list(rev)[::-1] + ([k] if kind == "transition" else [])
        found[name] = Counterexample(name, kind, initial, steps)
    return {p: found[p] for p in res.properties if p in found}
