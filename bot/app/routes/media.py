"""``/twilio/media``: Twilio's media stream, admitted with its one-time token, and the phone call it carries.

A socket is refused before its handshake when too many wait for their start; a start that is
late, malformed or without a valid token is closed with 1008 and one masked log line. A worker
full or draining plays the busy message itself. Each admitted stream runs one ``PhoneCall``.
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import suppress

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import PlainTextResponse
from loguru import logger
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner

from bot.app.context import AppContext
from bot.app.routes.transfer import transfer_target, transfer_twiml
from bot.call.noise_filter import make_audio_in_filter
from bot.call.openings import speak_callback_opening, speak_greeting, speak_resumed
from bot.call.request import CallRequest, Resume
from bot.line.admission import play_busy_and_close
from bot.line.tokens import TokenRefused
from bot.privacy import mask
from bot.store.segments import HANDOVER, end_segment, resume_context
from bot.transports.twilio import (
    PhoneSerializer,
    StreamProtocolError,
    StreamStart,
    build_dial_twiml,
    media_format_problem,
    read_stream_start,
)

RESUME_READ_SECS = 2.0  # the caller waits in silence for this: the records read for a resume
HANDOVER_WAIT_SECS = 15.0  # drain: the longest wait for the bot to finish a sentence before the hand-over
HANDOVER_ANSWER_SECS = 5.0  # ... and for the answer to a caller's turn (a cough that gets none does not hold it)
_SENTENCE_END = re.compile(r"(?<=[.?!。])\s+")


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.websocket("/twilio/media")
    async def twilio_media(websocket: WebSocket):
        if ctx.gate.draining and ctx.config.server.drain_handover:
            # Handing calls over: a stream (a resumed call's) belongs on another worker; the proxy
            # tries the next one on 503 (deploy/nginx.conf). Nothing is read or held here.
            ctx.gate.refuse("stream_draining")
            await websocket.send_denial_response(PlainTextResponse("draining", status_code=503))
            return
        start = await _read_start(ctx, websocket)
        if start is None:
            return
        admitted = await _admit_stream(ctx, websocket, start)
        if admitted is None:
            return
        caller, issued_by = admitted
        logger.info("call {}: stream token issued by worker {}, call runs on worker {}", mask(start.call_sid),
                    issued_by or "?", ctx.line.worker)
        segment = _segment(start)
        resume = await read_resume(ctx, start.call_sid, segment) if segment else None
        await PhoneCall(ctx, websocket, start, caller, segment=segment, resume=resume).run()

    return router


def _segment(start: StreamStart) -> int:
    """Which of the call's streams this is: 0, or the resume's (our TwiML's ``seg``; its token is checked)."""
    seg = start.custom_parameters.get("seg", "0")
    return int(seg) if seg.isdigit() and len(seg) < 4 else 0


async def read_resume(ctx: AppContext, call_sid: str, segment: int) -> Resume:
    """The call so far, from the records: its turns (the model's context), the dialog's snapshot after
    the last one, the emergency said. The database down: the call goes on without its past (logged)."""
    try:
        turns, before = await asyncio.wait_for(
            asyncio.to_thread(resume_context, ctx.records.store, call_sid, segment), RESUME_READ_SECS)
    except Exception as e:  # noqa: BLE001 - slow or down: the caller still gets the bot, and hears the sentence
        logger.error("call {}: resumed WITHOUT its past: the records were not read ({}: {})", mask(call_sid),
                     type(e).__name__, str(e)[:120])
        return Resume(segment=segment)
    history: list[dict] = []
    dialog = emergency = None
    for turn in turns:
        if turn["transcript"]:
            history.append({"role": "user", "content": turn["transcript"]})
        if turn["reply"]:
            history.append({"role": "assistant", "content": turn["reply"]})
        dialog = (turn["record"] or {}).get("dialog") or dialog
        if turn["escalation"] and turn["reply"]:
            emergency = _SENTENCE_END.split(turn["reply"].strip(), maxsplit=1)[0]  # the first names the number
    first = max((t["idx"] for t in turns), default=-1) + 1
    # The sentence is said once in a call, and not after a drain's hand-over (made while the bot and
    # the caller were quiet: nothing was lost); an emergency is told again all the same.
    quiet = before == HANDOVER or any(t["route"] == "resumed" for t in turns)
    logger.info("call {}: resuming as stream {} (the last ended: {}): {} turns, dialog {}, emergency {}{}",
                mask(call_sid), segment, before or "no end recorded", len(turns),
                "restored" if dialog else "not recorded", "said again" if emergency else "none",
                ", quietly" if quiet else "")
    return Resume(segment=segment, first_turn=first, history=tuple(history), dialog=dialog, emergency=emergency,
                  quiet=quiet)


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

    def __init__(self, ctx: AppContext, websocket: WebSocket, start: StreamStart, caller: str | None, *,
                 segment: int = 0, resume: Resume | None = None):
        self.ctx, self.start, self.caller = ctx, start, caller
        self.websocket, self.segment, self.resume = websocket, segment, resume
        config, secrets = ctx.config, ctx.secrets
        creds = bool(secrets.twilio_account_sid and secrets.twilio_auth_token)
        self.auto_hang_up = creds and config.twilio.auto_hang_up  # the REST API hangs up and transfers
        self.serializer = PhoneSerializer(
            start.stream_sid,
            call_sid=start.call_sid,
            account_sid=secrets.twilio_account_sid,
            auth_token=secrets.twilio_auth_token,
            base_url=config.twilio.api_base_url or None,
            params=PhoneSerializer.InputParams(auto_hang_up=self.auto_hang_up),
            fast_input_resampler=config.turn.fast_input_resampler,
            on_stop=self.stop,
            on_end=self._bot_ends,
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
                                                    records=ctx.records, stream_parameters=start.custom_parameters,
                                                    resume=resume))
        # The SMS offer needs a number to text, kept on the call's row (records on).
        self.session.dialog.textable = bool(caller) and config.records.enabled
        # Each turn's record carries the dialog's snapshot: a worker resuming the call rebuilds it (issue 46).
        self.session.recorder.snapshot = self.session.dialog.snapshot
        self.session.recorder.caller = caller  # masked in the call's trace (bot/telemetry/tracing.py)

    async def _bot_ends(self) -> None:
        """The bot ends the call: said in the records before the stream closes, so that the <Connect>'s
        action answers <Hangup/> (or the hand-over's TwiML), never a resume."""
        ctx, session, call_sid = self.ctx, self.session, self.start.call_sid
        dialog, then = session.dialog, None
        number = transfer_target(ctx.config, dialog)
        if number:  # without the REST API (no credentials) the action carries the hand-over out
            then = (transfer_twiml(ctx, session, call_sid, number) if not self.auto_hang_up
                    else build_dial_twiml(number))
        reason = ("emergency_transfer" if dialog.transfer_to else "transfer") if dialog.transfer_requested \
            else "completed" if dialog.ended else session.end_reason or "completed"
        try:
            await asyncio.wait_for(asyncio.to_thread(end_segment, ctx.records.store, call_sid, self.segment,
                                                     reason=reason, bot_ended=True, then_twiml=then),
                                   RESUME_READ_SECS)
        except Exception as e:  # noqa: BLE001 - the action then resumes the call: a sentence, not a lost caller
            logger.error("call {}: the bot's end not recorded ({}: {})", mask(call_sid), type(e).__name__,
                         str(e)[:120])

    async def hand_over(self, max_wait_secs: float = HANDOVER_WAIT_SECS) -> None:
        """Drain (``server.drain_handover``): at the next moment the bot is not speaking and no caller's
        turn waits for its answer, close the stream so that Twilio asks the <Connect>'s action, which
        resumes the call on another worker."""
        ctx, session, call_sid = self.ctx, self.session, self.start.call_sid
        deadline = time.monotonic() + max_wait_secs
        def busy() -> bool:  # the bot's audio still playing, the caller speaking, or their answer coming
            rec = session.recorder
            turn = rec.current
            waiting = turn.route == "pending" and (turn.turn_end is None
                                                    or time.time() - turn.turn_end < HANDOVER_ANSWER_SECS)
            return self.serializer.bot_audio_pending() or rec.bot_speaking or waiting

        while busy() and time.monotonic() < deadline:  # noqa: ASYNC110 - three clocks, no event to wait on
            await asyncio.sleep(0.05)
        session.end_reason = HANDOVER
        try:
            await asyncio.wait_for(asyncio.to_thread(end_segment, ctx.records.store, call_sid, self.segment,
                                                     reason=HANDOVER, bot_ended=False), RESUME_READ_SECS)
        except Exception as e:  # noqa: BLE001 - an unrecorded end resumes the call all the same
            logger.error("call {}: hand-over not recorded ({}: {})", mask(call_sid), type(e).__name__, str(e)[:120])
        logger.warning("call {}: drain: handing the call over (stream {} closed)", mask(call_sid), self.segment)
        with suppress(Exception):
            await self.websocket.close(code=1000, reason="handover")
        await session.worker.cancel()

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
        ctx.records.segment_started(start.call_sid, self.segment)
        ctx.phone_calls[start.call_sid] = self
        # A booked callback we placed (the hint is in our stream TwiML; the row is the authority).
        callback = await self._placed_callback() \
            if start.custom_parameters.get("callback") and self.resume is None else None

        @self.transport.event_handler("on_client_connected")
        async def _connected(_t, _ws):
            if self.resume is not None:
                await speak_resumed(session, self.resume.emergency, sentence=not self.resume.quiet)
            elif callback is not None:
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
            ctx.phone_calls.pop(start.call_sid, None)
            ctx.records.segment_ended(start.call_sid, self.segment, session.end_reason or "hangup")
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
