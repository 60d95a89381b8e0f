"""The one FastAPI app: Twilio webhook and media stream, health and metrics.

Models are loaded once before the app serves; each call gets its own pipeline, dialog state and
records. A media stream is accepted only with a one-time token from the signed webhook.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from loguru import logger
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner

from bot.config import Config, Secrets
from bot.hatches import escape_hatches
from bot.telemetry.latency import call_report
from bot.telemetry.looplag import LoopLagMonitor
from bot.telemetry.metrics import ProcessMetrics
from bot.pipeline import SharedModels, build_call, speak_greeting
from bot.privacy import mask
from transports.twilio import (
    PhoneSerializer,
    StreamProtocolError,
    StreamTokenStore,
    build_busy_twiml,
    build_stream_twiml,
    media_format_problem,
    parse_stream_start,
    signature_is_valid,
)
from transports.webrtc import mount_webrtc

START_TIMEOUT_SECS = 10.0


class CallRegistry:
    """Active calls in this process (for /healthz and the max_calls limit)."""

    def __init__(self):
        self.active: dict[str, float] = {}

    def __len__(self):
        return len(self.active)


def create_app(config: Config, secrets: Secrets, models: SharedModels, call_builder=build_call) -> FastAPI:
    """``call_builder`` builds each call's pipeline (``build_call``; the bench's stock baseline passes its own)."""
    lag = LoopLagMonitor()

    @asynccontextmanager
    async def lifespan(_app):
        lag.start()
        yield
        await lag.stop()

    app = FastAPI(title="Korean public-service voice agent", lifespan=lifespan)
    tokens = StreamTokenStore(config.server.token_ttl_secs)
    calls = CallRegistry()
    background: set[asyncio.Task] = set()
    metrics = ProcessMetrics(config.latency)
    hatches = escape_hatches(config, tts_engine=models.tts, whisper_engine=models.whisper, secrets=secrets)
    recent_turns: deque[dict] = deque(maxlen=5000)

    @app.post("/twilio/voice")
    async def twilio_voice(request: Request):
        form = {k: str(v) for k, v in (await request.form()).items()}
        if config.twilio.validate_signature:
            url = f"https://{config.server.public_host}/twilio/voice"
            token = secrets.twilio_auth_token
            if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
                logger.warning("webhook refused: missing or wrong X-Twilio-Signature (from {})", request.client.host if request.client else "?")
                return PlainTextResponse("invalid signature", status_code=403)
        call_sid = form.get("CallSid")
        if not call_sid:
            return PlainTextResponse("CallSid missing", status_code=400)
        if len(calls) >= config.server.max_calls:
            logger.warning("call {} rejected: {} calls active (server.max_calls)", mask(call_sid), len(calls))
            return Response(build_busy_twiml(), media_type="application/xml")
        logger.info("call {} from {}: webhook accepted", mask(call_sid), mask(form.get("From", "?")))
        return Response(build_stream_twiml(config.server.public_host, tokens.issue(call_sid)), media_type="application/xml")

    @app.websocket("/twilio/media")
    async def twilio_media(websocket: WebSocket):
        await websocket.accept()
        try:
            first = []
            async with asyncio.timeout(START_TIMEOUT_SECS):
                while len(first) < 2:
                    first.append(await websocket.receive_text())
                    if '"start"' in first[-1]:
                        break
            start = parse_stream_start(first)
        except (TimeoutError, StreamProtocolError, WebSocketDisconnect, KeyError) as e:
            logger.warning("media stream refused: {}", e if str(e) else type(e).__name__)
            with suppress(Exception):
                await websocket.close(code=1008, reason="protocol error")
            return
        problem = tokens.redeem(start.custom_parameters.get("token"), start.call_sid) or media_format_problem(start.media_format)
        if problem:
            logger.warning("media stream for call {} refused: {}", mask(start.call_sid), problem)
            await websocket.close(code=1008, reason=problem[:120])
            return
        await run_phone_call(websocket, start)

    async def run_phone_call(websocket: WebSocket, start):
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
            transfer_target=lambda: config.call.transfer_number if session.dialog.transfer_requested else None,
        )
        transport = FastAPIWebsocketTransport(
            websocket,
            FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False, serializer=serializer),
        )
        session = call_builder(config=config, secrets=secrets, models=models, transport=transport, call_id=start.call_sid)

        async def stop_call():
            # Cancel from a separate task: we are inside the input transport's receive loop.
            task = asyncio.create_task(session.worker.cancel())
            background.add(task)
            task.add_done_callback(background.discard)

        calls.active[start.call_sid] = time.time()
        metrics.call_started()

        @transport.event_handler("on_client_connected")
        async def _connected(_t, _ws):
            await speak_greeting(session, config.call.greeting)

        @transport.event_handler("on_client_disconnected")
        async def _disconnected(_t, _ws):
            logger.info("call {}: stream closed", mask(start.call_sid))
            await session.worker.cancel()

        logger.info("call {}: pipeline starting ({} active)", mask(start.call_sid), len(calls))
        try:
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(session.worker)
            await runner.run()
        finally:
            calls.active.pop(start.call_sid, None)
            finish_call(session)

    def finish_call(session) -> None:
        rec = session.recorder
        rec.close()
        metrics.call_finished(rec.records)
        recent_turns.extend(r.to_dict() for r in rec.records)
        logger.info("call {} ended; latency:\n{}", mask(rec.call_id), call_report(rec.records, config.latency, report_header()))
        if config.records.enabled:
            rec.write_jsonl(config.path(config.records.dir))

    def report_header() -> list[str]:
        lines = [f"TTS providers: {models.tts.session_providers}"]
        lines += [f"ESCAPE HATCH: {h}" for h in hatches] or ["escape hatches: none"]
        return lines


    @app.get("/healthz")
    async def healthz():
        # asyncio_tasks: a number that must come back down after calls end (leak check).
        return JSONResponse({"status": "ok", "active_calls": len(calls), "max_calls": config.server.max_calls,
                             "asyncio_tasks": len(asyncio.all_tasks())})

    @app.get("/metrics")
    async def prometheus_metrics():
        body, content_type = metrics.render(loop_lag=lag.summary())
        return Response(body, media_type=content_type)

    @app.get("/api/turns")
    async def api_turns(since: float = 0.0):
        """Turn records of finished calls (for `run_bot.py bench --url`), with the server's environment."""
        return JSONResponse({
            "turns": [t for t in recent_turns if (t.get("turn_end") or t.get("first_audio_out") or 0) >= since],
            "environment": environment(),
            "loop_lag": lag.summary(),
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
        mount_webrtc(app, config=config, secrets=secrets, models=models, calls=calls, metrics=metrics,
                     finish_call=finish_call)
    return app
