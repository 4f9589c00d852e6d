"""`kcheck explore`: step through a spec in the browser, as Stateright's Explorer does.

A small HTTP server from the standard library, bound to 127.0.0.1 only, serves one page
(checker/assets/explorer.html, .js and the report's stylesheet, all inlined: no network) and a
JSON API over one exploration session: the current state, every action instance with its guard's
conjuncts and their values in this state, the property verdicts of the current state, the path
taken; take a step, undo, go back to an initial state, load a trace (a counterexample or a
scenario) and walk it step by step.

Steps are taken with the compiled code the engines use (kcheck.trace.Executor); the guard's
conjuncts are evaluated for display by the plain reference interpreter (checker/reference.py),
which the tests keep in agreement with the compiled code.
"""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kcheck.layout import initial_words, layout_of
from kcheck.reference import evaluate
from kcheck.trace import MAX_TRACE_BYTES, Executor, TraceError, initial_state, shown_values
from kcheck.spec.lang import Expr, SpecError

# Conjunct texts longer than this are cut (a Forall over many members unrolls to a long text).
MAX_EXPR = 240


def expr_text(e: Expr) -> str:
    """A guard conjunct as a person reads it: field names, enum values by name."""
    op, a = e.op, e.args
    if op == "const":
        v = a[0]
        if e.enum is not None:
            return e.enum.show(v)
        return ("true" if v else "false") if e.kind == "bool" else str(v)
    if op == "field":
        return a[1]
    infix = {"add": "+", "sub": "-", "mul": "*", "eq": "==", "ne": "!=", "lt": "<", "le": "<="}
    if op in infix:
        return f"{_paren(a[0])} {infix[op]} {_paren(a[1])}"
    if op in ("and", "or"):
        return f" {op} ".join(_paren(x) for x in a)
    if op == "not":
        return f"not {_paren(a[0])}"
    if op == "ite":
        return f"if {expr_text(a[0])} then {expr_text(a[1])} else {expr_text(a[2])}"
    if op in ("min", "max"):
        return f"{op}({expr_text(a[0])}, {expr_text(a[1])})"
    if op == "select":
        first = a[1]
        base = first.args[1].split("[")[0] if first.op == "field" else "array"
        return f"{base}[{expr_text(a[0])}]"
    return op


def _paren(e: Expr) -> str:
    t = expr_text(e)
    return f"({t})" if e.op in ("and", "or", "add", "sub", "eq", "ne", "lt", "le", "ite") else t


def _short(text: str) -> str:
    return text if len(text) <= MAX_EXPR else text[:MAX_EXPR - 1] + "…"


