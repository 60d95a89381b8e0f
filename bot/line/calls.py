"""The calls of this worker: in progress, and reserved (a slot taken whose call has not started yet).

One registry, read by the per-worker limit (``server.max_calls``), the QA page's cap
(``server.qa_max_calls``), /healthz and the drain. Every entry carries its ``CallKind``: a QA
call is told apart by its kind, not by its id.

A reservation is a webhook answered with a stream token whose media stream has not arrived yet,
or a QA offer being answered; it holds a slot until its call starts, it is released, or it expires.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class CallKind(StrEnum):
    """Where a call comes from: Twilio's media stream, or the QA page's browser."""

    PHONE = "phone"
    QA = "qa"


class LiveCall(Protocol):
    """A call in progress here, as the drain sees it (``bot.app.host.HostedCall``)."""

    @property
    def call_id(self) -> str: ...

    @property
    def kind(self) -> CallKind: ...

    async def hand_over(self) -> bool:
        """Hand the call to another worker at its next quiet moment; False: it has nowhere to go."""
        ...

    async def goodbye(self, sentence: str) -> None:
        """Say ``sentence`` and end the call."""
        ...

    async def cancel(self) -> None:
        """End the call now."""
        ...


@dataclass(frozen=True)
class Reservation:
    kind: CallKind
    expires: float  # monotonic


class CallRegistry:
    """This worker's calls, by call id (Twilio's CallSid, or the QA call's id), each with its kind."""

    def __init__(self, reserve_secs: float = 60.0):
        self.active: dict[str, LiveCall] = {}
        self._reserved: dict[str, Reservation] = {}
        self._reserve_secs = reserve_secs

    def reserve(self, key: str, kind: CallKind = CallKind.PHONE, secs: float | None = None) -> None:
        """Hold a slot under ``key`` (a CallSid, or a QA offer's key) for ``secs`` (default: a token's life)."""
        self._reserved[key] = Reservation(kind, time.monotonic() + (self._reserve_secs if secs is None else secs))

    def release(self, key: str | None) -> None:
        if key is not None:
            self._reserved.pop(key, None)

    def start(self, call: LiveCall, hold: str | None = None) -> None:
        """``call`` is in progress; the reservation ``hold`` (default: its own id) becomes it."""
        self._reserved.pop(call.call_id if hold is None else hold, None)
        self.active[call.call_id] = call

    def end(self, call_id: str) -> None:
        self.active.pop(call_id, None)

    def reserved(self) -> int:
        """Reservations not expired (expired ones are dropped here)."""
        now = time.monotonic()
        for key in [k for k, r in self._reserved.items() if r.expires < now]:
            del self._reserved[key]
        return len(self._reserved)

    def count(self, kind: CallKind | None = None) -> int:
        """Calls in progress and reserved, of ``kind`` (all kinds: None)."""
        self.reserved()
        if kind is None:
            return len(self.active) + len(self._reserved)
        return (sum(c.kind is kind for c in self.active.values())
                + sum(r.kind is kind for r in self._reserved.values()))

    def __contains__(self, key: object) -> bool:
        """``key`` is a call in progress here, or a reservation not expired."""
        self.reserved()
        return key in self.active or key in self._reserved

    def __len__(self) -> int:
        return self.count()
