"""Distributed exploration on Spark: the initial-state space partitioned into slices.

The driver enumerates the initial states. With fewer of them than slices, it first searches
breadth-first (in the same order as checker/bfs.py) to the first level with at least as many
states as slices, and partitions that frontier instead; each frontier state keeps the
single-process path that reached it, which prefixes every trace found from it. Every slice is one
Spark task that runs the ordinary search (kcheck.bfs.search) from its roots and returns its
statistics, its shortest counterexamples and the 64-bit fingerprint and depth of every state it
reached. Only plain data crosses to the executors (the spec's name or path, the variant, the
parameters, the roots as packed words); each executor rebuilds the model itself.

Why the merged answer equals the single-process one. Every state at global depth g >= d (d the
frontier depth) has a shortest path through some frontier state f, and the slice holding f
reaches it at depth g - d, because a slice explores exhaustively from its roots; no slice reaches
it sooner. So "global depth = the least of d + depth over slices" is exact, and so is "shortest
trace = the shortest over slices". Spark then groups the fingerprints of all slices (a shuffle by
fingerprint, numpy within each group) into the exact number of distinct states per global depth;
from that histogram and the shortest trace lengths the driver replays the single-process
stopping rule (a search stops at the top of the first level where every property is violated,
or at --max-depth), so the distinct-state count and the depth are the ones the single-process
search prints, even when it stops early.

Tie-break between traces of the same length, the single-process one (checker/explore.py, "the
parent rule"; docs/design.md, "The core's parent rule"):
1. the end: for an invariant or a deadlock, the violating state with the least fingerprint (a
   level is ordered by fingerprint, and bfs reports the first); for a transition property, the
   step whose pre-state has the least fingerprint, then the lowest action instance. This is
   exact: every violating state at the shortest depth is at that depth in some slice, and each
   slice reports its own least one.
2. the path to that end: a state's parent is the least (action instance, parent fingerprint)
   among the steps into it from the level before, whatever the blocks a level is expanded in.
   So among the traces of the slices, the one reported is the least when their steps are
   compared from the last one backwards by (action instance, fingerprint of the state before
   the step). The slice that holds the single-process path's frontier state produces that path
   itself (its own parent choices are among fewer predecessors, which include the single
   process's choice), and the driver's prefix is built by the same core: the trace is the
   single-process trace, byte for byte, at every size.

Statistics that are not deduplicated (transitions, transitions cut by search bounds, steps
per action instance, so the action coverage) are sums over the slices and the prefix,
duplicated work included; an action that never fired is one that fired in no slice. --max-states is a single-process bound and is not
offered here.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcheck import bfs, cache_dir, explore
from kcheck.bfs import DEADLOCK, SearchResult
from kcheck.verdict import Counterexample
from kcheck.compile import Compiled, fingerprint
from kcheck.explore import BLOCK
from kcheck.layout import initial_words, layout_of
from kcheck.spec.lang import Model, SpecError

_MIX = np.uint64(0x9E3779B97F4A7C15)
LOG = Path(tempfile.gettempdir()) / f"kcheck-spark-{os.getuid()}.log"


class SparkError(SpecError):
    """Spark cannot run (no Java, master unreachable, no executor): one line, exit 2."""


# ---------------------------------------------------------------------------------------------
# The session

_SESSION: dict = {}
_SESSION_LOCK = threading.Lock()     # the ownership mode starts the session in a thread
# The JVM's own work here is light (scheduling, a few small shuffles; the search runs in Python
# workers), so it gets the client compiler only and the serial collector: measured on this
# machine (2 cores, load average 9-12), starting a local[2] session and running one small job
# took 47 s of wall time and 13.8 s of CPU with the JVM's defaults, 15-21 s and 7.5-9.2 s with
# these
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"


def _java_exe() -> str | None:
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else None
    return str(java) if java and java.exists() else shutil.which("java")


def java_version() -> int | None:
    """The major version of the `java` Spark would start, or None when there is none."""
    exe = _java_exe()
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


# a dump of the classes a run loaded, promoted to the archive once its writer has surely ended
CDS_SETTLE_S = 60.0
# another key's archive (69-90 MB) is removed this long after it was written: environments in
# use side by side keep theirs, a JDK or pyspark since replaced does not stay for ever
CDS_UNUSED_S = 7 * 24 * 3600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _maps(exe: str, archive: Path) -> bool:
    """Whether the JVM starts with ``archive``: a truncated one (a JVM killed while it wrote
    it) makes Java 17 abort at start, not fall back."""
    try:
        return subprocess.run([exe, f"-XX:SharedArchiveFile={archive}", "-version"],
                              capture_output=True, timeout=60, cwd=tempfile.gettempdir()
                              ).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def class_sharing(exe: str | None = None) -> str:
    """The driver JVM's class data sharing option: Spark's start is mostly loading classes,
    and an archive of the classes a session loaded, mapped at the next start, made a local
    session 2.4-2.6 -> 1.4 s and its first job 1.5-1.6 -> 1.3 s here (three alternated runs
    each). The first session of a JVM, pyspark and options writes the archive when its JVM
    exits (``-XX:ArchiveClassesAtExit``, a file of its own per process, claimed when the
    session starts so that one session at a time dumps), into ~/.cache/kcheck/spark-cds (never
    the repository); a later session promotes a finished one
    and maps it, once a JVM has started with it (a truncated archive aborts the JVM). The
    archive is kept per JVM, pyspark installation (its jars are the class path the archive
    records) and options. A JVM that cannot use an archive starts without it
    (``-Xshare:auto``, the default) and says so in Spark's log; a JDK without an archive of
    its own (lib/server/classes.jsa) is given neither option."""
    exe = exe or _java_exe()
    if not exe:
        return ""
    import pyspark
    try:
        real = Path(exe).resolve()
        # the JVM itself, not only its launcher: an update of the JDK makes a new archive
        jvm = [f for f in (real, real.parent.parent / "lib" / "server" / "libjvm.so") if f.exists()]
        stamp = "|".join(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in jvm)
        where = cache_dir("spark-cds")
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""
    # the archive records the class path: Spark's jars in this environment's pyspark (a JVM
    # given another environment's archive starts without it: "The top archive failed to load")
    key = hashlib.sha256(f"{stamp}|{Path(pyspark.__file__).resolve().parent}|"
                         f"{pyspark.__version__}|{JVM_OPTIONS}".encode()).hexdigest()[:16]
    archive = where / f"{key}.jsa"
    for other in where.glob("*.jsa*"):        # another JDK's, environment's or options' archive
        try:
            if (not other.name.startswith(key)
                    and time.time() - other.stat().st_mtime > CDS_UNUSED_S
                    and not (other.suffix != ".jsa" and _alive(int(other.suffix[1:])))):
                other.unlink()
        except (ValueError, OSError):
            continue
    dumps = list(where.glob(f"{key}.jsa.*"))
    for dump in dumps:
        try:
            pid = int(dump.name.rsplit(".", 1)[1])
            if _alive(pid) or time.time() - dump.stat().st_mtime <= CDS_SETTLE_S:
                continue
            if archive.exists() or dump.stat().st_size == 0 or not _maps(exe, dump):
                dump.unlink()       # another run's, not needed; never written; or unusable
            else:
                os.replace(dump, archive)
        except (ValueError, OSError):
            continue
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive}"
    if any(d.exists() for d in dumps):
        # another run's dump, not yet settled: this one starts without (a dumping JVM starts
        # more slowly: 5.5-6.4 s for a local session here)
        return ""
    if not (real.parent.parent / "lib" / "server" / "classes.jsa").exists():
        # a dump extends the JDK's own archive: without one, Java 17 refuses to start
        # ("DynamicDumpSharedSpaces is unsupported when base CDS archive is not loaded")
        return ""
    # the dump's file, claimed now (empty until the JVM writes it at its exit): sessions that
    # start while this one runs see it and go without. Unclaimed, the test suite's concurrent
    # sessions each dumped one (three, 250 MB, in a fresh checkout's cache for a week)
    dump = where / f"{key}.jsa.{os.getpid()}"
    try:
        os.close(os.open(dump, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:               # claimed already (by this process's session), or unwritable
        return ""
    return f"-XX:ArchiveClassesAtExit={dump}"


def _log4j_file(verbose: bool) -> str:
    level = "warn" if verbose else "error"
    path = Path(tempfile.gettempdir()) / f"kcheck-log4j2-{level}.properties"
    path.write_text(f"""rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.netty.name = org.apache.spark.network
