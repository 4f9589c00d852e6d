"""Exit codes that say what happened (README, "Exit codes"), on the paths a hostile user found
wrong: a witness is not a violation, a solver's timeout is not an interruption, an empty name is
not the default, an output that fails after the run keeps the run's results and the others."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]
OK, VIOLATED, BAD_INPUT, BOUNDED, SAVE_FAILED = 0, 1, 2, 3, 5


def kcheck(*args, env=None, cwd=None):
    import os
    return subprocess.run(KCHECK + [str(a) for a in args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env={**os.environ, **(env or {})})


def one_line(p) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.z3
@pytest.mark.slow
def test_bmc_counts_a_sometimes_witness_as_reached_not_violated():
    """consumer_group's two sometimes properties are reached within 3 steps; nothing is violated,
    and 3 steps are not every behaviour: bounded, exit 3 (it was 1)."""
    p = kcheck("bmc", "consumer_group", "--depth", "3", "--json")
    assert p.returncode == BOUNDED, p.stderr
    doc = json.loads(p.stdout)
    statuses = {name: v["status"] for name, v in doc["properties"].items()}
    assert "violated" not in statuses.values()
    assert sorted(n for n, s in statuses.items() if s == "reached") == \
        ["owner-commit-behind-member-epoch", "zombie-commit-in-flight"]
    p = kcheck("bmc", "consumer_group", "--depth", "3")
    assert "Shortest witness for zombie-commit-in-flight" in p.stdout
    assert "Shortest counterexample" not in p.stdout


@pytest.mark.z3
@pytest.mark.slow
def test_a_solver_timeout_is_undecided_not_an_interruption():
    p = kcheck("prove", "consumer_group", "--property", "zombie-commit-is-stale",
               "--timeout", "0.001")
    assert p.returncode == BOUNDED, (p.returncode, p.stdout, p.stderr)
    assert "UNKNOWN" in p.stdout and "interrupted" not in p.stderr


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "-1", "0"])
def test_a_timeout_that_is_no_number_of_seconds_is_refused(value):
    p = kcheck("bmc", "two_phase", "--depth", "2", "--timeout", value)
    assert p.returncode == BAD_INPUT
    assert "--timeout must be a positive number of seconds" in one_line(p)


@pytest.mark.parametrize("command", ["check", "progress", "bmc"])
def test_an_empty_variant_is_refused_not_the_default(command):
    p = kcheck(command, "two_phase", "--variant", "")
    assert p.returncode == BAD_INPUT and "--variant needs a variant's name" in one_line(p)


def test_conform_refuses_an_empty_kafka_version_and_variant():
    p = kcheck("conform", "consumer_group", "--kafka", "")
    assert p.returncode == BAD_INPUT and "unknown Kafka version ''" in one_line(p)
    p = kcheck("conform", "consumer_group", "--variant", "")
    assert p.returncode == BAD_INPUT and "unknown variant ''" in one_line(p)


def test_compare_has_no_variant_option_to_ignore():
    p = kcheck("compare", "two_phase", "--rule", "x", "--variants", "lamport", "lamport",
               "--variant", "nope")
    assert p.returncode == BAD_INPUT
    one_line(p)


@pytest.mark.parametrize("limit", ["-5G", "0", "nan", "abc"])
def test_a_memory_limit_that_is_no_size_is_refused(limit):
    p = kcheck("check", "two_phase", env={"KCHECK_MEMORY_LIMIT": limit})
    assert p.returncode == BAD_INPUT
    assert f"KCHECK_MEMORY_LIMIT={limit!r} is not a size" in one_line(p)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_spec_that_calls_sys_exit_is_an_error_with_its_line(tmp_path, json_flag):
    spec = tmp_path / "exits.py"
    spec.write_text("import sys\n\nsys.exit(0)\n")
    p = kcheck("check", spec, *json_flag)
    assert p.returncode == BAD_INPUT and p.stdout == ""
    assert f"{spec}:3: loading the spec called sys.exit(0)" in one_line(p)


def test_an_output_that_fails_after_the_run_keeps_the_results_and_the_other_outputs(tmp_path):
    """/dev/full takes no bytes (ENOSPC, even for root): the run's results are printed, the
    SARIF file beside it is written, and the exit is 5 naming the JUnit file and the run's own
    exit code (1: a violation), not 2 (bad input) as it was."""
    sarif = tmp_path / "out.sarif"
    p = kcheck("check", "two_phase", "--variant", "commit-without-prepares", "--junit",
               "/dev/full", "--sarif", sarif, "--json")
    assert p.returncode == SAVE_FAILED
    assert json.loads(p.stdout)["properties"]["consistent"]["status"] == "violated"
    line = one_line(p)
    assert "--junit /dev/full: cannot write the file" in line
    assert "(the run's own exit code: 1)" in line
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert {r["ruleId"]: r["properties"]["status"] for r in results}["two_phase/consistent"] == \
        "violated"
    import os
    import stat
    # a device named as an output is written to, never replaced by a file (os.replace would)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_failed_save_still_writes_the_ci_outputs(tmp_path):
    sarif = tmp_path / "out.sarif"
    p = kcheck("check", "two_phase", "--variant", "commit-without-prepares", "--save", "--out",
               "/dev/full/x", "--sarif", sarif)
    assert p.returncode == SAVE_FAILED and "cannot save" in one_line(p)
    assert "VIOLATED" in p.stdout and sarif.exists()


def test_an_error_location_keeps_its_line_number(tmp_path):
    """rich read 'bad_name.py:100:' as the emoji code ':100:' and printed 'bad_name.py💯'."""
    spec = tmp_path / "bad_name.py"
    spec.write_text("from kcheck import Spec\n" + "\n" * 98 + "undefined_name\n")
    p = kcheck("check", spec)
    assert p.returncode == BAD_INPUT
    assert one_line(p).startswith(f"kcheck: error: {spec}:100: loading the spec raised NameError")


@pytest.mark.parametrize("argv", [["check", "two_phase"], ["check", "two_phase", "--json"],
                                  ["list"]])
def test_standard_output_that_cannot_be_written_is_one_line_and_exit_5(argv):
    import os
    with open("/dev/full", "w") as full:
        p = subprocess.run(KCHECK + argv, stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=300, env=os.environ)
    assert p.returncode == SAVE_FAILED
    assert one_line(p) == ("kcheck: error: cannot write the results to standard output "
                           "(No space left on device)")


def test_a_special_file_is_no_trace_and_no_spec():
    """/dev/zero never ends: the reader stops at its cap (it grew by 500 MB/s, deaf to Ctrl-C)."""
    p = kcheck("replay", "/dev/zero")
    assert p.returncode == BAD_INPUT and "larger than 64 MB: not a trace file" in one_line(p)
    p = kcheck("check", "/dev/zero")
    assert p.returncode == BAD_INPUT and "is not a regular file" in one_line(p)


def test_a_huge_spec_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(20 << 20)
    p = kcheck("check", big)
    assert p.returncode == BAD_INPUT and "larger than 16 MB: not a spec module" in one_line(p)


def test_a_sweep_range_beyond_the_parameter_is_refused_before_it_is_built():
    p = kcheck("sweep", "two_phase", "--param", "N=1..99999999")
    assert p.returncode == BAD_INPUT
    assert one_line(p) == "kcheck: error: parameter N=99999999 is out of range (valid: 1..12)"


def test_an_ascii_terminal_gets_the_results():
    p = kcheck("check", "two_phase", env={"PYTHONIOENCODING": "ascii"})
    assert p.returncode == OK and "consistent" in p.stdout and "Traceback" not in p.stderr


def test_a_number_of_5000_digits_is_one_short_line(tmp_path):
    source = (ROOT / "counterexamples" / "two_phase" / "commit-without-prepares" /
              "consistent.json").read_text()
    trace = tmp_path / "big.json"
    trace.write_text(source.replace('"N": 3', '"N": ' + "9" * 5000))
    p = kcheck("replay", trace)
    assert p.returncode == BAD_INPUT
    assert "a number of more digits than any parameter or field can hold" in one_line(p)
    p = kcheck("check", "two_phase", "--param", "N=" + "9" * 5000)
    assert p.returncode == BAD_INPUT and len(one_line(p)) < 200


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a real filesystem of 4 KB (tmpfs, mounted for the test: root can here, and
    a machine where it cannot fails this test with mount's reason)."""
    where = tmp_path / "full"
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    assert p.returncode == 0, f"cannot mount a small tmpfs for the full-disk test: {p.stderr}"
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_report_on_a_full_disk_leaves_no_half_page(full_disk):
    p = kcheck("report", "two_phase", "-o", full_disk, "--no-progress")
    assert p.returncode == SAVE_FAILED
    line = one_line(p)
    assert f"cannot write {full_disk / 'two_phase.html'} (No space left on device)" in line
    assert list(full_disk.iterdir()) == []      # neither a 0-byte page nor a temporary file


