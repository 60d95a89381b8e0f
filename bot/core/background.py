"""One loop task a server runs beside its calls (the SMS sender, the callback placer, the loop-lag probe)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundTask:
    """Started at most once; ``stop`` cancels it and waits until it has ended (no task left behind)."""

    def __init__(self, name: str):
        self.name = name
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``run()`` on the running loop, unless this task already runs."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(run(), name=self.name)

    async def stop(self) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