logger.netty.level = error
""")
    return str(path)


def _check_master(master: str, timeout_s: float):
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://"):].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
                answer = _probe(conn)
        except (OSError, ValueError) as e:
            err = e
            continue
        if answer:
            raise SparkError(f"{hostport} accepts connections but is not a Spark master (it "
                             f"answered {answer[:24]!r}); give the master's RPC port, usually 7077 "
                             f"(see docs/spark.md), or use --spark local[*]")
        return
    raise SparkError(f"cannot reach the Spark master at {master} ({err}); start one "
                     f"(see docs/spark.md) or use --spark local[*]")


def _probe(conn: socket.socket, wait_s: float = 1.0) -> bytes:
    """What a server says to a line that is not a Spark frame. A Spark master's RPC port (Netty's
    TransportFrameDecoder) reads the first 8 bytes as a frame length, finds it absurd and closes
    the connection without a word; a web server, an SSH daemon or a broker answers or greets.
    Anything received therefore means "not a Spark master", and kcheck fails fast instead of
    waiting for Spark's registration retries (over a minute) and a Java traceback."""
    try:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        conn.settimeout(wait_s)
        return conn.recv(64)
    except (socket.timeout, OSError):
        return b""


def _local_master(master: str) -> bool:
    return master.startswith("local") or any(h in master for h in ("127.0.0.1", "localhost"))


