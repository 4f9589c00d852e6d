import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Every JSON document a command prints during the tests, in this process or in a kcheck
# subprocess (which inherits the environment), is validated against checker/output_schema.json
# first (checker/verdict.py print_json): an output the schema does not describe fails the test.
os.environ["KCHECK_VALIDATE_OUTPUT"] = "1"


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
    "test_compiled_code_agrees_with_reference_interpreter": ("consumer_group", "classic_group",
                                                            "shared_consumption"),
    "test_shared_subexpressions_compute_what_the_interpreter_computes": (
        "consumer_group", "classic_group", "shared_consumption", "producer"),
}


def _is_slow(item) -> bool:
    name = getattr(item, "originalname", item.name)
    if name not in _SLOW_TESTS:
        return False
    specs = _SLOW_TESTS[name]
    return specs is None or any(f"[{spec}" in item.name for spec in specs)


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        for name in _MODULE_MARKS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))
        if item.get_closest_marker("kafka") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        # Two workers (pytest-xdist, `-n auto --dist loadgroup` in pyproject.toml) halve the
        # wall time on two cores. A module stays on one worker so that its module fixtures (a
        # search, a Spark session) are computed once; every broker test shares one worker, so
        # the brokers of a release are started once per run, as in a single process.
        group = "kafka" if item.get_closest_marker("kafka") else item.path.name
        item.add_marker(pytest.mark.xdist_group(group))