class Session:
    """One exploration: a model, an initial state and the instance indices taken since; undo
    pops one. A loaded trace is a plan: 'next' takes its next step while the path follows it."""

    def __init__(self, model, trace: dict | None = None):
        self.lock = threading.Lock()
        self._use(model)
        if trace is not None:
            self.load(trace, "trace")

    def _use(self, model):
        self.model = model
        self.ex = Executor(model)
        self.initial = initial_words(model)[0]
        self.path: list[tuple[int, tuple, object]] = []   # (instance, state after, outcome)
        self.plan: list[int] | None = None                 # a loaded trace's instances, of this model
        self.plan_name: str | None = None

    @property
    def words(self) -> tuple:
        return self.path[-1][1] if self.path else self.initial

    def _flat(self, words) -> list:
        return shown_values(self.model, layout_of(self.model).unpack_flat(words))

    def take(self, k: int):
        if not 0 <= k < len(self.model.instances):
            raise ValueError(f"no action instance {k}; instances are 0..{len(self.model.instances) - 1}")
        inst = self.model.instances[k]
        if not self.ex.enabled(self.words, k):
            raise ValueError(f"{inst.label} is not enabled in this state")
        nxt, out, inside = self.ex.apply(self.words, k)
        if not inside:
            raise ValueError(f"{inst.label} leaves a search bound (e.g. an epoch cap) of this model")
        self.path.append((k, nxt, self.model.show_outcome(out)))

    def undo(self):
        if self.path:
            self.path.pop()

    def reset(self, i: int = 0):
        inits = initial_words(self.model)
        if not 0 <= i < len(inits):
            raise ValueError(f"no initial state {i}; there are {len(inits)}")
        self.initial, self.path = inits[i], []

    def load(self, doc: dict, name: str):
        """A trace or scenario document (checker/trace.py format) of this spec."""
        from pathlib import Path

        from kcheck.trace import validate
        if not isinstance(name, str):
            raise ValueError(f"name must be a string, got {name!r}")
        doc = validate(doc, name)      # TraceError: not a trace, in one sentence
        spec = self.model.spec
        ref = doc.get("spec")
        # a shipped spec by name; a user's by its path, relative to the trace (the page uploads
        # the trace's text only, so the file name is what can be compared)
        if not isinstance(ref, str) or ref != spec.name and Path(ref).name != Path(spec.source_file).name:
            raise ValueError(f"{name} is a trace of spec {ref!r}, not of {spec.name}")
        model = spec.instantiate(doc.get("variant") or self.model.variant, doc.get("params") or {})
        if doc.get("state"):
            initial = tuple(layout_of(model).pack(initial_state(model, doc["state"])))
        else:
            initial = initial_words(model)[0]
        plan = [model.instance(st["action"], st.get("args", {})).index for st in doc["steps"]]
        self._use(model)
        self.initial, self.plan, self.plan_name = initial, plan, name

    def next_in_plan(self):
        if self.plan is None:
            raise ValueError("no trace is loaded")
        n = len(self.path)
        if [k for k, _, _ in self.path] != self.plan[:n]:
            raise ValueError("the path has left the loaded trace: undo back onto it")
        if n >= len(self.plan):
            raise ValueError("the loaded trace has no more steps")
        self.take(self.plan[n])

    # -- what the page shows --------------------------------------------------------------
    def view(self) -> dict:
        m, lay = self.model, layout_of(self.model)
        words = self.words
        flat = lay.unpack_flat(words)
        now = self._flat(words)
        before = self._flat(self.path[-2][1] if len(self.path) > 1 else self.initial) if self.path else now
        state = [{"field": f.name, "value": _json(v), "changed": self.path != [] and v != b,
                  "before": _json(b)}
                 for f, v, b in zip(lay.fields, now, before)]
        actions = []
        for inst in m.instances:
            enabled = self.ex.enabled(words, inst.index)
            inside = self.ex.apply(words, inst.index)[2] if enabled else True
            g = inst.guard
            conj = list(g.args) if g.op == "and" else [] if g.op == "const" else [g]
            actions.append({"index": inst.index, "label": inst.label, "action": inst.action.name,
                            "doc": inst.action.doc, "enabled": enabled, "within_bounds": inside,
                            "guard": [{"text": _short(expr_text(c)), "holds": bool(evaluate(c, flat))}
                                      for c in conj]})
        props = []
        for p in m.invariants:
            props.append({"name": p.name, "kind": "invariant", "doc": p.doc, "lemma": p.lemma,
                          "holds": self.ex.invariant_holds(p.name, words)})
        if self.path:
            k = self.path[-1][0]
            pre = self.path[-2][1] if len(self.path) > 1 else self.initial
            for p in m.transition_props:
                props.append({"name": p.name, "kind": "transition (last step)", "doc": p.doc,
                              "lemma": False, "holds": self.ex.step_holds(p.name, pre, k)})
        n = len(self.path)
        on_plan = self.plan is not None and [k for k, _, _ in self.path] == self.plan[:n]
        return {"spec": m.spec.name, "variant": m.variant, "variants": list(m.spec.variants),
                "parameters": m.params.as_dict(), "initial_states": len(initial_words(m)),
                "state": state, "actions": actions, "properties": props,
                "path": [{"label": m.instances[k].label, "outcome": _json(o)} for k, _, o in self.path],
                "trace": None if self.plan is None else
                {"name": self.plan_name, "steps": [m.instances[k].label for k in self.plan],
                 "position": n if on_plan else None}}


def _json(v):
    return v if isinstance(v, (bool, int, str, type(None))) else str(v)


# ---------------------------------------------------------------------------------------------
# The server

def page() -> str:
    from kcheck.render import asset
    return (asset("explorer.html").replace("/*STYLE*/", asset("report.css"))
            .replace("/*SCRIPT*/", asset("explorer.js")))


