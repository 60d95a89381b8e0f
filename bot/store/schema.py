"""Tables of the records database (SQLAlchemy Core). Alembic migrations create them; never create_all."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.schema import SchemaItem

from bot import languages

metadata = sa.MetaData()


def _id_column() -> sa.Column:
    """A log table's key: an autoincrementing integer ``id``."""
    return sa.Column("id", sa.Integer, primary_key=True, autoincrement=True)


def _moment(name: str, **kwargs: Any) -> sa.Column:
    """A point in time: every time in the records is stored with its time zone."""
    return sa.Column(name, sa.DateTime(timezone=True), **kwargs)


def _trail(name: str, subject: sa.Column, *items: SchemaItem, at_index: bool | None = None) -> sa.Table:
    """An append-only trail: its key, the ``subject`` a row is about, when (``at``), who (``actor``: a staff
    username, "cli", or "-" where nobody was logged in), then ``items``."""
    return sa.Table(
        name,
        metadata,
        _id_column(),
        subject,
        _moment("at", nullable=False, index=at_index),
        sa.Column("actor", sa.String(64), nullable=False),
        *items,
    )


# One row per call, written when its media stream starts; ended_at stays NULL while it runs
# (a call still NULL when its worker starts again was cut off by a crash: end_reason "aborted").
calls = sa.Table(
    "calls",
    metadata,
    sa.Column("call_sid", sa.String(64), primary_key=True),
    sa.Column("caller", sa.String(32)),  # E.164, kept for call-backs; never logged unmasked
    sa.Column("worker", sa.String(64), nullable=False, index=True),
    _moment("started_at", nullable=False, index=True),
    _moment("ended_at"),
    sa.Column("end_reason", sa.String(32)),
    sa.Column("qa", sa.Boolean, nullable=False, default=False),
    # What the person taking a warm transfer hears first (bot/app/server.py /twilio/whisper).
    sa.Column("transfer_note", sa.Text),
    # The call's recording (bot/recording/): its file relative to recording.dir, set at its first audio;
    # its length once closed (NULL: cut off by a crash, read from the file); when retention deleted it.
    sa.Column("recording_path", sa.String(255)),
    sa.Column("recording_secs", sa.Float),
    _moment("recording_deleted_at"),
)

# One row per turn, upserted when the answer is decided and again when the turn closes.
turns = sa.Table(
    "turns",
    metadata,
    _id_column(),
    sa.Column("call_sid", sa.String(64), nullable=False, index=True),
    sa.Column("idx", sa.Integer, nullable=False),
    _moment("created_at", nullable=False, index=True),
    sa.Column("route", sa.String(16)),
    sa.Column("intent", sa.String(32)),
    sa.Column("transcript", sa.Text),  # masked: no resident registration or card numbers
    sa.Column("reply", sa.Text),
    sa.Column("llm_calls", sa.Integer, nullable=False, default=0),
    sa.Column("voice_to_voice_ms", sa.Float),
    sa.Column("escalation", sa.String(8), index=True),  # "119", "112", "109": an emergency told
    sa.Column("record", sa.JSON, nullable=False),  # the whole TurnRecord (marks, stages, slots)
    sa.UniqueConstraint("call_sid", "idx", name="uq_turns_call_idx"),
)

