"""Commands of the symbolic engine (checker/symbolic.py): bmc, prove, compare.

Exit codes as for `kcheck check`: 0 proved (or, for bmc, no behaviour is longer than the depth
explored; for compare, answered); 1 violated; 2 bad input; 3 inconclusive (depth bound reached,
solver timeout, not inductive); 5 results printed but saving failed; 130 interrupted (Ctrl-C
stops the solver, which gives up "interrupted from keyboard": that is an interruption, not an
inconclusive proof); 143 terminated (SIGTERM stops a solver call the same way, see
SolverStop)."""
from __future__ import annotations

import argparse
import math
import ctypes
import json
import os
import signal
import sys
import threading
from pathlib import Path

from rich.table import Table
from rich.text import Text

from kcheck import ci_outputs
from kcheck.layout import layout_of
from kcheck.options import (BOUNDED, INTERRUPTED, OK, TERMINATED, VIOLATED, BadInput, SaveFailed,
                            json_option, make_console, model_options, out_dir, param_option,
                            params, positive, property_option, save_options, spec_option)
from kcheck.render import save
from kcheck.verdict import RunReport, Verdict, cell, print_json

KINDS = {"bmc": "bounded model checking", "prove": "k-induction"}


def _seconds(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a number of seconds, got {s!r}")
    # Z3 takes a timeout in whole milliseconds below 2^32: inf, nan and 1e400 are not one
    if not math.isfinite(v) or v <= 0 or v * 1000 >= 2 ** 32:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number of seconds below "
                                         f"{2 ** 32 // 1000:,} (about 49 days), got {s!r}")
    return v


# The deepest unrolling bmc is asked for (--depth, prove's --bmc-depth). bmc keeps every frame of
# the unrolling in one solver, and the cap on a lifted search bound grows with the depth asked,
# so every frame is wider too. Measured on consumer_group, frames added without solving, with
# every property's question: 33 ms and 2.4 MB a frame at depth 11 (6-bit integers), 47 ms and
# 3.7 MB at 1,000 (11 bits), 62 ms and 5.3 MB at 10,000 (15 bits). 1,000 frames build in under a
# minute in 4 GB; 10,000 would take 10 minutes and 53 GB before a question is asked. Solving
# limits first anyway (depth 11 takes 15 s), so a larger depth is a typo, not a bound meant
MAX_DEPTH = 1000


def _solver_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="per solver call")
    return p


def register(sub) -> dict:
    common = [*model_options(), _solver_options(), json_option()]
    b = sub.add_parser("bmc", help="bounded model checking with Z3, epochs unbounded",
                       parents=[*common, property_option(),
                                save_options("counterexamples like `kcheck check --save`")])
    b.add_argument("--depth", type=positive("--depth", MAX_DEPTH), default=10,
                   help=f"largest number of steps to unroll (1..{MAX_DEPTH})")
    b.add_argument("--keep-search-bounds", action="store_true",
                   help="keep the explicit search's caps (e.g. max_epoch), as `kcheck check` does")

    p = sub.add_parser("prove", help="k-induction with Z3 for every epoch, lemmas proved first",
                       parents=[*common, property_option(),
                                save_options("violations under --out, counterexamples to induction "
                                             "under --out/induction")])
    p.add_argument("--k", type=positive("--k"), default=3, help="largest k to try (1..K)")
    p.add_argument("--no-lemmas", action="store_true", help="do not assume the spec's lemmas")
    p.add_argument("--bmc-depth", type=positive("--bmc-depth", MAX_DEPTH, least=0), default=5,
                   help=f"when not inductive, look this deep for a real violation (0..{MAX_DEPTH})")
    ci_outputs.add_options(p)

    # compare names its two variants with --variants A B: no --variant to accept and ignore
    c = sub.add_parser("compare", help="does rule R in variant A accept everything B accepts?",
                       parents=[spec_option(), param_option(), _solver_options(), json_option()])
    c.add_argument("--rule", required=True,
                   help="the named rule to compare ('kcheck list' names each spec's rules)")
    c.add_argument("--variants", nargs=2, required=True, metavar=("A", "B"),
                   help="the two variants whose rule is compared: each a variant of SPEC, or "
                        "OTHER:VARIANT, a variant of another spec with the same state fields "
                        "(a shipped name or a spec module's path, e.g. consumer_group:kip1251 "
                        "to compare a copied rule with the shipped one)")
    c.add_argument("--lift", action="append", default=[], metavar="ARG",
                   help="make the rule's integer argument ARG a free integer (e.g. the request epoch)")
    c.add_argument("--accept", metavar="VALUE", help="the outcome that means accepted (default NONE)")
    c.add_argument("--assume", choices=["invariants", "lemmas", "none"], default="invariants",
                   help="which of the spec's invariants the compared states satisfy")
    return {"bmc": cmd_bmc, "prove": cmd_prove, "compare": cmd_compare}


