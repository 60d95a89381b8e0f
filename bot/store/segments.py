"""A call's media streams (segments), kept in the records database so any worker can resume a call.

Twilio requests a ``<Connect>``'s ``action`` URL when its ``<Stream>`` ends, with the call still up
(docs/line.md). Every ``<Connect>`` we answer carries one, signed for the call and the segment
(``StreamTokens.sign_action``): ``/twilio/stream-ended?seg=N&sig=...``. What the action route answers
depends on how segment N ended, read from ``call_segments``:

* the bot ended the call (goodbye, hand-over, an emergency's end, idle end: ``bot_ended``, written
  *before* the stream closes): ``<Hangup/>``, or the TwiML the hand-over asked for (``then_twiml``);
* anything else (a killed worker's segment never ends; the pipeline raised; the socket was reset; a
  draining worker handed it over): a resume, a new single-use stream token for segment N+1, at most
  ``call.max_resumes`` per call for faults (a drain's hand-over is planned and free: a rolling deploy
  moves a call twice); beyond that the duty line in hours, or the hours said and a hang-up.

Twilio asks once per stream: ``action_at`` is set where it is still NULL, so a replayed request
changes no row and is refused (403). Every function here blocks (threads only).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bot.store.db import Store, now
from bot.store.schema import call_segments, calls, stream_tokens, turns

# How the bot itself ends a call: the action route answers these with <Hangup/> (or the hand-over).
BOT_END_REASONS = ("completed", "transfer", "emergency_transfer", "caller_idle", "stt_failed", "tts_failed",
                   "server_shutdown", "abusive", "time_limit")
HANDOVER = "handover"  # a draining worker closed the stream so that another takes the call (a resume)


@dataclass(frozen=True)
class EndedSegment:
    """What the action route knows about the stream that ended."""

    idx: int
    worker: str | None = None
    end_reason: str | None = None
    bot_ended: bool = False
    then_twiml: str | None = None
    started: bool = True  # False: its stream never started (no row until the action came)
    faults_before: int = 0  # earlier streams of the call that ended by a fault (each took a resume)


def open_segment(store: Store, call_sid: str, idx: int, *, worker: str, started_at: dt.datetime) -> None:
    """Segment ``idx`` of the call started on ``worker`` (the call's row now names that worker)."""
    with store.engine.begin() as conn:
        done = conn.execute(call_segments.update()
                            .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx)
                            .values(worker=worker, started_at=started_at))
        if not done.rowcount:
            conn.execute(call_segments.insert().values(call_sid=call_sid, idx=idx, worker=worker,
                                                       started_at=started_at, bot_ended=False))
        if idx > 0:  # a resumed call runs here now: a restart of the old worker must not mark it aborted
            conn.execute(calls.update().where(calls.c.call_sid == call_sid)
                         .values(worker=worker, ended_at=None, end_reason=None))


def end_segment(store: Store, call_sid: str, idx: int, *, reason: str, bot_ended: bool,
                then_twiml: str | None = None, ended_at: dt.datetime | None = None) -> None:
    """How segment ``idx`` ended; the first bot end wins (a later plain end does not undo it)."""
    with store.engine.begin() as conn:
        row = conn.execute(sa.select(call_segments.c.bot_ended)
                           .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx)).first()
        values: dict[str, Any] = {"ended_at": ended_at or now()}
        if row is None or not row.bot_ended:
            values |= {"end_reason": reason[:32], "bot_ended": bot_ended, "then_twiml": then_twiml}
        if row is None:
            conn.execute(call_segments.insert().values(call_sid=call_sid, idx=idx, **values))
        else:
            conn.execute(call_segments.update()
                         .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx).values(**values))


def set_segment_recording(store: Store, call_sid: str, idx: int, path: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(call_segments.update()
                     .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx)
                     .values(recording_path=path))


def take_action(store: Store, call_sid: str, idx: int) -> EndedSegment | None:
    """Twilio asks about segment ``idx``'s end: the segment, once; None when it was asked before (a replay)."""
    t = now()
    with store.engine.begin() as conn:
        done = conn.execute(call_segments.update()
                            .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx,
                                   call_segments.c.action_at.is_(None))
                            .values(action_at=t))
        row = conn.execute(sa.select(call_segments)
                           .where(call_segments.c.call_sid == call_sid, call_segments.c.idx == idx)).mappings().first()
        faults = conn.execute(sa.select(sa.func.count()).select_from(call_segments).where(
            call_segments.c.call_sid == call_sid, call_segments.c.idx < idx,
            sa.or_(call_segments.c.end_reason.is_(None), call_segments.c.end_reason != HANDOVER))).scalar_one()
    if done.rowcount == 1 and row is not None:
        return EndedSegment(idx=idx, worker=row["worker"], end_reason=row["end_reason"],
                            bot_ended=bool(row["bot_ended"]), then_twiml=row["then_twiml"],
                            started=row["started_at"] is not None, faults_before=int(faults))
    if row is not None:
        return None
    try:  # the stream never started (its worker died first, or it was refused): asked about once too
        with store.engine.begin() as conn:
            conn.execute(call_segments.insert().values(call_sid=call_sid, idx=idx, action_at=t, bot_ended=False))
    except sa.exc.IntegrityError:
        return None
    return EndedSegment(idx=idx, started=False, faults_before=int(faults))


def call_caller(store: Store, call_sid: str) -> str | None:
    """The caller's number for a resume's token row (the webhook's, kept on the call's row)."""
    with store.engine.connect() as conn:
        caller = conn.execute(sa.select(calls.c.caller).where(calls.c.call_sid == call_sid)).scalar()
        if caller is None:
            caller = conn.execute(sa.select(stream_tokens.c.caller).where(
                stream_tokens.c.call_sid == call_sid, stream_tokens.c.caller.is_not(None))).scalar()
    return caller


def resume_context(store: Store, call_sid: str, segment: int) -> tuple[list[dict[str, Any]], str | None]:
    """The call's turns so far, oldest first (each record carries the dialog's snapshot after it), and
    how the stream before ``segment`` ended (``HANDOVER``: a drain handed it over; None: not recorded)."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(turns.c.idx, turns.c.route, turns.c.transcript, turns.c.reply,
                                      turns.c.escalation, turns.c.record)
                            .where(turns.c.call_sid == call_sid).order_by(turns.c.idx)).mappings().all()
        before = conn.execute(sa.select(call_segments.c.end_reason).where(
            call_segments.c.call_sid == call_sid, call_segments.c.idx == segment - 1)).scalar()
    return [dict(r) for r in rows], before


def list_segments(store: Store, call_sid: str) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(call_segments).where(call_segments.c.call_sid == call_sid)
                            .order_by(call_segments.c.idx)).mappings().all()
    return [dict(r) for r in rows]


def record_resume_token(store: Store, token_id: str, call_sid: str, *, caller: str | None, worker: str,
                        expires_at: dt.datetime) -> None:
    """A resume's stream token: the call is already admitted (no replay check, no line limit)."""
    with store.engine.begin() as conn:
        conn.execute(stream_tokens.insert().values(token_id=token_id, call_sid=call_sid, caller=caller,
                                                   issued_by=worker, issued_at=now(), expires_at=expires_at))
