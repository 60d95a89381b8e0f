"""What the desk reads from the records database: the queue, one ticket with its call, calls, health.

Blocking (SQLAlchemy Core on ``Store.engine``): the desk's routes are plain ``def`` endpoints, which
FastAPI runs in its thread pool, never on the event loop the calls' audio runs on.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bot.config import LatencyConfig
from bot.desk.auth import Principal
from bot.desk.departments import Routing
from bot.store.db import Store
from bot.store.recordings import access_log
from bot.store.schema import callbacks, calls, ticket_audit, tickets, turns, workers
from bot.telemetry.latency import STAGES, percentile

HEALTH_MAX_TURNS = 50000  # a day of a busy line; more is sampled from the newest
_TRACE_ID = re.compile(r"[0-9a-f]{32}")  # a turn's trace id (bot/telemetry/tracing.py): it goes into a link


def _utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def _row(r: Mapping[Any, Any]) -> dict[str, Any]:
    return {k: _utc(v) for k, v in dict(r).items()}


@dataclass(frozen=True)
class TicketFilter:
    status: str | None = None
    category: str | None = None
    department: str | None = None
    date_from: dt.date | None = None  # created on or after (the line's time zone)
    date_to: dt.date | None = None  # created on or before
    q: str | None = None  # a reception number (or its start) or words of the location


def list_tickets(store: Store, routing: Routing, who: Principal, f: TicketFilter, *, tz: dt.tzinfo,
                 limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], bool]:
    """Tickets newest first that ``who`` may see, and whether there are more after this page."""
    q = sa.select(tickets).order_by(tickets.c.id.desc())
    department = who.department if who.role == "department" else f.department
    if department:
        q = q.where(tickets.c.category.in_(routing.categories_of(department)))
    if f.status:
        q = q.where(tickets.c.status == f.status)
    if f.category:
        q = q.where(tickets.c.category == f.category)
    if f.date_from:
        q = q.where(tickets.c.created_at >= _day_start(f.date_from, tz))
    if f.date_to:
        q = q.where(tickets.c.created_at < _day_start(f.date_to + dt.timedelta(days=1), tz))
    if f.q:
        text = f.q.strip()
        if text.isdigit():
            q = q.where(tickets.c.reception_no.startswith(text, autoescape=True))
        else:
            q = q.where(tickets.c.location.contains(text, autoescape=True))
    with store.engine.connect() as conn:
        rows = [_ticket(_row(r), routing) for r in conn.execute(q.limit(limit + 1).offset(offset)).mappings()]
    return rows[:limit], len(rows) > limit


def _day_start(day: dt.date, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tz).astimezone(dt.UTC)


def _ticket(t: dict[str, Any], routing: Routing) -> dict[str, Any]:
    dept = routing.department_of(t["category"])
    return {**t, "department": dept, "department_name": routing.department_names.get(dept or "", "-"),
            "category_label": routing.category_labels.get(t["category"], t["category"])}


def find_ticket(store: Store, routing: Routing, reception_no: str) -> dict[str, Any] | None:
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(tickets).where(tickets.c.reception_no == reception_no)).mappings().first()
    return _ticket(_row(row), routing) if row else None


def ticket_detail(store: Store, ticket: dict[str, Any]) -> dict[str, Any]:
    """The ticket's call (with its turns), callbacks asked for in that call, and the audit trail."""
    sid = ticket.get("call_sid")
    with store.engine.connect() as conn:
        audit = [_row(r) for r in conn.execute(
            sa.select(ticket_audit).where(ticket_audit.c.reception_no == ticket["reception_no"])
            .order_by(ticket_audit.c.id)).mappings()]
        call = conn.execute(sa.select(calls).where(calls.c.call_sid == sid)).mappings().first() if sid else None
        call_turns = [_turn(r) for r in conn.execute(
            sa.select(turns).where(turns.c.call_sid == sid).order_by(turns.c.idx)).mappings()] if sid else []
        cbs = [_row(r) for r in conn.execute(
            sa.select(callbacks).where(callbacks.c.call_sid == sid).order_by(callbacks.c.id)).mappings()] if sid else []
    return {"audit": audit, "call": _row(call) if call else None, "turns": call_turns, "callbacks": cbs,
            "recording_access": access_log(store, sid) if sid else []}


def _turn(r: Mapping[Any, Any]) -> dict[str, Any]:
    rec = r["record"] or {}
    return {"idx": r["idx"], "route": r["route"], "intent": r["intent"], "transcript": r["transcript"],
            "reply": r["reply"], "llm_calls": r["llm_calls"], "voice_to_voice_ms": r["voice_to_voice_ms"],
            "escalation": r["escalation"], "heard": rec.get("heard") or [], "created_at": _utc(r["created_at"]),
            "trace_id": rec.get("trace_id") if _TRACE_ID.fullmatch(str(rec.get("trace_id"))) else None}


