"""The operations listener's figures: ``/metrics`` (Prometheus) and ``/api/loop_lag`` (the fault report's)."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from loguru import logger

from bot.app.context import AppContext
from bot.store import service
from bot.store.db import StoreError
from bot.telemetry.service_metrics import REFRESH_SECS, ServiceGauges


def finite(figures: dict) -> dict:
    """NaN (no samples yet) as None: JSON cannot carry NaN."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in figures.items()}


def service_today_and_yesterday(ctx: AppContext) -> dict[str, service.DayFigures]:
    """The line's figures of today and yesterday from the records (blocking: run it in a thread)."""
    tz = ZoneInfo(ctx.config.line.timezone)
    today = dt.datetime.now(tz).date()
    yesterday, day = service.service_days(ctx.records.store, first=today - dt.timedelta(days=1), last=today, tz=tz,
                                          budget_ms=ctx.config.latency.total_ms)
    return {"today": day, "yesterday": yesterday}


def router(ctx: AppContext) -> APIRouter:
    router = APIRouter()
    gauges = ServiceGauges(ctx.metrics.registry)
    refreshed = [-math.inf]  # monotonic time of the last read of the records

    async def refresh_service() -> None:
        """The voice_line_* gauges, read from the records at most every REFRESH_SECS (off the event loop);
        a database that does not answer keeps the last figures and costs the scrape its timeout only."""
        if time.monotonic() - refreshed[0] < REFRESH_SECS:
            return
        refreshed[0] = time.monotonic()
        try:
            gauges.set_days(await asyncio.to_thread(service_today_and_yesterday, ctx))
        except (StoreError, OSError, sa.exc.SQLAlchemyError) as e:
            logger.warning("/metrics: the line's day figures were not read from the records: {}", e)

    @router.get("/api/loop_lag")
    async def api_loop_lag(since: float = 0.0) -> JSONResponse:
        """Event-loop lag over the samples taken after ``since`` (wall clock): the fault report's figure."""
        return JSONResponse(finite(ctx.lag.summary(since=since)))

    @router.get("/metrics")
    async def prometheus_metrics() -> Response:
        await refresh_service()
        body, content_type = ctx.metrics.render(loop_lag=ctx.lag.summary(), records_pending=ctx.records.writer.pending)
        return Response(body, media_type=content_type)

    return router
