"""The operations listener's figures: ``/metrics`` (Prometheus) and ``/api/loop_lag`` (the fault report's)."""

from __future__ import annotations

import math

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from bot.app.context import AppContext


def finite(figures: dict) -> dict:
    """NaN (no samples yet) as None: JSON cannot carry NaN."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in figures.items()}


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.get("/api/loop_lag")
    async def api_loop_lag(since: float = 0.0):
        """Event-loop lag over the samples taken after ``since`` (wall clock): the fault report's figure."""
        return JSONResponse(finite(ctx.lag.summary(since=since)))

    @router.get("/metrics")
    async def prometheus_metrics():
        body, content_type = ctx.metrics.render(loop_lag=ctx.lag.summary(), records_pending=ctx.records.writer.pending)
        return Response(body, media_type=content_type)

    return router
