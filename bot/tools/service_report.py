"""``run_bot.py report --from YYYY-MM-DD --to YYYY-MM-DD [--csv]``: how the line served, day by day.

The figures and what each one counts are ``bot/store/service.py``'s (the desk's service page and
``/metrics`` show the same). The table is for a reader; ``--csv`` is for the city's own tools (one row a
day, a column per hand-over why, emergency number, end reason, language and ticket category).
"""

from __future__ import annotations

import sys
from typing import TextIO
from zoneinfo import ZoneInfo

from bot.config import Config
from bot.store import service
from bot.store.db import StoreError, open_store
from bot.tools.table import table


def _counts(c) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items()) if v) or "-"


def render(days: list[service.DayFigures], budget_ms: float) -> str:
    """The table, then the totals line."""
    rows = [[d.day.isoformat(), d.calls, d.resolved, "-" if d.resolved_share is None else f"{d.resolved_share:.0%}",
             d.handed_over, _counts(d.handovers), _counts(d.emergencies + d.emergency_kinds), d.abusive, d.idle, _counts(d.languages),
             _counts(d.tickets), d.turns, "-" if d.v2v_p90_ms is None else f"{d.v2v_p90_ms:.0f}", d.over_budget,
             _counts(d.ends)] for d in days]
    calls, resolved = sum(d.calls for d in days), sum(d.resolved for d in days)
    text = table(["day", "calls", "resolved by the bot", "share", "hand-overs", "why", "emergencies", "abusive",
                  "idle", "languages", "tickets", "turns", "v2v p90 ms", f"over {budget_ms:.0f} ms", "ends"], rows)
    share = f" ({resolved / calls:.0%})" if calls else ""
    return text + (f"{len(days)} day(s): {calls} call(s), {resolved} resolved by the bot alone{share}, "
                   f"{sum(d.handed_over for d in days)} handed over\n")


def run_report(config: Config, first: str, last: str, as_csv: bool, out: TextIO = sys.stdout) -> int:
    try:
        a, b = service.parse_day(first, "--from"), service.parse_day(last, "--to")
        service.check_range(a, b)
    except ValueError as e:
        raise StoreError(str(e)) from None  # exit 2 with the message, as the other desk commands
    store = open_store(config)
    try:
        days = service.service_days(store, first=a, last=b, tz=ZoneInfo(config.line.timezone),
                                    budget_ms=config.latency.total_ms)
    finally:
        store.close()
    out.write(service.to_csv(days) if as_csv else render(days, config.latency.total_ms))
    return 0
