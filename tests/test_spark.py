"""Spark against the single-process search: every shipped spec, on the variants that take each
path (tests/spark_support.py CASES), gives the same
verdicts, distinct-state counts, the same traces (step for step, whatever the size of a level:
tests/test_explore.py cuts levels into many blocks) and the same action coverage; stopping rules,
retried tasks, sweeps, the command line's errors, and a real standalone cluster."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcheck import bfs, spark
from kcheck.cli import main
from kcheck.layout import initial_words
from kcheck.loader import load_spec
from kcheck.trace import Executor, build, load, replay
from spark_support import CASES, MASTER, at_test_bounds, sc  # noqa: F401 (sc is a fixture)

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def kcheck(*args, timeout=120, env=None):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=env)






def _end(model, f):
    """What the tie-break fixes exactly: the violating state, or the violating step."""
    ex = Executor(model)
    words = tuple(f.initial)
    for k in f.steps[:-1] if f.kind == "transition" else f.steps:
        words = ex.apply(words, k)[0]
    return (words, f.steps[-1]) if f.kind == "transition" else words


def assert_same(model, single, dist):
    assert dist.distinct_states == single.distinct_states
    assert (dist.exhaustive, dist.stop_reason) == (single.exhaustive, single.stop_reason)
    assert dist.depth == single.depth
    assert sorted(dist.found) == sorted(single.found)
    for p, f in single.found.items():
        g = dist.found[p]
        assert (len(g.steps), g.kind) == (len(f.steps), f.kind), p
        assert _end(model, g) == _end(model, f), p
        assert (g.initial, g.steps) == (f.initial, f.steps), p
    if single.exhaustive:
        # action coverage: an action fired in some slice iff it fired in the single process
        assert dist.never_fired() == single.never_fired()


@pytest.mark.parametrize("name,variant", CASES)
def test_spark_matches_single_process(sc, name, variant):
    model, max_depth, single = at_test_bounds(name, variant)
    # two slices: the merge across slices and the tie-break between them are exercised (each
    # slice costs about a whole search on these specs; test_slice_count_does_not_change_the_answer
    # runs 1, 2 and 5)
    dist = spark.check(model, max_depth=max_depth, master=MASTER, slices=2)
    assert_same(model, single, dist)
    d = dist.distribution
    if not d.in_driver:
        assert d.rows >= d.distinct_reached >= dist.distinct_states
        assert len(d.slice_states) == d.slices <= 2


def test_slices_store_orbits_with_symmetry(sc):
    """consumer_group with three dynamic members: each slice stores one representative per
    orbit; the orbits, the states they stand for and the concrete traces are the single
    process's with symmetry."""
    spec = load_spec("consumer_group")
    model = spec.instantiate(spec.default_variant, {"members": 3, "static_members": 0})
    single = bfs.search(model, max_depth=4, symmetry=True)
    dist = spark.check(model, max_depth=4, master=MASTER, slices=3, symmetry=True)
    assert dist.symmetry == single.symmetry == "member slots 1,2"
    assert (dist.distinct_states, dist.unreduced_states) == \
        (single.distinct_states, single.unreduced_states)
    assert dist.unreduced_states > dist.distinct_states
    assert not dist.distribution.in_driver
    assert_same(model, single, dist)
    assert dist.found and max(len(f.steps) for f in dist.found.values()) > \
        dist.distribution.frontier_depth                    # found by a slice, past the prefix
    for p, f in dist.found.items():       # concrete: replays through the unreduced spec
        assert len(build(model, p, f.kind, f.initial, f.steps)) == len(f.steps)


@pytest.mark.parametrize("slices", [1, 2, 5])
def test_slice_count_does_not_change_the_answer(sc, slices):
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    dist = spark.check(model, master=MASTER, slices=slices)
    assert_same(model, bfs.search(model), dist)
    assert not dist.distribution.in_driver


def test_stops_where_the_single_process_search_stops(sc):
    # every property violated: bfs stops at the level of the last one found, and so must the
    # merged answer, although each slice explores further than that
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    props = ["consistent", "commit-after-all-prepared"]
    single = bfs.search(model, props, deadlock=False)
    assert single.stop_reason == "all-violated"
    # one slice per frontier state: from a prepared RM a slice needs a step more than bfs
    dist = spark.check(model, props, deadlock=False, master=MASTER, slices=10)
    assert_same(model, single, dist)
    assert dist.distribution.distinct_reached > dist.distinct_states