def recent_calls(store: Store, *, limit: int, lease_secs: float) -> list[dict[str, Any]]:
    """Calls newest first with their turns; ``live``: not ended and its worker's lease is fresh."""
    fresh = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=lease_secs)
    with store.engine.connect() as conn:
        live_workers = {w for (w,) in conn.execute(sa.select(workers.c.worker).where(workers.c.heartbeat_at >= fresh))}
        rows = [_row(r) for r in conn.execute(sa.select(calls).order_by(calls.c.started_at.desc()).limit(limit))
                .mappings()]
        by_sid = {r["call_sid"]: {**r, "turns": []} for r in rows}
        if by_sid:
            for t in conn.execute(sa.select(turns).where(turns.c.call_sid.in_(list(by_sid)))
                                  .order_by(turns.c.call_sid, turns.c.idx)).mappings():
                by_sid[t["call_sid"]]["turns"].append(_turn(t))
    out = []
    for c in by_sid.values():
        said = [t for t in c["turns"] if t["route"] != "greeting"]
        routes: dict[str, int] = {}
        for t in said:
            routes[t["route"] or "?"] = routes.get(t["route"] or "?", 0) + 1
        v2v = [t["voice_to_voice_ms"] for t in said if t["voice_to_voice_ms"] is not None]
        out.append({**c, "said": said, "routes": dict(sorted(routes.items())),
                    "v2v_p50": percentile(v2v, 50) if v2v else None,
                    "live": c["ended_at"] is None and c["worker"] in live_workers})
    return out


def turn_records(store: Store, since: dt.datetime) -> list[dict[str, Any]]:
    """Turn records (stages, route, heard) of phone calls (not QA) since ``since``, with their call's end."""
    q = (sa.select(turns.c.record, turns.c.created_at, turns.c.call_sid, calls.c.end_reason)
         .join(calls, calls.c.call_sid == turns.c.call_sid)
         .where(turns.c.created_at >= since, calls.c.qa.is_(False))
         .order_by(turns.c.id.desc()).limit(HEALTH_MAX_TURNS))
    with store.engine.connect() as conn:
        return [{**(rec or {}), "created_at": _utc(at), "call_sid": sid, "end_reason": end}
                for rec, at, sid, end in conn.execute(q)]


def health(records: list[dict[str, Any]], budgets: LatencyConfig) -> dict[str, Any]:
    """Per-stage p50/p90/p99 and turns over budget, LLM calls per turn, apology and transfer rates."""
    said = [r for r in records if r.get("route") != "greeting"]
    stages = []
    for name, _, _, budget_key in STAGES:
        vals = [r["stages_ms"][name] for r in said if name in (r.get("stages_ms") or {})]
        budget = getattr(budgets, budget_key) if budget_key else None
        stages.append({"stage": name, "n": len(vals), "p50": percentile(vals, 50) if vals else None,
                       "p90": percentile(vals, 90) if vals else None, "p99": percentile(vals, 99) if vals else None,
                       "budget_ms": budget, "over_budget": sum(v > budget for v in vals) if budget else None})
    call_ends = {r["call_sid"]: r.get("end_reason") for r in records}
    ended = [e for e in call_ends.values() if e]
    llm = [int(r.get("llm_calls") or 0) for r in said]
    return {
        "turns": len(said),
        "calls": len(call_ends),
        "stages": stages,
        "llm_calls_per_turn": sum(llm) / len(llm) if llm else None,
        "turns_with_two_or_more_llm_calls": sum(n >= 2 for n in llm),
        "apology_rate": sum("apology" in (r.get("heard") or []) for r in said) / len(said) if said else None,
        "transfer_rate": sum(e in ("transfer", "emergency_transfer") for e in ended) / len(ended) if ended else None,
    }


def hourly_v2v(records: list[dict[str, Any]], *, now: dt.datetime, hours: int = 24) -> list[dict[str, Any]]:
    """Voice-to-voice p50 and p90 per hour, oldest first (the health page's chart)."""
    buckets: list[list[float]] = [[] for _ in range(hours)]
    for r in records:
        v = (r.get("stages_ms") or {}).get("voice_to_voice")
        if v is None or r.get("route") == "greeting":
            continue
        age = int((now - r["created_at"]).total_seconds() // 3600)
        if 0 <= age < hours:
            buckets[hours - 1 - age].append(v)
    start = now - dt.timedelta(hours=hours)
    return [{"hour": start + dt.timedelta(hours=i + 1), "n": len(b),
             "p50": percentile(b, 50) if b else None, "p90": percentile(b, 90) if b else None}
            for i, b in enumerate(buckets)]
