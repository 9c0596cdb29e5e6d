#!/usr/bin/env bash
# CI stage: surgelab against vLLM's real server. Install (cached: seconds; fresh: ~3 min), start on a
# free loopback port (~40 s), run tests/realengine against it (~1.5 min), stop it (always, even when
# a check fails or the stage is interrupted). Run it after the unit suite: vLLM's engine busy-polls
# most of a core, which would disturb timing tests running beside it.
#
#   ci/vllm/check.sh [extra pytest args]       with the project's venv active (pytest, surgelab)
#
# SURGELAB_VLLM_HOME: the install (default ~/.cache/surgelab-vllm); SURGELAB_VLLM_PORT: fixed port.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=ci/vllm
stage_start=$SECONDS
elapsed() { echo "$((SECONDS - stage_start)) s"; }

"$HERE/setup.sh"
installed=$SECONDS

PORT=${SURGELAB_VLLM_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
trap '"$HERE/stop.sh" "$PORT" || true' EXIT
trap 'exit 130' INT TERM
"$HERE/start.sh" "$PORT"
started=$SECONDS

status=0
SURGELAB_VLLM_URL=http://127.0.0.1:$PORT python -m pytest tests/realengine -q -s -p no:cacheprovider "$@" || status=$?
echo "vLLM stage: install $((installed - stage_start)) s, start $((started - installed)) s, checks $((SECONDS - started)) s, $(elapsed) in all"
exit "$status"
