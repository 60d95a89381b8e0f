"""Twilio Media Streams call simulator (test and benchmark infrastructure).

Speaks Twilio's documented bidirectional Media Streams protocol
(https://www.twilio.com/docs/voice/media-streams/websocket-messages) over a real
WebSocket to a real server:

* Twilio -> server: ``connected`` (no sequenceNumber), ``start`` (sequenceNumber "1"),
  then ``media`` / ``dtmf`` / ``mark`` / ``stop``, each with a string ``sequenceNumber``
  counting up by one and the ``streamSid``. ``media.chunk`` counts up from "1",
  ``media.timestamp`` is milliseconds since the stream started, ``media.payload`` is
  base64 μ-law 8 kHz mono, 160 bytes (20 ms) per message.
* Server -> Twilio: ``media`` (played in order at real time), ``mark`` (echoed back once
  the audio queued before it has played, or at once when a ``clear`` drops it) and
  ``clear`` (empties the playback buffer).

The caller side is a phone line: one 20 ms frame every 20 ms on an absolute clock.
With ``continuous=True`` (default) the line sends μ-law silence whenever no audio is
queued, as a real call does; with ``continuous=False`` it only sends what is queued.

Also: helpers for the ``/twilio/voice`` webhook (signed like Twilio does) and for
parsing the ``<Connect><Stream>`` TwiML answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import collections
import contextlib
import json
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import httpx
import numpy as np
import websockets
from pipecat.audio.utils import create_file_resampler, pcm_to_ulaw, ulaw_to_pcm
from twilio.request_validator import RequestValidator
from websockets.asyncio.client import ClientConnection

from bot.core.wav import read_wav
from bot.testing.process import tls_context

__all__ = [
    "CallClosed",
    "DEFAULT_ACCOUNT_SID",
    "DEFAULT_MEDIA_FORMAT",
    "FRAME_BYTES",
    "FRAME_SECONDS",
    "SAMPLE_RATE",
    "TwilioCallSimulator",
    "new_sid",
    "parse_twiml_stream",
    "post_voice_webhook",
    "rms",
    "sign_twilio_request",
    "stream_action_params",
    "voice_webhook_params",
]

SAMPLE_RATE = 8000
"""Twilio Media Streams audio: μ-law, 8 kHz, mono."""
FRAME_SECONDS = 0.02
FRAME_BYTES = 160  # 20 ms of 8 kHz μ-law
ULAW_SILENCE = 0xFF
SILENCE_FRAME = bytes([ULAW_SILENCE]) * FRAME_BYTES
DEFAULT_ACCOUNT_SID = "AC" + "0" * 32
DEFAULT_MEDIA_FORMAT: dict[str, Any] = {
    "encoding": "audio/x-mulaw",
    "sampleRate": SAMPLE_RATE,
    "channels": 1,
}


class CallClosed(ConnectionError):
    """The simulated call's WebSocket is closed (or the call was stopped)."""


def new_sid(prefix: str) -> str:
    """A Twilio-shaped SID: two-letter prefix + 32 hex digits (e.g. ``CA…``, ``MZ…``)."""
    return prefix + uuid.uuid4().hex


