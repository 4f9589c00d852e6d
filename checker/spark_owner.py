"""Distributed exploration on Spark, partitioned by state ownership.

Every state has one owner: its fingerprint, mixed, modulo the number of owners P (the mixing is
checker/spark.py's, so a one-word state, which is its own fingerprint, spreads too). The search
is breadth-first and level-synchronous; each state is explored exactly once, by its owner:

1. The driver builds the first levels itself while they are small (a Spark round costs more
   than expanding a few thousand states; ``prefix_states``), then hands each owner its share:
   the fingerprints it has seen and its part of the frontier.
2. Per level, one Spark job of two stages. Stage 1: each owner expands its frontier with the
   compiled numpy code (checker/compile.Compiled), checks the transition properties and
   deadlocks on its own states, and emits its successors keyed by their owner (deduplicated
   locally). Spark shuffles them. Stage 2: each owner zips its store with what it received,
   drops what it has seen, keeps one parent per new state, checks the invariants on its new
   states and writes its new store. The driver collects one small summary per owner: counts,
   and the least violating fingerprint per property.
3. Per-owner state lives in Spark: the store of level d is a persisted RDD of P records (one per
   owner: the sorted fingerprints it has seen, its new level's packed words, and per level the
   (parent fingerprint, action instance) of each state it owns). Level d+1's store is computed
   from level d's (a narrow zip, so the store never crosses the network), and level d's store
   is then unpersisted; lineage is truncated every ``CHECKPOINT_EVERY`` levels (Spark's local
   checkpoint) so a deep search does not ship an ever longer task. The driver holds the prefix
   (bounded by ``prefix_states``), the per-level summaries, and the traces.
4. Traces: the driver walks a violation back through the owners' stores (a lookup job on the
   owners concerned; each owner follows parents it owns itself before handing back), down to
   the prefix, which it holds, and so to an initial state; checker.trace.build replays it.

Exactness. Every state is expanded once, at its BFS depth, so distinct-state counts, levels,
verdicts and shortest trace lengths are those of checker/bfs.py by construction; the driver
replays bfs.search's loop (the all-violated and max-depth stops, the properties still pending
at each level) on the merged summaries, so a search stops where bfs stops. Transitions and
transitions cut by search bounds are counted once, as in bfs.

Tie-break (checker/bfs.py's, and where it differs). The end of a trace is exactly bfs's: for an
invariant or a deadlock the violating state with the least fingerprint in its level; for a
transition property the step whose pre-state has the least fingerprint, then the lowest action
instance (bfs orders each level by fingerprint, so "first in its level" is "least
fingerprint"). The path: each state keeps the parent bfs keeps when its parent's level fits
one bfs block (32,768 states): the least (action instance, parent fingerprint). bfs expands a
larger level block by block and keeps the first producer in block order, so when a state of a
level past 32,768 states has parents in different blocks, bfs may keep one with a higher action
instance from an earlier block; the owners do not know the global position of a parent (only
its fingerprint), so there an equally short path to the same end may be reported. The slice
mode (checker/spark.py) has the same caveat.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from checker import bfs, spark
from checker.bfs import DEADLOCK, Found, SearchResult
from checker.compile import Compiled, fingerprint
from spec.lang import Model

BLOCK = spark.BLOCK
# a frontier below this many states is expanded in the driver: measured on this machine, one
# Spark level costs 0.2-0.8 s, the driver expands about 10^6 states a second
PREFIX_STATES = 50_000
CHECKPOINT_EVERY = 10
_EMPTY = np.zeros(0, dtype=np.uint64)


def owner_of(fps: np.ndarray, parts: int) -> np.ndarray:
    return spark._bucket(fps, parts).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# The numpy core, shared by the driver's prefix and the owners


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
    tviol: dict = field(default_factory=dict)     # property -> (pre-state fingerprint, instance)
    deadlock: int | None = None                   # least fingerprint of a stuck state


def _least_candidates(fp, words, parent, action):
    """One row per fingerprint: the least (action, parent); sorted by fingerprint."""
    if not len(fp):
        return fp, words, parent, action
    order = np.lexsort((parent, action, fp))
    fp = fp[order]
    first = np.ones(len(fp), dtype=bool)
    first[1:] = fp[1:] != fp[:-1]
    sel = order[first]
    return fp[first], words[:, sel], parent[sel], action[sel]


def expand(comp: Compiled, S: np.ndarray, fps: np.ndarray, tprops: set, deadlock: bool,
           block: int = BLOCK) -> Expansion:
    """Expands the states S (columns, sorted by fingerprint ``fps``) as bfs.search does one
    level: counts, transition properties still pending (``tprops``), deadlocks."""
    words = S.shape[0]
    judged_elsewhere = set(comp.tprop_names) - set(tprops)   # already violated, or not asked
    out_fp, out_S, out_par, out_act = [], [], [], []
    ex = Expansion(_EMPTY, np.zeros((words, 0), dtype=np.uint64), _EMPTY, np.zeros(0, np.int32))
    for start in range(0, S.shape[1], block):
        B = S[:, start:start + block]
        Bfp = fps[start:start + block]
        m = B.shape[1]
        enabled = np.zeros(m, dtype=bool) if deadlock and ex.deadlock is None else None
        cS, cpar, cact = [], [], []
        for k, idx, sub, T, outcome, ok in comp.successors(B):
            ex.transitions += idx.size
            if enabled is not None:
                enabled[idx] = True
            for name, i in comp.step_violations(k, sub, T, outcome, ok, judged_elsewhere):
                cand = (int(Bfp[idx[i]]), k)
                if name not in ex.tviol or cand < ex.tviol[name]:
                    ex.tviol[name] = cand
            if ok is not None:
                ex.cut += int(idx.size - ok.sum())
                idx, T = idx[ok], T[:, ok]
                if not idx.size:
                    continue
            cS.append(T)
            cpar.append(Bfp[idx])
            cact.append(np.full(idx.size, k, dtype=np.int32))
        if enabled is not None:
            stuck = ~enabled
            if comp.terminal is not None:
                stuck &= ~np.broadcast_to(comp.terminal(B), (m,))
            if stuck.any():
                ex.deadlock = int(Bfp[np.flatnonzero(stuck)[0]])
        if cS:
            T = np.concatenate(cS, axis=1)
            f, T, p, a = _least_candidates(fingerprint(T), T, np.concatenate(cpar),
                                           np.concatenate(cact))
            out_fp.append(f)
            out_S.append(T)
            out_par.append(p)
            out_act.append(a)
    if out_fp:
        ex.fp, ex.words, ex.parent, ex.action = _least_candidates(
            np.concatenate(out_fp), np.concatenate(out_S, axis=1), np.concatenate(out_par),
            np.concatenate(out_act))
    return ex


def merge(visited: np.ndarray, parts: list[tuple]) -> tuple:
    """Candidates (fp, words, parent, action) from every sender -> the new states not in
    ``visited`` (one parent each, sorted by fingerprint) and the new visited set."""
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return (_EMPTY, None, _EMPTY, np.zeros(0, np.int32)), visited
    fp, S, par, act = _least_candidates(np.concatenate([p[0] for p in parts]),
                                        np.concatenate([p[1] for p in parts], axis=1),
                                        np.concatenate([p[2] for p in parts]),
                                        np.concatenate([p[3] for p in parts]))
    fresh = bfs._absent(visited, fp)
    fp, S, par, act = fp[fresh], S[:, fresh], par[fresh], act[fresh]
    return (fp, S, par, act), bfs._merge(visited, fp)


def check_invariants(comp: Compiled, S: np.ndarray, fps: np.ndarray, names: set,
                     block: int = BLOCK) -> dict:
    """-> {invariant: least violating fingerprint} over the states S (sorted by fingerprint)."""
    found = {}
    for name in comp.invariants:
        if name in names:
            i = comp.first_violation(name, S, block)
            if i is not None:
                found[name] = int(fps[i])
    return found


# ---------------------------------------------------------------------------------------------
# The owners' side (Spark tasks): plain data in, plain data out

_COMPILED: dict = {}


def _compiled(ctx: dict) -> Compiled:
    key = (ctx["spec"], ctx["variant"], tuple(sorted(ctx["params"].items())), tuple(ctx["props"]))
    if key not in _COMPILED:
        _COMPILED[key] = Compiled(spark._model(ctx["spec"], ctx["variant"], ctx["params"]),
                                  ctx["props"])
    return _COMPILED[key]


def _one(it):
    """The partition's single record. The iterator is drained: a Python worker that leaves
    input unread is not reused by Spark, and a fresh one costs 0.3-1 s here (imports, compiling
    the model)."""
    records = list(it)
    if len(records) != 1:
        raise RuntimeError(f"kcheck: an owner's partition holds {len(records)} stores")
    return records[0]


def _expand_task(ctx, depth, tprops, deadlock, index, it):
    """Stage 1: an owner's frontier -> (owner, payload) for every owner, its statistics to
    itself."""
    store = _one(it)
    if ctx.get("fail_once_at") == depth and index == 0:
        from pyspark import TaskContext
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError(f"kcheck test fault: owner 0 fails expanding level {depth} once")
    if store["owner"] != index:
        raise RuntimeError(f"kcheck: partition {index} holds owner {store['owner']}'s store")
    comp = _compiled(ctx)
    P = ctx["parts"]
    ex = expand(comp, store["words"], store["fp"], tprops, deadlock)
    dest = owner_of(ex.fp, P)
    for q in range(P):
        sel = dest == q
        yield q, (ex.fp[sel], ex.words[:, sel], ex.parent[sel], ex.action[sel])
    yield index, {"owner": store["owner"], "transitions": ex.transitions, "cut": ex.cut,
                  "tviol": ex.tviol, "deadlock": ex.deadlock, "sent": len(ex.fp),
                  "sent_away": int((dest != store["owner"]).sum())}


def _identity(k):
    return k


def _gather(it):
    yield [v for _, v in it]


def _merge_task(ctx, depth, invariants, pair):
    """Stage 2: an owner's store and what it received -> its store one level deeper."""
    store, received = pair
    comp = _compiled(ctx)
    stats = next(v for v in received if isinstance(v, dict))
    parts = [v for v in received if not isinstance(v, dict)]
    (fp, S, par, act), visited = merge(store["visited"], parts)
    if S is None:
        S = np.zeros((store["words"].shape[0], 0), dtype=np.uint64)
    inv = check_invariants(comp, S, fp, invariants) if len(fp) else {}
    levels = dict(store["levels"])
    levels[depth] = (fp, par, act)
    summary = dict(stats, new=len(fp), inv=inv, received=sum(len(p[0]) for p in parts),
                   owned=len(visited))
    return {"owner": store["owner"], "visited": visited, "fp": fp, "words": S, "levels": levels,
            "summary": summary}


