"""kcheck as a user gets it: its own wheel, installed into a fresh virtual environment outside the
repository, run from a folder that is not the checkout (pip fetches kcheck's dependencies and the
build backend from PyPI, or its cache)."""
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]

# every file the code opens, as the wheel must carry it
DATA = ["kcheck/assets/report.css", "kcheck/assets/explorer.html", "kcheck/assets/explorer.js",
        "kcheck/trace_schema.json", "kcheck/trace_schema_v1.json", "kcheck/output_schema.json",
        "kcheck/conform/assignor/ScriptedAssignor.java",
        "kcheck/conform/assignor/RecordDecoder.java",
        "kcheck/conform/harness/InProcessCoordinator.java", "kcheck/conform/harness/Compat_4_2.java",
        "kcheck/conform/harness/Compat_4_3.java", "kcheck/conform/harness/Compat_4_4.java"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the wheel, the fresh environment's bin folder, a folder outside the repository)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"       # a copy: building in the checkout would leave build/ in it
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("checker", "spec"):
        shutil.copytree(ROOT / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w",
                        str(tmp / "dist")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    wheel = next((tmp / "dist").glob("kcheck-*.whl"))
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    r = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", str(wheel), "pytest"],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return wheel, bin_dir, elsewhere


def run(installed, *args, cwd=None, timeout=600):
    _, bin_dir, elsewhere = installed
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSAFEPATH", "PYTEST_XDIST_WORKER",
                        "PYTEST_CURRENT_TEST")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return subprocess.run(list(args), cwd=cwd or elsewhere, capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_the_wheel_has_one_top_level_name_and_every_data_file(installed):
    wheel = installed[0]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tops = {n.split("/")[0] for n in names if ".dist-info/" not in n}
        assert tops == {"kcheck"}, tops
        for data in DATA:
            source = ROOT / ("checker" + data.removeprefix("kcheck"))
            assert z.read(data) == source.read_bytes(), data
        entry_points = z.read("kcheck-0.1.0.dist-info/entry_points.txt").decode()
        assert "kcheck = kcheck.cli:run" in entry_points
        assert "kcheck = kcheck.pytest_plugin" in entry_points


def test_it_imports_the_installed_copy_and_no_generic_names(installed):
    r = run(installed, "python", "-c", "import kcheck, importlib.util as u; print(kcheck.__file__);"
                                       "print(u.find_spec('spec'), u.find_spec('checker'))")
    assert r.returncode == 0, r.stderr
    where, generic = r.stdout.splitlines()
    assert where.startswith(str(installed[1].parent)) and "site-packages/kcheck/" in where
    assert generic == "None None"


def test_check_two_phase(installed):
    r = run(installed, "kcheck", "check", "two_phase", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exhaustive"] and doc["distinct_states"] == 288, doc["distinct_states"]
    assert {v["status"] for v in doc["properties"].values()} == {"holds"}


def test_a_shipped_trace_of_each_format_replays(installed):
    for path in ("counterexamples/two_phase/commit-without-prepares/consistent.json",
                 "counterexamples/consumer_group/kafka-19974/one-owner-per-epoch.json"):
        r = run(installed, "kcheck", "replay", str(ROOT / path))
        assert r.returncode == 0 and "REPRODUCES" in r.stdout, (path, r.stdout + r.stderr)


def test_report_two_phase_inlines_the_packaged_stylesheet(installed):
    out = installed[2] / "report"
    r = run(installed, "kcheck", "report", "two_phase", "-o", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    page = (out / "two_phase.html").read_text()
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert style == (ROOT / "checker" / "assets" / "report.css").read_text()
    assert 'data-variant="commit-without-prepares" data-property="consistent"' in page


def test_kcheck_new_and_pytest_in_a_repository_with_its_own_spec_package(installed):
    repo = installed[2] / "user_repo"
    (repo / "spec").mkdir(parents=True)
    (repo / "spec" / "__init__.py").write_text("")
    (repo / "spec" / "helpers.py").write_text("ANSWER = 42\n")
    (repo / "test_own_spec_package.py").write_text(
        "from spec.helpers import ANSWER\n\n\ndef test_the_users_spec_package():\n"
        "    assert ANSWER == 42\n")
    r = run(installed, "kcheck", "new", "lease_protocol", cwd=repo)
    assert r.returncode == 0, r.stderr
    r = run(installed, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=repo)
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout + r.stderr


def test_conform_without_files_outside_a_checkout_says_what_to_give(installed):
    r = run(installed, "kcheck", "conform", "consumer_group")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "give trace files (kcheck conform consumer_group FILE...)" in r.stderr


@pytest.mark.kafka
def test_conform_replays_one_trace_on_kafka_4_3_1(installed):
    """Kafka 4.3.1's jars from the cache that the README's set-up fills (scripts/setup.sh)."""
    trace = ROOT / "tests" / "scenarios" / "consumer_group" / "stale_member_epoch.json"
    r = run(installed, "kcheck", "conform", "consumer_group", str(trace), "--kafka", "4.3.1",
            "--json", timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["kafka"] == "4.3.1"
    assert [t["outcome"] for t in doc["traces"]] == ["conforms"], doc["traces"]
