"""``kcheck conform``: replay a spec's traces on a real Kafka broker and print, per trace, whether
Kafka conforms, where it diverges (spec said X, Kafka said Y), or why the trace is not drivable.

Exit codes: 0 every drivable trace conforms (or diverges as the release record or a recorded
divergence expects); 1 an unexpected divergence, a broken replay, or a spec regression (a saved
trace the spec no longer replays: said before any broker starts); 2 bad input; 4 the broker
could not be started (the reason in one line: no Java, Maven cannot resolve the version, the
broker exited: its log)."""
from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from kcheck.bfs import Terminated
from kcheck.options import (INTERRUPTED, TERMINATED, BadInput, SaveFailed, make_console, positive,
                            writable_folder, write_file)
from kcheck.verdict import BROKEN, NOT_DRIVABLE, SPEC_REGRESSION, Outcome, print_json
from kcheck.conform import driver
from kcheck.conform.driver import BROKER_UNAVAILABLE

ROOT = Path(__file__).resolve().parent.parent     # a checkout's root (site-packages, installed)


def trace_root(spec_name: str) -> Path:
    """Where a spec's default traces are: tests/scenarios/SPEC and counterexamples/SPEC of kcheck's
    checkout, or, installed from a wheel (which carries no traces), of the current folder."""
    for root in (ROOT, Path.cwd()):
        if (root / "tests" / "scenarios" / spec_name).is_dir() \
                or (root / "counterexamples" / spec_name).is_dir():
            return root
    raise BadInput(f"no trace files given and none to replay by default: neither kcheck's "
                   f"checkout nor {Path.cwd()} has tests/scenarios/{spec_name}/ or "
                   f"counterexamples/{spec_name}/; give trace files (kcheck conform {spec_name} "
                   f"FILE...)")


def register(sub) -> dict:
    c = sub.add_parser("conform", help="replay a spec's traces on a real Kafka broker and compare "
                                       "every step with the spec")
    c.add_argument("spec", help="a shipped spec with a conformance adapter (consumer_group, ...)")
    c.add_argument("files", nargs="*", metavar="FILE",
                   help="traces to replay (default: the spec's scenarios and the variant's "
                        "saved counterexamples)")
    c.add_argument("--variant", help="whose counterexamples to replay by default (default: the "
                                     "spec's default variant)")
    src = c.add_mutually_exclusive_group()
    src.add_argument("--kafka", metavar="VERSION", help="the Kafka release to run (default 4.3.1; "
                                                        "jars from Maven Central, cached)")
    src.add_argument("--kafka-jars", metavar="DIR", help="run the Kafka whose jars are in DIR "
                                                         "(a locally built Kafka)")
    src.add_argument("--bootstrap", metavar="HOST:PORT", help="use a broker you started")
    c.add_argument("--walks", type=positive("--walks"), default=0, metavar="N",
                   help="also replay N seeded random walks of the spec (of --variant, with "
                        "--param); prints how often each action and response code was driven")
    c.add_argument("--depth", type=positive("--depth"), default=12, metavar="D",
                   help="steps per walk (default 12)")
    c.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the first walk")
    c.add_argument("--which-variant", action="store_true",
                   help="replay the traces of every variant and say which variant's rules "
                        "this Kafka release runs; with --exhaustive, the variants whose every "
                        "transition conforms")
    c.add_argument("--out", metavar="DIR", default=None,
                   help="where divergent walks and wire logs go (default: wire logs beside the "
                        "trace, walks under conformance/SPEC/)")
    c.add_argument("--wire-logs", action="store_true",
                   help="save every trace's requests and responses, not only a divergent one's")
    c.add_argument("--move-coordinator-after", metavar="K[,K...]", default=None,
                   help="move the group coordinator to another node after these steps of every "
                        "trace (a cluster of three; consumer_group): the spec says nothing changes")
    c.add_argument("--assignor", default=None, metavar="NAME",
                   help="drive the traces with one of Kafka's own server-side assignors (uniform, "
                        "range; consumer_group) instead of the scripted one: Kafka computes each "
                        "target, and a trace written for that assignor names the same")
    c.add_argument("--kafka-default-timing", action="store_true",
                   help="run the broker at Kafka's default assignment timing (4.3+: the target "
                        "deferred by group.consumer.assignment.interval.ms and offloaded; "
                        "consumer_group): a step that asks for a new target waits for it")
    c.add_argument("--exhaustive", action="store_true",
                   help="check every transition of the spec's reachable graph on Kafka's own "
                        "coordinator code, run in-process (no broker): consumer_group")
    c.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a spec parameter of the graph --exhaustive walks, or of the --walks")
    c.add_argument("--no-broker-replay", action="store_true",
                   help="--exhaustive: do not replay the divergences found in-process on a real "
                        "broker of the same release (by default each is, to confirm it over the "
                        "wire or mark it an in-process artefact)")
    c.add_argument("--max-divergences", type=positive("--max-divergences"), default=1,
                   metavar="N", help="--exhaustive stops after N divergences (default 1)")
    c.add_argument("--json", action="store_true", help="print the results as JSON")
    return {"conform": cmd_conform}


