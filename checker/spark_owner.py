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
   visited set, frontier and parent links, in its own memory, for the whole search. Each owner
   is the core's ``explore.Explorer`` over its share (``_OwnerShare``): the core's loop over
   levels, its block step (the compiled numpy code, steps that leave their state unchanged
   dropped before any sort, its own successors checked against its visited set while it
   gathers them, every invariant checked at once) and its stopping rule. What the share adds
   is the end of a level and the merge of what was found: each owner writes its successors for
   each other owner as one packed array (fingerprint, parent fingerprint, action instance,
   words: 8 bytes a word) to the exchange directory (``exchange_root``); a barrier; each owner
   reads what it was sent, drops what it has seen and keeps one parent per new state; then one
   ``allGather`` of the owners' small summaries (the least violating fingerprint per property,
   by the core's merge rule ``explore.keep_least``) gives every owner's core the same
   findings, so each decides as one process would and they stop together. No Spark job,
   shuffle or serialisation per level: a level costs the work, the exchange through files and
   two round trips of ``FileSync`` (files in the exchange directory; Spark's own barrier()
   took a second each).
3. Traces: when the search stops, the owners walk each violation back through the parents they
   hold, handing over to the owner that holds the next parent (one ``allGather`` per hand-over;
   a parent is known by its fingerprint, which does not tell the owner of a wider state), down to
   the driver's prefix; the tasks return what their cores decided (owner 0: the stop, the
   violations, the levels' sizes, the walks; each: its counts), and the driver adds the counts,
   finishes each walk through the prefix it holds, and kcheck.trace.build replays it.

With more owners than task slots (barrier mode needs every task running at once), or with
``mode="levels"``, each level is one Spark job of two stages instead (the mode this module had
first; docs/spark.md has what each costs): the driver's core runs the loop and decides, its
share (``_LevelJobs``) holding no state, and a level's end is a job: stage 1 runs the core's
block loop on each owner's frontier and emits its successors keyed by owner, Spark shuffles
them, stage 2 zips each owner's store (a persisted RDD of one record per owner: sorted visited
fingerprints, frontier words, per level the parent fingerprint and action instance of each
state) with what it received; lineage is truncated every ``CHECKPOINT_EVERY`` levels; traces
are walked back by lookup jobs on the stores.

The exchange directory must be one that every executor reaches: on one machine (local masters,
a standalone cluster on 127.0.0.1) the default, /dev/shm or the temporary directory; on several
machines a shared filesystem, named by ``KCHECK_EXCHANGE_DIR``.

Exactness. Every state is expanded once, at its BFS depth, so distinct-state counts, levels,
verdicts and shortest trace lengths are those of checker/bfs.py by construction; the loop over
levels and the stopping rule (the all-violated and max-depth stops, the properties still
pending at each level) are the core's, fed every owner's findings merged, so a search stops
where bfs stops. Transitions and
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
# An owner's share of the core's level step (checker/explore.py)


def _outgoing(level: explore.Level, frontier_fp: np.ndarray, words: int, P: int, mask) -> tuple:
    """An owner's end of the core's block loop: the states it gathered (one per state, the
    least (action instance, parent), its own visited states dropped already), each parent
    named by its fingerprint (``frontier_fp``: the expanded level's, in level order, so the
    least parent position is the least parent fingerprint) -> ((fingerprints, words, parent
    fingerprints, action instances), each state's owner)."""
    if level.upper:
        fp, T, par, act = level.finish()
        cands = (fp, T, frontier_fp[par], act.astype(np.int32))
    else:
        cands = (_EMPTY, np.zeros((words, 0), dtype=np.uint64), _EMPTY, np.zeros(0, np.int32))
    return cands, owner_of(cands[0], P, mask, cands[1])


def _plain(found: explore.Findings) -> dict:
    """One owner's findings of a level, as plain data (its states known by fingerprint)."""
    return {"tviol": {n: [int(f), int(k)] for n, (f, k) in found.transition.items()},
            "deadlock": found.deadlock, "inv": dict(found.invariant), "new": found.new}


