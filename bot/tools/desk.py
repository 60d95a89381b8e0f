"""The desk's minimal tools over the records database: calls, tickets, one ticket's status.

    run_bot.py calls [--since 2026-12-01] [--json]   # calls with their turns (--json: the export)
    run_bot.py tickets [--status open]
    run_bot.py ticket 20260001 --status done
    run_bot.py callbacks [--status all] [--place]      # --place: call the due ones now (bot/aftercall/callbacks.py)

Caller numbers are shown masked; ``calls --json`` exports them whole (it is the records export).
Every table cell goes through ``bot.tools.table.cell``: no escape sequence in a record reaches the terminal.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import TextIO
from zoneinfo import ZoneInfo

from bot.config import Config
from bot.privacy import mask
from bot.store.db import StoreError, open_store
from bot.store.schema import CALLBACK_STATUSES, TICKET_STATUSES
from bot.tools.table import safe_json, table


def _store(config: Config):
    return open_store(config)


def _since(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        d = dt.datetime.fromisoformat(value)
    except ValueError as e:
        raise StoreError(f"--since: not a date (YYYY-MM-DD or ISO time): {value!r}") from e
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def _iso(v):
    return v.isoformat() if isinstance(v, dt.datetime) else v


def list_calls(config: Config, since: str | None, as_json: bool, out: TextIO = sys.stdout) -> int:
    store = _store(config)
    try:
        calls = store.list_calls(_since(since))
    finally:
        store.close()
    if as_json:
        for c in calls:
            out.write(safe_json({k: _iso(v) for k, v in c.items()}) + "\n")
        return 0
    rows = []
    for c in calls:
        said = [t for t in c["turns"] if t.get("route") != "greeting"]
        routes: dict[str, int] = {}
        for t in said:
            routes[t.get("route") or "?"] = routes.get(t.get("route") or "?", 0) + 1
        v2v = sorted(t["stages_ms"]["voice_to_voice"] for t in said if (t.get("stages_ms") or {}).get("voice_to_voice"))
        rows.append([mask(c["call_sid"]), mask(c["caller"] or "-"), f"{c['started_at']:%Y-%m-%d %H:%M:%S}",
                     c["end_reason"] or "(running)", len(said), " ".join(f"{k}:{v}" for k, v in sorted(routes.items())),
                     f"{v2v[len(v2v) // 2]:.0f}" if v2v else "-", "yes" if c["qa"] else None, _recording(c)])
    out.write(table(["call", "caller", "started (UTC)", "ended", "turns", "routes", "voice-to-voice p50 ms", "qa",
                     "recording"], rows))
    out.write(f"{len(calls)} call(s)\n")
    return 0


def _recording(c: dict) -> str:
    """Whether the call has a recording: its length, "yes" while it runs or after a crash, or when it was deleted."""
    if c.get("recording_path"):
        return f"{c['recording_secs']:.1f} s" if c.get("recording_secs") is not None else "yes"
    if c.get("recording_deleted_at"):
        return f"deleted {c['recording_deleted_at']:%Y-%m-%d}"
    return "-"


def list_tickets(config: Config, status: str | None, out: TextIO = sys.stdout) -> int:
    if status and status not in TICKET_STATUSES:
        raise StoreError(f"--status must be one of {', '.join(TICKET_STATUSES)}")
    store = _store(config)
    try:
        tickets = store.list_tickets(status)
    finally:
        store.close()
    out.write(table(["reception no", "status", "category", "location", "time", "created (UTC)", "updated (UTC)"],
                    ([t["reception_no"], t["status"], t["category"], t["location"], t["time"],
                      f"{t['created_at']:%Y-%m-%d %H:%M}", f"{t['updated_at']:%Y-%m-%d %H:%M}"] for t in tickets)))
    out.write(f"{len(tickets)} ticket(s)\n")
    return 0


def list_callbacks(config: Config, status: str | None, out: TextIO = sys.stdout) -> int:
    """The desk's callback queue: who asked for a person outside the hours, and from when to call."""
    if status and status not in (*CALLBACK_STATUSES, "all"):
        raise StoreError(f"--status must be one of {', '.join(CALLBACK_STATUSES)} or all")
    store = _store(config)
    try:
        rows = store.list_callbacks(None if status == "all" else status or "waiting")
    finally:
        store.close()
    seoul = ZoneInfo(config.line.timezone)
    out.write(table(["id", "status", f"call after ({config.line.timezone})", "caller", "reception no", "reason",
                     "attempts", "answered by", "requested (UTC)"],
                    ([r["id"], r["status"], f"{r['call_after'].astimezone(seoul):%Y-%m-%d %H:%M}", r["caller"],
                      r["reception_no"], r["reason"], r["attempts"], r["answered_by"],
                      f"{r['requested_at']:%Y-%m-%d %H:%M}"] for r in rows)))
    out.write(f"{len(rows)} callback(s)\n")
    return 0


def update_ticket(config: Config, number: str, status: str | None, out: TextIO = sys.stdout) -> int:
    store = _store(config)
    try:
        ticket = store.set_ticket_status(number, status) if status else store.find_ticket(number)
    finally:
        store.close()
    if ticket is None:
        raise StoreError(f"no ticket with reception number {number}")
    out.write(safe_json({k: _iso(v) for k, v in ticket.items()}) + "\n")
    return 0


def place_callbacks(config: Config, out: TextIO = sys.stdout) -> int:
    """Place every due callback now through Twilio (with AMD); the server's webhooks take it from there."""
    import asyncio

    from bot.aftercall.callbacks import CallbackPlacer
    from bot.aftercall.twilio_api import TwilioAPI
    from bot.config import Secrets

    secrets = Secrets.from_env(config)
    api = TwilioAPI.from_config(config, secrets)
    if api is None:
        raise StoreError("callbacks --place needs TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN in the environment")
    store = _store(config)
    try:
        try:
            placer = CallbackPlacer(store=store, api=api, config=config)
        except ValueError as e:
            raise StoreError(str(e)) from e
        placed = asyncio.run(placer.place_due())
    finally:
        store.close()
    out.write(table(["id", "call", "status", "error"],
                    ([p.callback_id, mask(p.call_sid) if p.call_sid else None, p.status, p.error] for p in placed)))
    out.write(f"{sum(p.call_sid is not None for p in placed)} of {len(placed)} due callback(s) placed\n")
    return 0