def _jobs(args, spec) -> list[driver.Job]:
    from kcheck.trace import TraceError
    try:
        if args.files:
            return [driver.load_job(f, spec.name) for f in args.files]
        root = trace_root(spec.name)
        if args.which_variant:
            paths = sorted((root / "tests" / "scenarios" / spec.name).glob("*.json"))
            paths += sorted((root / "counterexamples" / spec.name).glob("*/*.json"))
            return [driver.load_job(p, spec.name) for p in paths]
        return driver.default_jobs(spec.name, args.variant, spec, root)
    except TraceError as e:
        raise BadInput(str(e)) from None


def walk_filter(adapter):
    """The action instances a walk may take for this adapter: those it can drive
    (``action_reason``) from that state (``walk_allows(state, action)``, if it has one: no
    request Kafka would answer from a state it cannot hold)."""
    allows = getattr(adapter, "walk_allows", lambda state, action: True)
    return lambda state, inst: (adapter.action_reason(inst.action.name, dict(inst.args)) is None
                                and allows(state, inst.action.name))


def _walk_jobs(args, spec, adapter) -> list[driver.Job]:
    from kcheck.options import params
    from kcheck.spec.lang import SpecError
    from kcheck.trace import random_walk
    try:
        model = spec.instantiate(args.variant, params(args.param))
    except SpecError as e:
        raise BadInput(str(e)) from None
    jobs = []
    for i in range(args.walks):
        seed = args.seed + i
        doc = random_walk(model, args.depth, seed,
                          start=lambda s: adapter.initial_reason(model.params, s) is None,
                          allow=walk_filter(adapter))
        jobs.append(driver.Job(f"walk seed={seed} ({model.variant}, {len(doc['steps'])} steps)", doc))
    return jobs


def _rel(name: str) -> str:
    try:
        return str(Path(name).resolve().relative_to(ROOT))
    except ValueError:
        return name