def test_saved_traces_on_a_full_disk_are_whole_or_absent(full_disk):
    p = kcheck("check", "two_phase", "--variant", "commit-without-prepares", "--save", "--out",
               full_disk)
    assert p.returncode == SAVE_FAILED and "No space left on device" in one_line(p)
    for f in full_disk.rglob("*"):
        if f.is_file():
            assert not f.name.endswith(".tmp") and f.stat().st_size > 0, f
            if f.suffix == ".json":
                json.loads(f.read_text())


def _stop_when(argv: list, line: str, signum) -> tuple[int, str, str]:
    """Runs kcheck, sends ``signum`` once ``line`` appears on its stderr (an event, not a clock),
    and a second one right after it (a supervisor's repeat, an impatient Ctrl-C); -> (exit,
    stdout, stderr)."""
    import os
    import threading
    p = subprocess.Popen(KCHECK + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen, err = threading.Event(), []

    def read():
        for text in p.stderr:
            err.append(text)
            if line in text and not seen.is_set():
                seen.set()
                p.send_signal(signum)
                p.send_signal(signum)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = p.stdout.read()
    p.wait(timeout=600)
    reader.join(timeout=60)
    assert seen.is_set(), "".join(err)
    return p.returncode, out, "".join(err)


def test_sweep_prints_what_it_finished_when_terminated():
    import signal
    code, out, err = _stop_when(["sweep", "two_phase", "--variant", "commit-without-prepares",
                                 "--param", "N=1..10", "--verbose"],
                                "configurations done 2/10", signal.SIGTERM)
    assert code == 143, err
    assert "kcheck: sweep terminated (SIGTERM) after" in err and "Traceback" not in err
    rows = [r for r in out.splitlines() if r.startswith("│")]
    assert rows[0].split("│")[1].strip() == "1" and rows[1].split("│")[1].strip() == "2"


def test_progress_of_every_variant_prints_the_finished_ones_when_interrupted():
    import signal
    code, out, err = _stop_when(["progress", "consumer_group", "--all-variants", "--param",
                                 "members=1"], "kcheck: progress consumer_group/kip1251:",
                                signal.SIGINT)
    assert code == 130, err
    assert "kcheck: progress interrupted in consumer_group/" in err and "Traceback" not in err
    assert "consumer_group: progress verdicts by" in out
    assert any(r.startswith("│ kip1251") for r in out.splitlines())


@pytest.mark.parametrize("runner", [KCHECK, [str(Path(sys.executable).parent / "kcheck")]])
@pytest.mark.parametrize("line,what", [
    ("spec.symmetry('m', count=lambda p: 2, arrays={'x': 'slot'})\n"
     "spec.symmetry('m', count=lambda p: 2, arrays={'x': 'slot'})\n",
     "symmetry 'm' is declared twice"),
    ("spec.variant('v', 'doc', params={'nope': 1})\n", "unknown parameter 'nope'"),
])
def test_a_spec_error_names_the_specs_own_line(tmp_path, runner, line, what):
    """Errors raised while a spec is loaded name its file and line: they printed
    '.venv/bin/kcheck:8', '<string>:5' or 'file:12: : ...' (two helpers, one garbling)."""
    path = tmp_path / "located.py"
    head = ("from kcheck import Array, Int, Spec\nspec = Spec('located')\n@spec.state\n"
            "def state(p):\n    return {'x': Array(Int(0, 1), 2)}\n@spec.init\n"
            "def init(p):\n    yield {'x': [0, 0]}\n")
    path.write_text(head + line)
    p = subprocess.run(runner + ["check", str(path)], capture_output=True, text=True,
                       timeout=300)
    message = one_line(p)
    assert p.returncode == BAD_INPUT and what in message, message
    last = head.count("\n") + line.count("\n")
    assert f"{path}:{last}" in message, message
    assert ": :" not in message and "<string>" not in message and "bin/kcheck:" not in message
