"""The longest call (``call.max_minutes``): two minutes before, an offer; at the limit, the polite end.

The Civil Petitions Act's enforcement decree (amended 2024-10-29) lets a public line set a maximum
call length (Gyeonggi: 20 minutes). What is said is the dialog policy's (``DialogPolicy.time_limit_near``
and ``time_limit_reached``), in the call's language; this only keeps the time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from loguru import logger
from pipecat.frames.frames import EndWorkerFrame, Frame, TTSSpeakFrame

from bot.dialog.policy import DialogPolicy
from bot.dialog.state import DialogState

WARN_BEFORE_S = 120.0  # the offer comes this long before the limit


class CallLengthLimit:
    """One call's clock. ``run`` sleeps to the offer, then to the end; cancel it when the call ends."""

    def __init__(self, *, policy: DialogPolicy, dialog: DialogState, max_minutes: float,
                 push: Callable[[Frame], Awaitable[None]],
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.policy, self.dialog = policy, dialog
        self.limit_s = max_minutes * 60.0
        self._push, self._sleep = push, sleep

    async def run(self) -> None:
        if self.limit_s <= 0:
            return  # no limit
        warn_at = max(0.0, self.limit_s - WARN_BEFORE_S)
        await self._sleep(warn_at)
        if self.dialog.ended:
            return
        near = self.policy.for_language(self.dialog.language).time_limit_near(self.dialog)
        near.change.apply(self.dialog, near.reply)
        logger.info("call length: {:.0f} s left of call.max_minutes ({})", self.limit_s - warn_at, near.rule)
        for sentence in near.sentences:
            await self._push(TTSSpeakFrame(sentence))
        await self._sleep(self.limit_s - warn_at)
        if self.dialog.ended:
            return
        end = self.policy.for_language(self.dialog.language).time_limit_reached()
        end.change.apply(self.dialog, end.reply)
        logger.info("call length: call.max_minutes ({:.0f} min) reached: ending the call", self.limit_s / 60)
        for sentence in end.sentences:
            await self._push(TTSSpeakFrame(sentence))
        await self._push(EndWorkerFrame(reason="max_minutes"))
