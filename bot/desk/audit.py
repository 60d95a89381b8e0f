"""The access audit's monthly review (/desk/audit, admins): who read, heard or copied which calls, when and why.

The working hours it judges by are the line's (``line.hours``), breaks and all holidays as closed; the figures
are ``bot/store/audit.py``'s, as ``run_bot.py audit --month`` prints them.
"""

from __future__ import annotations

import datetime as dt

from fastapi import Request
from fastapi.responses import Response

from bot.desk.guard import Desk, Refused, Screens, screen
from bot.dialog.calendar import Hours, LineCalendar
from bot.store.audit import ACTION_LABELS, REFUSAL_LABELS, monthly_review
from bot.store.db import StoreError


class AuditScreens(Screens):
    def __init__(self, desk: Desk) -> None:
        super().__init__(desk)
        line = desk.ctx.config.line
        self.working_hours = LineCalendar(Hours.parse(line.hours, key="line.hours"), tz=line.timezone,
                                          extra_closed=line.extra_closed_days)
        desk.ctx.templates.env.globals.update(access_labels=ACTION_LABELS, refusal_labels=REFUSAL_LABELS)

    @screen("GET", "/audit")
    def audit_page(self, request: Request, month: str = "") -> Response:
        ctx = self.desk.ctx
        who = self.desk.login_required(request, roles=("admin",))
        month = month.strip() or dt.datetime.now(ctx.tz).strftime("%Y-%m")
        try:
            review = monthly_review(ctx.store, month, tz=ctx.tz, is_open=self.working_hours.is_open,
                                    many_calls=ctx.config.desk.review_many_calls)
        except StoreError as e:
            raise Refused("bad_request", "월은 YYYY-MM 형식으로 적어 주세요 (예: 2026-11).") from e
        return self.desk.page(request, "audit.html", who, review=review)