def cmd_conform(args, console) -> int:
    from kcheck.conform.broker import Broker, BrokerError, Cluster, ExternalBroker
    from kcheck.conform.kafka import KafkaUnavailable, check_version
    from kcheck.loader import load_spec
    from kcheck.spec.lang import SpecError

    if args.spec in driver.NEVER_SHIPPED:
        raise BadInput(driver.NEVER_SHIPPED[args.spec])
    spec = load_spec(args.spec)
    try:
        # a copy of a shipped spec (Spec.derive) has the shipped one's fields and actions, so
        # the shipped spec's adapter drives it
        adapter = driver.adapter_for(spec.derived_from or spec.name)
    except SpecError as e:
        raise BadInput(str(e)) from None
    if args.variant is not None and args.variant not in spec.variants \
            and args.variant not in getattr(spec, "profiles", {}):
        raise BadInput(f"unknown variant '{args.variant}' for spec {spec.name}; variants: "
                       f"{', '.join(spec.variants)}" + (
                           f"; profiles: {', '.join(spec.profiles)}" if getattr(spec, "profiles", None) else ""))
    if args.kafka is not None:     # an empty one is refused, not taken for the default
        try:
            check_version(args.kafka)
        except ValueError as e:
            raise BadInput(str(e)) from None
    if args.move_coordinator_after:
        steps = args.move_coordinator_after.split(",")
        if not all(k.strip().isdigit() and int(k) >= 1 for k in steps):
            raise BadInput(f"--move-coordinator-after {args.move_coordinator_after!r}: give step "
                           f"numbers from 1, comma-separated (e.g. 2,5)")
        if not hasattr(adapter, "coordinator_moves"):
            raise BadInput(f"--move-coordinator-after: the {spec.name} adapter does not move "
                           f"coordinators (consumer_group does)")
        if args.bootstrap:
            raise BadInput("--move-coordinator-after needs the cluster kcheck starts; it cannot "
                           "be used with --bootstrap")
        adapter.coordinator_moves = tuple(int(k) for k in steps)
    if args.assignor is not None:
        stock = getattr(adapter, "STOCK_ASSIGNORS", ())
        if args.assignor not in stock:
            raise BadInput(f"--assignor {args.assignor!r}: " + (
                f"give one of {', '.join(stock)}" if stock else
                f"the {spec.name} adapter drives no server-side assignor (consumer_group does)"))
        if args.exhaustive:
            raise BadInput("--assignor drives traces on a broker; --exhaustive scripts every "
                           "target of the spec's graph in-process: give one of the two")
        if args.bootstrap:
            raise BadInput("--assignor needs a broker kcheck starts (it lists uniform and range "
                           "in group.consumer.assignors); it cannot be used with --bootstrap")
        adapter.assignor = args.assignor
    if args.no_broker_replay and not args.exhaustive:
        raise BadInput("--no-broker-replay is for --exhaustive (its divergences are replayed on "
                       "a broker); traces and walks are driven on the broker already")
    if args.kafka_default_timing:
        if not hasattr(adapter, "default_timing"):
            raise BadInput(f"--kafka-default-timing: the {spec.name} adapter computes no "
                           f"consumer group target (consumer_group does)")
        if args.exhaustive or args.bootstrap:
            raise BadInput("--kafka-default-timing sets the settings of a broker kcheck starts: "
                           "it cannot be used with --exhaustive or --bootstrap")
        adapter.default_timing = True
    if args.out:
        writable_folder("--out", args.out)    # found before a broker starts, not after a run
    if args.exhaustive:
        return cmd_exhaustive(args, spec, adapter, console)
    if args.param and not args.walks:
        raise BadInput("--param is for --exhaustive or --walks (a trace carries its own "
                       "parameters)")
    jobs = _jobs(args, spec)
    if args.walks:
        jobs += _walk_jobs(args, spec, adapter)
    if not jobs:
        raise BadInput(f"no traces to replay for {spec.name}")
    # a saved trace the spec no longer replays is the spec's failure: said before any broker
    # starts, and nothing else is run (Kafka cannot be judged by a spec that broke its traces)
    from kcheck.trace import TraceError
    try:
        regressions = driver.spec_regressions(spec, jobs)
    except TraceError as e:
        raise BadInput(str(e)) from None
    if regressions:
        if args.json:
            print_json(conform_document(spec, regressions, "not started", args.which_variant),
                       "conform")
        else:
            _print_table(console, spec, "(not started: the spec no longer replays its traces)",
                         regressions)
        return driver.exit_code(regressions)

    err = make_console(stderr=True, soft_wrap=True)
    # traces that need replicas run on a cluster of three, started when the first needs it
    on_cluster = [adapter.needs_cluster(job.doc) for job in jobs]
    try:
        if args.bootstrap:
            try:
                broker = ExternalBroker(args.bootstrap)
            except ValueError as e:
                raise BadInput(str(e)) from None
        else:
            broker = Broker(args.kafka, jars=args.kafka_jars, extra_settings=adapter.broker_settings,
                            default_timing=args.kafka_default_timing)
        with (console.status(f"starting Kafka {broker.version} ...") if console.is_terminal
              else _Null()):
            broker.start()
    except (BrokerError, KafkaUnavailable) as e:
        err.print(f"error: the broker could not be started: {e}", markup=False)
        return BROKER_UNAVAILABLE
    version = broker.version
    outcomes: list[Outcome] = []
    cluster = None
    stopped = None      # Ctrl-C or SIGTERM: the traces finished are still reported
    save_errors: list[str] = []
    try:
        if not args.json:
            console.print(broker.describe() + (f" (started in {broker.started_in_s:.1f}s)"
                                               if broker.started_in_s else ""), markup=False)
        status = console.status("") if console.is_terminal else _Null()
        with status:
            for n, job in enumerate(jobs, start=1):
                def progress(name, i, total, n=n):
                    if console.is_terminal:
                        status.update(f"[{n}/{len(jobs)}] {_rel(name)}: step {i}/{total}")
                target = broker
                if on_cluster[n - 1] and not args.bootstrap:
                    if cluster is None:
                        status.update(f"starting a cluster of three Kafka {version} nodes ...")
                        try:
                            cluster = Cluster(args.kafka, jars=args.kafka_jars,
                                              extra_settings=adapter.broker_settings,
                                              default_timing=args.kafka_default_timing).start()
                        except (BrokerError, KafkaUnavailable) as e:
                            err.print(f"error: the cluster could not be started: {e}", markup=False)
                            return BROKER_UNAVAILABLE
                        if not args.json:
                            console.print(cluster.describe() + f" (started in "
                                          f"{cluster.started_in_s:.1f}s)", markup=False)
                    target = cluster
                try:
                    o = driver.run_trace(target, adapter, spec, job, version,
                                         all_variants=args.which_variant, progress=progress)
                except BrokerError as e:
                    err.print(f"error: the broker failed: {e}", markup=False)
                    return BROKER_UNAVAILABLE
                except (KeyboardInterrupt, Terminated) as e:
                    # the trace being driven is left unjudged; those before it are printed below
                    stopped = e
                    break
                outcomes.append(o)
                if o.unexpected or args.wire_logs:
                    try:
                        _save_divergence(args, spec, job, o, version)
                    except OSError as e:    # the verdicts still print; the command exits 5
                        save_errors.append(f"cannot write {e.filename or 'a wire log'} "
                                           f"({e.strerror})")
    finally:
        broker.stop()
        if cluster is not None:
            cluster.stop()

    if stopped is not None and not outcomes:
        raise stopped
    walks = [o for o, job in zip(outcomes, jobs) if job.path is None]
    if args.json:
        doc = conform_document(spec, outcomes, version, args.which_variant)
        if args.walks:
            doc["walk_coverage"] = [{"action": a, "steps": n, "outcomes": codes}
                                    for a, n, codes in driver.coverage(spec, walks)]
        print_json(doc, "conform")
    else:
        _print_table(console, spec, version, outcomes)
        if args.which_variant:
            _print_variants(console, spec, version, outcomes)
        if args.walks:
            _print_coverage(console, spec, walks)
    if stopped is not None:
        said = "terminated (SIGTERM)" if isinstance(stopped, Terminated) else "interrupted"
        err.print(f"kcheck: conform {said} after {len(outcomes)} of {len(jobs)} traces; the "
                  f"verdicts above are those finished", markup=False)
        return TERMINATED if isinstance(stopped, Terminated) else INTERRUPTED
    if save_errors:
        raise SaveFailed(save_errors[0] + (f" (and {len(save_errors) - 1} more)"
                                           if len(save_errors) > 1 else "")
                         + f" (the run's own exit code: {driver.exit_code(outcomes)})")
    return driver.exit_code(outcomes)


