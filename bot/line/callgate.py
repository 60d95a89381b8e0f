"""Who may start a call, and how the server stops: call slots, webhook abuse, graceful drain.

* Call slots: ``server.max_calls`` counts calls in progress *and* webhooks answered whose media
  stream has not arrived yet (a reservation, freed when its token expires), so N callers dialling
  at the same moment get exactly ``max_calls`` streams and the rest a spoken busy message.
* Webhook abuse: a form body over ``WEBHOOK_MAX_BYTES`` is refused before it is parsed; a second
  signed webhook for a CallSid already seen (a replayed request) is refused; neither stores anything.
* Drain (SIGTERM): new calls get the busy message and /healthz says "draining" (503); calls in
  progress go on for up to ``server.drain_secs``; those still up then hear a goodbye sentence and
  are hung up; then the server exits 0 (``DrainingServer``).
* The QA page (``bot/app/routes/qa.py``): its calls take the same slots as phone calls (one
  ``CallRegistry``, ``bot/line/calls.py``: in progress, or an offer being answered, of kind
  ``CallKind.QA``), and at most ``server.qa_max_calls`` of them, kept below ``max_calls``, so QA
  can never take every citizen's line.
* Media sockets before their ``start`` (``PrestartSockets``): at most ``server.media_prestart_per_client``
  per client address and ``server.media_prestart_max`` in all; the route refuses the rest before
  accepting them.
* Process figures for the soak: resident memory and open file descriptors.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from types import FrameType
from urllib.parse import parse_qsl

import uvicorn
from loguru import logger
from prometheus_client import CollectorRegistry, Counter
from starlette.requests import Request

from bot.line.calls import CallKind, CallRegistry, LiveCall
from bot.privacy import mask

WEBHOOK_MAX_BYTES = 16 * 1024  # Twilio's voice webhook form is about 1 KiB
WS_MAX_BYTES = 1024 * 1024  # a WebSocket frame larger than this closes the stream (1009); 64 KiB-1 MiB are ignored
REPLAY_WINDOW_SECS = 3600.0
REPLAY_MAX_ENTRIES = 100_000
GOODBYE_WAIT_SECS = 20.0  # after the goodbye sentence: longest wait for the calls to hang up


class FormTooLarge(ValueError):
    pass


async def read_webhook_form(request: Request, limit: int = WEBHOOK_MAX_BYTES) -> dict[str, str]:
    """The urlencoded form of a webhook, read with a size cap (raises ``FormTooLarge``)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise FormTooLarge(f"Content-Length {declared} > {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise FormTooLarge(f"body over {limit} bytes")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError as e:
        raise FormTooLarge(f"form body is not UTF-8: {e}") from e


class CallGate:
    """Admission state of this process. ``calls`` is this worker's ``CallRegistry``."""

    def __init__(self, calls: CallRegistry, *, max_calls: int, token_ttl_secs: float, registry: CollectorRegistry):
        self.calls = calls
        self.max_calls = max_calls
        self.token_ttl_secs = token_ttl_secs
        self.draining = False
        self._seen: OrderedDict[str, float] = OrderedDict()  # CallSid -> when its webhook was answered
        self.rejected = Counter("voice_calls_rejected", "Webhooks answered busy or refused, by reason", ["reason"],
                                registry=registry)
        self.ignored_messages = Counter("voice_stream_messages_ignored",
                                        "Malformed or out-of-protocol media-stream messages ignored, by kind",
                                        ["kind"], registry=registry)

    # --- the webhook --------------------------------------------------------------------------

    def replayed(self, call_sid: str) -> bool:
        """True when a webhook for this CallSid was already answered (Twilio sends one per call)."""
        now = time.monotonic()
        while self._seen and (len(self._seen) > REPLAY_MAX_ENTRIES
                              or next(iter(self._seen.values())) < now - REPLAY_WINDOW_SECS):
            self._seen.popitem(last=False)
        if call_sid in self._seen:
            return True
        self._seen[call_sid] = now
        return False

    def busy_reason(self) -> str | None:
        """Why a new call cannot be taken now (None: a slot is free)."""
        if self.draining:
            return "draining"
        if len(self.calls) >= self.max_calls:
            return "max_calls"
        return None

    def refuse(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    # --- the QA page --------------------------------------------------------------------------

    @staticmethod
    def qa_limit(max_calls: int, qa_max_calls: int) -> int:
        """QA calls allowed at once: ``qa_max_calls``, and always at least one slot fewer than ``max_calls``."""
        return max(0, min(qa_max_calls, max_calls - 1))

    def qa_calls(self) -> int:
        """QA calls here: in progress, and offers being answered."""
        return self.calls.count(CallKind.QA)

    def reserve_qa(self, qa_max_calls: int, hold_secs: float) -> tuple[str | None, str | None]:
        """A call slot for a QA offer, taken with no await in between: ``(its key, None)`` or ``(None, why not)``.

        The key is a reservation of kind QA (the phone webhook counts it too) until the call starts
        (``CallRegistry.start``) or ``release``; it expires by itself after ``hold_secs``.
        """
        busy = self.busy_reason()
        if busy is None and self.qa_calls() >= self.qa_limit(self.max_calls, qa_max_calls):
            busy = "qa_max_calls"
        if busy:
            return None, busy
        key = f"offer-{secrets.token_hex(8)}"
        self.calls.reserve(key, CallKind.QA, hold_secs)
        return key, None

    def release(self, key: str | None) -> None:
        self.calls.release(key)

    # --- the media stream ---------------------------------------------------------------------

    def count_ignored(self, call_sid: str, ignored: dict[str, int]) -> None:
        """At call end: what the serializer ignored, one log line for the call (one per kind was logged live)."""
        if not ignored:
            return
        for kind, n in ignored.items():
            self.ignored_messages.labels(kind).inc(n)
        logger.warning("call {}: ignored {} malformed media-stream messages: {}", mask(call_sid),
                       sum(ignored.values()), dict(ignored))

    # --- drain --------------------------------------------------------------------------------

    async def drain(self, *, drain_secs: float, goodbye: Callable[[LiveCall], Awaitable[None]]) -> None:
        """Stop taking calls, let the running ones finish, then ``goodbye`` to each call left (every kind)."""
        self.draining = True
        t0 = time.monotonic()
        logger.warning("SIGTERM: draining: new calls get the busy message; {} call(s) in progress get up to {:.0f} s",
                       len(self.calls.active), drain_secs)
        while self.calls.active and time.monotonic() - t0 < drain_secs:  # noqa: ASYNC110 - polls the registry once a drain
            await asyncio.sleep(0.1)
        left = list(self.calls.active.values())
        if left:
            logger.warning("drain: {:.0f} s passed; goodbye or hand-over for {} call(s)", drain_secs, len(left))
            await asyncio.gather(*(goodbye(c) for c in left), return_exceptions=True)
            deadline = time.monotonic() + GOODBYE_WAIT_SECS
            while self.calls.active and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            for call in list(self.calls.active.values()):
                logger.error("drain: a call did not end after its goodbye; cancelling it")
                await call.cancel()
        logger.warning("drain done in {:.1f} s; exiting", time.monotonic() - t0)


class PrestartSockets:
    """Media sockets that have not sent a valid ``start`` yet, per client address and in all.

    ``enter`` before accepting a socket (None: go on; else why not), ``leave`` once its start was
    read or it was refused. Behind a proxy every socket has the proxy's address unless uvicorn
    trusts its forwarded headers: then the per-client cap is the total.
    """

    def __init__(self, *, per_client: int, total: int):
        self.per_client = per_client
        self.total = total
        self.by_client: Tally[str] = Tally()
        self.open = 0

    def enter(self, client: str) -> str | None:
        if self.open >= self.total:
            return f"{self.open} media sockets wait for their start (server.media_prestart_max {self.total})"
        if self.by_client[client] >= self.per_client:
            return (f"{self.by_client[client]} media sockets from this address wait for their start "
                    f"(server.media_prestart_per_client {self.per_client})")
        self.by_client[client] += 1
        self.open += 1
        return None

    def leave(self, client: str) -> None:
        self.open -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]


class DrainingServer(uvicorn.Server):
    """uvicorn, but the first SIGTERM drains (``drain``) before it shuts down, and the exit status is 0.

    A second SIGTERM or a SIGINT stops at once, as plain uvicorn does.
    """

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]]):
        super().__init__(config)
        self._drain = drain
        self._drain_requested = False
        self._drain_task: asyncio.Task | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self._drain_requested and not self.should_exit:
            self._drain_requested = True  # started by on_tick, on the event loop
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._drain_requested and self._drain_task is None:
            self._drain_task = asyncio.create_task(self._drain_then_exit(), name="drain")
        return await super().on_tick(counter)

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain()
        except Exception:  # noqa: BLE001 - never stay up because the drain failed
            logger.exception("drain failed")
        finally:
            self.should_exit = True


def process_figures() -> dict[str, int]:
    """Resident memory (bytes), open file descriptors and how many are sockets (Linux; 0 elsewhere)."""
    rss = fds = sockets = 0
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        names = os.listdir("/proc/self/fd")
        fds = len(names)
        for name in names:
            try:
                sockets += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
            except OSError:
                pass
    except (OSError, ValueError, IndexError):
        pass
    return {"rss_bytes": rss, "open_fds": fds, "open_sockets": sockets}
