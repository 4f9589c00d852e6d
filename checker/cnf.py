"""Z3 terms as clauses for an incremental SAT solver (CaDiCaL, through python-sat): bmc's solver.

bmc asks the same questions of every frame of an unrolling (the step from state d-1 to state d,
a violation at state d), so each is written once, over template variables, and Z3 bit-blasts it
into clauses once (``Template``); a frame is then the template's clauses with its variables
renumbered, which costs a list walk, not a Z3 call. The variables that frames share (the bits of
a state's fields, the bits naming the action instance a step runs) are Boolean atoms with names,
so a template's clauses name them; every other variable of a template (Tseitin's) is its own,
fresh in each copy.

Why not Z3's own SAT solver: on consumer_group's zombie commit, CaDiCaL ruled out depths 1 to 9
in 67 s where Z3's incremental finite-domain solver took 93 s (one run each on a loaded machine;
docs/symbolic.md, "How bmc is encoded").
"""
from __future__ import annotations

import ctypes
import threading
import time

import z3

SOLVER = "cadical195"
# set to stop every solver call between two slices (symbolic_cli.SolverStop sets it on SIGTERM)
STOP = threading.Event()
# set on Ctrl-C (symbolic_cli.SolverStop): every solver call from then on gives up. Python's own
# KeyboardInterrupt is not enough: raised inside a __del__ (a Z3 object freed), it is lost
INTERRUPTED = threading.Event()
# bit-blasting, then the circuit compressed as an and-inverter graph, then Tseitin's clauses
# (the 'aig' step: 46,432 conflicts instead of 58,501 on consumer_group's zombie commit, 11.6 s of
# CPU instead of 13.6 s). No step eliminates variables: a template's atoms keep every constraint.
_TO_CNF = z3.Then("simplify", "bit-blast", "aig", "tseitin-cnf")


class Interrupted(Exception):
    """The solver call was stopped: by its time limit, or by SIGINT (Ctrl-C, or SIGTERM
    through symbolic_cli.SolverStop)."""


def interrupted_in_z3(e: BaseException) -> bool:
    """Whether ``e`` is Ctrl-C: a KeyboardInterrupt, or one that landed while ctypes converted
    the arguments of a Z3 call (which ctypes reports as an ArgumentError wrapping it)."""
    return isinstance(e, KeyboardInterrupt) or (isinstance(e, ctypes.ArgumentError)
                                                and "KeyboardInterrupt" in str(e))


class Template:
    """The clauses of a Boolean term: each literal a signed index into ``atoms`` (the named
    Boolean variables it shares with other terms) or, past ``len(atoms)``, into its own
    fresh variables (``fresh`` of them)."""

    def __init__(self, term):
        g = z3.Goal()
        g.add(term)
        goals = _TO_CNF(g)
        text = goals[0].dimacs(True) if len(goals) == 1 else None
        if text is None:
            raise ValueError("bit-blasting split the goal")
        names: dict[int, str] = {}
        rows = []
        for line in text.splitlines():
            if line.startswith("c "):
                _, num, name = line.split(None, 2)
                names[int(num)] = name
            elif line and not line.startswith("p "):
                rows.append([int(x) for x in line.split()[:-1]])
        shared = sorted(n for n, name in names.items() if not name.startswith("k!"))
        self.atoms = [names[n] for n in shared]
        index = {n: i for i, n in enumerate(shared)}
        own = sorted(set(abs(x) for r in rows for x in r) - set(shared))
        index.update({n: len(shared) + i for i, n in enumerate(own)})
        self.fresh = len(own)
        # literal -> (index + 1) with its sign: 0 stays free for DIMACS's terminator
        self.clauses = [[(index[abs(x)] + 1) * (1 if x > 0 else -1) for x in r] for r in rows]


