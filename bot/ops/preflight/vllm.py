"""vLLM: the command line built from ``[llm]`` (``run_bot.py llm-command``), where the vLLM comes from (its own
venv or the pinned image; never the bot's .venv: it pins its own torch and an older FastAPI, docs/cuda.md), and
the running ``vllm serve``'s flags and release compared with them."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from urllib.parse import urlparse

import httpx

from bot import ROOT_DIR
from bot.config import Config
from bot.ops.preflight.report import FAIL, OK, SKIP, WARN, CheckReport, Probe

#: The vLLM release the bot's ``llm-command`` flags and structured-output requests are written for:
#: requirements/vllm.in, the image tag in deploy/vllm-values.yaml (tests/test_install_sets.py).
VLLM_VERSION = "0.33.0"
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
#: ``scripts/setup.sh --vllm`` makes this venv (requirements-vllm.txt).
VLLM_VENV = ROOT_DIR / ".venv-vllm"


def _port(url: str) -> int:
    parsed = urlparse(url)
    return parsed.port or (443 if parsed.scheme == "https" else 80)


def llm_command(config: Config) -> list[str]:
    """``vllm serve`` for the configured model, built from ``[llm]`` (one source of truth)."""
    llm = config.llm
    host = urlparse(llm.base_url).hostname or "127.0.0.1"
    cmd = ["vllm", "serve", llm.model]
    if host in ("localhost", "127.0.0.1", "::1"):
        cmd += ["--host", "127.0.0.1"]
    cmd += ["--port", str(_port(llm.base_url)),
            "--max-model-len", str(llm.max_model_len),
            "--gpu-memory-utilization", f"{llm.gpu_memory_utilization:g}",
            "--max-num-seqs", str(llm.max_num_seqs)]  # fmt: skip
    if llm.enable_prefix_caching:
        cmd.append("--enable-prefix-caching")
    cmd += ["--structured-outputs-config", json.dumps({"backend": llm.structured_output_backend}, separators=(",", ":"))]
    if llm.kv_cache_dtype != "auto":
        cmd += ["--kv-cache-dtype", llm.kv_cache_dtype]
    if llm.server_enforce_eager:
        cmd.append("--enforce-eager")  # declared escape hatch: CUDA graphs off
    cmd += _revision_flags(config)
    return cmd


def _revision_flags(config: Config) -> list[str]:
    """``--revision`` and ``--tokenizer-revision`` of the commit models.toml pins for ``llm.model`` (none when
    it is not pinned: `run_bot.py check` says so)."""
    from bot.modelfiles.manifest import llm_entry

    try:
        entry = llm_entry(config)
    except Exception:  # noqa: BLE001 - a broken manifest is check's row, not llm-command's crash
        return []
    if entry is None or not entry.revision:
        return []
    return ["--revision", entry.revision, "--tokenizer-revision", entry.revision]


def llm_command_line(config: Config, *, docker: bool = False, venv: Path | None = None) -> str:
    """The command that starts the vLLM the bot is written for: its own venv's ``vllm serve``
    (``scripts/setup.sh --vllm``), or with ``docker`` the pinned container image."""
    return " ".join(shlex.quote(x) for x in vllm_launch(config, docker=docker, venv=venv))

def _shown(path: Path) -> str:
    """A path relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def installed_vllm(venv: Path | None = None) -> str | None:
    """The vLLM version installed in the vLLM venv, or None when there is none."""
    venv = venv or VLLM_VENV
    if not (venv / "bin" / "vllm").exists():
        return None
    for meta in sorted(venv.glob("lib/python3*/site-packages/vllm-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown version"


def vllm_launch(config: Config, *, docker: bool = False, venv: Path | None = None) -> list[str]:
    """``llm_command`` with the vLLM to run it: the venv's ``bin/vllm``, or ``docker run`` of the
    pinned image (its entrypoint is ``vllm serve``; inside the container vLLM listens on every
    address and the port is published on the host's side instead)."""
    llm = config.llm
    cmd = llm_command(config)
    if not docker:
        return [_shown((venv or VLLM_VENV) / "bin" / "vllm"), *cmd[1:]]
    port = str(_port(llm.base_url))
    local = (urlparse(llm.base_url).hostname or "127.0.0.1") in ("localhost", "127.0.0.1", "::1")
    flags = cmd[3:]
    if "--host" in flags:
        i = flags.index("--host")
        flags = flags[:i] + flags[i + 2:]
    hf_home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return ["docker", "run", "--rm", "--gpus", "all", "--ipc=host",
            "-p", f"127.0.0.1:{port}:{port}" if local else f"{port}:{port}",
            "-v", f"{hf_home}:/root/.cache/huggingface", "--env", "HF_TOKEN",
            VLLM_IMAGE, llm.model, *flags]  # fmt: skip


def vllm_server_version(config: Config, timeout_s: float = 3.0) -> str | None:
    """What the server at ``llm.base_url`` says it is (vLLM answers ``GET /version``), or None."""
    parsed = urlparse(config.llm.base_url)
    try:
        r = httpx.get(f"{parsed.scheme}://{parsed.netloc}/version", timeout=timeout_s)
        r.raise_for_status()
        version = r.json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return str(version) if version else None


def _process_origin(pid: int, args: list[str], venv: Path) -> str:
    """Where a running ``vllm serve`` comes from: this checkout's vLLM venv, a container, or elsewhere."""
    exe = next((a for a in args[:3] if Path(a).name == "vllm"), args[0] if args else "?")
    try:
        if Path(exe).resolve().is_relative_to(venv.resolve()):
            return f"{_shown(venv)} (scripts/setup.sh --vllm)"
    except OSError:
        pass
    try:
        here, there = os.stat("/proc/self/root"), os.stat(f"/proc/{pid}/root")
        if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            return f"a container ({exe} inside it)"
    except OSError:
        pass
    return f"{exe} (not this checkout's vLLM venv)"


def vllm_processes() -> list[tuple[int, list[str]]]:
    """(pid, command line) of the ``vllm serve`` processes on this host (from /proc; empty elsewhere)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            args = [a.decode(errors="replace") for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        head = [Path(a).name for a in args[:3]]
        if ("vllm" in head and "serve" in args[:4]) or any("vllm.entrypoints.openai.api_server" in a for a in args[:4]):
            out.append((int(d.name), args))
    return out


def vllm_cmdlines() -> list[list[str]]:
    """Command lines of the ``vllm serve`` processes on this host (from /proc; empty elsewhere)."""
    return [args for _, args in vllm_processes()]


def _flags(args: list[str]) -> dict[str, str | None]:
    flags: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                value, i = args[i + 1], i + 1
            flags[name] = value if (eq or value) else None
        i += 1
    return flags


def vllm_process_row(report: CheckReport, config: Config, cmdlines: list[list[str]] | None = None) -> None:
    """The running vLLM (same host): CUDA graphs on unless declared, and no drift from `llm-command`."""
    llm = config.llm
    if llm.backend == "local":
        return
    port = str(_port(llm.base_url))
    found = [c for c in (vllm_cmdlines() if cmdlines is None else cmdlines) if _flags(c).get("--port", "8000") == port]
    if not found:
        report.add("LLM", "vLLM process", SKIP, f"no `vllm serve` on port {port} of this host (remote, fake or "
                   "local model): its flags cannot be compared with `run_bot.py llm-command`")  # fmt: skip
        return
    running = _flags(found[0])
    wanted = _flags(llm_command(config)[3:])
    eager = "--enforce-eager" in running
    if eager and not llm.server_enforce_eager:
        report.add("LLM", "vLLM process", FAIL, "vLLM runs with --enforce-eager (CUDA graphs OFF: slower decoding) "
                   "but llm.server_enforce_eager = false; restart it with `run_bot.py llm-command`")  # fmt: skip
        return
    drift = [f"{k} {running.get(k) or ('absent' if k not in running else 'set')} (config: {v or 'set'})"
             for k, v in wanted.items() if k not in ("--host", "--enforce-eager") and running.get(k, "absent") != v]
    if drift:
        report.add("LLM", "vLLM process", WARN, "the running vLLM differs from `run_bot.py llm-command`: "
                   + "; ".join(drift))  # fmt: skip
    else:
        report.add("LLM", "vLLM process", OK, f"its flags match `run_bot.py llm-command`; CUDA graphs "
                   f"{'OFF (declared: llm.server_enforce_eager)' if eager else 'on'}")  # fmt: skip


def vllm_source_row(report: CheckReport, config: Config, probe: Probe | None = None, *,
                    processes: list[tuple[int, list[str]]] | None = None, server_version: str | None = None,
                    venv: Path | None = None) -> None:  # fmt: skip
    """``check``: where the vLLM behind ``llm.base_url`` comes from and which release it is. The
    flags of ``llm-command`` and the structured-output requests are written for VLLM_VERSION."""
    llm = config.llm
    if llm.backend == "local":
        return
    venv = venv or VLLM_VENV
    port = str(_port(llm.base_url))
    local = installed_vllm(venv)
    here = (f"{_shown(venv)} holds vLLM {local}" if local else
            f"no {_shown(venv)} here (scripts/setup.sh --vllm, or the image {VLLM_IMAGE})")  # fmt: skip
    if probe is None or not probe.reachable:
        report.add("LLM", "vLLM source", SKIP, f"no server to ask; {here}")
        return
    procs = vllm_processes() if processes is None else processes
    found = [(pid, a) for pid, a in procs if _flags(a).get("--port", "8000") == port]
    # server_version: what GET /version said ("" = nothing); None = ask the server now.
    version = vllm_server_version(config) if server_version is None else (server_version or None)
    if found:
        pid, args = found[0]
        origin = _process_origin(pid, args, venv)
        if version is None and origin.startswith(_shown(venv)):
            version = local
        where = f"this host, pid {pid}: {origin}"
    else:
        where = f"{llm.base_url} (no `vllm serve` of this host on port {port}: remote, a router, or not vLLM)"
    if version is None:
        report.add("LLM", "vLLM source", SKIP, f"{where}; it does not say a vLLM version (GET /version): a fake, "
                   f"a router or another OpenAI-compatible server. {here}")  # fmt: skip
    elif version != VLLM_VERSION:
        report.add("LLM", "vLLM source", WARN, f"{where}: vLLM {version}, but llm-command and the structured "
                   f"requests are written for vLLM {VLLM_VERSION} (requirements-vllm.txt, {VLLM_IMAGE})")  # fmt: skip
    else:
        report.add("LLM", "vLLM source", OK, f"{where}: vLLM {version}, the pinned release")

