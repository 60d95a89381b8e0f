"""Shared fixtures: offline models (Whisper base from PyPI, a stand-in Supertonic) and fakes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def whisper_dir(tmp_path_factory) -> Path:
    from bot.models import assemble_offline_whisper, offline_whisper_ready

    cached = ROOT / "models" / "whisper-base"
    if offline_whisper_ready(cached):
        return cached
    return assemble_offline_whisper(tmp_path_factory.mktemp("models") / "whisper-base")


@pytest.fixture(scope="session")
def standin_tts_dir(tmp_path_factory) -> Path:
    from bot.supertonic_standin import build_standin_model

    path = tmp_path_factory.mktemp("supertonic") / "supertonic-standin"
    build_standin_model(path)
    return path


class FakeTwilioAPI:
    """Twilio's REST API as far as the hang-up goes: records ``POST .../Calls/{CallSid}.json``."""

    def __init__(self):
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route
        import uvicorn

        self.hangups: list[dict] = []

        async def update_call(request: Request):
            form = dict(await request.form())
            self.hangups.append({"path": request.url.path, "form": form, "auth": request.headers.get("authorization")})
            return JSONResponse({"sid": request.path_params["sid"], "status": form.get("Status")})

        app = Starlette(routes=[Route("/2010-04-01/Accounts/{ac}/Calls/{sid}.json", update_call, methods=["POST"])])
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self):
        self._thread.start()
        while not self._server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self._server.should_exit = True
        self._thread.join(5)


class BotProcess:
    """``python run_bot.py`` started as a separate process, as a user runs it."""

    def __init__(self, overrides: list[str], env: dict[str, str], log_path: Path, extra_args: tuple[str, ...] = ()):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/twilio/media"
        args = [sys.executable, str(ROOT / "run_bot.py"), "--set", f"server.port={self.port}",
                "--set", "server.host='127.0.0.1'"]
        for item in overrides:
            args += ["--set", item]
        args += list(extra_args)
        self._log = log_path.open("w")
        self.log_path = log_path
        self.proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **env}, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"run_bot.py exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"server not ready:\n{self.log_path.read_text()[-3000:]}")

    def healthz(self) -> dict:
        return httpx.get(f"{self.base_url}/healthz", timeout=5).json()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()
