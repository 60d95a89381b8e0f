"""Where the staff desk is served.

``mount_desk`` adds the desk to the bot's app (``desk.listener``: the public or the operations
listener); ``desk_app`` is the desk alone (tests, or a desk host apart from the bot workers: it
reads the same records database).
"""

from __future__ import annotations

from fastapi import FastAPI
from loguru import logger

from bot.config import Config, Secrets
from bot.core.errors import StartupError
from bot.desk.context import PREFIX, desk_context
from bot.desk.headers import DeskHeaders
from bot.desk.routes import build_router
from bot.store.db import Store


def mount_desk(app: FastAPI, admin: FastAPI, *, config: Config, secrets: Secrets, store: Store) -> None:
    """Serve the desk on the public app or the operations app (``desk.listener``), when it is on."""
    ctx = desk_context(config, secrets, store)
    if ctx is None:
        return
    on_public = config.desk.listener == "public"
    host = app if on_public else admin
    host.include_router(build_router(ctx))
    host.add_middleware(DeskHeaders, prefix=PREFIX, hsts=config.desk.cookie_secure)  # every answer under /desk
    port = config.server.port if on_public else config.server.admin_port
    logger.info("staff desk on {} listener: http://{}:{}{}/ (secure cookies: {})", config.desk.listener,
                config.server.host if on_public else config.server.admin_host, port, PREFIX, config.desk.cookie_secure)
    if not config.desk.cookie_secure:
        logger.warning("staff desk: desk.cookie_secure = false: session cookies also travel over plain HTTP")


def desk_app(config: Config, secrets: Secrets, store: Store) -> FastAPI:
    """The desk alone (its records database migrated by the caller); raises StartupError when it is off."""
    ctx = desk_context(config, secrets, store)
    if ctx is None:
        raise StartupError("staff desk is off: set env DESK_SECRET_KEY (and desk.enabled = true)")
    app = FastAPI(title="staff desk", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(build_router(ctx))
    app.add_middleware(DeskHeaders, prefix=PREFIX, hsts=config.desk.cookie_secure)
    return app
