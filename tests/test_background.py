"""The loop task a server runs beside its calls: started once, stopped for good."""

import asyncio

from bot.core.background import BackgroundTask


async def test_started_once_and_stop_waits_until_it_has_ended():
    ticks, ended = [], asyncio.Event()

    async def run():
        try:
            while True:
                ticks.append(1)
                await asyncio.sleep(0.01)
        finally:
            ended.set()

    task = BackgroundTask("probe")
    task.start(run)
    task.start(run)  # already running: no second loop
    await asyncio.sleep(0.05)
    assert task.running and sum(1 for t in asyncio.all_tasks() if t.get_name() == "probe") == 1
    await task.stop()
    assert ended.is_set() and not task.running
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "probe"]
    await task.stop()  # stopping twice is harmless
    task.start(run)  # and it can start again
    assert task.running
    await task.stop()