def _summary(store):
    return store["summary"]


def _walk(P: int, requests: list, it):
    """Walks each request (key, fingerprint, depth) back through the parents this owner owns;
    -> (key, fingerprint, depth, actions in reverse) where it stopped: a parent owned elsewhere,
    or a depth the store does not hold (the driver's prefix)."""
    store = _one(it)
    me = store["owner"]
    out = []
    for key, fp, depth in requests:
        if int(owner_of(np.array([fp], np.uint64), P)[0]) != me:
            continue
        steps = []
        while depth in store["levels"] and int(owner_of(np.array([fp], np.uint64), P)[0]) == me:
            lfp, par, act = store["levels"][depth]
            i = int(np.searchsorted(lfp, np.uint64(fp)))
            if i >= len(lfp) or int(lfp[i]) != fp:
                raise RuntimeError(f"kcheck: owner {me} has no state {fp:#x} at depth {depth}")
            steps.append(int(act[i]))
            fp, depth = int(par[i]), depth - 1
        out.append((key, fp, depth, steps))
    return out


# ---------------------------------------------------------------------------------------------
# The driver


@dataclass
class Ownership:
    """How a run was spread, for people and for the benchmark."""
    master: str
    owners: int
    prefix_depth: int = 0             # the levels 0..prefix_depth were built in the driver
    prefix_states: int = 0
    in_driver: bool = False           # the prefix answered the whole search
    spark_levels: int = 0             # levels built by the owners (one Spark job each)
    spark_s: float = 0.0              # wall time of those jobs
    lookup_jobs: int = 0
    owner_states: list[int] = field(default_factory=list)
    sent: int = 0                     # candidate successors shuffled (after local dedup)
    sent_away: int = 0                # of which to another owner
    levels: list[int] = field(default_factory=list)   # distinct states per depth
    startup_s: float = 0.0

    @property
    def per_level_s(self) -> float:
        return self.spark_s / self.spark_levels if self.spark_levels else 0.0

    def line(self) -> str:
        if self.in_driver:
            return (f"spark ({self.master}): ownership; answered by the driver's breadth-first "
                    f"prefix ({self.prefix_states:,} states); no Spark level was needed")
        total = sum(self.owner_states)
        share = [100.0 * n / total for n in self.owner_states] if total else [0.0]
        return (f"spark ({self.master}): ownership by fingerprint over {self.owners} owners; "
                f"levels 0-{self.prefix_depth} in the driver ({self.prefix_states:,} states), "
                f"{self.spark_levels} levels on Spark ({self.per_level_s:.2f} s a level); each "
                f"owner holds {min(share):.0f}-{max(share):.0f} % of the states; "
                f"{self.sent:,} successors exchanged, {self.sent_away:,} to another owner; "
                f"no state explored twice")