tickets = sa.Table(
    "tickets",
    metadata,
    _id_column(),
    # Year + the row id: unique by construction under any number of concurrent calls and workers.
    sa.Column("reception_no", sa.String(16), unique=True),
    sa.Column("call_sid", sa.String(64), index=True),
    sa.Column("category", sa.String(32), nullable=False),
    sa.Column("location", sa.Text),
    sa.Column("time", sa.Text),
    sa.Column("excerpt", sa.Text),  # masked caller words that led to the ticket
    sa.Column("status", sa.String(16), nullable=False, default="open", index=True),
    _moment("created_at", nullable=False),
    _moment("updated_at", nullable=False),
    # The latest SMS about this ticket (bot/aftercall/notify.py): pending | sent | failed | no_number; NULL: none.
    sa.Column("sms_status", sa.String(16)),
    # The caller said yes to "접수번호를 문자로 보내드릴까요?": status notices go only to these.
    sa.Column("sms_opt_in", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    # The caller's language when the ticket was taken (a code of line.languages): texts and status
    # sentences about it are in this language.
    sa.Column("language", sa.String(8), nullable=False, default=languages.FIRST, server_default=languages.FIRST),
    # Set by an admin on the desk (audited): the call's recording is kept past retention until lifted.
    sa.Column("legal_hold", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
)

TICKET_STATUSES = ("open", "in_progress", "done", "rejected")

# A person asked for outside the desk's hours: the desk calls back after call_after. The caller's
# number is the call's (calls.caller), never copied here.
callbacks = sa.Table(
    "callbacks",
    metadata,
    _id_column(),
    sa.Column("call_sid", sa.String(64), index=True),
    sa.Column("reason", sa.String(32), nullable=False),
    _moment("requested_at", nullable=False),
    _moment("call_after", nullable=False),
    sa.Column("status", sa.String(16), nullable=False, default="waiting", index=True),
    _moment("updated_at", nullable=False),
    # `run_bot.py callbacks --place`: calls placed so far, the latest one, and who answered it
    # (Twilio's AnsweredBy: human, machine_end_beep, fax, unknown, ...; "no-answer", "busy").
    sa.Column("attempts", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Column("last_call_sid", sa.String(64), index=True),
    sa.Column("answered_by", sa.String(32)),
    # The call's latest ticket when the callback was asked for: the callback reads out its status.
    sa.Column("reception_no", sa.String(16)),
)

# "calling": a call is placed and its outcome not known yet.
CALLBACK_STATUSES = ("waiting", "calling", "done", "unreachable", "cancelled")

# SMS to callers (bot/aftercall/notify.py), written in the same transaction as what they are about and sent
# by the server's outbox sender with retries. The number is the call's (calls.caller), never
# copied here: when retention clears it, an unsent message fails as no_number.
outbox = sa.Table(
    "outbox",
    metadata,
    _id_column(),
    sa.Column("kind", sa.String(16), nullable=False),  # ticket (its number) | status (a status change)
    sa.Column("reception_no", sa.String(16), nullable=False, index=True),
    sa.Column("call_sid", sa.String(64)),
    sa.Column("ticket_status", sa.String(16)),  # for kind "status": the new status
    sa.Column("status", sa.String(16), nullable=False, index=True),  # pending | sending | sent | failed
    sa.Column("attempts", sa.Integer, nullable=False, default=0, server_default="0"),
    _moment("next_attempt_at", nullable=False, index=True),
    sa.Column("claimed_by", sa.String(64)),
    sa.Column("last_error", sa.Text),
    sa.Column("message_sid", sa.String(64)),
    sa.Column("body", sa.Text),  # what was sent (no personal data: a number, a category, a status)
    _moment("created_at", nullable=False),
    _moment("updated_at", nullable=False),
)

OUTBOX_STATUSES = ("pending", "sending", "sent", "failed")

# Several workers on one line (bot/line/admission.py). One row per stream token the webhook issued: the
# caller's number waits here for the media stream (which may reach another worker), and the first
# worker to set used_at owns the token. Rows are deleted a while after they expire.
stream_tokens = sa.Table(
    "stream_tokens",
    metadata,
    sa.Column("token_id", sa.String(32), primary_key=True),
    sa.Column("call_sid", sa.String(64), nullable=False, index=True),
    sa.Column("caller", sa.String(32)),  # E.164 from the webhook's From; never in the TwiML
    sa.Column("issued_by", sa.String(64)),  # the worker that answered the webhook
    _moment("issued_at", nullable=False),
    _moment("expires_at", nullable=False, index=True),
    _moment("used_at"),
    sa.Column("used_by", sa.String(64)),  # the worker that runs the call
)

# One row per worker, its lease renewed every few seconds: the line-wide call count only counts
# unfinished calls of workers whose heartbeat is fresh, so a killed worker's calls stop counting.
workers = sa.Table(
    "workers",
    metadata,
    sa.Column("worker", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255)),
    sa.Column("pid", sa.Integer),
    _moment("started_at", nullable=False),
    _moment("heartbeat_at", nullable=False),
    sa.Column("draining", sa.Boolean, nullable=False, default=False),
)

# One row per server start: the stage figures on a fixed input (bot/ops/selftime.py). A start much
# slower than the last good one is kept with good = false and does not become the new baseline.
self_timings = sa.Table(
    "self_timings",
    metadata,
    _id_column(),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("config_key", sa.String(32), nullable=False),
    _moment("measured_at", nullable=False),
    sa.Column("figures", sa.JSON, nullable=False),
    sa.Column("good", sa.Boolean, nullable=False),
    sa.Index("ix_self_timings_host_key", "host", "config_key"),
)

# The staff desk (bot/desk/): one row per account. Never deleted (the audit trail names them);
# disabled instead. session_epoch rises on logout, disable and password change: every session
# cookie signed with an older epoch stops working at once, on every desk process.
staff = sa.Table(
    "staff",
    metadata,
    _id_column(),
    sa.Column("username", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),  # agent | department | admin
    sa.Column("department", sa.String(32)),  # a directory.toml id; only for role "department"
    sa.Column("password_hash", sa.Text, nullable=False),  # argon2id (bot/desk/auth.py)
    sa.Column("api_token_hash", sa.String(64), unique=True),  # sha256 of the account's API token
    sa.Column("active", sa.Boolean, nullable=False, default=True, server_default=sa.true()),
    sa.Column("session_epoch", sa.Integer, nullable=False, default=0, server_default="0"),
    _moment("created_at", nullable=False),
    _moment("updated_at", nullable=False),
    _moment("last_login_at"),
)

STAFF_ROLES = ("agent", "department", "admin")

# Every status change of a ticket: who, when, from, to, and the note. Append only.
ticket_audit = _trail(
    "ticket_audit",
    sa.Column("reception_no", sa.String(16), nullable=False, index=True),
    sa.Column("from_status", sa.String(16), nullable=False),
    sa.Column("to_status", sa.String(16), nullable=False),
    sa.Column("note", sa.Text),
)

# Every playback, copy, download and export of a call's recording, and every refused attempt: who, when,
# from where, which call, how (append only). A player's range requests within ACCESS_WINDOW_SECS of the same
# person's row are that playback (bot/store/recordings.py).
recording_access = _trail(
    "recording_access",
    sa.Column("call_sid", sa.String(64), nullable=False, index=True),
    sa.Column("action", sa.String(16), nullable=False),  # one of RECORDING_ACTIONS
    sa.Column("reception_no", sa.String(16)),  # the ticket page it was played from, if any
    sa.Column("address", sa.String(64)),  # the client's address (the desk); None from the command line
    sa.Column("refused", sa.String(32)),  # None: served; else why not (one of RECORDING_REFUSALS)
    sa.Column("reason", sa.Text),  # the reason stated (an unmasked export's)
    at_index=True,
)

# play: range requests (a player); copy: the whole file without asking a download (a browser's "Save as");
# download: the desk's download, with a reason; export: the command line's, masked, with a reason;
# export_unmasked: an admin's; view: the call's page or its ticket's opened (its turns read; issue 47).
RECORDING_ACTIONS = ("play", "copy", "download", "export", "export_unmasked", "view")
RECORDING_REFUSALS = ("anonymous", "other_department", "no_such_call", "deleted", "no_reason")

# Issue 46: the media streams of one call (a resumed call has several; bot/store/segments.py). Segment idx
# 0 is the webhook's stream; each resume opens the next. The worker that ran it, when it started and
# ended, why (``end_reason``), whether the bot ended the call itself (``bot_ended``: the action route
# answers <Hangup/> or ``then_twiml``, a hand-over's <Dial>), and when Twilio asked the <Connect>'s
# action about its end (``action_at``, set once: a second request is a replay). A resuming worker reads the
# turns (each record carries the dialog's snapshot: slots, read-back, language, keypad).
call_segments = sa.Table(
    "call_segments",
    metadata,
    sa.Column("call_sid", sa.String(64), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("worker", sa.String(64)),
    _moment("started_at"),
    _moment("ended_at"),
    sa.Column("end_reason", sa.String(32)),
    sa.Column("bot_ended", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("then_twiml", sa.Text),
    _moment("action_at"),
    sa.Column("recording_path", sa.String(255)),  # the segment's own recording file (segment 0: the call's row)
)