class Cnf:
    """One incremental SAT solver, fed copies of templates. Atoms are numbered by name on
    first use; ``rename`` maps a template's atom names to a frame's (e.g. 'frame.pre.' to
    's3.')."""

    def __init__(self, timeout_s: float | None = None):
        from pysat.solvers import Solver
        self.solver = Solver(name=SOLVER)
        self.ids: dict[str, int] = {}
        self.top = 0
        self.timeout_s = timeout_s
        self.calls = 0
        self.terminator = _Terminator.connect(self.solver)

    # conflicts per slice when a time limit is kept, or when no terminator could be connected
    # and a slice's length is what bounds the wait for a signal (0.7 s was the longest such slice
    # of consumer_group's zombie commit, measured at load 1.5). Without a time limit, and with
    # the terminator answering signals, slices are 10 times longer: the solver's search then
    # runs as without slices (81,046 conflicts for that commit, against 97,886 in slices of
    # 2,000: every slice starts its search again from the assumptions)
    SLICE = 2000

    def atom(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            self.top += 1
            i = self.ids[name] = self.top
            if name in ("true", "false"):   # Z3's DIMACS names the constants as atoms
                self.solver.add_clause([i if name == "true" else -i])
        return i

    def fresh(self) -> int:
        self.top += 1
        return self.top

    def add(self, t: Template, rename=lambda name: name) -> None:
        ids = [self.atom(rename(a)) for a in t.atoms]
        ids += range(self.top + 1, self.top + 1 + t.fresh)
        self.top += t.fresh
        add = self.solver.add_clause
        for c in t.clauses:
            add([ids[x - 1] if x > 0 else -ids[-x - 1] for x in c])

    def clause(self, lits: list[int]) -> None:
        self.solver.add_clause(lits)

    def solve(self, assumptions: list[int]) -> set[int] | None:
        """The atoms true in a model (under ``assumptions``), or None when there is none.

        CaDiCaL cannot be interrupted from another thread through python-sat, so a call is
        solved in slices of conflicts (what was learnt is kept between them), and between two
        slices Python sees its signals (Ctrl-C), ``STOP`` (SIGTERM, set by
        symbolic_cli.SolverStop) and the time limit. Within a slice, CaDiCaL asks the
        terminator (``_Terminator``) every few conflicts whether a signal came: a slice's length
        bounds the time limit's precision, not the wait for Ctrl-C or SIGTERM."""
        self.calls += 1
        deadline = time.monotonic() + self.timeout_s if self.timeout_s else None
        budget = self.SLICE if deadline is not None or self.terminator is None else 10 * self.SLICE
        try:
            while True:
                if INTERRUPTED.is_set():
                    raise KeyboardInterrupt
                if STOP.is_set():      # also before the first slice: a later call gives up at once
                    raise Interrupted("canceled (SIGTERM)")
                self.solver.conf_budget(budget)
                r = self._slice(assumptions)
                if r is not None:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise Interrupted("timeout")
        except KeyboardInterrupt:       # Ctrl-C between two slices
            raise Interrupted("interrupted from keyboard") from None
        if not r:
            return None
        return {x for x in self.solver.get_model() if x > 0}

    def _slice(self, assumptions: list[int]) -> bool | None:
        """One slice of a solver call: True, False, or None when the slice's budget ran out.

        Called through python-sat's public ``solve_limited`` on the main thread, python-sat swaps
        in its own C handler for SIGINT, which longjmps out of CaDiCaL: Ctrl-C then raised
        python-sat's error (a traceback) instead of KeyboardInterrupt, left the solver unusable
        (reading its statistics aborts the process) and left SIGINT blocked in this process and
        in every process it started later. So the slice is asked of python-sat's extension with
        its main-thread flag off, as python-sat itself asks from any other thread: SIGINT then
        reaches Python's own handler, which runs when CaDiCaL next asks the terminator (or,
        without one, once the slice returns: 8.6 s was the longest slice of 20,000 conflicts of
        consumer_group's zombie commit, measured at load 9)."""
        import pysolvers        # python-sat's extension module
        c = self.solver.solver
        status = pysolvers.cadical195_solve_lim(c.cadical, assumptions, 0)
        c.status = None if status == 0 else status > 0     # what get_model() reads
        return c.status

    def value(self, model: set[int], name: str) -> bool:
        """An atom's value in a model (an atom no clause mentions is free: false)."""
        i = self.ids.get(name)
        return i is not None and i in model

    @property
    def stats(self) -> dict:
        st = self.solver.accum_stats() or {}
        return {"conflicts": st.get("conflicts", 0), "decisions": st.get("decisions", 0),
                "propagations": st.get("propagations", 0)}

    def close(self) -> None:
        if self.terminator is not None:
            self.terminator.disconnect()
        self.solver.delete()


def _stop_asked(this) -> bool:
    """CaDiCaL's question, every few conflicts of a slice: stop now? (It runs on the main thread,
    which holds the GIL through the slice: Python's signal handlers run here, and the watcher
    thread of symbolic_cli.SolverStop gets the GIL here too, so SIGTERM's ``STOP`` and Ctrl-C's
    ``INTERRUPTED`` are seen within milliseconds.)"""
    try:
        return STOP.is_set() or INTERRUPTED.is_set()
    except KeyboardInterrupt:       # Python's SIGINT handler ran inside the slice
        INTERRUPTED.set()
        return True


class _Terminator:
    """CaDiCaL's ``Terminator`` (cadical.hpp: a C++ object whose virtual ``terminate()`` the
    solver calls every few conflicts, and stops when it says true), made with ctypes and
    connected through ``Solver::connect_terminator``, which python-sat's extension contains but
    does not offer: its ``interrupt()`` is not implemented for CaDiCaL, and its extension holds
    the GIL through a call, so no other Python thread can stop a slice.

    The object is the Itanium C++ ABI's layout of a class with a virtual destructor and one
    virtual method: a pointer to the table [offset to top, type info, destructor, deleting
    destructor, terminate], entered after its first two words. The solver never destroys it
    (the caller owns a terminator); it is disconnected before the solver is deleted. Where the
    extension does not export the two methods (another python-sat build), ``connect`` gives
    None and slices are kept short instead."""

    _CONNECT = "_ZN10CaDiCaL1956Solver18connect_terminatorEPNS_10TerminatorE"
    _DISCONNECT = "_ZN10CaDiCaL1956Solver21disconnect_terminatorEv"
    _ASK = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
    _DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self, lib, solver_ptr: int):
        self._lib, self._solver = lib, solver_ptr
        self._ask = self._ASK(_stop_asked)          # kept alive as long as the solver may call it
        self._destroy = self._DESTROY(lambda this: None)
        word = ctypes.sizeof(ctypes.c_void_p)
        fn = lambda f: ctypes.cast(f, ctypes.c_void_p).value
        self._vtable = (ctypes.c_void_p * 5)(0, 0, fn(self._destroy), fn(self._destroy),
                                             fn(self._ask))
        self._object = (ctypes.c_void_p * 1)(ctypes.addressof(self._vtable) + 2 * word)
        getattr(lib, self._CONNECT)(ctypes.c_void_p(solver_ptr),
                                    ctypes.c_void_p(ctypes.addressof(self._object)))

    @classmethod
    def connect(cls, solver) -> "_Terminator | None":
        try:
            import pysolvers        # python-sat's extension module
            lib = ctypes.CDLL(pysolvers.__file__)
            getattr(lib, cls._CONNECT), getattr(lib, cls._DISCONNECT)
        except (ImportError, OSError, AttributeError):
            return None
        pointer = ctypes.pythonapi.PyCapsule_GetPointer
        pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        return cls(lib, pointer(solver.solver.cadical, None))

    def disconnect(self) -> None:
        getattr(self._lib, self._DISCONNECT)(ctypes.c_void_p(self._solver))
