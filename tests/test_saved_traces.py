"""Every saved counterexample and every scenario file replays through the current specs: the
regression suite of every rule known to break, and the concrete cases from Kafka's tests."""
import json
from pathlib import Path

import pytest

from kcheck.loader import load_spec
from kcheck.trace import load, replay

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "counterexamples").rglob("*.json")) + sorted((ROOT / "tests/scenarios").rglob("*.json"))


def test_there_are_saved_traces():
    assert any("counterexamples" in str(f) for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_replays(path):
    doc = load(path)
    model = load_spec(doc["spec"]).instantiate(doc.get("variant"), doc.get("params", {}))
    r = replay(model, doc)
    assert r.ok, r.message
    if "counterexamples" in str(path):
        # a saved counterexample names the property it breaks and its file says so
        assert doc["property"] == path.stem
        assert path.with_suffix(".md").exists()