def test_max_depth(sc):
    model = load_spec("two_phase").instantiate("lamport", {"N": 5})
    for depth in (1, 4, 9):
        assert_same(model, bfs.search(model, max_depth=depth),
                    spark.check(model, max_depth=depth, master=MASTER, slices=3))


MANY_INITIAL = '''
"""Counters that start anywhere below a bound: many initial states, so no frontier is needed."""
from kcheck.spec.lang import Int, Spec

spec = Spec("counters", __doc__)
spec.param("top", 6, lo=2, hi=12, doc="largest counter value")


@spec.state
def state(p):
    return {"a": Int(0, p.top), "b": Int(0, p.top)}


@spec.init
def init(p):
    for a in range(p.top // 2):
        yield {"a": a, "b": 0}


@spec.action()
def IncrementA(s, p):
    s.require(s.a < p.top)
    s.a = s.a + 1


@spec.action()
def IncrementB(s, p):
    s.require(s.b < s.a)
    s.b = s.b + 1


@spec.invariant("b-below-top")
def b_below_top(s, p):
    """Counter b stays below the top."""
    return s.b < p.top


spec.variant("default", "as written", default=True, violates=["b-below-top"])
'''


def test_initial_states_partitioned_and_spec_by_path(sc, tmp_path):
    path = tmp_path / "counters.py"
    path.write_text(MANY_INITIAL)
    model = load_spec(str(path)).instantiate(None, {"top": 8})
    assert len(initial_words(model)) == 4
    dist = spark.check(model, master=MASTER, slices=2)
    assert dist.distribution.frontier_depth == 0 and dist.distribution.slices == 2
    assert_same(model, bfs.search(model), dist)
    assert len(dist.found["b-below-top"].steps) == 13      # from a=3: 5 more a, 8 b


def test_failed_task_is_retried_with_the_same_answer(sc):
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    clean = spark.check(model, master=MASTER, slices=3)
    faulty = spark.check(model, master=MASTER, slices=3, fail_once=(0, 2))
    assert_same(model, bfs.search(model), faulty)
    assert faulty.found == clean.found
    assert faulty.distribution.levels == clean.distribution.levels


def test_progress_reports_slices_and_states(sc):
    seen = []
    model = load_spec("two_phase").instantiate("lamport", {"N": 5})
    spark.check(model, master=MASTER, slices=4, progress=lambda *a: seen.append(a))
    assert seen and seen[-1][:2] == (4, 4) and seen[-1][2] >= 8832


def _json(argv, capsys):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def _verdicts(doc):
    return (doc["distinct_states"], doc["exhaustive"],
            {p: (v["status"], v["trace_length"], v["trace"]) for p, v in doc["properties"].items()})


def test_cli_check_spark_equals_single_process(sc, capsys):
    argv = ["check", "two_phase", "--variant", "commit-without-prepares", "--param", "N=4", "--json"]
    code1, single = _json(argv, capsys)
    code2, dist = _json(argv + ["--spark", MASTER, "--slices", "3"], capsys)
    assert code1 == code2 == 1
    assert _verdicts(single) == _verdicts(dist)


def test_cli_all_variants_on_spark(sc, capsys):
    argv = ["check", "two_phase", "--all-variants", "--param", "N=3", "--json"]
    code1, single = _json(argv, capsys)
    code2, dist = _json(argv + ["--spark", MASTER], capsys)
    assert code1 == code2 == 0       # every verdict matches the spec's record
    assert [_verdicts(r) for r in single["results"]] == [_verdicts(r) for r in dist["results"]]