def _known_properties(spec, props, *extra):
    """Every property named must be one the engine checks; a progress property is named as such,
    since it is a real name of the spec that this command does not handle."""
    for p in props or []:
        if p in spec.properties or p in extra:
            continue
        if p in spec.progress:
            raise BadInput(f"'{p}' is a progress property of {spec.name}: the symbolic engine "
                           f"checks safety properties; check it with 'kcheck progress {spec.name} "
                           f"--property {p}'")
        raise BadInput(f"unknown property '{p}' for spec {spec.name}; properties: "
                       f"{', '.join(spec.properties)}")


def _model(args):
    from kcheck.loader import load_spec
    spec = load_spec(args.spec)
    return spec, spec.instantiate(args.variant, params(args.param))


def _stats_str(st: dict) -> str:
    parts = [f"{st.get('checks', 0)} solver calls"]
    for k in ("conflicts", "decisions", "propagations"):
        if k in st:
            parts.append(f"{st[k]:,} {k}")
    if "max memory MB" in st:
        parts.append(f"{st['max memory MB']:.0f} MB peak")
    return ", ".join(parts)


def _trace_doc(cx):
    if cx is None:
        return None
    if cx.trace is None:
        return {"states": cx.path.states, "steps": cx.path.steps, "note": cx.note}
    return cx.trace.to_json()


