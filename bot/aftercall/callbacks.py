"""Placing the callbacks booked outside the desk's hours (issue 22 part 3).

``CallbackPlacer.place_due`` claims the waiting callbacks that are due (``callbacks.call_after``;
one placer per row, safe with several workers and the CLI at once) and places each through
Twilio's Calls API (``bot/aftercall/twilio_api.py``, in a thread) with asynchronous answering-machine
detection. Twilio then calls our signed webhooks (``bot/app/server.py``):

* ``/twilio/callback/answer?id=N``: the call is answered: the bot, with the ticket's context (a
  machine already known: a short ``<Say>`` and a hang-up);
* ``/twilio/callback/amd?id=N``: AMD's verdict; a machine is redirected to that message;
* ``/twilio/callback/status?id=N``: the call ended: answered is done; no answer, busy or failed
  waits ``callbacks.retry_after_secs`` for another call, ``callbacks.max_attempts`` calls in all.

Run by ``run_bot.py callbacks --place`` and, with ``callbacks.place_every_secs``, by ``serve``.
Numbers are logged masked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from loguru import logger

from bot.aftercall.twilio_api import TwilioAPI, TwilioAPIError
from bot.config import Config
from bot.core.background import BackgroundTask
from bot.privacy import mask
from bot.store.db import Store

ROUTES = ("answer", "amd", "status")  # /twilio/callback/<route>?id=N


def callback_url(public_host: str, route: str, callback_id: int) -> str:
    return f"https://{public_host}/twilio/callback/{route}?id={callback_id}"


def is_machine(answered_by: str | None) -> bool:
    """Twilio's AnsweredBy: machine_start, machine_end_beep/silence/other, fax: not a person."""
    return answered_by is not None and (answered_by.startswith("machine") or answered_by == "fax")


@dataclass(frozen=True)
class Placed:
    callback_id: int
    call_sid: str | None  # None: not placed (the error says why)
    status: str  # the callback's status now: calling, waiting (again later), unreachable
    error: str | None = None


class CallbackPlacer:
    """Places due callbacks (keyword-only; one per process; sends run in threads)."""

    def __init__(self, *, store: Store, api: TwilioAPI, config: Config):
        self._store = store
        self._api = api
        self._cfg = config.callbacks
        self._host = config.server.public_host
        self._from = config.callbacks.from_number or config.sms.from_number
        if not self._from:
            raise ValueError("callbacks.from_number (or sms.from_number): the number callbacks are placed from")
        self._task = BackgroundTask("callback-placer")

    async def place_due(self) -> list[Placed]:
        rows = await asyncio.to_thread(self._store.claim_due_callbacks)
        return [await self._place(row) for row in rows]

    async def _place(self, row: dict) -> Placed:
        cid, to = row["id"], row.get("caller")
        if not to:  # a QA-page call, or the number already cleared by retention
            logger.warning("callback {}: no number to call; unreachable", cid)
            status = await self._outcome(cid, why="no_number", final=True)
            return Placed(cid, None, status, "no number")
        try:
            placed = await self._api.place_call(
                to=to, from_=self._from, url=callback_url(self._host, "answer", cid),
                machine_detection=self._cfg.machine_detection, amd_callback=callback_url(self._host, "amd", cid),
                status_callback=callback_url(self._host, "status", cid), timeout_secs=self._cfg.ring_secs)
        except TwilioAPIError as e:
            status = await self._outcome(cid, why="api_error", final=not e.retryable)
            logger.error("callback {} to {}: call NOT placed (attempt {}/{}): {}; now {}", cid, mask(to),
                         row["attempts"], self._cfg.max_attempts, e, status)
            return Placed(cid, None, status, str(e))
        await asyncio.to_thread(self._store.callback_placed, cid, placed.sid)
        logger.info("callback {} to {}: call {} placed (attempt {}/{})", cid, mask(to), mask(placed.sid),
                    row["attempts"], self._cfg.max_attempts)
        return Placed(cid, placed.sid, "calling")

    async def _outcome(self, cid: int, *, why: str, final: bool) -> str:
        return await asyncio.to_thread(self._store.callback_outcome, cid, reached=False, why=why,
                                       max_attempts=0 if final else self._cfg.max_attempts,
                                       retry_after_secs=self._cfg.retry_after_secs)

    # --- serve's schedule (callbacks.place_every_secs) ----------------------------------------

    def start(self) -> None:
        if self._cfg.place_every_secs > 0:
            self._task.start_every(self.place_due, self._cfg.place_every_secs, label="callback placer")

    async def stop(self) -> None:
        await self._task.stop()