def session(master: str = "local[*]", verbose: bool = False, wait_s: float = 60.0):
    """A SparkContext for ``master``, shared by every run of this process."""
    with _SESSION_LOCK:
        return _session(master, verbose, wait_s)


def _session(master: str, verbose: bool, wait_s: float):
    cur = _SESSION.get("sc")
    if cur is not None:
        if _SESSION["master"] == master:
            return cur
        cur.stop()
        _SESSION.clear()
    v = java_version()
    if v is None or v < 17:
        found = "none found" if v is None else f"found Java {v}"
        raise SparkError(f"Spark needs Java 17 or newer ({found}); install it with "
                         f"scripts/ensure_java.sh or set JAVA_HOME")
    _check_master(master, timeout_s=5.0)
    # the Python workers must run this interpreter (numpy, kcheck): with pyspark 4.3.0 the local
    # workers started the python3 on PATH despite spark.pyspark.python (numpy not found), so
    # PYSPARK_PYTHON is set too
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    conf = (SparkConf().setMaster(master).setAppName("kcheck")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.pyspark.python", sys.executable)
            .set("spark.pyspark.driver.python", sys.executable)
            .set("spark.driver.extraJavaOptions",
                 f"{JVM_OPTIONS} {class_sharing()} "
                 f"-Dlog4j2.configurationFile=file:{_log4j_file(verbose)}")
            .set("spark.executor.extraJavaOptions", JVM_OPTIONS)
            .set("spark.python.worker.reuse", "true"))
    if _local_master(master) and master.startswith("local") and "SPARK_DRIVER_MEMORY" not in os.environ:
        # local mode runs the executors inside the driver's JVM, whose heap is 1 GiB unless set:
        # two_phase N=10's shuffle ended in "OutOfMemoryError: Java heap space". A quarter of
        # the memory available, 1 to 16 GiB (SPARK_DRIVER_MEMORY overrides it)
        conf.set("spark.driver.memory", f"{_driver_heap_mb()}m")
    if _local_master(master):
        # everything on this machine: never depend on what the host name resolves to
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    try:
        gateway = None
        if SparkContext._gateway is None and not verbose:
            # the JVM's own chatter (and the Python workers', which inherit its stderr) goes to
            # a log file unless --verbose
            from pyspark.java_gateway import launch_gateway
            log = open(LOG, "ab")
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        sc = SparkContext(conf=conf, gateway=gateway)
    except Exception as e:   # the JVM's own message, on one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkError(f"cannot start Spark with master {master}: {msg} (Spark's log: {LOG})") from None
    sc.setLogLevel("WARN" if verbose else "ERROR")
    if master.startswith("spark://"):
        deadline = time.monotonic() + wait_s
        # the driver counts as one entry of the executor list
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 2:
            if time.monotonic() > deadline:
                sc.stop()
                raise SparkError(f"the Spark master at {master} gave kcheck no executor within "
                                 f"{wait_s:.0f}s (no worker, or no free cores or memory)")
            time.sleep(0.2)
    _SESSION.update(sc=sc, master=master)
    return sc


class stop_on_signal:
    """Ctrl-C or SIGTERM while Spark jobs run: the jobs are cancelled and the command stops
    cleanly, raising KeyboardInterrupt or bfs.Terminated once the driver is back in plain Python.

    Raised from the signal handler itself, the exception landed inside a Py4J socket read: the
    connection to the JVM was left mid-answer, the job ran on to its end (58.7 s on two_phase
    N=10), and the next Py4J call (pyspark's call-site reset) failed with a Py4JJavaError
    traceback in place of the verdicts. Here the handler only notes the signal and cancels the
    jobs from a thread of its own; the driver's pending call then returns (the job failed as
    cancelled) and the exception is raised where it is safe. A second signal is ignored."""

    def __init__(self):
        self.signal = None

    def _handler(self, signum, frame):
        if self.signal is not None:
            return
        self.signal = signum
        sc = _SESSION.get("sc")
        if sc is not None:
            threading.Thread(target=self._cancel, args=(sc,), daemon=True).start()

    @staticmethod
    def _cancel(sc):
        # Cancelling the jobs alone raced with their submission: a signal that came while the
        # driver was still preparing a job (its closure, its broadcast) cancelled nothing, and
        # that job then ran to its end (374 s of two_phase N=10 under load). Stopping the
        # context fails the running job and every later one at once.
        try:
            sc.cancelAllJobs()
        except Exception:       # the JVM already gone: the driver's call fails on its own
            pass
        stop_session()

    def __enter__(self):
        import signal
        try:
            self._old = {s: signal.signal(s, self._handler) for s in (signal.SIGTERM, signal.SIGINT)}
        except ValueError:      # not the main thread (an embedding program): signals left alone
            self._old = None
        return self

    def __exit__(self, kind, exc, tb):
        import signal
        if self._old is not None:
            for s, h in self._old.items():
                signal.signal(s, h)
        if self.signal is None:
            return False
        # the jobs' failure (cancelled) is the signal's doing: the signal is what is reported
        if self.signal == signal.SIGTERM:
            raise bfs.Terminated() from None
        raise KeyboardInterrupt from None


