"""WebRTC QA page: QA staff talk in a browser to exactly the bot that answers the phone.

``mount_webrtc`` adds to the one FastAPI app:

* ``GET /``: the QA page (``bot/transports/static/qa.html``, ``qa.js``, ``qa.css``; no CDN assets), with
  the staff desk's security headers (CSP, X-Frame-Options, Referrer-Policy, ...). It holds no token:
  the tester types the QA token into the page, which sends it as ``Authorization: Bearer``.
* ``POST /api/offer`` and ``PATCH /api/offer`` (trickle ICE): Pipecat's SmallWebRTC signalling.
  Every offer that would start a call takes one of the phone line's call slots first, within the
  QA page's own cap (``mount_webrtc``).

``mount_webrtc`` only assembles: the shared state is ``QAContext``, the routes are one router
(``qa_router``), and each call is a ``QACall``.

Each peer connection runs one call through ``build_call`` with ``qa=True``: the same processors,
config and records as a phone call; only the transport and the audio rates differ. The browser
sends 48 kHz Opus, which the transport resamples to 16 kHz (Whisper and Silero need 16 kHz); the
bot speaks at 24 kHz, Pipecat's default output rate: full-band for speech, half the bytes of 48 kHz
through the pipeline, and aiortc's Opus encoder resamples to 48 kHz whatever we give it. (The phone
path speaks at 8 kHz because Twilio is 8 kHz mu-law; a QA caller hears the wideband voice.)

Live data for the page rides the WebRTC data channel as RTVI ``server-message``s (the worker has
RTVI on when ``qa=True``)::

    {"label": "rtvi-ai", "type": "server-message", "data": {"qa": KIND, ...}}

    {"qa": "call", "call_id": "qa-…"}                                  on connect
    {"qa": "transcript", "turn": N, "text": "…"}                       each final STT segment
    {"qa": "reply", "turn": N, "text": "…"}                            each sentence, once played
    {"qa": "turn", "turn": N, "route": "llm", "intent": …, "flow": …,  when turn N's first audio
     "slots": {…}, "interrupted": false, "error": null,                goes out, and again each time
     "voice_to_voice_ms": 812.0, "stages_ms": {…},                     it changed (LLM answer done,
     "record": {TurnRecord.to_dict()}}                                 bot stopped, caller spoke)

Turn N is the index of the ``TurnRecord`` (0 is the greeting; a caller's turn and the bot's answer
share one record); the page updates its row in place. The route is often still "pending" at first
audio: the LLM stage sets route, intent and slots when its JSON is complete, after the first
sentence is already playing, hence the updates. The page also shows Pipecat's standard RTVI
speaking events.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    LLMFullResponseEndFrame,
    TranscriptionFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import (
    IceCandidate,
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport
from pipecat.workers.runner import WorkerRunner
from starlette.types import Scope

from bot.call.build import build_call
from bot.call.models import SharedModels
from bot.call.noise_filter import make_audio_in_filter
from bot.call.openings import speak_greeting
from bot.call.request import CallRequest
from bot.call.session import CallSession
from bot.config import Config, Secrets
from bot.desk.headers import CSP as DESK_CSP
from bot.line.admission import Line
from bot.line.callgate import CallGate
from bot.store.calls import CallLog
from bot.telemetry.latency import TurnRecord
from bot.telemetry.metrics import ProcessMetrics

STATIC_DIR = Path(__file__).resolve().parent / "static"
QA_IN_RATE = 16000  # Whisper and Silero
QA_OUT_RATE = 24000  # see the module docstring
# The staff desk's security headers (bot/desk/headers.py), with what the page needs on top: its script,
# its signalling requests and the microphone (the desk forbids all three).
QA_CSP = f"{DESK_CSP}; script-src 'self'; connect-src 'self'; media-src 'self' blob: mediastream:"
QA_HEADERS = {
    "Content-Security-Policy": QA_CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(self), geolocation=()",
    "Cache-Control": "no-store",
}
# Frames after which a turn record may have changed (route and slots come with the LLM's end).
_TURN_EVENTS = (LLMFullResponseEndFrame, BotStoppedSpeakingFrame, UserStartedSpeakingFrame, UserStoppedSpeakingFrame)


class QALiveObserver(BaseObserver):
    """Sends the caller's transcript, the bot's sentences and per-turn records to the QA page.

    Created before the call's worker exists (``build_call`` takes observers); ``attach`` it to the
    session once built. Reads the call's ``CallRecorder``; writes nothing to it except
    ``first_audio_out`` (set-once, the same instant ``TurnObserver`` stamps), because observers
    run in separate tasks and this one must not read the turn before that mark is there.
    """

    def __init__(self) -> None:
        # Every push, not only the first: a sentence counts as spoken when the output transport
        # passes its TTSTextFrame on, after the sentence's audio (the TTS runs ahead of playout,
        # and the sentences an interruption drops are never played).
        super().__init__(observe_every_push=True)
        self._session: CallSession | None = None
        self._sent: dict[int, str] = {}

    def attach(self, session: CallSession) -> None:
        self._session = session

    async def send(self, data: dict[str, Any]) -> None:
        session = self._session
        if session is None:
            return
        try:
            payload = json.loads(json.dumps(data, ensure_ascii=False, default=str))
            await session.worker.rtvi.send_server_message(payload)
        except Exception as e:  # the page is a view: never let it break the call
            logger.debug("QA page message not sent: {}", e)

    async def on_push_frame(self, data: FramePushed) -> None:
        if self._session is None:
            return
        frame = data.frame
        if isinstance(frame, TTSTextFrame):
            if isinstance(data.source, BaseOutputTransport) and frame.text.strip():
                rec = self._session.recorder
                await self.send({"qa": "reply", "turn": rec.current.index, "text": frame.text.strip()})
            return
        if not data.first_push:
            return
        # Broadcast frames (BotStarted/StoppedSpeaking) come in pairs: report the downstream one.
        if frame.broadcast_sibling_id is not None and data.direction != FrameDirection.DOWNSTREAM:
            return
        rec = self._session.recorder
        if isinstance(frame, TranscriptionFrame):
            # The caller's turn opened its record when it started (CallRecorder.user_turn_started).
            if frame.text.strip():
                await self.send({"qa": "transcript", "turn": rec.current.index, "text": frame.text.strip()})
        elif isinstance(frame, BotStartedSpeakingFrame):
            if rec.current.first_sentence is not None:  # same rule as TurnObserver
                rec.current.mark("first_audio_out", time.time())
            await self.send_turns()
        elif isinstance(frame, _TURN_EVENTS):
            await self.send_turns()

    async def send_turns(self) -> None:
        """The last two turn records, each when it changed since it was last sent.

        The previous one too: a barge-in marks it interrupted just as the next turn opens.
        """
        if self._session is None:
            return
        for rec in self._session.recorder.records[-2:]:
            await self._send_turn(rec)

    async def _send_turn(self, rec: TurnRecord) -> None:
        stages = rec.stages_ms()
        msg = {
            "qa": "turn",
            "turn": rec.index,
            "route": rec.route,
            "intent": rec.intent,
            "flow": rec.flow,
            "slots": dict(rec.slots),
            "interrupted": rec.interrupted,
            "error": rec.error,
            "voice_to_voice_ms": stages.get("voice_to_voice"),
            "stages_ms": stages,
            "record": rec.to_dict(),  # everything else the record holds (timestamps, STT, endpointing)
        }
        key = json.dumps(msg, sort_keys=True, default=str)
        if self._sent.get(rec.index) == key:
            return
        self._sent[rec.index] = key
        await self.send(msg)


class _SecureStaticFiles(StaticFiles):
    """The page's assets, with the page's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(QA_HEADERS)
        return response


