"""The canned "one moment" while the model is slow to start its answer (``llm.filler_after_ms``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from loguru import logger
from pipecat.processors.frame_processor import FrameProcessor

# The filler never comes sooner than this after the model request (a prompt answer needs no filler).
FILLER_MIN_SECS = 0.3


def _no_speech() -> float | None:
    return None


class Filler:
    """No first token ``llm.filler_after_ms`` after the caller went quiet: a canned "잠시만요, …".

    Counted from the end of the caller's speech (what the caller waits through: endpointing
    and STT included), never sooner than ``FILLER_MIN_SECS`` after the request, so a model
    that answers promptly never gets a filler in front of its answer. Only spoken turns: a
    typed one (``chat``, ``eval``) or a keypad one has no silence to fill.

    Args:
        after_ms: ``llm.filler_after_ms`` (0: never).
        first_token_timeout_ms: ``llm.first_token_timeout_ms``: a filler due after it would follow the apology.
        speech_end: When the caller went quiet this turn (``time.time()``; None: not a spoken turn).
    """

    def __init__(self, *, after_ms: int, first_token_timeout_ms: int,
                 speech_end: Callable[[], float | None] = _no_speech) -> None:
        self._after = after_ms / 1000.0
        self._give_up = first_token_timeout_ms / 1000.0
        self._speech_end = speech_end
        self.played = False  # the filler was spoken for the latest request
        self._owner: FrameProcessor | None = None
        self._task: asyncio.Task | None = None

    def start(self, owner: FrameProcessor, say: Callable[[], Awaitable[None]]) -> None:
        """A model request went out: ``say`` the filler when it is due (a task of ``owner``), unless stopped."""
        self.played = False
        delay = self._delay()
        if delay is not None:
            self._owner = owner
            self._task = owner.create_task(self._say_after(delay, say), name="llm-filler")

    async def stop(self) -> None:
        """The model's first token came (or it failed): no filler from now on."""
        task, self._task = self._task, None
        if task is not None and not task.done() and self._owner is not None:
            await self._owner.cancel_task(task)

    def _delay(self) -> float | None:
        speech_end = self._speech_end()
        if self._after <= 0 or not speech_end:
            return None
        delay = max(FILLER_MIN_SECS, self._after - max(0.0, time.time() - speech_end))
        return delay if delay < self._give_up else None

    async def _say_after(self, delay: float, say: Callable[[], Awaitable[None]]) -> None:
        await asyncio.sleep(delay)
        logger.info("LLM: no first token {:.0f} ms after the request; speaking the filler", delay * 1000)
        self.played = True
        await say()
