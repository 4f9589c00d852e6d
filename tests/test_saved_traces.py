"""Every saved counterexample and every scenario file replays through the current specs: the
regression suite of every rule known to break, and the concrete cases from Kafka's tests. Each is
in the current trace format with the spec's current fields: `kcheck upgrade` has nothing to do
(tests/traces_v1 and tests/traces_flat keep the older formats, to test reading them)."""
import json
from pathlib import Path

import pytest

from kcheck.loader import load_spec
from kcheck.trace import FORMAT, load, upgrade

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "counterexamples").rglob("*.json")) + sorted((ROOT / "tests/scenarios").rglob("*.json"))


def test_there_are_saved_traces():
    assert any("counterexamples" in str(f) for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_replays(path):
    doc = load(path)
    model = load_spec(doc["spec"]).instantiate(doc.get("variant"), doc.get("params", {}))
    assert doc["kcheck_trace"] == FORMAT
    up = upgrade(model, doc)            # replays it, and says what an upgrade would change
    assert up.changes == []
    assert up.replayed.ok, up.replayed.message
    if "counterexamples" in str(path):
        # a saved counterexample names the property it breaks and its file says so
        assert doc["property"] == path.stem
        assert path.with_suffix(".md").exists()
