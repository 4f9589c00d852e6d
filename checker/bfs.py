"""Breadth-first explicit-state search with shortest counterexamples: the single process.

The level loop, the visited set, the parent rule, the checks and the stopping rule are the
explicit-state core's (checker/explore.py), which the state graph and Spark build on too; this
module adds what one process needs around it: the result (``SearchResult``), the statistics, the
bounds (--max-depth, --max-states, the memory watch), Ctrl-C and SIGTERM, checkpoints
(checker/checkpoint.py) and symmetry reduction (checker/symmetry.py).

It keeps (8 bytes a state for the visited set, 6 for the parent links; docs/design.md):
- ``visited``: a sorted array of 64-bit fingerprints of every state seen, and beside each, when
  a state is wider than its fingerprint, the state itself (up to explore.EXACT_WORDS words:
  exact) or a second 64-bit hash (a 128-bit fingerprint);
- per level, each state's parent (its position in the previous level) and the action instance
  that reached it, so a trace is rebuilt by replaying actions from an initial state, as
  Stateright does; finished states themselves are not kept;
- the current and the next frontier as packed words.

Order, and so every count and trace, is deterministic: a level is ordered by fingerprint (then,
for distinct states that share one, by their words or second hash), and a state's parent is the
least (action instance id, parent position) among the steps that reach it, whatever the blocks
a level is expanded in (docs/design.md, "The core's parent rule"). Tie-break between shortest
counterexamples: for an invariant, the violating state that comes first in its level; for a
transition property, the step whose pre-state comes first in its level, then the lowest action
instance; a deadlock like an invariant.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from kcheck import explore
from kcheck.compile import Compiled
from kcheck.quotient import covers as quotient_covers
from kcheck.explore import DEADLOCK, storage_kind  # noqa: F401  (public names of this module)
from kcheck.layout import initial_words, layout_of
from kcheck.verdict import Counterexample, RunResult, Verdict, sometimes_status
from kcheck.spec.lang import Model


class Terminated(BaseException):
    """SIGTERM (what timeout, CI runners and schedulers send): the command line raises it from
    its signal handler so a search stops as on Ctrl-C, keeping what it found."""


# A shortest counterexample: the initial state and the action instances from it. One type for


@dataclass
class SearchResult(RunResult):
    """A search's run (verdict.RunResult): also what Spark's engines return."""
    engine = "bfs"                   # not a field: Spark's engines name themselves (cli)
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
    found: dict[str, Counterexample] = field(default_factory=dict)
    deadlock_checked: bool = False
    resumed_from: int | None = None  # the depth of the checkpoint this search resumed from
    # how the visited set told states apart (storage_kind); engines that keep 64-bit
    # fingerprints (Spark) leave it unset
    stored_as: str | None = None
    # the symmetry the search reduced by (checker/symmetry.py), "off", or None when the spec
    # declares none; with it, distinct_states counts orbits and unreduced_states their states
    symmetry: str | None = None
    # the partial-order reduction the search used (checker/por.py), or None
    por: object | None = None
    unreduced_states: int = 0
    # the order-only domains the search renumbered (checker/quotient.py), "off", or None when
    # the spec declares none; with them, a verdict covers every value of the domains
    quotient: str | None = None
    # the model a quotient search's counterexamples are expressed in when it is not ``model``:
    # the spec at its domains' caps raised to what the counterexamples reach (checker/quotient.py)
    trace_model: Model | None = None
    # the search's generated code (compile.Compiled), kept so that building its counterexamples'
    # traces does not compile the model again (0.16-0.40 s a trace on the Kafka specs)
    compiled: object | None = field(default=None, repr=False, compare=False)

    @property
    def storage(self) -> str:
        """How states were told apart, as the statistics line prints it."""
        if self.stored_as is not None:
            return self.stored_as
        return storage_kind(1) if layout_of(self.model).words == 1 else "64-bit fingerprints"

    @property
    def interrupted(self) -> bool:
        return self.stop_reason in ("interrupted", "terminated")

    def never_fired(self) -> list[str]:
        """The actions that have instances for these parameters but none of which took a step in
        the search: a property that relies on them may hold vacuously. (An action with no
        instance at all is one the parameters switch off, e.g. timeouts=0: see disabled().)"""
        return explore.never_fired(self.model, self.fired)

    def disabled(self) -> list[str]:
        """The actions with no instance for these parameters (every guard is false)."""
        return explore.disabled_actions(self.model)

    def status(self, prop: str) -> Verdict:
        if prop in self.found:
            st = Verdict.VIOLATED
        elif prop == DEADLOCK and self.cut_only_states:
            st = Verdict.BOUNDED
        else:
            st = Verdict.HOLDS if self.exhaustive else Verdict.BOUNDED
        return sometimes_status(self.model.spec, prop, st)   # a witness of a sometimes: reached

    def reason(self, prop: str) -> str | None:
        """Why a property not violated is 'bounded', in one sentence (None when it holds or is
        violated)."""
        if self.status(prop) is not Verdict.BOUNDED:
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
                "checkpoint-failed": f"the search stopped: {self.stop_detail}",
                }.get(self.stop_reason or "", self.stop_reason)

    @property
    def statistics(self) -> dict:
        """The figures of the run, as check's JSON names them (computed when asked)."""
        # never_fired is None when the search stopped early: an action may not have had its turn
        return {"exhaustive": self.exhaustive, "stop_reason": self.stop_reason,
                "stop_detail": self.stop_detail, "distinct_states": self.distinct_states,
                "transitions": self.transitions, "depth": self.depth,
                "elapsed_s": round(self.elapsed_s, 3), "cut_by_search_bounds": self.cut_by_bounds,
                "collision_probability": self.collision_probability,
                "never_fired": self.never_fired() if self.fired and self.exhaustive else None,
                "disabled_actions": self.disabled(),
                "steps_per_action": (explore.fired_per_action(self.model, self.fired)
                                     if self.fired else None),
                **({"covers": quotient_covers(self)} if self.quotient is not None else {})}

    @property
    def states_per_s(self) -> float:
        return self.distinct_states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def collision_probability(self) -> float:
        """TLC's optimistic estimate n * (t - n) / 2^b for b-bit fingerprints; zero when states
        are stored exactly (``storage``)."""
        if self.storage.startswith("exact"):
            return 0.0
        n, t = self.distinct_states, self.transitions + len(initial_words(self.model))
        return n * max(0, t - n) / 2.0 ** (128 if self.storage.startswith("128") else 64)


