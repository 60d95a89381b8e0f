"""``/twilio/media``: Twilio's media stream, admitted with its one-time token, and the phone call it carries.

A socket is refused before its handshake when too many wait for their start; a start that is
late, malformed or without a valid token is closed with 1008 and one masked log line. A worker
full or draining plays the busy message itself. Each admitted stream runs one ``PhoneCall``.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from loguru import logger
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner

from bot.app.context import AppContext
from bot.app.routes.transfer import transfer_target, transfer_twiml
from bot.call.noise_filter import make_audio_in_filter
from bot.call.openings import speak_callback_opening, speak_greeting
from bot.call.request import CallRequest
from bot.line.admission import play_busy_and_close
from bot.line.tokens import TokenRefused
from bot.privacy import mask
from bot.transports.twilio import (
    PhoneSerializer,
    StreamProtocolError,
    StreamStart,
    media_format_problem,
    read_stream_start,
)


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.websocket("/twilio/media")
    async def twilio_media(websocket: WebSocket):
        start = await _read_start(ctx, websocket)
        if start is None:
            return
        admitted = await _admit_stream(ctx, websocket, start)
        if admitted is None:
            return
        caller, issued_by = admitted
        logger.info("call {}: stream token issued by worker {}, call runs on worker {}", mask(start.call_sid),
                    issued_by or "?", ctx.line.worker)
        await PhoneCall(ctx, websocket, start, caller).run()

    return router


async def _read_start(ctx: AppContext, websocket: WebSocket) -> StreamStart | None:
    """Accept the socket and read its start; None when it was refused (and closed)."""
    config, gate, prestart = ctx.config, ctx.gate, ctx.prestart
    client = websocket.client.host if websocket.client else "?"
    full = prestart.enter(client)
    if full:  # refused before the handshake completes (HTTP 403): nothing is read or held
        logger.warning("media stream refused from {}: {}", mask(client), full)
        gate.refuse("stream_prestart_full")
        with suppress(Exception):
            await websocket.close(code=1013)
        return None
    try:
        await websocket.accept()
        async with asyncio.timeout(config.server.start_timeout_secs):
            return await read_stream_start(websocket.receive, max_bytes=config.server.media_prestart_max_bytes)
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
        return None
    finally:
        prestart.leave(client)


async def _admit_stream(ctx: AppContext, websocket: WebSocket,
                        start: StreamStart) -> tuple[str | None, str | None] | None:
    """``(the caller's number, the worker that issued the token)``, or None: refused, or answered busy."""
    calls, line = ctx.calls, ctx.line
    caller = issued_by = issued = None
    try:
        issued = ctx.tokens.verify(start.custom_parameters.get("token"), start.call_sid)
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
        return None
    max_calls = ctx.config.server.max_calls
    full = "draining" if ctx.gate.draining else "max_calls" if len(calls.active) >= max_calls else None
    if full:  # the webhook was answered elsewhere (or before the drain): this worker says busy itself
        logger.warning("call {}: media stream answered busy by worker {}: {} ({} calls here, server.max_calls {})",
                       mask(start.call_sid), line.worker, full, len(calls.active), max_calls)
        ctx.gate.refuse(f"stream_{full}")
        calls.reserved.pop(start.call_sid, None)
        await line.release(issued.token_id)
        await play_busy_and_close(websocket, start.stream_sid, ctx.busy_audio, reason=f"busy: {full}")
        return None
    return caller, issued_by


class PhoneCall:
    """One phone call on its media stream: serializer, transport and pipeline, from greeting to records."""

    def __init__(self, ctx: AppContext, websocket: WebSocket, start: StreamStart, caller: str | None):
        self.ctx, self.start, self.caller = ctx, start, caller
        config, secrets = ctx.config, ctx.secrets
        creds = bool(secrets.twilio_account_sid and secrets.twilio_auth_token)
        self.serializer = PhoneSerializer(
            start.stream_sid,
            call_sid=start.call_sid,
            account_sid=secrets.twilio_account_sid,
            auth_token=secrets.twilio_auth_token,
            base_url=config.twilio.api_base_url or None,
            params=PhoneSerializer.InputParams(auto_hang_up=creds and config.twilio.auto_hang_up),
            fast_input_resampler=config.turn.fast_input_resampler,
            on_stop=self.stop,
            transfer_target=lambda: transfer_target(config, self.session.dialog),
            transfer_twiml=lambda number: transfer_twiml(ctx, self.session, start.call_sid, number),
            api=ctx.twilio_api,
        )
        self.transport = FastAPIWebsocketTransport(
            websocket,
            FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
                                   serializer=self.serializer, audio_in_filter=make_audio_in_filter(config)),
        )
        self.session = ctx.call_builder(CallRequest(config=config, secrets=secrets, models=ctx.models,
                                                    transport=self.transport, call_id=start.call_sid,
                                                    records=ctx.records, stream_parameters=start.custom_parameters))
        # The SMS offer needs a number to text, kept on the call's row (records on).
        self.session.dialog.textable = bool(caller) and config.records.enabled

    async def stop(self) -> None:
        """Twilio's stop message: the caller hung up."""
        self.session.end_reason = self.session.end_reason or "caller_hangup"
        # Cancel from a separate task: we are inside the input transport's receive loop.
        task = asyncio.create_task(self.session.worker.cancel())
        self.ctx.background.add(task)
        task.add_done_callback(self.ctx.background.discard)

    async def run(self) -> None:
        """Count the call in, greet the caller once connected, run the pipeline; count it out and record it."""
        ctx, start, session = self.ctx, self.start, self.session
        ctx.calls.active[start.call_sid] = time.time()
        ctx.calls.reserved.pop(start.call_sid, None)
        ctx.gate.sessions[start.call_sid] = session
        ctx.metrics.call_started()
        session.recorder.on_greeting = ctx.metrics.greeting_sent  # observed when it plays, not at the call's end
        ctx.records.call_started(start.call_sid, caller=self.caller, qa=False)
        # A booked callback we placed (the hint is in our stream TwiML; the row is the authority).
        callback = await self._placed_callback() if start.custom_parameters.get("callback") else None

        @self.transport.event_handler("on_client_connected")
        async def _connected(_t, _ws):
            if callback is not None:
                await speak_callback_opening(session, callback["reception_no"], callback.get("ticket"))
            else:
                await speak_greeting(session, ctx.config.call.greeting, ctx.config.call.recording_notice)

        @self.transport.event_handler("on_client_disconnected")
        async def _disconnected(_t, _ws):
            logger.info("call {}: stream closed", mask(start.call_sid))
            session.end_reason = session.end_reason or "stream_closed"
            await session.worker.cancel()

        logger.info("call {}: pipeline starting ({} active)", mask(start.call_sid), len(ctx.calls))
        try:
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(session.worker)
            await runner.run()
        finally:
            ctx.calls.active.pop(start.call_sid, None)
            ctx.gate.sessions.pop(start.call_sid, None)
            ctx.gate.count_ignored(start.call_sid, self.serializer.ignored)
            ctx.finish_call(session)

    async def _placed_callback(self) -> dict | None:
        """The callback this call was placed for, with its ticket (None: the database failed: the plain greeting)."""
        store, call_sid = self.ctx.records.store, self.start.call_sid

        def read():
            cb = store.find_callback(call_sid=call_sid)
            if cb is not None and cb["reception_no"]:
                cb["ticket"] = store.find_ticket(cb["reception_no"])
            return cb
        try:
            return await asyncio.wait_for(asyncio.to_thread(read), 2.0)
        except Exception as e:  # noqa: BLE001 - slow or down: the caller still gets the bot
            logger.error("call {}: callback context not read ({}: {})", mask(call_sid), type(e).__name__, e)
            return None
