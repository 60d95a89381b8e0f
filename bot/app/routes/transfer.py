"""Transfers: ``POST /twilio/whisper`` (where a call goes and its TwiML: ``bot.app.phone``).

The desk gets a warm transfer: Twilio asks ``/twilio/whisper`` what the person answering hears
(the bot's summary of the call) before the caller is connected. An emergency service is dialled at once.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from loguru import logger

from bot.app.context import AppContext
from bot.app.routes.signed import signed_form
from bot.privacy import mask
from bot.transports.twilio import build_whisper_twiml


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.post("/twilio/whisper")
    async def twilio_whisper(request: Request, call: str = "") -> Response:
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