def search(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
           max_states: int | None = None, deadlock: bool | None = None,
           progress=None, block: int = explore.BLOCK, initial: list[tuple] | None = None,
           on_level=None, checkpoint: str | None = None,
           checkpoint_every: float = 60.0, symmetry: bool = False,
           por: bool = False, quotient: bool = False) -> SearchResult:
    """Explore ``model`` breadth-first. ``progress(depth, distinct, frontier)`` is called per
    block when given (distinct: the states of the levels finished). ``initial`` replaces the
    spec's initial states (packed words), e.g. with a slice of them. ``on_level(depth,
    fingerprints)`` receives each level's sorted fingerprints (the distributed search merges
    them). ``checkpoint``: a directory where the search's state is written at the end of a level
    (at most every ``checkpoint_every`` seconds) and from which a search of the same spec,
    variant, parameters and properties resumes (checker/checkpoint.py). Ctrl-C stops the search
    and returns what was found. ``symmetry``: store one state per orbit of the spec's declared
    symmetry, checked first (checker/symmetry.py); counterexamples stay concrete. ``por``:
    expand ample sets of steps that commute with the rest (checker/por.py); the verdicts stay,
    a trace may be longer than the shortest. ``quotient``: store states with the values of the
    spec's order-only domains renumbered by rank (checker/quotient.py); the domains' search
    bounds no longer cut, and counterexamples stay concrete."""
    spec = model.spec
    props = list(spec.properties) if properties is None else list(properties)
    from kcheck import quotient as quotient_
    # partial-order reduction's cycle proviso and ample sets are not yet checked on renumbered
    # states: with --por the search runs without the quotient (the statistics say so)
    quot = quotient_.prepare(model, quotient and not por, checkpoint)
    original = model
    if quot is not None:
        model = quot.model               # the domains' ranges widened (the spec's stay in res)
    comp = Compiled(model, props, layout=layout_of(model))
    if quot is not None:
        quot.comp = comp
        if initial is not None:
            lay_from, lay_to = layout_of(original), layout_of(model)
            initial = [tuple(lay_to.pack_flat(lay_from.unpack_flat(list(w)))) for w in initial]
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    res = SearchResult(original, props + ([DEADLOCK] if check_deadlock else []),
                       deadlock_checked=check_deadlock, stored_as=storage_kind(layout_of(model).words))
    if quotient_.domains_of(original):
        res.quotient = "off" if quot is None else quot.description
    t0 = time.perf_counter()
    from kcheck import symmetry as symmetry_
    sym = symmetry_.prepare(model, comp, res, symmetry, checkpoint)
    from kcheck.memory import watch
    memory = watch()
    canonical = None if sym is None else sym.canonical
    if quot is not None:
        canonical = quot.normalise if sym is None else (lambda T: sym.canonical(quot.normalise(T)))
    ex = explore.Explorer(model, comp, props, check_deadlock, block=block, counterexample=Counterexample,
                          canonical=canonical)
    res.fired, res.found = ex.fired, ex.found
    res.compiled = comp
    visited = ex.visited
    from kcheck import por as por_
    res.por = por_.prepare(model, comp, por, sym, checkpoint)
    if res.por is not None:
        ex.successors = res.por.bind(visited, ex.keys)

    from kcheck import checkpoint as ckpt
    saved = None
    if checkpoint is not None:
        identity = ckpt.identity(model, props, check_deadlock, comp, initial)
        saved = ckpt.load(checkpoint, identity)
    if saved is not None:
        ex.resume(saved)
        t0 -= saved.elapsed_s
        res.resumed_from = ex.depth
    else:
        fp0 = ex.start(initial if initial is not None else initial_words(model))
        if sym is not None:
            res.unreduced_states = int(sym.orbit_sizes(ex.frontier).sum())
        if on_level is not None:
            on_level(0, fp0)
        del fp0
    res.depth, res.distinct_states = ex.depth, visited.n
    last_saved = time.perf_counter()
    memory_detail = []

    def after_block(start, m, n, level):
        if progress is not None:
            progress(ex.depth, visited.n, n - start - m)
        if (max_states is not None and visited.n + level.upper >= max_states
                and visited.n + level.distinct() >= max_states):
            return "max-states"
        if memory is not None and memory.exceeded(2 * level.nbytes):
            memory_detail.append(memory.message())
            return "memory"
        return None

    writing = [0.0]   # seconds the last checkpoint took to write

    def level_added(depth, level_fp):
        nonlocal last_saved
        if on_level is not None:
            on_level(depth, level_fp)
        res.depth, res.distinct_states = depth, visited.n
        if sym is not None:
            res.unreduced_states += int(sym.orbit_sizes(ex.frontier).sum())
        # at most every checkpoint_every seconds, and (unless that is 0: every level) writing at
        # most a tenth of the time: a checkpoint writes the whole visited set (gigabytes at
        # two_phase N=11)
        every = max(checkpoint_every, 10 * writing[0]) if checkpoint_every > 0 else 0
        if (checkpoint is not None and ex.stop_reason is None
                and time.perf_counter() - last_saved >= every):
            _count(res, ex)
            began = time.perf_counter()
            ckpt.save(checkpoint, identity, visited, ex.frontier, ex.parents, ex.actions,
                      ex.initial_words, res, began - t0)
            last_saved = time.perf_counter()
            writing[0] = last_saved - began

    hooks = {}
    if quot is not None:
        def before_block(start, n):
            quot.check_block(ex.frontier[:, start:start + block])
        hooks["before_block"] = before_block
    try:
        ex.run(max_depth, after_block=after_block, on_level=level_added, **hooks)
        res.stop_reason = ex.stop_reason
    except ckpt.SaveError as e:
        # what was found stands, bounded; the command says the checkpoint failed (exit 5)
        res.stop_reason, res.stop_detail = "checkpoint-failed", str(e)
    except KeyboardInterrupt:
        res.stop_reason = "interrupted"
    except Terminated:
        res.stop_reason = "terminated"
    except MemoryError:
        # what was found stands; the answer is bounded, not a crash
        res.stop_reason = "out-of-memory"
    if res.stop_reason == "memory":
        res.stop_detail = memory_detail[-1]
    _count(res, ex)
    res.exhaustive = res.stop_reason is None
    if sym is not None:
        symmetry_.finish(model, comp, sym, res,
                         canonical=None if quot is None else canonical)
    if quot is not None:
        _concrete(res, quot, original)
    res.elapsed_s = time.perf_counter() - t0
    return res


def _concrete(res: SearchResult, quot, original: Model):
    """The counterexamples found on renumbered states, replayed from the spec's initial states
    (checker/quotient.py); in the spec's own model when they fit its ranges, else at its domains'
    caps raised (``trace_model``), else in the search's model (the domains widened)."""
    found = {name: quot.concretise(f, Counterexample) for name, f in res.found.items()}
    for model in (original, quot.raised(original, found.values())):
        if model is None:
            continue
        fitted = {name: quot.fits(f, model) for name, f in found.items()}
        if all(v is not None for v in fitted.values()):
            found = {name: Counterexample(f.property, f.kind, fitted[name], f.steps)
                     for name, f in found.items()}
            if model is not original:
                res.trace_model = model
            break
    else:
        res.trace_model = quot.model
    res.found.clear()
    res.found.update(found)


def _count(res: SearchResult, ex: explore.Explorer):
    """The core's counters into the result."""
    res.transitions, res.cut_by_bounds, res.cut_only_states = ex.transitions, ex.cut, ex.cut_only
