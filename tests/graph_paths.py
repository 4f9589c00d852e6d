"""Random paths through a spec's reachable graph, and a run begun at its first initial state on
the in-process coordinator: what the revert and rebuild tests of the exhaustive walk share
(tests/test_conform_exhaustive.py, tests/test_conform_classic_exhaustive.py)."""
from __future__ import annotations

from kcheck.conform.inprocess import InProcessRun
from kcheck.layout import layout_of


def random_path(model, sg, rng, start: int, n: int) -> list[tuple[str, dict, int]]:
    """Up to N steps from state START, each a uniformly drawn out-edge: (action, args, target)."""
    out, i = [], start
    for _ in range(n):
        edges = sg.out_edges(i)
        if not edges:
            break
        k, i = edges[rng.randrange(len(edges))]
        inst = model.instances[k]
        out.append((inst.action.name, dict(inst.args), i))
    return out


def begin_run(adapter, broker, model, sg, name: str) -> InProcessRun:
    """A run named NAME, the adapter's setup prefix for the graph's first initial state done."""
    lay = layout_of(model)
    run = InProcessRun(broker, name, model.params, model=model, actions=[])
    adapter.begin(run, lay.show(lay.unpack_flat(sg.state_words(0))))
    return run
