#!/usr/bin/env bash
# Lock the install sets: each short input file requirements/<set>.in becomes its lock (every
# package pinned with ==, with sha256 hashes) through uv, pinned in requirements/tools.txt. The
# locks are for Linux x86_64, CPython 3.11 (what setup.sh, CI and deploy/Dockerfile run), whatever
# machine runs this. Never edit a lock by hand: change the .in file, then run this.
#
#   scripts/lock.sh                         re-lock every set, keeping each pin its input still allows
#   scripts/lock.sh --upgrade               re-resolve every set to the newest versions its input allows
#   scripts/lock.sh --upgrade-package NAME  the same for one package (repeatable)
#   scripts/lock.sh --check                 lock into a scratch folder only, touching nothing here: exit 1
#                                           when a set does not resolve or a lock is not what its input
#                                           gives (CI runs this through scripts/check_install_sets.sh)
#
#   set        input                       lock                        constrained by (same versions)
#   cpu        requirements/cpu.in         requirements.txt            -
#   dev        requirements/dev.in         requirements-dev.txt        requirements.txt
#   gpu        requirements/gpu.in         requirements-gpu.txt        requirements.txt
#   local-llm  requirements/local-llm.in   requirements-local-llm.txt  requirements-dev.txt
#   vllm       requirements/vllm.in        requirements-vllm.txt       - (its own venv, its own torch)
#   installer  requirements/installer.in   requirements/installer.txt  - (pip: every venv gets it first)
#
# Only metadata is read (uv reads a wheel's METADATA by HTTP range requests, never the whole wheel;
# llama-cpp-python, an sdist, gets its metadata from its build backend without compiling).
# TensorRT's PyPI packages are stubs that download from NVIDIA's index: requirements/gpu-nvidia.txt,
# checked by name and version (scripts/check_install_sets.sh), never locked here.
set -euo pipefail
cd "$(dirname "$0")/.."

SETS=(
  "cpu requirements/cpu.in requirements.txt -"
  "dev requirements/dev.in requirements-dev.txt requirements.txt"
  "gpu requirements/gpu.in requirements-gpu.txt requirements.txt"
  "local-llm requirements/local-llm.in requirements-local-llm.txt requirements-dev.txt"
  "vllm requirements/vllm.in requirements-vllm.txt -"
  "installer requirements/installer.in requirements/installer.txt -"
)
PLATFORM=(--python-version 3.11 --python-platform x86_64-manylinux_2_28)

check=0
print_uv=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --print-uv) print_uv=1 ;;  # install the pinned uv if needed and print its path (check_install_sets.sh)
    --upgrade) extra+=(--upgrade) ;;
    --upgrade-package) extra+=(--upgrade-package "$2"); shift ;;
    *) echo "usage: scripts/lock.sh [--check | --upgrade | --upgrade-package NAME ... | --print-uv]" >&2; exit 2 ;;
  esac
  shift
done

# The lock tool itself, pinned with hashes, in a venv of its own (never the bot's .venv).
uv_version=$(sed -n 's/^uv==\([0-9][0-9.]*\).*/\1/p' requirements/tools.txt)
tools="${VOICE_BOT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/voice-bot-tools}/uv-$uv_version"
uv="$tools/bin/uv"
if ! "$uv" --version 2>/dev/null | grep -qx "uv $uv_version.*"; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r requirements/installer.txt >&2
  "$tools/bin/pip" install -q --disable-pip-version-check --require-hashes -r requirements/tools.txt >&2
fi
if [ "$print_uv" = 1 ]; then
  echo "$uv"
  exit
fi

lock_all() {  # in the current directory: every set, in order (a set's constraint is locked before it)
  local name in out constraint status=0
  for s in "${SETS[@]}"; do
    read -r name in out constraint <<<"$s"
    local args=(pip compile --quiet --no-config --generate-hashes "${PLATFORM[@]}" "${extra[@]}" "$in" -o "$out")
    [ "$constraint" = - ] || args+=(-c "$constraint")
    if UV_CUSTOM_COMPILE_COMMAND="scripts/lock.sh" UV_PYTHON_DOWNLOADS=never "$uv" "${args[@]}"; then
      echo "$name: resolves ($in -> $out, $(grep -c '^[A-Za-z0-9]' "$out") packages)"
    else
      echo "$name: DOES NOT RESOLVE ($in): see uv's message above" >&2
      status=1
    fi
  done
  return $status
}

if [ "$check" = 0 ]; then
  lock_all
  exit
fi

# --check: the same locking in a scratch copy (the committed locks are uv's preferences there, so
# an unchanged input gives the same pins), then compare pins with the committed locks.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/requirements"
cp requirements/*.in "$scratch/requirements/"
for s in "${SETS[@]}"; do
  read -r _ _ out _ <<<"$s"
  [ -f "$out" ] && cp "$out" "$scratch/$out"
done
status=0
(cd "$scratch" && lock_all) || status=1
pins() {  # name==version per line, names normalized (PEP 503), extras dropped
  grep -E '^[A-Za-z0-9]' "$1" | sed 's/ .*//; s/\[[^]]*\]//' \
    | awk -F'==' '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | sort
}
for s in "${SETS[@]}"; do
  read -r name in out _ <<<"$s"
  [ -f "$scratch/$out" ] || continue
  if [ ! -f "$out" ]; then
    echo "$name: $out is missing: run scripts/lock.sh" >&2
    status=1
  elif ! diff <(pins "$out") <(pins "$scratch/$out") >"$scratch/pins.diff"; then
    echo "$name: $out is not what $in gives (< committed, > from $in): run scripts/lock.sh" >&2
    cat "$scratch/pins.diff" >&2
    status=1
  elif ! cmp -s "$out" "$scratch/$out"; then
    echo "$name: same pins, other hashes or comments than a fresh lock (new files on the index?): scripts/lock.sh refreshes them"
  fi
done
exit $status
