"""A SIGTERM while ``serve`` loads stops the worker cleanly, even when its SystemExit is swallowed
(bot/app/serve.py ``StopWhileLoading``). CI caught a restarted worker that was stopped during its
startup collection: SQLAlchemy's weakref callback swallowed the exit, the worker went on to serve,
and its supervisor waited on it until it was killed."""

from __future__ import annotations

import gc
import signal
import sys
import weakref

import pytest
import uvicorn

from bot.app.serve import StopWhileLoading
from bot.line.callgate import DrainingServer


@pytest.fixture
def sigterm_handler():
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def _listener() -> DrainingServer:
    async def drain() -> None:
        return None

    return DrainingServer(uvicorn.Config(app=lambda *a: None, port=0), drain=drain)


class _Loaded:
    """Something loading made, with a weakref callback the startup collection runs (as SQLAlchemy's)."""


def test_a_stop_swallowed_by_a_collection_callback_still_stops_before_serving(sigterm_handler, monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    stop = StopWhileLoading()
    signal.signal(signal.SIGTERM, stop)

    loaded = _Loaded()
    loaded.cycle = loaded  # only a collection frees it
    ref = weakref.ref(loaded, lambda _ref: signal.raise_signal(signal.SIGTERM))  # the supervisor's stop lands here
    del loaded
    gc.collect()  # the callback's SystemExit is printed and dropped, as in the worker

    assert ref() is None
    assert [type(u.exc_value) for u in unraisable] == [SystemExit]
    assert stop.requested
    public = _listener()
    with pytest.raises(SystemExit) as stopped:
        stop.hand_over(public)
    assert stopped.value.code == 0


def test_after_the_hand_over_a_sigterm_drains_instead(sigterm_handler):
    stop = StopWhileLoading()
    signal.signal(signal.SIGTERM, stop)
    public = _listener()
    stop.hand_over(public)  # nothing came while loading: no exit

    signal.raise_signal(signal.SIGTERM)  # now the listener's: asks for the drain, stops nothing yet

    assert public._drain_requested and not public.should_exit
    assert not stop.requested
