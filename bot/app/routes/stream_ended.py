"""``POST /twilio/stream-ended``: Twilio asks our ``<Connect>``'s action what to do when a media stream ended.

Signed by Twilio (``X-Twilio-Signature`` over the URL with its query) and by us (the URL's ``sig``
binds the CallSid and the segment, ``StreamTokens.sign_action``); asked once per stream (a replay
is refused). The answer (``bot/store/segments.py``): ``<Hangup/>`` or the hand-over for a call the
bot ended; else a resume on any live worker, ``call.max_resumes`` times for faults (a drain's hand-over
is free); then the duty line in hours, or the hours said and a hang-up. Never silence.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from loguru import logger

from bot.app.context import AppContext
from bot.app.routes.signed import signed_form
from bot.core.deadline import in_thread
from bot.dialog.calendar import LineCalendar
from bot.privacy import mask
from bot.store.db import RECORDS_SECS
from bot.store.segments import HANDOVER, EndedSegment, call_caller, record_resume_token, take_action
from bot.transports.twilio import build_dial_twiml, build_hangup_twiml, build_say_twiml, build_stream_twiml

ROUTE = "/twilio/stream-ended"
# Twilio's CallStatus values of a call that is over: nothing to resume.
CALL_OVER = ("completed", "canceled", "failed", "busy", "no-answer")


def action_url(ctx: AppContext, call_sid: str, segment: int) -> str:
    """The ``<Connect>``'s action for this call's segment ``segment``, signed for both."""
    query = urlencode({"seg": segment, "sig": ctx.tokens.sign_action(call_sid, segment)})
    return f"https://{ctx.config.server.public_host}{ROUTE}?{query}"


def stream_twiml(ctx: AppContext, call_sid: str, token: str, *, segment: int = 0, callback: bool = False) -> str:
    """``<Connect action=...><Stream>`` for the call's segment, carrying its stream token."""
    return build_stream_twiml(ctx.config.server.public_host, token, callback=callback,
                              action=action_url(ctx, call_sid, segment), segment=segment)


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()
    calendar = LineCalendar.from_config(ctx.config.line)

    @router.post(ROUTE)
    async def stream_ended(request: Request, seg: str = "", sig: str = "") -> Response:
        form, refused = await signed_form(ctx, request, ROUTE, name="stream action")
        if refused is not None:
            ctx.gate.refuse("action_signature")
            return refused
        call_sid = form.get("CallSid") or ""
        idx = int(seg) if seg.isdigit() and len(seg) < 4 else -1
        if not call_sid or idx < 0 or not ctx.tokens.action_is_signed(call_sid, idx, sig):
            logger.warning("stream action refused for call {}: not an action URL we gave this call",
                           mask(call_sid or "?"))
            ctx.gate.refuse("action_forged")
            return PlainTextResponse("not this call's action", status_code=403)
        if form.get("CallStatus") in CALL_OVER:
            return _xml(build_hangup_twiml())
        try:
            ended = await in_thread(RECORDS_SECS, take_action, ctx.records.store, call_sid, idx)
        except Exception as e:  # noqa: BLE001 - the database is down: the caller still gets a way on
            logger.error("call {}: stream {} ended; its record not read ({}: {}); resuming", mask(call_sid), idx,
                         type(e).__name__, str(e)[:120])
            ended = EndedSegment(idx=idx)
        if ended is None:
            logger.warning("stream action refused for call {}: stream {} was asked about already (a replay)",
                           mask(call_sid), idx)
            ctx.gate.refuse("action_replayed")
            return PlainTextResponse("replayed action", status_code=403)
        if ended.bot_ended:
            logger.info("call {}: stream {} ended by the bot ({}): {}", mask(call_sid), idx, ended.end_reason,
                        "its hand-over" if ended.then_twiml else "hang-up")
            return _xml(ended.then_twiml or build_hangup_twiml())
        return _xml(await _resume_or_fallback(ctx, calendar, call_sid, ended))

    return router


async def _resume_or_fallback(ctx: AppContext, calendar: LineCalendar, call_sid: str, ended: EndedSegment) -> str:
    """A new stream for the call, while resumes are left; else the duty line in hours, else the hours."""
    config = ctx.config
    handed_over = ended.end_reason == HANDOVER  # a drain's, planned: not a fault, no resume spent
    resumes = ended.faults_before + (0 if handed_over else 1)  # resumes for faults, this one included
    if handed_over or resumes <= config.call.max_resumes:
        issued = ctx.tokens.issue(call_sid)
        try:
            caller = await in_thread(RECORDS_SECS, call_caller, ctx.records.store, call_sid)
            await in_thread(RECORDS_SECS, record_resume_token, ctx.records.store, issued.token_id, call_sid,
                            caller=caller, worker=ctx.line.worker,
                            expires_at=dt.datetime.fromtimestamp(issued.expires_at, dt.UTC))
        except Exception as e:  # noqa: BLE001 - the token is signed: its first use is recorded at the stream
            logger.error("call {}: resume token not recorded ({}: {})", mask(call_sid), type(e).__name__,
                         str(e)[:120])
        ctx.metrics.call_resumed(ended.end_reason or ("stream_lost" if ended.started else "never_started"))
        logger.warning("call {}: stream {} ended ({}, worker {}); resuming as stream {} ({})", mask(call_sid),
                       ended.idx, ended.end_reason or "no end recorded", ended.worker or "?", ended.idx + 1,
                       "a hand-over" if handed_over else f"{resumes} of call.max_resumes {config.call.max_resumes}")
        return stream_twiml(ctx, call_sid, issued.token, segment=ended.idx + 1)
    number = config.call.transfer_number
    if number and calendar.is_open(calendar.now()):
        logger.warning("call {}: stream {} ended after {} resumes (call.max_resumes): to the duty line",
                       mask(call_sid), ended.idx, resumes - 1)
        return build_dial_twiml(number)
    logger.warning("call {}: stream {} ended after {} resumes (call.max_resumes), the desk closed or none: "
                   "the hours and a hang-up", mask(call_sid), ended.idx, resumes - 1)
    return build_say_twiml(ctx.canned.closing_hours.replace("{hours}", calendar.hours_phrase()))


def _xml(twiml: str) -> Response:
    return Response(twiml, media_type="application/xml")
