"""Issue 46: a drain hands a phone call over at its next quiet moment (``PhoneStream.hand_over``), in process.

The hand-over closes the stream (Twilio then asks the <Connect>'s action, which resumes the call on
another worker: tests/app/test_stream_ended.py), after recording the segment's end as a hand-over, not
as the bot's own end. It waits for the bot's sentence to finish and for the answer to a caller's turn;
a turn that never gets an answer (a cough) does not hold it. A call with nowhere to go (the QA page's)
still gets the goodbye, through the same drain (issue 45: ``AppContext.leave`` over this worker's one
``CallRegistry``). Two workers under a rolling restart: tests/call/test_line_faults.py.
"""

from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

import pytest
from pipecat.frames.frames import EndFrame, TTSSpeakFrame
from prometheus_client import CollectorRegistry

import bot.app.context as context
from bot.app.browser import BrowserCall
from bot.app.context import AppContext
from bot.app.host import HostedCall
from bot.app.phone import PhoneStream
from bot.line.callgate import CallGate
from bot.line.calls import CallKind, CallRegistry
from bot.store import segments
from bot.store.db import Store
from bot.telemetry.latency import TurnRecord

SID = "CA" + "6" * 32


def _call(store: Store, *, speaking_for: float = 0.0, turn: TurnRecord | None = None,
          calls: CallRegistry | None = None) -> HostedCall:
    """A phone call as the host holds it, with what ``hand_over`` reads: the serializer's clock, the recorder,
    the socket (``events``: when it was closed and cancelled)."""
    until = time.monotonic() + speaking_for
    events: list[tuple[str, float]] = []

    async def close(**_kw):
        events.append(("closed", time.monotonic()))

    async def cancel():
        events.append(("cancelled", time.monotonic()))
        if calls is not None:
            calls.end(SID)

    async def queue_frames(frames):
        events.append(("goodbye", time.monotonic()))
        if calls is not None:
            calls.end(SID)

    recorder = SimpleNamespace(bot_speaking=False, current=turn or TurnRecord(call_id=SID, index=1, route="llm"))
    session = SimpleNamespace(recorder=recorder, worker=SimpleNamespace(cancel=cancel, queue_frames=queue_frames),
                              end_reason=None)
    stream = PhoneStream(websocket=SimpleNamespace(close=close), start=SimpleNamespace(call_sid=SID))
    stream.serializer = SimpleNamespace(bot_audio_pending=lambda: time.monotonic() < until)
    call = HostedCall(_ctx(store), stream)
    call.session = session
    call.events = events
    return call


def _ctx(store: Store | None, *, handover: bool = True) -> SimpleNamespace:
    return SimpleNamespace(records=SimpleNamespace(store=store), canned=SimpleNamespace(shutdown_goodbye="안녕히 계세요"),
                           config=SimpleNamespace(server=SimpleNamespace(drain_handover=handover, drain_secs=0.0)))


def _store(tmp_path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    store.migrate()
    segments.open_segment(store, SID, 0, worker="w0", started_at=dt.datetime.now(dt.UTC))
    return store


async def test_the_hand_over_waits_for_the_bots_sentence_then_closes_the_stream_as_a_hand_over(tmp_path):
    store = _store(tmp_path)
    call = _call(store, speaking_for=0.4)
    t0 = time.monotonic()
    assert await call.hand_over()
    (closed, at), (cancelled, _) = call.events
    assert closed == "closed" and cancelled == "cancelled" and at - t0 >= 0.35  # not over the bot's sentence
    assert call.session.end_reason == segments.HANDOVER
    ended = segments.take_action(store, SID, 0)
    assert ended is not None and ended.end_reason == segments.HANDOVER and not ended.bot_ended  # a resume
    store.close()


async def test_a_caller_still_speaking_holds_the_hand_over_a_turn_left_unanswered_does_not(tmp_path):
    store = _store(tmp_path)
    speaking = TurnRecord(call_id=SID, index=2, route="pending")  # the caller's turn has not ended
    call = _call(store, turn=speaking)
    t0 = time.monotonic()
    await call.entry.hand_over(call.ctx, call, max_wait_secs=0.5)
    assert call.events[0][1] - t0 >= 0.45  # held to its limit
    cough = TurnRecord(call_id=SID, index=3, route="pending", turn_end=time.time() - 10)  # no answer came
    call = _call(store, turn=cough)
    t0 = time.monotonic()
    await call.entry.hand_over(call.ctx, call, max_wait_secs=5.0)
    assert call.events[0][1] - t0 < 0.3
    store.close()


@pytest.mark.parametrize("handover", [True, False])
async def test_one_drain_hands_the_phone_call_over_and_bids_the_qa_call_goodbye(tmp_path, monkeypatch, handover):
    # Seen before: the drain's goodbye and hand-over reached only phone calls (a registry of their own);
    # the QA page's calls waited for the lifespan's end.
    monkeypatch.setattr(context, "HANDOVER_LINGER_SECS", 0.0)
    store = _store(tmp_path)
    calls = CallRegistry()
    phone = _call(store, calls=calls)
    said: list[type] = []

    async def queue_frames(frames):
        said.extend(type(f) for f in frames)
        calls.end(qa.call_id)

    qa = HostedCall(phone.ctx, BrowserCall(connection=SimpleNamespace(pc_id="pc1"), connect_timeout_secs=None))
    qa.session = SimpleNamespace(end_reason=None, worker=SimpleNamespace(queue_frames=queue_frames))
    calls.start(phone)
    calls.start(qa)
    assert (calls.count(CallKind.PHONE), calls.count(CallKind.QA)) == (1, 1)
    ctx = _ctx(store, handover=handover)
    ctx.calls = calls
    ctx.gate = CallGate(calls, max_calls=4, token_ttl_secs=60, registry=CollectorRegistry())
    ctx.leave = lambda call: AppContext.leave(ctx, call)
    await AppContext.drain(ctx)
    assert not calls.active and ctx.gate.draining
    assert said == [TTSSpeakFrame, EndFrame] and qa.session.end_reason == "server_shutdown"
    if handover:  # the phone call's stream closed as a hand-over: the action resumes it elsewhere
        assert [e for e, _ in phone.events] == ["closed", "cancelled"]
        assert phone.session.end_reason == segments.HANDOVER
    else:  # no hand-over configured: the phone call hears the same goodbye
        assert [e for e, _ in phone.events] == ["goodbye"] and phone.session.end_reason == "server_shutdown"
    store.close()
