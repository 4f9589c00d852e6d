import inspect
import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# kcheck is imported as the installed package (one top-level name, `kcheck`): the checkout's root
# must not be on the path, or `import spec` / `import checker` would find the repository's folders
# and a missed import would pass here and fail for a user. `python -m pytest` puts the working
# folder first; every Python the tests start inherits PYTHONSAFEPATH, which keeps it off.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
os.environ["PYTHONSAFEPATH"] = "1"

# Every JSON document a command prints during the tests, in this process or in a kcheck
# subprocess (which inherits the environment), is validated against checker/output_schema.json
# first (checker/verdict.py print_json): an output the schema does not describe fails the test.
os.environ["KCHECK_VALIDATE_OUTPUT"] = "1"

# A run started in the background by a non-interactive shell (`pytest ... &`, nohup) inherits
# SIGINT ignored, and so would every kcheck the tests start: Python turns SIGINT into
# KeyboardInterrupt only when it is not ignored at start-up. The tests that press Ctrl-C on a
# kcheck (test_core, test_explorer, test_reliability) need it as a terminal has it; without this
# each waited 60 s on a search that went on (the fresh-clone run of 07:18).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Tiers (pyproject.toml's markers): whole modules that start Spark or run Z3 are marked here, so
# the quick loop `pytest -m "not slow"` leaves them, the real brokers and the browser out.
_MODULE_MARKS = {
    "test_spark.py": ("spark", "slow"),
    "test_spark_owner.py": ("spark", "slow"),
    "test_symbolic.py": ("z3", "slow"),
    "test_consumer_group_proofs.py": ("z3", "slow"),
    "test_proofs_other_specs.py": ("z3", "slow"),
}


# Single tests that take more than a few seconds here (measured with --durations on a fresh
# clone): the main job's own comparisons and the per-spec sweeps over the big Kafka specs. The
# quick loop keeps their small-spec instances where the test is parametrised by spec.
_SLOW_TESTS = {
    "test_shipped_progress_verdicts_match_the_record_and_lassos_replay": None,
    "test_progress_agrees_with_the_plain_reading_at_small_bounds": None,
    # consumer_group's release profiles, each searched and graphed at the defaults (8 x 1.2-1.7 s,
    # 12 s in one process), as the default_results fixtures are
    "test_every_profile_matches_its_record_at_the_defaults": None,
    "test_compiled_code_agrees_with_reference_interpreter": ("consumer_group", "classic_group",
                                                            "shared_consumption", "producer"),
    # every variant of every Kafka spec (47 graphs, 33 s of CPU); two_phase's stay quick
    "test_graph_agrees_with_bfs_on_shipped_specs": ("consumer_group", "classic_group",
                                                    "shared_consumption", "producer"),
    # a reduced search in plain Python per property (10 s each)
    "test_every_property_alone_keeps_its_verdict": ("classic_group",),
}
# A module's searches at the default bounds, one per variant (the fixture default_results of
# each Kafka spec's module, 8-24 s of CPU each): the tests that read them are slow, and the
# quick loop keeps each spec's tests at small bounds.
_SLOW_FIXTURES = {"default_results"}


def _is_slow(item) -> bool:
    if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    name = getattr(item, "originalname", item.name)
    if name not in _SLOW_TESTS:
        return False
    specs = _SLOW_TESTS[name]
    return specs is None or any(f"[{spec}" in item.name for spec in specs)


def _shares_a_fixture_of_its_module(item) -> bool:
    """Whether the test uses a fixture of the tests' own that is wider than one test (a module's
    searches, a Spark session): the tests that share it must run on one worker."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        for fd in defs:
            if fd.scope != "function" and inspect.getsourcefile(fd.func).startswith(str(TESTS)):
                return True
    return False


def _uses_the_session_brokers(item) -> bool:
    """Whether the test's module takes its brokers from conftest_kafka (one per release per
    worker). The in-process conformance tests (Kafka's coordinator in a JVM of their own, no
    broker) need not queue behind the broker tests on their worker: grouped with them, the two
    mutation-adequacy tests (4 to 9 minutes each) ran after every broker test, in the tail of
    the suite."""
    if item.path not in _BROKER_MODULES:       # an import inside a test function counts too
        _BROKER_MODULES[item.path] = "conftest_kafka" in item.path.read_text()
    return _BROKER_MODULES[item.path]


_BROKER_MODULES: dict = {}


def _broker_group(item) -> str:
    """The worker group of a broker test: one per release the test names in its id (its
    brokers and clusters are started once on that worker), "kafka" for the default release and
    for the tests that use several. One group for every broker test made its worker the suite's
    critical path (408 tests, one after another)."""
    for release in ("4.2.2", "4.4.0"):
        if f"[{release}" in item.nodeid or f"-{release}" in item.nodeid:
            return f"kafka-{release}"
    return "kafka"


def _group(config, item, name: str) -> None:
    """Run the test on the worker that runs the others of group `name` (pytest-xdist loadgroup)."""
    item.add_marker(pytest.mark.xdist_group(name))
    # xdist groups by the "@name" it appends to the test's id in its own collection hook, through
    # item._nodeid; pytest 9.2 keeps the id in item._id and no longer reads _nodeid, so that no
    # test was grouped (each worker computed every module fixture, a broker per release on both).
    # The id is set here as xdist means to set it, on a worker of a loadgroup run only.
    if config.getoption("loadgroup", default=False) and hasattr(item, "_id") and \
            not item.nodeid.endswith("@" + name):
        item._id = type(item._id).parse(f"{item.nodeid}@{name}")


def pytest_xdist_auto_num_workers(config) -> int | None:
    """`-n auto` (pyproject.toml) starts one worker more than there are cores: the worker that
    runs the broker tests spends most of its time waiting for Kafka (its timers, its JVMs'
    start), and sampled with vmstat the suite left a quarter to half of two cores idle while it
    ran with a worker per core. PYTEST_XDIST_AUTO_NUM_WORKERS still overrides (xdist's own hook
    reads it when this one returns None)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.numprocesses != "auto":
        return None
    return len(os.sched_getaffinity(0)) + 1


# tryfirst: pytest-xdist reads the xdist_group marks in its own pytest_collection_modifyitems, so
# they must be there before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        for name in _MODULE_MARKS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))
        if item.get_closest_marker("kafka") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        # A worker per core and one more (pytest-xdist, `-n auto --dist loadgroup` in
        # pyproject.toml, pytest_xdist_auto_num_workers above). The broker tests of a release
        # share one worker, so its brokers are started once per run; the tests that share a module fixture stay on one worker, so
        # that it is computed once. Every other test is a unit of its own: xdist hands out the
        # groups first (the most tests first) and the single tests fill in behind them, which
        # keeps the two workers busy until the end.
        if item.get_closest_marker("kafka") and _uses_the_session_brokers(item):
            _group(config, item, _broker_group(item))
        elif _shares_a_fixture_of_its_module(item):
            _group(config, item, item.path.name)
    # The slow tests that are units of their own go first (stably): xdist hands the single tests
    # out in collection order, and two of several minutes collected late made the suite's tail.
    # They share no fixture wider than a test, so moving them computes nothing twice.
    items.sort(key=lambda it: not (it.get_closest_marker("slow")
                                   and not it.get_closest_marker("xdist_group")))
