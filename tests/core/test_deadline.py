"""``bot.core.deadline``: running late is a TimeoutError whatever ``asyncio.wait_for`` reports; this task's own
cancellation still propagates; the blocking call runs off the event loop's thread."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from bot.core.deadline import in_thread, within


async def test_a_blocking_call_runs_in_another_thread_and_returns_its_result():
    total, thread = await in_thread(5, lambda a, b=0: (a + b, threading.get_ident()), 2, b=3)
    assert total == 5 and thread != threading.get_ident()


async def test_a_call_over_its_deadline_is_a_timeout_error():
    with pytest.raises(TimeoutError):
        await in_thread(0.05, time.sleep, 0.5)
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(5), 0.05)


async def test_a_timeout_reported_as_cancelled_error_is_a_timeout_error(monkeypatch):
    async def cut(aw, timeout):  # wait_for2's report of a call that ended as its timeout fired
        aw.close()
        raise asyncio.CancelledError

    monkeypatch.setattr(asyncio, "wait_for", cut)
    with pytest.raises(TimeoutError, match="over 2 s"):
        await in_thread(2, lambda: None)


async def test_cancelling_the_waiting_task_still_cancels_it():
    task = asyncio.create_task(within(asyncio.sleep(10), 5))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
