"""Ctrl-C and SIGTERM during a Spark job (issue 36): raised from the signal handler inside a Py4J
socket read, the exception left the JVM connection mid-answer, the job ran to its end (58.7 s) and
a Py4JJavaError traceback replaced the verdicts. Now the jobs are cancelled and the command stops
at once with its one line and exit 143/130. A job that fails in the JVM is one line, exit 4."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KCHECK = [sys.executable, "-m", "kcheck.cli"]

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _start_long_job():
    """two_phase N=10 on Spark (minutes of work), returned once a slice job is running (the
    --verbose progress line), the JVM's chatter read past."""
    p = subprocess.Popen(KCHECK + ["check", "two_phase", "--param", "N=10", "--spark", "local[2]",
                                   "--verbose"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.startswith("slices done"):
            return p, seen
    p.wait()
    raise AssertionError("the Spark job ended before its first progress line: " + "".join(seen[-20:]))


@pytest.mark.parametrize("sig,code,said", [(signal.SIGTERM, 143, "kcheck: terminated (SIGTERM)"),
                                           (signal.SIGINT, 130, "kcheck: interrupted")])
def test_a_signal_cancels_the_spark_job_and_exits_cleanly(sig, code, said):
    p, seen = _start_long_job()
    p.send_signal(sig)
    out, err = p.communicate(timeout=600)    # a guard against a hang, not a timing assertion
    err = "".join(seen) + err
    assert p.returncode == code, err[-3000:]
    assert said in err and "Traceback" not in err and "Py4J" not in err, err[-3000:]
    assert out == ""      # no verdict: nothing was decided when the job was cancelled


def test_a_job_that_fails_in_the_jvm_is_one_line_and_exit_4():
    """A 512 MiB driver heap cannot hold two_phase N=10's shuffle: the job fails in the JVM."""
    p = subprocess.run(KCHECK + ["check", "two_phase", "--param", "N=10", "--spark", "local[2]"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "SPARK_DRIVER_MEMORY": "512m"})
    assert p.returncode == 4, (p.returncode, p.stderr[-3000:])
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("kcheck: error: the Spark job failed: ") and "Spark's log:" in line, line