def _merged(sums: list[dict]) -> explore.Findings:
    """The owners' summaries of one level -> the level's findings, by the core's merge rule
    (``explore.keep_least``): what one process would have found in the whole level."""
    found = explore.Findings(new=sum(s["new"] for s in sums))
    stuck: dict = {}
    for s in sums:
        for name, cand in s["tviol"].items():
            explore.keep_least(found.transition, name, tuple(cand))
        if s["deadlock"] is not None:
            explore.keep_least(stuck, DEADLOCK, s["deadlock"])
        for name, f in s["inv"].items():
            explore.keep_least(found.invariant, name, f)
    found.deadlock = stuck.get(DEADLOCK)
    return found


def _level_profile(sums: list[dict], new: int, wall: float | None = None) -> dict:
    """One level's time per phase, the slowest owner's, for ``Ownership.profile``. ``wall``
    (levels mode): the job's wall time, of which what the owners' phases do not account for
    is Spark's (scheduling, moving the stores and the successors between the JVM and
    Python); in barrier mode the level is the slowest owner's round (they end together)."""
    phases = sorted({k for s in sums for k in s["prof"]}, key=lambda k: (k not in PHASES, k))
    prof = {k: max(s["prof"].get(k, 0.0) for s in sums) for k in phases}
    level = wall if wall is not None else max(sum(s["prof"].values()) for s in sums)
    if wall is not None:
        prof["spark"] = max(0.0, wall - sum(prof.values()))
    prof["level"], prof["states"] = level, new
    return prof


def _busy(prof: dict) -> float:
    """An owner's time at work in a level, not waiting for the others."""
    return sum(v for k, v in prof.items() if k not in ("wait", "gather", "name"))


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
        _COMPILED[key] = (Compiled(model, ctx["props"], layout=layout_of(model)), sym)
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