def _print_coverage(console, spec, walks) -> None:
    """How often the walks drove each action, and with which response codes of Kafka's."""
    t = Table(title=f"What {len(walks)} walks exercised ({spec.name}; - : a step without a "
                    f"response code)")
    t.add_column("action")
    t.add_column("steps", justify="right")
    t.add_column("Kafka's response codes")
    for action, n, codes in driver.coverage(spec, walks):
        t.add_row(action, str(n), ", ".join(f"{c} {k}" for c, k in codes.items()) or "never driven")
    console.print(t)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, *a, **k):
        pass


def cmd_exhaustive(args, spec, adapter, console) -> int:
    """``--exhaustive``: every transition of the reachable graph on the in-process coordinator
    (checker/conform/exhaustive.py); divergences are saved as traces."""
    from kcheck.conform.exhaustive import run_exhaustive
    from kcheck.conform.inprocess import Harness, HarnessError, compat_source
    from kcheck.conform.kafka import DEFAULT_VERSION, KafkaUnavailable, jars_version
    from kcheck.options import params
    from kcheck.spec.lang import SpecError
    for flag, given in (("FILE", args.files), ("--walks", args.walks),
                        ("--bootstrap", args.bootstrap),
                        ("--move-coordinator-after", args.move_coordinator_after)):
        if given:
            raise BadInput(f"--exhaustive walks the spec's graph in-process: {flag} cannot be "
                           f"given with it")
    if args.which_variant and args.variant is not None:
        raise BadInput("--exhaustive --which-variant walks every variant: --variant cannot be "
                       "given with it")
    libs = Path(args.kafka_jars) if args.kafka_jars else None
    try:
        version = jars_version(libs) if libs else (args.kafka or DEFAULT_VERSION)
    except KafkaUnavailable as e:
        raise BadInput(str(e)) from None
    try:
        compat_source(version)
    except ValueError as e:
        raise BadInput(str(e)) from None
    given = params(args.param)
    try:
        model = spec.instantiate(args.variant, given)
    except SpecError as e:
        raise BadInput(str(e)) from None
    err = make_console(stderr=True, soft_wrap=True)
    try:
        harness = Harness(version, libs, settings=adapter.broker_settings)
    except HarnessError as e:
        err.print(f"error: the in-process coordinator could not be started: {e}", markup=False)
        return BROKER_UNAVAILABLE

    def progress(res, seconds):
        if console.is_terminal and not args.json:
            err.print(f"  {res.checked:,} transitions checked, {res.checked / seconds:,.0f}/s",
                      markup=False)
    if args.which_variant:
        return _exhaustive_which_variant(args, spec, adapter, harness, given, version, console, err)
    try:
        res = run_exhaustive(spec, adapter, harness, model.variant, given, args.max_divergences,
                             progress=progress)
    except HarnessError as e:
        err.print(f"error: the in-process coordinator failed: {e}", markup=False)
        return BROKER_UNAVAILABLE
    finally:
        harness.close()
    if res.divergences and not args.no_broker_replay:
        _replay_on_broker(args, spec, adapter, version, res.divergences, console)
    saved = []
    out = Path(args.out) if args.out else Path("conformance") / spec.name
    for n, d in enumerate(res.divergences, start=1):
        path = out / f"exhaustive-{res.variant}-kafka-{version}-{n}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(d.doc, indent=2) + "\n")
            saved.append(str(path))
        except OSError as e:
            err.print(f"cannot save {path}: {e.strerror or e}", markup=False)
    if args.json:
        print_json({
            "spec": res.spec, "variant": res.variant, "kafka": version, "backend": "in-process",
            "params": res.params, "states": res.states, "transitions": res.transitions,
            "checked": res.checked, "client_side": res.client_side,
            "not_mappable": res.not_mappable, "initial_not_drivable": res.initial_not_drivable,
            "unreached": res.unreached, "timing": res.timing,
            "expected_divergences": res.expected_count,
            "outcomes": {a: {c: res.answered.get(a, {}).get(c, 0) for c in codes}
                         for a, codes in res.answerable.items()},
            "never_answered": res.never_answered(),
            "divergences": [{"step": d.step, "detail": d.detail, "shortest": d.shortest,
                             "broker": d.broker, "trace": p}
                            for d, p in zip(res.divergences, saved)],
            "seconds": round(res.seconds, 3), "graph_seconds": round(res.graph_seconds, 3),
            "transitions_per_second": round(res.rate, 1)}, "conform_exhaustive")
    else:
        console.print(res.text(), markup=False, highlight=False)
        for p in saved:
            console.print(f"saved: {p} (kcheck conform {spec.name} {p} --kafka {version} "
                          f"replays it on a broker)", markup=False, highlight=False)
    return driver.DIVERGED if res.divergences else driver.OK


