"""The run layer: how a front end (the report, the pytest plugin, the command line) runs a spec's
variants through the engines and compares their verdicts with the spec's record, in one place.

``run_variants`` is the one "every variant x engine x record" loop: each variant's search (the
safety properties, bfs), its state graph (the progress properties, graph), and the differences of
both from the record (verdict.record_differences). Front ends render its ``VariantRun``s; none
builds an argparse namespace to call another front end's code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kcheck.trace import Trace


@dataclass
class Options:
    """What a run may examine. The command line's flags map onto it one to one."""
    properties: list[str] | None = None      # safety properties (None: every one)
    progress_properties: list[str] | None = None   # progress properties (None: every one)
    max_depth: int | None = None
    max_states: int | None = None
    max_nodes: int = 2_000_000               # the state graph's node limit
    deadlock: bool | None = None             # None: as the spec says
    # the reductions by the spec's symmetry, of the search and of the state graph: off unless
    # asked (check's and progress's --no-symmetry unset), so the report and the plugin count
    # every state
    symmetry: bool = False
    graph_symmetry: bool = False
    # the search stores order-only domains renumbered by rank, as check does unless --no-quotient
    # (checker/quotient.py): a verdict then covers every value of the domain, not up to its cap
    quotient: bool = True
    # the single process only: a folder of checkpoints, the partial-order reduction
    checkpoint: str | None = None
    por: bool = False
    # the Spark engines: the master, the slices (or owners), Spark's own log on stderr
    master: str = "local[*]"
    slices: int | None = None
    verbose: bool = False
    # the progress verdicts' bound on the environment's disturbances (checker/environment.py):
    # None, the spec's declared bound; UNBOUNDED, none (a lasso may then disturb for ever)
    disturbances: int | str | None = None


UNBOUNDED = "unbounded"


ENGINES = ("bfs", "spark-slices", "spark-ownership")


def search(model, engine: str = "bfs", options: Options | None = None, progress=None):
    """The safety search of ``model`` by ``engine`` (one of ENGINES): the same SearchResult, the
    same verdicts and shortest traces, whichever answers. ``progress``: the engine's progress
    callback (bfs: depth, states, left in the level; Spark: see options.spark_progress)."""
    from kcheck.options import BadInput
    options = options or Options()
    if engine == "bfs":
        from kcheck.bfs import search as bfs_search
        res = bfs_search(model, options.properties, options.max_depth, options.max_states,
                         options.deadlock, progress, checkpoint=options.checkpoint,
                         symmetry=options.symmetry, por=options.por, quotient=options.quotient)
        res.engine = engine
        return res
    if engine not in ENGINES:
        raise BadInput(f"unknown engine '{engine}'; engines: {', '.join(ENGINES)}")
    for given, why in ((options.max_states, "--max-states bounds the single-process search; "
                                            "with --spark use --max-depth"),
                       (options.checkpoint, "--checkpoint is for the single-process search: "
                                            "leave out --spark"),
                       (options.por, "--por is for the single-process search: leave out --spark")):
        if given:
            raise BadInput(why)
    from kcheck import spark
    from kcheck.options import PartFailed
    kw = dict(properties=options.properties, max_depth=options.max_depth,
              deadlock=options.deadlock, master=options.master, verbose=options.verbose,
              symmetry=options.symmetry, progress=progress)
    # the session first: pyspark's SparkContext installs a SIGINT handler of its own (a Py4J call
    # from inside the handler, then KeyboardInterrupt wherever the driver was), which the run's
    # own handler must replace, not be replaced by
    spark.session(options.master, options.verbose)
    with spark.stop_on_signal():
        try:
            if engine == "spark-ownership":
                from kcheck import spark_owner
                res = spark_owner.check(model, owners=options.slices, **kw)
            else:
                res = spark.check(model, slices=options.slices, **kw)
        except Exception as e:
            why = spark.job_failure(e)
            if why is None:
                raise
            # a signal's cancellation is reported as the signal (stop_on_signal), not here
            raise PartFailed(f"the Spark job failed: {why} (Spark's log: {spark.LOG})") from None
    from kcheck.quotient import domains_of
    if domains_of(model):
        res.quotient = "off"      # Spark searches the order-only domains up to their caps
    res.engine = engine
    return res


@dataclass
class VariantRun:
    """One variant's runs: its search, its progress check when asked, and how they differ from
    the record."""
    variant: str
    doc: str
    params: dict
    search: object                     # kcheck.bfs.SearchResult
    traces: dict[str, Trace]           # safety property -> shortest counterexample
    progress: object | None = None     # kcheck.graph.ProgressResult, when progress was checked
    progress_traces: dict[str, Trace] = field(default_factory=dict)
    graph: object | None = None        # kcheck.graph.StateGraph, when progress was checked
    proofs: list = field(default_factory=list)           # kcheck.symbolic.ProofResult
    diffs: list[str] = field(default_factory=list)       # differences from the record

    @property
    def model(self):
        """The variant's compiled model (the search's, which the state graph reuses): a front end
        that replays a trace at the same parameters need not compile it again."""
        return self.search.model

    @property
    def verdicts(self) -> dict[str, str]:
        """Every property's verdict, safety and progress (deadlock: the search's when both)."""
        out = {p: self.search.status(p) for p in self.search.properties}
        if self.progress is not None:
            for p in self.progress.properties:
                out.setdefault(p, self.progress.status(p))
        return out

    @property
    def found(self) -> dict[str, Trace]:
        return {**self.progress_traces, **self.traces}