class _OwnerShare(explore.Whole):
    """One owner's share of each level, for the core's level step (``explore.Explorer``'s
    ``share``; the loop, the block step and the stopping rule are the core's). A state is known
    by its fingerprint: the owner's frontier is in fingerprint order, so a position's order is
    its fingerprint's. A level ends with the exchange: this owner's successors written for
    their owners, a barrier, what the others sent read, its visited states dropped, and one
    candidate kept per state, the least (action instance, parent fingerprint) (``_candidates``).
    What the owner found is merged with every other owner's through one ``allGather`` of small
    summaries (``_merged``), so every owner's core decides as one process would and all stop at
    the same level. A violation is kept as where it is, (kind, fingerprint, depth, action
    instance): its trace is walked back across owners when the search ends."""

    def __init__(self, ctx: dict, me: int, fp: np.ndarray, words: int, sym, exchange):
        self.ctx, self.me, self.P, self.sym = ctx, me, ctx["parts"], sym
        self.mask = ctx.get("owner_mask")
        self.fp, self.words = fp, words       # the frontier's fingerprints, its state's words
        self.levels: dict[int, tuple] = {}    # depth -> (fingerprints, parents', actions): walks
        self._exchange = exchange
        self.where: Path | None = None
        self.bar = None
        self.distinct = ctx["distinct"]
        self.level_sizes: list[int] = []      # the levels' states, every owner's (owner 0 reports)
        self.profile: list[dict] = []         # per level, each phase's slowest owner (owner 0)
        self.totals = {"sent": 0, "sent_away": 0, "unreduced": 0, "busy": 0.0, "cpu": 0.0}
        self.prof: dict = {}
        self.t, self.cpu = time.perf_counter(), time.process_time()

    def connect(self):
        """The run's exchange directory and the owners' FileSync, once (``_owner_task``)."""
        if self.where is None:
            self.where, self.bar = self._exchange()

    def key(self, ex, position: int) -> int:
        return int(self.fp[position])

    def finish(self, ex, level) -> tuple:
        prof = self.prof = {}
        t = _lap(prof, "expand", self.t)
        if self.where is None:
            self.connect()
            t = _lap(prof, "name", t)
        P, me, depth = self.P, self.me, ex.depth
        (fp, T, par, act), dest = _outgoing(level, self.fp, self.words, P, self.mask)
        kept = None
        for q in range(P):
            sel = dest == q
            part = (fp[sel], T[:, sel], par[sel], act[sel])
            if q == me:
                kept = part
            else:
                np.save(self.where / f"{depth}-{me}-{q}.npy", _pack(*part, self.words == 1))
        self.totals["sent"] += len(fp)
        self.totals["sent_away"] += int((dest != me).sum())
        del dest, fp, T, par, act
        t = _lap(prof, "write", t)
        self.bar.barrier()
        t = _lap(prof, "wait", t)
        received = []
        for p in range(P):
            if p != me:
                path = self.where / f"{depth}-{p}-{me}.npy"
                received.append(_unpack(np.load(path)))
                path.unlink()
        t = _lap(prof, "read", t)
        # this owner's own candidates were checked against its visited set as it gathered
        # them; only what the others sent is looked up
        fresh = [kept]
        for part in received:
            new = ex.visited.absent(part[0], None)
            fresh.append(part if new.all() else tuple(x[..., new] for x in part))
        del received, kept
        got = _candidates(fresh)
        del fresh
        if got is None:
            got = (_EMPTY, np.zeros((self.words, 0), dtype=np.uint64), _EMPTY,
                   np.zeros(0, np.int32))
        self.fp = got[0]
        self.levels[depth + 1] = (got[0], got[2], got[3])
        self.t = _lap(prof, "merge", t)
        return got if len(got[0]) else (None,) * 4

    def gather(self, ex, found: explore.Findings) -> explore.Findings:
        prof = self.prof
        t = _lap(prof, "invariants", self.t)
        if found.new:
            self.totals["unreduced"] += (found.new if self.sym is None
                                         else int(self.sym.orbit_sizes(ex.frontier).sum()))
        summary = dict(_plain(found), owner=self.me, prof=prof,
                       cpu=time.process_time() - self.cpu)
        self.totals["busy"] += _busy(prof)
        self.totals["cpu"] += summary["cpu"]
        sums = [json.loads(m) for m in self.bar.allGather(json.dumps(summary))]
        _lap(prof, "gather", t)
        merged = _merged(sums)
        if merged.new:
            self.level_sizes.append(merged.new)
            self.distinct += merged.new
        if self.me == 0:
            sums[0]["prof"]["gather"] = prof["gather"]     # this owner's own view of the round
            self.profile.append(_level_profile(sums, merged.new))
            if self.ctx.get("progress_file"):
                Path(self.ctx["progress_file"]).write_text(
                    json.dumps([ex.depth + 1, self.distinct, merged.new]))
        self.t, self.cpu = time.perf_counter(), time.process_time()
        return merged

    def located(self, ex, name, kind, depth, key, last):
        return (kind, key, depth, last)