def _replay_on_broker(args, spec, adapter, version, divergences, console) -> None:
    """Each divergence found in-process, replayed at once on a real broker of the same release
    (issue 33): an in-process finding is confirmed over the wire, or marked as an artefact of
    the harness (the trace conforms on the broker), or says why it could not be replayed. Sets
    ``Divergence.broker``; the run's verdict stays the in-process one."""
    from kcheck.conform.broker import Broker, BrokerError
    from kcheck.conform.kafka import KafkaUnavailable
    from kcheck.verdict import CONFORMS, DIVERGES, BROKEN, EXPECTED
    jobs = [driver.Job(f"in-process divergence {n}", d.doc) for n, d in enumerate(divergences, 1)]
    if any(adapter.needs_cluster(job.doc) for job in jobs):
        for d in divergences:
            d.broker = "not replayed: the trace needs a cluster of three brokers"
        return
    broker = Broker(None if args.kafka_jars else version, jars=args.kafka_jars,
                    extra_settings=adapter.broker_settings)
    try:
        with (console.status(f"replaying {len(jobs)} divergence(s) on a Kafka {version} broker ...")
              if console.is_terminal and not args.json else _Null()):
            broker.start()
            for d, job in zip(divergences, jobs):
                o = driver.run_trace(broker, adapter, spec, job, broker.version)
                d.broker = (f"confirmed: {o.text()}" if o.kind in (DIVERGES, BROKEN) else
                            f"not confirmed, an artefact of the in-process harness: the trace "
                            f"conforms on the broker" if o.kind == CONFORMS else
                            f"diverges only as the release record expects: {o.text()}"
                            if o.kind == EXPECTED else f"not confirmed: {o.text()}")
    except (BrokerError, KafkaUnavailable) as e:
        for d in divergences:
            d.broker = d.broker or f"not replayed: the broker could not be started or failed: {e}"
    finally:
        broker.stop()