def _index(body: dict, key: str, default: int | None = None) -> int:
    """A request's integer field (an instance or initial state's index)."""
    value = body.get(key, default)
    if value is None:
        raise KeyError(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} must be an integer index, got {value!r}")
    return value


def make_server(session: Session, port: int = 0) -> ThreadingHTTPServer:
    html_page = page().encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):   # quiet: the terminal shows the address only
            pass

        def _send(self, code: int, body: bytes, ctype: str):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, obj):
            self._send(code, json.dumps(obj).encode("utf-8"), "application/json")

        def do_GET(self):
            if self.path in ("/", "/index.html"):
                self._send(200, html_page, "text/html; charset=utf-8")
            elif self.path == "/api/view":
                with session.lock:
                    self._json(200, session.view())
            else:
                self._json(404, {"error": f"no such page {self.path}"})

        def do_POST(self):
            # every request is checked before it is read or used: a length that is no number or
            # beyond a trace's largest size, a body that is no JSON object, a number that is no
            # index (1e400 is a float, and int() of it raised in the server's thread)
            length = self.headers.get("Content-Length") or "0"
            if not length.isdigit():
                self._json(400, {"error": f"Content-Length {length!r} is not a number of bytes"})
                return
            if int(length) > MAX_TRACE_BYTES:
                self._json(413, {"error": f"the request body ({int(length):,} bytes) is larger "
                                          f"than a trace's {MAX_TRACE_BYTES >> 20} MB"})
                return
            try:
                body = json.loads(self.rfile.read(int(length)) or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
                self._json(400, {"error": f"the request body is not JSON: {getattr(e, 'msg', e)}"})
                return
            if not isinstance(body, dict):
                self._json(400, {"error": "the request body is not a JSON object"})
                return
            routes = {"/api/step": lambda: session.take(_index(body, "instance")),
                      "/api/undo": session.undo,
                      "/api/reset": lambda: session.reset(_index(body, "initial", 0)),
                      "/api/next": session.next_in_plan,
                      "/api/load": lambda: session.load(body["trace"], body.get("name", "trace")),
                      "/api/variant": lambda: session._use(session.model.spec.instantiate(
                          body["variant"], session.model.params.as_dict()))}
            if self.path not in routes:
                self._json(404, {"error": f"no such action {self.path}"})
                return
            with session.lock:
                try:
                    routes[self.path]()
                except (ValueError, KeyError, TypeError, SpecError, TraceError) as e:
                    self._json(400, {"error": str(e) if not isinstance(e, KeyError) else f"missing {e}"})
                    return
                self._json(200, session.view())

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def register(sub) -> dict:
    from kcheck.options import model_options
    e = sub.add_parser("explore", help="step through a spec in the browser (served on 127.0.0.1)",
                       parents=model_options())
    e.add_argument("trace", nargs="?", help="a counterexample or scenario to walk step by step")
    e.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free port)")
    return {"explore": cmd_explore}


def cmd_explore(args, console) -> int:
    from kcheck.options import OK, BadInput, params
    from kcheck.loader import load_spec
    from kcheck.trace import load
    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port {args.port}: give a port 1..65535, or 0 for any free port")
    spec = load_spec(args.spec)
    doc = load(args.trace) if args.trace else None
    variant = args.variant or (doc.get("variant") if doc else None)
    given = {**(doc.get("params", {}) if doc and not args.param else {}), **params(args.param)}
    model = spec.instantiate(variant, given)
    try:
        session = Session(model)
        if doc is not None:
            # the page names it as an uploaded trace is named: by its file name (a clone's absolute
            # path is as wide as the page, and the error below gives the whole path)
            session.load({**doc, "variant": variant, "params": given}, Path(args.trace).name)
    except ValueError as e:
        raise TraceError(f"{args.trace}: {e}") from None
    try:
        server = make_server(session, args.port)
    except OSError as e:
        raise BadInput(f"cannot listen on 127.0.0.1:{args.port} ({e.strerror}); try --port 0") from None
    host, port = server.server_address[:2]
    print(f"kcheck explorer: {spec.name}/{model.variant} at http://{host}:{port}/ (Ctrl-C stops it)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("kcheck explorer: stopped", file=sys.stderr, flush=True)
    return OK