class _Search:
    """bfs.search's loop over levels, with the expansion done by the driver or by Spark."""

    def __init__(self, model, props, check_deadlock, max_depth):
        self.model, self.props, self.max_depth = model, props, max_depth
        self.comp = Compiled(model, props)
        self.check_deadlock = check_deadlock
        self.res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                                deadlock_checked=check_deadlock)
        self.pending = set(props) | ({DEADLOCK} if check_deadlock else set())
        self.where: dict[str, tuple] = {}          # property -> (kind, fingerprint, depth, k)
        self.levels: list[int] = []

    def pending_tprops(self):
        return {p for p in self.pending if p in self.comp.tprop_names}

    def pending_invariants(self):
        return {p for p in self.pending if p in self.comp.invariants}

    def record(self, depth, tviol, deadlock, inv_next, new):
        """One level's merged summary, in bfs.search's order."""
        for name, (fp, k) in sorted(tviol.items()):
            self.where[name] = ("transition", fp, depth, k)
            self.pending.discard(name)
        if deadlock is not None and DEADLOCK in self.pending:
            self.where[DEADLOCK] = ("deadlock", deadlock, depth, None)
            self.pending.discard(DEADLOCK)
        if new:
            for name, fp in sorted(inv_next.items()):
                self.where[name] = ("invariant", fp, depth + 1, None)
                self.pending.discard(name)
            self.levels.append(new)

    def stop_before(self, depth) -> str | None:
        if not self.pending and self.props:
            return "all-violated"
        if self.max_depth is not None and depth >= self.max_depth:
            return "max-depth"
        return None


