"""Liveness and readiness: ``/healthz`` on the public listener, ``/healthz`` and ``/readyz`` on the operations one."""

from __future__ import annotations

import asyncio
import os

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bot.app.context import AppContext
from bot.line.callgate import process_figures
from bot.ops.readiness import readiness


def public_router(ctx: AppContext) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz():
        """Public liveness: ok or draining, nothing more (the figures are on the operations listener)."""
        status, code = ctx.liveness()
        return JSONResponse({"status": status}, status_code=code)

    return router


def admin_router(ctx: AppContext) -> APIRouter:
    router = APIRouter()
    config, calls, line = ctx.config, ctx.calls, ctx.line

    @router.get("/healthz")
    async def admin_healthz():
        # asyncio_tasks, rss_bytes, open_fds: numbers that must come back down after calls end (soak).
        status, code = ctx.liveness()
        return JSONResponse({"status": status, "active_calls": len(calls.active),
                             "reserved_calls": len(calls) - len(calls.active), "max_calls": config.server.max_calls,
                             "worker": line.worker, "pid": os.getpid(),
                             "asyncio_tasks": len(asyncio.all_tasks()), **process_figures()},
                            status_code=code)

    @router.get("/readyz")
    async def readyz():
        """Readiness (new calls welcome): models loaded, LLM reachable, not draining; plus the line's figures."""
        ready, body = await readiness(config, ctx.llm_probe, draining=ctx.gate.draining, worker=line.worker)
        body.update(await line.figures())
        if ctx.self_timing is not None:  # a slow start is shown, not unready: calls still work
            body["self_timing"] = ctx.self_timing.as_dict()
        return JSONResponse(body, status_code=200 if ready else 503)

    return router
