"""``/twilio/callback/answer|amd|status``: the webhooks of a booked callback the bot placed.

``run_bot.py callbacks --place`` places the calls (``bot/aftercall/callbacks.py``). A person who
answers gets the bot, which first says where their ticket stands; a machine gets a short message
with the reception number. The status webhook closes the callback or books another attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from loguru import logger

from bot import languages
from bot.aftercall.callbacks import is_machine
from bot.aftercall.twilio_api import TwilioAPIError
from bot.app.context import AppContext
from bot.app.routes.signed import signed_form
from bot.app.routes.stream_ended import stream_twiml
from bot.call.wiring import make_policy
from bot.privacy import mask
from bot.transports.twilio import build_say_twiml

ENDED = ("completed", "no-answer", "busy", "failed", "canceled")  # Twilio's CallStatus for a call that is over


async def placed_callback(ctx: AppContext, request: Request, route: str,
                          callback_id: int) -> tuple[dict[str, str], dict[str, Any], Response | None]:
    """A callback webhook: ``(form, the callback's row, None)`` when it is signed and its CallSid
    is the call placed for that callback, else ``({}, {}, the refusal)``."""
    form, refused = await signed_form(ctx, request, route)
    if refused is not None:
        return {}, {}, refused
    cb = await asyncio.to_thread(ctx.records.store.find_callback, callback_id=callback_id)
    if cb is None or not form.get("CallSid") or cb["last_call_sid"] != form["CallSid"]:
        logger.warning("callback webhook for {} refused: not the call placed for it", callback_id)
        return {}, {}, PlainTextResponse("unknown callback", status_code=404)
    return form, cb, None


def machine_twiml(ctx: AppContext, cb: dict) -> str:
    # In the language the ticket was taken in (Twilio's <Say> voice for it).
    language = cb.get("language") or languages.FIRST
    policy = make_policy(ctx.config, ctx.models.assets).for_language(language)
    return build_say_twiml(policy.callback_machine_message(cb.get("reception_no")), policy.language)


async def _answered(ctx: AppContext, form: dict[str, str], cb: dict[str, Any], callback_id: int) -> Response:
    """The bot for a person (its stream TwiML), the message for a machine or when the line is busy."""
    call_sid, answered_by = form["CallSid"], form.get("AnsweredBy", "")
    if is_machine(answered_by):
        await asyncio.to_thread(ctx.records.store.callback_answered_by, callback_id, answered_by)
        logger.info("callback {} (call {}): a machine answered; leaving the message", callback_id, mask(call_sid))
        return Response(machine_twiml(ctx, cb), media_type="application/xml")
    busy, issued = await ctx.admit(call_sid, cb.get("caller"))
    if busy:  # the line is full: the message at least, rather than nothing
        logger.warning("callback {} (call {}): the line is busy ({}); leaving the message", callback_id,
                       mask(call_sid), busy)
        return Response(machine_twiml(ctx, cb), media_type="application/xml")
    assert issued is not None  # admitted: a token was issued
    logger.info("callback {} (call {}) answered; the bot takes it", callback_id, mask(call_sid))
    return Response(stream_twiml(ctx, call_sid, issued.token, callback=True),
                    media_type="application/xml")


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()
    config = ctx.config

    @router.post("/twilio/callback/answer")
    async def twilio_callback_answer(request: Request, id: int = 0) -> Response:
        """A placed callback was answered: a person gets the bot (its ticket's status first), a
        machine already detected a short message with the reception number and a hang-up."""
        form, cb, refused = await placed_callback(ctx, request, "/twilio/callback/answer", id)
        if refused is not None:
            return refused
        return await _answered(ctx, form, cb, id)

    @router.post("/twilio/callback/amd")
    async def twilio_callback_amd(request: Request, id: int = 0) -> Response:
        """Asynchronous AMD's verdict: a machine is redirected to the short message (after the beep)."""
        form, cb, refused = await placed_callback(ctx, request, "/twilio/callback/amd", id)
        if refused is not None:
            return refused
        answered_by = form.get("AnsweredBy") or "unknown"
        await asyncio.to_thread(ctx.records.store.callback_answered_by, id, answered_by)
        logger.info("callback {} (call {}): answered by {}", id, mask(form["CallSid"]), answered_by)
        if is_machine(answered_by) and ctx.twilio_api is not None:
            try:
                await ctx.twilio_api.redirect(form["CallSid"], machine_twiml(ctx, cb))
            except TwilioAPIError as e:
                logger.error("callback {}: message to the machine failed: {}", id, e)
        return Response(status_code=204)

    @router.post("/twilio/callback/status")
    async def twilio_callback_status(request: Request, id: int = 0) -> Response:
        """The placed call ended: answered is done; no answer, busy or failed is tried again (bounded)."""
        form, cb, refused = await placed_callback(ctx, request, "/twilio/callback/status", id)
        if refused is not None:
            return refused
        call_status = form.get("CallStatus", "")
        if call_status not in ENDED:
            return Response(status_code=204)  # not the end yet
        status = await asyncio.to_thread(
            ctx.records.store.callback_outcome, id, reached=call_status == "completed", why=call_status,
            max_attempts=config.callbacks.max_attempts, retry_after_secs=config.callbacks.retry_after_secs)
        log = logger.info if status in ("done", "waiting") else logger.warning
        log("callback {} (call {}): {}; callback now {} (attempt {}/{})", id, mask(form["CallSid"]), call_status,
            status, cb["attempts"], config.callbacks.max_attempts)
        return Response(status_code=204)

    return router
