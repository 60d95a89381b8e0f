"""Event-loop lag: how late a timer fires. A blocking call on the loop shows up here first."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from bot.core.background import BackgroundTask
from bot.telemetry.latency import percentile


class LoopLagMonitor:
    """Samples how late a ``sleep(interval)`` wakes up, in ms, over a sliding window."""

    def __init__(self, interval: float = 0.02, window: int = 3000):
        self.interval = interval
        self.samples: deque[float] = deque(maxlen=window)
        self.times: deque[float] = deque(maxlen=window)  # wall clock of each sample
        self._task = BackgroundTask("loop-lag")

    def start(self) -> None:
        self._task.start(self._run)

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.samples.append(max(0.0, (time.perf_counter() - t0 - self.interval) * 1000.0))
            self.times.append(time.time())

    def reset(self) -> None:
        self.samples.clear()
        self.times.clear()

    def summary(self, since: float | None = None) -> dict[str, float]:
        """p50/p99/max (ms) over the window, or over the samples taken after ``since`` (wall clock)."""
        xs = list(self.samples)
        if since is not None:
            xs = [x for x, t in zip(xs, list(self.times)) if t > since]
        return {"n": len(xs), "p50_ms": percentile(xs, 50), "p99_ms": percentile(xs, 99), "max_ms": max(xs, default=0.0)}
