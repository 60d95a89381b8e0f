"""Recordings in the records database: the call's file, legal holds, who played what, retention.

Blocking (SQLAlchemy Core on ``Store.engine``), like ``bot/store/db.py``: the writer thread, the
desk's thread pool or a command calls these, never the event loop.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from loguru import logger

from bot.privacy import mask, mask_stored
from bot.recording import files
from bot.store.db import Store, StoreError, now
from bot.store.schema import (
    RECORDING_ACTIONS,
    RECORDING_REFUSALS,
    call_segments,
    calls,
    recording_access,
    ticket_audit,
    tickets,
    turns,
)

# Range requests of one player (seeking) within this long of the same person's last row of the same
# call and action belong to that playback: one audit row, not one per range.
ACCESS_WINDOW_SECS = 600.0
HOLD_NOTE, RELEASE_NOTE = "법적 보존 설정", "법적 보존 해제"


def _utc(v):
    return v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v


def set_recording(store: Store, call_sid: str, path: str, secs: float | None) -> None:
    """The call's recording file (relative to recording.dir) and, once closed, its length."""
    with store.engine.begin() as conn:
        conn.execute(calls.update().where(calls.c.call_sid == call_sid)
                     .values(recording_path=path, recording_secs=secs))


def find_recording(store: Store, call_sid: str) -> dict[str, Any] | None:
    """The call's recording: path, secs, deleted_at, whether one of its tickets is held, its tickets, and a
    resumed call's later streams' files (``streams``: idx and path)."""
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(calls.c.call_sid, calls.c.recording_path, calls.c.recording_secs,
                                     calls.c.recording_deleted_at, calls.c.started_at)
                           .where(calls.c.call_sid == call_sid)).mappings().first()
        if row is None:
            return None
        held = conn.execute(sa.select(tickets.c.reception_no, tickets.c.category, tickets.c.legal_hold)
                            .where(tickets.c.call_sid == call_sid)).mappings().all()
        # A resumed call's later streams (issue 46), each recorded to a file of its own.
        streams = conn.execute(sa.select(call_segments.c.idx, call_segments.c.recording_path)
                               .where(call_segments.c.call_sid == call_sid, call_segments.c.idx > 0,
                                      call_segments.c.recording_path.is_not(None))
                               .order_by(call_segments.c.idx)).all()
    return {"call_sid": row["call_sid"], "path": row["recording_path"], "secs": row["recording_secs"],
            "deleted_at": _utc(row["recording_deleted_at"]), "started_at": _utc(row["started_at"]),
            "tickets": [dict(t) for t in held], "held": any(t["legal_hold"] for t in held),
            "streams": [{"idx": idx, "path": path} for idx, path in streams]}


def set_legal_hold(store: Store, reception_no: str, on: bool, *, actor: str, note: str = "") -> bool:
    """Put (or lift) a legal hold on a ticket, audited in its trail; False when it was already so."""
    note = mask_stored(note.strip())
    with store.engine.begin() as conn:
        row = conn.execute(sa.select(tickets.c.status, tickets.c.legal_hold)
                           .where(tickets.c.reception_no == reception_no).with_for_update()).first()
        if row is None:
            raise StoreError(f"no ticket with reception number {reception_no}")
        if bool(row.legal_hold) == on:
            return False
        t = now()
        conn.execute(tickets.update().where(tickets.c.reception_no == reception_no).values(legal_hold=on, updated_at=t))
        text = HOLD_NOTE if on else RELEASE_NOTE
        conn.execute(ticket_audit.insert().values(reception_no=reception_no, at=t, actor=actor, from_status=row.status,
                                                  to_status=row.status, note=f"{text}: {note}" if note else text))
    logger.info("records: {} {} legal hold on ticket {}", actor, "put a" if on else "lifted the", reception_no)
    return True


