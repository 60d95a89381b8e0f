"""The desk's service page: how the line served, day by day, with charts, and the same figures as CSV.

``GET /desk/service?date_from=&date_to=`` (default: the last 14 days) and ``GET /desk/api/service.csv``
(a session or an account's bearer token, for the city's own tools). The figures and what each counts
are ``bot/store/service.py``'s, as ``run_bot.py report`` prints them. Counts only, no caller's data:
every role may read them. Added to the desk's router by ``build_router`` (its login and security headers).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from bot.desk.charts import line_chart
from bot.desk.context import DeskContext
from bot.store import service

DEFAULT_DAYS = 14


def add_service_routes(router: APIRouter, ctx: DeskContext, *, login_required: Callable, page: Callable,
                       refused: type[Exception]) -> None:
    """The service page and its CSV, on the desk's router."""
    budget = float(ctx.config.latency.total_ms)

    def days_asked(date_from: str, date_to: str) -> tuple[dt.date, dt.date]:
        today = dt.datetime.now(ctx.tz).date()
        try:
            last = service.parse_day(date_to, "끝 날짜") if date_to.strip() else today
            first = (service.parse_day(date_from, "시작 날짜") if date_from.strip()
                     else last - dt.timedelta(days=DEFAULT_DAYS - 1))
            service.check_range(first, last)
        except ValueError as e:
            raise refused("bad_request", f"날짜는 YYYY-MM-DD, 시작이 끝보다 앞서고 {service.MAX_DAYS}일까지입니다 ({e}).") from None
        return first, last

    def figures(first: dt.date, last: dt.date) -> list[service.DayFigures]:
        return service.service_days(ctx.store, first=first, last=last, tz=ctx.tz, budget_ms=budget)

    @router.get("/service")
    def service_page(request: Request, date_from: str = "", date_to: str = "") -> Response:
        who = login_required(request)
        first, last = days_asked(date_from, date_to)
        days = figures(first, last)
        labels = [d.day.strftime("%m-%d") for d in days]
        calls_chart = line_chart(labels, {"통화": [d.calls for d in days],
                                          "봇 단독 해결": [d.resolved for d in days],
                                          "상담원·긴급 연결": [d.handed_over for d in days]},
                                 title="일별 통화와 봇 단독 해결", unit="건")
        v2v_chart = line_chart(labels, {"음성→음성 p90": [d.v2v_p90_ms for d in days]},
                               title="일별 음성→음성 지연 p90", budget=budget)
        calls, resolved = sum(d.calls for d in days), sum(d.resolved for d in days)
        return page(request, "service.html", who, days=days, first=first, last=last, budget_ms=budget,
                    charts=[calls_chart, v2v_chart], total_calls=calls, total_resolved=resolved,
                    total_handed_over=sum(d.handed_over for d in days),
                    category_labels=ctx.routing.category_labels)

    @router.get("/api/service.csv")
    def service_csv(request: Request, date_from: str = "", date_to: str = "") -> Response:
        login_required(request, api=True)
        first, last = days_asked(date_from, date_to)
        return Response(service.to_csv(figures(first, last)), media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="line-service-{first}-{last}.csv"'})
