"""The server's side of the records database: calls and turns as they happen, tickets on demand.

One per process. Writes go through ``RecordWriter`` (off the event loop, retried while the
database is down); the dialog's questions (a new ticket's number, a ticket's status) are awaited
with a timeout so a slow database ends in a spoken apology, not silence.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from collections.abc import Callable
from operator import methodcaller
from pathlib import Path
from typing import Any

from loguru import logger

from bot.config import Config, Secrets
from bot.core.deadline import in_thread, within
from bot.core.errors import StartupError
from bot.privacy import mask, mask_turn
from bot.recording import files
from bot.store.audit import purge_audit
from bot.store.db import RECORDS_SECS, Store, now, open_store
from bot.store.recordings import fill_cut_off_lengths, held_past_retention, purge_recordings, set_recording
from bot.store.segments import end_segment, open_segment, set_segment_recording
from bot.store.writer import RecordWriter

RETENTION_EVERY_SECS = 24 * 3600.0


class CallLog:
    def __init__(self, store: Store, *, worker: str, write_turns: bool = True, retention_days: float = 0.0,
                 max_pending: int = 10000):
        self.store = store
        self.worker = worker
        self.write_turns = write_turns
        self.retention_days = retention_days
        self.writer = RecordWriter(store, max_pending=max_pending)
        self._retention_task: asyncio.Task | None = None
        self.on_ticket: Callable[[], None] = lambda: None  # the SMS sender looks at once (bot/aftercall/notify.py)
        # Call recordings (bot/recording/): their directory and retention ([recording]; 0 keeps them).
        self.recordings_dir: Path | None = None
        self.recording_retention_days = 0.0
        # The access audit's own period (desk.audit_retention_days; 0 keeps it): never the records' retention's.
        self.audit_retention_days = 0.0

    @classmethod
    def open(cls, config: Config, secrets: Secrets | None = None) -> CallLog:
        """Open, migrate, mark this worker's unfinished calls aborted, apply retention (blocking)."""
        rc = config.records
        store = open_store(config, secrets)
        worker = rc.worker or f"{socket.gethostname()}:{config.server.port}"
        log = cls(store, worker=worker, write_turns=rc.enabled, retention_days=rc.retention_days,
                  max_pending=rc.max_pending)
        log.recordings_dir = config.path(config.recording.dir)
        log.recording_retention_days = config.recording.retention_days
        log.audit_retention_days = config.desk.audit_retention_days
        if config.recording.enabled:
            try:
                files.check_writable(log.recordings_dir)
            except OSError as e:
                raise StartupError(f"recording.dir: cannot write call recordings to {log.recordings_dir}: {e}") from e
            logger.info("recording every call ({}, both voices) into {} (recording.retention_days = {}; 0 keeps them)",
                        config.recording.format, log.recordings_dir, config.recording.retention_days)
        aborted = store.abort_unfinished(worker)
        if aborted:
            logger.warning("records: {} call(s) of worker {} were cut off by a crash; marked aborted", aborted, worker)
            fill_cut_off_lengths(store, log.recordings_dir)  # their recordings play up to the last flush
        log.apply_retention()
        return log

    def apply_retention(self) -> None:
        for kept in held_past_retention(self.store, records_days=self.retention_days,
                                        recording_days=self.recording_retention_days if self.recordings_dir else 0):
            what = [f"{kept['turns']} turn(s)"] if kept["turns"] else []
            what += ["its transfer note"] * kept["transfer_note"] + ["its recording"] * kept["recording"]
            logger.info("records: kept call {}'s {} past retention: ticket(s) {} under legal hold", mask(kept["call_sid"]),
                        ", ".join(what), ", ".join(kept["tickets"]))
        purge_audit(self.store, self.audit_retention_days)  # its own period, whatever the records'
        if self.recording_retention_days > 0 and self.recordings_dir is not None:
            purge_recordings(self.store, self.recordings_dir, self.recording_retention_days)
        if self.retention_days > 0:
            n = self.store.purge_turns(self.retention_days)
            if n:
                logger.info("records: deleted {} turn(s) older than {} days (records.retention_days)", n,
                            self.retention_days)
            gone = self.store.purge_after_call(self.retention_days)
            if any(gone.values()):
                logger.info("records: older than {} days (records.retention_days): deleted {} SMS and {} finished "
                            "callback(s), cleared {} transfer note(s)", self.retention_days, gone["sms"],
                            gone["callbacks"], gone["transfer_notes"])

    def start_retention(self) -> None:
        async def daily():
            while True:
                await asyncio.sleep(RETENTION_EVERY_SECS)
                self.writer.submit("retention", lambda s: self.apply_retention())

        if (self.retention_days > 0 or self.recording_retention_days > 0 or self.audit_retention_days > 0) and \
                self._retention_task is None:
            self._retention_task = asyncio.create_task(daily())

    async def aclose(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        await asyncio.to_thread(self.writer.close)
        self.store.close()

    # --- as the call goes ---------------------------------------------------------------------

    def call_started(self, call_sid: str, *, caller: str | None, qa: bool) -> None:
        if not self.write_turns:
            return
        t = now()
        self.writer.submit(f"call {mask(call_sid)} start",
                           lambda s: s.start_call(call_sid, caller=caller, worker=self.worker, qa=qa, started_at=t))

    def recording(self, call_sid: str, path: str, secs: float | None = None, *, segment: int = 0) -> None:
        """The call's recording (relative to recording.dir): at its first audio, then with its length. A
        resumed call's later segments (issue 46) are noted on their segment's row."""
        if segment:
            self.writer.submit(f"call {mask(call_sid)} segment {segment} recording",
                               lambda s: set_segment_recording(s, call_sid, segment, path))
            return
        self.writer.submit(f"call {mask(call_sid)} recording", lambda s: set_recording(s, call_sid, path, secs))

    def turn(self, call_sid: str, record: dict[str, Any]) -> None:
        if self.write_turns:
            self.writer.submit(f"call {mask(call_sid)} turn {record.get('index')}",
                               lambda s: s.save_turn(call_sid, record))

    def segment_started(self, call_sid: str, segment: int) -> None:
        """The call's media stream ``segment`` runs on this worker (issue 46; ``bot/store/segments.py``)."""
        if not self.write_turns:
            return
        t = now()
        self.writer.submit(f"call {mask(call_sid)} stream {segment} start",
                           lambda s: open_segment(s, call_sid, segment, worker=self.worker, started_at=t))

    def segment_ended(self, call_sid: str, segment: int, reason: str) -> None:
        """How the stream ended here (a bot's end recorded before the close stays)."""
        if not self.write_turns:
            return
        t = now()
        self.writer.submit(f"call {mask(call_sid)} stream {segment} end",
                           lambda s: end_segment(s, call_sid, segment, reason=reason, bot_ended=False, ended_at=t))

    def call_ended(self, call_sid: str, reason: str) -> None:
        if not self.write_turns:
            return
        t = now()
        self.writer.submit(f"call {mask(call_sid)} end", lambda s: s.end_call(call_sid, reason=reason, ended_at=t))

    # --- the dialog's questions ---------------------------------------------------------------

    async def create_ticket(self, **fields: Any) -> str:
        return await within(self.writer.call("new ticket", lambda s: s.create_ticket(**fields)), RECORDS_SECS)

    def transfer_note(self, call_sid: str, note: str) -> None:
        """What the person taking this call's warm transfer will hear (read back by /twilio/whisper)."""
        self.writer.submit(f"call {mask(call_sid)} transfer note", lambda s: s.set_transfer_note(call_sid, note))

    async def read_transfer_note(self, call_sid: str) -> str | None:
        return await in_thread(RECORDS_SECS, self.store.transfer_note, call_sid)

    async def request_callback(self, *, call_sid: str | None, after: dt.datetime, reason: str,
                               reception_no: str | None = None) -> int:
        return await within(
            self.writer.call("new callback", lambda s: s.request_callback(call_sid=call_sid, after=after, reason=reason,
                                                                          reception_no=reception_no)),
            RECORDS_SECS)

    async def text_ticket(self, reception_no: str) -> None:
        """The caller's yes to a text: consent and the SMS in the outbox (its sender is woken).
        Raises when the text cannot go (no number), so the caller is never told it will."""
        queued = await within(self.writer.call("ticket SMS", lambda s: s.text_ticket(reception_no)),
                              RECORDS_SECS)
        if not queued:
            raise RuntimeError("the call has no caller number to text")
        self.on_ticket()

    def hand_over(self, call_sid: str, reception_nos: list[str]) -> None:
        """The call went to a person: its open tickets are in_progress, audited as the bot's doing."""
        for number in reception_nos:
            self.writer.submit(f"ticket {number} handed over", methodcaller("hand_over", number, call_sid))

    async def find_ticket(self, reception_no: str) -> dict[str, Any] | None:
        # Reads need no ordering behind queued writes: a thread of their own.
        return await in_thread(RECORDS_SECS, self.store.find_ticket, reception_no)

    async def finished_turns(self, since: float) -> list[dict[str, Any]]:
        """Finished calls' turns after ``since`` (epoch seconds), their words masked as in the logs (``mask_turn``)."""
        return [mask_turn(t) for t in await asyncio.to_thread(self.store.finished_turns, since)]
