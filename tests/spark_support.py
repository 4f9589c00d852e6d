"""What the two Spark test files share: the master, the single-process budget at test bounds,
and the Spark session fixture (imported by each file, so each file has its own session)."""
import pytest

from checker import bfs, spark

MASTER = "local[2,2]"   # two threads; a failed task is tried once more (local mode retries nothing otherwise)
STATES = 20_000         # the single-process search's budget per variant; larger spaces are cut by depth


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