def qa_token_ok(request: Request, want: str | None) -> bool:
    """True without a QA token configured, else when the request carries it in a header:
    ``Authorization: Bearer TOKEN`` (the page) or ``X-QA-Token: TOKEN`` (scripts). Never in the URL."""
    if not want:
        return True
    auth = request.headers.get("Authorization", "")
    got = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("X-QA-Token", "")
    return hmac.compare_digest(got.encode(), want.encode())


def mount_webrtc(
    app: FastAPI,
    *,
    config: Config,
    secrets: Secrets,
    models: SharedModels,
    gate: CallGate,
    metrics: ProcessMetrics,
    finish_call: Callable[[CallSession], None],
    line: Line | None = None,
    records: CallLog | None = None,
) -> None:
    """Add the QA page and its WebRTC signalling to ``app`` (see the module docstring).

    With ``secrets.qa_access_token`` set (env ``QA_ACCESS_TOKEN``), signalling needs it in a header
    (``qa_token_ok``): the page sits on the same public host as the Twilio webhook, and a QA call
    takes a call slot on the GPU. The page itself is served without it; the tester types it in.

    Capacity (``gate``, the phone line's ``CallGate``): an offer that would start a call (no
    ``pc_id``, or one that is not a QA call in progress here) takes a slot before any await, as a
    reservation the phone webhook counts too; the call then holds it until it ends. QA calls are
    capped by ``server.qa_max_calls`` (always below ``server.max_calls``); with a line limit
    (``server.line_max_calls``) the line's count is checked as well. A call whose browser has not
    connected within ``server.qa_connect_timeout_secs`` is ended, and its slot freed.
    """
    qa = QAContext.build(config=config, secrets=secrets, models=models, gate=gate, metrics=metrics,
                         finish_call=finish_call, line=line, records=records)
    app.mount("/qa/static", _SecureStaticFiles(directory=STATIC_DIR), name="qa-static")
    app.include_router(qa_router(qa))
    _chain_lifespan(app, qa.lifespan)


