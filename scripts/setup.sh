#!/bin/sh
# Set up kcheck on a fresh machine: a virtual environment with the package (and, with --test,
# the test extra and a Java runtime for the Spark tests). Safe to run again.
set -eu
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
if [ "${1:-}" = "--test" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    bash scripts/ensure_java.sh
else
    .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi
