"""What a dialog turn does to the records database: tickets, texts, callbacks, status lookups.

``RecordsEffects`` is the dialog stage's one way to the records (``bot.store.calls.CallLog``, a layer
above the stages, seen through ``TicketRecords``). A database that is down, slow or absent never
raises into the call: each effect logs the failure and says it failed, so the policy can tell the
caller (``DialogPolicy.ticket_created`` and its siblings).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from loguru import logger


class TicketRecords(Protocol):
    """What the stage needs of the records database: ``bot.store.calls.CallLog`` (a layer above the stages)."""

    async def create_ticket(self, **fields: Any) -> str: ...

    async def text_ticket(self, reception_no: str) -> None: ...

    async def request_callback(self, *, call_sid: str | None, after: datetime, reason: str,
                               reception_no: str | None = None) -> int: ...

    async def find_ticket(self, reception_no: str) -> dict[str, Any] | None: ...


class RecordsEffects:
    """One call's side effects on the records database (``records`` None: none kept, each effect fails).

    Args:
        records: The records database's calls (``CallLog``), or None.
        call_id: The call's id (CallSid), written with its tickets and callbacks.
    """

    def __init__(self, records: TicketRecords | None = None, *, call_id: str | None = None) -> None:
        self._records = records
        self._call_id = call_id

    def _db(self) -> TicketRecords:
        if self._records is None:
            raise RuntimeError("no records database")
        return self._records

    async def create_ticket(self, slots: dict, *, excerpt: str, language: str) -> str | None:
        """The ticket's reception number, or None when the database failed (the caller is told)."""
        try:
            number = await self._db().create_ticket(
                call_sid=self._call_id, category=slots["category"], location=slots.get("location"),
                time=slots.get("time"), excerpt=excerpt, language=language)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so, keep the slots
            logger.error("TICKET NOT CREATED ({}: {}); telling the caller", type(e).__name__, e)
            return None
        logger.info("ticket {} created ({})", number, slots["category"])
        return number

    async def text_ticket(self, number: str) -> bool:
        """The caller said yes to a text: consent and one SMS in the outbox; False when the database failed."""
        try:
            await self._db().text_ticket(number)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so (no "will send")
            logger.error("SMS NOT QUEUED for ticket {} ({}: {}); telling the caller", number, type(e).__name__, e)
            return False
        logger.info("ticket {}: the caller asked for a text; queued", number)
        return True

    async def book_callback(self, after: datetime, reception_no: str | None = None) -> bool:
        """A callback for the desk's queue; False when the database failed (the caller is told)."""
        try:
            await self._db().request_callback(call_sid=self._call_id, after=after, reason="closed_transfer",
                                              reception_no=reception_no)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so
            logger.error("CALLBACK NOT BOOKED ({}: {}); telling the caller", type(e).__name__, e)
            return False
        logger.info("callback booked for after {}", after.isoformat())
        return True

    async def find_ticket(self, number: str) -> tuple[dict[str, Any] | None, bool]:
        """The ticket (None: no such number) and whether the lookup worked at all."""
        try:
            return await self._db().find_ticket(number), True
        except Exception as e:  # noqa: BLE001 - database down or slow: say so
            logger.error("status lookup failed ({}: {})", type(e).__name__, e)
            return None, False