def note_access(store: Store, call_sid: str, *, actor: str, action: str, reception_no: str | None = None,
                address: str | None = None, refused: str | None = None, reason: str | None = None,
                fold: bool | None = None, window_secs: float = ACCESS_WINDOW_SECS) -> bool:
    """Audit a playback, copy, download or export, or a refused attempt at one (``refused``: why); True when a
    new row was written. ``fold`` (default: a playback, a view or a refusal): a row of the same person, call, action
    and outcome within ``window_secs`` already stands for this one (a player's seeks, a retried refusal)."""
    if action not in RECORDING_ACTIONS:
        raise StoreError(f"unknown recording action {action!r}")
    if refused is not None and refused not in RECORDING_REFUSALS:
        raise StoreError(f"unknown refusal {refused!r}")
    if fold is None:
        fold = action in ("play", "view") or refused is not None
    call_sid, actor = call_sid[:64], actor[:64]
    t = now()
    ra = recording_access.c
    with store.engine.begin() as conn:
        if fold:
            same = [ra.call_sid == call_sid, ra.actor == actor, ra.action == action,
                    ra.at >= t - dt.timedelta(seconds=window_secs),
                    ra.refused.is_(None) if refused is None else ra.refused == refused,
                    ra.reception_no.is_(None) if reception_no is None else ra.reception_no == reception_no]
            if address is not None:
                same.append(ra.address == address)
            if conn.execute(sa.select(ra.id).where(*same).limit(1)).first() is not None:
                return False
        conn.execute(recording_access.insert().values(call_sid=call_sid, at=t, actor=actor, action=action,
                                                      reception_no=reception_no, address=address, refused=refused,
                                                      reason=mask_stored(reason) if reason else None))
    if refused is not None:
        logger.warning("records: refused {} ({}) the recording of call {} ({}): {}", actor, address or "-",
                       mask(call_sid), action, refused)
    else:
        logger.info("records: {} {} call {}{}", actor, {
            "play": "played the recording of", "copy": "copied the whole recording of",
            "download": "downloaded the recording of", "export": "exported the recording of",
            "export_unmasked": "exported UNMASKED the recording of", "view": "opened the page of"}[action],
            mask(call_sid), f" ({mask(reason)})" if reason else "")
    return True


def access_log(store: Store, call_sid: str, *, views: bool = False) -> list[dict[str, Any]]:
    """The call's access rows, oldest first: the recording's (``views``: its pages opened too)."""
    q = sa.select(recording_access).where(recording_access.c.call_sid == call_sid)
    if not views:
        q = q.where(recording_access.c.action != "view")
    with store.engine.connect() as conn:
        return [{**dict(r), "at": _utc(r["at"])} for r in conn.execute(q.order_by(recording_access.c.id)).mappings()]


def held_past_retention(store: Store, *, records_days: float, recording_days: float) -> list[dict[str, Any]]:
    """What a legal hold keeps that retention would delete, per held call: its tickets, how many turns older
    than ``records_days``, whether its transfer note and recording are past their periods (0: kept anyway)."""
    t = now()
    held = sa.select(tickets.c.call_sid, tickets.c.reception_no).where(tickets.c.legal_hold.is_(True),
                                                                         tickets.c.call_sid.is_not(None))
    with store.engine.connect() as conn:
        by_call: dict[str, list[str]] = {}
        for sid, number in conn.execute(held):
            by_call.setdefault(sid, []).append(number)
        out = []
        for sid, numbers in sorted(by_call.items()):
            row = conn.execute(sa.select(calls.c.started_at, calls.c.transfer_note, calls.c.recording_path)
                               .where(calls.c.call_sid == sid)).first()
            if row is None:
                continue
            started = _utc(row.started_at)
            old_turns = 0
            if records_days > 0:
                old_turns = conn.execute(sa.select(sa.func.count()).select_from(turns).where(
                    turns.c.call_sid == sid, turns.c.created_at < t - dt.timedelta(days=records_days))).scalar_one()
            note = records_days > 0 and row.transfer_note is not None and started < t - dt.timedelta(days=records_days)
            audio = recording_days > 0 and row.recording_path is not None and \
                started < t - dt.timedelta(days=recording_days)
            if old_turns or note or audio:
                out.append({"call_sid": sid, "tickets": sorted(numbers), "turns": old_turns, "transfer_note": note,
                            "recording": audio})
    return out