def progress_of(spec, variant: str | None, params: dict | None, options: Options, model=None):
    """One variant's state graph and its progress (and deadlock) verdicts. ``model``: the
    variant already compiled at ``params`` (the safety search's), else it is compiled here.
    -> (graph.ProgressResult, {name: trace})"""
    from kcheck.graph import build_graph, check
    from kcheck.options import Progress
    from kcheck.render import params_str
    from kcheck.trace import traces_of
    from kcheck.environment import budgeted
    model = model if model is not None else spec.instantiate(variant, params)
    asked = model.params.as_dict()
    names = options.progress_properties or list(spec.progress)
    check_deadlock = spec.check_deadlock or bool(options.deadlock)
    env = spec.environment if options.disturbances != UNBOUNDED else None
    # the epoch cap the graph may raise: until it cuts no step within the disturbance bound
    # (checker/environment.py), unless the user gave it
    cap = env.cap if env is not None and env.cap not in (params or {}) else None
    while True:
        if env is not None:
            model = budgeted(model, env.bound_at(model.params) if options.disturbances is None
                             else options.disturbances)
        # a graph of a Kafka spec takes seconds: say where it is (stderr, like the search)
        with Progress(f"{spec.name} {model.variant} ({params_str(model.params.as_dict())}), "
                      f"building the state graph for {', '.join(names) or 'deadlock'}") as progress:
            sg = build_graph(model, options.max_nodes, check_deadlock,
                             progress=progress, symmetry=options.graph_symmetry)
        value = model.params.as_dict().get(cap)
        if cap is None or not sg.cut_within_budget or value >= spec.params[cap].hi:
            break
        model = spec.instantiate(variant, {**(params or {}), cap: value + 1})
    res = check(sg, names, deadlock=check_deadlock and not options.progress_properties)
    if cap is not None and model.params.as_dict()[cap] != asked.get(cap):
        res.cap_raised = (cap, asked.get(cap), model.params.as_dict()[cap])
    return res, traces_of(res)


def run_variant(spec, variant: str | None, params: dict | None = None,
                options: Options | None = None, progress: bool = False, prove: bool = False,
                engine: str = "bfs", search_progress=None) -> VariantRun:
    """One variant searched by ``engine``, its progress checked when ``progress`` (and the spec
    has something to check there), optionally its safety properties proved, and its verdicts
    compared with the spec's record: the one place a front end's "variant x engine x record"
    step is done. ``search_progress``: the engine's progress callback."""
    from kcheck.trace import traces_of
    from kcheck.verdict import record_differences
    options = options or Options()
    model = spec.instantiate(variant, params)
    res = search(model, engine, options, search_progress)
    run = VariantRun(model.variant, spec.variant_info(model.variant).doc if spec.variants else "",
                     model.params.as_dict(), res, traces_of(res))
    if progress and (spec.progress or spec.check_deadlock) and not res.interrupted:
        run.progress, run.progress_traces = progress_of(spec, model.variant, params, options, model)
        run.graph = run.progress.graph
    # once per property (deadlock is both the search's and the graph's: the search's counts)
    run.diffs = record_differences(spec, model.variant, run.verdicts)
    if prove and not res.interrupted:
        from kcheck.symbolic import prove as prove_one, provable_properties
        from kcheck.verdict import Verdict
        # the properties this search checked and did not find violated (a lemma is proved along
        # with the others, or dropped: symbolic.prove), but the sometimes ones: a proof of
        # "never P" would read as the opposite of what the property says
        provable = set(provable_properties(model))
        for p in res.properties:
            if (p in provable and not getattr(spec.properties.get(p), "lemma", False)
                    and res.status(p) != Verdict.VIOLATED):
                run.proofs.append(prove_one(model, p))
    return run


def run_variants(spec, variants: list[str | None] | None = None, params: dict | None = None,
                 options: Options | None = None, progress: bool = True, prove: bool = False,
                 on_variant=None) -> list[VariantRun]:
    """Each variant (every one by default) through run_variant, in order, until one is stopped
    by a signal."""
    runs = []
    for variant in (variants or list(spec.variants) or [None]):
        if on_variant:
            on_variant(spec.variant_name(variant))
        runs.append(run_variant(spec, variant, params, options, progress, prove))
        if runs[-1].search.interrupted:
            break
    return runs
