#!/usr/bin/env bash
# CI (.ci/run, before the tests): does every install set resolve for Linux x86_64 / CPython 3.11?
# Exit 1 when one does not, or when a lock is not what its input file gives.
#   1. scripts/lock.sh --check: each requirements/<set>.in (CPU, dev, GPU, local LLM, vLLM) locked
#      again in a scratch copy with the pinned uv; the pins must equal the committed lock's.
#   2. The GPU and vLLM locks, as files, resolved by uv as `pip install --dry-run -r` would (nothing
#      installed, into an empty CPython 3.11 venv, hashes required): they cannot be installed here.
#   3. NVIDIA's stub packages (requirements/gpu-nvidia.txt: TensorRT) by name and version against
#      docs/cuda.md (scripts/check_cuda_table.py), and found on the index, never installed.
# Only metadata is read: uv reads a wheel's METADATA with HTTP range requests (no torch, CUDA or
# vLLM wheel is downloaded); the sdists kiwipiepy-model (87 MB) and llama-cpp-python (67 MB) are
# downloaded to read theirs (llama-cpp-python's through its build backend, without compiling).
# uv's cache is thrown away at the end: the index here sends no cache headers, so a kept cache
# would only grow by those sdists on every run. Measured here: 23 s (50 s with the first install of uv).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
uv=$(scripts/lock.sh --print-uv)
UV_CACHE_DIR=$(mktemp -d)
export UV_CACHE_DIR UV_PYTHON_DOWNLOADS=never
trap 'rm -rf "$UV_CACHE_DIR"' EXIT
status=0

echo "== install sets: each input re-locked (scripts/lock.sh --check)"
scripts/lock.sh --check || status=1

echo "== the GPU and vLLM locks as pip would install them (dry run, Linux x86_64, CPython 3.11)"
"$uv" venv --quiet --no-config --python 3.11 "$UV_CACHE_DIR/empty-venv"
for lock in requirements-gpu.txt requirements-vllm.txt; do
  if out=$("$uv" pip install --dry-run --no-config --require-hashes --python "$UV_CACHE_DIR/empty-venv/bin/python" \
             --python-platform x86_64-manylinux_2_28 -r "$lock" 2>&1); then
    echo "$lock: resolves ($(grep -o 'Would install [0-9]* packages' <<<"$out"))"
  else
    echo "$out" >&2
    echo "$lock: DOES NOT RESOLVE" >&2
    status=1
  fi
done

echo "== NVIDIA's stub packages: checked by name and version, not installed"
python3 scripts/check_cuda_table.py || status=1
while read -r req; do
  name=${req%%==*} version=${req#*==}
  # The stub itself and the two packages it pulls from NVIDIA's index at install time.
  for pkg in "$name" "$name-libs" "$name-bindings"; do
    if "$uv" pip compile --quiet --no-config --no-deps --no-header --python-version 3.11 \
         --python-platform x86_64-manylinux_2_28 - -o /dev/null <<<"$pkg==$version"; then
      echo "$pkg==$version: on the index"
    else
      echo "$pkg==$version: NOT FOUND for Linux x86_64 / CPython 3.11 (requirements/gpu-nvidia.txt)" >&2
      status=1
    fi
  done
done < <(grep -E '^[A-Za-z0-9]' requirements/gpu-nvidia.txt | sed 's/[[:space:]#].*//')

if [ "$status" = 0 ]; then
  echo "install sets: all resolve ($((SECONDS - t0)) s)"
else
  echo "install sets: FAILED ($((SECONDS - t0)) s)" >&2
fi
exit $status
