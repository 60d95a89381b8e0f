"""The one FastAPI app: Twilio webhook and media stream, health and metrics.

Models are loaded once before the app serves; each call gets its own pipeline, dialog state and
records. A media stream is accepted only with a one-time token from the signed webhook.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import os
import time
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from loguru import logger
from pipecat.frames.frames import EndFrame, TTSSpeakFrame
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner

from bot import DATA_DIR
from bot.aftercall.callbacks import CallbackPlacer, is_machine
from bot.aftercall.notify import Outbox
from bot.aftercall.twilio_api import TwilioAPI, TwilioAPIError
from bot.call.pipeline import (
    SharedModels,
    build_call,
    make_audio_in_filter,
    make_policy,
    speak_callback_opening,
    speak_greeting,
)
from bot.config import Config, Secrets
from bot.desk.app import mount_desk
from bot.dialog.state import CannedReplies
from bot.line.admission import REPLAYED, BusyAudio, Line, play_busy_and_close
from bot.line.callgate import CallGate, FormTooLarge, PrestartSockets, process_figures, read_webhook_form
from bot.line.tokens import StreamTokens, TokenRefused
from bot.ops.hatches import escape_hatches
from bot.ops.readiness import LLMProbe, readiness
from bot.privacy import mask
from bot.stages.supertonic_tts import PROVIDER_NAMES
from bot.store.calls import CallLog
from bot.telemetry.latency import call_report
from bot.telemetry.looplag import LoopLagMonitor
from bot.telemetry.metrics import ProcessMetrics
from bot.transports.twilio import (
    PhoneSerializer,
    StreamProtocolError,
    build_busy_twiml,
    build_dial_twiml,
    build_say_twiml,
    build_stream_twiml,
    build_whisper_twiml,
    media_format_problem,
    read_stream_start,
    signature_is_valid,
)
from bot.transports.webrtc import mount_webrtc


class CallRegistry:
    """Calls in this process (for /healthz and the max_calls limit): in progress, and reserved.

    A reservation is a webhook answered with a stream token whose media stream has not arrived
    yet; it holds a call slot until the stream starts or the token expires.
    """

    def __init__(self, reserve_secs: float = 60.0):
        self.active: dict[str, float] = {}
        self.reserved: dict[str, float] = {}  # CallSid -> monotonic expiry
        self._reserve_secs = reserve_secs

    def reserve(self, call_sid: str) -> None:
        self.reserved[call_sid] = time.monotonic() + self._reserve_secs

    def __len__(self):
        now = time.monotonic()
        for sid in [s for s, t in self.reserved.items() if t < now]:
            del self.reserved[sid]
        return len(self.active) + len(self.reserved)


def _finite(figures: dict) -> dict:
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in figures.items()}


def bearer_header(token: str | None) -> dict[str, str]:
    """The header that carries the records token (``RECORDS_API_TOKEN``); none without a token."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def records_refusal(request: Request, secrets: Secrets) -> Response | None:
    """None when the request carries the records token; else 404 (records API off) or 401."""
    want = secrets.records_api_token
    if not want:
        return PlainTextResponse("not found", status_code=404)
    got = request.headers.get("Authorization", "")
    if not hmac.compare_digest(got.encode(), bearer_header(want)["Authorization"].encode()):
        logger.warning("records API refused: missing or wrong bearer token (from {})",
                       request.client.host if request.client else "?")
        return PlainTextResponse("records need a bearer token", status_code=401,
                                 headers={"WWW-Authenticate": "Bearer"})
    return None