def _exhaustive_which_variant(args, spec, adapter, harness, given, version, console, err) -> int:
    """``--exhaustive --which-variant``: the variants whose every transition conforms on this
    release (exhaustive.conforming_variants)."""
    from kcheck.conform.exhaustive import conforming_variants, conforms_everywhere
    from kcheck.conform.inprocess import HarnessError

    def progress(res):
        if console.is_terminal and not args.json:
            err.print(f"  {res.variant}: {res.checked:,} transitions checked", markup=False)
    try:
        results = conforming_variants(spec, adapter, harness, given, progress)
    except HarnessError as e:
        err.print(f"error: the in-process coordinator failed: {e}", markup=False)
        return BROKER_UNAVAILABLE
    finally:
        harness.close()
    rows = [{"variant": r.variant, "conforms": conforms_everywhere(r), "transitions": r.transitions,
             "checked": r.checked, "expected_divergences": r.expected_count,
             "first_divergence": (r.divergences[0].detail if r.divergences else
                                  r.expected[0].detail if r.expected else None),
             "seconds": round(r.seconds, 3)} for r in results]
    conforming = [r["variant"] for r in rows if r["conforms"]]
    if args.json:
        print_json({"spec": spec.name, "kafka": version, "backend": "in-process",
                    "params": results[0].params if results else given, "variants": rows,
                    "conforming": conforming}, "conform_exhaustive_variants")
    else:
        for r in rows:
            verdict = (f"conforms in all {r['checked']:,} transitions" if r["conforms"] else
                       f"diverges ({r['first_divergence']})")
            console.print(f"{r['variant']}: {verdict}", markup=False, highlight=False)
        console.print(f"Kafka {version} conforms in every transition to: "
                      f"{', '.join(conforming) or 'no variant'}", markup=False, highlight=False)
    return driver.OK if conforming else driver.DIVERGED


def _save_divergence(args, spec, job, o: Outcome, version: str) -> None:
    """A divergence keeps its wire log; a divergent walk is saved as a trace file too."""
    if job.path is not None:
        base = Path(args.out) / job.path.name if args.out else job.path
        driver.write_wire_log(o, base.with_suffix(f".kafka-{version}.wire.txt"), version)
        return
    out = Path(args.out or f"conformance/{spec.name}")
    out.mkdir(parents=True, exist_ok=True)
    name = driver.slug(o.trace)
    path = out / f"{name}.json"
    write_file(path, json.dumps(job.doc, indent=2) + "\n")
    o.trace = str(path)
    driver.write_wire_log(o, path.with_suffix(f".kafka-{version}.wire.txt"), version)


def _print_table(console, spec, version, outcomes) -> None:
    t = Table(title=f"{spec.name} on Kafka {version}")
    t.add_column("trace")
    t.add_column("variant")
    t.add_column("steps", justify="right")
    t.add_column("outcome")
    for o in outcomes:
        text = o.text() + (f" (wire log: {_rel(o.wire_log)})" if o.wire_log else "")
        t.add_row(_rel(o.trace), o.variant, str(o.steps), text)
    console.print(t)
    counts = driver.summary(outcomes)
    console.print(", ".join(f"{n} {k}" for k, n in counts.items()) + f" ({len(outcomes)} traces, "
                  f"{sum(o.seconds for o in outcomes):.1f}s)", markup=False)


