"""Mutation adequacy of conformance (issue 33): one-point mutations drawn mechanically from the
specs' expression trees (tests/mutation_support.py: comparison operators flipped to their
neighbour, error-code literals swapped with another code the same action answers), 14 per spec
with a fixed seed, each applied in a temporary copy of the spec's module. The exhaustive
in-process check must catch every one on at least one release, except a mutant shown to be
equivalent (listed below with the reason, and asserted to be uncaught, so the list cannot go
stale). How many the sampled walks catch (today's `kcheck conform --walks`: 20 seeded walks of
12 steps at the spec's defaults, replayed in-process on the first release) is measured beside
it, so the difference is a figure, not a claim.

Needs Java 17 and Kafka's jars (scripts/setup.sh --test); a harness that cannot start fails
the test with the reason."""
from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

from kcheck.conform.driver import DIVERGES, BROKEN, adapter_for, run_trace
from kcheck.conform.exhaustive import answerable_outcomes, run_exhaustive
from kcheck.conform.inprocess import Harness, InProcessBroker, InProcessRun, in_process_adapter
from kcheck.conform_cli import _walk_jobs
from kcheck.loader import load_spec

from mutation_support import mutations, sample, write_mutant

SPEC_DIR = Path(importlib.import_module("kcheck.spec").__file__).parent
SEED, PER_SPEC, WALKS, DEPTH = 33, 14, 20, 12

# per spec: the exhaustive run's parameters and the releases tried, in order (the first is the
# one whose rules the spec's default variant is: no divergence there is expected)
SETUP = {
    "classic_group": ({"members": 2, "partitions": 1, "max_generation": 2},
                      ["4.3.1", "4.2.2", "4.4.0"]),
    "consumer_group": ({"members": 2, "partitions": 1, "static_members": 0, "max_epoch": 3},
                       ["4.4.0", "4.3.1", "4.2.2"]),
}

# mutants that no check can catch, with the reason (equivalent mutants): filled from the run
EQUIVALENT: dict[str, str] = {}

# the measured figures (see docs/conformance.md, "Mutation adequacy")
CAUGHT_BY_WALKS: dict[str, int] = {}


def _caught(spec, adapter, harness, params) -> str | None:
    res = run_exhaustive(spec, adapter, harness, None, params)
    return res.divergences[0].detail if res.divergences else None


def _walks_catch(spec, adapter, harness) -> int:
    adapter = in_process_adapter(adapter)
    args = types.SimpleNamespace(variant=None, walks=WALKS, seed=0, depth=DEPTH)
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
        assert _caught(original, adapter, harness(releases[0]), params) is None
        missed, by_walks, report = [], 0, []
        for i, m in enumerate(drawn):
            where = tmp_path / str(i)
            where.mkdir()
            mutant = load_spec(str(write_mutant(path, m, where)))
            caught_on = next((v for v in releases if _caught(mutant, adapter, harness(v), params)), None)
            walks = _walks_catch(mutant, adapter, harness(releases[0]))
            by_walks += walks > 0
            report.append(f"{spec_name}:{m.name}: exhaustive {caught_on or 'missed'}, walks {walks}/{WALKS}")
            if caught_on is None:
                missed.append(f"{spec_name}:{m.name}")
        print("\n".join(report))
        assert sorted(missed) == sorted(k for k in EQUIVALENT if k.startswith(spec_name + ":")), report
        if spec_name in CAUGHT_BY_WALKS:
            assert by_walks == CAUGHT_BY_WALKS[spec_name], report
    finally:
        for h in harnesses.values():
            h.close()
