#!/usr/bin/env bash
# Start vLLM's OpenAI-compatible server (installed by ci/vllm/setup.sh) on 127.0.0.1:PORT, in the
# background, serving the tiny random model as "tiny". Returns once /health answers (~40 s).
#
#   ci/vllm/start.sh PORT [-- extra vLLM flags]     e.g. ci/vllm/start.sh 8100 -- --max-num-seqs 4
#
# Knobs (environment): SURGELAB_VLLM_HOME (the install), KV_GB (KV cache GiB, 2), MAX_LEN (max model
# length, 2048), EAGER (1: --enforce-eager, skips torch.compile, ~45 s less at start),
# START_TIMEOUT (seconds to wait for /health, 300).
# The server runs in its own process group; its PID is in $SURGELAB_VLLM_HOME/logs/server-PORT.pid,
# its log in server-PORT.log. On any failure to come up, the group is stopped and the log's tail shown.
# vLLM's engine busy-polls most of one core while it runs: on a 2-core machine the load generator
# shares what is left.
set -euo pipefail
H=${SURGELAB_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/surgelab-vllm}
PORT=${1:?usage: ci/vllm/start.sh PORT [-- extra vLLM flags]}
shift
[[ ${1:-} == "--" ]] && shift
[[ $PORT =~ ^[0-9]+$ ]] || { echo "start.sh: PORT must be a number, got '$PORT'" >&2; exit 2; }
[[ -x $H/venv/bin/python && -s $H/model/config.json ]] || { echo "start.sh: nothing installed in $H; run ci/vllm/setup.sh first" >&2; exit 1; }
PIDFILE=$H/logs/server-$PORT.pid
LOG=$H/logs/server-$PORT.log
URL=http://127.0.0.1:$PORT
TIMEOUT=${START_TIMEOUT:-300}

if [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "start.sh: a vLLM server started here already runs on port $PORT (PID $(cat "$PIDFILE")); ci/vllm/stop.sh $PORT first" >&2
  exit 1
fi
if curl -s -o /dev/null -m 2 "$URL/"; then
  echo "start.sh: something already answers on $URL; pick another port" >&2
  exit 1
fi

flags=(--model "$H/model" --served-model-name tiny --host 127.0.0.1 --port "$PORT"
  --max-model-len "${MAX_LEN:-2048}" --dtype bfloat16)
[[ ${EAGER:-1} == 1 ]] && flags+=(--enforce-eager)

# Offline and loopback only: no hub look-ups, no usage statistics, internal sockets on 127.0.0.1.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_HOST_IP=127.0.0.1 \
  VLLM_CPU_KVCACHE_SPACE=${KV_GB:-2} VLLM_CACHE_ROOT=$H/vllm-cache \
  setsid "$H/venv/bin/python" -m vllm.entrypoints.openai.api_server "${flags[@]}" "$@" \
  >"$LOG" 2>&1 </dev/null &
PID=$!
echo "$PID" >"$PIDFILE"

give_up() {
  echo "start.sh: vLLM on port $PORT $1; last lines of $LOG:" >&2
  { grep -v "DeprecationWarning\|warnings.warn" "$LOG" || true; } | tail -40 >&2
  kill -TERM -- "-$PID" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$PID" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$PID" 2>/dev/null || true
  rm -f "$PIDFILE"
  exit 1
}

started=$SECONDS
while ((SECONDS - started < TIMEOUT)); do
  kill -0 "$PID" 2>/dev/null || give_up "exited during start-up"
  if curl -fsS -o /dev/null -m 2 "$URL/health" 2>/dev/null; then
    echo "vLLM $(curl -fsS -m 2 "$URL/version" 2>/dev/null || echo '?') up on $URL in $((SECONDS - started)) s (PID $PID, model tiny, log $LOG)"
    exit 0
  fi
  sleep 0.5
done
give_up "did not answer /health within $TIMEOUT s"