@dataclass
class _Offer:
    """One offer's slot as it passes from the route to ``QAContext.start_call`` (the handler's callback)."""

    hold: str | None = None  # the slot reserved for it; None once a call took it over
    refused: str | None = None  # why the call could not start after all
    connection: SmallWebRTCConnection | None = None  # the refused call's peer, to close


@dataclass
class QAContext:
    """What the QA page's routes and calls share: the phone line's gate, the QA calls here, the signalling."""

    config: Config
    secrets: Secrets
    models: SharedModels
    gate: CallGate
    metrics: ProcessMetrics
    finish_call: Callable[[CallSession], None]
    line: Line | None
    records: CallLog | None
    qa_limit: int
    # Host candidates only (no STUN/TURN): the QA browser must reach the server's address directly.
    handler: SmallWebRTCRequestHandler = field(default_factory=SmallWebRTCRequestHandler)
    running: set[asyncio.Task] = field(default_factory=set)
    sessions: dict[str, CallSession] = field(default_factory=dict)
    connections: dict[str, SmallWebRTCConnection] = field(default_factory=dict)  # pc_id -> QA call in progress here

    @classmethod
    def build(cls, *, config: Config, gate: CallGate, **parts: Any) -> QAContext:
        """The QA page's state, with a warning when ``server.max_calls`` cuts its cap."""
        sc = config.server
        qa_limit = gate.qa_limit(sc.max_calls, sc.qa_max_calls)
        if qa_limit < sc.qa_max_calls:
            logger.warning("QA page: {} call(s) at once, not server.qa_max_calls {}: QA always leaves one of "
                           "server.max_calls {} to the phone line", qa_limit, sc.qa_max_calls, sc.max_calls)
        return cls(config=config, gate=gate, qa_limit=qa_limit, **parts)

    def check_token(self, request: Request) -> None:
        if not qa_token_ok(request, self.secrets.qa_access_token):
            raise HTTPException(status_code=401, detail="QA token required (Authorization: Bearer)",
                                headers={"WWW-Authenticate": 'Bearer realm="qa"'})

    def busy(self, why: str) -> JSONResponse:
        sc, calls = self.config.server, self.gate.calls
        self.gate.refuse(f"qa:{why.split(' ')[0]}")
        logger.warning("QA call rejected: {} ({} calls active or reserved here, {} of them QA; server.max_calls {}, "
                       "QA limit {})", why, len(calls), self.gate.qa_calls(), sc.max_calls, self.qa_limit)
        return JSONResponse({"error": "busy", "reason": why.split(" ")[0], "active_calls": len(calls.active)},
                            status_code=503)

    def reserve(self) -> tuple[str | None, str | None]:
        """``(hold, None)``, or ``(hold, why busy)``: a QA slot, taken before any await."""
        return self.gate.reserve_qa(self.config.server.qa_max_calls, self.config.server.qa_connect_timeout_secs)

    async def answer(self, webrtc_request: SmallWebRTCRequest) -> dict[str, str] | JSONResponse | None:
        """The SDP answer, or a 503 busy response when the offer would start a call there is no slot for."""
        # A renegotiation of a QA call in progress keeps that call's slot; anything else (no pc_id, or
        # an unknown one, which Pipecat answers with a new connection) is a new call and takes one now.
        offer = _Offer()
        if webrtc_request.pc_id not in self.connections:
            offer.hold, why = self.reserve()
            if why is None and self.line is not None:
                why = await self.line.full()
                if why:
                    self.gate.release(offer.hold)
            if why:
                return self.busy(why)

        async def new_connection(connection: SmallWebRTCConnection) -> None:
            await self.start_call(connection, offer)

        try:
            answer = await self.handler.handle_web_request(webrtc_request, new_connection)
        except HTTPException:
            raise
        except Exception as e:  # aiortc rejects a malformed SDP with ValueError and friends
            raise HTTPException(status_code=400, detail=f"offer refused: {type(e).__name__}") from e
        finally:
            self.gate.release(offer.hold)  # start_call took it over, or the offer failed
        if offer.refused:
            with suppress(Exception):
                if offer.connection is not None:
                    await offer.connection.disconnect()
            return self.busy(offer.refused)
        return answer

    async def start_call(self, connection: SmallWebRTCConnection, offer: _Offer) -> None:
        """Called by the handler for a new connection, before it answers the offer.

        No await before the slot is the call's, so concurrent offers see it. The call runs in the background.
        """
        hold, offer.hold = offer.hold, None
        if hold is None:  # its pc_id looked like a call in progress, which ended meanwhile: a new call after all
            hold, why = self.reserve()
            if hold is None:  # no slot: ``why`` says why
                offer.refused, offer.connection = why or "busy", connection
                return
        call_id = f"qa-{connection.pc_id}"
        self.gate.qa_started(hold, call_id)
        self.connections[connection.pc_id] = connection
        task = asyncio.create_task(QACall(self, connection, call_id).run())
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    @asynccontextmanager
    async def lifespan(self, _app: FastAPI) -> AsyncIterator[None]:
        yield
        # Server shutdown: end the QA calls so their records are written, then close the peers.
        for session in list(self.sessions.values()):
            with suppress(Exception):
                await session.worker.cancel()
        if self.running:
            await asyncio.wait(list(self.running), timeout=10)
        await self.handler.close()


