#!/bin/sh
# Set up kcheck on a fresh machine: a virtual environment with the package (and, with --test,
# the test extra and a Java runtime for the Spark tests). Safe to run again.
set -eu
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
# the package compiles checker/native.c (the visited set's loops) when it is installed
if ! command -v cc >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q gcc
fi
if [ "${1:-}" = "--test" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    bash scripts/ensure_java.sh
    # the browser tests (report, explorer) drive Debian's chromium headless through Playwright;
    # Playwright's own browser download cannot work here, so it is never run
    if ! command -v chromium >/dev/null 2>&1; then
        apt-get update -q && apt-get install -y -q chromium
    fi
    # the conformance tests run real Kafka brokers: Maven (to resolve Kafka's jars from Maven
    # Central) and the releases the tests use, cached in ~/.cache/kcheck/kafka (never the repo)
    if ! command -v mvn >/dev/null 2>&1; then
        apt-get update -q && apt-get install -y -q maven
    fi
    # (4.1.0: the release before KAFKA-19974's fix, tests/test_conform_stock_assignors.py)
    for version in 4.1.0 4.2.2 4.3.1 4.4.0; do
        .venv/bin/python -c "import sys; from kcheck.conform import kafka; kafka.fetch(sys.argv[1])" "$version"
    done
else
    .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi
