"""Progress verdicts that state what they assume (issue 32): the environment's disturbances are
counted up to a bound E (checker/environment.py), a "holds" says "at most E disturbances" when
the bound cut something, a lasso says whether its loop disturbs, "bounded" names the step an
epoch cap still cuts; and the state graph's components on compressed sparse rows are
networkx's."""
import json
import random
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from kcheck.cli import main
from kcheck.loader import load_spec
from kcheck.run import UNBOUNDED, Options, progress_of
from kcheck.trace import load, replay

ROOT = Path(__file__).resolve().parent.parent
REBALANCER = str(ROOT / "tests/specs/rebalancer.py")


def progress(spec, variant=None, params=None, **options):
    spec = load_spec(spec) if isinstance(spec, str) else spec
    return progress_of(spec, variant, params, Options(**options))


# ---------------------------------------------------------------------------------------------
# the four kinds of verdict, on a spec small enough to read (tests/specs/rebalancer.py)

def test_holds_within_the_bound_says_so():
    res, traces = progress(REBALANCER)
    assert res.status("converges") == "holds"
    assert res.assumes["converges"] == "at most 2 disturbances"
    assert res.graph.cut_within_budget == 0 and res.graph.cut_by_bounds > 0
    assert not traces


def test_with_no_bound_an_endless_disturbance_is_an_environment_driven_lasso(tmp_path):
    res, traces = progress(REBALANCER, disturbances=UNBOUNDED)
    assert res.status("converges") == "violated"
    assert res.drivers["converges"] == "environment-driven"
    tr = traces["converges"]
    assert [s.action for s in tr.steps[tr.loop_index:]] == ["Flip", "Flip"]
    assert "converges" not in res.assumes


def test_a_loop_without_disturbance_is_a_protocol_driven_lasso_that_replays(tmp_path):
    res, traces = progress(REBALANCER, "no-settle-2")
    assert res.status("converges") == "violated"
    assert res.drivers["converges"] == "protocol-driven"
    # the saved lasso is the spec's own (no disturbance count in its states) and replays
    path = tmp_path / "lasso.json"
    path.write_text(json.dumps(traces["converges"].to_json()))
    doc = load(path)
    assert "disturbances" not in doc["steps"][0].get("state", doc.get("initial", {}))
    model = load_spec(REBALANCER).instantiate("no-settle-2", doc.get("params", {}))
    assert replay(model, doc).ok


def test_a_bounded_verdict_names_the_protocol_step_the_cap_cuts():
    res, _ = progress(REBALANCER, "chase", {"max_epoch": 3})
    assert res.status("converges") == "bounded"
    assert "the protocol's Sync" in res.reason("converges")
    assert res.cap_raised is None          # the cap was given: not raised


def test_the_cap_is_raised_until_it_cuts_nothing_within_the_bound_or_its_range_ends():
    res, _ = progress(REBALANCER, "default", None, disturbances=4)
    assert res.status("converges") == "holds" and res.graph.cut_within_budget == 0
    assert res.cap_raised == ("max_epoch", 2, 4)
    # a livelock through the cap: raised to the end of its range, still bounded
    res, _ = progress(REBALANCER, "chase")
    assert res.status("converges") == "bounded"
    assert res.cap_raised == ("max_epoch", 2, 6)


def test_disturbances_option_on_the_command_line(capsys):
    assert main(["progress", REBALANCER, "--disturbances", "unbounded"]) == 1
    out = capsys.readouterr().out
    assert "environment-driven" in out and "not a protocol failure" in out
    assert main(["progress", REBALANCER, "--disturbances", "1"]) == 0
    assert "holds (≤ 1 disturbance)" in capsys.readouterr().out


def test_a_bad_disturbance_bound_is_one_line_and_exit_2(capsys):
    assert main(["progress", REBALANCER, "--disturbances", "many"]) == 2
    err = capsys.readouterr().err
    assert "'many' is not a count" in err and len(err.strip().splitlines()) == 1


def test_an_environment_naming_an_unknown_action_is_refused(tmp_path):
    src = Path(REBALANCER).read_text().replace('["Rebalance", "Flip"]', '["Rebalance", "Flop"]')
    path = tmp_path / "rebalancer.py"
    path.write_text(src)
    from kcheck.spec.lang import SpecError
    with pytest.raises(SpecError, match="environment names action 'Flop'"):
        load_spec(str(path))


# ---------------------------------------------------------------------------------------------
# the Kafka specs: every shipped variant decided, none bounded by an epoch cap

def _decided(spec_name, variants):
    spec = load_spec(spec_name)
    for v in variants:
        res, traces = progress(spec, v)
        for name in spec.progress:
            status = res.status(name)
            assert status in ("holds", "violated"), (v, name, res.reason(name))
            assert res.graph.cut_within_budget == 0, v
            expected = name in spec.variants[v].expected_violations
            assert (status == "violated") == expected, (v, name)
            if status == "holds":
                assert res.assumes[name] == f"at most {spec.environment.bound} disturbances"
            else:
                assert res.drivers[name] == "protocol-driven"


def test_consumer_group_default_and_its_bug_decided():
    _decided("consumer_group", ["kip1251", "kafka-20442"])


def test_classic_group_default_decided():
    _decided("classic_group", ["shipped-default"])


@pytest.mark.slow
def test_every_consumer_group_variant_decided():
    _decided("consumer_group", list(load_spec("consumer_group").variants))


@pytest.mark.slow
def test_every_classic_group_variant_decided():
    _decided("classic_group", list(load_spec("classic_group").variants))


# ---------------------------------------------------------------------------------------------
# the fast components are networkx's

class _Arrays:
    """What _strong_components reads of a StateGraph: its states and edges."""

    def __init__(self, n, src, dst):
        self.states, self.src, self.dst = n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_components_on_compressed_rows_are_networkx_components(seed):
    from kcheck.graph import _strong_components
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    m = rng.randint(0, 3 * n)
    edges = sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(m)})
    src, dst = [u for u, _ in edges], [v for _, v in edges]
    sg = _Arrays(n, src, dst)
    alive = np.array([rng.random() < 0.8 for _ in range(n)])
    e = alive[sg.src] & alive[sg.dst] if len(edges) else np.zeros(0, dtype=bool)
    scc, count = _strong_components(sg, alive, e)
    H = nx.DiGraph()
    H.add_nodes_from(np.flatnonzero(alive).tolist())
    H.add_edges_from((u, v) for (u, v), k in zip(edges, e) if k)
    expected = {frozenset(c) for c in nx.strongly_connected_components(H)}
    got = {frozenset(np.flatnonzero(scc == c).tolist()) for c in range(count)}
    assert got == expected
    assert (scc[~alive] == -1).all()
    # numbered by their least state
    firsts = [min(np.flatnonzero(scc == c)) for c in range(count)]
    assert firsts == sorted(firsts)


@pytest.mark.parametrize("variant", ["kip1251", "lost-responses"])
def test_the_bound_gives_the_same_verdict_on_the_symmetry_quotient(variant):
    params = {"partitions": 3, "commits_in_flight": 0}
    full, _ = progress("consumer_group", variant, params)
    reduced, _ = progress("consumer_group", variant, params, graph_symmetry=True)
    assert reduced.symmetry == "partition slots 1,2" and reduced.graph.states < full.graph.states
    for res in (full, reduced):
        assert res.graph.cut_within_budget == 0
    assert reduced.status("eventually-converges") == full.status("eventually-converges")
    assert reduced.assumes == full.assumes and reduced.drivers == full.drivers
    assert reduced.cap_raised == full.cap_raised
