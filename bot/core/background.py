"""One loop task a server runs beside its calls (the SMS sender, the callback placer, the loop-lag probe).

``BackgroundTask.start`` runs any coroutine; ``start_every`` runs one round of work again and again
(the outbox, the callback placer), a round that fails being logged and tried again the next time.
``backoff_secs`` is the wait before the next try of something that failed ``attempt`` times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from loguru import logger

from bot.core.deadline import within

Round = Callable[[], Coroutine[Any, Any, object]]


def backoff_secs(attempt: int, first: float, cap: float) -> float:
    """The wait after the ``attempt``-th failure (counted from 1): ``first``, doubling, at most ``cap``."""
    return min(first * 2 ** max(0, attempt - 1), cap)


class BackgroundTask:
    """Started at most once; ``stop`` cancels it and waits until it has ended (no task left behind)."""

    def __init__(self, name: str):
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``run()`` on the running loop, unless this task already runs."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(run(), name=self.name)

    def start_every(self, work: Round, every: float, *, label: str, wake: asyncio.Event | None = None) -> None:
        """Run ``work()`` now and then ``every`` seconds after each round ends, unless this task already runs.

        A round that raises is logged (``label: ErrorType: first line``) and the next round comes as
        usual: a database that is down now may be back then. Setting ``wake`` starts the next round at
        once; a wake during a round is forgotten, as that round already does the work.
        """
        self.start(lambda: _every(work, every, label, wake))

    async def stop(self) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass


async def _every(work: Round, every: float, label: str, wake: asyncio.Event | None) -> None:
    while True:
        try:
            await work()
        except Exception as e:  # noqa: BLE001 - a round that failed (the database down) comes again
            logger.error("{}: {}: {}", label, type(e).__name__, (str(e).splitlines() or [""])[0][:200])
        if wake is None:
            await asyncio.sleep(every)
            continue
        wake.clear()
        try:
            await within(wake.wait(), every)
        except TimeoutError:
            pass
