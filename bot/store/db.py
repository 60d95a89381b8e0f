"""The records database: calls, turns and tickets (SQLAlchemy 2 Core, Alembic migrations).

SQLite in WAL mode is the embedded default (one process); PostgreSQL by URL when several workers
share the line. Every method here blocks: the server calls them from ``RecordWriter``'s thread or
through ``asyncio.to_thread``, never on the event loop.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from loguru import logger

from bot import languages
from bot.config import Config, Secrets
from bot.privacy import mask_stored
from bot.store.schema import (
    TICKET_STATUSES,
    callbacks,
    calls,
    outbox,
    self_timings,
    staff,
    ticket_audit,
    tickets,
    turns,
)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# The longest wait for a records call someone waits on: a caller in silence, Twilio's webhook, a worker's lease.
RECORDS_SECS = 2.0
# A message claimed by a sender that has not reported back in this long was lost with its worker:
# it is sent again (at worst twice; never silently dropped).
SENDING_STALE_SECS = 300.0
# The audit note of a ticket whose caller the bot put through to a person (``hand_over``).
HANDED_OVER_NOTE = "상담원에게 전화 연결됨"
# Serializes migrations of workers starting together on one PostgreSQL database.
_PG_MIGRATION_LOCK = 0x6B6F7265636F7264


class StoreError(RuntimeError):
    """The records database cannot be used (bad URL, unknown ticket, invalid status)."""


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def resolve_url(url: str, base_dir: Path) -> str:
    """A relative SQLite path resolves against the config's directory (and its folder is made)."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        path = Path(parsed.database).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        path.parent.mkdir(parents=True, exist_ok=True)
        return parsed.set(database=str(path)).render_as_string(hide_password=False)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("", "psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3 is what requirements pin
    return parsed.render_as_string(hide_password=False)


def _held_calls() -> sa.Select:
    """The calls of tickets under legal hold: retention keeps their turns, transfer note and recording."""
    return sa.select(tickets.c.call_sid).where(tickets.c.legal_hold.is_(True), tickets.c.call_sid.is_not(None))


def _locked(conn: sa.Connection, query: sa.Select, missing: str) -> sa.Row[Any]:
    """The row ``query`` selects, locked until the transaction ends; StoreError(``missing``) when there is none."""
    row = conn.execute(query.with_for_update()).first()
    if row is None:
        raise StoreError(missing)
    return row


def _locked_ticket(conn: sa.Connection, reception_no: str, *columns: sa.Column) -> sa.Row[Any]:
    return _locked(conn, sa.select(*columns).where(tickets.c.reception_no == reception_no),
                   f"no ticket with reception number {reception_no}")


def _claim(conn: sa.Connection, table: sa.Table, due: sa.Select, unclaimed: str, **values: Any) -> list[int]:
    """The ids ``due`` selects whose row this transaction moved on from status ``unclaimed`` to ``values``;
    a row another worker claimed first is skipped."""
    claimed = []
    for (row_id,) in conn.execute(due).all():
        if conn.execute(table.update().where(table.c.id == row_id, table.c.status == unclaimed).values(**values)).rowcount:
            claimed.append(row_id)
    return claimed


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    # SQLite hands back naive datetimes; everything we store is UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


class Store:
    """Blocking access to the records database."""

    def __init__(self, url: str, *, connect_timeout: float = 3.0):
        try:
            parsed = sa.engine.make_url(url)
        except sa.exc.ArgumentError as e:
            raise StoreError(f"records.url is not a database URL: {url!r}") from e
        self.backend = parsed.get_backend_name()
        if self.backend == "sqlite":
            self.engine = sa.create_engine(url, connect_args={"timeout": 5.0, "check_same_thread": False})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        elif self.backend == "postgresql":
            self.engine = sa.create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4,
                                           connect_args={"connect_timeout": max(1, int(connect_timeout))})
        else:
            raise StoreError(f"records.url: unsupported database {self.backend!r} (sqlite or postgresql)")
        self.url_for_logs = parsed.render_as_string(hide_password=True)
        # SMS to callers (bot/aftercall/notify.py; set from [sms] by ``open_store``): a notice when the status
        # of a ticket whose caller opted in (``text_ticket``) becomes one of these.
        self.notify_statuses: tuple[str, ...] = ()

    def close(self) -> None:
        self.engine.dispose()

    # --- schema -------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (safe with workers starting at once)."""
        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            if self.backend == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    # --- calls --------------------------------------------------------------------------------

    def start_call(self, call_sid: str, *, caller: str | None, worker: str, qa: bool, started_at: dt.datetime) -> None:
        with self.engine.begin() as conn:
            exists = conn.execute(sa.select(calls.c.call_sid).where(calls.c.call_sid == call_sid)).first()
            if exists is None:
                conn.execute(calls.insert().values(call_sid=call_sid, caller=caller, worker=worker, qa=qa,
                                                   started_at=started_at))

    def end_call(self, call_sid: str, *, reason: str, ended_at: dt.datetime) -> None:
        with self.engine.begin() as conn:
            conn.execute(calls.update().where(calls.c.call_sid == call_sid)
                         .values(ended_at=ended_at, end_reason=reason))

    def set_transfer_note(self, call_sid: str, note: str) -> None:
        with self.engine.begin() as conn:
            # The summary holds the caller's words (the location): masked like every stored word.
            conn.execute(calls.update().where(calls.c.call_sid == call_sid).values(transfer_note=mask_stored(note)))

    def transfer_note(self, call_sid: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(calls.c.transfer_note).where(calls.c.call_sid == call_sid)).scalar()

    def abort_unfinished(self, worker: str) -> int:
        """Calls of this worker left open by a crash are marked ``aborted``; returns how many."""
        with self.engine.begin() as conn:
            result = conn.execute(
                calls.update().where(calls.c.worker == worker, calls.c.ended_at.is_(None))
                .values(ended_at=now(), end_reason="aborted")
            )
            return result.rowcount or 0

    # --- turns --------------------------------------------------------------------------------

    def save_turn(self, call_sid: str, record: dict[str, Any]) -> None:
        """Insert or update one turn (keyed by call and index); transcript and reply are masked."""
        stages = record.get("stages_ms") or {}
        values = {
            "route": record.get("route"),
            "intent": record.get("intent"),
            "transcript": mask_stored(record.get("transcript") or "") or None,
            "reply": mask_stored(record.get("reply") or "") or None,
            "llm_calls": int(record.get("llm_calls") or 0),
            "voice_to_voice_ms": stages.get("voice_to_voice"),
            "escalation": record.get("escalation"),
            "record": {**record, "transcript": None, "reply": None},  # text lives in its masked columns
        }
        idx = int(record["index"])
        with self.engine.begin() as conn:
            updated = conn.execute(turns.update().where(turns.c.call_sid == call_sid, turns.c.idx == idx).values(**values))
            if not updated.rowcount:
                conn.execute(turns.insert().values(call_sid=call_sid, idx=idx, created_at=now(), **values))

    def purge_turns(self, older_than_days: float) -> int:
        """Delete turns older than the retention period (tickets stay), but a call's under legal hold (kept
        with its recording until the hold is lifted); returns how many."""
        cutoff = now() - dt.timedelta(days=older_than_days)
        with self.engine.begin() as conn:
            return conn.execute(turns.delete().where(turns.c.created_at < cutoff,
                                                     turns.c.call_sid.not_in(_held_calls()))).rowcount or 0

    def purge_after_call(self, older_than_days: float) -> dict[str, int]:
        """Retention for what follows calls: SMS outbox rows (their bodies) and finished callbacks
        older than the period are deleted, warm-transfer notes cleared (a held call's kept). A callback still waiting or
        being placed stays (the desk owes that call). Returns how many of each."""
        cutoff = now() - dt.timedelta(days=older_than_days)
        with self.engine.begin() as conn:
            sms = conn.execute(outbox.delete().where(outbox.c.created_at < cutoff)).rowcount or 0
            cbs = conn.execute(callbacks.delete().where(callbacks.c.updated_at < cutoff,
                                                        callbacks.c.status.not_in(("waiting", "calling")))).rowcount or 0
            notes = conn.execute(calls.update().where(calls.c.started_at < cutoff, calls.c.transfer_note.is_not(None),
                                                      calls.c.call_sid.not_in(_held_calls()))
                                 .values(transfer_note=None)).rowcount or 0
        return {"sms": sms, "callbacks": cbs, "transfer_notes": notes}

    # --- tickets ------------------------------------------------------------------------------

    def create_ticket(self, *, call_sid: str | None, category: str, location: str | None, time: str | None,
                      excerpt: str, language: str = languages.FIRST) -> str:
        """A new open ticket; its reception number is the year and the row id (e.g. 20260042).
        ``language``: the caller's (a code of line.languages); its texts are written in it."""
        t = now()
        with self.engine.begin() as conn:
            row_id = conn.execute(
                tickets.insert().values(call_sid=call_sid, category=category, location=location, time=time,
                                        excerpt=mask_stored(excerpt), status="open", language=language,
                                        created_at=t, updated_at=t)
                .returning(tickets.c.id)
            ).scalar_one()
            number = f"{t.year}{row_id:04d}"
            conn.execute(tickets.update().where(tickets.c.id == row_id).values(reception_no=number))
        return number

    def text_ticket(self, reception_no: str) -> bool:
        """The caller said yes to a text: the ticket is opted in (status notices follow) and its
        reception number is queued, once. False when there is no number to text (sms_status no_number)."""
        t = now()
        with self.engine.begin() as conn:
            row = _locked_ticket(conn, reception_no, tickets.c.call_sid, tickets.c.sms_opt_in)
            if row.sms_opt_in:  # a second yes (a repeat, a retry): still one text
                return True
            conn.execute(tickets.update().where(tickets.c.reception_no == reception_no).values(sms_opt_in=True))
            return self._queue_sms(conn, "ticket", reception_no, row.call_sid, None, t)

    # --- SMS outbox (bot/aftercall/notify.py sends) -------------------------------------------------------

    def _queue_sms(self, conn: sa.Connection, kind: str, number: str, call_sid: str | None,
                   ticket_status: str | None, t: dt.datetime) -> bool:
        """An SMS about ticket ``number`` to its call's caller, in the caller's transaction (False: no number)."""
        caller = conn.execute(sa.select(calls.c.caller).where(calls.c.call_sid == call_sid)).scalar() if call_sid else None
        if not caller:  # the QA page, a typed chat, or a number already cleared by retention
            conn.execute(tickets.update().where(tickets.c.reception_no == number).values(sms_status="no_number"))
            return False
        conn.execute(outbox.insert().values(kind=kind, reception_no=number, call_sid=call_sid, ticket_status=ticket_status,
                                            status="pending", attempts=0, next_attempt_at=t, created_at=t, updated_at=t))
        conn.execute(tickets.update().where(tickets.c.reception_no == number).values(sms_status="pending"))
        return True

    def claim_due_sms(self, worker: str, limit: int = 20) -> list[dict[str, Any]]:
        """Messages due now, claimed for ``worker`` (another worker's claim wins), with what they need:
        the caller's number, the ticket's category and status. Claims left by a dead worker return."""
        t = now()
        stale = t - dt.timedelta(seconds=SENDING_STALE_SECS)
        with self.engine.begin() as conn:
            conn.execute(outbox.update().where(outbox.c.status == "sending", outbox.c.updated_at < stale)
                         .values(status="pending", claimed_by=None))
        q = (sa.select(outbox.c.id).where(outbox.c.status == "pending", outbox.c.next_attempt_at <= t)
             .order_by(outbox.c.id).limit(limit))
        with self.engine.begin() as conn:
            claimed = _claim(conn, outbox, q, "pending", status="sending", claimed_by=worker, updated_at=t)
        if not claimed:
            return []
        q = (sa.select(outbox, calls.c.caller, tickets.c.category, tickets.c.location,
                       tickets.c.status.label("current_status"), tickets.c.language)
             .select_from(outbox.outerjoin(calls, calls.c.call_sid == outbox.c.call_sid)
                          .outerjoin(tickets, tickets.c.reception_no == outbox.c.reception_no))
             .where(outbox.c.id.in_(claimed)).order_by(outbox.c.id))
        with self.engine.connect() as conn:
            return [{k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in r.items()}
                    for r in conn.execute(q).mappings()]

    def sms_done(self, message_id: int, *, outcome: str, attempted: bool, error: str | None = None,
                 message_sid: str | None = None, body: str | None = None,
                 retry_at: dt.datetime | None = None) -> None:
        """A claimed message's outcome: ``sent``, ``failed``/``no_number`` (final) or ``retry``
        (again at ``retry_at``), or ``defer`` (quiet hours: until ``retry_at``, no attempt counted).
        The ticket's ``sms_status`` follows its latest message."""
        t = now()
        values: dict[str, Any] = {"updated_at": t, "claimed_by": None}
        if attempted:
            values["attempts"] = outbox.c.attempts + 1
        if outcome in ("retry", "defer"):
            # UTC, like every time stored: SQLite keeps the wall time of an aware datetime as it is.
            values.update(status="pending", next_attempt_at=(retry_at or t).astimezone(dt.UTC))
        else:
            values["status"] = "sent" if outcome == "sent" else "failed"
        if error is not None:
            values["last_error"] = error[:500]
        if message_sid:
            values.update(message_sid=message_sid)
        if body is not None:
            values.update(body=body)
        with self.engine.begin() as conn:
            conn.execute(outbox.update().where(outbox.c.id == message_id).values(**values))
            number = conn.execute(sa.select(outbox.c.reception_no).where(outbox.c.id == message_id)).scalar()
            latest = conn.execute(sa.select(sa.func.max(outbox.c.id)).where(outbox.c.reception_no == number)).scalar()
            if number and latest == message_id and outcome not in ("retry", "defer"):
                conn.execute(tickets.update().where(tickets.c.reception_no == number).values(sms_status=outcome))

    def list_outbox(self, reception_no: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(outbox).order_by(outbox.c.id)
        if reception_no:
            q = q.where(outbox.c.reception_no == reception_no)
        with self.engine.connect() as conn:
            return [{k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in r.items()}
                    for r in conn.execute(q).mappings()]

    # --- callbacks ----------------------------------------------------------------------------

    def request_callback(self, *, call_sid: str | None, after: dt.datetime, reason: str,
                         reception_no: str | None = None) -> int:
        """A callback for the desk's queue (``reception_no``: the call's ticket, read out when it is placed)."""
        t = now()
        with self.engine.begin() as conn:
            return conn.execute(
                callbacks.insert().values(call_sid=call_sid, reason=reason, requested_at=t, reception_no=reception_no,
                                          call_after=after.astimezone(dt.UTC), status="waiting", updated_at=t)
                .returning(callbacks.c.id)
            ).scalar_one()

    def list_callbacks(self, status: str | None = "waiting", *, ids: list[int] | None = None) -> list[dict[str, Any]]:
        """Callbacks (oldest first) with the caller's number from their call."""
        q = (sa.select(callbacks, calls.c.caller)
             .select_from(callbacks.outerjoin(calls, calls.c.call_sid == callbacks.c.call_sid))
             .order_by(callbacks.c.id))
        if status:
            q = q.where(callbacks.c.status == status)
        if ids is not None:
            q = q.where(callbacks.c.id.in_(ids))
        with self.engine.connect() as conn:
            return [{k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in r.items()}
                    for r in conn.execute(q).mappings()]

    def claim_due_callbacks(self, limit: int = 10) -> list[dict[str, Any]]:
        """Waiting callbacks due now, each claimed ("calling", one more attempt) by one placer,
        with the caller's number. A row already claimed elsewhere is skipped."""
        t = now()
        q = (sa.select(callbacks.c.id).where(callbacks.c.status == "waiting", callbacks.c.call_after <= t)
             .order_by(callbacks.c.call_after).limit(limit))
        with self.engine.begin() as conn:
            claimed = _claim(conn, callbacks, q, "waiting", status="calling", attempts=callbacks.c.attempts + 1,
                             updated_at=t)
        return self.list_callbacks(None, ids=claimed) if claimed else []

    def callback_placed(self, callback_id: int, call_sid: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(callbacks.update().where(callbacks.c.id == callback_id)
                         .values(last_call_sid=call_sid, answered_by=None, updated_at=now()))

    def find_callback(self, *, callback_id: int | None = None, call_sid: str | None = None) -> dict[str, Any] | None:
        """One callback by id, or by the SID of the call placed for it (the webhooks), with the
        language its ticket was taken in (the line's first language without a ticket)."""
        q = (sa.select(callbacks, calls.c.caller, sa.func.coalesce(tickets.c.language, languages.FIRST).label("language"))
             .select_from(callbacks.outerjoin(calls, calls.c.call_sid == callbacks.c.call_sid)
                          .outerjoin(tickets, tickets.c.reception_no == callbacks.c.reception_no)))
        q = q.where(callbacks.c.id == callback_id) if callback_id is not None else q.where(
            callbacks.c.last_call_sid == call_sid)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return {k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in row.items()} if row else None

    def callback_answered_by(self, callback_id: int, answered_by: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(callbacks.update().where(callbacks.c.id == callback_id)
                         .values(answered_by=answered_by[:32], updated_at=now()))

    def callback_outcome(self, callback_id: int, *, reached: bool, max_attempts: int, retry_after_secs: float,
                         why: str | None = None) -> str:
        """The placed call ended: ``reached`` (someone or a machine answered) is done; otherwise
        (no answer, busy, failed, refused by Twilio) it waits ``retry_after_secs`` for another
        attempt, until ``max_attempts`` calls were placed: then unreachable. Returns the new status."""
        t = now()
        with self.engine.begin() as conn:
            row = _locked(conn, sa.select(callbacks.c.attempts, callbacks.c.status).where(callbacks.c.id == callback_id),
                          f"no callback {callback_id}")
            if row.status != "calling":  # Twilio repeats a status callback: the first one counted
                return row.status
            values: dict[str, Any] = {"updated_at": t}
            if reached:
                values["status"] = "done"
            elif row.attempts < max_attempts:
                values.update(status="waiting", call_after=t + dt.timedelta(seconds=retry_after_secs))
            else:
                values["status"] = "unreachable"
            if why and not reached:
                values["answered_by"] = why[:32]
            conn.execute(callbacks.update().where(callbacks.c.id == callback_id).values(**values))
            return values["status"]

    # --- startup self-timing ---------------------------------------------------------------

    def save_timing(self, host: str, config_key: str, figures: dict[str, float], *, good: bool) -> None:
        with self.engine.begin() as conn:
            conn.execute(self_timings.insert().values(host=host, config_key=config_key, measured_at=now(),
                                                      figures=figures, good=good))

    def last_good_timing(self, host: str, config_key: str) -> dict[str, float] | None:
        q = (sa.select(self_timings.c.figures)
             .where(self_timings.c.host == host, self_timings.c.config_key == config_key, self_timings.c.good)
             .order_by(self_timings.c.id.desc()).limit(1))
        with self.engine.connect() as conn:
            return conn.execute(q).scalar()

    def latest_timing(self, host: str, config_key: str) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        """The last start's row (figures, good, measured_at) and the last good figures."""
        q = (sa.select(self_timings).where(self_timings.c.host == host, self_timings.c.config_key == config_key)
             .order_by(self_timings.c.id.desc()).limit(1))
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        if row is None:
            return None, None
        last = {**row, "measured_at": _utc(row["measured_at"])}
        return last, last["figures"] if last["good"] else self.last_good_timing(host, config_key)

    def find_ticket(self, reception_no: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(tickets).where(tickets.c.reception_no == reception_no)).mappings().first()
        return _ticket(row) if row else None

    def list_tickets(self, status: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(tickets).order_by(tickets.c.id)
        if status:
            q = q.where(tickets.c.status == status)
        with self.engine.connect() as conn:
            return [_ticket(r) for r in conn.execute(q).mappings()]

    def set_ticket_status(self, reception_no: str, status: str, *, actor: str = "cli") -> dict[str, Any]:
        # Every status change is audited, the CLI's too (``change_ticket_status``).
        return self.change_ticket_status(reception_no, status, actor=actor)

    # --- reading calls ------------------------------------------------------------------------

    def list_calls(self, since: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Calls (oldest first) with their turns."""
        q = sa.select(calls).order_by(calls.c.started_at)
        if since is not None:
            q = q.where(calls.c.started_at >= since)
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings()]
            by_sid = {r["call_sid"]: r for r in rows}
            for r in rows:
                r["turns"] = []
                r["started_at"], r["ended_at"] = _utc(r["started_at"]), _utc(r["ended_at"])
            if by_sid:
                tq = sa.select(turns).where(turns.c.call_sid.in_(list(by_sid))).order_by(turns.c.call_sid, turns.c.idx)
                for t in conn.execute(tq).mappings():
                    by_sid[t["call_sid"]]["turns"].append(_turn(t))
        return rows

    def finished_turns(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Turn records of calls that have ended, whose turn ended after ``since`` (epoch seconds)."""
        q = (sa.select(turns.c.record, turns.c.transcript, turns.c.reply, calls.c.worker)
             .join(calls, calls.c.call_sid == turns.c.call_sid)
             .where(calls.c.ended_at.is_not(None)).order_by(turns.c.id))
        if since:
            q = q.where(turns.c.created_at >= dt.datetime.fromtimestamp(since - 3600, dt.UTC))
        out = []
        with self.engine.connect() as conn:
            for rec, transcript, reply, worker in conn.execute(q):
                rec = {**rec, "transcript": transcript, "reply": reply, "worker": worker}  # worker: the bench's share
                if (rec.get("turn_end") or rec.get("first_audio_out") or 0) >= since:
                    out.append(rec)
        return out

    # --- the staff desk (bot/desk/): accounts and the ticket audit trail -----------------------

    def change_ticket_status(self, reception_no: str, status: str, *, actor: str,
                             note: str | None = None, notify: bool = True) -> dict[str, Any]:
        """Set a ticket's status and append who/when/from/to/note to its audit trail, in one transaction.

        The same status with a note is recorded as a note; the same status without one changes nothing.
        A caller who opted in to texts gets a notice (``notify``; not when the caller is on the line).
        """
        if status not in TICKET_STATUSES:
            raise StoreError(f"unknown status {status!r} (one of {', '.join(TICKET_STATUSES)})")
        note = mask_stored((note or "").strip()) or None  # staff type notes too: no resident numbers kept
        with self.engine.begin() as conn:
            row = _locked_ticket(conn, reception_no, tickets.c.status, tickets.c.call_sid, tickets.c.sms_opt_in)
            if row.status != status or note:
                t = now()
                conn.execute(tickets.update().where(tickets.c.reception_no == reception_no)
                             .values(status=status, updated_at=t))
                conn.execute(ticket_audit.insert().values(reception_no=reception_no, at=t, actor=actor,
                                                          from_status=row.status, to_status=status, note=note))
                if notify and row.sms_opt_in and row.status != status and status in self.notify_statuses:
                    self._queue_sms(conn, "status", reception_no, row.call_sid, status, t)
        return self.find_ticket(reception_no)  # type: ignore[return-value]  # found above; tickets are never deleted

    def hand_over(self, reception_no: str, call_sid: str) -> None:
        """A warm transfer took the ticket's caller to a person: an open ticket becomes in_progress,
        any other keeps its status; either way the audit trail says so (actor "bot"). No text: the
        caller is on the line with that person."""
        ticket = self.find_ticket(reception_no)
        if ticket is None:
            logger.warning("hand-over: no ticket {}", reception_no)
            return
        status = "in_progress" if ticket["status"] == "open" else ticket["status"]
        self.change_ticket_status(reception_no, status, actor="bot", notify=False,
                                  note=f"{HANDED_OVER_NOTE} ({call_sid})")

    def add_staff(self, username: str, *, role: str, department: str | None, password_hash: str) -> int:
        t = now()
        try:
            with self.engine.begin() as conn:
                return conn.execute(staff.insert().values(
                    username=username, role=role, department=department, password_hash=password_hash, active=True,
                    session_epoch=0, created_at=t, updated_at=t).returning(staff.c.id)).scalar_one()
        except sa.exc.IntegrityError as e:
            raise StoreError(f"a staff account named {username!r} exists already") from e

    def find_staff(self, *, username: str | None = None, staff_id: int | None = None,
                   api_token_hash: str | None = None) -> dict[str, Any] | None:
        """One account by name, id or API token hash (disabled ones too: the caller checks ``active``)."""
        q = sa.select(staff)
        if username is not None:
            q = q.where(staff.c.username == username)
        elif staff_id is not None:
            q = q.where(staff.c.id == staff_id)
        elif api_token_hash is not None:
            q = q.where(staff.c.api_token_hash == api_token_hash)
        else:
            raise ValueError("find_staff: give username, staff_id or api_token_hash")
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return {k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in row.items()} if row else None

    def list_staff(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(staff).order_by(staff.c.username)).mappings().all()
        return [{k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in r.items()} for r in rows]

    def update_staff(self, username: str, *, end_sessions: bool = False, **values: Any) -> None:
        """Change an account (active, password_hash, api_token_hash, last_login_at, ...).

        ``end_sessions``: every session of the account ends now (its cookies carry the old epoch).
        """
        upd = staff.update().where(staff.c.username == username).values(updated_at=now(), **values)
        if end_sessions:
            upd = upd.values(session_epoch=staff.c.session_epoch + 1)
        with self.engine.begin() as conn:
            if not conn.execute(upd).rowcount:
                raise StoreError(f"no staff account named {username!r}")


def _turn(row: sa.RowMapping) -> dict[str, Any]:
    rec = dict(row["record"])
    rec.update(transcript=row["transcript"], reply=row["reply"])
    return rec


def _ticket(row: sa.RowMapping) -> dict[str, Any]:
    d = dict(row)
    d["created_at"], d["updated_at"] = _utc(d["created_at"]), _utc(d["updated_at"])
    return d


def _sqlite_pragmas(dbapi_conn: Any, _record: object) -> None:
    # WAL: readers (the CLI, status lookups) never block the writer; a crash loses no committed turn.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def records_url(config: Config, secrets: Secrets | None = None) -> str:
    """The records database's URL: env ``RECORDS_URL`` (a URL with its password) over ``records.url``."""
    return (secrets or Secrets.from_env(config)).records_url or config.records.url


def open_store(config: Config, secrets: Secrets | None = None) -> Store:
    """Open and migrate the records database of this config."""
    store = Store(resolve_url(records_url(config, secrets), config.base_dir))
    if config.sms.enabled:
        store.notify_statuses = tuple(config.sms.notify_statuses)
    store.migrate()
    logger.info("records database: {} (migrated to head)", store.url_for_logs)
    return store