def test_sweep_matrix_and_minimal_counterexample(sc, capsys, tmp_path):
    argv = ["sweep", "two_phase", "--variant", "commit-without-prepares", "--param", "N=1..3",
            "--json", "--save", "--out", str(tmp_path)]
    code, local = _json(argv, capsys)
    assert code == 1
    assert [c["parameters"]["N"] for c in local["configurations"]] == [1, 2, 3]
    assert [c["distinct_states"] for c in local["configurations"]] == \
        [bfs.search(load_spec("two_phase").instantiate("commit-without-prepares", {"N": n})).distinct_states
         for n in (1, 2, 3)]
    cons = [c["properties"]["consistent"] for c in local["configurations"]]
    assert [c["status"] for c in cons] == ["holds", "violated", "violated"]
    minimal = local["minimal_counterexamples"]
    # one RM cannot disagree with itself; two suffice, in three steps
    assert minimal["consistent"]["parameters"]["N"] == 2
    assert minimal["consistent"]["trace_length"] == 3
    assert minimal["commit-after-all-prepared"]["parameters"]["N"] == 1
    saved = minimal["consistent"]["saved"]
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 2})
    assert replay(model, load(saved)).ok

    code, on_spark = _json(argv[:-3] + ["--spark", MASTER], capsys)
    assert code == 1
    strip = lambda doc: [{k: v for k, v in c.items() if k != "elapsed_s"} for c in doc["configurations"]]
    assert strip(on_spark) == strip(local)
    assert {p: (m["parameters"], m["trace"]) for p, m in on_spark["minimal_counterexamples"].items()} == \
        {p: (m["parameters"], m["trace"]) for p, m in local["minimal_counterexamples"].items()}


def test_minimal_counterexample_prefers_the_shortest_trace_then_the_smallest_configuration():
    from types import SimpleNamespace
    from kcheck.verdict import Counterexample

    def result(a, b, steps):
        params = SimpleNamespace(as_dict=lambda: {"a": a, "b": b})
        return SimpleNamespace(model=SimpleNamespace(params=params),
                               found={"p": Counterexample("p", "invariant", (0,), steps)})
    results = [result(3, 1, [1, 2]), result(1, 2, [1, 2]), result(1, 1, [1, 2, 3])]
    params, f = spark.minimal_counterexamples(results, ["a", "b"])["p"]
    assert params == {"a": 1, "b": 2} and f == Counterexample("p", "invariant", (0,), [1, 2])


def test_bad_input_is_one_line_and_exit_2(sc, capsys):
    for argv, msg in [(["check", "two_phase", "--slices", "2"], "--slices needs --spark"),
                      (["check", "two_phase", "--spark", MASTER, "--max-states", "10"], "--max-depth"),
                      (["sweep", "two_phase", "--param", "N=3..1"], "range is empty"),
                      (["sweep", "two_phase", "--param", "N=x"], "write a range"),
                      (["sweep", "two_phase", "--param", "members=1..2"], "unknown parameter"),
                      (["sweep", "two_phase", "--param", "N=0..2"], "out of range")]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, (argv, err)


def test_unreachable_master_fails_fast_in_one_line():
    # fast because the master is probed with a socket before any JVM starts (spark._check_master):
    # the one line carries the probe's own error, not Spark's timeout (no timed assertion)
    p = kcheck("check", "two_phase", "--spark", "spark://127.0.0.1:9")
    assert p.returncode == 2
    assert "cannot reach the Spark master" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Connection refused" in p.stderr, p.stderr


def test_a_string_that_is_no_master_is_refused_before_the_search():
    """A wrong master is refused in one line, exit 2, by every command that takes one: the
    ownership engine answered a small search in its driver and exited 0 with it."""
    for argv in (["check", "two_phase", "--engine", "spark-ownership", "--spark", "nosuch://x"],
                 ["check", "two_phase", "--spark", "local["],
                 ["sweep", "two_phase", "--param", "N=1..2", "--spark", "yarn7"]):
        p = kcheck(*argv)
        assert p.returncode == 2, argv
        assert "is not a Spark master" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    from kcheck.options import master
    for ok in ("local", "local[*]", "local[2]", "local[2,3]", "spark://h:7077",
               "spark://a:7077,b:7077", "yarn", "k8s://https://k:443", "mesos://m:5050"):
        assert master(ok) == ok


def test_an_exchange_directory_that_cannot_be_one_is_refused_before_the_search(tmp_path):
    """KCHECK_EXCHANGE_DIR under a file: one line, exit 2, before any search (it was a
    traceback at the hand-over to the owners)."""
    (tmp_path / "file").write_text("")
    env = dict(os.environ, KCHECK_EXCHANGE_DIR=str(tmp_path / "file" / "x"))
    p = kcheck("check", "two_phase", "--engine", "spark-ownership", "--spark", "local[2]",
               env=env)
    assert p.returncode == 2
    assert "KCHECK_EXCHANGE_DIR=" in p.stderr and "Not a directory" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_old_java_is_refused_in_one_line(tmp_path):
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "jdk"))
    p = kcheck("sweep", "two_phase", "--param", "N=1..2", "--spark", env=env)
    assert p.returncode == 2 and "needs Java 17 or newer (found Java 11)" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(os.environ.get("KCHECK_SKIP_CLUSTER") == "1", reason="KCHECK_SKIP_CLUSTER=1")
