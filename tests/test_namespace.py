"""kcheck installs one top-level import name: the repository's spec/ and checker/ folders are
kcheck.spec and kcheck, and neither is importable by its folder's name."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["spec", "checker"])
def test_the_repository_folders_are_not_importable_by_their_own_names(name):
    # (a user's own module of that name, imported by a test's spec from its folder, may be here)
    found = importlib.util.find_spec(name)
    assert found is None or not str(found.origin).startswith(str(ROOT)), found.origin
    # nor from a Python started in the checkout's root, as the tests' subprocesses are
    p = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True,
                       text=True)
    assert p.returncode == 1 and f"No module named '{name}'" in p.stderr


def test_the_spec_language_is_kcheck_spec_lang():
    import kcheck.spec.lang
    assert kcheck.spec.lang.__file__ == str(ROOT / "spec" / "lang.py")
