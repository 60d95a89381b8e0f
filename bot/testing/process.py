"""The bot as a separate process, and Twilio's REST API as far as a call goes (tests and bench)."""

from __future__ import annotations

import functools
import os
import secrets
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bot.core.bearer import bearer_header

ROOT = Path(__file__).resolve().parent.parent.parent


@functools.cache
def local_http() -> httpx.Client:
    """The one HTTP client of this process for polling local servers (a bot's start, its health, its records).

    ``httpx.get`` builds a client, and with it a TLS context, on every call: about 24 ms of CPU, and a
    bot's start is polled every 0.25 s for as long as it loads. No keep-alive: each request opens its own
    connection as ``httpx.get`` does, so a worker restarted on the same port never meets a stale socket.
    """
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), verify=tls_context())


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, built once: a client given none builds its own (~21 ms of
    CPU), and the test side opens an ``AsyncClient`` per webhook (each event loop needs its own client)."""
    return httpx.create_ssl_context()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeTwilioAPI:
    """Twilio's REST API as the bot uses it, speaking Twilio's real wire format.

    Form-encoded POSTs with HTTP basic auth (the account SID and auth token; with ``auth`` given
    only that pair, otherwise any token for the path's account) to
    ``/2010-04-01/Accounts/{AC}/Messages.json`` (SMS: ``messages``), ``.../Calls.json`` (an
    outbound call: ``placed``) and ``.../Calls/{CA}.json`` (hang-up or redirect: ``hangups``);
    answers are Twilio's JSON (201 with the new resource, or ``{"code", "message", "status"}``).
    ``fail_next(n, status)`` makes the next ``n`` create requests fail with that status (a 500 is
    Twilio's 20500); every request, failed ones too, is in ``requests``.
    """

    def __init__(self, auth: tuple[str, str] | None = None):
        import base64
        import secrets as _secrets
        from email.utils import formatdate

        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.hangups: list[dict] = []
        self.messages: list[dict] = []  # SMS accepted (form fields)
        self.placed: list[dict] = []  # outbound calls accepted (form fields + the SID given)
        self.requests: list[dict] = []  # every request: path, status answered
        self._failures: list[int] = []
        self._auth = auth

        def error(status: int, code: int, message: str) -> JSONResponse:
            return JSONResponse({"code": code, "message": message, "more_info": f"https://www.twilio.com/docs/errors/{code}",
                                 "status": status}, status_code=status)

        def authorized(request: Request) -> bool:
            header = request.headers.get("authorization", "")
            if not header.startswith("Basic "):
                return False
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except ValueError:
                return False
            if self._auth is not None:
                return (user, password) == self._auth
            return user == request.path_params["ac"] and bool(password)

        async def handle(request: Request, kind: str):
            form = dict(await request.form())
            if not authorized(request):
                self.requests.append({"path": request.url.path, "status": 401})
                return error(401, 20003, "Authenticate")
            if kind != "update" and self._failures:
                status = self._failures.pop(0)
                self.requests.append({"path": request.url.path, "status": status})
                return error(status, 20500 if status >= 500 else 20429 if status == 429 else 21211,
                             "Internal Server Error" if status >= 500 else "Refused by the fake")
            self.requests.append({"path": request.url.path, "status": 201 if kind != "update" else 200})
            ac = request.path_params["ac"]
            created = formatdate(usegmt=True).replace("GMT", "+0000")
            if kind == "message":
                if not form.get("To") or not form.get("Body") or not (form.get("From") or form.get("MessagingServiceSid")):
                    return error(400, 21604, "A 'To', 'From' and 'Body' are required")
                sid = "SM" + _secrets.token_hex(16)
                self.messages.append({**form, "sid": sid})
                return JSONResponse({"sid": sid, "account_sid": ac, "to": form["To"], "from": form.get("From"),
                                     "body": form["Body"], "status": "queued", "num_segments": "1",
                                     "direction": "outbound-api", "api_version": "2010-04-01",
                                     "date_created": created, "date_updated": created, "date_sent": None,
                                     "price": None, "error_code": None, "error_message": None,
                                     "uri": f"/2010-04-01/Accounts/{ac}/Messages/{sid}.json"}, status_code=201)
            if kind == "call":
                if not form.get("To") or not form.get("From") or not (form.get("Url") or form.get("Twiml")):
                    return error(400, 21205, "Url, Twiml or ApplicationSid is required")
                sid = "CA" + _secrets.token_hex(16)
                self.placed.append({**form, "sid": sid})
                return JSONResponse({"sid": sid, "account_sid": ac, "to": form["To"], "from": form["From"],
                                     "status": "queued", "direction": "outbound-api", "api_version": "2010-04-01",
                                     "date_created": created, "date_updated": created,
                                     "uri": f"/2010-04-01/Accounts/{ac}/Calls/{sid}.json"}, status_code=201)
            self.hangups.append({"path": request.url.path, "form": form, "auth": request.headers.get("authorization")})
            return JSONResponse({"sid": request.path_params["sid"], "account_sid": ac,
                                 "status": form.get("Status") or "in-progress", "date_updated": created})

        base = "/2010-04-01/Accounts/{ac}"
        app = Starlette(routes=[
            Route(base + "/Messages.json", functools.partial(handle, kind="message"), methods=["POST"]),
            Route(base + "/Calls.json", functools.partial(handle, kind="call"), methods=["POST"]),
            Route(base + "/Calls/{sid}.json", functools.partial(handle, kind="update"), methods=["POST"]),
        ])
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def fail_next(self, n: int, status: int = 500) -> None:
        """The next ``n`` SMS or outbound-call requests fail with ``status`` (Twilio's error JSON)."""
        self._failures.extend([status] * n)

    def reset(self) -> None:
        self.hangups.clear()
        self.messages.clear()
        self.placed.clear()
        self.requests.clear()
        self._failures.clear()

    def __enter__(self):
        self._thread.start()
        while not self._server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self._server.should_exit = True
        self._thread.join(5)


class BotProcess:
    """``python run_bot.py`` (or another entry, e.g. ``-m bot.app.stock``) started as a separate process.

    Args:
        overrides: ``--set`` items (port and host are added).
        env: Environment on top of this process's; a value of None removes the variable.
        log_path: Where the server's output goes.
        extra_args: More command-line arguments (e.g. ``-v``).
        entry: What Python runs; default ``run_bot.py``.
        config_path: ``--config``.
        admin_port: The operations listener's port (default: a free one; with ``--workers N`` worker
            i's is ``admin_port + i``).

    The records API is on: env ``RECORDS_API_TOKEN`` is a fresh random token unless ``env`` sets it;
    ``records_headers`` carries it.
    """

    def __init__(self, overrides: list[str], env: dict[str, str | None], log_path: Path,
                 extra_args: tuple[str, ...] = (), *, entry: tuple[str, ...] | None = None,
                 config_path: str | None = None, port: int | None = None, admin_port: int | None = None):
        self.port = port or free_port()
        self.admin_port = admin_port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/twilio/media"
        env = {"RECORDS_API_TOKEN": secrets.token_urlsafe(24), **env}
        self.records_token = env["RECORDS_API_TOKEN"]
        args = [sys.executable, *(entry or (str(ROOT / "run_bot.py"),))]
        if config_path:
            args += ["--config", str(config_path)]
        for item in [*overrides, f"server.port={self.port}", "server.host='127.0.0.1'",
                     f"server.admin_port={self.admin_port}", "server.admin_host='127.0.0.1'"]:
            args += ["--set", item]
        args += list(extra_args)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w")
        self.log_path = log_path
        full_env = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
        for k in [k for k, v in env.items() if v is None]:
            full_env.pop(k, None)
        self.proc = subprocess.Popen(args, cwd=ROOT, env=full_env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"run_bot.py exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                if local_http().get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"server not ready:\n{self.log_path.read_text()[-3000:]}")

    @property
    def records_headers(self) -> dict[str, str]:
        return bearer_header(self.records_token)

    def healthz(self) -> dict:
        """The operations listener's /healthz (calls, tasks, memory, fds)."""
        return local_http().get(f"{self.admin_url}/healthz", timeout=5).json()

    def turns(self, since: float = 0.0) -> list[dict]:
        """Finished calls' turn records from /api/turns (with the records token)."""
        resp = local_http().get(f"{self.base_url}/api/turns", params={"since": since}, headers=self.records_headers, timeout=5)
        resp.raise_for_status()
        return resp.json()["turns"]

    def log(self) -> str:
        if not self._log.closed:  # after stop() the file is complete
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or close anything (a crash)."""
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is not None:
            self._log.close()
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()
