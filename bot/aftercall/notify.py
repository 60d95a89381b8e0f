"""SMS to callers: the reception number after a ticket, a notice when its status changes.

Messages are rows of the records database's ``outbox`` (written in the same transaction as the
ticket or the status change, ``bot/store/db.py``), so nothing is lost to a crash or a Twilio
outage, and any worker of the line may send them. ``Outbox`` is the sender each server runs: it
claims due rows, sends them through the carrier ``sms.provider`` names (``bot/aftercall/sms_sender.py``:
Twilio, or the SENS relay from the city's registered number; never blocking the event loop),
and retries what may succeed later with exponential backoff (``sms.max_attempts``). Status notices
wait out ``sms.quiet_hours``. Numbers are logged masked.

A relay that reports delivery (SENS) keeps a text ``pending``, with its id in ``message_sid``, once
the relay has taken it: the same claim then looks the carrier's result up instead of sending again,
``sms.report_poll_secs`` later and then at half the time since it was taken. Delivered is ``sent``,
undelivered ``failed`` (the carrier's words in ``last_error``), and no result within
``sms.report_wait_secs`` is ``sent`` with that noted. Twilio's texts are ``sent`` when Twilio takes them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from loguru import logger

from bot import DATA_DIR
from bot.aftercall.sms_sender import SmsSender, SmsSendError, TwilioSender
from bot.aftercall.twilio_api import TwilioAPI
from bot.config import Config, SmsConfig
from bot.core.background import BackgroundTask
from bot.core.background import backoff_secs as backoff
from bot.core.datafile import DataFile
from bot.dialog.domain import Domain, load_domain
from bot.dialog.intake import Intake
from bot.dialog.language_packs import SMS_KEYS, load_language
from bot.privacy import mask, mask_stored
from bot.store.db import Store

TEXT_KEYS = SMS_KEYS


class SmsTextError(ValueError):
    """bot/data/sms.toml cannot be used (the message names the file and key)."""


@dataclass(frozen=True)
class SmsTexts:
    texts: dict[str, str]
    category_labels: dict[str, str]
    status_labels: dict[str, str]
    # The line's other languages (line.languages): their texts, from bot/languages/<code>/language.toml [sms].
    languages: dict[str, SmsTexts] = field(default_factory=dict)

    @classmethod
    def load(cls, config: Config) -> SmsTexts:
        path = config.path(config.sms.texts_file)
        source = DataFile.read(path, SmsTextError, "SMS texts file")
        data = {k: source.value((k,), str, "a text") for k in TEXT_KEYS}
        domain = load_domain(config.path(config.llm.domain_file))
        intake = Intake.load(DATA_DIR / "intake.toml", domain)
        return cls({k: data[k] for k in TEXT_KEYS}, intake.category_labels, intake.status_labels,
                   languages={code: cls.of_language(code, domain) for code in config.line.languages[1:]})

    @classmethod
    def of_language(cls, code: str, domain: Domain, folder: Path | None = None) -> SmsTexts:
        pack = load_language(code, domain, folder)  # its [sms] texts are checked there, by file and line
        return cls({k: pack.sms[k] for k in TEXT_KEYS}, pack.intake.category_labels, pack.intake.status_labels)

    def render(self, kind: str, *, number: str, category: str | None, status: str | None,
               location: str | None = None, language: str | None = None) -> str:
        """The text in the ticket's language (Korean for a language the line no longer lists)."""
        if language and language in self.languages:
            return self.languages[language].render(kind, number=number, category=category, status=status,
                                                   location=location)
        # The location is the caller's words: masked like everything stored (no resident or card numbers).
        return self.texts[kind].format(number=number, category=self.category_labels.get(category or "", category or ""),
                                       status=self.status_labels.get(status or "", status or ""),
                                       location=mask_stored(location or "-"))


