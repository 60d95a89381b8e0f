"""The install sets: the CUDA table of docs/cuda.md against the locks, vLLM kept apart from the bot's sets,
the locks' shape, setup.sh's onnxruntime handling, llm-command and check's "vLLM source" row.

Whether every set resolves is scripts/check_install_sets.sh's job (run by .ci/run, against PyPI), and so is
its own test (--guard: the lock pip 23.2.1 once refused, refused again with that pip).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from bot.config import load_config
from bot.ops import preflight as check
from bot.ops.preflight import OK, SKIP, WARN, CheckReport, Probe
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("check_cuda_table", ROOT / "scripts" / "check_cuda_table.py")
cuda_table = sys.modules.setdefault("check_cuda_table", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(cuda_table)

LOCKS = {"cpu": "requirements.txt", "dev": "requirements-dev.txt", "gpu": "requirements-gpu.txt",
         "local-llm": "requirements-local-llm.txt", "vllm": "requirements-vllm.txt"}  # fmt: skip


def pins(name: str) -> dict[str, str]:
    return cuda_table.read_pins(ROOT / name)


# --- the CUDA table ---------------------------------------------------------------------------


def test_the_pins_carry_what_each_piece_expects():
    rows = cuda_table.read_table()
    assert {(r.venv, r.piece) for r in rows} >= {("bot", "onnxruntime-gpu"), ("bot", "ctranslate2"),
                                                 ("vllm", "vllm"), ("vllm", "torch")}  # fmt: skip
    assert cuda_table.problems(rows, cuda_table.venv_pins()) == []


def test_the_table_says_what_the_wheels_were_found_to_need():
    rows = {r.piece: r for r in cuda_table.read_table()}
    ort, ct2, vllm = rows["onnxruntime-gpu"], rows["ctranslate2"], rows["vllm"]
    assert (ort.cuda, ort.cudnn, ort.tensorrt) == (13, 9, 10)  # libcudart.so.13, libcudnn.so.9, libnvinfer.so.10
    assert (ct2.cuda, ct2.cudnn, ct2.tensorrt) == (12, None, None)  # libcublas.so.12, no cuDNN
    assert (vllm.cuda, vllm.cudnn, vllm.tensorrt) == (13, 9, None)  # torch 2.14.0: cuda-toolkit 13.0.3


def _mutated(venv: str, drop: tuple[str, ...] = (), **add: str) -> dict[str, dict[str, str]]:
    p = copy.deepcopy(cuda_table.venv_pins())
    for name in drop:
        p[venv].pop(name)
    p[venv].update({k.replace("_", "-"): v for k, v in add.items()})
    return p


@pytest.mark.parametrize("venv, drop, add, says", [
    # The old GPU set's TensorRT: built for CUDA 12, which this onnxruntime-gpu no longer uses.
    ("bot", ("tensorrt-cu13",), {"tensorrt_cu12": "10.9.0.34"},
     "expects TensorRT 10 for CUDA 13 (tensorrt-cu13==10.*), but the bot venv"),
    ("bot", (), {"tensorrt_cu13": "11.4.0.106"}, "expects TensorRT 10 for CUDA 13"),
    ("bot", (), {"nvidia_cudnn_cu13": "8.9.7.29"}, "expects cuDNN 9 for CUDA 13"),
    ("bot", (), {"onnxruntime_gpu": "1.22.0"}, "onnxruntime-gpu: the table says 1.31.1"),
    ("bot", ("nvidia-cublas-cu12", "nvidia-cuda-nvrtc-cu12"), {}, "ctranslate2 expects CUDA 12, but the bot venv"),
    ("vllm", (), {"nvidia_cudnn_cu12": "9.10.2.21"}, "CUDA 12 libraries that no piece of the table expects"),
    ("vllm", (), {"tensorrt_cu13": "10.16.1.11"}, "TensorRT ['tensorrt-cu13==10.16.1.11'] but no piece"),
    ("vllm", (), {"torch": "2.13.0"}, "torch: the table says 2.14.0"),
])  # fmt: skip
def test_a_pin_that_disagrees_with_the_table_is_named(venv, drop, add, says):
    found = cuda_table.problems(cuda_table.read_table(), _mutated(venv, drop, **add))
    assert any(says in p for p in found), found


def test_a_table_row_that_disagrees_with_its_own_majors_is_named():
    rows = cuda_table.read_table()
    ort = next(r for r in rows if r.piece == "onnxruntime-gpu")
    ort.cuda = 12  # e.g. someone "fixes" the table back to CUDA 12 without changing the pins
    found = cuda_table.problems(rows, cuda_table.venv_pins())
    assert any("nvidia-cuda-runtime==13.5.37 (CUDA 13) for a piece that expects CUDA 12" in p for p in found), found
    assert any("onnxruntime-gpu expects cuDNN 9 for CUDA 12" in p for p in found), found


def test_the_cuda_major_of_a_package_comes_from_its_name_or_version():
    assert cuda_table.cuda_major_of("nvidia-cudnn-cu13", "9.28.1.4") == 13
    assert cuda_table.cuda_major_of("nvidia_cublas_cu12", "12.9.3.13") == 12
    assert cuda_table.cuda_major_of("tensorrt-cu13", "10.16.1.11") == 13
    assert cuda_table.cuda_major_of("cuda-toolkit", "13.0.3.0") == 13
    assert cuda_table.cuda_major_of("nvidia-cufft", "12.5.0.14") is None  # its version is not CUDA's
    assert cuda_table.cuda_major_of("nvidia-ml-py", "13.615.71") is None


def test_the_ci_script_of_the_table_passes_as_run_by_ci():
    out = subprocess.run(["python3", str(ROOT / "scripts" / "check_cuda_table.py")], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "onnxruntime-gpu 1.31.1 CUDA 13" in out.stdout


# --- the locks --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LOCKS.values()))
def test_every_lock_pins_every_package_with_hashes(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert "scripts/lock.sh" in text.splitlines()[1], "made by scripts/lock.sh"
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert len(entries) > 20
    for e in entries:
        assert re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*==\S+ \\\n", e), e[:200]
        assert "--hash=sha256:" in e, e[:200]


def test_every_set_has_its_input_and_lock_and_ci_resolves_them_before_the_tests():
    lock_sh = (ROOT / "scripts" / "lock.sh").read_text(encoding="utf-8")
    for name, lock in LOCKS.items():
        assert (ROOT / "requirements" / f"{name}.in").is_file()
        assert f'"{name} requirements/{name}.in {lock} ' in lock_sh
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("scripts/check_install_sets.sh") < ci.index("scripts/setup.sh --dev && .venv/bin/pytest")
    tools = (ROOT / "requirements" / "tools.txt").read_text(encoding="utf-8")
    assert re.search(r"^uv==\d+\.\d+\.\d+ \\$", tools, re.M) and "--hash=sha256:" in tools


def test_the_cpu_set_keeps_the_versions_the_suite_ran_on():
    cpu = pins("requirements.txt")
    top = cuda_table.read_pins(ROOT / "requirements" / "cpu.in")
    assert top["fastapi"] == "0.165.0" and top["pipecat-ai"] == "1.14.0" and top["onnxruntime"] == "1.32.0"
    for name, version in top.items():
        assert cpu[name] == version, name
    # The staff desk's packages are in both bot sets.
    for name in ("jinja2", "markupsafe", "itsdangerous", "argon2-cffi", "argon2-cffi-bindings"):
        assert name in top and pins("requirements-gpu.txt")[name] == cpu[name]


@pytest.mark.parametrize("other", ["requirements-dev.txt", "requirements-gpu.txt", "requirements-local-llm.txt"])
def test_the_bot_sets_share_the_cpu_sets_versions(other):
    cpu, theirs = pins("requirements.txt"), pins(other)
    differ = {n: (v, theirs[n]) for n, v in cpu.items() if n in theirs and theirs[n] != v}
    assert differ == {}
    if other != "requirements-local-llm.txt":
        assert set(cpu) <= set(theirs), set(cpu) - set(theirs)


def test_vllm_is_in_its_own_set_and_in_none_of_the_bots():
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-gpu.txt", "requirements-local-llm.txt"):
        p = pins(name)
        assert "vllm" not in p and "torch" not in p, name
    vllm = pins("requirements-vllm.txt")
    assert vllm["vllm"] == check.VLLM_VERSION and vllm["torch"] == "2.14.0"
    # The conflict that made the old GPU set unresolvable: vLLM's FastAPI is not the bot's.
    assert vllm["fastapi"] != pins("requirements-gpu.txt")["fastapi"]


def test_tensorrt_is_checked_by_name_and_version_not_locked():
    nvidia = cuda_table.read_pins(ROOT / "requirements" / "gpu-nvidia.txt")
    assert list(nvidia) == ["tensorrt-cu13"]
    assert not any(n.startswith("tensorrt") for n in pins("requirements-gpu.txt"))


def test_the_vllm_release_is_the_same_everywhere():
    v = check.VLLM_VERSION
    assert cuda_table.read_pins(ROOT / "requirements" / "vllm.in") == {"vllm": v}
    values = (ROOT / "deploy" / "vllm-values.yaml").read_text(encoding="utf-8")
    assert re.search(r'repository: "vllm/vllm-openai"\s*\n\s*tag: "v' + re.escape(v) + '"', values)
    assert check.VLLM_IMAGE == f"vllm/vllm-openai:v{v}"
    for doc in ("docs/production.md", "docs/cuda.md", "deploy/Dockerfile"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "vllm-openai:latest" not in text and f"vllm/vllm-openai:v{v}" in text, doc


def test_the_bots_image_installs_the_gpu_set_as_setup_does():
    docker = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    assert "grep -v" not in docker and "scripts/setup.sh --gpu --no-models" in docker
    base = re.search(r"^FROM nvidia/cuda:(\d+)\.", docker, re.M)
    ort = next(r for r in cuda_table.read_table() if r.piece == "onnxruntime-gpu")
    assert base and int(base.group(1)) == ort.cuda


def test_setup_installs_the_gpu_lock_without_the_cpu_onnxruntime(tmp_path):
    # setup.sh --gpu installs the lock less the CPU onnxruntime (pipecat-ai's dependency), --no-deps.
    script = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    func = re.search(r"^without\(\) \{.*?^\}$", script, re.S | re.M).group(0)
    out = subprocess.run(["bash", "-c", f"{func}\nwithout onnxruntime requirements-gpu.txt"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    (tmp_path / "req.txt").write_text(out, encoding="utf-8")
    left = cuda_table.read_pins(tmp_path / "req.txt")
    gpu = pins("requirements-gpu.txt")
    assert "onnxruntime" not in left and left["onnxruntime-gpu"] == "1.31.1"
    assert left == {n: v for n, v in gpu.items() if n != "onnxruntime"}
    assert "--no-deps --require-hashes -r <(without onnxruntime" in script


# --- llm-command and the "vLLM source" row ----------------------------------------------------


def test_llm_command_runs_the_vllm_of_its_own_venv_or_the_pinned_image(tmp_path):
    cfg = load_config("config.gpu.toml")
    bare = check.llm_command(cfg)
    venv = check.vllm_launch(cfg, venv=tmp_path / ".venv-vllm")
    assert venv == [str(tmp_path / ".venv-vllm" / "bin" / "vllm"), *bare[1:]]
    docker = check.vllm_launch(cfg, docker=True)
    i = docker.index(check.VLLM_IMAGE)
    assert docker[:2] == ["docker", "run"] and "--gpus" in docker and "127.0.0.1:8000:8000" in docker
    flags = list(bare[3:])
    h = flags.index("--host")
    del flags[h:h + 2]  # inside the container vLLM listens on every address; the host publishes 127.0.0.1
    assert docker[i + 1:] == [cfg.llm.model, *flags]
    assert "vllm serve" in check.llm_command_line(cfg)


def test_run_bot_llm_command_prints_the_venvs_vllm_or_docker():
    def run(*args):
        out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "run_bot.py"), "llm-command",
                              "--config", "config.gpu.toml", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv")
    assert ".venv-vllm/bin/vllm serve Qwen/Qwen3.5-35B-A3B-FP8" in run()
    assert f"{check.VLLM_IMAGE} Qwen/Qwen3.5-35B-A3B-FP8 --port 8000" in run("--docker")


def _source_row(tmp_path, **kw):
    report = CheckReport()
    kw.setdefault("venv", tmp_path / ".venv-vllm")
    check.vllm_source_row(report, load_config("config.gpu.toml"), **kw)
    return report.rows[0]


def _fake_venv(tmp_path, version="0.33.0"):
    venv = tmp_path / ".venv-vllm"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    meta = venv / "lib" / "python3.11" / "site-packages" / f"vllm-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return venv


def test_check_says_a_local_vllm_comes_from_its_venv_and_is_the_pinned_release(tmp_path):
    venv = _fake_venv(tmp_path)
    assert check.installed_vllm(venv) == "0.33.0"
    args = [str(venv / "bin" / "python"), str(venv / "bin" / "vllm"), "serve", "Qwen/Qwen3.5-35B-A3B-FP8",
            "--port", "8000"]  # fmt: skip
    row = _source_row(tmp_path, probe=Probe(reachable=True), processes=[(os.getpid(), args)], server_version="")
    assert row.status == OK and f"pid {os.getpid()}" in row.detail and "scripts/setup.sh --vllm" in row.detail
    assert "vLLM 0.33.0" in row.detail


def test_check_warns_about_another_vllm_release_and_skips_a_server_that_does_not_say(tmp_path):
    other = _source_row(tmp_path, probe=Probe(reachable=True), processes=[], server_version="0.31.2")
    assert other.status == WARN and "vLLM 0.31.2" in other.detail and "no `vllm serve` of this host" in other.detail
    fake = _source_row(tmp_path, probe=Probe(reachable=True), processes=[], server_version="")
    assert fake.status == SKIP and "GET /version" in fake.detail and "scripts/setup.sh --vllm" in fake.detail
    down = _source_row(tmp_path, probe=Probe(error="refused"), processes=[])
    assert down.status == SKIP and "no server" in down.detail


# --- one installer: the pip setup.sh puts into every venv is the pip CI resolves with ---------------

OLD_VLLM_LOCK = "tests/fixtures/requirements-vllm.pip23-refused.txt"  # requirements-vllm.txt as pip 23.2.1 met it


def _installer_version() -> str:
    text = (ROOT / "requirements" / "installer.txt").read_text(encoding="utf-8")
    m = re.search(r"^pip==(\d+(?:\.\d+)+) \\$", text, re.M)
    assert m and "--hash=sha256:" in text, "requirements/installer.txt pins pip with its hashes"
    return m.group(1)


def test_every_venv_gets_the_pinned_installer_before_any_lock():
    assert tuple(int(x) for x in _installer_version().split(".")) >= (26, 3)  # 23.2.1 refuses the vLLM lock
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    body = setup[setup.index('if [ "$bot" = 1 ]'):]
    for venv in (".venv", ".venv-vllm"):
        first_install = body.index(f"{venv}/bin/pip install")
        assert body.index(f"venv_with_installer {venv}\n") < first_install, venv
    assert "--require-hashes -r requirements/installer.txt" in setup
    check = (ROOT / "scripts" / "check_install_sets.sh").read_text(encoding="utf-8")
    assert "requirements/installer.txt" in check and "uv\" pip install --dry-run" not in check
    assert '"installer requirements/installer.in requirements/installer.txt -"' in \
        (ROOT / "scripts" / "lock.sh").read_text(encoding="utf-8")


def test_the_check_guards_itself_with_the_lock_pip_23_refused():
    # The break CI missed: Python 3.11.7's venv ships pip 23.2.1, which refused requirements-vllm.txt in
    # hash-checking mode (an extra of a dependency counted as unpinned); uv, which CI resolved with, took it.
    # `check_install_sets.sh --guard` runs the check with pip 23.2.1 on that lock and fails unless it is refused
    # for that extra; .ci/run runs it beside the suite (~160 s of PyPI's time, which held a worker here).
    assert "nvidia-cudnn-frontend==1.32.0" in (ROOT / OLD_VLLM_LOCK).read_text(encoding="utf-8")
    check = (ROOT / "scripts" / "check_install_sets.sh").read_text(encoding="utf-8")
    assert f"refused_lock={OLD_VLLM_LOCK}\n" in check and "nvidia-cutlass-dsl[cu13]>=4.8.0" in check
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    started, waited = ci.index("scripts/check_install_sets.sh --guard"), ci.index('wait "$guard"')
    assert started < ci.index("scripts/setup.sh --dev && .venv/bin/pytest") < waited
