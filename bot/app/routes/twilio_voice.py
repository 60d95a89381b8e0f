"""``POST /twilio/voice``: Twilio's signed webhook for a new call, answered with stream TwiML or busy.

A call it admits gets a one-time stream token (``bot.line.tokens``) in the TwiML: the media
stream must bring it back (``bot.app.routes.media``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from loguru import logger

from bot.app.context import AppContext
from bot.app.routes.stream_ended import stream_twiml
from bot.line.admission import REPLAYED
from bot.line.callgate import FormTooLarge, read_webhook_form
from bot.privacy import mask
from bot.transports.twilio import build_busy_twiml, signature_is_valid


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()
    config, gate, line = ctx.config, ctx.gate, ctx.line

    @router.post("/twilio/voice")
    async def twilio_voice(request: Request) -> Response:
        form, refused = await _signed_form(ctx, request)
        if refused is not None:
            return refused
        call_sid = form.get("CallSid")
        if not call_sid:
            gate.refuse("bad_request")
            return PlainTextResponse("CallSid missing", status_code=400)
        if gate.replayed(call_sid):
            logger.warning("webhook refused: call {} was already answered (a replayed request)", mask(call_sid))
            gate.refuse("replayed")
            return PlainTextResponse("replayed webhook", status_code=403)
        busy, issued = await ctx.admit(call_sid, form.get("From"))
        if busy == REPLAYED:
            logger.warning("webhook refused: call {} was already answered by a worker of the line (a replayed "
                           "request)", mask(call_sid))
            gate.refuse("replayed")
            return PlainTextResponse("replayed webhook", status_code=403)
        if busy:
            logger.warning("call {} answered busy: {} ({} calls active or reserved here, server.max_calls {})",
                           mask(call_sid), busy, len(ctx.calls), config.server.max_calls)
            gate.refuse(busy.split(" ")[0])
            return Response(build_busy_twiml(ctx.canned.busy), media_type="application/xml")
        assert issued is not None  # admitted: a token was issued
        logger.info("call {} from {}: webhook accepted by worker {}", mask(call_sid), mask(form.get("From", "?")),
                    line.worker)
        return Response(stream_twiml(ctx, call_sid, issued.token), media_type="application/xml")

    return router


async def _signed_form(ctx: AppContext, request: Request) -> tuple[dict[str, str], Response | None]:
    """``(form, None)``, or ``({}, the refusal)``: a bad body is counted; both refusals name the client in the log."""
    client = request.client.host if request.client else "?"
    try:
        form = await read_webhook_form(request)
    except FormTooLarge as e:
        logger.warning("webhook refused: {} (from {})", e, client)
        ctx.gate.refuse("bad_request")
        return {}, PlainTextResponse("form body too large or not UTF-8", status_code=400)
    if ctx.config.twilio.validate_signature:
        url = f"https://{ctx.config.server.public_host}/twilio/voice"
        token = ctx.secrets.twilio_auth_token
        if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
            logger.warning("webhook refused: missing or wrong X-Twilio-Signature (from {})", client)
            return {}, PlainTextResponse("invalid signature", status_code=403)
    return form, None
