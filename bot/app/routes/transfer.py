"""Transfers: where a call goes after its last words, its TwiML, and ``POST /twilio/whisper``.

The desk gets a warm transfer: Twilio asks ``/twilio/whisper`` what the person answering hears
(the bot's summary of the call) before the caller is connected. An emergency service is dialled at once.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from loguru import logger

from bot.app.context import AppContext
from bot.app.routes.signed import signed_form
from bot.config import Config
from bot.privacy import mask
from bot.transports.twilio import build_dial_twiml, build_whisper_twiml


def transfer_target(config: Config, dialog) -> str | None:
    """Where the call goes after its last words: an emergency service, the desk, or nowhere."""
    if not dialog.transfer_requested:
        return None
    return dialog.transfer_to or config.call.transfer_number or None


def transfer_twiml(ctx: AppContext, session, call_sid: str, number: str) -> str:
    """The desk gets a warm transfer (the bot's summary first); an emergency service is dialled at once."""
    if session.dialog.transfer_to:
        return build_dial_twiml(number)
    if session.dialog.tickets:  # the desk's record: these tickets are now with a person
        ctx.records.hand_over(call_sid, list(session.dialog.tickets))
    if not ctx.config.call.transfer_whisper:
        return build_dial_twiml(number)
    ctx.records.transfer_note(call_sid, session.llm.policy.transfer_summary(session.dialog))
    return build_dial_twiml(number, f"https://{ctx.config.server.public_host}/twilio/whisper?call={call_sid}")


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.post("/twilio/whisper")
    async def twilio_whisper(request: Request, call: str = ""):
        """Twilio asks what the person answering a warm transfer hears before the caller is connected."""
        _form, refused = await signed_form(ctx, request, "/twilio/whisper", name="whisper")
        if refused is not None:
            return refused
        try:
            note = await ctx.records.read_transfer_note(call) if call else None
        except Exception as e:  # noqa: BLE001 - the database is slow or down: the person hears the plain intro
            logger.error("whisper for call {}: no note ({}: {})", mask(call), type(e).__name__, e)
            note = None
        logger.info("call {}: warm transfer answered; whisper {}", mask(call), "with the summary" if note else "plain")
        return Response(build_whisper_twiml(note or ctx.canned.whisper.format(details="").strip()),
                        media_type="application/xml")

    return router
