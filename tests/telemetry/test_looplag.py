"""A deliberately blocked event loop shows up as lag."""

import asyncio
import time

from bot.telemetry.looplag import LoopLagMonitor


async def test_blocking_the_loop_shows_up_as_lag():
    mon = LoopLagMonitor(interval=0.01)
    mon.start()
    await asyncio.sleep(0.2)
    quiet = mon.summary()
    time.sleep(0.3)  # a blocking call on the event loop
    await asyncio.sleep(0.1)
    blocked = mon.summary()
    await mon.stop()
    assert quiet["n"] > 5
    # The block shows up above whatever the scheduler gives a loaded machine.
    assert blocked["max_ms"] > 250 and blocked["max_ms"] - quiet["max_ms"] > 150