def check(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
          deadlock: bool | None = None, master: str = "local[*]", owners: int | None = None,
          verbose: bool = False, progress=None, prefix_states: int = PREFIX_STATES,
          prefix_depth: int | None = None, fail_once_at: int | None = None) -> SearchResult:
    """Explore ``model`` on Spark, each state by its owner; returns the SearchResult bfs.search
    would return (see the module's docstring) with a ``distribution`` attribute (Ownership).
    The driver builds the levels itself until one has ``prefix_states`` states or it reaches
    ``prefix_depth``. ``progress(depth, distinct, frontier)`` is called after every level.
    ``fail_once_at`` (tests only): owner 0's first attempt at expanding that level fails."""
    t_start = time.perf_counter()
    spec = model.spec
    props = list(spec.properties) if properties is None else list(properties)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    # master None: the driver alone (tests of the numpy core); it must then answer by itself
    sc = spark.session(master, verbose) if master else None
    t0 = time.perf_counter()
    P = owners or (sc.defaultParallelism if sc else 1)
    dist = Ownership(master, P, startup_s=t0 - t_start)
    srch = _Search(model, props, check_deadlock, max_depth)
    res, comp = srch.res, srch.comp

    # level 0, and the prefix, in the driver: one store, one owner
    init = np.array(model.initial_words, dtype=np.uint64).reshape(-1, model.layout.words).T.copy()
    f0 = fingerprint(init)
    visited, order = np.unique(f0, return_index=True)
    S, fp = init[:, order], visited
    initial = {int(f): tuple(int(x) for x in S[:, i]) for i, f in enumerate(fp)}
    prefix_levels = {0: (fp, np.zeros(len(fp), np.uint64), np.zeros(len(fp), np.int32))}
    for name, bad in sorted(check_invariants(comp, S, fp, srch.pending_invariants()).items()):
        srch.where[name] = ("invariant", bad, 0, None)
        srch.pending.discard(name)
    srch.levels.append(len(fp))
    depth, stop, store = 0, None, None
    try:
        while len(fp) and len(fp) < prefix_states and (prefix_depth is None or depth < prefix_depth):
            stop = srch.stop_before(depth)
            if stop:
                break
            ex = expand(comp, S, fp, srch.pending_tprops(),
                        check_deadlock and DEADLOCK in srch.pending)
            (nfp, nS, npar, nact), visited = merge(visited, [(ex.fp, ex.words, ex.parent, ex.action)])
            inv = check_invariants(comp, nS, nfp, srch.pending_invariants()) if len(nfp) else {}
            res.transitions += ex.transitions
            res.cut_by_bounds += ex.cut
            srch.record(depth, ex.tviol, ex.deadlock, inv, len(nfp))
            if not len(nfp):
                fp = nfp
                break
            depth += 1
            prefix_levels[depth] = (nfp, npar, nact)
            S, fp = nS, nfp
            if progress:
                progress(depth, len(visited), len(fp))
        dist.prefix_depth, dist.prefix_states = depth, len(visited)
        if stop is None and len(fp):
            stop = srch.stop_before(depth)
        if stop is None and len(fp):
            if sc is None:
                raise spark.SparkError("the search outgrew the driver's prefix and no Spark master was given")
            store, depth, stop = _on_spark(sc, srch, model, P, visited, S, fp, depth, dist,
                                           progress, fail_once_at)
        else:
            dist.in_driver = True
    except KeyboardInterrupt:
        stop = "interrupted"
    try:
        res.stop_reason = stop
        res.exhaustive = stop is None
        res.depth = len(srch.levels) - 1
        res.distinct_states = sum(srch.levels)
        res.found = _traces(sc, srch, store, prefix_levels, initial, P, dist)
    finally:
        if store is not None:
            store.unpersist()
    dist.levels = list(srch.levels)
    if dist.in_driver:
        dist.owner_states = [res.distinct_states]
    res.elapsed_s = time.perf_counter() - t0
    res.distribution = dist
    return res