def purge_recordings(store: Store, directory: Path, older_than_days: float) -> dict[str, int]:
    """Retention: recordings of calls older than the period are deleted, each logged, unless a ticket of
    the call is under legal hold (kept until it is lifted). Returns how many were deleted and kept."""
    cutoff = now() - dt.timedelta(days=older_than_days)
    held = sa.select(tickets.c.call_sid).where(tickets.c.legal_hold.is_(True), tickets.c.call_sid.is_not(None))
    due = (sa.select(calls.c.call_sid, calls.c.recording_path, calls.c.started_at)
           .where(calls.c.started_at < cutoff, calls.c.recording_path.is_not(None)))
    with store.engine.connect() as conn:
        rows = conn.execute(due.where(calls.c.call_sid.not_in(held))).all()
        kept = conn.execute(sa.select(sa.func.count()).select_from(
            due.where(calls.c.call_sid.in_(held)).subquery())).scalar_one()
    deleted = 0
    for sid, path, started in rows:
        try:
            existed = files.delete(directory, path)
        except OSError as e:
            logger.error("records: recording of call {} ({}) not deleted: {}", mask(sid), path, e)
            continue
        with store.engine.begin() as conn:
            conn.execute(calls.update().where(calls.c.call_sid == sid)
                         .values(recording_path=None, recording_deleted_at=now()))
        deleted += 1
        logger.info("records: deleted the recording of call {} from {} ({}; records.retention: recording.retention_days "
                    "= {}){}", mask(sid), _utc(started).date(), path, older_than_days,
                    "" if existed else " (the file was already gone)")
    deleted += _purge_segment_recordings(store, directory, cutoff, held, older_than_days)
    if kept:
        logger.info("records: {} recording(s) older than {} days kept: their tickets are under legal hold", kept,
                    older_than_days)
    return {"deleted": deleted, "held": kept}


def _purge_segment_recordings(store: Store, directory: Path, cutoff: dt.datetime, held: sa.Select,
                              older_than_days: float) -> int:
    """A resumed call's later streams' recordings (issue 46: one file each, on ``call_segments``) go with the
    call's own, under the same hold."""
    due = (sa.select(call_segments.c.call_sid, call_segments.c.idx, call_segments.c.recording_path)
           .join(calls, calls.c.call_sid == call_segments.c.call_sid)
           .where(calls.c.started_at < cutoff, call_segments.c.recording_path.is_not(None),
                  call_segments.c.call_sid.not_in(held)))
    with store.engine.connect() as conn:
        rows = conn.execute(due).all()
    deleted = 0
    for sid, idx, path in rows:
        try:
            files.delete(directory, path)
        except OSError as e:
            logger.error("records: recording of call {} stream {} ({}) not deleted: {}", mask(sid), idx, path, e)
            continue
        with store.engine.begin() as conn:
            conn.execute(call_segments.update().where(call_segments.c.call_sid == sid, call_segments.c.idx == idx)
                         .values(recording_path=None))
        deleted += 1
        logger.info("records: deleted the recording of call {} stream {} ({}; recording.retention_days = {})",
                    mask(sid), idx, path, older_than_days)
    return deleted


def call_transcript(store: Store, call_sid: str) -> list[dict[str, Any]]:
    """The call's turns as stored (masked), in order: what an export puts beside the audio."""
    with store.engine.connect() as conn:
        return [{"index": r.idx, "at": _utc(r.created_at), "route": r.route, "caller": r.transcript, "bot": r.reply}
                for r in conn.execute(sa.select(turns).where(turns.c.call_sid == call_sid).order_by(turns.c.idx))]


def fill_cut_off_lengths(store: Store, directory: Path) -> int:
    """Calls cut off by a crash (ended, a recording, no length): their length read from the file, which
    plays up to its last flush. Returns how many were filled."""
    q = sa.select(calls.c.call_sid, calls.c.recording_path).where(
        calls.c.ended_at.is_not(None), calls.c.recording_path.is_not(None), calls.c.recording_secs.is_(None))
    with store.engine.connect() as conn:
        rows = conn.execute(q).all()
    filled = 0
    for sid, path in rows:
        try:
            secs = files.duration_secs(files.resolve(directory, path))
        except files.RecordingMissing:
            secs = None
        if secs is not None:
            set_recording(store, sid, path, round(secs, 2))
            filled += 1
    return filled
