"""A fake OpenAI-compatible chat-completions server that streams like vLLM.

In tests::

    with FakeLLM() as fake:                       # uvicorn in a background thread, free port
        fake.script(reply_json={"reply": "네.", ...}, first_token_delay=0.05)
        client = AsyncOpenAI(base_url=fake.base_url, api_key="EMPTY", max_retries=0)
        ...
        assert fake.calls == 1 and "response_format" in fake.requests[0]

Standalone, to run the bot without a GPU::

    python -m bot.testing.fake_llm --port 8000

Each ``POST /v1/chat/completions`` takes the next scripted response from a queue
(``script(...)``), or the default responder's valid turn when the queue is empty. Streamed
(``stream: true``) answers follow vLLM's SSE framing: a role chunk, content chunks, a chunk with
``finish_reason``, a usage chunk when ``stream_options.include_usage``, then ``data: [DONE]``.
``script(..., heard="how are you")`` answers only a call whose last user message holds those words;
a call before it (a speculative call on "hello?" alone, withdrawn when the caller went on) gets the
default and leaves the script queued, so a real STT's speed does not decide which call takes it.

Modes: ``ok``; ``length`` (cut-off JSON, finish_reason "length"); ``invalid_json`` (complete
stream of text that is not JSON); ``hang`` (headers, then nothing until the client goes away or
the server stops); ``drop`` (closes the connection mid-stream); ``http_error`` (an OpenAI-style
error body with status 500, or ``status``). Note that the ``openai`` client retries 5xx and
dropped connections (``max_retries``, default 2): every retry is a call and takes a script.

Per request, without a script: ``POST /fault/<fault>/v1/chat/completions`` (point a client's
base URL at ``fault_url(fault)``) answers with that fault and leaves the script queue alone, so
concurrent clients can each get their own: ``ok``, ``slow`` / ``slow-<ms>`` (first token after
1200 ms or <ms>), ``hang``, ``500`` (or any HTTP status), ``invalid_json``, ``cut_off``, ``drop``,
``down`` (a proxy's 502 page: the model server behind it is gone).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.testing.responders import default_responder

Mode = Literal["ok", "http_error", "invalid_json", "length", "hang", "drop"]
MODES: tuple[str, ...] = ("ok", "http_error", "invalid_json", "length", "hang", "drop")

INVALID_JSON_TEXT = '{"reply": "네, 확인해 드릴게요.", "intent": report_problem, "flow": "continue"}'

Responder = Callable[[dict[str, Any]], "dict[str, Any] | str"]


@dataclass
class Scripted:
    """One scripted answer. ``reply_json``: a dict (serialized in its key order) or raw text."""

    reply_json: dict[str, Any] | str | None = None
    first_token_delay: float = 0.15
    token_delay: float = 0.01
    chunk_chars: int = 3
    mode: Mode = "ok"
    # http_error: status code; length: characters streamed before the cut (None: half).
    status: int = 500
    cut_at: int | None = None
    error_message: str = "fake LLM: scripted server error"
    heard: str | None = None  # only for a call whose last user message holds this (case-insensitive)

    def answers(self, body: dict[str, Any]) -> bool:
        if self.heard is None:
            return True
        users = [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        return bool(users) and self.heard.lower() in str(users[-1]).lower()


class _Drop(Exception):
    """Raised inside the stream to make uvicorn close the connection mid-response."""


FAULTS: tuple[str, ...] = ("ok", "slow", "hang", "500", "invalid_json", "cut_off", "drop", "down")


def fault_script(fault: str, base: Scripted) -> Scripted:
    """The answer for a per-request fault name (``FAULTS``; ``slow-<ms>``; any HTTP status code)."""
    name, _, arg = fault.partition("-")
    s = dataclasses.replace(base)
    if name == "ok" or name == "down":
        pass
    elif name == "slow":
        s.first_token_delay = (float(arg) if arg else 1200.0) / 1000.0
    elif name.isdigit() and 400 <= int(name) <= 599:
        s.mode, s.status = "http_error", int(name)
    elif name in ("hang", "invalid_json", "drop"):
        s.mode = name
    elif name in ("cut_off", "length"):
        s.mode = "length"
    else:
        raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)}, slow-<ms>, an HTTP status)")
    return s


def _free_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class FakeLLM:
    """The fake server; ``start()``/``stop()`` or use as a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model: str = "fake-model",
        responder: Responder = default_responder,
        first_token_delay: float = 0.15,
        token_delay: float = 0.01,
        chunk_chars: int = 3,
        log_level: str = "critical",
    ):
        self.host = host
        self.model = model
        self.responder = responder
        self.defaults = Scripted(first_token_delay=first_token_delay, token_delay=token_delay, chunk_chars=chunk_chars)
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []  # time.monotonic() of each request's arrival, in step with requests
        self.calls = 0
        self._queue: collections.deque[Scripted] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._log_level = log_level
        self._sock = _free_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/fault/{fault}/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
            ]
        )

    # --- control ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def fault_url(self, fault: str) -> str:
        """Base URL whose every request gets ``fault`` (see the module doc)."""
        fault_script(fault, Scripted())  # raises on an unknown fault
        return f"http://{self.host}:{self.port}/fault/{fault}/v1"

    def script(
        self,
        reply_json: dict[str, Any] | str | None = None,
        *,
        first_token_delay: float | None = None,
        token_delay: float | None = None,
        chunk_chars: int | None = None,
        mode: Mode = "ok",
        status: int = 500,
        cut_at: int | None = None,
        error_message: str = "fake LLM: scripted server error",
        heard: str | None = None,
    ) -> None:
        """Queue the answer of one future call (delays default to the server's defaults); with ``heard``,
        of the first call whose last user message holds those words."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        d = self.defaults
        self._queue.append(
            Scripted(
                reply_json=reply_json,
                first_token_delay=d.first_token_delay if first_token_delay is None else first_token_delay,
                token_delay=d.token_delay if token_delay is None else token_delay,
                chunk_chars=max(1, d.chunk_chars if chunk_chars is None else chunk_chars),
                mode=mode,
                status=status,
                cut_at=cut_at,
                error_message=error_message,
                heard=heard,
            )
        )

    @property
    def pending_scripts(self) -> int:
        return len(self._queue)

    def reset(self) -> None:
        """Forget recorded requests, the call count and queued scripts."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.request_times.clear()
            self.calls = 0

    def wait_for_calls(self, n: int, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.calls < n:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def start(self) -> FakeLLM:
        if self._thread is not None:
            return self
        self._stopping.clear()
        config = uvicorn.Config(
            self.app, log_level=self._log_level, access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=f"fake-llm-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = None
        self._server = None
        try:
            self._sock.close()
        except OSError:  # pragma: no cover
            pass

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- handlers -----------------------------------------------------------------------------

    async def _health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "vllm",
                        "root": self.model,
                        "parent": None,
                        "max_model_len": 8192,
                    }
                ],
            }
        )

    async def _chat(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as e:
            return self._error(400, f"invalid request body: {e}", "BadRequestError")
        fault = request.path_params.get("fault")
        with self._lock:
            self.calls += 1
            self.requests.append(body)
            self.request_times.append(time.monotonic())
            answers = self._queue and not fault and self._queue[0].answers(body)
            scripted = self._queue.popleft() if answers else None
        if fault:
            if fault == "down":
                return Response("<html><body><h1>502 Bad Gateway</h1></body></html>", status_code=502,
                                media_type="text/html")
            try:
                scripted = fault_script(fault, Scripted(first_token_delay=self.defaults.first_token_delay,
                                                        token_delay=self.defaults.token_delay,
                                                        chunk_chars=self.defaults.chunk_chars))
            except ValueError as e:
                return self._error(400, str(e), "BadRequestError")
        if scripted is None:
            scripted = Scripted(
                first_token_delay=self.defaults.first_token_delay,
                token_delay=self.defaults.token_delay,
                chunk_chars=self.defaults.chunk_chars,
            )
        if scripted.mode == "http_error":
            await self._sleep(scripted.first_token_delay)
            return self._error(scripted.status, scripted.error_message, "InternalServerError")
        text, finish = self._content(scripted, body)
        chunks = [text[i : i + scripted.chunk_chars] for i in range(0, len(text), scripted.chunk_chars)]
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(max_tokens, int) and 0 < max_tokens < len(chunks):  # one chunk = one "token"
            chunks, finish = chunks[:max_tokens], "length"
        model = body.get("model") or self.model
        usage = {
            "prompt_tokens": self._prompt_tokens(body),
            "completion_tokens": len(chunks),
            "total_tokens": self._prompt_tokens(body) + len(chunks),
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(scripted, chunks, finish, model, usage, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        # non-streaming
        if scripted.mode == "hang":
            await self._hang(request)
            return Response(status_code=499)
        if scripted.mode == "drop":
            raise _Drop("fake LLM: dropped (non-streaming)")
        await self._sleep(scripted.first_token_delay + scripted.token_delay * max(0, len(chunks) - 1))
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(chunks), "tool_calls": []},
                        "logprobs": None,
                        "finish_reason": finish,
                        "stop_reason": None,
                    }
                ],
                "usage": usage,
            }
        )

    def _content(self, s: Scripted, body: dict[str, Any]) -> tuple[str, str]:
        if s.mode == "invalid_json" and s.reply_json is None:
            return INVALID_JSON_TEXT, "stop"
        obj = s.reply_json if s.reply_json is not None else self.responder(body)
        text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
        if s.mode == "length":
            cut = len(text) // 2 if s.cut_at is None else max(0, min(s.cut_at, len(text)))
            return text[:cut], "length"
        return text, "stop"

    @staticmethod
    def _prompt_tokens(body: dict[str, Any]) -> int:
        chars = 0
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                chars += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
        return max(1, chars // 2)

    async def _sleep(self, secs: float) -> None:
        end = time.monotonic() + secs
        while not self._stopping.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.05))

    async def _hang(self, request: Request | None = None) -> None:
        while not self._stopping.is_set():
            if request is not None and await request.is_disconnected():
                return
            await asyncio.sleep(0.05)

    async def _stream(self, s: Scripted, chunks: list[str], finish: str, model: str, usage: dict[str, int], include_usage: bool):
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
            data.update(extra)
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

        def choice(delta: dict[str, Any], finish_reason: str | None = None) -> list[dict[str, Any]]:
            c: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            if finish_reason is not None:
                c["stop_reason"] = None
            return [c]

        if s.mode == "hang":
            await self._hang()
            return
        await self._sleep(s.first_token_delay)
        yield event(choice({"role": "assistant", "content": ""}))
        drop_after = max(1, len(chunks) // 2) if s.mode == "drop" else None
        for i, chunk in enumerate(chunks):
            if i:
                await self._sleep(s.token_delay)
            if self._stopping.is_set():
                return
            if drop_after is not None and i == drop_after:
                raise _Drop("fake LLM: dropped the connection mid-stream")
            yield event(choice({"content": chunk}))
        if drop_after is not None:
            raise _Drop("fake LLM: dropped the connection mid-stream")
        yield event(choice({}, finish))
        if include_usage:
            yield event([], usage=usage)
        yield b"data: [DONE]\n\n"

    @staticmethod
    def _error(status: int, message: str, kind: str) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": message, "type": kind, "param": None, "code": status}},
            status_code=status,
        )


