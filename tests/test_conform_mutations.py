"""Mutation adequacy of conformance (issue 33): one-point mutations drawn mechanically from the
specs' expression trees (tests/mutation_support.py: comparison operators flipped to their
neighbour, error-code literals swapped with another code the same action answers), 14 per spec
with a fixed seed, each applied in a temporary copy of the spec's module. The exhaustive
in-process check must catch every one on at least one release, except a mutant shown to be
equivalent (listed below with the reason, and asserted to be uncaught, so the list cannot go
stale). A mutant the exhaustive check misses is equivalent in one of two ways: its reachable
graph at the test's parameters is the unmutated spec's, edge for edge and outcome for outcome
(checked here: a mutation of a branch the graph never takes, which the run's rule coverage lists
as never answered), or it is listed in EQUIVALENT with the reason. How many the sampled walks catch (today's `kcheck conform --walks`: 20 seeded walks of
12 steps at the spec's defaults, replayed in-process on the first release) is measured beside
it, so the difference is a figure, not a claim.

Needs Java 17 and Kafka's jars (scripts/setup.sh --test); a harness that cannot start fails
the test with the reason."""
from __future__ import annotations

import importlib
import types
from pathlib import Path

import numpy as np
import pytest

from kcheck.conform.driver import DIVERGES, BROKEN, adapter_for, run_trace
from kcheck.conform.exhaustive import answerable_outcomes, edge_outcomes, run_exhaustive
from kcheck.graph import build_graph
from kcheck.conform.inprocess import Harness, InProcessBroker, InProcessRun, in_process_adapter
from kcheck.conform_cli import _walk_jobs
from kcheck.loader import load_spec

from mutation_support import mutations, sample, write_mutant

SPEC_DIR = Path(importlib.import_module("kcheck.spec").__file__).parent
SEED, PER_SPEC, WALKS, DEPTH = 33, 14, 20, 12

# per spec: the exhaustive run's parameters and the releases tried, in order (the first is the
# one whose rules the spec's default variant is: no divergence there is expected)
SETUP = {
    "classic_group": ({"members": 2, "partitions": 1, "max_generation": 2, "timeouts": 1},
                      ["4.3.1", "4.2.2", "4.4.0"]),
    "consumer_group": ({"members": 2, "partitions": 1, "static_members": 0, "max_epoch": 3},
                       ["4.4.0", "4.3.1", "4.2.2"]),
}

# mutants the exhaustive check misses whose graph is not the unmutated one, with the reason they
# are equivalent for a check of the coordinator's answers
EQUIVALENT: dict[str, str] = {
    "classic_group:EnforceRebalance: == -> != in "
    "`s.require(s.member_state[m] == STABLE, Not(s.rejoin_needed[m]))`":
        "a client-side guard (a consumer asks to rejoin while STABLE): the mutant lets members that "
        "are not stable ask instead, so a member completing a rebalance may rejoin rather than "
        "sync (a path AssignmentFails opened); the coordinator answers those JoinGroups as the "
        "spec's rule says (checked in every transition); it changes when the client asks, not "
        "what Kafka answers",
    "classic_group:JoinGroupResponse: == -> != in `s.require(s.join_response_generation[m] != "
    "NO_GENERATION, s.member_state[m] == PREPARING)`":
        "a client-side guard (a member processes its JoinGroup answer while preparing a "
        "rebalance): with it inverted no member ever processes an answer, so the graph stops at "
        "the first join phase, every transition of which conforms; it removes client steps, not "
        "a rule Kafka runs",
}

# mutants the exhaustive check misses at this test's parameters although their graph differs
# and no reason for equivalence is known: measured gaps of the exhaustive check, kept visible
# (asserted to stay missed, so a fix shows) until explained or caught
MISSED: dict[str, str] = {
    "consumer_group:HandleCommit: == -> != in `s.require(commit.request != Request.NONE, "
    "commit.member == m, commit.partition == q) (#2 of 2)`":
        "HandleCommit's guard commit.partition == q flipped: at partitions=1 every commit is for "
        "partition 0 = q, so the mutant never handles a commit; a spec that drops a coordinator "
        "step has no transition to diverge on (conformance checks the spec's steps against Kafka, "
        "not the converse), and the run's rule coverage lists every HandleCommit outcome as never "
        "answered; the walks at the spec's defaults (partitions=2) catch it (1 of 20: a commit "
        "for p0 handled as p1's) (measured 2026-12-02)",
}

