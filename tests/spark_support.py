"""What the two Spark test files share: the master, the variants compared with the single
process and that process's answers at test bounds, and the Spark session fixture (imported by
each file, so each file has its own session)."""
import functools

import pytest

from kcheck import bfs, spark
from kcheck.loader import load_spec

MASTER = "local[2,2]"   # two threads; a failed task is tried once more (local mode retries nothing otherwise)
STATES = 20_000         # the single-process search's budget per variant; larger spaces are cut by depth

# The variants each distributed engine is compared with the single process on: every shipped
# spec, and among a spec's variants (which share its state layout and actions) one for each
# path the engines take differently, at test bounds (measured: the search exhaustive or cut by
# depth, nothing found or an invariant, a transition property or a deadlock violated, states of
# one, two or three words). The other variants take these paths on the same shapes: each cost
# about a whole search twice more and found nothing new (every variant's verdicts and counts
# are the spec modules' tests'). The first of each spec is the one run on Spark where a test
# takes one per spec.
CASES = [
    ("two_phase", "commit-without-prepares"),   # one word, exhaustive, invariants violated
    ("two_phase", "lamport"),                   # exhaustive, nothing found
    ("producer", "kafka-8483"),                 # three words, cut by depth, transition properties
    ("producer", "pre-kip360-in-flight"),       # two words, exhaustive, invariants and transitions
    ("classic_group", "kafka-14016"),           # cut by depth, invariants and a transition
    ("classic_group", "shipped-default"),       # cut by depth (32 levels), nothing found
    ("consumer_group", "revocation-epoch"),     # cut by depth at 6, two transition properties
    ("shared_consumption", "keep-fetched-on-move"),   # a deadlock, invariants and transitions
]
ONE_PER_SPEC = [c for i, c in enumerate(CASES) if c[0] not in {n for n, _ in CASES[:i]}]


@pytest.fixture(scope="module")
def sc():
    yield spark.session(MASTER)
    spark.stop_session()


def test_bounds(model):
    """-> (max_depth or None, the single-process result at those bounds)."""
    r = bfs.search(model, max_states=STATES)
    if r.stop_reason != "max-states":
        return None, r
    depth = max(1, r.depth - 1)
    return depth, bfs.search(model, max_depth=depth)


test_bounds.__test__ = False   # a helper, not a test


@functools.lru_cache(maxsize=None)
def at_test_bounds(name: str, variant: str):
    """-> (model, max_depth or None, the single-process result), once per process for the
    tests of both files (they only read it)."""
    model = load_spec(name).instantiate(variant)
    return (model, *test_bounds(model))