def _owner_task(ctx: dict, it, bar=None):
    """Barrier mode: one owner for the whole search (see the module's docstring), the core's
    Explorer over its share. ``bar``: what synchronises the owners (``barrier()``,
    ``allGather(message)``): Spark's BarrierTaskContext, or ``Threads`` (tests of the protocol
    without Spark)."""
    t_task = time.perf_counter()
    me = _one(it)
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
        return where, FileSync(where, me, ctx["parts"], getattr(bar, "aborted", None))
    comp, sym = _compiled(ctx)
    share = load_share(Path(ctx["exchange"]), me)
    own = _OwnerShare(ctx, me, share["fp"], share["words"].shape[0], sym, exchange)
    ex = explore.Explorer(comp.model, comp, ctx["props"], ctx["deadlock"], keyed=False,
                          block=ctx["block"], share=own,
                          canonical=None if sym is None else sym.canonical)
    ex.take_over(share["visited"], share["words"], ctx["depth"], ctx["frontier_states"],
                 ctx["left"])
    del share
    ready_s = time.perf_counter() - t_task
    own.t, own.cpu = time.perf_counter(), time.process_time()
    # the core's loop: (tests) a fault is injected where a level begins, once the stopping
    # rule has let it begin
    stop = ex.run(ctx["max_depth"], until=lambda: _inject_fault(ctx, ex.depth, me))
    own.connect()                      # no level was built (a bound or a stop came first)
    t = time.perf_counter()
    # the traces: every owner walks the violations through the parents it owns, in rounds
    walking = {name: [fp, d, []] for name, (_, fp, d, _) in ex.found.items()}
    rounds = 0
    while any(w[1] > ctx["depth"] for w in walking.values()):
        away = {n: w for n, w in walking.items() if w[1] > ctx["depth"]}
        for m in own.bar.allGather(json.dumps(_walk_levels(own.levels, away))):
            walking.update(json.loads(m))
        _unheld(away, walking, ctx["depth"])
        rounds += 1
    walk_s = time.perf_counter() - t
    # the directory stays: another owner may still be reading the last round's messages (the
    # driver removes the run's directory after the job). Owner 0 reports what every owner
    # decided alike (the stop, the violations, the levels' sizes); each its own counts
    first = me == 0
    yield dict(own.totals, owner=me, stop=stop, found=ex.found if first else None,
               walking=walking if first else None, levels=own.level_sizes if first else None,
               profile=own.profile if first else None, rounds=rounds, ready_s=ready_s,
               task_s=time.perf_counter() - t_task, walk_s=walk_s, transitions=ex.transitions,
               cut=ex.cut, cut_only=ex.cut_only, fired=[int(c) for c in ex.fired],
               owned=ex.visited.n)


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