def _driver_heap_mb() -> int:
    available = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) // 1024
    except OSError:
        pass
    return min(max(available // 4, 1024), 16 * 1024)


def job_failure(e: BaseException) -> str | None:
    """The one line a failed Spark job (a Py4J error from the JVM) is reported by, or None when
    ``e`` is not one: the Java exception's own first line, e.g. 'Job 0 cancelled because
    SparkContext was shut down' or 'java.lang.OutOfMemoryError: Java heap space'."""
    if type(e).__module__.split(".")[0] != "py4j":
        return None
    text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("at ")]
    # Py4J's own line ("An error occurred while calling ...") first, then ": " and the Java
    # exception the JVM raised, which is the cause
    cause = next((ln.lstrip(": ") for ln in lines if ln.startswith(":")), None)
    why = (cause or (lines[0] if lines else type(e).__name__))[:300]
    if "OutOfMemoryError" in text:
        why += "; the JVM ran out of heap: set SPARK_DRIVER_MEMORY (e.g. 8g) or use a cluster"
    return why


def stop_session():
    with _SESSION_LOCK:
        sc = _SESSION.pop("sc", None)
        _SESSION.clear()
    if sc is not None:
        sc.stop()


# ---------------------------------------------------------------------------------------------
# Executors: plain data in, plain data out

_MODELS: dict = {}


def spec_ref(spec) -> str:
    """The name an executor loads a spec by: its shipped name, else its module's path."""
    from kcheck.spec import SHIPPED
    from kcheck.loader import load_spec
    if spec.name in SHIPPED and load_spec(spec.name) is spec:
        return spec.name
    for mod in list(sys.modules.values()):
        if getattr(mod, "spec", None) is spec and getattr(mod, "__file__", None):
            return str(Path(mod.__file__).resolve())
    raise SparkError(f"spec {spec.name}: cannot find the module that defines it")


def model_for(ref: str, variant: str, params: dict) -> Model:
    """The model an executor checks, built once per process."""
    key = (ref, variant, tuple(sorted(params.items())))
    if key not in _MODELS:
        from kcheck.loader import load_spec
        if (ref.endswith(".py") or "/" in ref) and not os.path.exists(ref):
            from pyspark import SparkFiles
            ref = SparkFiles.get(os.path.basename(ref))   # shipped with addFile
        _MODELS[key] = load_spec(ref).instantiate(variant, params)
    return _MODELS[key]


_COMPILED: dict = {}


def _compiled(task: dict):
    """A slice's compiled model and symmetry (None unless asked for and declared), once per
    Python worker."""
    key = (task["spec"], task["variant"], tuple(sorted(task["params"].items())),
           tuple(task["properties"]), task.get("symmetry", False))
    if key not in _COMPILED:
        from kcheck import symmetry
        model = model_for(task["spec"], task["variant"], task["params"])
        sym = symmetry.for_model(model) if task.get("symmetry") else None
        _COMPILED[key] = (Compiled(model, task["properties"], layout=layout_of(model)), sym)
    return _COMPILED[key]


def _fail_if_asked(task):
    if task.get("fail_once"):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0:
            raise RuntimeError(f"kcheck test fault: slice {task['slice']} fails on its first attempt")


def _found_plain(found: dict) -> list:
    return [(f.property, f.kind, tuple(int(x) for x in f.initial), [int(k) for k in f.steps])
            for f in found.values()]


def run_slice(task: dict):
    """One slice, on an executor: the single process's core (checker/explore.py) from the
    slice's roots -> (summary, fingerprints, global depths, orbit sizes or None). With a
    symmetry, the states are representatives and the counterexamples paths of
    representatives (the driver makes the one it reports concrete)."""
    _fail_if_asked(task)
    t0 = time.perf_counter()
    comp, sym = _compiled(task)
    ex = explore.Explorer(comp.model, comp, task["properties"], task["deadlock"],
                          block=task.get("block", BLOCK), counterexample=Counterexample,
                          canonical=None if sym is None else sym.canonical)
    levels, orbits = [], []

    def on_level(depth, fp):
        levels.append(np.array(fp, copy=True))
        if sym is not None:
            orbits.append(sym.orbit_sizes(ex.frontier))

    on_level(0, ex.start(task["roots"]))
    try:
        stop = ex.run(task["max_depth"], on_level=on_level)
    except MemoryError:      # what was found stands; the answer is bounded
        stop = "out-of-memory"
    fps = np.concatenate(levels)
    depths = np.concatenate([np.full(len(u), task["offset"] + d, dtype=np.int32)
                             for d, u in enumerate(levels)])
    summary = {"slice": task["slice"], "distinct": len(fps), "transitions": ex.transitions,
               "cut": ex.cut, "depth": ex.depth, "stop_reason": stop,
               "elapsed_s": time.perf_counter() - t0, "found": _found_plain(ex.found),
               "fired": [int(x) for x in ex.fired], "cut_only": ex.cut_only}
    return summary, fps, depths, (np.concatenate(orbits) if sym is not None else None)


def bucket(fps: np.ndarray, parts: int, in_place: bool = False) -> np.ndarray:
    """The group (slices) or owner (ownership) of each fingerprint: mixed first, so that one-word
    states, which are their own fingerprints, spread too. The mixed top 24 bits scaled to
    [0, parts) by a multiplication and a shift, in place: numpy's 64-bit remainder made this
    0.49 s for the 19.8 million states of two_phase N=10's hand-over, now 0.06 s.
    ``in_place``: ``fps`` (a temporary of the caller's) is overwritten, not copied."""
    h = np.multiply(fps, _MIX, out=fps if in_place else None, dtype=np.uint64)
    h >>= np.uint64(40)
    h *= np.uint64(parts)
    h >>= np.uint64(24)
    return h


def _slice_records(task, parts, states_acc):
    summary, fps, depths, orbits = run_slice(task)
    states_acc.add(summary["distinct"])
    yield parts + task["slice"], summary
    b = bucket(fps, parts)
    for p in range(parts):
        sel = b == p
        yield p, (fps[sel], depths[sel], None if orbits is None else orbits[sel])


def _identity(k):
    return k


def _merge_group(records):
    """The states of one fingerprint group: the least depth of each, counted per depth (and,
    with a symmetry, the orbit sizes of those representatives summed per depth)."""
    fps, depths, orbits, rows = [], [], [], 0
    for key, value in records:
        if isinstance(value, dict):
            yield "summary", value
        else:
            fps.append(value[0])
            depths.append(value[1])
            orbits.append(value[2])
            rows += len(value[0])
    if rows:
        f, d = np.concatenate(fps), np.concatenate(depths)
        order = np.lexsort((d, f))
        f, d = f[order], d[order]
        first = np.ones(len(f), dtype=bool)
        first[1:] = f[1:] != f[:-1]
        w = None
        if orbits[0] is not None:
            o = np.concatenate(orbits)[order][first]
            w = np.bincount(d[first], weights=o).round().astype(np.int64)
        yield "histogram", (np.bincount(d[first]), rows, w)
    else:
        yield "histogram", (np.zeros(0, dtype=np.int64), 0, None)


# ---------------------------------------------------------------------------------------------
# The driver

@dataclass
class Distribution:
    """How a run was spread, for people and for the benchmark."""
    master: str
    slices: int
    frontier_depth: int = 0
    frontier_states: int = 0
    slice_states: list[int] = field(default_factory=list)
    rows: int = 0                     # fingerprints returned, duplicates included
    distinct_reached: int = 0         # distinct over every slice (before any stopping rule)
    in_driver: bool = False           # the breadth-first prefix already answered
    levels: list[int] = field(default_factory=list)   # distinct states per global depth
    startup_s: float = 0.0            # starting Spark (once a process), not in elapsed_s

    @property
    def duplication_pct(self) -> float:
        """Per cent of the states reached that another slice (or the prefix) also reached."""
        return 100.0 * (self.rows - self.distinct_reached) / self.distinct_reached \
            if self.distinct_reached else 0.0

    @property
    def reach_pct(self) -> list[float]:
        """Each slice's states, in per cent of all distinct states."""
        return [100.0 * n / self.distinct_reached for n in self.slice_states] \
            if self.distinct_reached else []

    def line(self) -> str:
        if self.in_driver:
            return (f"spark ({self.master}): answered by the driver's breadth-first prefix "
                    f"(depth {self.frontier_depth}); no slice was needed")
        reach = self.reach_pct
        span = f"{min(reach):.0f}-{max(reach):.0f} %" if reach else "-"
        return (f"spark ({self.master}): {self.slices} slices of {self.frontier_states:,} "
                f"{'initial' if self.frontier_depth == 0 else f'depth-{self.frontier_depth} frontier'} "
                f"states; each slice reached {span} of the states; duplication between slices "
                f"{self.duplication_pct:.0f} % ({self.rows:,} states explored for "
                f"{self.distinct_reached:,} distinct)")


def _frontier(model: Model, comp: Compiled, want: int, max_depth: int | None,
              block: int = BLOCK, sym=None):
    """Breadth-first levels, on the single process's core (the same order and parents), until
    one has ``want`` states (or the space or max_depth ends first) -> (depth, frontier words
    (columns), path of each frontier state, fingerprints per level, orbit sizes per level or
    None). A path is (initial words, action instances); with a symmetry ``sym``, the states
    are representatives and the paths paths of representatives."""
    ex = explore.Explorer(model, comp, [], False, keyed=False, block=block,
                          canonical=None if sym is None else sym.canonical)
    levels_fp = [ex.start(initial_words(model))]
    orbits = None if sym is None else [sym.orbit_sizes(ex.frontier)]

    def on_level(depth, fp):
        levels_fp.append(fp)
        if sym is not None:
            orbits.append(sym.orbit_sizes(ex.frontier))
    ex.run(max_depth, until=lambda: ex.frontier.shape[1] >= want, on_level=on_level)
    level, depth = ex.frontier, ex.depth
    paths = {tuple(int(x) for x in level[:, i]): ex.trace_to(depth, i)
             for i in range(level.shape[1])}
    return depth, level, paths, levels_fp, orbits


def _prefix_found(model: Model, comp: Compiled, props, deadlock: bool, depth: int, block: int,
                  sym=None) -> dict:
    """The counterexamples of the levels 0..depth, as the core finds them (with a symmetry:
    paths of representatives, as the slices report theirs)."""
    ex = explore.Explorer(model, comp, props, deadlock, block=block, counterexample=Counterexample,
                          canonical=None if sym is None else sym.canonical)
    ex.start(initial_words(model))
    ex.run(depth)
    return ex.found


def _trace_key(model: Model, ex, f: Counterexample, sym=None) -> tuple:
    """Orders shortest traces as the single-process search would choose between them (see the
    module's docstring): length, then the end, then the path from its last step backwards.
    With a symmetry ``sym``, ``f`` is a path of representatives."""
    def rep(words):
        col = np.array(words, dtype=np.uint64).reshape(-1, 1)
        return col if sym is None else sym.canonical(col)
    words = tuple(f.initial)
    fps = [int(fingerprint(rep(words))[0])]
    for k in f.steps:
        words, _, _ = ex.apply(words, k)
        col = rep(words)
        words = tuple(int(x) for x in col[:, 0])
        fps.append(int(fingerprint(col)[0]))
    n = len(f.steps)
    back = tuple((f.steps[j], fps[j]) for j in range(n - 1, -1, -1))
    end = (fps[n - 1], f.steps[-1]) if f.kind == "transition" else (fps[n], -1)
    return n, end, back


def check(model: Model, properties: list[str] | None = None, max_depth: int | None = None,
          deadlock: bool | None = None, master: str = "local[*]", slices: int | None = None,
          verbose: bool = False, progress=None, fail_once: tuple[int, ...] = (),
          block: int = BLOCK, symmetry: bool = False) -> SearchResult:
    """Explore ``model`` on Spark; returns the SearchResult the single-process search would
    return (see the module's docstring), with a ``distribution`` attribute.
    ``progress(slices_done, slices, states_so_far)`` is called from a driver thread.
    ``fail_once`` (tests only) names slices whose first attempt fails. ``block``: states
    expanded at once (tests: small blocks make small levels span several). ``symmetry``: one
    representative per orbit of the spec's declared symmetry, as bfs.search (the slices' roots
    and states are representatives; the trace reported is made concrete by the driver)."""
    t_start = time.perf_counter()
    spec = model.spec
    props = list(spec.properties) if properties is None else list(properties)
    check_deadlock = spec.check_deadlock if deadlock is None else deadlock
    all_props = props + ([DEADLOCK] if check_deadlock else [])
    sc = session(master, verbose)
    t0 = time.perf_counter()
    n = slices or sc.defaultParallelism
    comp = Compiled(model, props, layout=layout_of(model))
    res = SearchResult(model, all_props, deadlock_checked=check_deadlock)
    from kcheck import symmetry as symmetry_
    sym = symmetry_.prepare(model, comp, res, symmetry)
    depth0, frontier, paths, prefix_fps, prefix_orbits = _frontier(model, comp, n, max_depth,
                                                                   block, sym)
    dist = Distribution(master, n, depth0, frontier.shape[1], startup_s=t0 - t_start)

    pre = None
    whole = not frontier.shape[1] or (max_depth is not None and depth0 >= max_depth)
    if whole or depth0 > 0:
        # the prefix's verdicts are the single-process ones for its levels; when the whole
        # search fits in the prefix, it is the single-process search
        pre = bfs.search(model, props, max_depth if whole else depth0, None, check_deadlock,
                         block=block, symmetry=sym is not None)
        if whole or pre.stop_reason == "all-violated":
            pre.elapsed_s = time.perf_counter() - t0
            dist.in_driver, dist.distinct_reached = True, pre.distinct_states
            pre.distribution = dist
            return pre
    roots = list(paths)
    groups = [roots[i::n] for i in range(n)]
    groups = [g for g in groups if g]
    ref = spec_ref(spec)
    if ref.endswith(".py"):
        sc.addFile(ref)
    tasks = [{"slice": i, "spec": ref, "variant": model.variant, "params": model.params.as_dict(),
              "properties": props, "deadlock": check_deadlock,
              "max_depth": None if max_depth is None else max_depth - depth0,
              "roots": g, "offset": depth0, "fail_once": i in fail_once, "block": block,
              "symmetry": sym is not None}
             for i, g in enumerate(groups)]
    dist.slices = len(tasks)
    parts = max(1, sc.defaultParallelism)
    prefix = []
    for d, u in enumerate(prefix_fps[:-1]):      # the frontier level itself comes from the slices
        b = bucket(u, parts)
        prefix += [(p, (u[b == p], np.full(int((b == p).sum()), d, dtype=np.int32),
                        None if sym is None else prefix_orbits[d][b == p]))
                   for p in range(parts)]
    states_acc = sc.accumulator(0)
    rdd = sc.parallelize(tasks, len(tasks)).flatMap(lambda t: _slice_records(t, parts, states_acc))
    if prefix:
        rdd = rdd.union(sc.parallelize(prefix, 1))
    job = rdd.partitionBy(parts, _identity).mapPartitions(_merge_group)
    out = _collect_with_progress(sc, job, len(tasks), states_acc, progress)

    summaries = sorted((v for k, v in out if k == "summary"), key=lambda s: s["slice"])
    hist = np.zeros(1, dtype=np.int64)
    whist = np.zeros(1, dtype=np.int64)    # with a symmetry: the states the orbits stand for
    for k, v in out:
        if k == "histogram":
            h, rows, w = v
            if len(h) > len(hist):
                hist = np.pad(hist, (0, len(h) - len(hist)))
            hist[:len(h)] += h
            if w is not None:
                if len(w) > len(whist):
                    whist = np.pad(whist, (0, len(w) - len(whist)))
                whist[:len(w)] += w
            dist.rows += rows
    dist.slice_states = [s["distinct"] for s in summaries]
    dist.distinct_reached = int(hist.sum())
    dist.levels = [int(x) for x in hist]

    # shortest counterexamples: the prefix's (exact), then every slice's, prefixed by its path
    from kcheck.trace import Executor
    ex = Executor(model, comp)
    candidates: dict[str, list[Counterexample]] = {}
    if pre is not None:
        # the prefix's own, found as the slices find theirs (paths of representatives)
        for p, f in _prefix_found(model, comp, props, check_deadlock, depth0, block, sym).items():
            candidates.setdefault(p, []).append(f)
    for s in summaries:
        for p, kind, initial, steps in s["found"]:
            init0, steps0 = paths[tuple(initial)]
            candidates.setdefault(p, []).append(Counterexample(p, kind, init0, steps0 + list(steps)))
    best = {p: min(fs, key=lambda f: _trace_key(model, ex, f, sym)) for p, fs in candidates.items()}
    stop, last = explore.replay_stop({p: explore.decided_at(f.kind, len(f.steps))
                                      for p, f in best.items()}, props, check_deadlock,
                                     len(hist) - 1, max_depth)

    def happened(f: Counterexample) -> bool:     # bfs had found it by the time it stopped
        return stop is None or explore.decided_at(f.kind, len(f.steps)) <= last

    broken = [s["stop_reason"] for s in summaries if s["stop_reason"] in ("out-of-memory", "interrupted")]
    if broken:      # a slice did not finish: what was found stands, the answer is bounded
        stop, last = broken[0], len(hist) - 1
    res.found = {p: best[p] for p in all_props if p in best and (broken or happened(best[p]))}
    if sym is not None:
        res.unreduced_states = int(whist[:last + 1].sum())
        symmetry_.finish(model, comp, sym, res)      # concrete traces, as bfs.search reports
    res.stop_reason = stop
    res.exhaustive = stop is None
    res.distinct_states = int(hist[:last + 1].sum())
    res.depth = last
    res.transitions = sum(s["transitions"] for s in summaries) + (pre.transitions if pre else 0)
    res.cut_by_bounds = sum(s["cut"] for s in summaries) + (pre.cut_by_bounds if pre else 0)
    res.cut_only_states = sum(s["cut_only"] for s in summaries) + (pre.cut_only_states if pre else 0)
    res.fired = [sum(col) for col in zip(*([s["fired"] for s in summaries] +
                                           ([pre.fired] if pre else [])))]
    res.elapsed_s = time.perf_counter() - t0
    res.distribution = dist
    return res


def _collect_with_progress(sc, rdd, total: int, acc, progress):
    if progress is None:
        return rdd.collect()
    group = f"kcheck-{os.getpid()}-{time.monotonic_ns()}"
    sc.setJobGroup(group, "kcheck slices")
    done = threading.Event()

    def poll():
        try:
            _poll()
        except Exception:       # the context stopped under it (a signal): the job fails on its own
            pass

    def _poll():
        tracker, last = sc.statusTracker(), None
        while not done.wait(0.25):
            finished = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                if info and info.stageIds:
                    st = tracker.getStageInfo(min(info.stageIds))
                    if st:
                        finished = max(finished, st.numCompletedTasks)
            now = (min(finished, total), total, acc.value)
            if now != last:
                progress(*now)
                last = now
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        out = rdd.collect()
    finally:
        done.set()
        t.join()
        if _SESSION.get("sc") is sc:      # not when a signal stopped it
            sc.setJobGroup("", "")
    # the poller samples; the last word is said once every slice is in
    progress(total, total, acc.value)
    return out


# ---------------------------------------------------------------------------------------------
# Parameter sweeps: every configuration one Spark task

def run_configuration(task: dict) -> dict:
    """One configuration of a sweep, on an executor: the ordinary search, plain data back."""
    model = model_for(task["spec"], task["variant"], task["params"])
    res = bfs.search(model, task["properties"], task["max_depth"], None, task["deadlock"])
    return {"params": task["params"], "properties": res.properties, "exhaustive": res.exhaustive,
            "stop_reason": res.stop_reason, "distinct": res.distinct_states,
            "transitions": res.transitions, "depth": res.depth, "elapsed_s": res.elapsed_s,
            "found": _found_plain(res.found), "cut_only": res.cut_only_states,
            "cut_by_bounds": res.cut_by_bounds, "deadlock_checked": res.deadlock_checked}


class SweepStopped(Exception):
    """A signal between two configurations of a sweep: the configurations finished before it."""

    def __init__(self, results: list[SearchResult], reason: str):
        super().__init__(reason)
        self.results, self.reason = results, reason


def configuration_result(spec, variant: str, r: dict) -> SearchResult:
    """A configuration's plain data back as the search's own result (bfs.SearchResult), so that
    its verdicts come from the one place that decides them (SearchResult.status: sometimes
    properties, the deadlock rule, search bounds), as `check`'s do."""
    from kcheck.quotient import domains_of
    model = spec.instantiate(variant, r["params"])
    return SearchResult(model=model,
                        properties=list(r["properties"]), exhaustive=r["exhaustive"],
                        distinct_states=r["distinct"], transitions=r["transitions"],
                        depth=r["depth"], elapsed_s=r["elapsed_s"],
                        cut_by_bounds=r["cut_by_bounds"], stop_reason=r["stop_reason"],
                        cut_only_states=r["cut_only"], deadlock_checked=r["deadlock_checked"],
                        found={p: Counterexample(p, kind, tuple(initial), list(steps))
                               for p, kind, initial, steps in r["found"]},
                        # a sweep searches order-only domains up to their caps, as Spark does
                        quotient="off" if domains_of(model) else None)


def sweep(spec, variant: str, configurations: list[dict], properties: list[str] | None = None,
          max_depth: int | None = None, deadlock: bool | None = None, master: str | None = None,
          verbose: bool = False, progress=None) -> list[SearchResult]:
    """Checks every configuration (a dict of parameters): each one a Spark task on ``master``,
    or one after another in this process when ``master`` is None. Results in input order."""
    plain = _sweep_plain(spec, variant, configurations, properties, max_depth, deadlock, master,
                         verbose, progress)
    return [configuration_result(spec, variant, r) for r in plain]


def _sweep_plain(spec, variant, configurations, properties, max_depth, deadlock, master, verbose,
                 progress) -> list[dict]:
    ref = spec_ref(spec)
    tasks = [{"spec": ref, "variant": variant, "params": c, "properties": properties,
              "max_depth": max_depth, "deadlock": deadlock} for c in configurations]
    if master is None:
        out = []
        try:
            for i, t in enumerate(tasks):
                out.append(run_configuration(t))
                if out[-1]["stop_reason"] in ("interrupted", "terminated"):
                    break       # a signal stopped this search: the sweep stops with it
                if progress:
                    progress(i + 1, len(tasks), sum(r["distinct"] for r in out))
        except (KeyboardInterrupt, bfs.Terminated) as e:
            # between two searches (a search stops itself, above): what was found stands
            raise SweepStopped([configuration_result(spec, variant, r) for r in out],
                               "terminated" if isinstance(e, bfs.Terminated) else
                               "interrupted") from None
        return out
    sc = session(master, verbose)
    if ref.endswith(".py"):
        sc.addFile(ref)
    acc = sc.accumulator(0)

    def run(task):
        r = run_configuration(task)
        acc.add(r["distinct"])
        return r
    return _collect_with_progress(sc, sc.parallelize(tasks, len(tasks)).map(run), len(tasks),
                                  acc, progress)


def minimal_counterexamples(results: list[SearchResult], swept: list[str]
                            ) -> dict[str, tuple[dict, Counterexample]]:
    """For each property with a counterexample (a violation, or a sometimes property's
    witness), the configuration reported: the shortest trace over all configurations, and among
    equally short ones the smallest configuration (least sum of the swept parameters, then least
    values in the order they were swept)."""
    best: dict = {}
    for r in results:
        params = r.model.params.as_dict()
        size = (sum(params[k] for k in swept), tuple(params[k] for k in swept))
        for p, f in r.found.items():
            key = (len(f.steps), size)
            if p not in best or key < best[p][0]:
                best[p] = (key, params, f)
    return {p: (params, f) for p, (_, params, f) in sorted(best.items())}
