"""``/twilio/media``: Twilio's media stream, admitted with its one-time token, and the phone call it carries.

A socket is refused before its handshake when too many wait for their start; a start that is
late, malformed or without a valid token is closed with 1008 and one masked log line. A worker
full or draining plays the busy message itself. Each admitted stream runs through ``CallHost.run``:
a ``PhoneStream``, or a ``ResumedStream`` with the call's past read from the records (issue 46).
"""

from __future__ import annotations

import asyncio
import re
from contextlib import suppress

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import PlainTextResponse
from loguru import logger

from bot.app.context import AppContext
from bot.app.host import CallHost
from bot.app.phone import PhoneStream, ResumedStream
from bot.call.request import Resume
from bot.core.deadline import in_thread
from bot.line.tokens import IssuedToken, TokenRefused
from bot.privacy import mask
from bot.store.db import RECORDS_SECS
from bot.store.segments import HANDOVER, resume_context
from bot.transports.busy import play_busy_and_close
from bot.transports.twilio import StreamProtocolError, StreamStart, media_format_problem, read_stream_start

_SENTENCE_END = re.compile(r"(?<=[.?!。])\s+")
UNREAD_TURNS_FROM = 1000  # a resume that could not read the call's turns numbers its own from segment x this


def router(ctx: AppContext) -> APIRouter:
    router, host = APIRouter(), CallHost(ctx)

    @router.websocket("/twilio/media")
    async def twilio_media(websocket: WebSocket) -> None:
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
        if segment:
            resumed = await read_resume(ctx, start.call_sid, segment)
            await host.run(ResumedStream(websocket=websocket, start=start, caller=caller, resumed=resumed))
        else:
            await host.run(PhoneStream(websocket=websocket, start=start, caller=caller))

    return router


def _segment(start: StreamStart) -> int:
    """Which of the call's streams this is: 0, or the resume's (our TwiML's ``seg``; its token is checked)."""
    seg = start.custom_parameters.get("seg", "0")
    return int(seg) if seg.isdigit() and len(seg) < 4 else 0


async def read_resume(ctx: AppContext, call_sid: str, segment: int) -> Resume:
    """The call so far, from the records: its turns (the model's context), the dialog's snapshot after
    the last one, the emergency said. The database down: the call goes on without its past (logged)."""
    try:
        turns, before = await in_thread(RECORDS_SECS, resume_context, ctx.records.store, call_sid, segment)
    except Exception as e:  # noqa: BLE001 - slow or down: the caller still gets the bot, and hears the sentence
        logger.error("call {}: resumed WITHOUT its past: the records were not read ({}: {})", mask(call_sid),
                     type(e).__name__, str(e)[:120])
        # Its turns numbered past any the call had: the earlier ones, written once the database is back, stay.
        return Resume(segment=segment, first_turn=segment * UNREAD_TURNS_FROM)
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
    caller = issued_by = None
    issued: IssuedToken | None = None
    problem: str | None
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
        calls.release(start.call_sid)
        assert issued is not None  # no problem above: the token was verified
        await line.release(issued.token_id)
        await play_busy_and_close(websocket, start.stream_sid, ctx.busy_audio, reason=f"busy: {full}")
        return None
    return caller, issued_by


