"""Do the pinned install sets carry the CUDA, cuDNN and TensorRT that each piece expects (docs/cuda.md)?

    python3 scripts/check_cuda_table.py        # prints the problems; exit 1 if there is any

Standard library only: CI runs it before any venv exists (scripts/check_install_sets.sh), and
tests/test_install_sets.py runs the same functions. Reads the table in docs/cuda.md, the locks
(requirements-gpu.txt for the bot's venv, requirements-vllm.txt for vLLM's) and
requirements/gpu-nvidia.txt (TensorRT: checked by name and version, never installed here).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "cuda.md"
#: The files whose pins make up each venv of the table.
VENV_FILES = {
    "bot": ["requirements-gpu.txt", "requirements/gpu-nvidia.txt"],
    "vllm": ["requirements-vllm.txt"],
}
#: NVIDIA library packages named for their CUDA major (``nvidia-cudnn-cu13``, ``tensorrt-cu13``).
_SUFFIXED = re.compile(
    r"^(nvidia-(cuda-runtime|cuda-nvrtc|cublas|cudnn|cufft|curand|cusolver|cusparse|cusparselt|nccl|nvjitlink"
    r"|nvshmem)|tensorrt(-libs|-bindings)?)-cu(\d+)$"
)
#: CUDA 13 era packages without a suffix whose version starts with the CUDA major itself.
_VERSIONED = {"cuda-toolkit", "cuda-bindings", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cublas",
              "nvidia-nvjitlink", "nvidia-cuda-cupti", "nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm"}  # fmt: skip


def norm(name: str) -> str:
    """PEP 503 name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def major(version: str) -> int:
    return int(version.split(".")[0])


def read_pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file (hashes, markers, comments and extras dropped)."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\#]+)", line)
        if m:
            pins[norm(m.group(1))] = m.group(3)
    return pins


def venv_pins(root: Path = ROOT) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for venv, files in VENV_FILES.items():
        out[venv] = {}
        for f in files:
            out[venv].update(read_pins(root / f))
    return out


def cuda_major_of(name: str, version: str) -> int | None:
    """The CUDA major an NVIDIA library package is built for, or None when the name does not say."""
    name = norm(name)
    m = _SUFFIXED.match(name)
    if m:
        return int(m.group(4))
    if name in _VERSIONED:
        return major(version)
    return None


@dataclass
class Row:
    venv: str
    piece: str
    version: str
    cuda: int
    cudnn: int | None
    tensorrt: int | None
    carried_by: dict[str, str] = field(default_factory=dict)


def _opt_int(cell: str) -> int | None:
    cell = cell.strip().strip("`")
    return None if cell in ("-", "—", "") else int(cell)


def read_table(path: Path = TABLE) -> list[Row]:
    """The rows of the first table in docs/cuda.md whose first cell is a venv of VENV_FILES."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7 or cells[0].strip("`") not in VENV_FILES:
            continue
        piece, _, version = cells[1].strip("`").partition("==")
        carried = {}
        for item in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^\s,`]+", cells[6]):
            n, _, v = item.partition("==")
            carried[norm(n)] = v
        rows.append(Row(cells[0].strip("`"), norm(piece), version, int(cells[3].strip("`")), _opt_int(cells[4]),
                        _opt_int(cells[5]), carried))  # fmt: skip
    return rows


def problems(rows: list[Row], pins: dict[str, dict[str, str]]) -> list[str]:
    """Every way the pins disagree with the table (empty: they agree)."""
    out: list[str] = []
    if not rows:
        return [f"no table rows found in {TABLE.relative_to(ROOT)}"]
    for r in rows:
        have = pins[r.venv]
        where = f"the {r.venv} venv ({', '.join(VENV_FILES[r.venv])})"
        if have.get(r.piece) != r.version:
            out.append(f"{r.piece}: the table says {r.version}, {where} pins {have.get(r.piece, 'nothing')}")
        for name, version in r.carried_by.items():
            if have.get(name) != version:
                out.append(f"{r.piece}: the table names {name}=={version}, {where} pins {have.get(name, 'nothing')}")
            c = cuda_major_of(name, version)
            if c is not None and c != r.cuda:
                out.append(f"{r.piece}: the table names {name}=={version} (CUDA {c}) for a piece that expects "
                           f"CUDA {r.cuda}")  # fmt: skip
        # What the venv really carries (its pins), against what the piece expects.
        if not any(cuda_major_of(n, v) == r.cuda for n, v in have.items()):
            out.append(f"{r.piece} expects CUDA {r.cuda}, but {where} carries no CUDA {r.cuda} library")
        for prefix, want, what in ((f"nvidia-cudnn-cu{r.cuda}", r.cudnn, "cuDNN"),
                                   (f"tensorrt-cu{r.cuda}", r.tensorrt, "TensorRT")):  # fmt: skip
            if want is None:
                continue
            got = have.get(prefix)
            if got is None or major(got) != want:
                others = sorted(f"{n}=={v}" for n, v in have.items() if n.startswith(prefix.rsplit("-cu", 1)[0]))
                out.append(f"{r.piece} expects {what} {want} for CUDA {r.cuda} ({prefix}=={want}.*), but {where} "
                           f"has {others or 'none'}")  # fmt: skip
    # Within a venv: no CUDA major that no piece expects (a stray cu12 library in vLLM's venv, say),
    # one cuDNN major, one TensorRT major, and TensorRT only where a piece expects it.
    for venv, have in pins.items():
        expected = {r.cuda for r in rows if r.venv == venv}
        majors: dict[int, list[str]] = {}
        for n, v in have.items():
            c = cuda_major_of(n, v)
            if c is not None:
                majors.setdefault(c, []).append(f"{n}=={v}")
        for c, names in sorted(majors.items()):
            if c not in expected:
                out.append(f"{venv} venv: CUDA {c} libraries that no piece of the table expects: {sorted(names)}")
        for prefix, what in (("nvidia-cudnn-cu", "cuDNN"), ("tensorrt", "TensorRT")):
            found = {f"{n}=={v}": major(v) for n, v in have.items() if n.startswith(prefix)}
            if len(set(found.values())) > 1:
                out.append(f"{venv} venv: more than one {what} major: {sorted(found)}")
            if prefix == "tensorrt" and found and not any(r.tensorrt for r in rows if r.venv == venv):
                out.append(f"{venv} venv: TensorRT {sorted(found)} but no piece of the table expects it")
    return out


def main() -> int:
    found = problems(read_table(), venv_pins())
    for p in found:
        print(f"CUDA table: {p}", file=sys.stderr)
    if not found:
        rows = read_table()
        print("CUDA table: the pins carry what each piece expects (" + "; ".join(
            f"{r.venv}: {r.piece} {r.version} CUDA {r.cuda}" for r in rows) + ")")  # fmt: skip
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