def rms(pcm16: bytes) -> float:
    """Root mean square of PCM16 (little-endian) samples; 0.0 when empty."""
    samples = np.frombuffer(pcm16[: len(pcm16) // 2 * 2], dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples * samples))) if samples.size else 0.0


# --------------------------------------------------------------------------- webhook


def sign_twilio_request(url: str, params: Mapping[str, str], auth_token: str) -> str:
    """``X-Twilio-Signature`` value Twilio would send for a POST of ``params`` to ``url``."""
    return RequestValidator(auth_token).compute_signature(url, dict(params))


def voice_webhook_params(
    call_sid: str | None = None,
    *,
    account_sid: str = DEFAULT_ACCOUNT_SID,
    from_: str = "+821012345678",
    to: str = "+827012345678",
    call_status: str = "ringing",
    direction: str = "inbound",
) -> dict[str, str]:
    """Form fields of an inbound-call voice webhook, as Twilio posts them."""
    return {
        "AccountSid": account_sid,
        "ApiVersion": "2010-04-01",
        "CallSid": call_sid or new_sid("CA"),
        "CallStatus": call_status,
        "Called": to,
        "Caller": from_,
        "Direction": direction,
        "From": from_,
        "FromCountry": "KR",
        "To": to,
        "ToCountry": "KR",
    }


def stream_action_params(
    call_sid: str,
    *,
    stream_sid: str | None = None,
    account_sid: str = DEFAULT_ACCOUNT_SID,
    from_: str = "+821012345678",
    to: str = "+827012345678",
    call_status: str = "in-progress",
    direction: str = "inbound",
) -> dict[str, str]:
    """Form fields Twilio posts to a ``<Connect>``'s ``action`` when its ``<Stream>`` ended: its standard
    call parameters (the call is still up: ``in-progress``) and the stream's SID."""
    params = voice_webhook_params(call_sid, account_sid=account_sid, from_=from_, to=to, call_status=call_status,
                                  direction=direction)
    if stream_sid:
        params["StreamSid"] = stream_sid
    return params


async def post_voice_webhook(
    base_http_url: str,
    public_url: str | None = None,
    params: Mapping[str, str] | None = None,
    auth_token: str | None = None,
    *,
    path: str = "/twilio/voice",
    fill_defaults: bool = True,
    client: httpx.AsyncClient | None = None,
    timeout: float = 10.0,
) -> httpx.Response:
    """POST the voice webhook form to ``{base_http_url}{path}`` like Twilio does.

    ``public_url`` is the URL Twilio would have called (what the signature covers);
    it defaults to the URL actually posted to. With ``fill_defaults`` the missing
    fields come from :func:`voice_webhook_params`. The signature header is added
    only when ``auth_token`` is given.
    """
    fields: dict[str, str] = {}
    if fill_defaults:
        fields.update(voice_webhook_params((params or {}).get("CallSid")))
    fields.update({k: str(v) for k, v in (params or {}).items()})
    url = base_http_url.rstrip("/") + path
    headers = {"User-Agent": "TwilioProxy/1.1"}
    if auth_token is not None:
        headers["X-Twilio-Signature"] = sign_twilio_request(public_url or url, fields, auth_token)
    if client is not None:
        return await client.post(url, data=fields, headers=headers, timeout=timeout)
    async with httpx.AsyncClient(timeout=timeout, verify=tls_context()) as own:
        return await own.post(url, data=fields, headers=headers)


def parse_twiml_stream(twiml: str) -> tuple[str, dict[str, str]]:
    """``(url, {name: value})`` of ``<Response><Connect><Stream>`` and its ``<Parameter>``s.

    Raises ``ValueError`` when the TwiML is not a bidirectional ``<Connect><Stream>``.
    """
    try:
        root = ET.fromstring(twiml.strip())
    except ET.ParseError as exc:
        raise ValueError(f"invalid TwiML: {exc}") from exc
    if root.tag != "Response":
        raise ValueError(f"TwiML root is <{root.tag}>, expected <Response>")
    stream = root.find("./Connect/Stream")
    if stream is None:
        raise ValueError("TwiML has no <Connect><Stream>")
    url = stream.get("url")
    if not url:
        raise ValueError("<Stream> has no url attribute")
    parameters: dict[str, str] = {}
    for param in stream.findall("./Parameter"):
        name = param.get("name")
        if name is None:
            raise ValueError("<Parameter> without a name")
        parameters[name] = param.get("value", "")
    return url, parameters


# --------------------------------------------------------------------------- call


@dataclass
class _Outgoing:
    """Audio queued on the caller's line."""

    frames: list[bytes]
    realtime: bool
    done: asyncio.Future[None]
    pos: int = 0


@dataclass
class _Received:
    """Per-call receive state."""

    messages: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    by_event: dict[str, list[tuple[float, dict[str, Any]]]] = field(default_factory=dict)
    media: list[tuple[float, bytes]] = field(default_factory=list)
    media_bytes: int = 0
    last_media_t: float | None = None
    media_times: list[float] = field(default_factory=list)
    audible: list[float] = field(default_factory=list)  # arrival times of non-silent media
    marks: list[tuple[float, str]] = field(default_factory=list)
    clears: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class TwilioCallSimulator:
    """One simulated Twilio call on a Media Streams WebSocket.

    ``async with TwilioCallSimulator(ws_url, call_sid, custom_parameters={...}) as call:``
    connects and sends ``connected`` + ``start``; leaving the block hangs up (``stop``)
    if the call is still up and closes the socket.
    """

    def __init__(
        self,
        ws_url: str,
        call_sid: str | None = None,
        stream_sid: str | None = None,
        custom_parameters: Mapping[str, str] | None = None,
        media_format: Mapping[str, Any] | None = None,
        account_sid: str = DEFAULT_ACCOUNT_SID,
        *,
        continuous: bool = True,
        additional_headers: Mapping[str, str] | None = None,
        auth_token: str | None = None,
        signature_url: str | None = None,
        open_timeout: float = 10.0,
        close_timeout: float = 5.0,
        bot_silence_rms: float = 50.0,
    ) -> None:
        """Configure the call; nothing is sent until ``__aenter__``/``connect``.

        ``media_format`` is only announced in ``start`` (audio sent is always μ-law
        8 kHz). ``auth_token`` adds an ``X-Twilio-Signature`` header to the WebSocket
        handshake, computed over ``signature_url`` (default ``ws_url``) and no params.
        ``close_timeout`` bounds the wait for the server to close after ``stop``
        when leaving the ``async with`` block. Server media whose PCM RMS is at most
        ``bot_silence_rms`` (default 50, about -56 dBFS: codec noise, not speech) does
        not count as bot audio for the ``audible=True`` waits.
        """
        self.ws_url = ws_url
        self.call_sid = call_sid or new_sid("CA")
        self.stream_sid = stream_sid or new_sid("MZ")
        self.account_sid = account_sid
        self.custom_parameters: dict[str, str] = dict(custom_parameters or {})
        self.media_format: dict[str, Any] = dict(media_format or DEFAULT_MEDIA_FORMAT)
        self.continuous = continuous
        self._headers: dict[str, str] = dict(additional_headers or {})
        if auth_token is not None:
            self._headers["X-Twilio-Signature"] = sign_twilio_request(
                signature_url or ws_url, {}, auth_token
            )
        self._open_timeout = open_timeout
        self._close_timeout = close_timeout

        self._ws: ClientConnection | None = None
        self._send_lock = asyncio.Lock()
        self._seq = 0
        self._chunk = 0
        self._t0 = 0.0  # monotonic time the start message was sent
        self._frame_index = 0  # next media frame's slot on the line clock
        self._max_send_lag = 0.0
        # Episodes of lateness: [seconds after start when the line fell behind, worst lag (s)].
        self._send_stalls: list[list[float]] = []
        self._behind = False
        self._stopping = False
        self._stop_sent = False
        self._closed = asyncio.Event()
        self._close_code: int | None = None
        self._close_reason: str | None = None
        self._closed_at: float | None = None

        self._rx = _Received()
        self._cond = asyncio.Condition()
        self._play_end = 0.0  # monotonic time the received audio finishes playing
        self._audible_end = 0.0  # ... and its last audible part
        self.bot_silence_rms = bot_silence_rms
        self._pending_marks: collections.deque[tuple[float, str]] = collections.deque()
        self._marks_wakeup = asyncio.Event()
        self._echoed_marks: list[tuple[float, str]] = []
        self._out: collections.deque[_Outgoing] = collections.deque()
        self._out_wakeup = asyncio.Event()
        self._resampler = create_file_resampler()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> TwilioCallSimulator:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Open the WebSocket, send ``connected`` and ``start``, start the background tasks."""
        if self._ws is not None:
            raise RuntimeError("already connected")
        ws = await websockets.connect(
            self.ws_url,
            additional_headers=self._headers or None,
            open_timeout=self._open_timeout,
            compression=None,
            max_size=None,
        )
        self._ws = ws
        try:
            await self._send_handshake()
        except BaseException:
            await self._close_ws()
            raise
        loop = asyncio.get_running_loop()
        name = self.call_sid[-6:]
        self._tasks = [
            loop.create_task(self._receiver(), name=f"twilio-sim-rx-{name}"),
            loop.create_task(self._line(), name=f"twilio-sim-line-{name}"),
            loop.create_task(self._mark_player(), name=f"twilio-sim-marks-{name}"),
        ]

    async def _send_handshake(self) -> None:
        await self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"}, seq=False)
        start = {
            "accountSid": self.account_sid,
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "tracks": ["inbound"],
            "customParameters": self.custom_parameters,
            "mediaFormat": self.media_format,
        }
        await self._send({"event": "start", "start": start})
        self._t0 = time.monotonic()

    async def stop(self, timeout: float = 5.0) -> bool:
        """Hang up: send ``stop`` and wait for the server to close the socket.

        Returns True when the server closed it within ``timeout``; otherwise closes
        it from this side and returns False. Queued audio is dropped.
        """
        self._stopping = True
        self._fail_outgoing(CallClosed("call stopped"))
        if not self._closed.is_set() and not self._stop_sent:
            with contextlib.suppress(CallClosed):
                await self._send(
                    {
                        "event": "stop",
                        "stop": {"accountSid": self.account_sid, "callSid": self.call_sid},
                    }
                )
        try:
            await asyncio.wait_for(self._closed.wait(), timeout)
            return True
        except TimeoutError:
            await self._close_ws()
            return False

    async def aclose(self) -> None:
        """Stop the call if it is still up, close the socket and end the background tasks."""
        try:
            if self._ws is not None and not self._closed.is_set():
                await self.stop(self._close_timeout)
        finally:
            self._stopping = True
            await self._close_ws()
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._fail_outgoing(CallClosed("call closed"))

    async def _close_ws(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 2.0)
        if self._tasks and not self._tasks[0].done():
            # The receiver records the close code; give it a moment to see the close.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), 1.0)
        await self._mark_closed()

    # ------------------------------------------------------------------ sending

    async def _send(self, msg: dict[str, Any], *, seq: bool = True) -> None:
        """Send one JSON message, numbering it (``sequenceNumber``, ``streamSid``)."""
        if self._ws is None or self._closed.is_set():
            raise CallClosed("WebSocket is closed")
        async with self._send_lock:
            if self._stop_sent:
                raise CallClosed("call stopped")  # nothing follows Twilio's stop
            self._stop_sent = msg["event"] == "stop"
            if seq:
                self._seq += 1
                msg = {"event": msg["event"], "sequenceNumber": str(self._seq), **msg}
                msg["streamSid"] = self.stream_sid
            try:
                await self._ws.send(json.dumps(msg))
            except websockets.ConnectionClosed as exc:
                raise CallClosed(f"WebSocket closed: {exc}") from exc

    async def _send_media(self, ulaw: bytes) -> None:
        self._chunk += 1
        await self._send(
            {
                "event": "media",
                "media": {
                    "track": "inbound",
                    "chunk": str(self._chunk),
                    "timestamp": str(round(self._frame_index * FRAME_SECONDS * 1000)),
                    "payload": base64.b64encode(ulaw).decode("ascii"),
                },
            }
        )

    async def send_audio(self, pcm16: bytes, sample_rate: int, realtime: bool = True) -> None:
        """Say ``pcm16`` (mono PCM16) on the line: 8 kHz μ-law, 20 ms ``media`` messages.

        Real time: returns once the last frame has been sent, each frame going out when
        its 20 ms have elapsed on the line clock. ``realtime=False`` sends the frames at
        once (their timestamps still advance 20 ms each; the line then idles until the
        wall clock catches up). Raises :class:`CallClosed` if the call ends first.
        """
        if sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        pcm16 = pcm16[: len(pcm16) // 2 * 2]
        ulaw = await pcm_to_ulaw(pcm16, sample_rate, SAMPLE_RATE, self._resampler)
        await self._enqueue(ulaw, realtime)

    async def send_silence(self, secs: float, realtime: bool = True) -> None:
        """Send ``secs`` of μ-law silence (0xFF), paced in real time."""
        await self._enqueue(bytes([ULAW_SILENCE]) * round(secs * SAMPLE_RATE), realtime)

    async def send_wav(self, path: str | PathLike[str], realtime: bool = True) -> float:
        """Send a WAV file (any rate and format ``bot.core.wav.read_wav`` reads); returns its duration in seconds."""
        pcm, rate = read_wav(path)
        await self.send_audio(pcm, rate, realtime)
        return len(pcm) / 2 / rate

    async def send_dtmf(self, digit: str) -> None:
        """Send a ``dtmf`` message (a key press on the caller's keypad)."""
        await self._send({"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": digit}})

    async def send_mark(self, name: str) -> None:
        """Send a ``mark`` message with ``name`` (as Twilio does when echoing a mark)."""
        await self._send({"event": "mark", "mark": {"name": name}})

    async def send_raw(self, data: str | bytes) -> None:
        """Send one WebSocket message as is: no numbering, no checks (hostile or broken clients)."""
        if self._ws is None or self._closed.is_set():
            raise CallClosed("WebSocket is closed")
        async with self._send_lock:
            try:
                await self._ws.send(data)
            except websockets.ConnectionClosed as exc:
                raise CallClosed(f"WebSocket closed: {exc}") from exc

    @property
    def sequence_number(self) -> int:
        """The ``sequenceNumber`` of the last numbered message sent."""
        return self._seq

    async def _enqueue(self, ulaw: bytes, realtime: bool) -> None:
        if self._stopping or self._closed.is_set() or self._ws is None:
            raise CallClosed("call is not up")
        if not ulaw:
            return
        pad = (-len(ulaw)) % FRAME_BYTES
        ulaw += bytes([ULAW_SILENCE]) * pad
        frames = [ulaw[i : i + FRAME_BYTES] for i in range(0, len(ulaw), FRAME_BYTES)]
        item = _Outgoing(frames, realtime, asyncio.get_running_loop().create_future())
        self._out.append(item)
        self._out_wakeup.set()
        await item.done

    def _fail_outgoing(self, exc: BaseException) -> None:
        while self._out:
            item = self._out.popleft()
            if not item.done.done():
                item.done.set_exception(exc)
                item.done.exception()  # mark retrieved: the sender may have gone away

    async def _line(self) -> None:
        """The caller's line: one frame per 20 ms slot on an absolute clock."""
        try:
            while not self._stopping and not self._closed.is_set():
                while self._out and self._out[0].done.done():  # cancelled by the caller
                    self._out.popleft()
                head = self._out[0] if self._out else None
                if head is None and not self.continuous:
                    self._out_wakeup.clear()
                    await self._out_wakeup.wait()
                    # Resume on the wall clock: idle slots are skipped, not caught up.
                    slot = int((time.monotonic() - self._t0) / FRAME_SECONDS)
                    self._frame_index = max(self._frame_index, slot)
                    continue
                if head is None or head.realtime:
                    due = self._t0 + (self._frame_index + 1) * FRAME_SECONDS
                    delay = due - time.monotonic()
                    if delay > 0:
                        self._behind = False
                        await asyncio.sleep(delay)
                    else:
                        self._max_send_lag = max(self._max_send_lag, -delay)
                        if not self._behind:
                            self._behind = True
                            self._send_stalls.append([due - self._t0, 0.0])
                        self._send_stalls[-1][1] = max(self._send_stalls[-1][1], -delay)
                    if self._stopping:
                        break
                    while self._out and self._out[0].done.done():
                        self._out.popleft()
                    head = self._out[0] if self._out else None
                    if head is None and not self.continuous:
                        continue
                if head is None:
                    frame = SILENCE_FRAME
                else:
                    frame = head.frames[head.pos]
                    head.pos += 1
                    if head.pos == len(head.frames):
                        self._out.popleft()
                await self._send_media(frame)
                self._frame_index += 1
                if head is not None and head.pos == len(head.frames) and not head.done.done():
                    head.done.set_result(None)
                if head is not None and not head.realtime:
                    await asyncio.sleep(0)  # let the receiver run during bursts
        except CallClosed as exc:
            self._fail_outgoing(exc)
        except Exception as exc:  # pragma: no cover - surfaced through send_audio
            self._fail_outgoing(CallClosed(f"line task failed: {exc!r}"))
            raise

    # ------------------------------------------------------------------ receiving

    async def _receiver(self) -> None:
        assert self._ws is not None
        try:
            async for raw in self._ws:
                await self._handle(time.monotonic(), raw)
        except websockets.ConnectionClosed:
            pass
        finally:
            await self._mark_closed()

    async def _mark_closed(self) -> None:
        if self._closed.is_set():
            return
        if self._ws is not None:
            self._close_code = self._ws.close_code
            self._close_reason = self._ws.close_reason
        self._closed_at = time.monotonic()
        self._closed.set()
        self._out_wakeup.set()
        self._fail_outgoing(CallClosed(f"WebSocket closed ({self._close_code})"))
        async with self._cond:
            self._cond.notify_all()

    async def _handle(self, t: float, raw: str | bytes) -> None:
        rx = self._rx
        if isinstance(raw, bytes):
            rx.errors.append(f"binary frame ({len(raw)} bytes)")
            return
        try:
            msg = json.loads(raw)
        except json.JSONDecodeError:
            rx.errors.append(f"invalid JSON: {raw[:80]!r}")
            return
        if not isinstance(msg, dict):
            rx.errors.append(f"not a JSON object: {raw[:80]!r}")
            return
        event = str(msg.get("event"))
        rx.messages.append((t, event, msg))
        rx.by_event.setdefault(event, []).append((t, msg))
        if event in ("media", "mark", "clear") and msg.get("streamSid") != self.stream_sid:
            rx.errors.append(f"{event}: streamSid {msg.get('streamSid')!r} != {self.stream_sid!r}")
        if event == "media":
            await self._on_media(t, msg)
        elif event == "mark":
            name = (msg.get("mark") or {}).get("name")
            if not isinstance(name, str):
                rx.errors.append("mark without a name")
            else:
                rx.marks.append((t, name))
                # Played back once the audio queued before it has played.
                self._pending_marks.append((max(t, self._play_end), name))
                self._marks_wakeup.set()
        elif event == "clear":
            rx.clears.append(t)
            self._play_end = t  # buffered audio dropped; pending marks return now
            self._audible_end = min(self._audible_end, t)
            self._marks_wakeup.set()
            await self._flush_marks()
        else:
            rx.errors.append(f"unexpected event {event!r}")
        async with self._cond:
            self._cond.notify_all()

    async def _on_media(self, t: float, msg: dict[str, Any]) -> None:
        payload = (msg.get("media") or {}).get("payload")
        if not isinstance(payload, str):
            self._rx.errors.append("media without a payload")
            return
        try:
            ulaw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            self._rx.errors.append("media payload is not base64")
            return
        pcm = await ulaw_to_pcm(ulaw, SAMPLE_RATE, SAMPLE_RATE, self._resampler)
        self._rx.media.append((t, pcm))
        self._rx.media_times.append(t)
        self._rx.media_bytes += len(ulaw)
        self._rx.last_media_t = t
        self._play_end = max(t, self._play_end) + len(ulaw) / SAMPLE_RATE
        if rms(pcm) > self.bot_silence_rms:
            self._rx.audible.append(t)
            self._audible_end = self._play_end

    async def _mark_player(self) -> None:
        """Echo server marks when the playback clock reaches them."""
        while True:
            if not self._pending_marks:
                self._marks_wakeup.clear()
                await self._marks_wakeup.wait()
                continue
            due, _ = self._pending_marks[0]
            delay = due - time.monotonic()
            if delay > 0:
                self._marks_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._marks_wakeup.wait(), delay)
                continue
            await self._flush_marks(until=time.monotonic())

    async def _flush_marks(self, until: float | None = None) -> None:
        """Echo pending marks (all, or those due by ``until``) in order."""
        while self._pending_marks and (until is None or self._pending_marks[0][0] <= until):
            _, name = self._pending_marks.popleft()
            if self._stopping or self._closed.is_set():
                continue
            with contextlib.suppress(CallClosed):
                await self.send_mark(name)
                self._echoed_marks.append((time.monotonic(), name))

    # ------------------------------------------------------------------ waiting

    async def _wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every message or close)."""
        async with self._cond:
            try:
                return await asyncio.wait_for(
                    self._cond.wait_for(lambda: predicate() or self._closed.is_set()), timeout
                )
            except TimeoutError:
                raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}") from None

    async def wait_for_media(
        self, timeout: float = 10.0, after: float | None = None, audible: bool = True
    ) -> float:
        """Arrival time of the first server ``media`` received after ``after`` (monotonic).

        ``after=None`` counts any media of the call. With ``audible`` (default) media at
        or below ``bot_silence_rms`` (digital silence) is ignored. Raises
        :class:`CallClosed` if the socket closes first, ``TimeoutError`` on timeout.
        """
        ts = self._rx.audible if audible else self._rx.media_times

        def found() -> float | None:
            if not ts or (after is not None and ts[-1] <= after):
                return None
            return ts[0] if after is None else ts[bisect.bisect_right(ts, after)]

        await self._wait(found, timeout, "media")
        t = found()
        if t is None:
            raise CallClosed(f"WebSocket closed ({self._close_code}) before media arrived")
        return t

    async def wait_for_silence_from_bot(
        self, gap: float = 0.5, timeout: float = 30.0, audible: bool = True
    ) -> float:
        """Wait until the bot has been silent for ``gap`` seconds; return when it went quiet.

        The bot's audio ends when its last received media has finished playing (playback
        at real time from arrival, cut short by ``clear``); with ``audible`` (default)
        media at or below ``bot_silence_rms`` does not count as audio. If nothing is
        playing this waits ``gap`` from the call of this method. Returns at once if the
        socket closes.
        """
        started = time.monotonic()
        deadline = started + timeout
        async with self._cond:
            while True:
                if audible:
                    end = max(started, self._audible_end)
                else:
                    end = max(started, self._rx.last_media_t or 0.0, self._play_end)
                now = time.monotonic()
                if self._closed.is_set() or now >= end + gap:
                    return min(end, now)
                if now >= deadline:
                    raise TimeoutError(
                        f"bot still sending audio after {timeout:.1f}s "
                        f"({self._rx.media_bytes / SAMPLE_RATE:.2f}s received)"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), min(end + gap, deadline) - now)

    async def wait_for_event(
        self, event: str, timeout: float = 10.0, after: float | None = None
    ) -> tuple[float, dict[str, Any]]:
        """``(t, msg)`` of the first server message with this ``event`` after ``after``."""

        def found() -> tuple[float, dict[str, Any]] | None:
            hits = self._rx.by_event.get(event)
            if not hits or (after is not None and hits[-1][0] <= after):
                return None
            if after is None:
                return hits[0]
            return hits[bisect.bisect_right(hits, after, key=lambda h: h[0])]

        await self._wait(found, timeout, f"event {event!r}")
        hit = found()
        if hit is None:
            raise CallClosed(f"WebSocket closed ({self._close_code}) before {event!r}")
        return hit

    async def wait_closed(self, timeout: float = 10.0) -> int | None:
        """Wait for the WebSocket to close; returns the close code."""
        try:
            await asyncio.wait_for(self._closed.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"socket still open after {timeout:.1f}s") from None
        return self._close_code

    # ------------------------------------------------------------------ results

    @property
    def received(self) -> list[tuple[float, str, dict[str, Any]]]:
        """Every JSON message from the server: ``(monotonic time, event, message)``."""
        return self._rx.messages

    def media_audio(self, after: float | None = None, before: float | None = None) -> bytes:
        """Received bot audio as PCM16 @ 8 kHz (optionally only media arriving in a window)."""
        return b"".join(
            pcm
            for t, pcm in self._rx.media
            if (after is None or t > after) and (before is None or t <= before)
        )

    @property
    def media_times(self) -> list[float]:
        """Arrival time of each received ``media`` message."""
        return list(self._rx.media_times)

    @property
    def audible_media_times(self) -> list[float]:
        """Arrival times of received media louder than ``bot_silence_rms``."""
        return list(self._rx.audible)

    @property
    def media_seconds(self) -> float:
        """Seconds of bot audio received."""
        return self._rx.media_bytes / SAMPLE_RATE

    @property
    def clears(self) -> list[float]:
        """Arrival times of server ``clear`` messages."""
        return self._rx.clears

    @property
    def marks(self) -> list[tuple[float, str]]:
        """Server ``mark`` messages: ``(arrival time, name)``."""
        return self._rx.marks

    @property
    def echoed_marks(self) -> list[tuple[float, str]]:
        """Marks echoed back to the server: ``(send time, name)``."""
        return self._echoed_marks

    @property
    def protocol_errors(self) -> list[str]:
        """Server messages Twilio would reject or ignore (bad JSON, wrong streamSid, …)."""
        return self._rx.errors

    def heard_intervals(self) -> list[tuple[float, float]]:
        """When the caller heard the bot: ``(start, end)`` monotonic intervals of audible playback.

        Each media message plays at real time from its arrival or from the end of what was
        queued before it; a ``clear`` cuts the queue at its arrival. Media at or below
        ``bot_silence_rms`` is silence. Adjacent audible frames are merged.
        """
        events = [(t, 1, pcm) for t, pcm in self._rx.media] + [(t, 0, b"") for t in self._rx.clears]
        events.sort(key=lambda e: (e[0], e[1]))
        out: list[list[float]] = []
        play_end = 0.0
        for t, is_media, pcm in events:
            if not is_media:
                play_end = t
                while out and out[-1][0] >= t:
                    out.pop()
                if out and out[-1][1] > t:
                    out[-1][1] = t
                continue
            start = max(t, play_end)
            play_end = start + len(pcm) / 2 / SAMPLE_RATE
            if rms(pcm) <= self.bot_silence_rms:
                continue
            if out and start - out[-1][1] < 1e-6 + FRAME_SECONDS / 2:
                out[-1][1] = play_end
            else:
                out.append([start, play_end])
        return [(a, b) for a, b in out]

    @property
    def playback_end(self) -> float:
        """Monotonic time the bot audio received so far finishes playing."""
        return self._play_end

    @property
    def started_at(self) -> float:
        """Monotonic time the ``start`` message was sent (the stream's time zero)."""
        return self._t0

    @property
    def frames_sent(self) -> int:
        """Number of caller ``media`` messages sent."""
        return self._chunk

    @property
    def max_send_lag(self) -> float:
        """Worst lateness (s) of a real-time frame against its slot (simulator overload)."""
        return self._max_send_lag

    def send_stalls(self, min_lag: float = 0.0) -> list[tuple[float, float]]:
        """Each time the line fell behind its clock by over ``min_lag`` s: (seconds after the start
        message, worst lag in s). Where a stall fell (silence or speech) tells overload from a hiccup."""
        return [(at, lag) for at, lag in self._send_stalls if lag > min_lag]

    @property
    def closed(self) -> bool:
        """Whether the WebSocket is closed."""
        return self._closed.is_set()

    @property
    def closed_at(self) -> float | None:
        """Monotonic time the close was seen."""
        return self._closed_at

    @property
    def close_code(self) -> int | None:
        """WebSocket close code (None while open, or if no close frame was received)."""
        return self._close_code

    @property
    def close_reason(self) -> str | None:
        """WebSocket close reason."""
        return self._close_reason


# --------------------------------------------------------------------------- a whole call


@dataclass
class StreamLeg:
    """One ``<Connect><Stream>`` of a whole call (issue 46: a resumed call has several)."""

    index: int
    sim: TwilioCallSimulator
    action: str | None  # the <Connect>'s action URL, as the TwiML gave it
    requested_at: float  # monotonic: the TwiML that opened it was asked for (the webhook, or the last action)
    connected_at: float = 0.0  # its start message was sent
    closed_at: float | None = None  # Twilio saw the socket close
    action_answered_at: float | None = None  # the action's TwiML came back


class TwilioCall:
    """One call as Twilio runs it: the voice webhook, the TwiML it answers, and every verb after.

    ``<Connect><Stream>`` opens a media stream (a ``TwilioCallSimulator``, ``stream``); when the stream
    closes and the caller has not hung up, Twilio requests the ``<Connect>``'s ``action`` (POST, signed
    like every webhook, with the call's parameters and the stream's SID) and runs the TwiML it gets:
    another ``<Connect><Stream>``, ``<Say>`` (recorded in ``said``), ``<Dial>`` (``dialed``: the call is
    with a person then), ``<Hangup>`` or ``<Reject>`` (the call ends). A ``<Connect>`` without an action
    ends the call when its stream closes, as Twilio does. ``gaps()``: for each new stream after a closed
    one, the silence the caller heard across it (the last audible bot audio of the stream that ended, or
    its close, to the first audible audio of the next), the action's round trip included.

    URLs in the TwiML name the public host; they are requested at ``http_base`` / ``ws_base`` instead,
    and signed over the public URL with ``auth_token`` (as Twilio signs).
    """

    def __init__(self, http_base: str, *, public_host: str, auth_token: str, ws_base: str | None = None,
                 call_sid: str | None = None, from_: str = "+821012345678", to: str = "+827012345678",
                 account_sid: str = DEFAULT_ACCOUNT_SID, stream_parameters: Mapping[str, str] | None = None,
                 first_stream_parameters: Mapping[str, str] | None = None,
                 http: httpx.AsyncClient | None = None, max_streams: int = 8, **sim_kwargs: Any) -> None:
        """``stream_parameters``: added to every stream's customParameters (a test lab's ``stt_script``);
        ``first_stream_parameters``: to the first only (a test lab's ``fault``)."""
        self.http_base = http_base.rstrip("/")
        self.ws_base = (ws_base or self.http_base.replace("http", "ws", 1)).rstrip("/")
        self.public_host = public_host
        self.auth_token = auth_token
        self.call_sid = call_sid or new_sid("CA")
        self.account_sid, self.from_, self.to = account_sid, from_, to
        self.stream_parameters = dict(stream_parameters or {})
        self.first_stream_parameters = dict(first_stream_parameters or {})
        self.max_streams = max_streams
        self._sim_kwargs = sim_kwargs
        self._http = http
        self.legs: list[StreamLeg] = []
        self.said: list[str] = []  # <Say> texts, in order
        self.dialed: str | None = None  # the number a <Dial> connected the caller to
        self.twiml: list[tuple[float, str]] = []  # every TwiML document run, with when it came
        self.ended = asyncio.Event()
        self.end: str | None = None  # hangup | dial | reject | no_action | caller | error: ...
        self.ended_at: float | None = None
        self._new_stream = asyncio.Event()
        self._caller_hung_up = False
        self._watch: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> TwilioCall:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.hang_up()

    async def start(self) -> None:
        """Ring: post the voice webhook and run its TwiML (a stream is open when this returns, or the call ended)."""
        params = voice_webhook_params(self.call_sid, account_sid=self.account_sid, from_=self.from_, to=self.to)
        t = time.monotonic()
        twiml = await self._post(f"https://{self.public_host}/twilio/voice", params)
        await self._run(twiml, t)

    async def hang_up(self, timeout: float = 5.0) -> None:
        """The caller hangs up: ``stop`` on the open stream; no action is asked after it."""
        self._caller_hung_up = True
        leg = self.legs[-1] if self.legs else None
        if leg is not None and not leg.sim.closed:
            await leg.sim.stop(timeout)
        if leg is not None:
            await leg.sim.aclose()
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch
        self._finish("caller")

    async def drop_stream(self) -> None:
        """The open stream's socket breaks between Twilio and the bot (a network reset): it closes
        without Twilio's ``stop``, and Twilio asks the ``<Connect>``'s action, the call still up."""
        leg = self.legs[-1]
        if leg.sim._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(leg.sim._ws.close(code=1001, reason="network reset"), 2.0)

    # ------------------------------------------------------------------ Twilio's side

    async def _post(self, public_url: str, params: Mapping[str, str]) -> str:
        parts = public_url.split("/", 3)  # https:, '', host, path?query
        url = f"{self.http_base}/{parts[3] if len(parts) > 3 else ''}"
        headers = {"User-Agent": "TwilioProxy/1.1",
                   "X-Twilio-Signature": sign_twilio_request(public_url, params, self.auth_token)}
        if self._http is not None:
            resp = await self._http.post(url, data=dict(params), headers=headers, timeout=15.0)
        else:
            async with httpx.AsyncClient(timeout=15.0, verify=tls_context()) as client:  # Twilio's 15 s limit (11205)
                resp = await client.post(url, data=dict(params), headers=headers)
        if resp.status_code != 200:
            raise CallClosed(f"{public_url.split('?')[0]} answered HTTP {resp.status_code}: {resp.text[:120]}")
        return resp.text

    async def _run(self, twiml: str, requested_at: float) -> None:
        """Run one TwiML document's verbs in order, as Twilio does."""
        self.twiml.append((time.monotonic(), twiml))
        root = ET.fromstring(twiml.strip())
        if root.tag != "Response":
            raise ValueError(f"TwiML root is <{root.tag}>, expected <Response>")
        for verb in root:
            if verb.tag == "Say":
                self.said.append(verb.text or "")
            elif verb.tag == "Dial":
                number = verb.find("./Number")
                self.dialed = (number.text if number is not None else verb.text or "").strip()
                self._finish("dial")
                return
            elif verb.tag in ("Hangup", "Reject"):
                self._finish(verb.tag.lower())
                return
            elif verb.tag == "Connect":
                await self._connect(verb, requested_at)
                return
        self._finish("hangup")  # no verb left: Twilio ends the call

    async def _connect(self, connect: ET.Element, requested_at: float) -> None:
        if len(self.legs) >= self.max_streams:
            self._finish(f"error: more than {self.max_streams} streams")
            return
        stream = connect.find("./Stream")
        if stream is None or not stream.get("url"):
            self._finish("error: <Connect> without a <Stream url>")
            return
        url = stream.get("url", "")
        params = {p.get("name", ""): p.get("value", "") for p in stream.findall("./Parameter")}
        ws_url = self.ws_base + "/" + url.split("/", 3)[3]
        extra = {**self.stream_parameters, **(self.first_stream_parameters if not self.legs else {})}
        sim = TwilioCallSimulator(ws_url, self.call_sid, custom_parameters={**params, **extra},
                                  account_sid=self.account_sid, **self._sim_kwargs)
        leg = StreamLeg(index=len(self.legs), sim=sim, action=connect.get("action"), requested_at=requested_at)
        await sim.connect()
        leg.connected_at = sim.started_at
        self.legs.append(leg)
        self._new_stream.set()
        self._watch = asyncio.get_running_loop().create_task(self._when_closed(leg), name=f"twilio-call-{leg.index}")

    async def _when_closed(self, leg: StreamLeg) -> None:
        await leg.sim.wait_closed(timeout=1e9)
        leg.closed_at = leg.sim.closed_at or time.monotonic()
        if self._caller_hung_up:
            return
        if not leg.action:
            self._finish("no_action")
            return
        params = stream_action_params(self.call_sid, stream_sid=leg.sim.stream_sid, account_sid=self.account_sid,
                                      from_=self.from_, to=self.to)
        try:
            twiml = await self._post(leg.action, params)
            leg.action_answered_at = time.monotonic()
            self._new_stream.clear()
            await self._run(twiml, leg.closed_at)
        except Exception as e:  # noqa: BLE001 - Twilio would end the call: the test sees why
            self._finish(f"error: {type(e).__name__}: {e}"[:200])

    def _finish(self, why: str) -> None:
        if not self.ended.is_set():
            self.end, self.ended_at = why, time.monotonic()
            self.ended.set()
            self._new_stream.set()

    # ------------------------------------------------------------------ the caller's side

    @property
    def stream(self) -> TwilioCallSimulator:
        """The media stream open now (the last one)."""
        if not self.legs:
            raise CallClosed("no stream was opened")
        return self.legs[-1].sim

    async def wait_next_stream(self, after: int, timeout: float = 15.0) -> TwilioCallSimulator:
        """The stream opened after leg ``after`` (e.g. ``len(call.legs) - 1`` before a fault); raises
        ``CallClosed`` when the call ended instead."""
        deadline = time.monotonic() + timeout
        while not self.legs or self.legs[-1].index <= after:
            if self.ended.is_set():
                raise CallClosed(f"the call ended ({self.end}) before a new stream")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no new stream within {timeout:.1f}s")
            self._new_stream.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new_stream.wait(), min(left, 0.5))
        return self.legs[-1].sim

    async def wait_ended(self, timeout: float = 15.0) -> str | None:
        await asyncio.wait_for(self.ended.wait(), timeout)
        return self.end

    def gaps(self) -> list[dict[str, float | None]]:
        """For each stream after the first: the caller's silence across the change, in seconds.

        ``silence``: from the end of the last audible bot audio of the stream before (or its close,
        when it was quiet) to the first audible audio of this one (None: none heard yet).
        ``action_s``: the close to the action's TwiML; ``connect_s``: that TwiML to the new stream's start;
        ``dead_s``: the close to the new stream's start (no stream: what the caller says is lost).
        """
        out: list[dict[str, float | None]] = []
        for before, leg in zip(self.legs, self.legs[1:], strict=False):
            heard = before.sim.heard_intervals()
            closed = before.closed_at or before.sim.closed_at or 0.0
            quiet_from = min(heard[-1][1], closed) if heard else closed
            first = leg.sim.audible_media_times[0] if leg.sim.audible_media_times else None
            out.append({
                "silence": (first - quiet_from) if first is not None else None,
                "dead_s": leg.connected_at - closed,  # no stream at all: the caller's words go nowhere
                "action_s": (before.action_answered_at - closed) if before.action_answered_at else None,
                "connect_s": leg.connected_at - (before.action_answered_at or closed),
                "closed_at": closed,
                "first_audio_at": first,
            })
        return out
