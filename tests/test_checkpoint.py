"""Checkpoints (checker/checkpoint.py) as the largest run needs them: each level's parent links
and action instances are written as the search keeps them (no joined copy of them while
writing), and a checkpoint of an older format is refused in one line, before its arrays are
read."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from kcheck import checkpoint
from kcheck.bfs import search
from kcheck.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-m", "kcheck.cli"]


def test_each_level_s_links_are_written_as_the_search_keeps_them(tmp_path):
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    r = search(model, max_depth=5, checkpoint=str(tmp_path), checkpoint_every=0)
    with np.load(tmp_path / checkpoint.FILE) as z:
        meta = json.loads(str(z["meta"]))
        assert meta["identity"]["format"] == checkpoint.FORMAT == 2
        sizes = meta["level_sizes"]
        assert len(sizes) == r.depth + 1 == 6 and sum(sizes) == r.distinct_states
        for d, size in enumerate(sizes):
            assert z[f"parents_{d}"].dtype == np.int32 and len(z[f"parents_{d}"]) == size
            # level 0 has no action (int32 zeros); the others the search's instance type
            assert z[f"actions_{d}"].dtype == (np.int32 if d == 0 else np.int16)
        assert "parents" not in z.files and "actions" not in z.files


def test_a_checkpoint_of_the_older_format_is_refused_in_one_line(tmp_path):
    """Format 1 joined the levels' links; such a file is refused (exit 2), naming the format,
    and left as it was."""
    model = load_spec("two_phase").instantiate(None, {"N": 3})
    search(model, max_depth=3, checkpoint=str(tmp_path), checkpoint_every=0)
    path = tmp_path / checkpoint.FILE
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    meta["identity"]["format"] = 1
    arrays["meta"] = np.array(json.dumps(meta))
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    before = path.read_bytes()
    p = subprocess.run(KCHECK + ["check", "two_phase", "--param", "N=3", "--checkpoint",
                                 str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "checkpoint format" in lines[0] and "Traceback" not in p.stderr
    assert path.read_bytes() == before
    assert zipfile.is_zipfile(path)


def test_a_checkpoint_folder_that_cannot_be_written_is_refused_before_the_search():
    p = subprocess.run(KCHECK + ["check", "two_phase", "--checkpoint", "/dev/full/ck"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.strip() == ("kcheck: error: --checkpoint /dev/full/ck: cannot write a "
                                "checkpoint there (Not a directory); give a writable folder")


def test_a_checkpoint_that_fails_to_write_stops_the_search_with_what_it_found(tmp_path,
                                                                              monkeypatch):
    """A disk that fills during the search: the write fails inside numpy (ENOSPC, as a full disk
    raises it), the previous checkpoint stays whole, no temporary file is left, and the search
    stops there with its verdicts bounded (it was a traceback that lost the search)."""
    import errno
    model = load_spec("two_phase").instantiate("commit-without-prepares", {"N": 4})
    first = search(model, max_depth=3, checkpoint=str(tmp_path), checkpoint_every=0)
    whole = (tmp_path / checkpoint.FILE).read_bytes()
    real = np.savez

    def full_disk(f, **arrays):
        real(f, **{k: arrays[k] for k in list(arrays)[:1]})     # part of it written, then:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(np, "savez", full_disk)
    res = search(model, checkpoint=str(tmp_path), checkpoint_every=0)
    assert res.stop_reason == "checkpoint-failed" and not res.exhaustive
    assert res.stop_detail == (f"cannot write the checkpoint {tmp_path / checkpoint.FILE} "
                               f"(No space left on device)")
    assert res.depth == first.depth + 1 and res.status("consistent") in ("bounded", "violated")
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILE]
    assert (tmp_path / checkpoint.FILE).read_bytes() == whole
