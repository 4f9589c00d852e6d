"""kcheck's pytest plugin (registered through the package's `pytest11` entry point): a user's
repository keeps its specs beside its code, and `pytest` checks them against their records.

    def test_my_protocol(kcheck):
        kcheck.check_record("specs/my_protocol.py")          # every variant, safety and progress

    @pytest.mark.kcheck_record("specs/my_protocol.py", variants=["strict"], params={"members": 3})
    def test_strict_variant():
        pass

A verdict that differs from the spec's record (`spec.variant(..., violates=[...])`) fails the
test; the failure message names each difference and carries the counterexample as the terminal
shows it. `kcheck.replay(path)` asserts that a saved trace or scenario still reproduces.
A relative spec path is looked up beside the test file first, then from pytest's root directory.
"""
from __future__ import annotations

from pathlib import Path

import pytest


class Verdicts(dict):
    """(variant, property) -> 'holds' | 'violated' | 'bounded', as the engines found them."""


class KcheckFixture:
    def __init__(self, base: Path, root: Path):
        self._base, self._root = base, root

    def _spec(self, spec: str):
        from kcheck.loader import load_spec
        from kcheck.spec import SHIPPED
        if spec not in SHIPPED:
            p = Path(spec)
            if not p.is_absolute():
                p = next((c for c in (self._base / p, self._root / p) if c.is_file()), self._base / p)
            spec = str(p)
        return load_spec(spec)

    def check_record(self, spec: str, variants: list[str] | None = None, params: dict | None = None,
                     progress: bool = True, max_states: int | None = None) -> Verdicts:
        """Checks each variant (all by default) and fails the test if any verdict differs from
        the spec's record. Returns every verdict."""
        from kcheck.ci_outputs import trace_text
        from kcheck.run import Options, run_variants
        s = self._spec(spec)
        names = variants or list(s.variants) or [None]
        for v in names:
            if v is not None and v not in s.variants:
                raise pytest.UsageError(f"kcheck: spec {s.name} has no variant '{v}'; variants: "
                                        f"{', '.join(s.variants)}")
        verdicts, failures = Verdicts(), []
        for run in run_variants(s, names, params, Options(max_states=max_states),
                                progress=progress):
            verdicts.update({(run.variant, p): st for p, st in run.verdicts.items()})
            for d in run.diffs:
                # the record's messages start "<spec>/<variant>: <property> ..."
                tr = next((t for p, t in run.found.items()
                           if d.startswith(f"{s.name}/{run.variant}: {p} ")), None)
                failures.append(d + ("\n" + trace_text(tr) if tr is not None else ""))
        if failures:
            pytest.fail(f"{len(failures)} verdict(s) of {s.name} differ from its record:\n\n"
                        + "\n".join(failures), pytrace=False)
        return verdicts

    def replay(self, path: str, spec: str | None = None):
        """Fails the test unless the trace (a counterexample or a scenario) still reproduces."""
        from kcheck.trace import load, replay, spec_path
        p = Path(path)
        if not p.is_absolute():
            p = next((c for c in (self._base / p, self._root / p) if c.is_file()), self._base / p)
        doc = load(p)
        s = self._spec(spec or spec_path(doc["spec"], p))
        r = replay(s.instantiate(doc.get("variant"), doc.get("params", {})), doc)
        if not r.ok:
            pytest.fail(f"{p}: does not reproduce: {r.message}", pytrace=False)
        return r


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kcheck_record(spec, variants=None, params=None, progress=True): check a kcheck "
                   "spec's variants against its record before the test runs")


@pytest.fixture
def kcheck(request) -> KcheckFixture:
    """Checks kcheck specs against their records (see kcheck.pytest_plugin)."""
    return KcheckFixture(Path(request.path).parent, Path(str(request.config.rootpath)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    m = item.get_closest_marker("kcheck_record")
    if m is None:
        return
    if not m.args:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.kcheck_record needs the spec, "
                                f"e.g. kcheck_record('specs/my_protocol.py')")
    KcheckFixture(Path(item.path).parent, Path(str(item.config.rootpath))).check_record(m.args[0], **m.kwargs)