def _expand_task(ctx, depth, left, index, it):
    """Stage 1: an owner's frontier, through the core's block loop (``left``: the properties
    still to decide) -> (owner, payload) for every owner, its statistics to itself."""
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
    P, fps, S = ctx["parts"], store["fp"], store["words"]
    ex = explore.Explorer(comp.model, comp, ctx["props"], ctx["deadlock"], keyed=False,
                          block=ctx["block"], canonical=None if sym is None else sym.canonical)
    ex.take_over(store["visited"], S, depth, len(fps), left)
    level, tviol, stuck = ex.expand_frontier()
    (fp, T, par, act), dest = _outgoing(level, fps, S.shape[0], P, ctx.get("owner_mask"))
    del level
    for q in range(P):
        sel = dest == q
        yield q, (fp[sel], T[:, sel], par[sel], act[sel])
    yield index, {"owner": store["owner"], "transitions": ex.transitions, "cut": ex.cut,
                  "fired": ex.fired, "cut_only": ex.cut_only,
                  "tviol": {n: (int(fps[i]), k) for n, (i, k) in tviol.items()},
                  "deadlock": None if stuck is None else int(fps[stuck]), "sent": len(fp),
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
    inv = ({name: int(fp[i]) for name, i in
            comp.first_violations(invariants, S, ctx["block"]).items()} if len(fp) else {})
    unreduced = int(sym.orbit_sizes(S).sum()) if sym is not None else len(fp)
    levels = dict(store["levels"])
    levels[depth] = (fp, par, act)
    prof = dict(stats["prof"], merge=t1 - t0, invariants=time.perf_counter() - t1)
    summary = dict(stats, new=len(fp), inv=inv, received=sum(len(p[0]) for p in parts),
                   owned=len(visited), unreduced=unreduced, prof=prof)
    return {"owner": store["owner"], "visited": visited, "fp": fp, "words": S, "levels": levels,
            "summary": summary}


def _store_summary(store):
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


class _LevelJobs(explore.Whole):
    """Levels mode's share of the core's level step, in the driver: the driver holds no state
    of the levels after its prefix (its frontier there is empty, so the core's block loop in
    the driver has nothing to do); a level ends with one Spark job over the owners' stores
    (stage 1 runs the core's block loop on each owner's frontier, Spark moves each successor to
    its owner, stage 2 merges and checks the invariants), and what the owners found is merged
    as in barrier mode (``_merged``). The driver's core then decides, and stops, as one
    process would."""

    def __init__(self, sc, store, ctx: dict, dist: Ownership, progress, levels: list[int]):
        self.sc, self.store, self.ctx, self.dist = sc, store, ctx, dist
        self.progress, self.levels = progress, levels
        self.unreduced = 0
        self.sums: list[dict] = []
        self.wall = 0.0

    def key(self, ex, position: int) -> int:      # pragma: no cover (the driver holds no state)
        raise RuntimeError("kcheck: the driver holds no state of the owners' levels")

    def finish(self, ex, level) -> tuple:
        from pyspark import StorageLevel
        t = time.perf_counter()
        depth, ctx, P = ex.depth, self.ctx, self.ctx["parts"]
        exp = self.store.mapPartitionsWithIndex(functools.partial(
            _expand_task, ctx, depth, sorted(ex.pending.left)))
        inc = exp.partitionBy(P, _identity).mapPartitions(_gather)
        nxt = self.store.zip(inc).map(functools.partial(
            _merge_task, ctx, depth + 1,
            {p for p in ex.pending.left if p in ex.comp.invariants}))
        nxt.persist(StorageLevel.MEMORY_AND_DISK)
        if (depth + 1) % CHECKPOINT_EVERY == 0:
            nxt.localCheckpoint()
        self.sums = sorted(nxt.map(_store_summary).collect(), key=lambda s: s["owner"])
        self.store.unpersist()
        self.store = nxt
        self.wall = time.perf_counter() - t
        return (None,) * 4

    def gather(self, ex, found: explore.Findings) -> explore.Findings:
        sums, dist = self.sums, self.dist
        merged = _merged(sums)
        ex.transitions += sum(s["transitions"] for s in sums)
        ex.cut += sum(s["cut"] for s in sums)
        ex.cut_only += sum(s["cut_only"] for s in sums)
        for s in sums:
            for k, c in enumerate(s["fired"]):
                ex.fired[k] += c
        self.unreduced += sum(s["unreduced"] for s in sums)
        dist.sent += sum(s["sent"] for s in sums)
        dist.sent_away += sum(s["sent_away"] for s in sums)
        dist.owner_states = [s["owned"] for s in sums]
        dist.profile.append(_level_profile(sums, merged.new, self.wall))
        dist.owner_busy_s = [a + _busy(s["prof"]) for a, s in
                             zip(dist.owner_busy_s or [0.0] * len(sums), sums)]
        dist.spark_s += self.wall
        dist.spark_levels += 1
        if merged.new:
            self.levels.append(merged.new)
            if self.progress:
                self.progress(ex.depth + 1, sum(self.levels), merged.new)
        return merged

    def located(self, ex, name, kind, depth, key, last):
        return (kind, key, depth, last)


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
    comp = Compiled(model, props, layout=layout_of(model))
    res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                       deadlock_checked=check_deadlock)
    sym = symmetry_.prepare(model, comp, res, symmetry)
    symmetric = symmetry and sym is not None
    # the driver's prefix: the core's Explorer, the whole of each level
    pre = explore.Explorer(model, comp, props, check_deadlock, keyed=False,
                           counterexample=Counterexample, block=block,
                           canonical=None if sym is None else sym.canonical)
    if starter is not None:
        starter.warm(_ctx(model, pre, props, check_deadlock, 0, max_depth, None, symmetric))

    # level 0, and the prefix, in the driver: the core's loop, one owner
    prefix_fp = [pre.start(initial_words(model))]
    levels = [len(prefix_fp[0])]                 # distinct states per depth, prefix and owners
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
        levels.append(len(fp))
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

    stop, store, owners_found, walking, sc = None, None, {}, {}, None
    try:
        stop = pre.run(max_depth, until=hand_over, on_level=level_added)
        dist.prefix_depth, dist.prefix_states = pre.depth, pre.visited.n
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
                mask, dist.crossing = None, 1.0 - 1.0 / P
            else:
                mask, dist.crossing = owner_mask(
                    comp, pre.frontier, P, None if sym is None else sym.canonical)
            dist.owner_bits = owner_bits(mask)
            handed = list(zip(prefix_fp, kept["words"])) if kept["words"] is not None else None
            kept["words"] = None
            ctx = _ctx(model, pre, props, check_deadlock, P, max_depth, fail_once_at, symmetric,
                       mask)
            run = _barrier if mode == "barrier" else _levels
            store, owners_found, walking, stop = run(
                sc, ctx, pre, handed, prefix_fp[-1], dist, progress, levels, res)
        else:
            dist.in_driver = True
    except KeyboardInterrupt:
        stop = "interrupted"
    try:
        res.stop_reason = stop
        res.exhaustive = stop is None
        res.depth = len(levels) - 1
        res.distinct_states = sum(levels)
        if sym is None:
            res.unreduced_states = 0
        res.transitions += pre.transitions
        res.cut_by_bounds += pre.cut
        res.cut_only_states += pre.cut_only
        res.fired = [a + b for a, b in zip(pre.fired, res.fired or [0] * len(pre.fired))]
        if store is not None:
            walking = _lookup(sc, owners_found, store, dist)
        res.found = _traces(pre, prefix_fp, owners_found, walking, res.properties)
    finally:
        if store is not None:
            store.unpersist()
    if sym is not None:
        symmetry_.finish(model, comp, sym, res)
    dist.levels = list(levels)
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


