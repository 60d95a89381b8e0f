"""An awaitable, or a blocking call in a thread, with a deadline: running late is a ``TimeoutError``, always.

Below Python 3.12 Pipecat swaps ``asyncio.wait_for`` for ``wait_for2``, which can report a call that
ends as its timeout fires as ``CancelledError``. A caller that catches ``Exception`` for a slow
database then lets it through: it killed a worker's start (its first lease write) and would turn a
Twilio webhook into a 500. Here a ``CancelledError`` that is not this task's own cancellation is the
timeout it is; this task being cancelled still propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(aw: Awaitable[T], secs: float) -> T:
    """``await aw``, cut after ``secs`` seconds with ``TimeoutError``."""
    try:
        return await asyncio.wait_for(aw, secs)
    except asyncio.CancelledError as e:
        if (task := asyncio.current_task()) is not None and task.cancelling():
            raise
        raise TimeoutError(f"over {secs:g} s") from e


async def in_thread(secs: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread (never on the event loop), cut after ``secs`` seconds."""
    return await within(asyncio.to_thread(fn, *args, **kwargs), secs)
