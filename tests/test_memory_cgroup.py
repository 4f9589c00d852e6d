"""The memory watch under a real memory cgroup (issue 36): at 1 GiB, `check consumer_group --param
members=3` was killed by the kernel (rc 137, nothing printed), because a level's end (its runs
joined, sorted and filtered) rose past the limit between two samples. The watch now forecasts the
next step (twice the largest rise seen, or twice what the level holds) and lets a level that
would not fit go. Here the same search runs in a 256 MiB cgroup of its own: it must stop as
bounded, print its verdicts and exit 3, never be killed.

The test makes the cgroup (v2, or v1's memory controller) and fails with the reason where the
machine does not let it."""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 256 * 2**20

pytestmark = pytest.mark.slow


def _make_cgroup() -> Path:
    """A fresh memory cgroup of LIMIT bytes -> its folder (AssertionError with the reason)."""
    name = f"kcheck-test-{uuid.uuid4().hex[:8]}"
    v2 = Path("/sys/fs/cgroup")
    tried = []
    if (v2 / "cgroup.controllers").exists():
        d = v2 / name
        try:
            d.mkdir()
            (d / "memory.max").write_text(str(LIMIT))
            (d / "memory.swap.max").write_text("0")
            return d
        except OSError as e:
            tried.append(f"{d}: {e.strerror}")
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        d = v1 / name
        try:
            d.mkdir()
            (d / "memory.limit_in_bytes").write_text(str(LIMIT))
            return d
        except OSError as e:
            tried.append(f"{d}: {e.strerror}")
    raise AssertionError("cannot create a memory cgroup to run the search in ("
                         + ("; ".join(tried) or "no cgroup v2 or v1 memory controller") + ")")


def test_a_search_in_a_256_mib_cgroup_stops_as_bounded_with_its_verdicts():
    d = _make_cgroup()
    try:
        # the child joins the cgroup before it starts Python: everything it allocates counts
        enter = f'echo $$ > "{d}/cgroup.procs" && exec "$@"'
        p = subprocess.run(["sh", "-c", enter, "sh", sys.executable, "-m", "kcheck.cli", "check",
                            "consumer_group", "--param", "members=3", "--property",
                            "one-owner-per-epoch", "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=900,
                           env={**os.environ, "KCHECK_MEMORY_LIMIT": ""})
    finally:
        d.rmdir()
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    doc = json.loads(p.stdout)
    assert doc["stop_reason"] == "memory", doc["stop_reason"]
    assert f"memory limit of cgroup {d}" in doc["stop_detail"], doc["stop_detail"]
    assert doc["properties"]["one-owner-per-epoch"]["status"] == "bounded"
    assert doc["distinct_states"] > 100_000 and "Traceback" not in p.stderr