class SolverStop:
    """SIGTERM while Z3 is solving, handled as Ctrl-C is: the call stops, the partial result is
    printed, and the command exits 143.

    Python runs a signal handler only once the main thread is back in Python, that is after a
    solver call returns, which may be hours. So a thread, woken through signal.set_wakeup_fd
    (written by Python's C-level handler while the main thread is still inside a solver), stops
    the call: a Z3 call by ``symbolic.Z3Call.interrupt`` (only while the main thread is inside
    one: outside a call Z3's interrupt cancels whatever API call is being made), every RESEND_S
    seconds until the command ends; the SAT solver's call by ``cnf.STOP`` (SIGTERM) or
    ``cnf.INTERRUPTED`` (Ctrl-C), which CaDiCaL's terminator reads every few conflicts (the
    handlers run there too: see cnf._stop_asked); and a solver call that starts later gives
    up at once. The call gives up "interrupted from keyboard" or "canceled" and the engine
    returns what it found. Z3's own SIGINT handler is off (``System.solver``): it swallowed a
    Ctrl-C that landed as a call finished (bmc then ran to its end), and Python's
    KeyboardInterrupt alone is lost when it is raised inside a __del__.

    The same thread says on stderr that the solver is running, once, after the progress interval
    (KCHECK_PROGRESS_SECONDS, as for the search's progress lines): a quick answer or a bad input
    stays without it."""

    RESEND_S = 0.2

    def __init__(self, what: str):
        self.what = what
        self.terminated = threading.Event()
        self._done = threading.Event()
        self._saved = None

    def __enter__(self):
        from kcheck import cnf
        cnf.STOP.clear()
        cnf.INTERRUPTED.clear()
        try:
            r, w = os.pipe()
            os.set_blocking(w, False)
            old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            old_term = signal.signal(signal.SIGTERM, self._on_sigterm)
            old_int = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:     # not the main thread (an embedding program): leave signals alone
            return self
        self._saved = (r, w, old_fd, old_term, old_int)
        self._thread = threading.Thread(target=self._watch, args=(r,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._saved is None:
            return False
        r, w, old_fd, old_term, old_int = self._saved
        self._done.set()
        try:
            os.write(w, b"\0")      # wakes the watcher if it still waits for a signal
        except OSError:
            pass
        self._thread.join()
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        os.close(r)
        os.close(w)
        return False

    @staticmethod
    def _quiet_unraisable():
        # a signal that lands inside a Z3 constructor leaves a half-built object whose __del__
        # fails later; the stop is reported, so that is noise, not a traceback to show
        sys.unraisablehook = lambda unraisable: None

    def _on_sigterm(self, signum, frame):
        self._quiet_unraisable()
        self.terminated.set()
        from kcheck import cnf      # bmc's SAT solver stops between two slices of its call
        cnf.STOP.set()

    def _on_sigint(self, signum, frame):
        if self.terminated.is_set():
            return      # our own SIGINT, landing between two solver calls
        self._quiet_unraisable()
        from kcheck import cnf
        # the flag alone: every solver call from now on gives up, and the watcher stops the one
        # in progress. A KeyboardInterrupt raised here landed wherever the main thread was, for
        # instance just after the stopped call had returned its partial answer, outside every
        # handler: the command then exited 130 having printed nothing
        cnf.INTERRUPTED.set()

    def _watch(self, r: int):
        import select
        from kcheck import cnf
        from kcheck.options import PROGRESS_EVERY
        from kcheck.symbolic import Z3Call
        every = float(os.environ.get("KCHECK_PROGRESS_SECONDS", PROGRESS_EVERY))
        announced = False
        while not self._done.is_set():
            ready, _, _ = select.select([r], [], [], None if announced else every)
            if not ready:
                announced = True
                if not self._done.is_set():
                    make_console(stderr=True, soft_wrap=True).print(
                        f"kcheck: {self.what}: solver running (Ctrl-C or SIGTERM stops it and "
                        f"prints what was found)", markup=False)
                continue
            got = os.read(r, 64)
            if signal.SIGTERM in got:
                self.terminated.set()
                cnf.STOP.set()
                break
            if signal.SIGINT in got:
                # Python's handler raises KeyboardInterrupt once the main thread is back in
                # Python, but one raised inside a __del__ is lost: the flag stops every
                # solver call from now on, and a Z3 call in progress is stopped at once
                cnf.INTERRUPTED.set()
                break
        while not self._done.is_set():
            Z3Call.interrupt()
            self._done.wait(self.RESEND_S)

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C stopped the solver: exit 130. A solver that gave up on its own (a
        --timeout, whose reason Z3 also words "canceled") is undecided: exit 3."""
        from kcheck import cnf
        return cnf.INTERRUPTED.is_set()

    def code(self, code: int) -> int:
        """The exit code once the command printed its result: 143 after SIGTERM."""
        if self.terminated.is_set():
            make_console(stderr=True).print("kcheck: terminated (SIGTERM)", markup=False)
            return TERMINATED
        return code


def _named_states(model, cx) -> list[dict]:
    """The solver's states with the spec's field names and readable values, also where a value
    lies outside the parameters' ranges (then no trace can be packed, but the state can be read)."""
    return [layout_of(model).show(list(st)) for st in cx.path.states]


def _save_states(model, prop: str, kind: str, cx, out: str) -> str:
    """A counterexample that cannot be packed as a trace is saved as its named states and steps
    (not replayable: its values leave the parameters' ranges)."""
    from pathlib import Path
    d = Path(out) / model.spec.name / model.variant
    path = d / f"{prop}.json"
    doc = {"kcheck_states": 1, "spec": model.spec.name, "variant": model.variant,
           "params": model.params.as_dict(), "property": prop, "kind": kind, "note": cx.note,
           "states": _named_states(model, cx),
           "steps": [model.instances[k].label for k in cx.path.steps]}
    try:
        d.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    except OSError as e:
        raise SaveFailed(f"cannot save {path}: {e.strerror or e} (the results above are complete; "
                         f"choose a writable --out)") from None
    return str(path)


def _print_trace(console, cx, title, saved=None, model=None):
    from kcheck.render import trace_table
    if cx.trace is None:
        console.print(f"{title}: {cx.note}", markup=False)
        if model is not None:
            from rich.table import Table as _T
            t = _T(show_header=True)
            t.add_column("#")
            t.add_column("action")
            t.add_column("state (field values, outside the parameters' ranges too)")
            states = _named_states(model, cx)
            for i, st in enumerate(states):
                act = "state" if i == 0 else model.instances[cx.path.steps[i - 1]].label
                t.add_row(str(i), act, Text(", ".join(f"{k}={v}" for k, v in st.items())))
            console.print(t)
        if saved:
            console.print(f"saved: {saved}", markup=False)
        return
    console.print(trace_table(cx.trace, title))
    if cx.note:
        console.print(f"note: {cx.note}", markup=False)
    if saved:
        console.print(f"saved: {saved}", markup=False)


def _solver_report(res, counterexamples: dict, details: dict) -> RunReport:
    """The report of a solver's run (bmc, prove): each counterexample's trace; a path the
    explicit encoding cannot pack keeps its length, its raw states and steps, and its named
    states (in the property's JSON, beside ``details``)."""
    model = res.model
    traces = {}
    for p in res.properties:
        cx = counterexamples.get(p)
        details.setdefault(p, {})["note"] = cx.note if cx is not None else None
        if cx is None:
            continue
        if cx.trace is None:
            details[p].update(trace_length=len(cx.path.steps), trace=_trace_doc(cx),
                              states=_named_states(model, cx))
        else:
            traces[p] = cx.trace
    return res.report(traces, details)


def bmc_run(res) -> RunReport:
    """A bmc run's report (engine 'z3-bmc')."""
    return _solver_report(res, res.found, {})


def prove_run(model, results: list, saved: dict, hints: dict | None = None) -> RunReport:
    """A prove command's report (engine 'z3-k-induction'): one property per proof, each with
    its figures (k, lemmas, time, solver counters) and its counterexample, a violation or the
    counterexample to induction (``saved``: where it was saved, by property), and after NOT
    INDUCTIVE the hint the terminal prints (``hints``: symbolic.InductionHint by property;
    null where there is none)."""
    props = {}
    for r in results:
        cx = r.counterexample if r.verdict in (Verdict.VIOLATED, Verdict.NOT_INDUCTIVE) else None
        h = (hints or {}).get(r.property)
        details = {r.property: {**r.statistics, "saved": saved.get(r.property),
                                "hint": h.to_json(r.lemmas_dropped) if h is not None else None}}
        del details[r.property]["k_max"]
        props.update(_solver_report(r, {r.property: cx} if cx else {}, details).properties)
    from kcheck.symbolic import merge_stats
    solver: dict = {}
    for r in results:
        merge_stats(solver, r.stats)
    k_max = results[0].k_max if results else 1
    return RunReport("z3-k-induction", model, props,
                     {"k_max": k_max, "elapsed_s": round(sum(r.elapsed_s for r in results), 3),
                      "solver": solver})


def compare_run(r) -> RunReport:
    """A compare command's report (engine 'z3-compare'): each question with its witness."""
    details = {p: {"witness": d.to_json(r.variants) if d is not None else None}
               for p, d in r.witnesses.items()}
    return r.report({}, details)


def _header(console, m, what):
    from kcheck.render import heading, params_str
    console.print(heading(m, params_str(m.params.as_dict())).append(f": {what}"))


# ---------------------------------------------------------------------------------------------

def cmd_bmc(args, console) -> int:
    from kcheck.symbolic import bmc
    spec, model = _model(args)
    from kcheck.symbolic import DEADLOCK
    out = out_dir(args)
    _known_properties(spec, args.property, DEADLOCK)
    with SolverStop(f"bmc {spec.name}/{model.variant} to depth {args.depth}") as stop:
        res = bmc(model, args.property, args.depth, args.keep_search_bounds, args.timeout)
    if stop.terminated.is_set() and res.inconclusive:
        res.inconclusive = "solver: stopped by SIGTERM"
    saved: dict = {}
    scope = ("exhaustive: no behaviour is longer than %d steps" % res.depth if res.exhaustive else
             f"every property checked is violated by depth {res.depth}"
             if len(res.found) == len(res.properties) else
             f"inconclusive: {res.inconclusive}" if res.inconclusive else
             f"bounded: depth {res.depth}")
    bounds = "search bounds kept" if args.keep_search_bounds else "search bounds lifted"
    if args.json:
        print_json(bmc_run(res).to_json(), "run")
    else:
        _header(console, model, f"bmc to depth {args.depth}, {bounds}")
        console.print(f"{scope}; {res.elapsed_s:.2f}s, {_stats_str(res.stats)}", markup=False)
        if res.width:
            console.print(f"encoding: {res.width}-bit integers" +
                          (f", lifted bounds below {res.cap + 1} (raised whenever a path reaches "
                           f"that within the depth)" if res.cap is not None else ""), markup=False)
        t = Table(show_header=True)
        t.add_column("property")
        t.add_column("verdict")
        t.add_column("meaning")
        for p in res.properties:
            st = res.status(p)
            text = cell(st, len(res.found[p].path.steps) if st in (Verdict.VIOLATED, Verdict.REACHED) else None,
                        bounded=f"no violation up to depth {res.depth}")
            doc = spec.properties[p].doc if p in spec.properties else "no reachable state without a successor"
            t.add_row(p, text, Text(doc))
        console.print(t)
        for p, cx in res.found.items():
            what = "witness" if res.status(p) == Verdict.REACHED else "counterexample"
            _print_trace(console, cx, f"Shortest {what} for {p} ({len(cx.path.steps)} steps, bmc)",
                         None, model)
    # saved after the results are printed, so a failed save loses nothing
    if out is not None:
        for p, cx in res.found.items():
            saved[p] = (save(cx.trace, out) if cx.trace is not None else
                        _save_states(model, p, cx.kind, cx, out))
            if not args.json:
                console.print(f"saved: {saved[p]}", markup=False)
    # a sometimes property's witness (reached) is not a violation
    violated = any(res.status(p) == Verdict.VIOLATED for p in res.found)
    return stop.code(INTERRUPTED if stop.interrupted else VIOLATED if violated else
                     BOUNDED if res.inconclusive or not res.exhaustive else OK)


def cmd_prove(args, console) -> int:
    from kcheck.cnf import interrupted_in_z3
    from kcheck.symbolic import DEADLOCK, ProofResult, provable_properties, prove
    spec, model = _model(args)
    out = out_dir(args)
    props = args.property or provable_properties(model)
    _known_properties(spec, props, DEADLOCK)
    results = []
    with SolverStop(f"prove {spec.name}/{model.variant} ({', '.join(props)})") as stop:
        for p in props:
            # after SIGTERM each property still gets its line: its first solver call is stopped
            try:
                results.append(prove(model, p, args.k, not args.no_lemmas, args.timeout,
                                     args.bmc_depth))
            except (KeyboardInterrupt, ctypes.ArgumentError) as e:
                if not interrupted_in_z3(e):
                    raise
                # Ctrl-C outside a solver call (building terms, between two calls): the
                # properties already decided are printed, this one is unknown, the rest not tried
                results.append(ProofResult(model, p, Verdict.UNKNOWN, 0, k_max=args.k,
                                           why="solver: interrupted from keyboard"))
                break
            if stop.terminated.is_set() and results[-1].verdict is Verdict.UNKNOWN:
                results[-1].why = "solver: stopped by SIGTERM"
    ci_outputs.record_prove(args, model, results)
    to_save, saved = [], {}
    for r in results:
        cx = r.counterexample
        if out is not None and cx is not None and r.verdict in (Verdict.VIOLATED, Verdict.NOT_INDUCTIVE):
            where = out if r.verdict is Verdict.VIOLATED else f"{out}/induction"
            to_save.append((r, cx, where))
            saved[r.property] = str(Path(where) / spec.name / model.variant / f"{r.property}.json")
    # the hints once, for the JSON and the terminal alike (each searches the reachable states)
    from kcheck.symbolic import induction_hint
    hints = {r.property: induction_hint(model, r) for r in results
             if r.verdict is Verdict.NOT_INDUCTIVE}
    run = prove_run(model, results, saved, hints)
    differences = run.record_differences()
    if args.json:
        print_json({**run.to_json(), "record": {"matches": not differences, "differences": differences}},
                   "run")
    for r in ([] if args.json else results):
        _header(console, model, f"prove {r.property}")
        # unknown reads as compare's does: the word, then the solver's reason
        line = "UNKNOWN" if r.verdict is Verdict.UNKNOWN else cell(r.verdict)
        if r.verdict is Verdict.PROVED:
            line += (f" (k={r.k}: every reachable state, search bounds lifted)" if not r.why
                     else f" ({r.why})")
        elif r.verdict is Verdict.NOT_INDUCTIVE:
            line += (f" at k=1..{r.k}" if r.k > 1 else " at k=1") + (f"; {r.why}" if r.why else "")
        elif r.why:
            line += f": {r.why}"
        console.print(line, markup=False)
        if r.lemmas_used:
            console.print(f"lemmas assumed (proved inductive): {', '.join(r.lemmas_used)}", markup=False)
        for l, why in r.lemmas_dropped.items():
            console.print(f"lemma {l} not used: {why}", markup=False)
        console.print(f"benchmark: {r.property}: {r.elapsed_s:.2f}s, {_stats_str(r.stats)}", markup=False)
        cx = r.counterexample
        if r.verdict is Verdict.VIOLATED:
            _print_trace(console, cx, f"Counterexample for {r.property} ({len(cx.path.steps)} steps)",
                         None, model)
        elif r.verdict is Verdict.NOT_INDUCTIVE and cx is not None:
            _print_trace(console, cx, f"Counterexample to induction for {r.property}: from a state "
                                      f"satisfying it{' and the lemmas' if r.lemmas_used else ''}, "
                                      f"{len(cx.path.steps)} step(s) break it (last: {r.cti_action})",
                         None, model)
            _print_hint(console, r, hints.get(r.property))
    if differences and not args.json:
        for d in differences:
            console.print(f"differs from the record: {d}", markup=False)
    # saved after the results are printed, so a failed save loses nothing
    for r, cx, where in to_save:
        path = (save(cx.trace, where) if cx.trace is not None else
                _save_states(model, r.property, r.verdict.value, cx, where))
        if not args.json:
            console.print(f"saved: {path}", markup=False)
    verdicts = [r.verdict for r in results]
    return stop.code(INTERRUPTED if stop.interrupted else
                     VIOLATED if Verdict.VIOLATED in verdicts else
                     OK if all(v is Verdict.PROVED for v in verdicts) else BOUNDED)


def _print_hint(console, r, h) -> None:
    """After NOT INDUCTIVE: the fields in which the counterexample to induction differs from the
    reachable states it resembles most, and the declared invariants that would exclude it
    (``h``, symbolic.induction_hint's), so the user knows where to look for a lemma."""
    from kcheck.symbolic import candidate_note
    if h is None:
        return
    if h.distance is not None:
        console.print(f"The first state of the counterexample to induction is unreachable: the "
                      f"{h.nearest} reachable state(s) most like it (of {h.reachable:,}, every one) "
                      f"differ from it in {h.distance} field(s):", markup=False)
        # the fields every one of them has otherwise first: the likeliest subject of a lemma
        for name, (here, there, n) in sorted(h.differing.items(), key=lambda kv: -kv[1][2]):
            console.print(f"  {name}: {here} here; {' or '.join(map(str, there))} in "
                          + ("every one of them" if n == h.nearest else f"{n} of them"), markup=False)
    else:
        console.print(f"Reachable states not compared: {h.why_not_searched}.", markup=False)
    checked = "hold in every reachable state" if h.exhaustive else "are not checked against the reachable states"
    if h.candidates:
        console.print(f"Candidate lemmas: these declared invariants are false in a state of the "
                      f"counterexample to induction and {checked}; assuming one would exclude it:",
                      markup=False)
        for name, lemma in h.candidates:
            console.print(f"  {name} ({candidate_note(name, lemma, r.lemmas_dropped)})", markup=False)
    else:
        console.print("No declared invariant excludes it: a new lemma should state what the fields "
                      "above have in every reachable state.", markup=False)


def _compared_variant(spec, given: str):
    """A variant as --variants names it: VARIANT of the command's spec, or OTHER:VARIANT of
    another (a shipped name or a path; the last colon splits, as a variant's name has none).
    Returns the spec and the variant's name."""
    from kcheck.loader import load_spec
    other, colon, variant = given.rpartition(":")
    if not colon:
        return spec, given
    if not other or not variant:
        raise BadInput(f"--variants {given}: give VARIANT or SPEC:VARIANT (e.g. "
                       f"consumer_group:kip1251)")
    loaded = load_spec(other)
    if loaded.name == spec.name and Path(loaded.source_file).resolve() == Path(spec.source_file).resolve():
        loaded = spec      # the command's own spec, named again: one spec, not two copies of it
    if variant not in loaded.variants and variant not in loaded.profiles:
        raise BadInput(f"--variants {given}: unknown variant '{variant}' for spec {loaded.name}; "
                       f"variants: {', '.join(loaded.variants)}")
    return loaded, variant


def cmd_compare(args, console) -> int:
    from kcheck.loader import load_spec
    from kcheck.symbolic import compare
    spec = load_spec(args.spec)
    (spec_a, a), (spec_b, b) = (_compared_variant(spec, v) for v in args.variants)
    if spec_a is not spec and spec_b is not spec:
        raise BadInput(f"--variants {' '.join(args.variants)}: at least one of the two is a variant "
                       f"of {args.spec} (write it without SPEC:), so that the two specs compared "
                       f"are the ones named")
    if spec_b is spec_a:
        spec_b = None
    with SolverStop(f"compare {spec.name} {args.rule} ({' vs '.join(args.variants)})") as stop:
        r = compare(spec_a, args.rule, a, b, params(args.param), args.lift, args.accept, args.assume,
                    args.timeout, spec_b)
    # the variants as the answer names them: SPEC:VARIANT when two specs are compared
    a, b = r.variants
    if stop.terminated.is_set() and r.inconclusive:
        r.inconclusive = "solver: stopped by SIGTERM"
    if args.json:
        # two variants: the run's own variant field stays empty, "variants" names them
        print_json({**compare_run(r).to_json(), "variant": None}, "run")
    else:
        from rich.text import Text
        console.print(Text.assemble((r.model.spec.name, "bold"), " rule ", (r.rule, "bold"), f": {a} vs {b} "
                      f"({r.call_sites} request shape(s); accepted = {r.accept_value or 'true'}; "
                      f"assuming {', '.join(r.assumed) or 'nothing beyond field ranges'})"))
        if r.inconclusive:
            console.print(f"UNKNOWN: {r.inconclusive}", markup=False)
        else:
            console.print(f"RELATION: {r.relation}", markup=False)
            for x, y, d in ((a, b, r.a_rejects_b_accepts), (b, a, r.b_rejects_a_accepts)):
                if d is None:
                    console.print(f"- {x} accepts every request {y} accepts, in every state", markup=False)
                else:
                    console.print(f"- {x} rejects a request {y} accepts: args {d.args}; "
                                  f"{a} → {d.result_a}, {b} → {d.result_b}; state {d.state}", markup=False)
            if r.decisions_differ is not None and r.a_rejects_b_accepts is None and r.b_rejects_a_accepts is None:
                d = r.decisions_differ
                console.print(f"- same acceptance, different answers: args {d.args}; {a} → {d.result_a}, "
                              f"{b} → {d.result_b}; state {d.state}", markup=False)
            elif r.decisions_differ is None:
                console.print("- identical decisions in every state", markup=False)
        console.print(f"benchmark: compare {r.rule}: {r.elapsed_s:.2f}s, {_stats_str(r.stats)}", markup=False)
    return stop.code(INTERRUPTED if stop.interrupted else BOUNDED if r.inconclusive else OK)


__all__ = ["register", "SolverStop", "bmc_run", "prove_run", "compare_run"]
