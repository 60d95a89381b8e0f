"""The latest calls (agents and admins: every caller's words) and the line's health (latency against its budgets).

A call's own page, its recording and its player are bot/desk/recordings.py's.
"""

from __future__ import annotations

import datetime as dt

from fastapi import Request
from fastapi.responses import Response

from bot.desk import queries
from bot.desk.charts import line_chart
from bot.desk.guard import Screens, screen


class CallScreens(Screens):
    @screen("GET", "/calls")
    def calls_page(self, request: Request) -> Response:
        # Every caller's words: not for a department's clerk, who sees its own tickets' calls only.
        who = self.desk.login_required(request, roles=("agent", "admin"))
        rows = queries.recent_calls(self.desk.store, limit=100, lease_secs=self.desk.ctx.config.server.worker_lease_secs)
        return self.desk.page(request, "calls.html", who, calls=rows)

    @screen("GET", "/health")
    def health_page(self, request: Request) -> Response:
        ctx = self.desk.ctx
        who = self.desk.login_required(request)
        now = dt.datetime.now(dt.UTC)
        day = queries.turn_records(ctx.store, now - dt.timedelta(days=1))
        hour = [r for r in day if r["created_at"] >= now - dt.timedelta(hours=1)]
        budgets = ctx.config.latency
        hourly = queries.hourly_v2v(day, now=now)
        chart = line_chart([h["hour"].astimezone(ctx.tz).strftime("%H시") for h in hourly],
                           {"p50": [h["p50"] for h in hourly], "p90": [h["p90"] for h in hourly]},
                           title="음성→음성 지연 (시간별, 최근 24시간)", budget=budgets.total_ms)
        return self.desk.page(request, "health.html", who, windows=[("최근 1시간", queries.health(hour, budgets)),
                                                                ("최근 24시간", queries.health(day, budgets))],
                              chart=chart)