def test_standalone_cluster(tmp_path):
    """A real master and two workers on 127.0.0.1, started from pyspark's own jars; the check on
    them equals the single-process one; they are stopped after."""
    env = dict(os.environ, KCHECK_CLUSTER_DIR=str(tmp_path / "cluster"))
    p = subprocess.run(["bash", str(ROOT / "scripts" / "spark_standalone.sh"), "demo", "two_phase",
                        "--variant", "commit-without-prepares"], capture_output=True, text=True,
                       cwd=ROOT, timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SAME verdicts, distinct states and trace lengths" in p.stdout
    assert "consistent: violated (3 steps)" in p.stdout
    assert not list((tmp_path / "cluster").glob("*.pid"))     # stopped


def test_class_sharing_archive_is_dumped_once_then_mapped(tmp_path, monkeypatch):
    """The driver JVM's class archive (spark.class_sharing): the first run dumps it into a
    file of its own; while that dump may still be written (its writer alive, or written less
    than CDS_SETTLE_S ago) a run goes without; then a run promotes it, once a JVM starts
    with it, and maps it; a dump the JVM cannot start with (truncated), or never written, is
    removed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    # a stand-in JVM that aborts on an archive holding "bad", as Java 17 on a truncated one
    java.write_text('#!/bin/sh\nf="${1#-XX:SharedArchiveFile=}"\n'
                    'grep -q bad "$f" && exit 134\nexit 0\n')
    java.chmod(0o755)
    assert spark.class_sharing(str(java)) == ""     # no archive of the JDK's own to extend
    base = tmp_path / "jdk" / "lib" / "server" / "classes.jsa"
    base.parent.mkdir(parents=True)
    base.write_text("")
    first = spark.class_sharing(str(java))
    where = tmp_path / "kcheck" / "spark-cds"
    assert first.startswith("-XX:ArchiveClassesAtExit=" + str(where))
    dump = Path(first.split("=", 1)[1])
    assert dump.name.endswith(f".{os.getpid()}")
    key = dump.name.rsplit(".", 1)[0]
    # claimed at once, empty until the JVM writes it: a session that starts meanwhile (in the
    # test suite, another worker's) goes without rather than dumping one more
    assert dump.exists() and dump.stat().st_size == 0
    assert spark.class_sharing(str(java)) == ""
    dump.unlink()
    old = time.time() - spark.CDS_SETTLE_S - 5
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()

    def written(name, text, settled=True):
        f = where / name
        f.write_text(text)
        if settled:
            os.utime(f, (old, old))
        return f
    written(f"{key}.{dead}", "bad")
    assert spark.class_sharing(str(java)).startswith("-XX:ArchiveClassesAtExit=")  # removed
    assert not (where / f"{key}.{dead}").exists()
    written(dump.name, "x" * 100)                  # as the JVM writes it at its exit
    assert spark.class_sharing(str(java)) == ""   # its writer (this process) is alive
    dump.unlink()
    written(f"{key}.{dead}", "x" * 100, settled=False)
    assert spark.class_sharing(str(java)) == ""   # written just now
    written(f"{key}.{dead}", "x" * 100)
    written(f"{key}.999999999", "bad")
    written(f"{key}.999999998", "")               # claimed, never written (its JVM failed)
    written("0123456789abcdef.jsa", "another JDK's")
    written("fedcba9876543210.jsa", "another environment's, in use")
    long_ago = time.time() - spark.CDS_UNUSED_S - 5
    os.utime(where / "0123456789abcdef.jsa", (long_ago, long_ago))
    written(f"0123456789abcdef.jsa.{os.getpid()}", "being written", settled=True)
    mapped = spark.class_sharing(str(java))
    archive = where / key
    assert mapped == f"-XX:SharedArchiveFile={archive}" and archive.read_text() == "x" * 100
    assert sorted(p.name for p in where.iterdir()) == sorted(
        [archive.name, "fedcba9876543210.jsa", f"0123456789abcdef.jsa.{os.getpid()}"])
    assert spark.class_sharing(str(java)) == mapped
