"""The one FastAPI app: Twilio webhook and media stream, health and metrics.

Models are loaded once before the app serves; each call gets its own pipeline, dialog state and
records. A media stream is accepted only with a one-time token from the signed webhook.
``create_app`` only assembles: the shared state is ``bot.app.context.AppContext``, each concern's
routes are one router in ``bot.app.routes``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from bot.app.context import AppContext
from bot.app.routes import callbacks, health, media, metrics, stream_ended, transfer, twilio_voice
from bot.app.routes import records as records_api
from bot.app.routes.qa import mount_qa
from bot.call.build import build_call
from bot.call.models import SharedModels
from bot.call.request import CallRequest
from bot.call.session import CallSession
from bot.config import Config, Secrets
from bot.desk.app import mount_desk
from bot.line.calls import CallRegistry
from bot.store.calls import CallLog
from bot.telemetry.tracing import configure as configure_tracing
from bot.telemetry.tracing import resource_attributes

# The tests import the registry from here too.
__all__ = ["CallRegistry", "create_app"]

PUBLIC_ROUTERS = (twilio_voice.router, media.router, transfer.router, callbacks.router, health.public_router,
                  records_api.router, stream_ended.router)
OPERATIONS_ROUTERS = (health.admin_router, metrics.router)


def create_app(config: Config, secrets: Secrets, models: SharedModels,
               call_builder: Callable[[CallRequest], CallSession] = build_call,
               records: CallLog | None = None) -> FastAPI:
    """``call_builder`` builds each call's pipeline from a ``CallRequest`` (``build_call``; the bench's stock
    baseline passes its own, the test lab one that reads an injected fault from ``stream_parameters``, the
    stream's customParameters).

    ``records``: the records database (default: opened from ``records.url``, migrated, this worker's
    calls cut off by a crash marked aborted).
    """
    ctx = AppContext.build(config, secrets, models, call_builder, records)
    # One trace per call when telemetry.otlp_endpoint is set (bot/telemetry/tracing.py); off, nothing runs.
    configure_tracing(config.telemetry, resource_attributes(
        providers=models.tts.session_providers, hatches=ctx.hatches, worker=ctx.records.worker,
        stt_device=getattr(models.whisper, "device", None)))
    app = FastAPI(title="Korean public-service voice agent", lifespan=_lifespan(ctx), openapi_url=None,
                  docs_url=None, redoc_url=None)
    # The operations listener (server.admin_host:admin_port): served beside ``app`` by bot/app/serve.py.
    admin = FastAPI(title="voice agent operations", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.admin_app = admin
    app.state.drain = ctx.drain  # DrainingServer runs it on SIGTERM
    for router in PUBLIC_ROUTERS:
        app.include_router(router(ctx))
    for router in OPERATIONS_ROUTERS:
        admin.include_router(router(ctx))
    if config.server.qa_page:
        mount_qa(app, ctx)  # the QA page (bot/transports/webrtc.py); its calls run like phone calls
    mount_desk(app, admin, config=config, secrets=secrets, store=ctx.records.store)  # the staff desk (docs/desk.md)
    return app


def _lifespan(ctx: AppContext) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the background parts with the app (loop lag, retention, the line, the senders); stop them after."""
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        ctx.lag.start()
        ctx.records.start_retention()
        await ctx.line.start()
        if ctx.outbox is not None:
            ctx.outbox.start()
        if ctx.placer is not None:
            ctx.placer.start()
        yield
        if ctx.placer is not None:
            await ctx.placer.stop()
        if ctx.outbox is not None:
            await ctx.outbox.stop()
        await ctx.lag.stop()
        await ctx.line.stop()
        await ctx.records.aclose()

    return lifespan