def create_app(config: Config, secrets: Secrets, models: SharedModels, call_builder=build_call,
               records: CallLog | None = None) -> FastAPI:
    """``call_builder`` builds each call's pipeline (``build_call``; the bench's stock baseline passes its own,
    the test lab one that reads an injected fault from ``stream_parameters``, the stream's customParameters).

    ``records``: the records database (default: opened from ``records.url``, migrated, this worker's
    calls cut off by a crash marked aborted).
    """
    lag = LoopLagMonitor()
    records = records or CallLog.open(config, secrets)
    twilio_api = TwilioAPI.from_config(config, secrets)  # every REST request: hang-ups, transfers, SMS
    outbox = None
    if config.sms.enabled and twilio_api is None:
        logger.error("SMS NOT SENT: sms.enabled but TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN are not set; "
                     "messages wait in the records database")
    elif config.sms.enabled and config.records.enabled:
        outbox = Outbox(store=records.store, api=twilio_api, config=config, worker=records.worker)
        records.on_ticket = outbox.wake
    placer = None
    if config.callbacks.place_every_secs > 0 and twilio_api is None:
        logger.error("CALLBACKS NOT PLACED: callbacks.place_every_secs is set but TWILIO_ACCOUNT_SID / "
                     "TWILIO_AUTH_TOKEN are not")
    elif config.callbacks.place_every_secs > 0:
        try:
            placer = CallbackPlacer(store=records.store, api=twilio_api, config=config)
        except ValueError as e:
            logger.error("CALLBACKS NOT PLACED: {}", e)

    @asynccontextmanager
    async def lifespan(_app):
        lag.start()
        records.start_retention()
        await line.start()
        if outbox is not None:
            outbox.start()
        if placer is not None:
            placer.start()
        yield
        if placer is not None:
            await placer.stop()
        if outbox is not None:
            await outbox.stop()
        await lag.stop()
        await line.stop()
        await records.aclose()

    app = FastAPI(title="Korean public-service voice agent", lifespan=lifespan, openapi_url=None, docs_url=None,
                  redoc_url=None)
    # The operations listener (server.admin_host:admin_port): served beside ``app`` by bot/app/serve.py.
    admin = FastAPI(title="voice agent operations", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.admin_app = admin
    tokens = StreamTokens(config.server.token_ttl_secs)  # signed: any worker of the line checks them
    calls = CallRegistry(config.server.token_ttl_secs)
    background: set[asyncio.Task] = set()
    metrics = ProcessMetrics(config.latency)
    self_timing = getattr(models, "self_timing", None)  # serve times each start (bot/ops/selftime.py)
    if self_timing is not None:
        self_timing.export(metrics.registry)
    gate = CallGate(calls, max_calls=config.server.max_calls, token_ttl_secs=config.server.token_ttl_secs,
                    registry=metrics.registry)
    # Shared with the other workers through the records database: token single use, the caller's
    # number, the line-wide call limit, worker leases (bot/line/admission.py).
    line = Line(records.store, worker=records.worker, line_max_calls=config.server.line_max_calls,
                lease_secs=config.server.worker_lease_secs, records_enabled=config.records.enabled,
                is_draining=lambda: gate.draining)
    canned = CannedReplies.load(DATA_DIR / "replies.toml")
    busy_audio = BusyAudio(models, config.tts.voice, canned.busy)
    llm_probe = LLMProbe(config, secrets)
    hatches = escape_hatches(config, tts_engine=models.tts, whisper_engine=models.whisper, secrets=secrets)
    metrics.set_escape_hatches(hatches)
    metrics.set_onnx_providers(getattr(models.tts, "session_providers", {}),
                               PROVIDER_NAMES.get(config.tts.require_provider, config.tts.require_provider))

    @app.post("/twilio/voice")
    async def twilio_voice(request: Request):
        try:
            form = await read_webhook_form(request)
        except FormTooLarge as e:
            logger.warning("webhook refused: {} (from {})", e, request.client.host if request.client else "?")
            gate.refuse("bad_request")
            return PlainTextResponse("form body too large or not UTF-8", status_code=400)
        if config.twilio.validate_signature:
            url = f"https://{config.server.public_host}/twilio/voice"
            token = secrets.twilio_auth_token
            if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
                logger.warning("webhook refused: missing or wrong X-Twilio-Signature (from {})", request.client.host if request.client else "?")
                return PlainTextResponse("invalid signature", status_code=403)
        call_sid = form.get("CallSid")
        if not call_sid:
            gate.refuse("bad_request")
            return PlainTextResponse("CallSid missing", status_code=400)
        if gate.replayed(call_sid):
            logger.warning("webhook refused: call {} was already answered (a replayed request)", mask(call_sid))
            gate.refuse("replayed")
            return PlainTextResponse("replayed webhook", status_code=403)
        # With a line limit the stream may reach any worker: the line's count (in the database) admits
        # the call and each worker checks its own max_calls when the stream arrives. Without one, this
        # worker reserves a slot of its own (one worker, or a proxy that keeps both on one worker).
        busy = ("draining" if gate.draining else None) if line.line_max_calls > 0 else gate.busy_reason()
        if not busy and line.line_max_calls <= 0:
            calls.reserve(call_sid)  # before any await: webhooks arriving meanwhile see the slot taken
        issued = None
        if not busy:
            issued = tokens.issue(call_sid)
            busy = await line.admit(issued, form.get("From"))  # the caller's number waits in the database
            if busy == REPLAYED:
                calls.reserved.pop(call_sid, None)
                logger.warning("webhook refused: call {} was already answered by a worker of the line (a replayed "
                               "request)", mask(call_sid))
                gate.refuse("replayed")
                return PlainTextResponse("replayed webhook", status_code=403)
        if busy:
            calls.reserved.pop(call_sid, None)
            logger.warning("call {} answered busy: {} ({} calls active or reserved here, server.max_calls {})",
                           mask(call_sid), busy, len(calls), config.server.max_calls)
            gate.refuse(busy.split(" ")[0])
            return Response(build_busy_twiml(canned.busy), media_type="application/xml")
        logger.info("call {} from {}: webhook accepted by worker {}", mask(call_sid), mask(form.get("From", "?")),
                    line.worker)
        return Response(build_stream_twiml(config.server.public_host, issued.token), media_type="application/xml")

    # Sockets before their start: capped per client and in all, a few KiB each, start_timeout_secs.
    prestart = PrestartSockets(per_client=config.server.media_prestart_per_client,
                               total=config.server.media_prestart_max)

    @app.websocket("/twilio/media")
    async def twilio_media(websocket: WebSocket):
        client = websocket.client.host if websocket.client else "?"
        full = prestart.enter(client)
        if full:  # refused before the handshake completes (HTTP 403): nothing is read or held
            logger.warning("media stream refused from {}: {}", mask(client), full)
            gate.refuse("stream_prestart_full")
            with suppress(Exception):
                await websocket.close(code=1013)
            return
        try:
            await websocket.accept()
            async with asyncio.timeout(config.server.start_timeout_secs):
                start = await read_stream_start(websocket.receive, max_bytes=config.server.media_prestart_max_bytes)
        except Exception as e:  # noqa: BLE001 - any shape of bad start: one masked line and 1008, never a traceback
            if isinstance(e, TimeoutError):
                e = StreamProtocolError(f"no start message within {config.server.start_timeout_secs:.0f} s")
            elif isinstance(e, WebSocketDisconnect):
                e = StreamProtocolError("closed before its start")
            why = str(e) if isinstance(e, StreamProtocolError) else f"unexpected {type(e).__name__}"
            logger.warning("media stream refused from {}: {}", mask(client), mask(why))
            gate.refuse("stream_protocol")
            with suppress(Exception):
                await websocket.close(code=1008, reason="protocol error")
            return
        finally:
            prestart.leave(client)
        caller = issued_by = issued = None
        try:
            issued = tokens.verify(start.custom_parameters.get("token"), start.call_sid)
        except TokenRefused as e:
            problem = str(e)
        else:
            problem, caller, issued_by = await line.redeem(issued)  # single use, line-wide
        problem = problem or media_format_problem(start.media_format)
        if problem:
            logger.warning("media stream for call {} refused: {}", mask(start.call_sid), mask(problem))
            if issued is not None:
                await line.release(issued.token_id)
            await websocket.close(code=1008, reason=problem[:120])
            return
        full = "draining" if gate.draining else "max_calls" if len(calls.active) >= config.server.max_calls else None
        if full:  # the webhook was answered elsewhere (or before the drain): this worker says busy itself
            logger.warning("call {}: media stream answered busy by worker {}: {} ({} calls here, server.max_calls {})",
                           mask(start.call_sid), line.worker, full, len(calls.active), config.server.max_calls)
            gate.refuse(f"stream_{full}")
            calls.reserved.pop(start.call_sid, None)
            await line.release(issued.token_id)
            await play_busy_and_close(websocket, start.stream_sid, busy_audio, reason=f"busy: {full}")
            return
        logger.info("call {}: stream token issued by worker {}, call runs on worker {}", mask(start.call_sid),
                    issued_by or "?", line.worker)
        await run_phone_call(websocket, start, caller)

    async def run_phone_call(websocket: WebSocket, start, caller: str | None):
        creds = bool(secrets.twilio_account_sid and secrets.twilio_auth_token)
        serializer = PhoneSerializer(
            start.stream_sid,
            call_sid=start.call_sid,
            account_sid=secrets.twilio_account_sid,
            auth_token=secrets.twilio_auth_token,
            base_url=config.twilio.api_base_url or None,
            params=PhoneSerializer.InputParams(auto_hang_up=creds and config.twilio.auto_hang_up),
            fast_input_resampler=config.turn.fast_input_resampler,
            on_stop=lambda: stop_call(),
            transfer_target=lambda: transfer_target(session.dialog),
            transfer_twiml=lambda number: transfer_twiml(session, start.call_sid, number),
            api=twilio_api,
        )
        transport = FastAPIWebsocketTransport(
            websocket,
            FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False, serializer=serializer,
                                   audio_in_filter=make_audio_in_filter(config)),
        )
        session = call_builder(config=config, secrets=secrets, models=models, transport=transport,
                               call_id=start.call_sid, records=records, stream_parameters=start.custom_parameters)
        # The SMS offer needs a number to text, kept on the call's row (records on).
        session.dialog.textable = bool(caller) and config.records.enabled

        async def stop_call():
            session.end_reason = session.end_reason or "caller_hangup"
            # Cancel from a separate task: we are inside the input transport's receive loop.
            task = asyncio.create_task(session.worker.cancel())
            background.add(task)
            task.add_done_callback(background.discard)

        calls.active[start.call_sid] = time.time()
        calls.reserved.pop(start.call_sid, None)
        gate.sessions[start.call_sid] = session
        metrics.call_started()
        records.call_started(start.call_sid, caller=caller, qa=False)

        # A booked callback we placed (the hint is in our stream TwiML; the row is the authority).
        callback = await find_placed_callback(start.call_sid) if start.custom_parameters.get("callback") else None

        @transport.event_handler("on_client_connected")
        async def _connected(_t, _ws):
            if callback is not None:
                await speak_callback_opening(session, callback["reception_no"], callback.get("ticket"))
            else:
                await speak_greeting(session, config.call.greeting, config.call.recording_notice)

        @transport.event_handler("on_client_disconnected")
        async def _disconnected(_t, _ws):
            logger.info("call {}: stream closed", mask(start.call_sid))
            session.end_reason = session.end_reason or "stream_closed"
            await session.worker.cancel()

        logger.info("call {}: pipeline starting ({} active)", mask(start.call_sid), len(calls))
        try:
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(session.worker)
            await runner.run()
        finally:
            calls.active.pop(start.call_sid, None)
            gate.sessions.pop(start.call_sid, None)
            gate.count_ignored(start.call_sid, serializer.ignored)
            finish_call(session)

    async def find_placed_callback(call_sid: str) -> dict | None:
        """The callback this call was placed for, with its ticket (None: the database failed: the plain greeting)."""
        def read():
            cb = records.store.find_callback(call_sid=call_sid)
            if cb is not None and cb["reception_no"]:
                cb["ticket"] = records.store.find_ticket(cb["reception_no"])
            return cb
        try:
            return await asyncio.wait_for(asyncio.to_thread(read), 2.0)
        except Exception as e:  # noqa: BLE001 - slow or down: the caller still gets the bot
            logger.error("call {}: callback context not read ({}: {})", mask(call_sid), type(e).__name__, e)
            return None

    def transfer_target(dialog) -> str | None:
        """Where the call goes after its last words: an emergency service, the desk, or nowhere."""
        if not dialog.transfer_requested:
            return None
        return dialog.transfer_to or config.call.transfer_number or None

    def transfer_twiml(session, call_sid: str, number: str) -> str:
        """The desk gets a warm transfer (the bot's summary first); an emergency service is dialled at once."""
        if session.dialog.transfer_to:
            return build_dial_twiml(number)
        if session.dialog.tickets:  # the desk's record: these tickets are now with a person
            records.hand_over(call_sid, list(session.dialog.tickets))
        if not config.call.transfer_whisper:
            return build_dial_twiml(number)
        records.transfer_note(call_sid, session.llm.policy.transfer_summary(session.dialog))
        return build_dial_twiml(number, f"https://{config.server.public_host}/twilio/whisper?call={call_sid}")

    @app.post("/twilio/whisper")
    async def twilio_whisper(request: Request, call: str = ""):
        """Twilio asks what the person answering a warm transfer hears before the caller is connected."""
        try:
            form = await read_webhook_form(request)
        except FormTooLarge:
            return PlainTextResponse("form body too large or not UTF-8", status_code=400)
        if config.twilio.validate_signature:
            query = f"?{request.url.query}" if request.url.query else ""
            url = f"https://{config.server.public_host}/twilio/whisper{query}"
            token = secrets.twilio_auth_token
            if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
                logger.warning("whisper refused: missing or wrong X-Twilio-Signature")
                return PlainTextResponse("invalid signature", status_code=403)
        try:
            note = await records.read_transfer_note(call) if call else None
        except Exception as e:  # noqa: BLE001 - the database is slow or down: the person hears the plain intro
            logger.error("whisper for call {}: no note ({}: {})", mask(call), type(e).__name__, e)
            note = None
        logger.info("call {}: warm transfer answered; whisper {}", mask(call), "with the summary" if note else "plain")
        return Response(build_whisper_twiml(note or canned.whisper.format(details="").strip()),
                        media_type="application/xml")

    # --- booked callbacks placed by `run_bot.py callbacks --place` (bot/aftercall/callbacks.py) -------------

    async def signed_form(request: Request, route: str) -> tuple[dict | None, Response | None]:
        """The webhook's form, or the refusal: too large, or not signed by Twilio for this URL."""
        try:
            form = await read_webhook_form(request)
        except FormTooLarge:
            return None, PlainTextResponse("form body too large or not UTF-8", status_code=400)
        if config.twilio.validate_signature:
            query = f"?{request.url.query}" if request.url.query else ""
            url = f"https://{config.server.public_host}{route}{query}"
            token = secrets.twilio_auth_token
            if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
                logger.warning("{} refused: missing or wrong X-Twilio-Signature", route)
                return None, PlainTextResponse("invalid signature", status_code=403)
        return form, None

    async def placed_callback(request: Request, route: str, callback_id: int):
        """A callback webhook: ``(form, the callback's row, None)`` when it is signed and its CallSid
        is the call placed for that callback, else ``(None, None, the refusal)``."""
        form, refused = await signed_form(request, route)
        if refused is not None:
            return None, None, refused
        cb = await asyncio.to_thread(records.store.find_callback, callback_id=callback_id)
        if cb is None or not form.get("CallSid") or cb["last_call_sid"] != form["CallSid"]:
            logger.warning("callback webhook for {} refused: not the call placed for it", callback_id)
            return None, None, PlainTextResponse("unknown callback", status_code=404)
        return form, cb, None

    def machine_twiml(cb: dict) -> str:
        # In the language the ticket was taken in (Twilio's <Say> voice for it).
        language = cb.get("language") or "ko"
        policy = make_policy(config, models.assets).for_language(language)
        return build_say_twiml(policy.callback_machine_message(cb.get("reception_no")), policy.language)

    @app.post("/twilio/callback/answer")
    async def twilio_callback_answer(request: Request, id: int = 0):
        """A placed callback was answered: a person gets the bot (its ticket's status first), a
        machine already detected a short message with the reception number and a hang-up."""
        form, cb, refused = await placed_callback(request, "/twilio/callback/answer", id)
        if refused is not None:
            return refused
        call_sid, answered_by = form["CallSid"], form.get("AnsweredBy")
        if is_machine(answered_by):
            await asyncio.to_thread(records.store.callback_answered_by, id, answered_by)
            logger.info("callback {} (call {}): a machine answered; leaving the message", id, mask(call_sid))
            return Response(machine_twiml(cb), media_type="application/xml")
        busy = ("draining" if gate.draining else None) if line.line_max_calls > 0 else gate.busy_reason()
        if not busy and line.line_max_calls <= 0:
            calls.reserve(call_sid)
        issued = None
        if not busy:
            issued = tokens.issue(call_sid)
            busy = await line.admit(issued, cb.get("caller"))
        if busy:  # the line is full: the message at least, rather than nothing
            calls.reserved.pop(call_sid, None)
            logger.warning("callback {} (call {}): the line is busy ({}); leaving the message", id, mask(call_sid), busy)
            return Response(machine_twiml(cb), media_type="application/xml")
        logger.info("callback {} (call {}) answered; the bot takes it", id, mask(call_sid))
        return Response(build_stream_twiml(config.server.public_host, issued.token, callback=True),
                        media_type="application/xml")

    @app.post("/twilio/callback/amd")
    async def twilio_callback_amd(request: Request, id: int = 0):
        """Asynchronous AMD's verdict: a machine is redirected to the short message (after the beep)."""
        form, cb, refused = await placed_callback(request, "/twilio/callback/amd", id)
        if refused is not None:
            return refused
        answered_by = form.get("AnsweredBy") or "unknown"
        await asyncio.to_thread(records.store.callback_answered_by, id, answered_by)
        logger.info("callback {} (call {}): answered by {}", id, mask(form["CallSid"]), answered_by)
        if is_machine(answered_by) and twilio_api is not None:
            try:
                await twilio_api.redirect(form["CallSid"], machine_twiml(cb))
            except TwilioAPIError as e:
                logger.error("callback {}: message to the machine failed: {}", id, e)
        return Response(status_code=204)

    @app.post("/twilio/callback/status")
    async def twilio_callback_status(request: Request, id: int = 0):
        """The placed call ended: answered is done; no answer, busy or failed is tried again (bounded)."""
        form, cb, refused = await placed_callback(request, "/twilio/callback/status", id)
        if refused is not None:
            return refused
        call_status = form.get("CallStatus", "")
        if call_status not in ("completed", "no-answer", "busy", "failed", "canceled"):
            return Response(status_code=204)  # not the end yet
        status = await asyncio.to_thread(
            records.store.callback_outcome, id, reached=call_status == "completed", why=call_status,
            max_attempts=config.callbacks.max_attempts, retry_after_secs=config.callbacks.retry_after_secs)
        log = logger.info if status in ("done", "waiting") else logger.warning
        log("callback {} (call {}): {}; callback now {} (attempt {}/{})", id, mask(form["CallSid"]), call_status,
            status, cb["attempts"], config.callbacks.max_attempts)
        return Response(status_code=204)

    def finish_call(session) -> None:
        rec = session.recorder
        rec.close()
        metrics.call_finished(rec.records)
        if session.dialog.transfer_requested:
            reason = "emergency_transfer" if session.dialog.transfer_to else "transfer"
            metrics.call_transferred("emergency" if session.dialog.transfer_to else "desk")
        elif session.dialog.ended:
            reason = "completed"
        else:
            reason = session.end_reason or "hangup"
        records.call_ended(rec.call_id, reason)
        logger.info("call {} ended ({}); latency:\n{}", mask(rec.call_id), reason,
                    call_report(rec.records, config.latency, report_header()))

    def report_header() -> list[str]:
        lines = [f"TTS providers: {models.tts.session_providers}"]
        lines += [f"ESCAPE HATCH: {h}" for h in hatches] or ["escape hatches: none"]
        return lines


    def liveness() -> tuple[str, int]:
        return ("draining", 503) if gate.draining else ("ok", 200)

    @app.get("/healthz")
    async def healthz():
        """Public liveness: ok or draining, nothing more (the figures are on the operations listener)."""
        status, code = liveness()
        return JSONResponse({"status": status}, status_code=code)

    @admin.get("/healthz")
    async def admin_healthz():
        # asyncio_tasks, rss_bytes, open_fds: numbers that must come back down after calls end (soak).
        status, code = liveness()
        return JSONResponse({"status": status, "active_calls": len(calls.active),
                             "reserved_calls": len(calls) - len(calls.active), "max_calls": config.server.max_calls,
                             "worker": line.worker, "pid": os.getpid(),
                             "asyncio_tasks": len(asyncio.all_tasks()), **process_figures()},
                            status_code=code)

    @admin.get("/readyz")
    async def readyz():
        """Readiness (new calls welcome): models loaded, LLM reachable, not draining; plus the line's figures."""
        ready, body = await readiness(config, llm_probe, draining=gate.draining, worker=line.worker)
        body.update(await line.figures())
        if self_timing is not None:  # a slow start is shown, not unready: calls still work
            body["self_timing"] = self_timing.as_dict()
        return JSONResponse(body, status_code=200 if ready else 503)

    async def say_goodbye(session) -> None:
        session.end_reason = session.end_reason or "server_shutdown"
        await session.worker.queue_frames([TTSSpeakFrame(canned.shutdown_goodbye), EndFrame(reason="server shutdown")])

    async def drain() -> None:
        await gate.drain(drain_secs=config.server.drain_secs, goodbye=say_goodbye)

    app.state.drain = drain  # DrainingServer runs it on SIGTERM

    @admin.get("/api/loop_lag")
    async def api_loop_lag(since: float = 0.0):
        """Event-loop lag over the samples taken after ``since`` (wall clock): the fault report's figure."""
        return JSONResponse(_finite(lag.summary(since=since)))

    @admin.get("/metrics")
    async def prometheus_metrics():
        body, content_type = metrics.render(loop_lag=lag.summary(), records_pending=records.writer.pending)
        return Response(body, media_type=content_type)

    @app.get("/api/turns")
    async def api_turns(request: Request, since: float = 0.0):
        """Turn records of finished calls, from the records database (`run_bot.py bench --url` reads them).

        Citizens' words: only with ``Authorization: Bearer $RECORDS_API_TOKEN``; without that env
        variable the route is off (404), never open. The words come masked (``bot.privacy.mask``, as in
        the logs and on the desk). ``since``: seconds since the epoch, 0 to now; else 400 with the reason.
        """
        refused = records_refusal(request, secrets)
        if refused is not None:
            return refused
        if not (math.isfinite(since) and 0 <= since <= time.time() + 86400):
            why = ("looks like milliseconds; give seconds since the epoch" if math.isfinite(since) and since > 1e11
                   else "must be seconds since the epoch, from 0 to now")
            return JSONResponse({"error": f"since={since!r}: {why}"}, status_code=400)
        return JSONResponse({
            "turns": await records.finished_turns(since),
            "environment": environment(),
            "loop_lag": _finite(lag.summary()),  # no samples yet: NaN, which JSON cannot carry
        })

    def environment() -> dict:
        return {
            "stt": {"model": config.stt.model, "device": models.whisper.device,
                    "compute_type": config.stt.compute_type, "beam_size": config.stt.beam_size},
            "tts": {"providers": models.tts.session_providers, "voice": config.tts.voice, "steps": config.tts.total_steps,
                    "standin": getattr(models.tts, "is_standin", False)},
            "llm": {"model": config.llm.model, "dialect": config.llm.dialect, "base_url": config.llm.base_url},
            "escape_hatches": hatches,
        }

    if config.server.qa_page:
        mount_webrtc(app, config=config, secrets=secrets, models=models, gate=gate, line=line, metrics=metrics,
                     finish_call=finish_call, records=records)
    mount_desk(app, admin, config=config, secrets=secrets, store=records.store)  # the staff desk (docs/desk.md)
    return app
