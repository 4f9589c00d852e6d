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

Tie-break: the single process's (checker/explore.py, "the parent rule"). The end of a trace:
for an invariant or a deadlock the violating state with the least fingerprint in its level; for
a transition property the step whose pre-state has the least fingerprint, then the lowest
action instance (a level is ordered by fingerprint, so "first in its level" is "least
fingerprint"). The path: each state keeps the least (action instance, parent fingerprint) among
the steps into it, over every owner's candidates, which is the single process's parent whatever
the size of a level: the traces are the single process's, byte for byte.

Action coverage: each state is expanded once, so the steps per action instance are the single
process's (summed over the owners and the driver's prefix).
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from checker import explore, spark
from checker.bfs import DEADLOCK, Found, SearchResult
from checker.compile import Compiled, fingerprint
from checker.explore import BLOCK
from checker.layout import initial_words
from spec.lang import Model

# a frontier below this many states is expanded in the driver: measured on this machine, one
# Spark level costs 0.2-0.8 s, the driver expands about 10^6 states a second
PREFIX_STATES = 50_000
CHECKPOINT_EVERY = 10
_EMPTY = np.zeros(0, dtype=np.uint64)


def owner_of(fps: np.ndarray, parts: int) -> np.ndarray:
    return spark.bucket(fps, parts).astype(np.int64)


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
           block: int = BLOCK) -> Expansion:
    """Expands the states S (columns, sorted by fingerprint ``fps``) as the core expands one
    level: counts, transition properties still pending (``tprops``), deadlocks."""
    words = S.shape[0]
    judged_elsewhere = set(comp.tprop_names) - set(tprops)   # already violated, or not asked
    out_fp, out_S, out_par, out_act = [], [], [], []
    ex = Expansion(_EMPTY, np.zeros((words, 0), dtype=np.uint64), _EMPTY, np.zeros(0, np.int32),
                   fired=[0] * len(comp.model.instances))
    for start in range(0, S.shape[1], block):
        B = S[:, start:start + block]
        Bfp = fps[start:start + block]
        blk = explore.expand_block(comp, B, ex.fired, judged_elsewhere, deadlock,
                                   deadlock and ex.deadlock is None)
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
            f, T, p, a = _least(fingerprint(blk.words), blk.words, Bfp[blk.parent], blk.action)
            out_fp.append(f)
            out_S.append(T)
            out_par.append(p)
            out_act.append(a)
    if out_fp:
        ex.fp, ex.words, ex.parent, ex.action = _least(
            np.concatenate(out_fp), np.concatenate(out_S, axis=1), np.concatenate(out_par),
            np.concatenate(out_act))
    return ex