def _on_spark(sc, srch: _Search, model, P, visited, S, fp, depth, dist, progress, fail_once_at):
    """The levels after the prefix, one Spark job each -> (final store RDD, depth, stop)."""
    from pyspark import StorageLevel
    res = srch.res
    ref = spark.spec_ref(model.spec)
    if ref.endswith(".py"):
        sc.addFile(ref)
    ctx = {"spec": ref, "variant": model.variant, "params": model.params.as_dict(),
           "props": srch.props, "parts": P, "fail_once_at": fail_once_at}
    vo, so = owner_of(visited, P), owner_of(fp, P)
    records = [{"owner": o, "visited": visited[vo == o], "fp": fp[so == o], "words": S[:, so == o],
                "levels": {}, "summary": None} for o in range(P)]
    del visited, S, fp
    store = sc.parallelize(records, P).persist(StorageLevel.MEMORY_AND_DISK)
    del records
    stop = None
    try:
        while True:
            stop = srch.stop_before(depth)
            if stop:
                break
            t = time.perf_counter()
            exp = store.mapPartitionsWithIndex(functools.partial(
                _expand_task, ctx, depth, srch.pending_tprops(),
                srch.check_deadlock and DEADLOCK in srch.pending))
            inc = exp.partitionBy(P, _identity).mapPartitions(_gather)
            nxt = store.zip(inc).map(functools.partial(_merge_task, ctx, depth + 1,
                                                       srch.pending_invariants()))
            nxt.persist(StorageLevel.MEMORY_AND_DISK)
            if (depth + 1) % CHECKPOINT_EVERY == 0:
                nxt.localCheckpoint()
            sums = sorted(nxt.map(_summary).collect(), key=lambda s: s["owner"])
            store.unpersist()
            store = nxt
            dist.spark_s += time.perf_counter() - t
            dist.spark_levels += 1
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
            new = sum(s["new"] for s in sums)
            res.transitions += sum(s["transitions"] for s in sums)
            res.cut_by_bounds += sum(s["cut"] for s in sums)
            dist.sent += sum(s["sent"] for s in sums)
            dist.sent_away += sum(s["sent_away"] for s in sums)
            dist.owner_states = [s["owned"] for s in sums]
            srch.record(depth, tviol, min(dl) if dl else None, inv, new)
            if not new:
                break
            depth += 1
            if progress:
                progress(depth, sum(srch.levels), new)
    except KeyboardInterrupt:
        stop = "interrupted"
    return store, depth, stop


