#!/usr/bin/env bash
# Spark needs Java 17 or newer. Quiet when `java` already is; otherwise installs a JRE from
# Debian's packages (openjdk-17-jre-headless, else default-jre-headless).
set -euo pipefail

major() {
  local v
  v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -1)" || return 1
  [ -n "$v" ] || return 1
  case "$v" in 1.*) v="${v#1.}" ;; esac
  echo "${v%%.*}"
}

if command -v java >/dev/null 2>&1 && [ "$(major || echo 0)" -ge 17 ]; then
  exit 0
fi

echo "ensure_java: installing a Java runtime for Spark (found: $(command -v java >/dev/null && echo "Java $(major)" || echo none))" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null 2>&1 \
  || $SUDO apt-get install -y -qq default-jre-headless >/dev/null
v="$(major || echo 0)"
if [ "$v" -lt 17 ]; then
  echo "ensure_java: Java $v after installing; Spark needs 17 or newer" >&2
  exit 1
fi