def quiet_until(at: dt.datetime, window: tuple[int, int] | None, tz: str) -> dt.datetime | None:
    """When the quiet hours around ``at`` end (an aware time), or None outside them.

    ``window`` is (start, end) minutes of the local day; a window past midnight (21:00-08:00) ends
    the next morning.
    """
    if window is None:
        return None
    start, end = window
    local = at.astimezone(ZoneInfo(tz))
    minute = local.hour * 60 + local.minute
    inside = start <= minute < end if start <= end else (minute >= start or minute < end)
    if not inside:
        return None
    day = local.date() + dt.timedelta(days=1 if start > end and minute >= start else 0)
    wall = dt.datetime.combine(day, dt.time(end // 60 % 24, end % 60))
    return wall.replace(tzinfo=ZoneInfo(tz))


def backoff_secs(attempts: int, sms: SmsConfig) -> float:
    """The wait after the ``attempts``-th failed send: backoff_secs, doubling, capped."""
    return backoff(attempts, sms.backoff_secs, sms.backoff_max_secs)


class Outbox:
    """The SMS sender of one server process (one loop task; sends run in threads)."""

    def __init__(self, *, store: Store, config: Config, worker: str, sender: SmsSender | None = None,
                 api: TwilioAPI | None = None, texts: SmsTexts | None = None,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)):
        """``sender`` carries the texts; ``api`` is short for Twilio's, from ``sms.from_number``."""
        if (sender is None) == (api is None):
            raise ValueError("Outbox needs one sender: sender= or api= (Twilio)")
        if sender is None:
            assert api is not None
            sender = TwilioSender(api, from_number=config.sms.from_number)
        self._store = store
        self._sender = sender
        self._sms = config.sms
        self._tz = config.line.timezone
        self._window = config.sms.quiet_window()
        self._texts = texts or SmsTexts.load(config)
        self._worker = worker
        self._clock = clock
        self._task = BackgroundTask("sms-outbox")
        self._wake = asyncio.Event()
        self.sent = 0
        self.failed = 0

    def start(self) -> None:
        self._task.start_every(self.send_due, self._sms.poll_secs, label="SMS outbox", wake=self._wake)

    async def stop(self) -> None:
        await self._task.stop()

    def wake(self) -> None:
        """Look for due messages now (a ticket was just made here)."""
        self._wake.set()

    async def send_due(self) -> int:
        """Claim and send (or defer) every message due now; returns how many were claimed."""
        rows = await asyncio.to_thread(self._store.claim_due_sms, self._worker)
        for row in rows:
            await self._send(row)
        return len(rows)

    async def _send(self, row: dict) -> None:
        mid, number = row["id"], row["reception_no"]
        done = lambda **kw: asyncio.to_thread(self._store.sms_done, mid, **kw)
        if row.get("message_sid"):  # the relay took it: its delivery report, not a second send
            await self._check_report(row, done)
            return
        if row["kind"] == "status":
            until = quiet_until(self._clock(), self._window, self._tz)
            if until is not None:
                logger.info("SMS {} (ticket {}): quiet hours; waits until {}", mid, number, until.isoformat())
                await done(outcome="defer", attempted=False, retry_at=until)
                return
        to = row.get("caller")
        if not to:
            logger.warning("SMS {} (ticket {}): the caller's number is gone; not sent", mid, number)
            await done(outcome="no_number", attempted=False)
            return
        body = self._texts.render(row["kind"], number=number, category=row.get("category"),
                                  status=row.get("ticket_status"), location=row.get("location"),
                                  language=row.get("language"))
        attempt = row["attempts"] + 1
        try:
            sid = await self._sender.send(to=to, body=body)
        except SmsSendError as e:
            if e.retryable and attempt < self._sms.max_attempts:
                wait = backoff_secs(attempt, self._sms)
                logger.warning("SMS {} (ticket {}) to {}: attempt {}/{} failed ({}); retrying in {:.0f} s", mid, number,
                               mask(to), attempt, self._sms.max_attempts, e, wait)
                await done(outcome="retry", attempted=True, error=str(e),
                           retry_at=self._clock() + dt.timedelta(seconds=wait))
                return
            self.failed += 1
            logger.error("SMS {} (ticket {}) to {}: FAILED after {} attempt(s): {}", mid, number, mask(to), attempt, e)
            await done(outcome="failed", attempted=True, error=str(e))
            return
        if self._sender.reports:
            logger.info("SMS {} (ticket {}, {}) taken by {} for {} (attempt {}); its delivery report follows", mid,
                        number, row["kind"], self._sender.name, mask(to), attempt)
            await done(outcome="defer", attempted=True, message_sid=sid, body=body,
                       retry_at=self._clock() + dt.timedelta(seconds=self._sms.report_poll_secs))
            return
        self.sent += 1
        logger.info("SMS {} (ticket {}, {}) sent to {} (attempt {})", mid, number, row["kind"], mask(to), attempt)
        await done(outcome="sent", attempted=True, message_sid=sid, body=body)

    async def _check_report(self, row: dict, done: Callable[..., Any]) -> None:
        """Map the carrier's result for a text the relay took onto the outbox's statuses."""
        mid, number, sid = row["id"], row["reception_no"], row["message_sid"]
        if not self._sender.reports:  # taken by a relay the line no longer uses (sms.provider changed)
            await done(outcome="sent", attempted=False, error=f"no delivery report: {self._sender.name} does not give one")
            return
        now = self._clock()
        try:
            report = await self._sender.report(sid)
        except SmsSendError as e:
            if e.retryable:
                logger.warning("SMS {} (ticket {}): its delivery report is not available yet ({})", mid, number, e)
                await done(outcome="defer", attempted=False, retry_at=now + dt.timedelta(seconds=self._sms.report_poll_secs))
            else:  # the relay took it; only its report is out of reach
                logger.error("SMS {} (ticket {}): no delivery report ({}); counted as sent", mid, number, e)
                self.sent += 1
                await done(outcome="sent", attempted=False, error=f"no delivery report: {e}")
            return
        if report.state == "delivered":
            self.sent += 1
            logger.info("SMS {} (ticket {}, {}) delivered ({})", mid, number, row["kind"], self._sender.name)
            await done(outcome="sent", attempted=False)
        elif report.state == "undelivered":
            self.failed += 1
            logger.error("SMS {} (ticket {}): NOT DELIVERED: {}", mid, number, report.detail)
            await done(outcome="failed", attempted=False, error=report.detail)
        else:
            taken = report.accepted_at or row["created_at"]
            waited = (now - taken).total_seconds()
            if waited >= self._sms.report_wait_secs:
                self.sent += 1
                logger.warning("SMS {} (ticket {}): no delivery report after {:.0f} s; counted as sent", mid, number,
                               waited)
                await done(outcome="sent", attempted=False,
                           error=f"no delivery report within {self._sms.report_wait_secs:g} s")
                return
            wait = max(self._sms.report_poll_secs, min(waited / 2, self._sms.report_wait_secs - waited))
            await done(outcome="defer", attempted=False, retry_at=now + dt.timedelta(seconds=wait))
