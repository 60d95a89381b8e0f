"""Twilio's webhook forms, read within their size limit and checked against Twilio's signature."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import PlainTextResponse, Response
from loguru import logger

from bot.app.context import AppContext
from bot.line.callgate import FormTooLarge, read_webhook_form
from bot.transports.twilio import signature_is_valid


async def signed_form(ctx: AppContext, request: Request, route: str,
                      name: str | None = None) -> tuple[dict[str, str], Response | None]:
    """``(form, None)``, or ``({}, the refusal)``: too large, or not signed by Twilio for this URL (query included).

    ``name``: how the refusal's log line names the webhook (default: its route).
    """
    try:
        form = await read_webhook_form(request)
    except FormTooLarge:
        return {}, PlainTextResponse("form body too large or not UTF-8", status_code=400)
    if ctx.config.twilio.validate_signature:
        query = f"?{request.url.query}" if request.url.query else ""
        url = f"https://{ctx.config.server.public_host}{route}{query}"
        token = ctx.secrets.twilio_auth_token
        if not token or not signature_is_valid(token, url, form, request.headers.get("X-Twilio-Signature")):
            logger.warning("{} refused: missing or wrong X-Twilio-Signature", name or route)
            return {}, PlainTextResponse("invalid signature", status_code=403)
    return form, None