def _traces(sc, srch: _Search, store, prefix_levels, initial, P, dist) -> dict:
    """Walks every violation back to an initial state: through the owners' stores (one lookup
    job per hand-over between owners, all violations at once), then the driver's prefix."""
    res = srch.res
    keep = srch.where      # exactly what bfs had found when it stopped (the same loop)
    walking = {name: (fp, depth, []) for name, (_, fp, depth, _) in keep.items()}
    while store is not None:
        away = {n: w for n, w in walking.items() if w[1] > dist.prefix_depth}
        if not away:
            break
        by_owner: dict[int, list] = {}
        for n, (fp, depth, _) in away.items():
            o = int(owner_of(np.array([fp], np.uint64), P)[0])
            by_owner.setdefault(o, []).append((n, fp, depth))
        reqs = [r for rs in by_owner.values() for r in rs]
        outs = sc.runJob(store, functools.partial(_walk, P, reqs), sorted(by_owner))
        dist.lookup_jobs += 1
        for n, fp, depth, steps in outs:
            walking[n] = (fp, depth, walking[n][2] + steps)
    found = {}
    for name, (kind, _, _, k) in keep.items():
        fp, depth, rev = walking[name]
        while depth > 0:
            lfp, par, act = prefix_levels[depth]
            i = int(np.searchsorted(lfp, np.uint64(fp)))
            rev.append(int(act[i]))
            fp, depth = int(par[i]), depth - 1
        steps = rev[::-1] + ([k] if kind == "transition" else [])
        found[name] = Found(name, kind, initial[fp], steps)
    return {p: found[p] for p in res.properties if p in found}
