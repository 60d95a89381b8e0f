"""How the line serves today and yesterday, as ``/metrics`` gauges (``voice_line_*{day}``).

The figures are the records database's (``bot/store/service.py``, the same as ``run_bot.py report`` and
the desk's service page), line-wide: every worker exports the same values, so a dashboard takes
``max`` over workers, never ``sum``. ``day`` is ``today`` or ``yesterday`` in the line's time zone.
Each refresh replaces every series: a reason seen yesterday but not today leaves no stale value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

REFRESH_SECS = 60.0  # the records are read at most this often (a scrape in between gets the last figures)


class ServiceGauges:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.calls = Gauge("voice_line_calls", "Calls of the day, line-wide (records; QA excluded)", ["day"],
                           registry=r)
        self.resolved = Gauge("voice_line_calls_resolved", "Calls of the day resolved by the bot alone: no hand-over, "
                              "no callback, no repeat call within a day, a normal end", ["day"], registry=r)
        self.handovers = Gauge("voice_line_handovers", "Calls of the day handed over, by why (asked, errors, "
                               "emergency, other)", ["day", "why"], registry=r)
        self.emergencies = Gauge("voice_line_emergencies", "Calls of the day with an emergency, by the number told",
                                 ["day", "number"], registry=r)
        self.emergency_kinds = Gauge("voice_line_emergency_kinds", "Calls of the day with an emergency, by kind "
                                     "(emergency.toml)", ["day", "kind"], registry=r)
        self.ends = Gauge("voice_line_call_ends", "Calls of the day by end reason (abusive, caller_idle, running, ...)",
                          ["day", "reason"], registry=r)
        self.languages = Gauge("voice_line_call_languages", "Calls of the day by the language last answered in",
                               ["day", "language"], registry=r)
        self.tickets = Gauge("voice_line_tickets", "Tickets taken in the day, by category", ["day", "category"],
                             registry=r)
        self.v2v_p90 = Gauge("voice_line_voice_to_voice_p90_ms", "Voice-to-voice p90 over the day's turns (ms)",
                             ["day"], registry=r)
        self.over_budget = Gauge("voice_line_turns_over_budget", "Turns of the day whose voice-to-voice passed "
                                 "[latency] total_ms", ["day"], registry=r)

    def set_days(self, days: Mapping[str, Any]) -> None:
        """``{"today": DayFigures, "yesterday": DayFigures}`` (``bot.store.service.DayFigures``)."""
        for g in (self.calls, self.resolved, self.handovers, self.emergencies, self.emergency_kinds, self.ends, self.languages, self.tickets,
                  self.v2v_p90, self.over_budget):
            g.clear()
        for day, d in days.items():
            self.calls.labels(day).set(d.calls)
            self.resolved.labels(day).set(d.resolved)
            self.over_budget.labels(day).set(d.over_budget)
            if d.v2v_p90_ms is not None:
                self.v2v_p90.labels(day).set(d.v2v_p90_ms)
            for why in ("asked", "errors", "emergency", "other", *d.handovers):
                self.handovers.labels(day, why).set(d.handovers[why])
            for reason in ("abusive", "caller_idle", *d.ends):
                self.ends.labels(day, reason).set(d.ends[reason])
            for gauge, counts in ((self.emergencies, d.emergencies), (self.emergency_kinds, d.emergency_kinds),
                                  (self.languages, d.languages),
                                  (self.tickets, d.tickets)):
                for key, n in counts.items():
                    gauge.labels(day, key).set(n)