def merge(visited: np.ndarray, parts: list[tuple]) -> tuple:
    """Candidates (fp, words, parent, action) from every sender -> the new states not in
    ``visited`` (one parent each, sorted by fingerprint) and the new visited set."""
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return (_EMPTY, None, _EMPTY, np.zeros(0, np.int32)), visited
    fp, S, par, act = _least(np.concatenate([p[0] for p in parts]),
                             np.concatenate([p[1] for p in parts], axis=1),
                             np.concatenate([p[2] for p in parts]),
                             np.concatenate([p[3] for p in parts]))
    fresh = explore.absent(visited, fp)
    fp, S, par, act = fp[fresh], S[:, fresh], par[fresh], act[fresh]
    return (fp, S, par, act), explore.insert_sorted(visited, fp)


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
        _COMPILED[key] = Compiled(spark.model_for(ctx["spec"], ctx["variant"], ctx["params"]),
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
    ex = expand(comp, store["words"], store["fp"], tprops, deadlock, ctx["block"])
    dest = owner_of(ex.fp, P)
    for q in range(P):
        sel = dest == q
        yield q, (ex.fp[sel], ex.words[:, sel], ex.parent[sel], ex.action[sel])
    yield index, {"owner": store["owner"], "transitions": ex.transitions, "cut": ex.cut,
                  "fired": ex.fired, "cut_only": ex.cut_only,
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
    inv = check_invariants(comp, S, fp, invariants, ctx["block"]) if len(fp) else {}
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
    """The single process's loop over levels (checker/explore.py): the driver's prefix is the
    core's Explorer; the levels after it are expanded by the owners, and their merged summaries
    go through the same stopping rule (``pending``)."""

    def __init__(self, model, props, check_deadlock, max_depth, block=BLOCK):
        self.model, self.props, self.max_depth = model, props, max_depth
        self.comp = Compiled(model, props)
        self.check_deadlock = check_deadlock
        self.res = SearchResult(model, props + ([DEADLOCK] if check_deadlock else []),
                                deadlock_checked=check_deadlock)
        self.block = block
        self.prefix = explore.Explorer(model, self.comp, props, check_deadlock, keyed=False,
                                       counterexample=Found, block=block)
        self.pending = self.prefix.pending
        self.where: dict[str, tuple] = {}          # property -> (kind, fingerprint, depth, k)
        self.levels: list[int] = []
        self.fired = self.prefix.fired             # steps per action instance, prefix and owners

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
            self.levels.append(new)

    def stop_before(self, depth) -> str | None:
        return self.pending.stop_before(depth, self.max_depth)


def check(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
          deadlock: bool | None = None, master: str = "local[*]", owners: int | None = None,
          verbose: bool = False, progress=None, prefix_states: int = PREFIX_STATES,
          prefix_depth: int | None = None, fail_once_at: int | None = None,
          block: int = BLOCK) -> SearchResult:
    """Explore ``model`` on Spark, each state by its owner; returns the SearchResult bfs.search
    would return (see the module's docstring) with a ``distribution`` attribute (Ownership).
    The driver builds the levels itself until one has ``prefix_states`` states or it reaches
    ``prefix_depth``. ``progress(depth, distinct, frontier)`` is called after every level.
    ``fail_once_at`` (tests only): owner 0's first attempt at expanding that level fails.
    ``block``: states expanded at once (tests: small blocks make small levels span several)."""
    t_start = time.perf_counter()
    spec = model.spec
    props = list(spec.properties) if properties is None else list(properties)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    # master None: the driver alone (tests of the numpy core); it must then answer by itself
    sc = spark.session(master, verbose) if master else None
    t0 = time.perf_counter()
    P = owners or (sc.defaultParallelism if sc else 1)
    dist = Ownership(master, P, startup_s=t0 - t_start)
    srch = _Search(model, props, check_deadlock, max_depth, block)
    res, pre = srch.res, srch.prefix

    # level 0, and the prefix, in the driver: the core's loop, one owner
    prefix_fp = [pre.start(initial_words(model))]
    srch.levels.append(len(prefix_fp[0]))

    def level_added(depth, fp):
        prefix_fp.append(fp)
        srch.levels.append(len(fp))
        if progress:
            progress(depth, pre.visited.n, len(fp))

    stop, store = None, None
    try:
        stop = pre.run(max_depth, until=lambda: pre.frontier.shape[1] >= prefix_states or
                       (prefix_depth is not None and pre.depth >= prefix_depth),
                       on_level=level_added)
        depth = pre.depth
        dist.prefix_depth, dist.prefix_states = depth, pre.visited.n
        if stop is None and pre.frontier.shape[1]:
            if sc is None:
                raise spark.SparkError("the search outgrew the driver's prefix and no Spark master was given")
            store, depth, stop = _on_spark(sc, srch, model, P, pre.visited.sorted_fp.copy(),
                                           pre.frontier, prefix_fp[-1], depth, dist, progress,
                                           fail_once_at)
        else:
            dist.in_driver = True
    except KeyboardInterrupt:
        stop = "interrupted"
    try:
        res.stop_reason = stop
        res.exhaustive = stop is None
        res.depth = len(srch.levels) - 1
        res.distinct_states = sum(srch.levels)
        res.transitions += pre.transitions
        res.cut_by_bounds += pre.cut
        res.cut_only_states += pre.cut_only
        res.fired = list(srch.fired)
        res.found = _traces(sc, srch, store, prefix_fp, P, dist)
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
           "props": srch.props, "parts": P, "fail_once_at": fail_once_at, "block": srch.block}
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
                _expand_task, ctx, depth, srch.pending_tprops(), DEADLOCK in srch.pending))
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
            res.cut_only_states += sum(s["cut_only"] for s in sums)
            for s in sums:
                for k, c in enumerate(s["fired"]):
                    srch.fired[k] += c
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


def _traces(sc, srch: _Search, store, prefix_fp, P, dist) -> dict:
    """Every violation as a trace: those the driver's prefix found are the core's already; the
    others are walked back through the owners' stores (one lookup job per hand-over between
    owners, all violations at once), then through the prefix to an initial state."""
    res, pre = srch.res, srch.prefix
    found = dict(pre.found)
    walking = {name: (fp, depth, []) for name, (_, fp, depth, _) in srch.where.items()}
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
    for name, (kind, _, _, k) in srch.where.items():
        fp, depth, rev = walking[name]
        i = int(np.searchsorted(prefix_fp[depth], np.uint64(fp)))
        initial, steps = pre.trace_to(depth, i)
        steps += rev[::-1] + ([k] if kind == "transition" else [])
        found[name] = Found(name, kind, initial, steps)
    return {p: found[p] for p in res.properties if p in found}
