#!/usr/bin/env bash
# Stop the vLLM server that ci/vllm/start.sh PORT started: SIGTERM to its process group (the API
# server, its engine core and worker), SIGKILL after 15 s. Only the PID recorded by start.sh is used.
set -euo pipefail
H=${SURGELAB_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/surgelab-vllm}
PORT=${1:?usage: ci/vllm/stop.sh PORT}
PIDFILE=$H/logs/server-$PORT.pid
[[ -f $PIDFILE ]] || { echo "no vLLM server recorded for port $PORT"; exit 0; }
PID=$(cat "$PIDFILE")
if kill -0 "$PID" 2>/dev/null; then
  kill -TERM -- "-$PID" 2>/dev/null || kill -TERM "$PID" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$PID" 2>/dev/null; then
    echo "vLLM (PID $PID) ignored SIGTERM for 15 s: SIGKILL" >&2
    kill -KILL -- "-$PID" 2>/dev/null || kill -KILL "$PID" 2>/dev/null || true
  fi
fi
# Engine children are in the same group; wait (bounded) until none is left.
for _ in $(seq 1 20); do
  pgrep -g "$PID" >/dev/null 2>&1 || break
  sleep 0.25
done
pgrep -g "$PID" >/dev/null 2>&1 && kill -KILL -- "-$PID" 2>/dev/null
rm -f "$PIDFILE"
echo "stopped vLLM on port $PORT (PID $PID)"