def _ctx(model, pre: explore.Explorer, props, deadlock: bool, P: int, max_depth, fail_once_at,
         symmetry: bool, mask=None) -> dict:
    """What every owner is told: the model, the properties and what is left of them, where the
    driver's prefix ended (``pre``), and how states are owned."""
    return {"spec": spark.spec_ref(model.spec), "variant": model.variant,
            "params": model.params.as_dict(), "props": props, "parts": P,
            "fail_once_at": fail_once_at, "block": pre.block, "symmetry": symmetry,
            "deadlock": deadlock, "max_depth": max_depth, "depth": pre.depth,
            # (before level 0, for warming the owners' workers, there is no frontier yet)
            "frontier_states": 0 if pre.frontier is None else pre.frontier.shape[1],
            "distinct": pre.visited.n,
            "left": sorted(pre.pending.left), "owner_mask": mask}


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


def _add_counts(res: SearchResult, counts: dict):
    """An owner's (or the owners') counts into the result."""
    res.transitions += counts["transitions"]
    res.cut_by_bounds += counts["cut"]
    res.cut_only_states += counts["cut_only"]
    res.unreduced_states += counts["unreduced"]
    res.fired = [a + b for a, b in zip(res.fired or [0] * len(counts["fired"]), counts["fired"])]


def _barrier(sc, ctx: dict, pre: explore.Explorer, handed, fp, dist: Ownership, progress,
             levels: list[int], res: SearchResult):
    """The levels after the prefix, one barrier job, each owner's core deciding alike -> (None,
    the owners' violations, their walks, the stop); their levels' sizes onto ``levels``, their
    counts into ``res``."""
    P = ctx["parts"]
    if sc is not None:
        add_spec_file(sc, ctx["spec"])
    root = exchange_root() / f"kcheck-owners-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    root.mkdir(parents=True)
    ctx["exchange"] = str(root)
    poller = None
    if progress:
        ctx["progress_file"] = str(root / "progress.json")
        poller = _Poller(Path(ctx["progress_file"]), progress)
    t = time.perf_counter()
    try:
        save_shares(root, P, pre.visited.sorted_fp, pre.frontier, fp, ctx["owner_mask"], handed)
        del handed, fp
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
        return None, {}, {}, "interrupted"
    finally:
        if poller:
            poller.stop()
        shutil.rmtree(root, ignore_errors=True)
    dist.job_s = time.perf_counter() - t
    outs = sorted(outs, key=lambda o: o["owner"])
    first = outs[0]
    dist.ready_s = max(o["ready_s"] for o in outs)
    dist.walk_s = max(o["walk_s"] for o in outs)
    dist.lookup_jobs = first["rounds"]
    for o in outs:
        _add_counts(res, o)
    dist.sent = sum(o["sent"] for o in outs)
    dist.sent_away = sum(o["sent_away"] for o in outs)
    dist.owner_states = [o["owned"] for o in outs]
    dist.owner_busy_s = [o["busy"] for o in outs]
    dist.owner_cpu_s = [o["cpu"] for o in outs]
    dist.profile = first["profile"]
    dist.spark_levels = len(dist.profile)
    dist.spark_s = sum(p["level"] for p in dist.profile)
    levels += first["levels"]
    return None, first["found"], {n: tuple(w) for n, w in first["walking"].items()}, first["stop"]


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


