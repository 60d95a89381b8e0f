"""``run_bot.py serve --workers N``: N worker processes on one machine, one port each.

Worker ``i`` is ``run_bot.py serve`` with ``server.port = port + i``, ``server.admin_port = admin_port + i``
and ``records.worker =
<name>-i`` (``<name>`` is ``records.worker`` or the host name), the same ``--config`` and ``--set``
items otherwise; each loads its own models once. Put a proxy in front (``deploy/nginx.conf``: plain
round-robin, WebSocket upgrade; no sticky sessions needed: see ``bot/line/admission.py``), and give them a
shared records database (PostgreSQL; SQLite works on one machine) and a line limit
(``server.line_max_calls``). On a GPU they share one vLLM server by ``llm.base_url``; with
``llm.backend = "local"`` this process starts the one llama.cpp server and points them all at it.

This process loads no model. It gives the workers one ``STREAM_TOKEN_KEY`` when the environment has
none (every worker must check every other's tokens), prefixes their output with ``[name]``, restarts
a worker that dies (after 1 s, doubling up to 30 s while it keeps dying within a minute of
starting; the new process marks its predecessor's unfinished calls aborted) and forwards SIGTERM (each
worker drains: ``server.drain_secs``) and SIGINT, then exits when they all have.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from loguru import logger

from bot.config import Config
from bot.line.tokens import KEY_ENV
from bot.store.db import records_url

ROOT = Path(__file__).resolve().parent.parent.parent
BACKOFF_START_SECS = 1.0
BACKOFF_MAX_SECS = 30.0
STABLE_AFTER_SECS = 60.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Worker:
    index: int
    name: str
    port: int
    argv: list[str]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_START_SECS
    restart_at: float | None = None
    pumps: list[threading.Thread] = field(default_factory=list)


def worker_argv(config_path: str | None, overrides: list[str], *, port: int, name: str, verbose: bool,
                extra_sets: Sequence[str] = (), admin_port: int | None = None,
                command: list[str] | None = None) -> list[str]:
    """A worker's command line: ``command`` (default ``run_bot.py serve``) and its settings."""
    argv = list(command or [sys.executable, str(ROOT / "run_bot.py"), "serve"])
    if config_path:
        argv += ["--config", str(config_path)]
    admin = [f"server.admin_port={admin_port}"] if admin_port is not None else []
    for item in [*overrides, *extra_sets, f"server.port={port}", *admin, f"records.worker='{name}'"]:
        argv += ["--set", item]
    if verbose:
        argv.append("-v")
    return argv


def _local_llm_sets(config: Config) -> list[str]:
    """The llama.cpp server this process started, for workers that must not start their own."""
    llm = config.llm
    return ["llm.backend='server'", f"llm.base_url='{llm.base_url}'", f"llm.model='{llm.model}'",
            f"llm.dialect='{llm.dialect}'", f"llm.first_token_timeout_ms={llm.first_token_timeout_ms}",
            f"llm.total_timeout_ms={llm.total_timeout_ms}"]


class Supervisor:
    def __init__(self, workers: list[Worker], env: dict[str, str]):
        self.workers = workers
        self.env = env
        self.stopping = False
        self._signal: int | None = None

    def _pump(self, w: Worker, stream: IO[str]) -> None:
        prefix = f"[{w.name}] "
        for line in iter(stream.readline, ""):
            sys.stderr.write(prefix + line)
            sys.stderr.flush()
        stream.close()

    def start(self, w: Worker) -> None:
        w.proc = subprocess.Popen(w.argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace", bufsize=1, preexec_fn=_die_with_parent)
        w.started = time.monotonic()
        w.restart_at = None
        pump = threading.Thread(target=self._pump, args=(w, w.proc.stdout), daemon=True, name=f"pump-{w.name}")
        pump.start()
        w.pumps = [pump]
        logger.info("workers: {} started (pid {}, port {})", w.name, w.proc.pid, w.port)

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        self._signal = sig

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for w in self.workers:
            self.start(w)
        while True:
            if self._signal is not None and not self.stopping:
                self.stopping = True
                name = signal.Signals(self._signal).name
                logger.warning("workers: {}: passing it to {} worker(s){}", name, len(self.workers),
                               " (each drains its calls)" if self._signal == signal.SIGTERM else "")
                for w in self.workers:
                    if w.proc and w.proc.poll() is None:
                        w.proc.send_signal(self._signal)
                self._signal = None
            elif self._signal is not None:  # a second signal while stopping: stop at once
                for w in self.workers:
                    if w.proc and w.proc.poll() is None:
                        w.proc.send_signal(signal.SIGINT)
                self._signal = None
            now = time.monotonic()
            alive = 0
            for w in self.workers:
                rc = w.proc.poll() if w.proc else None
                if w.proc and rc is None:
                    alive += 1
                    continue
                if self.stopping:
                    continue
                if w.restart_at is None:
                    w.backoff = BACKOFF_START_SECS if now - w.started > STABLE_AFTER_SECS else w.backoff
                    w.restart_at = now + w.backoff
                    logger.error("workers: {} (pid {}) exited with {}; its calls were cut off; restarting it in "
                                 "{:.0f} s", w.name, w.proc.pid if w.proc else "?", rc, w.backoff)
                    w.backoff = min(w.backoff * 2, BACKOFF_MAX_SECS)
                elif now >= w.restart_at:
                    w.restarts += 1
                    self.start(w)
                    alive += 1
            if self.stopping and alive == 0:
                break
            time.sleep(0.2)
        for w in self.workers:
            for pump in w.pumps:
                pump.join(timeout=2)
        codes = [w.proc.returncode for w in self.workers if w.proc]
        logger.info("workers: all stopped (exit codes {})", codes)
        return 0 if all(c == 0 for c in codes) else 1


def run_workers(config: Config, args: argparse.Namespace, n: int, command: list[str] | None = None) -> int:
    """``serve --workers N`` (see the module doc); ``command``: each worker's program (the test lab's)."""
    from bot.modelfiles.local_llm import serving_llm

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not env.get(KEY_ENV):
        env[KEY_ENV] = secrets.token_urlsafe(32)
        logger.warning("workers: {} is not set: made one for these {} workers. Workers on OTHER machines of the "
                       "same line need the same key in their environment", KEY_ENV, n)
    if config.server.line_max_calls <= 0:
        logger.warning("workers: server.line_max_calls is 0: each worker admits up to server.max_calls by itself "
                       "and reserves a slot for streams that may reach another worker; set server.line_max_calls "
                       "(e.g. {}) for a line-wide limit", n * config.server.max_calls)
    if records_url(config).startswith("sqlite"):
        logger.info("workers: the records database is SQLite ({}): fine on one machine; use PostgreSQL across "
                    "machines", config.records.url)
    base = config.records.worker or socket.gethostname()
    with serving_llm(config) as llm_server:
        extra = _local_llm_sets(llm_server.ready()) if config.llm.backend == "local" else []
        workers = []
        for i in range(n):
            name, port = f"{base}-{i}", config.server.port + i
            workers.append(Worker(i, name, port, worker_argv(args.config, list(args.overrides), port=port, name=name,
                                                              verbose=args.verbose, extra_sets=extra,
                                                              admin_port=config.server.admin_port + i,
                                                              command=command)))
        logger.info("workers: {} on ports {}-{} ({}; operations on {}:{}-{}); proxy them round-robin", n,
                    config.server.port, config.server.port + n - 1, ", ".join(w.name for w in workers),
                    config.server.admin_host, config.server.admin_port, config.server.admin_port + n - 1)
        return Supervisor(workers, env).run()