def qa_router(qa: QAContext) -> APIRouter:
    """The page and its signalling: ``GET /``, ``POST /api/offer``, ``PATCH /api/offer`` (trickle ICE)."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def qa_page(request: Request) -> Response:
        if "token" in request.query_params:  # an old bookmark: take the token out of the address bar
            return RedirectResponse("/", status_code=303, headers=QA_HEADERS)
        return FileResponse(STATIC_DIR / "qa.html", media_type="text/html", headers=QA_HEADERS)

    @router.post("/api/offer", response_model=None)  # an SDP answer, or a busy JSONResponse
    async def offer(request: Request) -> dict[str, str] | JSONResponse | None:
        qa.check_token(request)
        return await qa.answer(_offer_request(await _json_object(request)))

    @router.patch("/api/offer", response_model=None)
    async def ice_candidate(request: Request) -> dict[str, str]:
        qa.check_token(request)
        body = await _json_object(request)
        try:
            patch = SmallWebRTCPatchRequest(
                pc_id=str(body["pc_id"]),
                candidates=[IceCandidate(**c) for c in body.get("candidates") or []],
            )
        except (KeyError, TypeError) as e:
            raise HTTPException(status_code=400, detail=f"bad ICE candidate patch: {e}") from e
        await qa.handler.handle_patch_request(patch)
        return {"status": "success"}

    return router


def _offer_request(body: dict[str, Any]) -> SmallWebRTCRequest:
    """The offer in ``body``, checked: HTTP 400 for anything but an audio SDP offer Pipecat can take."""
    try:
        webrtc_request = SmallWebRTCRequest.from_dict(
            {k: body.get(k) for k in ("sdp", "type", "pc_id", "restart_pc")}
            | {"request_data": body.get("request_data", body.get("requestData"))}
        )
    except TypeError as e:
        raise HTTPException(status_code=400, detail=f"bad offer: {e}") from e
    if not isinstance(webrtc_request.sdp, str) or not webrtc_request.sdp or webrtc_request.type != "offer":
        raise HTTPException(status_code=400, detail="an SDP offer is required")
    if "m=audio" not in webrtc_request.sdp:
        raise HTTPException(status_code=400, detail="the offer has no audio (the page sends its microphone)")
    if webrtc_request.pc_id is not None and not isinstance(webrtc_request.pc_id, str):
        raise HTTPException(status_code=400, detail="pc_id must be a string")
    if webrtc_request.restart_pc:  # Pipecat would end the call and keep a peer without one: call again
        raise HTTPException(status_code=400, detail="restart_pc is not supported: hang up and call again")
    return webrtc_request


class QACall:
    """One QA call: built with ``build_call`` (``qa=True``), run until the browser leaves, then finished."""

    def __init__(self, qa: QAContext, connection: SmallWebRTCConnection, call_id: str) -> None:
        self.qa = qa
        self.connection = connection
        self.call_id = call_id
        self.session: CallSession | None = None  # once built (``_build``)
        self.live = QALiveObserver()
        self.connected = asyncio.Event()

    def built(self) -> CallSession:
        """The call's session: the transport's events and the deadline come only after ``_build``."""
        if self.session is None:
            raise RuntimeError(f"QA call {self.call_id}: not built")
        return self.session

    async def run(self) -> None:
        deadline = None
        try:
            self._build()
            deadline = asyncio.create_task(self._connect_deadline())
            self.qa.metrics.call_started()
            logger.info("QA call {}: pipeline starting ({} active)", self.call_id, len(self.qa.gate.calls))
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(self.built().worker)
            await runner.run()
        except Exception as e:
            logger.exception("QA call {} failed: {}", self.call_id, e)
        finally:
            if deadline is not None:
                deadline.cancel()
            await self._close()

    def _build(self) -> None:
        """The call's transport and pipeline, registered here and in the records, with the browser's events."""
        qa, config, call_id = self.qa, self.qa.config, self.call_id
        transport = SmallWebRTCTransport(
            self.connection, TransportParams(audio_in_enabled=True, audio_out_enabled=True,
                                             audio_in_filter=make_audio_in_filter(config))
        )
        self.session = build_call(CallRequest(
            config=config, secrets=qa.secrets, models=qa.models, transport=transport, call_id=call_id,
            in_rate=QA_IN_RATE, out_rate=QA_OUT_RATE, qa=True, observers=(self.live,), records=qa.records,
        ))  # fmt: skip
        if qa.records is not None:
            qa.records.call_started(call_id, caller=None, qa=True)
        self.live.attach(self.session)
        qa.sessions[call_id] = self.session
        transport.add_event_handler("on_client_connected", self._connected)
        transport.add_event_handler("on_client_disconnected", self._disconnected)

    async def _connected(self, _t: object, _client: object) -> None:
        self.connected.set()
        logger.info("QA call {}: browser connected", self.call_id)
        await self.live.send({"qa": "call", "call_id": self.call_id})
        call = self.qa.config.call
        await speak_greeting(self.built(), call.greeting, call.recording_notice)

    async def _disconnected(self, _t: object, _client: object) -> None:
        # The page's 끊기 button closes the peer connection; aiortc sees it within ~0.1 s.
        logger.info("QA call {}: browser disconnected", self.call_id)
        await self.built().worker.cancel()

    async def _connect_deadline(self) -> None:
        # Pipecat waits about 60 s for a peer that never connects; the slot is freed sooner.
        timeout = self.qa.config.server.qa_connect_timeout_secs
        await asyncio.sleep(timeout)
        if not self.connected.is_set():
            logger.warning("QA call {}: the browser did not connect within {:.0f} s "
                           "(server.qa_connect_timeout_secs); ending it", self.call_id, timeout)
            session = self.built()
            session.end_reason = "qa_not_connected"
            await session.worker.cancel()

    async def _close(self) -> None:
        """Free the slot, forget the call, close the peer, and finish the call's records if it was built."""
        self.qa.gate.calls.active.pop(self.call_id, None)
        self.qa.connections.pop(self.connection.pc_id, None)
        self.qa.sessions.pop(self.call_id, None)
        with suppress(Exception):
            await self.connection.disconnect()
        if self.session is not None:
            self.qa.finish_call(self.session)


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as e:
        raise HTTPException(status_code=400, detail="body is not JSON") from e
    if not isinstance(body, dict):
        raise HTTPException(status_code=400, detail="body is not a JSON object")
    return body


def _chain_lifespan(app: FastAPI, inner: Callable[[FastAPI], AbstractAsyncContextManager[None]]) -> None:
    """Run ``inner`` inside the app's existing lifespan (as Pipecat's dev runner does)."""
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def combined(a: FastAPI) -> AsyncIterator[None]:
        async with outer(a):
            async with inner(a):
                yield

    app.router.lifespan_context = combined