def scripted_responder(path: str, fallback: Responder) -> Responder:
    """Turns from a JSON-lines file, one per caller turn, in order; then ``fallback``.

    For walking a dialog by hand (the README's intake walkthrough): the words the STT heard do not
    matter, the turns come in the order written.
    """
    from bot.ops.preflight import PROBE_CALLER_LINE

    with open(path, encoding="utf-8") as f:
        turns = collections.deque(json.loads(line) for line in f if line.strip())

    def respond(body: dict[str, Any]) -> dict[str, Any] | str:
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        if turns and users and users[-1] != PROBE_CALLER_LINE:
            return turns.popleft()
        return fallback(body)

    return respond


def build_parser() -> argparse.ArgumentParser:
    """``python -m bot.testing.fake_llm``'s options (tests/test_docs_commands.py parses the docs' commands)."""
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible LLM server streaming like vLLM.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=None,
                        help="the model name it serves (default: llm.model of --config, as `run_bot.py check` asks)")
    parser.add_argument("--config", default=None, help="config TOML whose llm.model to serve (default: config.toml)")
    parser.add_argument("--first-token-delay", type=float, default=0.15)
    parser.add_argument("--token-delay", type=float, default=0.01)
    parser.add_argument("--chunk-chars", type=int, default=3)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--responder", choices=["default", "keyword"], default="default",
                        help="keyword: intent/category/slots guessed from the caller's words, and judge answers "
                        "(bot/testing/keyword_llm.py; for `run_bot.py eval`)")
    parser.add_argument("--script", default=None, metavar="FILE.jsonl",
                        help="answer the caller turns with these turns, one JSON object per line, in order "
                        "(then the responder); `run_bot.py check`'s probe is not counted")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.model is None:
        from bot.config import load_config

        args.model = load_config(args.config).llm.model
    responder = default_responder
    if args.responder == "keyword":
        from bot.testing.keyword_llm import keyword_responder as responder
    if args.script:
        responder = scripted_responder(args.script, responder)
    fake = FakeLLM(
        args.host,
        args.port,
        model=args.model,
        responder=responder,
        first_token_delay=args.first_token_delay,
        token_delay=args.token_delay,
        chunk_chars=args.chunk_chars,
        log_level=args.log_level,
    )
    logging.basicConfig(level=logging.INFO)
    print(f"fake LLM serving {args.model} at {fake.base_url} (Ctrl-C to stop)", flush=True)
    fake.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
