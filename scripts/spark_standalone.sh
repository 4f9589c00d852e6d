#!/usr/bin/env bash
# A real Spark standalone cluster on this machine, from what the pyspark package bundles: one
# master and two workers (bin/spark-class with the standalone Master and Worker classes; the pip
# package has no sbin/start-master.sh), all bound to 127.0.0.1.
#
#   scripts/spark_standalone.sh start         start them; prints the master's URL
#   scripts/spark_standalone.sh stop          stop what 'start' started (by the pids it saved)
#   scripts/spark_standalone.sh demo [SPEC] [kcheck check options...]
#                                             start, check SPEC (default two_phase) on the
#                                             cluster and in one process, compare, stop
#
# Environment: KCHECK_CLUSTER_DIR (pids, logs, work dirs; default /tmp/kcheck-standalone-$UID),
# SPARK_MASTER_PORT (default: a free port), WORKER_CORES (1), WORKER_MEMORY (1g).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
KCHECK=("$PY" -m kcheck.cli)
DIR="${KCHECK_CLUSTER_DIR:-/tmp/kcheck-standalone-$(id -u)}"
export SPARK_HOME="${SPARK_HOME:-$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PY"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# the master's and the workers' JVMs as the driver's (checker/spark.py JVM_OPTIONS): their work
# is light, and the client compiler with the serial collector starts them on half the CPU
export SPARK_DAEMON_JAVA_OPTS="${SPARK_DAEMON_JAVA_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData}"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {
  mkdir -p "$DIR"
  if [ -f "$DIR/master.url" ] && kill -0 "$(cat "$DIR/master.pid" 2>/dev/null)" 2>/dev/null; then
    cat "$DIR/master.url"; return 0
  fi
  "$ROOT/scripts/ensure_java.sh"
  local port="${SPARK_MASTER_PORT:-$(free_port)}" ui
  ui="$(free_port)"
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host 127.0.0.1 --port "$port" --webui-port "$ui" >"$DIR/master.log" 2>&1 &
  echo $! >"$DIR/master.pid"
  echo "$ui" >"$DIR/master.ui"
  local url="spark://127.0.0.1:$port"
  for i in 1 2; do
    mkdir -p "$DIR/work$i"
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
        --host 127.0.0.1 --webui-port "$(free_port)" --cores "${WORKER_CORES:-1}" \
        --memory "${WORKER_MEMORY:-1g}" --work-dir "$DIR/work$i" "$url" >"$DIR/worker$i.log" 2>&1 &
    echo $! >"$DIR/worker$i.pid"
  done
  # ready when the master lists both workers ALIVE
  for _ in $(seq 1 240); do
    if "$PY" - "$ui" <<'EOF' 2>/dev/null; then echo "$url" >"$DIR/master.url"; echo "$url"; return 0; fi
import json, sys, urllib.request
doc = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json", timeout=2))
sys.exit(0 if sum(w["state"] == "ALIVE" for w in doc.get("workers", [])) >= 2 else 1)
EOF
    sleep 0.5
  done
  echo "spark_standalone: the cluster did not come up in 120 s; logs in $DIR" >&2
  stop; return 1
}

stop() {
  for f in "$DIR"/worker1.pid "$DIR"/worker2.pid "$DIR"/master.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  rm -f "$DIR/master.url"
}

demo() {
  local spec="${1:-two_phase}"; shift || true
  local url
  url="$(start)"
  trap stop EXIT
  echo "cluster: $url (one master, two workers; logs in $DIR)"
  "${KCHECK[@]}" check "$spec" "$@" --json >"$DIR/single.json" || true
  local t0=$SECONDS
  "${KCHECK[@]}" check "$spec" "$@" --spark "$url" --json >"$DIR/spark.json" || true
  echo "check on the cluster: $((SECONDS - t0)) s"
  "$PY" - "$DIR/single.json" "$DIR/spark.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def summary(d):
    return (d["distinct_states"], d["exhaustive"],
            {p: (v["status"], v["trace_length"]) for p, v in d["properties"].items()})
sa, sb = summary(a), summary(b)
print(f"single process: {sa[0]:,} distinct states; cluster: {sb[0]:,}")
for p, v in sa[2].items():
    print(f"  {p}: {v[0]}{f' ({v[1]} steps)' if v[1] is not None else ''}"
          f"{'' if sb[2].get(p) == v else f'  DIFFERS on the cluster: {sb[2].get(p)}'}")
print("SAME verdicts, distinct states and trace lengths" if sa == sb else "DIFFERENT")
sys.exit(0 if sa == sb else 1)
EOF
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  demo) shift; demo "$@" ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
