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


@pytest.mark.parametrize("own_spec_package", [False, True])
def test_a_spec_on_the_old_import_path_is_refused_in_one_line(tmp_path, own_spec_package):
    """`from spec.lang import ...` was kcheck's path before the one namespace; with or without a
    user's own 'spec' package beside it, the error says what to write instead."""
    text = (ROOT / "spec" / "examples" / "two_phase.py").read_text()
    assert "\nfrom kcheck import " in text
    (tmp_path / "old.py").write_text(text.replace("\nfrom kcheck import ", "\nfrom spec.lang import "))
    if own_spec_package:
        (tmp_path / "spec").mkdir()
        (tmp_path / "spec" / "__init__.py").write_text("")
    p = subprocess.run([sys.executable, "-m", "kcheck.cli", "check", "old.py"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert "old.py:" in p.stderr and "imports kcheck's old package 'spec'" in p.stderr
    assert "`from kcheck import Spec, Int, Bool, ...`" in p.stderr


def test_the_pytest_plugin_and_the_public_names_load_nothing_heavy():
    """The plugin is loaded into every pytest run of a user who has kcheck installed."""
    code = ("import sys, kcheck.pytest_plugin; import kcheck\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'rich', 'z3', 'networkx', 'pyspark', 'jsonschema') or m.startswith('kcheck')))\n"
            "from kcheck import Spec, Int\n"
            "print(Spec.__module__, 'numpy' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    loaded, public = p.stdout.splitlines()
    assert loaded == "['kcheck', 'kcheck.pytest_plugin']"
    assert public == "kcheck.spec.lang False"