def conform_document(spec, outcomes, version: str, which_variant: bool) -> dict:
    """What `conform --json` prints (the schema's "conform"): each trace's outcome and, with
    --which-variant, the rule-by-rule verdicts."""
    doc = json.loads(driver.to_json(outcomes, version))
    if which_variant:
        doc["variants"] = [{"variant": n, "change": d, "siding_with_default": a,
                            "siding_with_change": b, "kafka": v}
                           for n, d, a, b, v in variant_verdicts(spec, outcomes)]
        doc["profiles"] = [{"profile": n, "changes": c, "declared": bool(mine), "matching": a,
                            "against": b, "kafka": v}
                           for n, c, mine, a, b, v in profile_verdicts(spec, version, outcomes)]
    return doc


def variant_verdicts(spec, outcomes) -> list[tuple[str, str, int, int, str]]:
    """Rule by rule (each variant is the default with one change): among the drivable traces
    that tell the default and the variant apart (Kafka matched one and not the other), how many
    side with the default's rule and how many with the variant's change."""
    default = spec.default_variant
    drivable = [o for o in outcomes
                if o.kind not in (NOT_DRIVABLE, BROKEN, SPEC_REGRESSION)]
    rows = []
    for name, v in spec.variants.items():
        if name == default:
            agree = sum(1 for o in drivable if name in o.matches)
            rows.append((name, v.doc, agree, len(drivable) - agree,
                         "the default (every other row is judged against it)"))
            continue
        for_default = sum(1 for o in drivable if default in o.matches and name not in o.matches
                          and name not in o.undecided)
        # a trace the default cannot replay (it takes a step only the variant enables) tells
        # nothing about which rule Kafka runs, as on the default's side above
        for_variant = sum(1 for o in drivable if name in o.matches and default not in o.matches
                          and default not in o.undecided)
        verdict = ("runs this variant's change" if for_variant and not for_default else
                   "runs the default's rule" if for_default and not for_variant else
                   "mixed: traces side with both" if for_default else "not told apart by these traces")
        rows.append((name, v.doc, for_default, for_variant, verdict))
    return rows


def profile_verdicts(spec, version, outcomes) -> list[tuple[str, str, str, int, int, str]]:
    """Profile by profile (spec.profile: the default with several changes composed): among the
    drivable traces its model replays, how many Kafka matched at every step and how many it
    contradicted; "runs this profile" when none contradicts it and some trace tells it from the
    default; and whether it is the profile the spec declares for this release."""
    default = spec.default_variant
    drivable = [o for o in outcomes
                if o.kind not in (NOT_DRIVABLE, BROKEN, SPEC_REGRESSION)]
    declared = spec.profile_for(version) if hasattr(spec, "profile_for") else None
    rows = []
    for name, prof in getattr(spec, "profiles", {}).items():
        # every drivable trace the profile's model can replay: Kafka matched it or not
        decided = [o for o in drivable if name not in o.undecided]
        agree = sum(1 for o in decided if name in o.matches)
        against = len(decided) - agree
        told = any((name in o.matches) != (default in o.matches) for o in decided)
        verdict = ("runs this profile" if agree and not against and told else
                   "not told apart from the default" if not against else
                   "contradicted by some traces")
        rows.append((name, ", ".join(prof.changes) or "(none: the default)",
                     "yes" if declared is not None and declared.name == name else "",
                     agree, against, verdict))
    return rows


def _print_variants(console, spec, version, outcomes) -> None:
    t = Table(title=f"Which rules Kafka {version} runs ({spec.name}; each variant is "
                    f"{spec.default_variant} with one change)")
    t.add_column("variant")
    t.add_column("its change")
    t.add_column("traces siding with the default", justify="right")
    t.add_column("traces siding with the change", justify="right")
    t.add_column("Kafka")
    for name, doc, a, b, verdict in variant_verdicts(spec, outcomes):
        t.add_row(name, doc, str(a), str(b), verdict)
    console.print(t)
    rows = profile_verdicts(spec, version, outcomes)
    if rows:
        t = Table(title=f"Which profile Kafka {version} runs ({spec.name}; a profile is "
                        f"{spec.default_variant} with several changes composed)")
        for col in ("profile", "its changes", f"declared for {version}"):
            t.add_column(col)
        t.add_column("traces matching it", justify="right")
        t.add_column("traces against it", justify="right")
        t.add_column("Kafka")
        for name, changes, mine, a, b, verdict in rows:
            t.add_row(name, changes, mine, str(a), str(b), verdict)
        console.print(t)
