"""What every desk route shares: the store, the department routing, the signer, the login limits, templates."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from fastapi.templating import Jinja2Templates
from loguru import logger

from bot import languages
from bot.config import Config, Secrets
from bot.core.errors import StartupError
from bot.desk.auth import LoginLimiter, PasswordChecks, Signer
from bot.desk.departments import Routing
from bot.privacy import mask
from bot.store.db import Store
from bot.store.schema import TICKET_STATUSES

HERE = Path(__file__).resolve().parent
PREFIX = "/desk"
STATUS_LABELS = {"open": "접수", "in_progress": "처리 중", "done": "처리 완료", "rejected": "반려"}
ROLE_LABELS = {"agent": "상담원", "department": "부서 담당자", "admin": "관리자"}
assert set(STATUS_LABELS) == set(TICKET_STATUSES)


@dataclass
class DeskContext:
    config: Config
    store: Store
    routing: Routing
    signer: Signer
    limiter: LoginLimiter
    checks: PasswordChecks
    templates: Jinja2Templates
    tz: dt.tzinfo

    @classmethod
    def build(cls, config: Config, secret_key: str, store: Store) -> DeskContext:
        """Raises StartupError for a weak key or a departments file that does not fit the domain."""
        try:
            signer = Signer(secret_key)
        except ValueError as e:
            raise StartupError(f"staff desk: {e}") from e
        try:
            routing = Routing.load(config)
        except ValueError as e:  # RoutingError, DomainError, KnowledgeDataError: each names the file and key
            raise StartupError(f"staff desk: {e}") from e
        tz = ZoneInfo(config.line.timezone)
        templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = templates.env
        env.filters["mask"] = lambda v: mask(str(v)) if v else ""
        env.filters["local"] = lambda v, fmt="%Y-%m-%d %H:%M": v.astimezone(tz).strftime(fmt) if v else "-"
        env.filters["ms"] = lambda v: "-" if v is None else f"{v:.0f}"
        env.filters["pct"] = lambda v: "-" if v is None else f"{v * 100:.1f}%"
        env.globals.update(prefix=PREFIX, status_labels=STATUS_LABELS, role_labels=ROLE_LABELS,
                           statuses=TICKET_STATUSES, routing=routing,
                           trace_url_template=config.telemetry.trace_url_template,  # the call page's link
                           language_names={code: languages.get(code).names[languages.FIRST] for code in languages.known()})
        dc = config.desk
        return cls(config=config, store=store, routing=routing, signer=signer,
                   limiter=LoginLimiter(dc.login_attempts, dc.login_window_minutes * 60,
                                        max_delay_secs=dc.login_max_delay_secs),
                   checks=PasswordChecks(dc.login_checks), templates=templates, tz=tz)


def desk_context(config: Config, secrets: Secrets, store: Store) -> DeskContext | None:
    """The desk's context, or None (logged) when it is off: desk.enabled false, or no DESK_SECRET_KEY."""
    if not config.desk.enabled:
        logger.info("staff desk ({}) is off: desk.enabled = false", PREFIX)
        return None
    if not secrets.desk_secret_key:
        logger.warning("staff desk ({}) is OFF: set env DESK_SECRET_KEY (32+ random characters) to serve it "
                       "(docs/desk.md)", PREFIX)
        return None
    return DeskContext.build(config, secrets.desk_secret_key, store)