# the measured figures (docs/conformance.md, "Mutation adequacy"): of the 14, how many the
# exhaustive check catches, how many have the unmutated graph, how many the walks catch (the
# consumer_group walks caught 6 before the strict comparison and the walks' action-first pick
# were merged, 10 with them)
# (classic_group's walks caught 5 of the 14 drawn before issue 35; AssignmentFails and the
# validation added mutation points, so the seed draws another 14, of which the walks catch 3)
# (consumer_group: the release profiles, consumer_commits and kafka-20641-fixed changed the spec,
# so the seed draws another 14: the exhaustive check catches 8, 5 have the unmutated graph, the
# walks catch 9, and one is missed, in MISSED)
MEASURED: dict[str, tuple[int, int, int]] = {"classic_group": (6, 6, 3), "consumer_group": (8, 5, 9)}


def _caught(spec, adapter, harness, params, graph) -> str | None:
    res = run_exhaustive(spec, adapter, harness, None, params, graph=graph)
    return res.divergences[0].detail if res.divergences else None


def _graph(spec, params):
    model = spec.instantiate(None, params)
    sg = build_graph(model)
    return sg, np.frombuffer(edge_outcomes(model, sg), dtype=np.int64)


def _same_graph(a, b) -> bool:
    """The same reachable graph: states (their values too), edges (source, action instance,
    target), outcomes."""
    (ga, oa), (gb, ob) = a, b
    return ga.states == gb.states and all(np.array_equal(x, y) for x, y in (
        (ga.words, gb.words), (ga.src, gb.src), (ga.act, gb.act), (ga.dst, gb.dst), (oa, ob)))


def _walks_catch(spec, adapter, harness) -> int:
    adapter = in_process_adapter(adapter)
    # the walks of `kcheck conform --walks` at the spec's defaults (_walk_jobs reads --param too)
    args = types.SimpleNamespace(variant=None, walks=WALKS, seed=0, depth=DEPTH, param=None)
    caught = 0
    for job in _walk_jobs(args, spec, adapter):
        out = run_trace(InProcessBroker(harness), adapter, spec, job, harness.version,
                        run_class=InProcessRun)
        caught += out.kind in (DIVERGES, BROKEN)
    return caught


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("spec_name", sorted(SETUP))
def test_exhaustive_catches_every_sampled_mutant(spec_name, tmp_path):
    params, releases = SETUP[spec_name]
    original = load_spec(spec_name)
    adapter = adapter_for(spec_name)
    path = SPEC_DIR / f"{spec_name}.py"
    drawn = sample(mutations(path, "Error", answerable_outcomes(original.instantiate(None, params))),
                   PER_SPEC, SEED)
    assert len(drawn) == PER_SPEC
    harnesses = {}
    try:
        def harness(version):
            if version not in harnesses:
                harnesses[version] = Harness(version, settings=adapter.broker_settings)
            return harnesses[version]

        # the unmutated spec conforms on the first release: a catch is the mutation's
        unmutated = _graph(original, params)
        assert _caught(original, adapter, harness(releases[0]), params, unmutated[0]) is None
        explained, by_exhaustive, by_walks, same, report = [], 0, 0, 0, []
        for i, m in enumerate(drawn):
            where = tmp_path / str(i)
            where.mkdir()
            mutant = load_spec(str(write_mutant(path, m, where)))
            graph = _graph(mutant, params)
            caught_on = next((v for v in releases
                              if _caught(mutant, adapter, harness(v), params, graph[0])), None)
            walks = _walks_catch(mutant, adapter, harness(releases[0]))
            by_exhaustive += caught_on is not None
            by_walks += walks > 0
            verdict = caught_on or ("missed: the same reachable graph" if _same_graph(graph, unmutated)
                                    else "missed")
            report.append(f"{spec_name}:{m.name}: exhaustive {verdict}, walks {walks}/{WALKS}")
            if verdict == "missed":
                explained.append(f"{spec_name}:{m.name}")
            same += verdict.startswith("missed: the same")
        print("\n".join(report))
        assert sorted(explained) == sorted(k for k in {**EQUIVALENT, **MISSED}
                                           if k.startswith(spec_name + ":")), report
        assert (by_exhaustive, same, by_walks) == MEASURED[spec_name], report
    finally:
        for h in harnesses.values():
            h.close()
