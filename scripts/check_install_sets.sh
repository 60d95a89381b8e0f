#!/usr/bin/env bash
# CI (.ci/run, before the tests): does every install set resolve for Linux x86_64 / CPython 3.11, with
# the installer that scripts/setup.sh runs? Exit 1 when one does not, or when a lock is not what its
# input file gives.
#   1. scripts/lock.sh --check: each requirements/<set>.in (CPU, dev, GPU, local LLM, vLLM, installer)
#      locked again in a scratch copy with the pinned uv; the pins must equal the committed lock's.
#   2. Every lock resolved by the installer itself: the pip of requirements/installer.txt (the version
#      setup.sh puts into every venv first), `pip install --dry-run --require-hashes`, with the flags
#      setup.sh installs that set with, into an empty venv of this CPython 3.11. Resolving with another
#      tool than the one that installs is how a lock that pip 23.2.1 refuses passed CI once. Its own
#      test (--guard, run by .ci/run beside the suite): that lock (tests/fixtures/) is refused by this
#      step run with pip 23.2.1.
#   3. NVIDIA's stub packages (requirements/gpu-nvidia.txt: TensorRT) by name and version against
#      docs/cuda.md (scripts/check_cuda_table.py), and found on the index, never installed.
# Only metadata is read. In hash-checking mode pip downloads every whole wheel, even for --dry-run (its
# metadata-only path is off then: gigabytes for the vLLM set), so step 2 runs pip's own code with one
# change: metadata comes by HTTP range requests (pip's `--use-feature=fast-deps`) after pip's own
# hash-mode rules have judged the requirement (every one pinned with ==, with its hashes). The files'
# digests are checked by the real install. The sdists kiwipiepy-model (87 MB) and llama-cpp-python
# (67 MB) are downloaded to read their metadata (llama-cpp-python's through its build backend, without
# compiling). Caches are thrown away at the end. Measured here: 75 s (the five locks at once, beside uv).
#
#   scripts/check_install_sets.sh                      steps 1 to 3
#   scripts/check_install_sets.sh --lock FILE [--pip-python PY]   step 2 for one lock file only, with the
#                                      pinned pip, or with the pip of the Python PY (an old one)
#   scripts/check_install_sets.sh --guard              step 2's own test (above): exit 1 unless refused
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
only_lock=
pip_python=
guard_only=
while [ $# -gt 0 ]; do
  case "$1" in
    --lock) only_lock=$2; shift ;;
    --pip-python) pip_python=$2; shift ;;
    --guard) guard_only=1 ;;
    *) echo "usage: scripts/check_install_sets.sh [--lock FILE [--pip-python PYTHON] | --guard]" >&2; exit 2 ;;
  esac
  shift
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0

# The installer: the pip of requirements/installer.txt in a venv of its own (made as setup.sh makes
# every venv), kept in the tools cache beside the pinned uv.
pip_version=$(sed -n 's/^pip==\([0-9][0-9.]*\).*/\1/p' requirements/installer.txt)
if [ -n "$guard_only" ]; then  # --guard (below) runs step 2 with pip 23.2.1, the pip CPython 3.11.7's venv ships
  python3 -m venv "$scratch/pip23"
  if [ "$("$scratch/pip23/bin/python" -m pip --version | cut -d' ' -f2)" != 23.2.1 ]; then
    "$scratch/pip23/bin/python" -m pip install -q --disable-pip-version-check pip==23.2.1
  fi
  pip_python=$scratch/pip23/bin/python
fi
if [ -z "$pip_python" ]; then
  tools="${VOICE_BOT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/voice-bot-tools}/pip-$pip_version"
  if [ "$("$tools/bin/python" -m pip --version 2>/dev/null | cut -d' ' -f2)" != "$pip_version" ]; then
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r requirements/installer.txt >&2
  fi
  pip_python=$tools/bin/python
fi
py_version=$("$pip_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$py_version" != 3.11 ]; then
  echo "$pip_python is Python $py_version: the locks are for CPython 3.11 (what setup.sh and CI run)" >&2
  exit 1
fi
used_pip=$("$pip_python" -m pip --version | cut -d' ' -f2)

# pip's own command line, with its metadata-only path allowed in hash-checking mode (see above).
cat > "$scratch/pip_dry_run.py" <<'PY'
import sys

from pip._internal.operations import prepare

_Preparer = prepare.RequirementPreparer
_fetch = _Preparer._fetch_metadata_only


