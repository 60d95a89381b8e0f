"""How the line serves, day by day, from the records: ``run_bot.py report``, the desk's service page, ``/metrics``.

A call counts on the day it started in the line's time zone (``line.timezone``), and its turns with
it; a ticket on the day it was taken. Calls from the QA page are left out.

**Resolved by the bot alone** (the figure Korean call centres report as "resolved without passing it
on"): the call was not handed over (``transfer``, ``emergency_transfer``), asked for no callback, and
the same number did not call again within a day (24 hours) of its start (the repeat call is judged on
its own); and it ended the normal way (``RESOLVED_ENDS``: the bot's goodbye or the caller hanging up),
not on abuse, silence, a failure, a server shutdown or a crash. An end reason this module does not
know is not counted as resolved: the figure claims only what the records show.

A hand-over's why: ``emergency`` (put through to an emergency service), ``errors`` (turns kept failing:
the policy's transfer after errors, route ``error``), ``asked`` (the caller asked for a person, by
words or the keypad), ``other`` (no turn says). Emergencies count calls by the number the caller was
told (119, 112, 109) and by kind (``emergency.toml``'s: the kind's sentences the caller heard,
``emergency:<kind>`` in the turn's ``heard``), once per call. Every end reason is counted as written (a new one too); abusive
(``abusive``) and idle (``caller_idle``) ends are also given apart. A call's language is the one its
last turn was answered in.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from bot.store.db import Store
from bot.store.schema import callbacks, calls, tickets, turns
from bot.telemetry.latency import percentile

HANDOVER_ENDS = ("transfer", "emergency_transfer")
# completed: the bot's goodbye; caller_hangup/hangup/stream_closed: the caller put the phone down.
RESOLVED_ENDS = ("completed", "caller_hangup", "hangup", "stream_closed")
HANDOVER_WHY = ("asked", "errors", "emergency", "other")
EMERGENCY_HEARD = "emergency:"  # an emergency kind's sentence in a turn's ``heard`` (bot/call/assets.py)
ABUSIVE_END = "abusive"
IDLE_END = "caller_idle"
RUNNING = "running"  # the end reason of a call not ended yet
REPEAT_WINDOW = dt.timedelta(days=1)
MAX_DAYS = 366  # a report spans at most a year


@dataclass
class DayFigures:
    """One day of the line (counts of calls unless named otherwise)."""

    day: dt.date
    calls: int = 0
    resolved: int = 0  # by the bot alone (module doc)
    handovers: Counter[str] = field(default_factory=Counter)  # why -> calls
    callbacks: int = 0  # calls that asked for a callback
    repeated: int = 0  # calls the same number called again within a day
    emergencies: Counter[str] = field(default_factory=Counter)  # number told -> calls
    emergency_kinds: Counter[str] = field(default_factory=Counter)  # kind (emergency.toml) -> calls
    ends: Counter[str] = field(default_factory=Counter)  # end reason -> calls
    languages: Counter[str] = field(default_factory=Counter)  # language -> calls
    tickets: Counter[str] = field(default_factory=Counter)  # category -> tickets taken that day
    turns: int = 0  # answered caller turns (greetings not counted)
    v2v_p90_ms: float | None = None  # voice-to-voice p90 over the day's turns
    over_budget: int = 0  # turns whose voice-to-voice passed [latency] total_ms

    @property
    def handed_over(self) -> int:
        return sum(self.handovers.values())

    @property
    def abusive(self) -> int:
        return self.ends[ABUSIVE_END]

    @property
    def idle(self) -> int:
        return self.ends[IDLE_END]

    @property
    def resolved_share(self) -> float | None:
        return self.resolved / self.calls if self.calls else None


def parse_day(text: str, what: str) -> dt.date:
    """A ``YYYY-MM-DD`` date; ValueError naming ``what`` otherwise."""
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{what}: not a date (YYYY-MM-DD): {text!r}") from None


def check_range(first: dt.date, last: dt.date) -> None:
    if last < first:
        raise ValueError(f"--to {last} is before --from {first}")
    if (last - first).days >= MAX_DAYS:
        raise ValueError(f"{(last - first).days + 1} days asked: a report spans at most {MAX_DAYS}")


def _start(day: dt.date, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tz).astimezone(dt.UTC)


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


def service_days(store: Store, *, first: dt.date, last: dt.date, tz: dt.tzinfo, budget_ms: float) -> list[DayFigures]:
    """Every day from ``first`` to ``last`` (both included, the line's days), oldest first (blocking)."""
    check_range(first, last)
    lo, hi = _start(first, tz), _start(last + dt.timedelta(days=1), tz)
    with store.engine.connect() as conn:
        day_calls = [dict(r) for r in conn.execute(
            sa.select(calls.c.call_sid, calls.c.caller, calls.c.started_at, calls.c.ended_at, calls.c.end_reason)
            .where(calls.c.started_at >= lo, calls.c.started_at < hi, calls.c.qa.is_(False))).mappings()]
        sids = [c["call_sid"] for c in day_calls]
        numbers = sorted({c["caller"] for c in day_calls if c["caller"]})
        # A repeat may come the day after the report's last day.
        later = [(n, _utc(t)) for n, t in conn.execute(
            sa.select(calls.c.caller, calls.c.started_at)
            .where(calls.c.caller.in_(numbers), calls.c.started_at >= lo, calls.c.started_at < hi + REPEAT_WINDOW,
                   calls.c.qa.is_(False)))] if numbers else []
        asked_callback = {s for (s,) in conn.execute(
            sa.select(callbacks.c.call_sid).where(callbacks.c.call_sid.in_(sids)))} if sids else set()
        call_turns = [dict(r) for r in conn.execute(
            sa.select(turns.c.call_sid, turns.c.idx, turns.c.route, turns.c.intent, turns.c.escalation,
                      turns.c.voice_to_voice_ms, turns.c.record["language"].as_string().label("language"),
                      turns.c.record["heard"].label("heard"))
            .where(turns.c.call_sid.in_(sids)).order_by(turns.c.call_sid, turns.c.idx)).mappings()] if sids else []
        day_tickets = list(conn.execute(
            sa.select(tickets.c.category, tickets.c.created_at)
            .where(tickets.c.created_at >= lo, tickets.c.created_at < hi)))

    days = {first + dt.timedelta(days=i): DayFigures(first + dt.timedelta(days=i))
            for i in range((last - first).days + 1)}
    by_call: dict[str, list[dict[str, Any]]] = {}
    for t in call_turns:
        by_call.setdefault(t["call_sid"], []).append(t)
    by_number: dict[str, list[dt.datetime]] = {}
    for number, at in later:
        by_number.setdefault(number, []).append(at)
    v2v: dict[dt.date, list[float]] = {d: [] for d in days}
    for c in day_calls:
        started = _utc(c["started_at"])
        d = days[started.astimezone(tz).date()]
        said = [t for t in by_call.get(c["call_sid"], []) if t["route"] != "greeting"]
        end = (c["end_reason"] or "unknown") if c["ended_at"] is not None else RUNNING
        repeated = any(started < at <= started + REPEAT_WINDOW for at in by_number.get(c["caller"] or "", []))
        d.calls += 1
        d.ends[end] += 1
        d.callbacks += c["call_sid"] in asked_callback
        d.repeated += repeated
        if end in HANDOVER_ENDS:
            d.handovers[_why(end, said)] += 1
        elif end in RESOLVED_ENDS and c["call_sid"] not in asked_callback and not repeated:
            d.resolved += 1
        for number in sorted({t["escalation"] for t in said if t["escalation"]}):
            d.emergencies[number] += 1
        for kind in sorted({h.split(":", 1)[1] for t in said if t["escalation"] for h in _heard(t)
                            if h.startswith(EMERGENCY_HEARD)}):
            d.emergency_kinds[kind] += 1
        spoken = [t["language"] for t in by_call.get(c["call_sid"], []) if t["language"]]
        d.languages[spoken[-1] if spoken else "unknown"] += 1
        for t in said:
            if t["route"] == "pending":  # never answered: the call ended first
                continue
            d.turns += 1
            if t["voice_to_voice_ms"] is not None:
                v2v[d.day].append(float(t["voice_to_voice_ms"]))
                d.over_budget += t["voice_to_voice_ms"] > budget_ms
    for category, at in day_tickets:
        days[_utc(at).astimezone(tz).date()].tickets[category] += 1
    for d in days.values():
        d.v2v_p90_ms = percentile(v2v[d.day], 90) if v2v[d.day] else None
    return list(days.values())


def _heard(turn: dict[str, Any]) -> list[str]:
    heard = turn["heard"]
    if isinstance(heard, str):  # a backend that hands JSON back as text
        heard = json.loads(heard)
    return [h for h in heard or [] if isinstance(h, str)]


def _why(end: str, said: list[dict[str, Any]]) -> str:
    if end == "emergency_transfer":
        return "emergency"
    asked = [t for t in said if t["intent"] == "transfer"]
    if not asked:
        return "other"
    return "errors" if asked[-1]["route"] == "error" else "asked"


# The CSV's counted columns: prefix -> DayFigures' Counter, with the keys always given a column.
COUNTED = (("handovers", "handovers", HANDOVER_WHY), ("emergencies", "emergencies", ()),
           ("kind", "emergency_kinds", ()), ("ends", "ends", (ABUSIVE_END, IDLE_END)), ("languages", "languages", ()),
           ("tickets", "tickets", ()))


def columns(days: list[DayFigures]) -> list[str]:
    """The CSV's columns: fixed ones, then one per hand-over why, emergency number and kind, end reason,
    language and ticket category seen (hand-over whys, abusive and idle ends always)."""
    out = ["day", "calls", "resolved", "resolved_share", "handed_over", "callbacks", "repeated", "abusive", "idle",
           "turns", "v2v_p90_ms", "over_budget"]
    for prefix, attr, always in COUNTED:
        seen = {k for d in days for k in getattr(d, attr)} - set(always)
        out += [f"{prefix}_{k}" for k in (*always, *sorted(seen))]
    return out


def row(d: DayFigures, cols: list[str]) -> dict[str, Any]:
    """One day as the CSV's row (``cols`` from ``columns``)."""
    share = d.resolved_share
    out: dict[str, Any] = {"day": d.day.isoformat(), "calls": d.calls, "resolved": d.resolved,
                           "resolved_share": "" if share is None else f"{share:.3f}", "handed_over": d.handed_over,
                           "callbacks": d.callbacks, "repeated": d.repeated, "abusive": d.abusive, "idle": d.idle,
                           "turns": d.turns, "v2v_p90_ms": "" if d.v2v_p90_ms is None else f"{d.v2v_p90_ms:.0f}",
                           "over_budget": d.over_budget}
    attrs = {prefix: attr for prefix, attr, _ in COUNTED}
    for col in cols:
        if col not in out:
            prefix, key = col.split("_", 1)
            out[col] = getattr(d, attrs[prefix])[key]
    return out


def to_csv(days: list[DayFigures]) -> str:
    """The days as CSV (one row a day; the header names every column)."""
    cols = columns(days)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for d in days:
        writer.writerow(row(d, cols))
    return buf.getvalue()
