"""``GET /api/turns``: turn records of finished calls, behind the records API's bearer token."""

from __future__ import annotations

import hmac
import math
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from loguru import logger

from bot.app.context import AppContext
from bot.app.routes.metrics import finite
from bot.config import Secrets
from bot.core.bearer import bearer_header


def records_refusal(request: Request, secrets: Secrets) -> Response | None:
    """None when the request carries the records token; else 404 (records API off) or 401."""
    want = secrets.records_api_token
    if not want:
        return PlainTextResponse("not found", status_code=404)
    got = request.headers.get("Authorization", "")
    if not hmac.compare_digest(got.encode(), bearer_header(want)["Authorization"].encode()):
        logger.warning("records API refused: missing or wrong bearer token (from {})",
                       request.client.host if request.client else "?")
        return PlainTextResponse("records need a bearer token", status_code=401,
                                 headers={"WWW-Authenticate": "Bearer"})
    return None


def environment(ctx: AppContext) -> dict:
    """What the turns were measured on: STT, TTS, LLM and the escape hatches."""
    config, models = ctx.config, ctx.models
    return {
        "stt": {"model": config.stt.model, "device": models.whisper.device,
                "compute_type": config.stt.compute_type, "beam_size": config.stt.beam_size},
        "tts": {"providers": models.tts.session_providers, "voice": config.tts.voice, "steps": config.tts.total_steps,
                "standin": getattr(models.tts, "is_standin", False)},
        "llm": {"model": config.llm.model, "dialect": config.llm.dialect, "base_url": config.llm.base_url},
        "escape_hatches": ctx.hatches,
    }


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.get("/api/turns")
    async def api_turns(request: Request, since: float = 0.0) -> Response:
        """Turn records of finished calls, from the records database (`run_bot.py bench --url` reads them).

        Citizens' words: only with ``Authorization: Bearer $RECORDS_API_TOKEN``; without that env
        variable the route is off (404), never open. The words come masked (``bot.privacy.mask``, as in
        the logs and on the desk). ``since``: seconds since the epoch, 0 to now; else 400 with the reason.
        """
        refused = records_refusal(request, ctx.secrets)
        if refused is not None:
            return refused
        if not (math.isfinite(since) and 0 <= since <= time.time() + 86400):
            why = ("looks like milliseconds; give seconds since the epoch" if math.isfinite(since) and since > 1e11
                   else "must be seconds since the epoch, from 0 to now")
            return JSONResponse({"error": f"since={since!r}: {why}"}, status_code=400)
        return JSONResponse({
            "turns": await ctx.records.finished_turns(since),
            "environment": environment(ctx),
            "loop_lag": finite(ctx.lag.summary()),  # no samples yet: NaN, which JSON cannot carry
        })

    return router