def _metadata_only(self, req):
    if not self.require_hashes:
        return _fetch(self, req)
    self._get_linked_req_hashes(req)  # pip's hash-mode rules: HashUnpinned, missing hashes, VCS, directories
    self.require_hashes = False
    try:
        return _fetch(self, req)
    finally:
        self.require_hashes = True


_Preparer._fetch_metadata_only = _metadata_only

from pip._internal.cli.main import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
PY

without() {  # a lock without one package's entry (the same as setup.sh's)
  awk -v name="$1" '
    index($0, name "==") == 1 { skip = 1; next }
    skip && /^[ \t]/ { next }
    { skip = 0; print }' "$2"
}

# resolve LOCK [PIP FLAGS...]: the dry run of one lock, as setup.sh installs it; exit 1 with pip's message.
resolve() {
  local lock=$1 name
  shift
  name=$(basename "$lock" .txt)
  local work="$scratch/$name"
  mkdir -p "$work"
  # Any lock named like the GPU one installs as setup.sh --gpu does: without the CPU onnxruntime, no deps.
  if [[ "$name" == requirements-gpu* ]]; then
    without onnxruntime "$lock" > "$work/req.txt"
    set -- --no-deps "$@"
  else
    cp "$lock" "$work/req.txt"
  fi
  # Nothing from the environment's or the machine's pip configuration: PyPI, as on a fresh host.
  if out=$(env $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/-u \1/p') PIP_CONFIG_FILE=/dev/null \
             PIP_CACHE_DIR="$work/cache" "$pip_python" "$scratch/pip_dry_run.py" install --dry-run \
             --ignore-installed --require-hashes --use-feature=fast-deps --disable-pip-version-check \
             --progress-bar off "$@" -r "$work/req.txt" 2>&1); then
    echo "$lock: resolves with pip $used_pip ($(grep '^Would install' <<<"$out" | wc -w | awk '{ print $1 - 2 }') packages)"
  else
    grep -v "^WARNING: Location\|^  Obtaining dependency\|^Collecting\|^  Downloading\|^Requirement already" <<<"$out" >&2 || true
    echo "$lock: DOES NOT RESOLVE with pip $used_pip (what setup.sh installs with): see pip's message above" >&2
    return 1
  fi
}

# --guard, the check's own test: the vLLM lock that pip 23.2.1 refused (an extra of a dependency counted as
# unpinned) while uv took it must be refused by step 2 when run with pip 23.2.1, the pip CPython 3.11.7's
# venv ships. A step that took it would pass any lock. It waits ~160 s on PyPI: .ci/run runs it beside the suite.
refused_lock=tests/fixtures/requirements-vllm.pip23-refused.txt
refusal_guard() {
  local out
  if out=$(resolve "$refused_lock" 2>&1); then
    echo "$refused_lock: RESOLVED with pip 23.2.1, which refuses it: this check would pass a broken lock" >&2
    return 1
  fi
  if ! grep -q "all requirements must have their versions pinned with ==" <<<"$out" \
     || ! grep -qF "nvidia-cutlass-dsl[cu13]>=4.8.0" <<<"$out"; then
    echo "$out" | tail -20 >&2
    echo "$refused_lock: pip 23.2.1 refused it for another reason than the unpinned extra (above)" >&2
    return 1
  fi
  echo "$refused_lock: refused with pip 23.2.1 as it should be (nvidia-cutlass-dsl[cu13]>=4.8.0 unpinned)"
}

if [ -n "$guard_only" ]; then
  refusal_guard
  exit
fi
if [ -n "$only_lock" ]; then
  resolve "$only_lock"
  exit
fi

echo "== every lock, resolved by the installer setup.sh runs: pip $used_pip (dry run, metadata only)"
locks=(requirements.txt requirements-dev.txt requirements-gpu.txt requirements-local-llm.txt requirements-vllm.txt)
pids=()
for lock in "${locks[@]}"; do  # at once: the time goes to the network
  resolve "$lock" > "$scratch/${lock%.txt}.out" 2>&1 &
  pids+=($!)
done

uv=$(scripts/lock.sh --print-uv)
UV_CACHE_DIR="$scratch/uv-cache"
export UV_CACHE_DIR UV_PYTHON_DOWNLOADS=never

echo "== install sets: each input re-locked (scripts/lock.sh --check)"
scripts/lock.sh --check || status=1

for i in "${!locks[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$scratch/${locks[$i]%.txt}.out"
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
