"""The loop task a server runs beside its calls: started once, stopped for good; rounds retried, backoff."""

import asyncio

from loguru import logger

from bot.core.background import BackgroundTask, backoff_secs


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


async def _until(condition, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_every_round_comes_again_after_a_failing_one_which_is_logged_by_its_label():
    rounds, lines = [], []

    async def work():
        rounds.append(1)
        if len(rounds) == 1:
            raise ConnectionError("database down\nsecond line")
        if len(rounds) == 2:
            raise RuntimeError()  # no message at all: still logged, still retried

    sink = logger.add(lines.append, format="{message}", level="ERROR")
    task = BackgroundTask("probe")
    try:
        task.start_every(work, 0.01, label="probe worker")
        task.start_every(work, 0.01, label="probe worker")  # already running: no second loop
        await _until(lambda: len(rounds) >= 4)
        assert sum(1 for t in asyncio.all_tasks() if t.get_name() == "probe") == 1
    finally:
        await task.stop()
        logger.remove(sink)
    assert [line.strip() for line in lines] == ["probe worker: ConnectionError: database down",
                                                "probe worker: RuntimeError:"]
    assert not task.running


async def test_every_waits_its_interval_between_rounds_unless_woken():
    rounds, wake = [], asyncio.Event()

    async def work():
        rounds.append(asyncio.get_running_loop().time())

    task = BackgroundTask("probe")
    task.start_every(work, 30.0, label="probe", wake=wake)
    try:
        await _until(lambda: len(rounds) == 1)  # the first round runs at once
        await asyncio.sleep(0.05)
        assert len(rounds) == 1  # then the interval (30 s) is waited
        wake.set()
        await _until(lambda: len(rounds) == 2)  # a wake starts the next round now
        await asyncio.sleep(0.05)
        assert len(rounds) == 2 and not wake.is_set()  # and is used up by it
    finally:
        await task.stop()


async def test_a_wake_during_a_round_is_forgotten():
    rounds, wake, release = [], asyncio.Event(), asyncio.Event()

    async def work():
        rounds.append(1)
        if len(rounds) == 1:
            wake.set()  # work arrives while this round runs: this round sees it
            await release.wait()

    task = BackgroundTask("probe")
    task.start_every(work, 30.0, label="probe", wake=wake)
    try:
        await _until(lambda: len(rounds) == 1)
        release.set()
        await asyncio.sleep(0.05)
        assert len(rounds) == 1
    finally:
        await task.stop()


def test_backoff_doubles_from_the_first_wait_up_to_its_cap():
    assert [backoff_secs(n, 30.0, 100.0) for n in (0, 1, 2, 3, 4)] == [30.0, 30.0, 60.0, 100.0, 100.0]