def _levels(sc, ctx: dict, pre: explore.Explorer, handed, fp, dist: Ownership, progress,
            levels: list[int], res: SearchResult):
    """The levels after the prefix, one Spark job each, decided by the driver's core (its
    share, ``_LevelJobs``, holds none of their states) -> (the final store RDD, the owners'
    violations, {}, the stop); their levels' sizes onto ``levels``, their counts into
    ``res``."""
    from pyspark import StorageLevel
    add_spec_file(sc, ctx["spec"])
    words = pre.frontier.shape[0]
    store = sc.parallelize(_shares(ctx["parts"], pre.visited.sorted_fp, pre.frontier, fp,
                                   ctx["owner_mask"], handed), ctx["parts"]).persist(
        StorageLevel.MEMORY_AND_DISK)
    del handed, fp
    jobs = _LevelJobs(sc, store, ctx, dist, progress, levels)
    drv = explore.Explorer(pre.model, pre.comp, ctx["props"], ctx["deadlock"], keyed=False,
                           block=ctx["block"], share=jobs)
    drv.take_over(_EMPTY, np.zeros((words, 0), dtype=np.uint64), ctx["depth"],
                  ctx["frontier_states"], ctx["left"])
    try:
        stop = drv.run(ctx["max_depth"])
    except KeyboardInterrupt:
        stop = "interrupted"
    _add_counts(res, {"transitions": drv.transitions, "cut": drv.cut, "cut_only": drv.cut_only,
                      "unreduced": jobs.unreduced, "fired": drv.fired})
    return jobs.store, drv.found, {}, stop


def _lookup(sc, found: dict, store, dist: Ownership) -> dict:
    """Levels mode: the violations walked back through the owners' stores, one lookup job per
    hand-over between owners (all violations at once), down to the driver's prefix."""
    walking = {name: (fp, depth, []) for name, (_, fp, depth, _) in found.items()}
    while True:
        away = {n: w for n, w in walking.items() if w[1] > dist.prefix_depth}
        if not away:
            return walking
        # every owner looks: an owner is known by the states it holds (_walk_levels)
        for n, w in sc.runJob(store, functools.partial(_walk, away), list(range(dist.owners))):
            walking[n] = tuple(w)
        _unheld(away, walking, dist.prefix_depth)
        dist.lookup_jobs += 1


def _traces(pre: explore.Explorer, prefix_fp, owners_found: dict, walking: dict,
            properties) -> dict:
    """Every violation as a trace: those the driver's prefix found are the core's already; the
    owners' (``owners_found``: name -> (kind, fingerprint, depth, action instance)), walked back
    through the owners (``walking``: name -> where the walk reached the prefix and the actions
    on the way, in reverse), are finished through the prefix to an initial state."""
    found = dict(pre.found)
    for name, (kind, fp, depth, k) in owners_found.items():
        fp, depth, rev = walking.get(name, (fp, depth, []))
        i = int(np.searchsorted(prefix_fp[depth], np.uint64(fp)))
        initial, steps = pre.trace_to(depth, i)
        steps += list(rev)[::-1] + ([k] if kind == "transition" else [])
        found[name] = Counterexample(name, kind, initial, steps)
    return {p: found[p] for p in properties if p in found}
